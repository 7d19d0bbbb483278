//! Runs (manual: Runs) as readers see them: a run's state, derived by `domain::run` from its
//! operations and its workflow's declared steps, its safe next step, and its steps in order;
//! the list of runs (`settle runs`), and the stalled ones, found by the index of waits.

use chrono::{DateTime, TimeDelta, Utc};
use serde::Serialize;

use super::Reader;
use crate::domain::run::{self, Derived, RunOp, RunState, RunStep};
use crate::domain::run_filter::{Owners, RunFilter};
use crate::domain::time::after;
use crate::domain::{Resolution, format_age, validate_run};
use crate::error::{Error, Result};
use crate::ledger::run_rows::run_op;
use crate::ledger::views::EventView;
use crate::store::StoredRun;

/// One run, as `settle run show` gives it. Every text is redacted.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct RunView {
    pub run: String,
    pub workflow: String,
    pub state: RunState,
    pub since: DateTime<Utc>,
    pub next_step: String,
    /// Whether the workflow declares its steps (without them a run is never stalled).
    pub declared: bool,
    pub claimed_by: Option<String>,
    /// How a person closed it.
    pub resolution: Option<Resolution>,
    pub steps: Vec<RunStep>,
    /// The run's own audit events: claims, releases, notes, its close.
    pub history: Vec<EventView>,
}

/// One run as `settle runs` lists it, and as view 1 shows a stalled one.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct RunSummary {
    pub run: String,
    pub workflow: String,
    pub state: RunState,
    /// How many steps the workflow declares (0: none declared).
    pub steps: usize,
    pub done_steps: usize,
    /// The step it is at or waits on (stalled: the one never recorded).
    pub current_step: Option<String>,
    pub since: DateTime<Utc>,
    pub next_step: String,
    pub claimed_by: Option<String>,
    /// The run's row, for the next page (not shown).
    #[serde(skip)]
    pub id: i64,
    /// Stalled: when its wait began (the index's order), for the next page.
    #[serde(skip)]
    pub waiting_since: Option<DateTime<Utc>>,
}

impl Reader<'_> {
    /// A run's operations as its rules read them, each reference redacted.
    fn run_ops(self, ops: &[(i64, crate::domain::Op)]) -> Vec<RunOp> {
        let now = self.0.now();
        ops.iter()
            .map(|(_, op)| RunOp {
                key: op.key.clone(),
                step: op.step.clone(),
                state: op.state,
                resolution: op.resolution,
                exception: op.state.is_exception() || op.exception_since.is_some_and(|t| t <= now),
                reference: op.reference.as_deref().map(|r| {
                    self.0
                        .redactor
                        .scrubber_of(&op.destination, &op.action, &[op.payload.as_str()])
                        .text(r)
                }),
                recorded_at: op.created_at,
                updated_at: op.updated_at,
                superseded_by: op.superseded_by.clone(),
            })
            .collect()
    }

    /// The steps of run `run` of `workflow`, in order (an operation's detail shows them).
    pub(super) async fn run_steps(self, run: &str, workflow: &str) -> Result<Vec<RunStep>> {
        let ops = self.0.store.ops_of_run(run).await?;
        Ok(run::steps(
            self.0.run_rules(workflow).0,
            &self.run_ops(&ops),
        ))
    }
}

/// A workflow's stalled runs now.
pub(in crate::ledger) struct Stalls {
    pub workflow: String,
    pub count: i64,
    pub oldest: DateTime<Utc>,
    pub newest: DateTime<Utc>,
}

