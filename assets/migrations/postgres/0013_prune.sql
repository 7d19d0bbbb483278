-- settle schema 13 (manual: Retention and the archive): pruning.
--   pruned_keys: what a pruned operation's key answers with until its horizon (its fingerprint,
--     terminal state, reference and names): a repeat of the key answers as for the live operation.
--   prune_gate: events stay append-only, except inside a prune's transaction, which holds a row
--     here while it deletes a pruned operation's events (and removes it before it commits, so
--     no other transaction ever sees it).
CREATE TABLE pruned_keys (
    key           TEXT    PRIMARY KEY,
    fingerprint   TEXT    NOT NULL,
    state         TEXT    NOT NULL,
    reference     TEXT,
    workflow      TEXT    NOT NULL,
    step          TEXT    NOT NULL,
    destination   TEXT    NOT NULL,
    action        TEXT    NOT NULL,
    attempts      BIGINT  NOT NULL,
    resolution    TEXT,
    superseded_by TEXT,
    run           TEXT,
    created_at    BIGINT  NOT NULL,
    terminal_at   BIGINT  NOT NULL,
    horizon       BIGINT  NOT NULL
);
CREATE INDEX pruned_keys_horizon ON pruned_keys (horizon);
CREATE TABLE prune_gate (id BIGINT PRIMARY KEY);
CREATE OR REPLACE FUNCTION settle_events_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'DELETE' AND EXISTS (SELECT 1 FROM prune_gate) THEN
        RETURN OLD;
    END IF;
    RAISE EXCEPTION 'events are append-only';
END
$$;
