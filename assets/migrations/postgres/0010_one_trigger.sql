-- settle schema 10 (PostgreSQL): the state counters (schema 8) and the exception spans (schema 9)
-- kept by one statement trigger instead of two, reading the statement's changed rows once, with
-- its own join planning. A dispatcher's round turns hash joins off for its lookups by key, and so
-- the span trigger joined the round's old and new rows by nested loops: at 256 attempts in
-- flight it took 40 of the 120 us an operation cost a round's write (measured in the round:
-- 16.9 ms of a 27 ms round of 139 operations; 8.5 ms for 106 without it, 9.1 ms for 118 with
-- this trigger). Only rows whose state changed count, and only those entering or leaving the
-- exception states touch a span. And one index fewer for every update to write:
-- operations_workflow_exceptions (workflow, exception_since) is the leading part of
-- operations_exceptions_by_workflow.
DROP TRIGGER operations_counted_insert ON operations;
DROP TRIGGER operations_counted_update ON operations;
DROP TRIGGER operations_counted_delete ON operations;
DROP TRIGGER operations_spans_insert ON operations;
DROP TRIGGER operations_spans_update ON operations;
DROP FUNCTION settle_count_states();
DROP FUNCTION settle_exception_spans();
DROP INDEX operations_workflow_exceptions;

-- Its own join planning: a round turns off hash joins for its lookups by key (they would
-- read whole tables), which would make the join of the statement's old and new rows quadratic.
CREATE FUNCTION settle_operations_changed() RETURNS trigger LANGUAGE plpgsql
    SET enable_hashjoin = on SET enable_mergejoin = on AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        INSERT INTO state_counts (workflow, state, n)
            SELECT workflow, state, COUNT(*) FROM new_rows GROUP BY workflow, state;
        INSERT INTO exception_spans (operation_id, workflow, destination, opened_at, opened_as)
            SELECT id, workflow, destination, COALESCE(exception_since, updated_at), state FROM new_rows
            WHERE state IN ('rejected', 'unknown', 'failed', 'conflict')
            ON CONFLICT (operation_id) WHERE resolved_at IS NULL DO NOTHING;
    ELSIF TG_OP = 'DELETE' THEN
        INSERT INTO state_counts (workflow, state, n)
            SELECT workflow, state, -COUNT(*) FROM old_rows GROUP BY workflow, state;
    ELSE
        WITH changed AS MATERIALIZED (
            SELECT n.id, n.workflow, n.destination, n.state AS to_state, o.state AS from_state,
                   COALESCE(n.exception_since, n.updated_at) AS opened_at, n.updated_at,
                   n.resolution
              FROM new_rows n JOIN old_rows o ON o.id = n.id
             WHERE n.state <> o.state
        ), counted AS (
            INSERT INTO state_counts (workflow, state, n)
                SELECT workflow, state, SUM(d) FROM (
                    SELECT workflow, to_state AS state, 1 AS d FROM changed
                    UNION ALL SELECT workflow, from_state, -1 FROM changed
                ) moves GROUP BY workflow, state HAVING SUM(d) <> 0
        ), opened AS (
            INSERT INTO exception_spans (operation_id, workflow, destination, opened_at, opened_as)
                SELECT id, workflow, destination, opened_at, to_state FROM changed
                 WHERE to_state IN ('rejected', 'unknown', 'failed', 'conflict')
                   AND from_state NOT IN ('rejected', 'unknown', 'failed', 'conflict')
                ON CONFLICT (operation_id) WHERE resolved_at IS NULL DO NOTHING
        )
        UPDATE exception_spans s
           SET resolved_at = c.updated_at, resolved_from = c.from_state, resolved_as = c.to_state,
               resolution = c.resolution
          FROM changed c
         WHERE s.operation_id = c.id AND s.resolved_at IS NULL
           AND c.to_state IN ('succeeded', 'closed');
    END IF;
    RETURN NULL;
END
$$;
CREATE TRIGGER operations_changed_insert AFTER INSERT ON operations
    REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION settle_operations_changed();
CREATE TRIGGER operations_changed_update AFTER UPDATE ON operations
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION settle_operations_changed();
CREATE TRIGGER operations_changed_delete AFTER DELETE ON operations
    REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION settle_operations_changed();
