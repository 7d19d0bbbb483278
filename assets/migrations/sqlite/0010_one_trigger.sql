-- settle schema 10 (SQLite): one index fewer for every update of an operation to write:
-- operations_workflow_exceptions (workflow, exception_since) is the leading part of
-- operations_exceptions_by_workflow. (PostgreSQL's schema 10 also merges its two statement
-- triggers; SQLite's row triggers each fire only where their condition holds.)
DROP INDEX operations_workflow_exceptions;
