-- settle schema 19 (manual: Correcting a request): a correction is a new operation that names the
-- one it corrects; the original is closed superseded by it. `corrects` is written once, when the
-- correction is made, and read for lineage (`show`), for the old key's answers along the chain, and
-- for the review's count of corrections.
ALTER TABLE operations ADD COLUMN corrects TEXT;
-- The review counts corrections beside conflicts and automatic pauses, from the same partial index.
DROP INDEX events_review;
CREATE INDEX events_review ON events (at) WHERE kind IN ('conflict', 'auto_paused', 'corrected');
