//! `settle run show` out: a run's state, its safe next step, and its steps one line each.

use chrono::{DateTime, Utc};

use super::esc;
use crate::domain::{State, format_age};
use crate::ledger::RunView;

/// A step's mark: done, an exception or closed without being done, never recorded, under way.
fn mark(state: &str, done: bool) -> &'static str {
    match (done, State::parse(state)) {
        (true, _) => "✓",
        (false, Ok(s)) if s.is_exception() || s == State::Closed => "✗",
        (false, Ok(_)) => "…",
        (false, Err(_)) => "○",
    }
}

pub fn run(v: &RunView, now: DateTime<Utc>) {
    say!("run          {}", esc(&v.run));
    say!("workflow     {}", esc(&v.workflow));
    say!(
        "state        {} (since {} ago)",
        v.state,
        format_age(now - v.since)
    );
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
        let what = if s.done {
            s.reference
                .as_deref()
                .map_or(String::new(), |r| esc(r).into_owned())
        } else {
            s.state.replace('_', " ")
        };
        say!(
            "  {} {:<width$}  {}",
            mark(&s.state, s.done),
            esc(&s.step),
            what
        );
    }
}
