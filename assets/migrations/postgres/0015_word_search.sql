-- settle schema 15 (PostgreSQL): the filter's bare words (manual: The filter) at ten million operations
-- (manual: Retention and the archive). A word is looked for in each exception's key, workflow, step, destination, state and
-- error, joined by spaces (a word holds none, so it is found in the joined text exactly where it
-- is found in one of them). A trigram index of that text (pg_trgm, shipped with PostgreSQL and
-- trusted since 13) finds a word of three letters or more without reading every exception. The
-- query repeats the expression word for word (store::pages::EXCEPTION_TEXT).
-- Where pg_trgm cannot be had (a server without the contrib modules, a role that may not create
-- it), the schema goes on without the index: the words are then found by reading the exceptions,
-- as before.
DO $$
DECLARE
    home TEXT;
BEGIN
    BEGIN
        CREATE EXTENSION IF NOT EXISTS pg_trgm;
    EXCEPTION WHEN OTHERS THEN
        RAISE NOTICE 'settle: pg_trgm is not available (%): the filter''s words are found without an index', SQLERRM;
        RETURN;
    END;
    -- the extension may live in a schema of its own (extensions, on some hosts)
    SELECT n.nspname INTO home FROM pg_opclass c JOIN pg_namespace n ON n.oid = c.opcnamespace
        WHERE c.opcname = 'gin_trgm_ops' LIMIT 1;
    PERFORM set_config('search_path', current_setting('search_path') || ', ' || quote_ident(home), true);
    CREATE INDEX operations_exceptions_text ON operations
        USING gin ((LOWER(key || ' ' || workflow || ' ' || step || ' ' || destination || ' ' || state || ' ' || COALESCE(last_error, ''))) gin_trgm_ops)
        WHERE exception_since IS NOT NULL;
END $$;
