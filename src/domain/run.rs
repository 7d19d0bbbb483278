//! Runs (manual: Runs): one execution of a workflow for one case, as its operations and the
//! workflow's declared steps say. A run's state is derived here from those alone, never kept
//! apart from them: the same operations and steps always give the same state.

use std::borrow::Cow;
use std::time::Duration;

use chrono::{DateTime, Utc};
use serde::Serialize;

use super::state::{Resolution, State};
use super::time::after;

/// What a run is doing.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RunState {
    /// A step is pending, in flight or waiting to retry, or the next declared step is still
    /// inside `step_gap`.
    Running,
    /// One of its steps is an exception (or was closed as abandoned): the run waits on it.
    Blocked,
    /// A step settled more than `step_gap` ago and the next declared step was never recorded.
    Stalled,
    /// Every declared step is done (no declared steps: every operation is terminal, none
    /// abandoned).
    Done,
    /// A person closed the run.
    Closed,
}

impl RunState {
    pub fn as_str(self) -> &'static str {
        match self {
            RunState::Running => "running",
            RunState::Blocked => "blocked",
            RunState::Stalled => "stalled",
            RunState::Done => "done",
            RunState::Closed => "closed",
        }
    }
}

impl std::fmt::Display for RunState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One operation of a run, as the run's state needs it.
#[derive(Clone, Debug, PartialEq)]
pub struct RunOp {
    pub key: String,
    pub step: String,
    pub state: State,
    pub resolution: Option<Resolution>,
    /// An exception now: an exception state, or an attempt in flight past its timeout.
    pub exception: bool,
    pub reference: Option<String>,
    pub recorded_at: DateTime<Utc>,
    /// When it last changed: for a done step, when it was settled.
    pub updated_at: DateTime<Utc>,
    /// Closed superseded by this key (a correction, manual: Correcting a request).
    pub superseded_by: Option<String>,
}

impl RunOp {
    /// Succeeded, or closed as done elsewhere.
    pub fn is_done(&self) -> bool {
        self.state == State::Succeeded || self.resolution == Some(Resolution::DoneElsewhere)
    }

    fn abandoned(&self) -> bool {
        self.state == State::Closed && !self.is_done()
    }
}

/// The run's operations that stand: one closed as superseded by another operation of the same
/// run (a correction) is replaced by it, and the run goes on with the replacement, along a chain
/// to its end.
fn current(ops: &[RunOp]) -> Cow<'_, [RunOp]> {
    let replaced = |o: &RunOp| {
        o.state == State::Closed
            && o.resolution == Some(Resolution::Superseded)
            && o.superseded_by
                .as_ref()
                .is_some_and(|k| ops.iter().any(|x| &x.key == k))
    };
    if !ops.iter().any(replaced) {
        return Cow::Borrowed(ops);
    }
    Cow::Owned(ops.iter().filter(|o| !replaced(o)).cloned().collect())
}

/// One step of a run as `settle run show` lists it: the declared steps in order, then any
/// undeclared ones in the order they were recorded.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct RunStep {
    pub step: String,
    pub key: Option<String>,
    /// The operation's state, or `not_recorded`.
    pub state: String,
    pub done: bool,
    pub reference: Option<String>,
    pub recorded_at: Option<DateTime<Utc>>,
    pub settled_at: Option<DateTime<Utc>>,
}

impl RunStep {
    /// Its mark where a run's steps are listed: `✓` done, `✗` an exception or closed without
    /// being done, `…` under way, `○` never recorded.
    pub fn mark(&self) -> &'static str {
        match (self.done, State::parse(&self.state)) {
            (true, _) => "✓",
            (false, Ok(s)) if s.is_exception() || s == State::Closed => "✗",
            (false, Ok(_)) => "…",
            (false, Err(_)) => "○",
        }
    }

    /// What follows its name: the reference when done, else its state in words.
    pub fn shown(&self) -> String {
        match (&self.reference, self.done) {
            (Some(r), true) => r.clone(),
            (None, true) => "done".into(),
            _ => self.state.replace('_', " "),
        }
    }
}

/// A run's state, since when it has been in it, and the step it is at (or waits on).
#[derive(Clone, Debug, PartialEq)]
pub struct Derived {
    pub state: RunState,
    pub since: DateTime<Utc>,
    /// The step a person or the automation acts on next (blocked: the exception's; stalled and
    /// running between steps: the missing one).
    pub step: Option<String>,
    /// The operation that step is (none for a step never recorded).
    pub key: Option<String>,
    /// The last declared step done before a gap (stalled: the step it stopped after).
    pub after: Option<String>,
}

