-- settle schema 23 (manual: Taking an action back): every action a person takes has an id, on
-- each event it wrote (a bulk action's items share it), with what taking it back restores: the
-- item's state, claim, reference, resolution and schedule before it, and the version it left
-- (JSON). An undo's own events carry the id of the action they took back, and nothing to restore.
ALTER TABLE events ADD COLUMN action TEXT;
ALTER TABLE events ADD COLUMN restore TEXT;
CREATE INDEX events_by_action ON events (action) WHERE action IS NOT NULL;
CREATE INDEX events_actions_by_actor ON events (actor, id) WHERE action IS NOT NULL;
