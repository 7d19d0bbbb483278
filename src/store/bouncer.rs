//! PostgreSQL behind a pooler (PgBouncer in transaction pooling mode): whether this process names
//! its statements, and what to say about an error the pooler caused.

use std::sync::atomic::{AtomicBool, Ordering};

use sqlx::Postgres;
use sqlx::postgres::PgArguments;
use sqlx::query::Query;

/// Whether this process's PostgreSQL statements are parsed anew each time (unnamed) rather than
/// prepared once per connection and kept (named, sqlx's default). Kept, unless the process opened
/// a database through PgBouncer in transaction pooling mode: there a connection's next
/// transaction may run on another server connection, where a statement this one named does not
/// exist, or another client's of the same name does. One switch for the process rather than one
/// per store: a settle process opens one database, and a second store of the same process (only
/// tests open several) loses nothing but the parse this saves.
static UNNAMED: AtomicBool = AtomicBool::new(false);

/// From now on, this process names no PostgreSQL statement (see [`UNNAMED`]).
pub(crate) fn name_no_statements() {
    UNNAMED.store(true, Ordering::Relaxed);
}

/// Whether this process names its PostgreSQL statements (not through PgBouncer).
pub(crate) fn names_statements() -> bool {
    !UNNAMED.load(Ordering::Relaxed)
}

/// A PostgreSQL statement: named and kept by its connection, unless [`name_no_statements`].
pub(crate) fn pg_statement(sql: &str) -> Query<'_, Postgres, PgArguments> {
    let query = sqlx::query::<Postgres>(sql);
    match UNNAMED.load(Ordering::Relaxed) {
        true => query.persistent(false),
        false => query,
    }
}

/// What to do about an error that a pooler in front of PostgreSQL caused, said after its message:
/// a startup parameter it refuses (named, with the two ways out), or statements that met another
/// server connection while this process names them (`pgbouncer=true` missing from the URL).
pub(crate) fn pooler_hint(message: &str, pooled: bool, named: bool) -> String {
    const REFUSED: &str = "unsupported startup parameter";
    if let Some(at) = message.find(REFUSED) {
        let rest = message[at + REFUSED.len()..].trim_start_matches([':', ' ']);
        let rest = rest.strip_prefix("in options:").unwrap_or(rest).trim();
        let name: String = rest
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect();
        let name = if name.is_empty() {
            "it".to_string()
        } else {
            format!("`{name}`")
        };
        return format!(
            " (PgBouncer refuses the startup parameter {name}: take it out of the database URL, \
             or list it in ignore_startup_parameters in pgbouncer.ini)"
        );
    }
    if pooled && named {
        " (through PgBouncer in transaction pooling mode? add pgbouncer=true to the database URL)"
            .to_string()
    } else {
        String::new()
    }
}

#[cfg(test)]
mod tests {
    use super::pooler_hint;

    #[test]
    fn a_poolers_refusal_is_named_and_the_option_asked_only_where_missing() {
        let refused = "cannot open database x: unsupported startup parameter: options";
        let hint = pooler_hint(refused, true, false);
        assert!(hint.contains("startup parameter `options`"), "{hint}");
        assert!(hint.contains("ignore_startup_parameters"), "{hint}");
        assert!(!hint.contains("pgbouncer=true"), "{hint}");
        // the same while statements are named: the parameter is still what is wrong
        assert!(!pooler_hint(refused, true, true).contains("pgbouncer=true"));
        let newer = "unsupported startup parameter in options: statement_timeout";
        assert!(pooler_hint(newer, true, false).contains("`statement_timeout`"));
        // a named statement that met another server connection
        let lost = "prepared statement \"sqlx_s_1\" does not exist";
        assert!(pooler_hint(lost, true, true).contains("add pgbouncer=true"));
        // with pgbouncer=true given, no advice to give it
        assert_eq!(pooler_hint(lost, true, false), "");
        assert_eq!(pooler_hint("connection refused", false, true), "");
    }
}
