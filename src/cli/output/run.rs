//! `settle run show` out: a run's state, its safe next step, and its steps one line each.

use chrono::{DateTime, Utc};

use super::text::esc;
use crate::domain::format_age;
use crate::ledger::{RunSummary, RunView};

pub fn run(v: &RunView, now: DateTime<Utc>) {
    say!("run          {}", esc(&v.run));
    say!("workflow     {}", esc(&v.workflow));
    say!(
        "state        {} (since {} ago)",
        v.state,
        format_age(now - v.since)
    );
    if let Some(by) = &v.claimed_by {
        say!("claimed by   {}", esc(by));
    }
    if let Some(r) = v.resolution {
        say!("closed as    {}", r.as_str());
    }
    say!("safe next    {}", esc(&v.next_step));
    if !v.declared {
        say!("steps        (the workflow declares none: settle cannot know a step is missing)");
    } else {
        say!("steps");
    }
    let width = v
        .steps
        .iter()
        .map(|s| s.step.chars().count())
        .max()
        .unwrap_or(0);
    for s in &v.steps {
        say!(
            "  {} {:<width$}  {}",
            s.mark(),
            esc(&s.step),
            esc(&s.shown())
        );
    }
}

/// `settle runs`: one line a run, and beside a workflow without declared steps that its runs
/// are never stalled.
pub fn runs(runs: &[RunSummary], now: DateTime<Utc>) {
    if runs.is_empty() {
        say!("no runs");
        return;
    }
    say!(
        "{:<24} {:<16} {:<8} {:>5}  {:<18} {:>6}  CLAIMED",
        "RUN",
        "WORKFLOW",
        "STATE",
        "DONE",
        "CURRENT STEP",
        "SINCE"
    );
    let mut undeclared = std::collections::BTreeSet::new();
    for r in runs {
        let done = if r.steps == 0 {
            undeclared.insert(r.workflow.as_str());
            format!("{}/-", r.done_steps)
        } else {
            format!("{}/{}", r.done_steps, r.steps)
        };
        say!(
            "{:<24} {:<16} {:<8} {:>5}  {:<18} {:>6}  {}",
            esc(&r.run),
            esc(&r.workflow),
            r.state.as_str(),
            done,
            esc(r.current_step.as_deref().unwrap_or("-")),
            format_age(now - r.since),
            r.claimed_by
                .as_deref()
                .map_or("-".into(), |c| esc(c).into_owned())
        );
    }
    for w in undeclared {
        say!(
            "workflow {} declares no steps: settle cannot know a step is missing, so its runs are never stalled",
            esc(w)
        );
    }
}
