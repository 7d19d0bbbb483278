//! Each run's row (schema 12), kept in the transaction that records or settles one of its
//! operations, so that the runs that stall are found by an index instead of by reading every run.
//! The run's state is still derived from its operations (`domain::run`) wherever it is shown; the
//! row only says where to look: a wait between declared steps, and when it began.

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use super::Ledger;
use crate::domain::Op;
use crate::domain::run::{self, RunOp, RunState};
use crate::domain::time::after;
use crate::error::Result;
use crate::store::{RunKept, RunOpRow, RunWrite, Tx};

impl Ledger {
    /// A workflow's declared steps and `step_gap` (none and the default when it declares none).
    pub(super) fn run_rules(&self, workflow: &str) -> (&[String], Duration) {
        match self.config.workflows.get(workflow) {
            Some(w) => (w.steps.as_slice(), w.step_gap()),
            None => (&[], crate::config::DEFAULT_STEP_GAP),
        }
    }

    /// Keeps the rows of the runs that `touched` belong to: operations just inserted or changed
    /// in this transaction, each with whether it settled (or left a settled state), when the
    /// run's steps are read again. A run's first operation makes its row. Costs nothing when no
    /// operation belongs to a run, and one round trip per batch when one only started.
    pub(super) async fn keep_runs(&self, tx: &mut Tx, touched: &[(&Op, bool)]) -> Result<()> {
        let mut runs: BTreeMap<&str, (&Op, bool)> = BTreeMap::new();
        for (op, settled) in touched {
            if let Some(r) = op.run.as_deref() {
                let e = runs.entry(r).or_insert((op, false));
                e.1 |= *settled;
            }
        }
        if runs.is_empty() {
            return Ok(());
        }
        let names: Vec<&str> = runs.keys().copied().collect();
        let held = tx.hold_runs(&names).await?;
        let reread: Vec<&str> = runs
            .iter()
            .filter(|(_, (_, settled))| *settled)
            .map(|(r, _)| *r)
            .collect();
        let now = self.now();
        let mut steps: HashMap<String, Vec<RunOp>> = HashMap::new();
        if !reread.is_empty() {
            for o in tx.ops_of_runs(&reread).await? {
                steps.entry(o.run.clone()).or_default().push(run_op(o, now));
            }
        }
        let mut kept: Vec<(&str, String, chrono::DateTime<chrono::Utc>, RunKept)> = Vec::new();
        for (name, (op, settled)) in &runs {
            let old = held.get(*name);
            let workflow = old.map_or(op.workflow.clone(), |o| o.row.workflow.clone());
            let started = old.map_or(op.created_at, |o| o.row.started_at);
            let (declared, gap) = self.run_rules(&workflow);
            let before = old.map(|o| o.kept.clone()).unwrap_or_default();
            let mut k = before.clone();
            let ops = steps.get(*name).map(Vec::as_slice).unwrap_or_default();
            let wait = if *settled {
                run::waiting(declared, ops)
            } else {
                None
            };
            // a wait that ends after its gap was a stall (the review counts it)
            if let Some(since) = before.waiting_since
                && wait.as_ref().map(|w| w.since) != Some(since)
                && after(since, gap) < now
            {
                k.stalled_at = Some(after(since, gap));
            }
            k.waiting_since = wait.as_ref().map(|w| w.since);
            k.after_step = wait.as_ref().and_then(|w| w.after.clone());
            k.next_step = wait.map(|w| w.next);
            k.done_at = None;
            if *settled && !ops.is_empty() {
                let d = run::derive(declared, gap, ops, None, now);
                if d.state == RunState::Done {
                    k.done_at = Some(d.since);
                }
            }
            if old.is_none() || k != before {
                kept.push((name, workflow, started, k));
            }
        }
        let writes: Vec<RunWrite> = kept
            .iter()
            .map(|(run, workflow, started_at, kept)| RunWrite {
                run,
                workflow,
                started_at: *started_at,
                kept,
            })
            .collect();
        tx.keep_runs(&writes).await
    }
}

/// One operation of a run as the run's rules read it (settled or not: what keeping the row needs).
pub(super) fn run_op(o: RunOpRow, now: chrono::DateTime<chrono::Utc>) -> RunOp {
    RunOp {
        exception: o.state.is_exception() || o.exception_since.is_some_and(|t| t <= now),
        key: o.key,
        step: o.step,
        state: o.state,
        resolution: o.resolution,
        reference: None,
        recorded_at: o.created_at,
        updated_at: o.updated_at,
    }
}
