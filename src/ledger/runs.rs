//! Runs (SPEC 19) as readers see them: a run's state, derived by `domain::run` from its
//! operations and its workflow's declared steps, its safe next step, and its steps in order.

use chrono::{DateTime, Utc};
use serde::Serialize;

use super::Ledger;
use crate::domain::run::{self, RunOp, RunState, RunStep};
use crate::domain::{format_age, validate_run};
use crate::error::{Error, Result};

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
    pub steps: Vec<RunStep>,
}

impl Ledger {
    /// The run `run` now: its state, its safe next step and its steps.
    pub async fn run(&self, run: &str, viewer: &str) -> Result<RunView> {
        validate_run(run).map_err(Error::Invalid)?;
        let now = self.now();
        let ops = self.store.ops_of_run(run).await?;
        let Some((_, first)) = ops.first() else {
            return Err(Error::NotFound(format!("no run {run}")));
        };
        let workflow = first.workflow.clone();
        let config = self.config.workflows.get(&workflow);
        let declared: Vec<String> = config.map(|w| w.steps.clone()).unwrap_or_default();
        let gap = config.map_or(crate::config::DEFAULT_STEP_GAP, |w| w.step_gap());
        let run_ops: Vec<RunOp> = ops
            .iter()
            .map(|(_, op)| RunOp {
                key: op.key.clone(),
                step: op.step.clone(),
                state: op.state,
                resolution: op.resolution,
                exception: op.state.is_exception() || op.exception_since.is_some_and(|t| t <= now),
                reference: op.reference.as_deref().map(|r| {
                    self.redactor
                        .scrubber_of(&op.destination, &op.action, &[op.payload.as_str()])
                        .text(r)
                }),
                recorded_at: op.created_at,
                updated_at: op.updated_at,
            })
            .collect();
        let derived = run::derive(&declared, gap, &run_ops, None, now);
        let next_step = match derived.state {
            RunState::Stalled => format!(
                "Run {run} stopped after {} (done {} ago): {} was never recorded. Rerun the \
                 automation for {run}: its done steps answer done with their references, so none \
                 is repeated; or close the run.",
                derived.after.as_deref().unwrap_or("its last step"),
                format_age(
                    now - (derived.since - chrono::TimeDelta::from_std(gap).unwrap_or_default())
                ),
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
                format_age(chrono::TimeDelta::from_std(gap).unwrap_or_default())
            ),
            RunState::Done => "Done: nothing to do".into(),
            RunState::Closed => "Closed: nothing to do".into(),
            RunState::Blocked => "Blocked: reconcile the step it waits on".into(),
        };
        Ok(RunView {
            run: run.to_string(),
            workflow,
            state: derived.state,
            since: derived.since,
            next_step,
            declared: !declared.is_empty(),
            claimed_by: None,
            steps: run::steps(&declared, &run_ops),
        })
    }
}
