-- settle schema 13 (manual: Retention and the archive): pruning.
--   pruned_keys: what a pruned operation's key answers with until its horizon (its fingerprint,
--     terminal state, reference and names): a repeat of the key answers as for the live operation.
--   prune_gate: events stay append-only, except inside a prune's transaction, which holds a row
--     here while it deletes a pruned operation's events (and removes it before it commits).
CREATE TABLE pruned_keys (
    key           TEXT    PRIMARY KEY,
    fingerprint   TEXT    NOT NULL,
    state         TEXT    NOT NULL,
    reference     TEXT,
    workflow      TEXT    NOT NULL,
    step          TEXT    NOT NULL,
    destination   TEXT    NOT NULL,
    action        TEXT    NOT NULL,
    attempts      INTEGER NOT NULL,
    resolution    TEXT,
    superseded_by TEXT,
    run           TEXT,
    created_at    INTEGER NOT NULL,
    terminal_at   INTEGER NOT NULL,
    horizon       INTEGER NOT NULL
) WITHOUT ROWID;
CREATE INDEX pruned_keys_horizon ON pruned_keys (horizon);
CREATE TABLE prune_gate (id INTEGER PRIMARY KEY);
DROP TRIGGER events_no_delete;
CREATE TRIGGER events_no_delete BEFORE DELETE ON events
    WHEN NOT EXISTS (SELECT 1 FROM prune_gate)
BEGIN SELECT RAISE(ABORT, 'events are append-only'); END;
