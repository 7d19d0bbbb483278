-- settle schema 12: a row for each run (manual: Runs), kept in the transaction that records or
-- settles one of its operations. A run's state is still derived from its operations; this row
-- only finds the runs that may be stalled without reading every run, and holds what is the
-- run's own: a person's claim and close.
--   waiting_since: every operation of the run is done and a declared step was never recorded;
--     the time the step before it settled (the run stalls step_gap after it), else NULL.
--   stalled_at: when the run last stalled and was then rerun (the review counts stalls).
-- runs_waiting holds the workflow too: counting the stalls by workflow reads the index alone.
CREATE TABLE runs (
    id               BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    run              TEXT    NOT NULL UNIQUE,
    workflow         TEXT    NOT NULL,
    started_at       BIGINT NOT NULL,
    waiting_since    BIGINT,
    after_step       TEXT,
    next_step        TEXT,
    stalled_at       BIGINT,
    done_at          BIGINT,
    claimed_by       TEXT,
    claim_expires_at BIGINT,
    closed_at        BIGINT,
    resolution       TEXT,
    version          BIGINT NOT NULL DEFAULT 0
);
CREATE INDEX runs_waiting ON runs (waiting_since, id, workflow) WHERE waiting_since IS NOT NULL AND closed_at IS NULL;
CREATE INDEX runs_started ON runs (started_at);
-- the review's counts of a window: runs done, closed, and stalled then rerun in it
CREATE INDEX runs_done ON runs (done_at) WHERE done_at IS NOT NULL;
CREATE INDEX runs_closed ON runs (closed_at) WHERE closed_at IS NOT NULL;
CREATE INDEX runs_stalled ON runs (stalled_at) WHERE stalled_at IS NOT NULL;
INSERT INTO runs (run, workflow, started_at)
    SELECT run, MIN(workflow), MIN(created_at) FROM operations WHERE run IS NOT NULL GROUP BY run;
