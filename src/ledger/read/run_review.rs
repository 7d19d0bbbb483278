//! The review's runs (manual: Runs, The review after a release): how many started, were done, stalled and were closed
//! in the window, how many are stalled now, and per declared step transition the time from one
//! step settling to the next being recorded (p50, p90) over the latest runs started in it.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use serde::Serialize;

use super::Reader;
use crate::domain::run::RunOp;
use crate::error::Result;
use crate::ledger::run_rows::run_op;

/// The runs of a review's window.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct RunsReview {
    pub started: i64,
    pub done: i64,
    /// Stalled in the window: since rerun, or stalled still.
    pub stalled: i64,
    pub closed: i64,
    /// Stalled now, whenever they stalled.
    pub stalled_now: i64,
    /// Per declared step transition, over the latest 10,000 runs started in the window.
    pub transitions: Vec<StepTransition>,
}

/// From one declared step settling to the next one being recorded.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct StepTransition {
    pub workflow: String,
    pub from: String,
    pub to: String,
    pub count: usize,
    pub p50_seconds: Option<i64>,
    pub p90_seconds: Option<i64>,
}

impl Reader<'_> {
    /// The runs of the window `[since, now]`, of `workflow` or all.
    pub(super) async fn run_review(
        self,
        since: DateTime<Utc>,
        workflow: Option<&str>,
    ) -> Result<RunsReview> {
        let now = self.0.now();
        let counts = self.0.store.run_counts(since, now, workflow).await?;
        let (upper, upper_other) = self.stall_cutoffs_at(now);
        let (lower, lower_other) = self.stall_cutoffs_at(since);
        let upper: Vec<_> = upper
            .into_iter()
            .filter(|(w, _)| workflow.is_none_or(|x| x == w))
            .collect();
        let stalled_in = self
            .0
            .store
            .count_stalled_between(&upper, upper_other, &lower, lower_other)
            .await?;
        let stalled_now: i64 = self
            .stalled_counts()
            .await?
            .iter()
            .filter(|(w, _, _)| workflow.is_none_or(|x| x == w))
            .map(|(_, n, _)| n)
            .sum();
        let mut by_run: BTreeMap<String, (String, Vec<RunOp>)> = BTreeMap::new();
        for (w, o) in self
            .0
            .store
            .steps_of_recent_runs(since, now, workflow)
            .await?
        {
            by_run
                .entry(o.run.clone())
                .or_insert_with(|| (w, Vec::new()))
                .1
                .push(run_op(o, now));
        }
        let mut took: BTreeMap<(String, usize), Vec<i64>> = BTreeMap::new();
        for (w, ops) in by_run.values() {
            let declared = self.0.run_rules(w).0;
            let latest = |step: &str| {
                ops.iter()
                    .filter(|o| o.step == step)
                    .max_by_key(|o| o.recorded_at)
            };
            for k in 1..declared.len() {
                if let (Some(a), Some(b)) = (latest(&declared[k - 1]), latest(&declared[k]))
                    && a.is_done()
                {
                    let secs = (b.recorded_at - a.updated_at).num_seconds().max(0);
                    took.entry((w.clone(), k)).or_default().push(secs);
                }
            }
        }
        let transitions = took
            .into_iter()
            .map(|((w, k), mut v)| {
                v.sort_unstable();
                let declared = self.0.run_rules(&w).0;
                StepTransition {
                    from: declared[k - 1].clone(),
                    to: declared[k].clone(),
                    workflow: w,
                    count: v.len(),
                    p50_seconds: crate::domain::time::percentile(&v, 50),
                    p90_seconds: crate::domain::time::percentile(&v, 90),
                }
            })
            .collect();
        Ok(RunsReview {
            started: counts.started,
            done: counts.done,
            stalled: counts.stalled_then_rerun + stalled_in,
            closed: counts.closed,
            stalled_now,
            transitions,
        })
    }
}
