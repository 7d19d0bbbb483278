-- settle schema 6: the Activity view (manual: The console) shows people's actions newest first, without
-- automation's (the dispatcher's attempts, workflows' recordings, the sweep) unless asked. This
-- partial index holds only people's events, so that the view stays one index walk however busy
-- the dispatcher is. Its condition is `filter::PEOPLE_ONLY`, word for word (the query must
-- repeat it for the planner to use the index).
CREATE INDEX events_people ON events (id) WHERE kind NOT IN ('recorded', 'attempt_started', 'attempt', 'looked_up', 'conflict', 'swept', 'auto_paused') AND actor NOT IN ('settle', 'dispatcher');
