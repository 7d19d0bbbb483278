-- settle schema 18 (manual: Owners and notifications): `settle groups`, the console's groups and
-- the notifications group the exceptions by workflow, destination, state and reason. The index of
-- schema 14 gains the reason, so that grouping 1,000,000 exceptions reads one narrow index in its
-- order instead of every exception's row; the review and the "N of M" counts read it as before.
DROP INDEX operations_exception_groups;
CREATE INDEX operations_exception_groups ON operations (workflow, destination, state, reason, exception_since)
    WHERE exception_since IS NOT NULL;
