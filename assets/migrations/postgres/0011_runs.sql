-- settle schema 11: runs (manual: Runs). An operation belongs to at most one run, named by the
-- automation when it records the operation and never changed after; a run's operations are
-- found by it (the run's steps, its state), so they are indexed by run.
ALTER TABLE operations ADD COLUMN run TEXT;
CREATE INDEX operations_run ON operations (run, id) WHERE run IS NOT NULL;
