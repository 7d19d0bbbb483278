//! The states of an operation, the outcome classes of an attempt, and the resolutions of a close.

use std::fmt;

use serde::{Deserialize, Serialize};

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum State {
    Pending,
    InFlight,
    RetryWait,
    Succeeded,
    Rejected,
    Unknown,
    Failed,
    Conflict,
    Closed,
}

impl State {
    pub const ALL: [State; 9] = [
        State::Pending,
        State::InFlight,
        State::RetryWait,
        State::Succeeded,
        State::Rejected,
        State::Unknown,
        State::Failed,
        State::Conflict,
        State::Closed,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            State::Pending => "pending",
            State::InFlight => "in_flight",
            State::RetryWait => "retry_wait",
            State::Succeeded => "succeeded",
            State::Rejected => "rejected",
            State::Unknown => "unknown",
            State::Failed => "failed",
            State::Conflict => "conflict",
            State::Closed => "closed",
        }
    }

    pub fn parse(text: &str) -> Result<State, String> {
        State::ALL
            .into_iter()
            .find(|s| s.as_str() == text)
            .ok_or_else(|| {
                let names: Vec<_> = State::ALL.iter().map(|s| s.as_str()).collect();
                format!(
                    "unknown state '{}': use one of {}",
                    crate::domain::escape_text(text),
                    names.join(", ")
                )
            })
    }

    /// Terminal states never change again.
    pub fn is_terminal(self) -> bool {
        matches!(self, State::Succeeded | State::Closed)
    }

    /// The states that are exceptions by themselves (a stuck `in_flight` is one by its age).
    pub fn is_exception(self) -> bool {
        matches!(
            self,
            State::Rejected | State::Unknown | State::Failed | State::Conflict
        )
    }
}

impl fmt::Display for State {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The class of an attempt's outcome, as the automation or dispatcher observed it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// The destination confirmed the work.
    Accepted,
    /// The destination refused the request (a business error).
    Rejected,
    /// Provably not done: refused before sending, 429, 503 with Retry-After, connect error.
    Transient,
    /// Could not be observed: timeout after sending, reset, ambiguous 5xx, interruption.
    Unknown,
}

impl Outcome {
    pub const ALL: [Outcome; 4] = [
        Outcome::Accepted,
        Outcome::Rejected,
        Outcome::Transient,
        Outcome::Unknown,
    ];

    /// The state this outcome leaves an operation in whatever its destination's policy (manual: States):
    /// an accepted answer `succeeded`, a rejection `rejected`; `None` where the retry rules decide
    /// (transient, unknown).
    pub fn settles(self) -> Option<State> {
        match self {
            Outcome::Accepted => Some(State::Succeeded),
            Outcome::Rejected => Some(State::Rejected),
            Outcome::Transient | Outcome::Unknown => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Accepted => "accepted",
            Outcome::Rejected => "rejected",
            Outcome::Transient => "transient",
            Outcome::Unknown => "unknown",
        }
    }

    pub fn parse(text: &str) -> Result<Outcome, String> {
        Outcome::ALL
            .into_iter()
            .find(|s| s.as_str() == text)
            .ok_or_else(|| {
                format!(
                    "unknown outcome '{}': use accepted, rejected, transient or unknown",
                    crate::domain::escape_text(text)
                )
            })
    }
}

impl fmt::Display for Outcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// How a person closed an operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Resolution {
    /// Done by other means; needs the destination's reference.
    DoneElsewhere,
    /// Replaced by another operation; needs its key.
    Superseded,
    Abandoned,
    DuplicateCleanedUp,
    /// A correction taken back before it was sent (manual: Taking an action back): settle's own,
    /// never a person's choice.
    Withdrawn,
}

impl Resolution {
    pub const ALL: [Resolution; 5] = [
        Resolution::DoneElsewhere,
        Resolution::Superseded,
        Resolution::Abandoned,
        Resolution::DuplicateCleanedUp,
        Resolution::Withdrawn,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Resolution::DoneElsewhere => "done_elsewhere",
            Resolution::Superseded => "superseded",
            Resolution::Abandoned => "abandoned",
            Resolution::DuplicateCleanedUp => "duplicate_cleaned_up",
            Resolution::Withdrawn => "withdrawn",
        }
    }

    pub fn parse(text: &str) -> Result<Resolution, String> {
        Resolution::ALL.into_iter().find(|s| s.as_str() == text).ok_or_else(|| {
            format!(
                "unknown resolution '{}': use done_elsewhere, superseded, abandoned or duplicate_cleaned_up",
                crate::domain::escape_text(text)
            )
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for s in State::ALL {
            assert_eq!(State::parse(s.as_str()), Ok(s));
        }
        for o in Outcome::ALL {
            assert_eq!(Outcome::parse(o.as_str()), Ok(o));
        }
        for r in Resolution::ALL {
            assert_eq!(Resolution::parse(r.as_str()), Ok(r));
        }
        assert!(State::parse("done").unwrap_err().contains("pending"));
        assert!(State::parse("\u{1b}[2J").unwrap_err().contains("\\x1b"));
    }

    #[test]
    fn terminal_and_exception_sets() {
        let terminal: Vec<_> = State::ALL.into_iter().filter(|s| s.is_terminal()).collect();
        assert_eq!(terminal, [State::Succeeded, State::Closed]);
        let exc: Vec<_> = State::ALL
            .into_iter()
            .filter(|s| s.is_exception())
            .collect();
        assert_eq!(
            exc,
            [
                State::Rejected,
                State::Unknown,
                State::Failed,
                State::Conflict
            ]
        );
    }
}