/// The run's steps in order: the declared ones (the latest operation of each), then the rest in
/// the order they were recorded.
pub fn steps(declared: &[String], ops: &[RunOp]) -> Vec<RunStep> {
    let ops = &*current(ops);
    let of = |step: &str| {
        ops.iter()
            .filter(|o| o.step == step)
            .max_by_key(|o| o.recorded_at)
    };
    let shown = |o: &RunOp| RunStep {
        step: o.step.clone(),
        key: Some(o.key.clone()),
        state: o.state.as_str().to_string(),
        done: o.is_done(),
        reference: o.reference.clone(),
        recorded_at: Some(o.recorded_at),
        settled_at: o.state.is_terminal().then_some(o.updated_at),
    };
    let mut out: Vec<RunStep> = declared
        .iter()
        .map(|s| {
            of(s).map(shown).unwrap_or_else(|| RunStep {
                step: s.clone(),
                key: None,
                state: "not_recorded".into(),
                done: false,
                reference: None,
                recorded_at: None,
                settled_at: None,
            })
        })
        .collect();
    let mut rest: Vec<&RunOp> = ops.iter().filter(|o| !declared.contains(&o.step)).collect();
    rest.sort_by_key(|o| o.recorded_at);
    out.extend(rest.into_iter().map(shown));
    out
}

/// The run's state (manual: Runs) from its operations and its workflow's declared steps, at `now`.
/// `closed_at` is when a person closed the run, if one did. `ops` is never empty.
pub fn derive(
    declared: &[String],
    step_gap: Duration,
    ops: &[RunOp],
    closed_at: Option<DateTime<Utc>>,
    now: DateTime<Utc>,
) -> Derived {
    let ops = &*current(ops);
    let first = ops.iter().map(|o| o.recorded_at).min().unwrap_or(now);
    let last_change = ops.iter().map(|o| o.updated_at).max().unwrap_or(now);
    let at = |state, since, op: Option<&RunOp>| Derived {
        state,
        since,
        step: op.map(|o| o.step.clone()),
        key: op.map(|o| o.key.clone()),
        after: None,
    };
    if let Some(t) = closed_at {
        return at(RunState::Closed, t, None);
    }
    // an exception blocks the run; the oldest first
    if let Some(o) = ops
        .iter()
        .filter(|o| o.exception || o.abandoned())
        .min_by_key(|o| o.updated_at)
    {
        return at(RunState::Blocked, o.updated_at, Some(o));
    }
    if let Some(o) = ops
        .iter()
        .filter(|o| !o.state.is_terminal())
        .min_by_key(|o| o.recorded_at)
    {
        return at(RunState::Running, first, Some(o));
    }
    // every operation is terminal and done
    let Some(w) = waiting(declared, ops) else {
        return at(RunState::Done, last_change, None);
    };
    let due = after(w.since, step_gap);
    Derived {
        state: if now > due {
            RunState::Stalled
        } else {
            RunState::Running
        },
        since: if now > due { due } else { first },
        step: Some(w.next),
        key: None,
        after: w.after,
    }
}

/// Where a run waits between its declared steps: every operation of it is done and a declared
/// step was never recorded. Free of the clock, so the ledger keeps it in the run's row and finds
/// the runs that stall without reading every run.
#[derive(Clone, Debug, PartialEq)]
pub struct Waiting {
    /// When the step before the missing one settled (the run stalls `step_gap` after).
    pub since: DateTime<Utc>,
    /// That step, if the missing one is not the first.
    pub after: Option<String>,
    /// The step never recorded.
    pub next: String,
}

/// The run's wait between declared steps, if it is in one (see [`Waiting`]).
pub fn waiting(declared: &[String], ops: &[RunOp]) -> Option<Waiting> {
    let ops = &*current(ops);
    if declared.is_empty() || ops.is_empty() || !ops.iter().all(RunOp::is_done) {
        return None;
    }
    let latest = |step: &str| {
        ops.iter()
            .filter(|o| o.step == step)
            .max_by_key(|o| o.recorded_at)
    };
    let missing = declared.iter().position(|s| latest(s).is_none())?;
    // the step before the missing one settled then; the next is owed within the gap
    let before = missing.checked_sub(1).and_then(|k| latest(&declared[k]));
    let last_change = ops.iter().map(|o| o.updated_at).max()?;
    Some(Waiting {
        since: before.map_or(last_change, |o| o.updated_at),
        after: before.map(|o| o.step.clone()),
        next: declared[missing].clone(),
    })
}

#[cfg(test)]
#[path = "run_tests.rs"]
mod tests;
