-- settle schema 4 (SQLite): the per-destination retry budget (manual: Automatic retries), shared by every dispatcher.
CREATE TABLE retry_budgets (
    destination TEXT PRIMARY KEY,
    tokens      INTEGER NOT NULL,
    refilled_at INTEGER NOT NULL,
    version     INTEGER NOT NULL
);

-- The dispatcher's due query walks this in order and stops at its limit (the older index made
-- it read and sort every operation of the destination).
DROP INDEX operations_due;
CREATE INDEX operations_due ON operations (destination, next_attempt_at, id) WHERE next_attempt_at IS NOT NULL;
