-- settle schema 1 (SQLite). Timestamps are UTC milliseconds since the epoch.
CREATE TABLE operations (
    id                      INTEGER PRIMARY KEY,
    key                     TEXT    NOT NULL UNIQUE,
    workflow                TEXT    NOT NULL,
    step                    TEXT    NOT NULL,
    destination             TEXT    NOT NULL,
    action                  TEXT    NOT NULL,
    payload                 TEXT    NOT NULL,
    fingerprint             TEXT    NOT NULL,
    conflicting_payload     TEXT,
    conflicting_fingerprint TEXT,
    state                   TEXT    NOT NULL CHECK (state IN ('pending','in_flight','retry_wait','succeeded',
                                                   'rejected','unknown','failed','conflict','closed')),
    reason                  TEXT,
    attempts                INTEGER NOT NULL DEFAULT 0,
    budget_start            INTEGER NOT NULL DEFAULT 0,
    ambiguous               INTEGER NOT NULL DEFAULT 0,
    first_sent_at           INTEGER,
    attempt_started_at      INTEGER,
    next_attempt_at         INTEGER,
    reference               TEXT,
    last_error              TEXT,
    created_at              INTEGER NOT NULL,
    updated_at              INTEGER NOT NULL,
    exception_since         INTEGER,
    claimed_by              TEXT,
    claimed_at              INTEGER,
    claim_expires_at        INTEGER,
    resolution              TEXT,
    superseded_by           TEXT,
    version                 INTEGER NOT NULL DEFAULT 0
);
-- The exception queue, oldest first (keyset pagination on (exception_since, id)).
CREATE INDEX operations_exceptions ON operations (exception_since, id) WHERE exception_since IS NOT NULL;
CREATE INDEX operations_created ON operations (created_at, id);
CREATE INDEX operations_state ON operations (state, created_at, id);
CREATE INDEX operations_due ON operations (next_attempt_at) WHERE next_attempt_at IS NOT NULL;
CREATE INDEX operations_claimed ON operations (claimed_by, created_at, id) WHERE claimed_by IS NOT NULL;
CREATE INDEX operations_workflow_exceptions ON operations (workflow, exception_since) WHERE exception_since IS NOT NULL;

CREATE TABLE attempts (
    operation_id INTEGER NOT NULL REFERENCES operations (id),
    n            INTEGER NOT NULL,
    actor        TEXT    NOT NULL,
    started_at   INTEGER NOT NULL,
    finished_at  INTEGER,
    outcome      TEXT CHECK (outcome IN ('accepted','rejected','transient','unknown')),
    http_status  INTEGER,
    reference    TEXT,
    error        TEXT,
    PRIMARY KEY (operation_id, n)
);

-- The audit: append-only.
CREATE TABLE events (
    id           INTEGER PRIMARY KEY AUTOINCREMENT,
    operation_id INTEGER REFERENCES operations (id),
    workflow     TEXT,
    at           INTEGER NOT NULL,
    actor        TEXT    NOT NULL,
    kind         TEXT    NOT NULL,
    from_state   TEXT,
    to_state     TEXT,
    detail       TEXT    NOT NULL
);
CREATE INDEX events_operation ON events (operation_id, id);
CREATE TRIGGER events_no_update BEFORE UPDATE ON events
BEGIN SELECT RAISE(ABORT, 'events are append-only'); END;
CREATE TRIGGER events_no_delete BEFORE DELETE ON events
BEGIN SELECT RAISE(ABORT, 'events are append-only'); END;

CREATE TABLE workflows (
    name          TEXT PRIMARY KEY,
    paused        INTEGER NOT NULL DEFAULT 0,
    paused_reason TEXT,
    paused_by     TEXT,
    paused_at     INTEGER,
    version       INTEGER NOT NULL DEFAULT 0
);
