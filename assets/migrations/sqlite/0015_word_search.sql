-- settle schema 15 (SQLite): the filter's bare words (manual: The filter) at ten million operations (manual: Retention and the archive).
-- A word is looked for in each exception's key, workflow, step, destination, state and error,
-- joined by spaces (a word holds none, so it is found in the joined text exactly where it is found
-- in one of them). This index keeps that text beside the queue's order: a word in no exception is
-- ruled out from the index alone instead of from a million rows of the table (10,000,000
-- operations, 1,000,000 exceptions: 1,546 -> 94 ms). The query repeats the expression word for
-- word (store::pages::EXCEPTION_TEXT), or the planner would not use it.
CREATE INDEX operations_exceptions_text
    ON operations (exception_since, id, LOWER(key || ' ' || workflow || ' ' || step || ' ' || destination || ' ' || state || ' ' || COALESCE(last_error, '')))
    WHERE exception_since IS NOT NULL;
