-- settle schema 5 (PostgreSQL): destinations paused for dispatch (manual: Staff actions, Destinations and the dispatcher), by staff or by an
-- `auth` answer; the same shape as `workflows`. A destination never paused has no row.
CREATE TABLE destinations (
    name          TEXT PRIMARY KEY,
    paused        BIGINT NOT NULL DEFAULT 0,
    paused_reason TEXT,
    paused_by     TEXT,
    paused_at     BIGINT,
    version       BIGINT NOT NULL DEFAULT 0
);
