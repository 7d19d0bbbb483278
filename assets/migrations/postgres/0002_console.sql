-- settle schema 2 (PostgreSQL): keyset orders for the console's sorts, and a notification on
-- every audit event so that consoles refresh at once (LISTEN settle_events).
CREATE INDEX operations_exceptions_by_state ON operations (state, exception_since, id) WHERE exception_since IS NOT NULL;
CREATE INDEX operations_exceptions_by_workflow ON operations (workflow, exception_since, id) WHERE exception_since IS NOT NULL;
CREATE INDEX operations_exceptions_by_destination ON operations (destination, exception_since, id) WHERE exception_since IS NOT NULL;
CREATE INDEX operations_by_workflow ON operations (workflow, created_at, id);
CREATE INDEX operations_by_destination ON operations (destination, created_at, id);

CREATE FUNCTION settle_events_notify() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('settle_events', '');
    RETURN NULL;
END
$$;
CREATE TRIGGER events_notify AFTER INSERT ON events
    FOR EACH STATEMENT EXECUTE FUNCTION settle_events_notify();
