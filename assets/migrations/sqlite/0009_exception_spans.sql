-- settle schema 9 (SQLite): each exception's span, from when its operation entered an exception
-- state (its exception_since) to when it reached succeeded or closed, kept by triggers in the
-- transaction of the change, so that the review (manual: The review after a release: opened and resolved per day, time to
-- resolve, duplicates prevented and cleaned up) reads a range of an index, never the history.
-- An operation has at most one open span: a retry that leaves the exception states and fails
-- again stays in the same span, resolved when the operation finally succeeds or is closed.
CREATE TABLE exception_spans (
    id            INTEGER PRIMARY KEY,
    operation_id  INTEGER NOT NULL,
    workflow      TEXT    NOT NULL,
    destination   TEXT    NOT NULL,
    opened_at     INTEGER NOT NULL,
    opened_as     TEXT    NOT NULL,
    resolved_at   INTEGER,
    resolved_from TEXT,
    resolved_as   TEXT,
    resolution    TEXT
);
CREATE UNIQUE INDEX exception_spans_open ON exception_spans (operation_id) WHERE resolved_at IS NULL;
CREATE INDEX exception_spans_opened ON exception_spans (opened_at);
CREATE INDEX exception_spans_resolved ON exception_spans (resolved_at) WHERE resolved_at IS NOT NULL;
-- the review's rare events: conflicts and automatic pauses, by time
CREATE INDEX events_review ON events (at) WHERE kind IN ('conflict', 'auto_paused');

-- the history so far: each resolution, with the first opening since the resolution before it
INSERT INTO exception_spans (operation_id, workflow, destination, opened_at, opened_as,
                             resolved_at, resolved_from, resolved_as, resolution)
SELECT r.operation_id, o.workflow, o.destination, op.at, op.to_state,
       r.at, r.from_state, r.to_state, CASE WHEN r.to_state = 'closed' THEN o.resolution END
FROM events r
JOIN operations o ON o.id = r.operation_id
JOIN events op ON op.id = (
    SELECT MIN(e.id) FROM events e
    WHERE e.operation_id = r.operation_id AND e.id < r.id
      AND e.to_state IN ('rejected', 'unknown', 'failed', 'conflict')
      AND (e.from_state IS NULL OR e.from_state NOT IN ('rejected', 'unknown', 'failed', 'conflict'))
      AND NOT EXISTS (
          SELECT 1 FROM events p
          WHERE p.operation_id = r.operation_id AND p.id > e.id AND p.id < r.id
            AND p.to_state IN ('succeeded', 'closed') AND p.from_state <> p.to_state))
WHERE r.to_state IN ('succeeded', 'closed') AND r.from_state IS NOT NULL AND r.from_state <> r.to_state;
-- and the exceptions open now
INSERT INTO exception_spans (operation_id, workflow, destination, opened_at, opened_as)
SELECT id, workflow, destination, COALESCE(exception_since, updated_at), state FROM operations
WHERE state IN ('rejected', 'unknown', 'failed', 'conflict');

CREATE TRIGGER operations_span_insert AFTER INSERT ON operations
    WHEN NEW.state IN ('rejected', 'unknown', 'failed', 'conflict') BEGIN
    INSERT OR IGNORE INTO exception_spans (operation_id, workflow, destination, opened_at, opened_as)
        VALUES (NEW.id, NEW.workflow, NEW.destination, COALESCE(NEW.exception_since, NEW.updated_at), NEW.state);
END;
CREATE TRIGGER operations_span_open AFTER UPDATE OF state ON operations
    WHEN NEW.state IN ('rejected', 'unknown', 'failed', 'conflict')
     AND OLD.state NOT IN ('rejected', 'unknown', 'failed', 'conflict') BEGIN
    INSERT OR IGNORE INTO exception_spans (operation_id, workflow, destination, opened_at, opened_as)
        VALUES (NEW.id, NEW.workflow, NEW.destination, COALESCE(NEW.exception_since, NEW.updated_at), NEW.state);
END;
CREATE TRIGGER operations_span_close AFTER UPDATE OF state ON operations
    WHEN NEW.state IN ('succeeded', 'closed') AND OLD.state <> NEW.state BEGIN
    UPDATE exception_spans
       SET resolved_at = NEW.updated_at, resolved_from = OLD.state, resolved_as = NEW.state,
           resolution = NEW.resolution
     WHERE operation_id = NEW.id AND resolved_at IS NULL;
END;
