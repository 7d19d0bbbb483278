-- settle schema 3 (SQLite): dispatcher heartbeats, for the console's header.
CREATE TABLE dispatchers (
    name    TEXT PRIMARY KEY,
    seen_at INTEGER NOT NULL
);
