-- settle schema 7 (PostgreSQL): how many operations are in each state, kept by statement
-- triggers in the transaction that changes them, so that the console's tab counts, its header
-- and `stats` never count a million rows (manual: The console: counts never more than a few seconds old).
-- Writers only append a row of differences per statement (never update a shared row: concurrent
-- dispatchers would queue on it); readers sum them, and the dispatcher's heartbeat folds them
-- into a row per state.
CREATE TABLE state_counts (
    state TEXT   NOT NULL,
    n     BIGINT NOT NULL
);
INSERT INTO state_counts (state, n) SELECT state, COUNT(*) FROM operations GROUP BY state;
CREATE FUNCTION settle_count_states() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        INSERT INTO state_counts (state, n) SELECT state, COUNT(*) FROM new_rows GROUP BY state;
    ELSIF TG_OP = 'UPDATE' THEN
        INSERT INTO state_counts (state, n)
            SELECT state, SUM(d) FROM (
                SELECT state, 1 AS d FROM new_rows UNION ALL SELECT state, -1 AS d FROM old_rows
            ) changed GROUP BY state HAVING SUM(d) <> 0;
    ELSE
        INSERT INTO state_counts (state, n) SELECT state, -COUNT(*) FROM old_rows GROUP BY state;
    END IF;
    RETURN NULL;
END
$$;
CREATE TRIGGER operations_counted_insert AFTER INSERT ON operations
    REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION settle_count_states();
CREATE TRIGGER operations_counted_update AFTER UPDATE ON operations
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION settle_count_states();
CREATE TRIGGER operations_counted_delete AFTER DELETE ON operations
    REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION settle_count_states();
