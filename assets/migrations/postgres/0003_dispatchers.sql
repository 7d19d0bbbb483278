-- settle schema 3 (PostgreSQL): dispatcher heartbeats, for the console's header.
CREATE TABLE dispatchers (
    name    TEXT PRIMARY KEY,
    seen_at BIGINT NOT NULL
);
