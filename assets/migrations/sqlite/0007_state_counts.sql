-- settle schema 7 (SQLite): how many operations are in each state, kept by triggers in the
-- transaction that changes them, so that the console's tab counts, its header and `stats` never
-- count a million rows (manual: The console: counts never more than a few seconds old). SQLite has one
-- writer at a time, so a row per state updated in place costs no contention.
CREATE TABLE state_counts (
    state TEXT PRIMARY KEY,
    n     INTEGER NOT NULL
);
INSERT INTO state_counts (state, n)
    SELECT s.state, (SELECT COUNT(*) FROM operations o WHERE o.state = s.state)
    FROM (SELECT 'pending' AS state UNION ALL SELECT 'in_flight' UNION ALL SELECT 'retry_wait'
          UNION ALL SELECT 'succeeded' UNION ALL SELECT 'rejected' UNION ALL SELECT 'unknown'
          UNION ALL SELECT 'failed' UNION ALL SELECT 'conflict' UNION ALL SELECT 'closed') s;
CREATE TRIGGER operations_counted_insert AFTER INSERT ON operations BEGIN
    UPDATE state_counts SET n = n + 1 WHERE state = NEW.state;
END;
CREATE TRIGGER operations_counted_update AFTER UPDATE OF state ON operations
    WHEN OLD.state <> NEW.state BEGIN
    UPDATE state_counts SET n = n - 1 WHERE state = OLD.state;
    UPDATE state_counts SET n = n + 1 WHERE state = NEW.state;
END;
CREATE TRIGGER operations_counted_delete AFTER DELETE ON operations BEGIN
    UPDATE state_counts SET n = n - 1 WHERE state = OLD.state;
END;
