-- settle schema 14 (PostgreSQL): the review (manual: The review after a release) at ten million operations (manual: Retention and the archive).
-- The open exceptions grouped by workflow, destination and state read one narrow index instead
-- of every exception's row; the same index answers the console's "N of M" for any mix of
-- workflow, destination and state.
CREATE INDEX operations_exception_groups ON operations (workflow, destination, state, exception_since)
    WHERE exception_since IS NOT NULL;
-- Exceptions opened per day, kept as they open: the review reads a few rows per day instead of
-- grouping every span in its window, and the counts outlive the spans. As with state_counts,
-- each statement appends its differences (no row that every writer updates); a dispatcher folds
-- them now and then (Store::refresh_stale_statistics); readers sum.
CREATE TABLE review_opened (
    day         BIGINT NOT NULL,
    workflow    TEXT   NOT NULL,
    destination TEXT   NOT NULL,
    n           BIGINT NOT NULL
);
CREATE INDEX review_opened_day ON review_opened (day);
INSERT INTO review_opened (day, workflow, destination, n)
SELECT opened_at / 86400000, workflow, destination, COUNT(*) FROM exception_spans
GROUP BY opened_at / 86400000, workflow, destination;

-- the trigger of schema 10, each span it opens counted on its day
CREATE OR REPLACE FUNCTION settle_operations_changed() RETURNS trigger LANGUAGE plpgsql
    SET enable_hashjoin = on SET enable_mergejoin = on AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        INSERT INTO state_counts (workflow, state, n)
            SELECT workflow, state, COUNT(*) FROM new_rows GROUP BY workflow, state;
        WITH opened AS (
            INSERT INTO exception_spans (operation_id, workflow, destination, opened_at, opened_as)
                SELECT id, workflow, destination, COALESCE(exception_since, updated_at), state FROM new_rows
                WHERE state IN ('rejected', 'unknown', 'failed', 'conflict')
                ON CONFLICT (operation_id) WHERE resolved_at IS NULL DO NOTHING
                RETURNING opened_at, workflow, destination
        )
        INSERT INTO review_opened (day, workflow, destination, n)
            SELECT opened_at / 86400000, workflow, destination, COUNT(*) FROM opened
            GROUP BY opened_at / 86400000, workflow, destination;
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
                RETURNING opened_at, workflow, destination
        ), per_day AS (
            INSERT INTO review_opened (day, workflow, destination, n)
                SELECT opened_at / 86400000, workflow, destination, COUNT(*) FROM opened
                GROUP BY opened_at / 86400000, workflow, destination
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
