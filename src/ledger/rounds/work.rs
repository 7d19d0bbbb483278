//! What a round has decided so far (`RoundWork`), held between its steps.

use std::collections::{BTreeMap, HashMap};

use super::types::Round;
use crate::ledger::budgets::Budgets;
use crate::ledger::engine::Batch;
use crate::ledger::guards::Guard;

/// What a round has decided so far, written together at the end: one statement per kind of row,
/// not per operation.
pub(super) struct RoundWork {
    pub(super) round: Round,
    pub(super) budgets: Budgets,
    pub(super) guards: BTreeMap<String, Guard>,
    /// The round's own attempts' rows, then the due rows it starts, and what it did to them.
    pub(super) batch: Batch<'static>,
    /// Destinations an answer says to pause, with the reason.
    pub(super) pausing: Vec<(String, String)>,
}

impl Default for RoundWork {
    fn default() -> RoundWork {
        RoundWork {
            round: Round::default(),
            budgets: Budgets::default(),
            guards: BTreeMap::new(),
            batch: Batch::of(HashMap::new()),
            pausing: Vec::new(),
        }
    }
}
