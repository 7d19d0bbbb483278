-- settle schema 20 (manual: Running settle for a team): a token's rate is one budget across every
-- settle process on the ledger. Each process takes a few requests at a time from its token's
-- shared bucket: the millionths of a request left, the last taken, and when (the database's clock,
-- in ms) they were last counted; the bucket refills at the token's rate up to its burst.
CREATE TABLE rate_buckets (
    token TEXT PRIMARY KEY,
    tokens BIGINT NOT NULL,
    granted BIGINT NOT NULL DEFAULT 0,
    at BIGINT NOT NULL
);
