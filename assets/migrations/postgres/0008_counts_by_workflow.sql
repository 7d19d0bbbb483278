-- settle schema 8 (PostgreSQL): the state counters of schema 7 kept per workflow as well, so
-- that the metrics' exceptions by workflow and state (manual: Running settle for a team) are read from a few rows, never
-- counted from the operations. As before, writers append a row of differences per statement and
-- the dispatcher's heartbeat folds them; readers of the counts by state sum over the workflows.
DROP TRIGGER operations_counted_insert ON operations;
DROP TRIGGER operations_counted_update ON operations;
DROP TRIGGER operations_counted_delete ON operations;
DROP FUNCTION settle_count_states();
DROP TABLE state_counts;
CREATE TABLE state_counts (
    workflow TEXT   NOT NULL,
    state    TEXT   NOT NULL,
    n        BIGINT NOT NULL
);
INSERT INTO state_counts (workflow, state, n)
    SELECT workflow, state, COUNT(*) FROM operations GROUP BY workflow, state;
CREATE FUNCTION settle_count_states() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        INSERT INTO state_counts (workflow, state, n)
            SELECT workflow, state, COUNT(*) FROM new_rows GROUP BY workflow, state;
    ELSIF TG_OP = 'UPDATE' THEN
        INSERT INTO state_counts (workflow, state, n)
            SELECT workflow, state, SUM(d) FROM (
                SELECT workflow, state, 1 AS d FROM new_rows
                UNION ALL SELECT workflow, state, -1 AS d FROM old_rows
            ) changed GROUP BY workflow, state HAVING SUM(d) <> 0;
    ELSE
        INSERT INTO state_counts (workflow, state, n)
            SELECT workflow, state, -COUNT(*) FROM old_rows GROUP BY workflow, state;
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
