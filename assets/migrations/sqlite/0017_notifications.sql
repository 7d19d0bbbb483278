-- settle schema 17 (manual: Owners and notifications): telling the owners when automatic
-- recovery stops.
--   notify_inbox: what happened that someone may be told of (an exception opened by automation,
--     a pause, a resume), written in the transaction that made it; the sender folds it away.
--   notify_groups: each group of exceptions (team, workflow, destination, state, masked reason):
--     how many arrived since it was last told, since when, and when it was last told.
--   notifications: each message, recorded before it is sent, with its tries and answers.
--   notify_state: one row: the sender's lease (one sender at a time across processes) and how far
--     the aging of exceptions has been told.
CREATE TABLE notify_inbox (
    id           INTEGER PRIMARY KEY AUTOINCREMENT,
    at           INTEGER NOT NULL,
    kind         TEXT NOT NULL,
    operation_id INTEGER,
    workflow     TEXT,
    destination  TEXT,
    reason       TEXT
);
CREATE TABLE notify_groups (
    group_key     TEXT PRIMARY KEY,
    pending       INTEGER NOT NULL,
    pending_since INTEGER,
    keys          TEXT NOT NULL,
    oldest_at     INTEGER,
    told_at       INTEGER
);
CREATE TABLE notifications (
    id          TEXT PRIMARY KEY,
    created_at  INTEGER NOT NULL,
    channel     TEXT NOT NULL,
    kind        TEXT NOT NULL,
    level       TEXT NOT NULL,
    team        TEXT,
    body        TEXT NOT NULL,
    status      TEXT NOT NULL,
    tries       INTEGER NOT NULL,
    next_try_at INTEGER NOT NULL,
    sent_at     INTEGER,
    answers     TEXT NOT NULL
);
CREATE INDEX notifications_due ON notifications (status, next_try_at);
CREATE INDEX notifications_created ON notifications (created_at);
CREATE TABLE notify_state (
    name          TEXT PRIMARY KEY,
    holder        TEXT,
    until_at      INTEGER,
    warn_mark     INTEGER,
    critical_mark INTEGER
);
INSERT INTO notify_state (name) VALUES ('sender');
