-- settle schema 16 (PostgreSQL): the trigram index of schema 15 folds its new entries in small
-- steps. Every attempt started enters the exceptions' indexes, this one among them (an operation
-- in flight becomes an exception at its attempt's timeout without another write, so its row
-- carries exception_since from the start). A GIN index gathers new entries in a pending list and
-- folds the list into the index inside the insert that takes it past gin_pending_list_limit (4 MB
-- by default): thousands of rows at once, while every write queued behind that insert waits.
-- The gateway's bench on PostgreSQL (cargo bench --bench gateway): added p99 23.1 ms with 4 MB,
-- 14.7 ms with 512 kB, 14.7 ms with no index at all; requests a second unchanged. A search also
-- reads a shorter list.
ALTER INDEX IF EXISTS operations_exceptions_text SET (gin_pending_list_limit = 512);
