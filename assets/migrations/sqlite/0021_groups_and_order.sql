-- settle schema 21 (manual: Owners and notifications): groups and messages that mean exactly what
-- they say.
--
-- An exception keeps its group's id (its workflow, destination, state and reason as a group names
-- it, hashed), so that `group:ID` lists exactly one group's items: `settle groups`, the console's
-- groups and every message name the same set, and the groups are counted from one narrow index in
-- its order. The ids of the exceptions already stored are filled in by settle itself right after
-- this (the reason is masked in Rust, so SQL alone cannot).
ALTER TABLE operations ADD COLUMN group_id TEXT;
DROP INDEX operations_exception_groups;
CREATE INDEX operations_exception_groups ON operations (workflow, destination, state, group_id, exception_since)
    WHERE exception_since IS NOT NULL;
-- Every message carries its place in the ledger's order, and a channel receives its messages in
-- that order; the messages already kept are numbered in the order they were made.
ALTER TABLE notifications ADD COLUMN seq INTEGER;
UPDATE notifications SET seq = s.r FROM
    (SELECT id AS mid, ROW_NUMBER() OVER (ORDER BY created_at, id) AS r FROM notifications) AS s
    WHERE notifications.id = s.mid;
CREATE INDEX notifications_order ON notifications (seq) WHERE status = 'pending';
ALTER TABLE notify_state ADD COLUMN next_seq INTEGER NOT NULL DEFAULT 0;
UPDATE notify_state SET next_seq = (SELECT COALESCE(MAX(seq), 0) FROM notifications) WHERE name = 'sender';
-- A pause told says who paused.
ALTER TABLE notify_inbox ADD COLUMN actor TEXT;
