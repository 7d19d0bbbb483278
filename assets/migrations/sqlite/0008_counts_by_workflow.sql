-- settle schema 8 (SQLite): the state counters of schema 7 kept per workflow as well, so that
-- the metrics' exceptions by workflow and state (manual: Running settle for a team) are read from a few rows, never
-- counted from the operations. Readers of the counts by state sum over the workflows.
DROP TRIGGER operations_counted_insert;
DROP TRIGGER operations_counted_update;
DROP TRIGGER operations_counted_delete;
DROP TABLE state_counts;
CREATE TABLE state_counts (
    workflow TEXT    NOT NULL,
    state    TEXT    NOT NULL,
    n        INTEGER NOT NULL,
    PRIMARY KEY (workflow, state)
) WITHOUT ROWID;
INSERT INTO state_counts (workflow, state, n)
    SELECT workflow, state, COUNT(*) FROM operations GROUP BY workflow, state;
CREATE TRIGGER operations_counted_insert AFTER INSERT ON operations BEGIN
    INSERT INTO state_counts (workflow, state, n) VALUES (NEW.workflow, NEW.state, 1)
        ON CONFLICT (workflow, state) DO UPDATE SET n = n + 1;
END;
CREATE TRIGGER operations_counted_update AFTER UPDATE OF state, workflow ON operations
    WHEN OLD.state <> NEW.state OR OLD.workflow <> NEW.workflow BEGIN
    UPDATE state_counts SET n = n - 1 WHERE workflow = OLD.workflow AND state = OLD.state;
    INSERT INTO state_counts (workflow, state, n) VALUES (NEW.workflow, NEW.state, 1)
        ON CONFLICT (workflow, state) DO UPDATE SET n = n + 1;
END;
CREATE TRIGGER operations_counted_delete AFTER DELETE ON operations BEGIN
    UPDATE state_counts SET n = n - 1 WHERE workflow = OLD.workflow AND state = OLD.state;
END;
