//! What a dispatcher's round takes and gives: the attempts it finished, the ones it started and
//! the rows they left.

use crate::error::Result;
use crate::ledger::{Applied, AttemptReport};

/// An attempt the dispatcher has finished.
#[derive(Clone, Debug, PartialEq)]
pub struct Finished {
    pub report: AttemptReport,
    /// Where the outcome was unknown and the destination has a lookup: what the lookup said.
    pub lookup: Option<crate::domain::LookupAnswer>,
    /// The destination refused the credentials (an `auth` answer, the manual's Destinations and the dispatcher): the round pauses
    /// the destination, with this reason, and starts nothing more there.
    pub pause_destination: Option<String>,
}

/// An attempt a round started: send it now.
#[derive(Clone, Debug, PartialEq)]
pub struct StartedOp {
    pub key: String,
    pub destination: String,
    pub action: String,
    pub attempt: u32,
    /// An attempt of the current budget was made before.
    pub retry: bool,
    /// The stored request, unredacted: only the dispatcher reads it, to send it.
    pub(crate) payload: String,
    /// The operation as the round that started it left it (its row id): the round that records
    /// the attempt's answer decides on it instead of reading the row again, unless another
    /// writer changed the row meanwhile (its compare-and-set then fails and the round is tried
    /// again on what the database holds).
    pub(crate) row: Option<std::sync::Arc<(i64, crate::domain::Op)>>,
}

/// The operations a dispatcher started, by key, as their rounds left them.
pub type StartedRows = std::collections::HashMap<String, std::sync::Arc<(i64, crate::domain::Op)>>;

/// What one round did.
#[derive(Debug, Default)]
pub struct Round {
    /// Per finished attempt, in the order given: what its outcome (and lookup) made of it.
    pub finished: Vec<Result<Applied>>,
    /// How many unknown outcomes a lookup settled.
    pub looked_up: usize,
    /// The attempts started, oldest due first.
    pub started: Vec<StartedOp>,
    /// Due retries left in `retry_wait` because their destination's budget is empty.
    pub waiting_for_budget: Vec<String>,
    /// Destinations whose breaker this round opened or closed.
    pub breakers: Vec<(String, crate::domain::breaker::Change)>,
    /// Destinations whose probe this round granted, to be asked with `GET probe_url`
    /// ([`super::Rounds::probed`] records the answer).
    pub probes: Vec<String>,
}

impl Round {
    /// The rows of the operations this round started, as it left them: what a later round
    /// that records their answers may decide on ([`super::Rounds::round_knowing`]).
    pub fn started_rows(&self) -> StartedRows {
        self.started
            .iter()
            .filter_map(|s| Some((s.key.clone(), s.row.clone()?)))
            .collect()
    }
}
