//! The library's errors. A refusal is a normal answer (exit 3), not a crash.

#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A state, claim or safety rule said no; nothing changed.
    #[error("{0}")]
    Refused(String),
    /// Not this actor's to do or to read: an automation outside its workflows, or asking for a
    /// staff action (manual: The HTTP API). Exit 3, as a refusal; 403 over HTTP.
    #[error("{0}")]
    Forbidden(String),
    /// No operation (or workflow) with that name.
    #[error("{0}")]
    NotFound(String),
    /// Malformed input: a bad key, JSON, duration, config value.
    #[error("{0}")]
    Invalid(String),
    /// The database cannot be reached or used (down, wrong schema, newer version).
    #[error("{0}")]
    Unavailable(String),
    /// The database refused a value it cannot store (PostgreSQL's data exceptions). The input
    /// checks keep such values out; this is the last line, so that one bad value is reported as
    /// such and never taken for an outage.
    #[error("{0}")]
    Unstorable(String),
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// The process exit code the manual gives this error.
    pub fn exit_code(&self) -> i32 {
        match self {
            Error::Invalid(_) | Error::Unstorable(_) => 2,
            Error::Refused(_) | Error::Forbidden(_) | Error::NotFound(_) => 3,
            Error::Unavailable(_) => 4,
        }
    }
}

impl From<crate::domain::Refusal> for Error {
    fn from(r: crate::domain::Refusal) -> Self {
        Error::Refused(r.0)
    }
}
