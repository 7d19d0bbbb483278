-- settle schema 4 (PostgreSQL): the per-destination retry budget (manual: Automatic retries), shared by every dispatcher.
CREATE TABLE retry_budgets (
    destination TEXT PRIMARY KEY,
    tokens      BIGINT NOT NULL,
    refilled_at BIGINT NOT NULL,
    version     BIGINT NOT NULL
);

-- The dispatcher's due query walks this in order and stops at its limit (the older index made
-- it read and sort every operation of the destination).
DROP INDEX operations_due;
CREATE INDEX operations_due ON operations (destination, next_attempt_at, id) WHERE next_attempt_at IS NOT NULL;
