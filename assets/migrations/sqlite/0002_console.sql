-- settle schema 2 (SQLite): keyset orders for the console's sorts (state, workflow, destination).
CREATE INDEX operations_exceptions_by_state ON operations (state, exception_since, id) WHERE exception_since IS NOT NULL;
CREATE INDEX operations_exceptions_by_workflow ON operations (workflow, exception_since, id) WHERE exception_since IS NOT NULL;
CREATE INDEX operations_exceptions_by_destination ON operations (destination, exception_since, id) WHERE exception_since IS NOT NULL;
CREATE INDEX operations_by_workflow ON operations (workflow, created_at, id);
CREATE INDEX operations_by_destination ON operations (destination, created_at, id);
