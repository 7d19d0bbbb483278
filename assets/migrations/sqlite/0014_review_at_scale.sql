-- settle schema 14 (SQLite): the review (manual: The review after a release) at ten million operations (manual: Retention and the archive).
-- The open exceptions grouped by workflow, destination and state read one narrow index instead
-- of every exception's row (at 1,000,000 exceptions: 3.8 s -> 0.28 s on this machine); the same
-- index answers the console's "N of M" for any mix of workflow, destination and state.
CREATE INDEX operations_exception_groups ON operations (workflow, destination, state, exception_since)
    WHERE exception_since IS NOT NULL;
-- Exceptions opened per day, kept as they open: the review reads a few rows per day instead of
-- grouping every span in its window (0.79 s at 1,000,000), and the counts outlive the spans.
CREATE TABLE review_opened (
    day         INTEGER NOT NULL,
    workflow    TEXT    NOT NULL,
    destination TEXT    NOT NULL,
    n           INTEGER NOT NULL,
    PRIMARY KEY (day, workflow, destination)
) WITHOUT ROWID;
INSERT INTO review_opened (day, workflow, destination, n)
SELECT opened_at / 86400000, workflow, destination, COUNT(*) FROM exception_spans
GROUP BY opened_at / 86400000, workflow, destination;
CREATE TRIGGER exception_spans_opened_per_day AFTER INSERT ON exception_spans BEGIN
    INSERT INTO review_opened (day, workflow, destination, n)
        VALUES (NEW.opened_at / 86400000, NEW.workflow, NEW.destination, 1)
        ON CONFLICT (day, workflow, destination) DO UPDATE SET n = n + 1;
END;
