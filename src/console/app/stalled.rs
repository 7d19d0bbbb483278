//! View 1's stalled runs (manual: Runs) as a component: what it holds and the answers it takes.
//! Their keys are the shell's (`runs.rs`), as they move between the runs and the operations.

use super::messages::Effect;
use crate::ledger::RunSummary;

/// View 1's stalled runs as a component: the runs shown, the one the selection is on, the one
/// the detail pane holds, and the newest request for them.
#[derive(Default)]
pub struct StalledRuns {
    /// Oldest stall first.
    pub runs: Vec<RunSummary>,
    /// The selection is on this run (not on an operation).
    pub on: Option<usize>,
    /// The selected run, for the detail pane.
    pub view: Option<crate::ledger::RunView>,
    /// The newest request for the runs; `fresh`: it was a new list's.
    seq: u64,
    fresh: bool,
}

impl StalledRuns {
    /// The run the selection is on.
    pub fn selected(&self) -> Option<&RunSummary> {
        self.runs.get(self.on?)
    }

    /// The runs are asked again (request `seq`) where they are: the selection stays put.
    pub(super) fn asked(&mut self, seq: u64) {
        self.seq = seq;
    }

    /// A new list is asked for (request `seq`): the selection leaves the runs, and comes back to
    /// the first when the list's selection is at its top.
    pub(super) fn asked_fresh(&mut self, seq: u64) {
        self.seq = seq;
        self.fresh = true;
        self.on = None;
    }

    /// The runs came for request `seq`: kept, the selection kept on its run, or on the first of a
    /// fresh list when `at_top` (the list's selection is on its first row). False where the
    /// answer is older than the newest request.
    pub(super) fn on_list(
        &mut self,
        seq: u64,
        runs: Result<Vec<RunSummary>, String>,
        at_top: bool,
    ) -> bool {
        if seq < self.seq {
            return false;
        }
        let Ok(runs) = runs else {
            return false;
        };
        let before = self.selected().map(|r| r.run.clone());
        self.runs = runs;
        self.on = match before {
            Some(r) => self
                .runs
                .iter()
                .position(|x| x.run == r)
                .or_else(|| (!self.runs.is_empty()).then_some(0)),
            None if self.fresh && at_top && !self.runs.is_empty() => Some(0),
            None => None,
        };
        self.fresh = false;
        true
    }

    /// One run came for the detail pane: kept where the selection is still on it.
    pub(super) fn on_view(
        &mut self,
        run: &str,
        view: Result<Box<crate::ledger::RunView>, String>,
    ) -> Result<(), String> {
        match view {
            Ok(v) if self.selected().is_some_and(|r| r.run == run) => self.view = Some(*v),
            Ok(_) => {}
            Err(e) => return Err(e),
        }
        Ok(())
    }

    /// The selected run's detail, when the pane does not hold it.
    pub(super) fn effect(&self) -> Vec<Effect> {
        match self.selected() {
            Some(r) if self.view.as_ref().is_none_or(|v| v.run != r.run) => {
                vec![Effect::Run { run: r.run.clone() }]
            }
            _ => Vec::new(),
        }
    }
}
