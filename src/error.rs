//! The library's errors. A refusal is a normal answer (exit 3), not a crash.

use crate::domain::redact::redact_text;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A state, claim or safety rule said no; nothing changed.
    #[error("{0}")]
    Refused(String),
    /// No operation (or workflow) with that name.
    #[error("{0}")]
    NotFound(String),
    /// Malformed input: a bad key, JSON, duration, config value.
    #[error("{0}")]
    Invalid(String),
    /// The database cannot be reached or used (down, wrong schema, newer version).
    #[error("{0}")]
    Unavailable(String),
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// The process exit code the SPEC gives this error.
    pub fn exit_code(&self) -> i32 {
        match self {
            Error::Invalid(_) => 2,
            Error::Refused(_) | Error::NotFound(_) => 3,
            Error::Unavailable(_) => 4,
        }
    }

    pub(crate) fn db(context: &str, err: sqlx::Error) -> Error {
        // Driver messages can quote values; they go through redaction like everything else.
        let text = match &err {
            sqlx::Error::Database(e) => e.message().to_string(),
            other => other.to_string(),
        };
        Error::Unavailable(format!(
            "{context}: {}",
            redact_text(&text).replace('\n', " ")
        ))
    }
}

impl From<crate::domain::Refusal> for Error {
    fn from(r: crate::domain::Refusal) -> Self {
        Error::Refused(r.0)
    }
}
