//! What every statement needs from the drivers, whichever runs it: their errors said plainly
//! (redacted, on one line), SQLite's blocking calls told to tokio, times as stored.

use chrono::{DateTime, Utc};

use crate::domain::redact::redact_text;
use crate::error::Error;

/// A SQLite error: the database cannot be used (its message redacted, on one line).
pub(crate) fn err(e: rusqlite::Error) -> Error {
    Error::Unavailable(driver_message("database", &e.to_string()))
}

/// Runs a blocking call on this thread, telling tokio first where it can be told.
pub(crate) fn blocking<T>(f: impl FnOnce() -> T) -> T {
    match tokio::runtime::Handle::try_current().map(|h| h.runtime_flavor()) {
        Ok(tokio::runtime::RuntimeFlavor::MultiThread) => tokio::task::block_in_place(f),
        _ => f(),
    }
}

pub(crate) fn ms(t: DateTime<Utc>) -> i64 {
    t.timestamp_millis()
}

pub(crate) fn opt_ms(t: Option<DateTime<Utc>>) -> Option<i64> {
    t.map(ms)
}

pub(crate) fn time(ms: i64) -> DateTime<Utc> {
    DateTime::from_timestamp_millis(ms).unwrap_or_default()
}

pub(crate) fn corrupt(what: &str) -> Error {
    Error::Unavailable(format!(
        "the database holds a row settle cannot read ({what})"
    ))
}

/// A driver's error, as the ledger reports it (redacted; a data exception is `Unstorable`).
pub(crate) fn db(e: sqlx::Error) -> Error {
    pg_error("database", e)
}

/// A driver's message as settle reports it, after what settle was doing: redacted (a driver's
/// message can quote values) and on one line.
pub(crate) fn driver_message(context: &str, message: &str) -> String {
    format!("{context}: {}", redact_text(message).replace('\n', " "))
}

/// PostgreSQL's error with what settle was doing: the message redacted (a driver's message can
/// quote values) and kept to one line; a data exception (SQLSTATE class 22: a NUL in text, a
/// value out of range) is `Unstorable`, never taken for an outage.
pub(crate) fn pg_error(context: &str, err: sqlx::Error) -> Error {
    // a change asked of a replica (a hot standby) or a read-only role: nothing changed
    if let sqlx::Error::Database(e) = &err
        && e.code().is_some_and(|c| c == "25006")
    {
        return Error::Refused(format!(
            "{context}: read-only (a replica?): changes are made on the primary"
        ));
    }
    let (text, data, pooled) = match &err {
        sqlx::Error::Database(e) => (
            e.message().to_string(),
            e.code().is_some_and(|c| c.starts_with("22")),
            // a statement this connection named is missing, or another's has its name (bound
            // with the wrong parameters, a protocol violation): the mark of a pooler that hands
            // each transaction a different server connection
            e.code()
                .is_some_and(|c| matches!(c.as_ref(), "42P05" | "26000" | "08P01")),
        ),
        other => (other.to_string(), false, false),
    };
    let mut text = driver_message(context, &text);
    text.push_str(&super::bouncer::pooler_hint(
        &text,
        pooled,
        super::bouncer::names_statements(),
    ));
    if data {
        Error::Unstorable(text)
    } else {
        Error::Unavailable(text)
    }
}