impl Reader<'_> {
    /// The run `run` now: its state, its safe next step, its steps and its own events.
    pub async fn run(self, run: &str, viewer: &str) -> Result<RunView> {
        validate_run(run).map_err(Error::Invalid)?;
        let now = self.0.now();
        let ops = self.0.store.ops_of_run(run).await?;
        let Some((_, first)) = ops.first() else {
            return Err(Error::NotFound(format!("no run {run}")));
        };
        let workflow = first.workflow.clone();
        self.0
            .check_scope(&workflow)
            .map_err(|_| Error::NotFound(format!("no run {run}")))?;
        let stored = self.0.store.run_row(run).await?;
        let (declared, _) = self.0.run_rules(&workflow);
        let declared = declared.to_vec();
        let run_ops = self.run_ops(&ops);
        let derived = self.derive_run(&workflow, stored.as_ref(), &run_ops);
        let next_step = self.run_next_step(run, &workflow, &derived, viewer).await?;
        let history = self
            .0
            .store
            .events_of_run(&workflow, run)
            .await?
            .into_iter()
            .map(|e| super::view::event_view(e, &|d| d.clone(), None))
            .collect();
        Ok(RunView {
            run: run.to_string(),
            workflow,
            state: derived.state,
            since: derived.since,
            next_step,
            declared: !declared.is_empty(),
            claimed_by: stored
                .as_ref()
                .and_then(|s| s.row.holder(now).map(String::from)),
            resolution: stored.as_ref().and_then(|s| s.row.resolution),
            steps: run::steps(&declared, &run_ops),
            history,
        })
    }

    /// The runs a filter holds, newest first (stalled ones: oldest stall first), at most `limit`.
    pub async fn runs(self, filter: &str, viewer: &str, limit: usize) -> Result<Vec<RunSummary>> {
        let filter = RunFilter::parse(filter).map_err(Error::Invalid)?;
        let mine = self.0.config.teams_of(viewer);
        if filter.only_stalled() {
            let mut out = self.stalled_runs(None, limit, viewer).await?;
            out.retain(|r| {
                filter.holds(
                    &r.run,
                    &r.workflow,
                    r.state,
                    self.owners(&r.workflow, &mine),
                )
            });
            return Ok(out);
        }
        let mut out = Vec::new();
        let mut before = None;
        loop {
            let page = self
                .0
                .store
                .runs_page(filter.workflow(), before, 500)
                .await?;
            let Some((last, _)) = page.last() else {
                break;
            };
            before = Some(*last);
            for s in self.summaries(page, viewer).await? {
                if filter.holds(
                    &s.run,
                    &s.workflow,
                    s.state,
                    self.owners(&s.workflow, &mine),
                ) {
                    out.push(s);
                    if out.len() == limit {
                        return Ok(out);
                    }
                }
            }
        }
        Ok(out)
    }

    /// Whose `workflow` is, for a runs filter's `owner:` term.
    fn owners<'a>(&'a self, workflow: &str, mine: &'a [&'a str]) -> Owners<'a> {
        Owners {
            owner: self.0.config.owner_of(workflow),
            mine,
        }
    }

    /// The stalled runs now, oldest stall first, after the page position `after` (a wait's start
    /// and the run's row): a range of the index of waits. Each is derived again from its
    /// operations, so a run the index still names but that moved on meanwhile is left out.
    pub async fn stalled_runs(
        self,
        after: Option<(DateTime<Utc>, i64)>,
        limit: usize,
        viewer: &str,
    ) -> Result<Vec<RunSummary>> {
        let (cutoffs, other) = self.stall_cutoffs();
        let rows = self
            .0
            .store
            .stalled_runs(&cutoffs, other, after, limit as i64)
            .await?;
        let mut out = self.summaries(rows, viewer).await?;
        out.retain(|s| s.state == RunState::Stalled);
        Ok(out)
    }

    /// How many runs are stalled now, by workflow, with when its oldest stalled.
    pub async fn stalled_counts(self) -> Result<Vec<(String, i64, DateTime<Utc>)>> {
        Ok(self
            .stalls()
            .await?
            .into_iter()
            .map(|s| (s.workflow, s.count, s.oldest))
            .collect())
    }

    /// The stalled runs now by workflow: how many, when the oldest and the newest stalled.
    pub(in crate::ledger) async fn stalls(self) -> Result<Vec<Stalls>> {
        let (cutoffs, other) = self.stall_cutoffs();
        let counts = self.0.store.count_stalled(&cutoffs, other).await?;
        Ok(counts
            .into_iter()
            .map(|(workflow, count, oldest, newest)| {
                let gap = self.0.run_rules(&workflow).1;
                Stalls {
                    oldest: after(oldest, gap),
                    newest: after(newest, gap),
                    workflow,
                    count,
                }
            })
            .collect())
    }

    /// For each workflow, the latest start of a wait that has stalled by now (and for any other).
    fn stall_cutoffs(self) -> (Vec<(String, DateTime<Utc>)>, DateTime<Utc>) {
        self.stall_cutoffs_at(self.0.now())
    }

    /// For each workflow, the latest start of a wait that had stalled by `t` (and for any other).
    pub(super) fn stall_cutoffs_at(
        self,
        t: DateTime<Utc>,
    ) -> (Vec<(String, DateTime<Utc>)>, DateTime<Utc>) {
        let back = |gap| {
            t - TimeDelta::from_std(gap).unwrap_or(TimeDelta::MAX) - TimeDelta::milliseconds(1)
        };
        let cutoffs = self
            .0
            .config
            .workflows
            .iter()
            .map(|(name, w)| (name.clone(), back(w.step_gap())))
            .collect();
        (cutoffs, back(crate::config::DEFAULT_STEP_GAP))
    }

    /// The runs of these rows as lists show them: their operations read in one round trip.
    async fn summaries(self, rows: Vec<(i64, StoredRun)>, viewer: &str) -> Result<Vec<RunSummary>> {
        let names: Vec<&str> = rows.iter().map(|(_, s)| s.row.run.as_str()).collect();
        let mut ops: std::collections::HashMap<String, Vec<RunOp>> = Default::default();
        let now = self.0.now();
        for o in self.0.store.ops_of_runs(&names).await? {
            ops.entry(o.run.clone()).or_default().push(run_op(o, now));
        }
        let mut out = Vec::with_capacity(rows.len());
        for (id, s) in &rows {
            let run_ops = ops.remove(&s.row.run).unwrap_or_default();
            if run_ops.is_empty() {
                continue;
            }
            let (declared, _) = self.0.run_rules(&s.row.workflow);
            let derived = self.derive_run(&s.row.workflow, Some(s), &run_ops);
            let next_step = self
                .run_next_step(&s.row.run, &s.row.workflow, &derived, viewer)
                .await?;
            let steps = run::steps(declared, &run_ops);
            out.push(RunSummary {
                run: s.row.run.clone(),
                workflow: s.row.workflow.clone(),
                state: derived.state,
                steps: declared.len(),
                done_steps: steps.iter().filter(|st| st.done).count(),
                current_step: derived.step.clone(),
                since: derived.since,
                next_step,
                claimed_by: s.row.holder(now).map(String::from),
                id: *id,
                waiting_since: s.kept.waiting_since,
            });
        }
        Ok(out)
    }

    /// The run's state from its operations, its workflow's steps and a person's close.
    fn derive_run(self, workflow: &str, stored: Option<&StoredRun>, ops: &[RunOp]) -> Derived {
        let (declared, gap) = self.0.run_rules(workflow);
        let closed = stored.and_then(|s| s.row.closed_at);
        run::derive(declared, gap, ops, closed, self.0.now())
    }

    /// The safe next step of a run in its state (manual: Runs).
    async fn run_next_step(
        self,
        run: &str,
        workflow: &str,
        derived: &Derived,
        viewer: &str,
    ) -> Result<String> {
        let now = self.0.now();
        let gap = TimeDelta::from_std(self.0.run_rules(workflow).1).unwrap_or_default();
        Ok(match derived.state {
            RunState::Stalled => format!(
                "Run {run} stopped after {} (done {} ago): {} was never recorded. Rerun the \
                 automation for {run}: its done steps answer done with their references, so none \
                 is repeated; or close the run.",
                derived.after.as_deref().unwrap_or("its last step"),
                format_age(now - (derived.since - gap)),
                derived.step.as_deref().unwrap_or("the next step"),
            ),
            RunState::Blocked | RunState::Running if derived.key.is_some() => {
                let key = derived.key.clone().unwrap_or_default();
                let step = derived.step.clone().unwrap_or_default();
                let op = self.show(&key, viewer).await?.op;
                format!("{step} ({key}): {}", op.next_step)
            }
            RunState::Running => format!(
                "Waiting for {} to be recorded (the automation has {} after a step settles)",
                derived.step.as_deref().unwrap_or("the next step"),
                format_age(gap)
            ),
            RunState::Done => "Done: nothing to do".into(),
            RunState::Closed => "Closed by a person: nothing to do".into(),
            RunState::Blocked => "Blocked: reconcile the step it waits on".into(),
        })
    }
}
