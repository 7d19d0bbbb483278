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
use crate::store::{RunKept, RunOpRow, RunWrite, StoredRun, Tx};

impl Ledger {
    /// A workflow's declared steps and `step_gap` (none and the default when it declares none).
    pub(super) fn run_rules(&self, workflow: &str) -> (&[String], Duration) {
        match self.config.workflows.get(workflow) {
            Some(w) => (w.steps.as_slice(), w.step_gap()),
            None => (&[], crate::config::DEFAULT_STEP_GAP),
        }
    }
}

/// Keeps the rows of the runs that `touched` belong to: operations just inserted or changed
/// in this transaction (in order: the last of one key is its row now), each with whether it
/// settled (or left a settled state), when the run's steps are read again. `inserted`: some
/// were inserted here, so a run's row may be this transaction's to make (and then its
/// operations are all here, read from `touched` instead of the database). Costs nothing when
/// no operation belongs to a run; a batch of new runs costs one statement, and one more when
/// a step settled.
pub(super) async fn keep_runs(
    ledger: &Ledger,
    tx: &mut Tx,
    touched: &[(&Op, bool)],
    inserted: bool,
) -> Result<()> {
    let mut runs: BTreeMap<&str, Touched> = BTreeMap::new();
    for (op, settled) in touched {
        if let Some(r) = op.run.as_deref() {
            let e = runs.entry(r).or_insert_with(|| Touched {
                first: op,
                settled: false,
                ops: BTreeMap::new(),
            });
            e.settled |= *settled;
            e.ops.insert(op.key.as_str(), op);
        }
    }
    if runs.is_empty() {
        return Ok(());
    }
    let locked: HashMap<String, (StoredRun, bool)> = if inserted {
        let new: Vec<_> = runs
            .iter()
            .map(|(r, t)| (*r, t.first.workflow.as_str(), t.first.created_at))
            .collect();
        tx.make_or_hold_runs(&new).await?
    } else {
        let names: Vec<&str> = runs.keys().copied().collect();
        let rows = tx.lock_runs(&names).await?;
        rows.into_iter().map(|(k, v)| (k, (v, false))).collect()
    };
    let now = ledger.now();
    // a run made here has no operation but this transaction's; any other is read again
    let reread: Vec<&str> = runs
        .iter()
        .filter(|(r, t)| t.settled && !locked.get(**r).is_some_and(|h| h.1))
        .map(|(r, _)| *r)
        .collect();
    let mut steps: HashMap<String, Vec<RunOp>> = HashMap::new();
    if !reread.is_empty() {
        for o in tx.ops_of_runs(&reread).await? {
            steps.entry(o.run.clone()).or_default().push(run_op(o, now));
        }
    }
    for (r, t) in &runs {
        if t.settled && locked.get(*r).is_some_and(|h| h.1) {
            steps.insert(
                r.to_string(),
                t.ops.values().map(|op| op_of(op, now)).collect(),
            );
        }
    }
    let kept = kept_of(ledger, &runs, &locked, &steps);
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

/// What to keep of each touched run, where it changed (or the run's row is new).
#[allow(clippy::type_complexity)]
fn kept_of<'a>(
    ledger: &Ledger,
    runs: &BTreeMap<&'a str, Touched>,
    locked: &HashMap<String, (StoredRun, bool)>,
    steps: &HashMap<String, Vec<RunOp>>,
) -> Vec<(&'a str, String, chrono::DateTime<chrono::Utc>, RunKept)> {
    let now = ledger.now();
    let mut kept: Vec<(&'a str, String, chrono::DateTime<chrono::Utc>, RunKept)> = Vec::new();
    for (name, t) in runs {
        let old = locked.get(*name).map(|h| &h.0);
        let op = t.first;
        let settled = t.settled;
        let workflow = old.map_or(op.workflow.clone(), |o| o.row.workflow.clone());
        let started = old.map_or(op.created_at, |o| o.row.started_at);
        let (declared, gap) = ledger.run_rules(&workflow);
        let before = old.map(|o| o.kept.clone()).unwrap_or_default();
        let mut k = before.clone();
        let ops = steps.get(*name).map(Vec::as_slice).unwrap_or_default();
        let wait = if settled {
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
        if settled && !ops.is_empty() {
            let d = run::derive(declared, gap, ops, None, now);
            if d.state == RunState::Done {
                k.done_at = Some(d.since);
            }
        }
        if old.is_none() || k != before {
            kept.push((*name, workflow, started, k));
        }
    }
    kept
}

/// A run's operations that one transaction touched.
struct Touched<'a> {
    first: &'a Op,
    settled: bool,
    ops: BTreeMap<&'a str, &'a Op>,
}

/// An operation of this transaction as the run's rules read it.
fn op_of(op: &Op, now: chrono::DateTime<chrono::Utc>) -> RunOp {
    RunOp {
        key: op.key.clone(),
        step: op.step.clone(),
        state: op.state,
        resolution: op.resolution,
        exception: op.state.is_exception() || op.exception_since.is_some_and(|t| t <= now),
        reference: None,
        recorded_at: op.created_at,
        updated_at: op.updated_at,
        superseded_by: op.superseded_by.clone(),
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
        superseded_by: o.superseded_by,
    }
}
