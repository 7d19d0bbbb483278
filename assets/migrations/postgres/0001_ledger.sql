-- settle schema 1 (PostgreSQL). Timestamps are UTC milliseconds since the epoch, as on SQLite,
-- so that both backends run the very same queries.
CREATE TABLE operations (
    id                      BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    key                     TEXT   NOT NULL UNIQUE,
    workflow                TEXT   NOT NULL,
    step                    TEXT   NOT NULL,
    destination             TEXT   NOT NULL,
    action                  TEXT   NOT NULL,
    payload                 TEXT   NOT NULL,
    fingerprint             TEXT   NOT NULL,
    conflicting_payload     TEXT,
    conflicting_fingerprint TEXT,
    state                   TEXT   NOT NULL CHECK (state IN ('pending','in_flight','retry_wait','succeeded',
                                                  'rejected','unknown','failed','conflict','closed')),
    reason                  TEXT,
    attempts                BIGINT NOT NULL DEFAULT 0,
    budget_start            BIGINT NOT NULL DEFAULT 0,
    ambiguous               BIGINT NOT NULL DEFAULT 0,
    first_sent_at           BIGINT,
    attempt_started_at      BIGINT,
    next_attempt_at         BIGINT,
    reference               TEXT,
    last_error              TEXT,
    created_at              BIGINT NOT NULL,
    updated_at              BIGINT NOT NULL,
    exception_since         BIGINT,
    claimed_by              TEXT,
    claimed_at              BIGINT,
    claim_expires_at        BIGINT,
    resolution              TEXT,
    superseded_by           TEXT,
    version                 BIGINT NOT NULL DEFAULT 0
);
CREATE INDEX operations_exceptions ON operations (exception_since, id) WHERE exception_since IS NOT NULL;
CREATE INDEX operations_created ON operations (created_at, id);
CREATE INDEX operations_state ON operations (state, created_at, id);
CREATE INDEX operations_due ON operations (next_attempt_at) WHERE next_attempt_at IS NOT NULL;
CREATE INDEX operations_claimed ON operations (claimed_by, created_at, id) WHERE claimed_by IS NOT NULL;
CREATE INDEX operations_workflow_exceptions ON operations (workflow, exception_since) WHERE exception_since IS NOT NULL;

CREATE TABLE attempts (
    operation_id BIGINT NOT NULL REFERENCES operations (id),
    n            BIGINT NOT NULL,
    actor        TEXT   NOT NULL,
    started_at   BIGINT NOT NULL,
    finished_at  BIGINT,
    outcome      TEXT CHECK (outcome IN ('accepted','rejected','transient','unknown')),
    http_status  BIGINT,
    reference    TEXT,
    error        TEXT,
    PRIMARY KEY (operation_id, n)
);

CREATE TABLE events (
    id           BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    operation_id BIGINT REFERENCES operations (id),
    workflow     TEXT,
    at           BIGINT NOT NULL,
    actor        TEXT   NOT NULL,
    kind         TEXT   NOT NULL,
    from_state   TEXT,
    to_state     TEXT,
    detail       TEXT   NOT NULL
);
CREATE INDEX events_operation ON events (operation_id, id);
CREATE FUNCTION settle_events_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'events are append-only';
END
$$;
CREATE TRIGGER events_no_update_delete BEFORE UPDATE OR DELETE ON events
    FOR EACH ROW EXECUTE FUNCTION settle_events_append_only();
CREATE TRIGGER events_no_truncate BEFORE TRUNCATE ON events
    FOR EACH STATEMENT EXECUTE FUNCTION settle_events_append_only();

CREATE TABLE workflows (
    name          TEXT PRIMARY KEY,
    paused        BIGINT NOT NULL DEFAULT 0,
    paused_reason TEXT,
    paused_by     TEXT,
    paused_at     BIGINT,
    version       BIGINT NOT NULL DEFAULT 0
);
