//! What the CLI prints: tables and text with stored text escaped, JSON documents with snake_case.
//!
//! Rooms: `list.rs` tables of operations, `show.rs` one operation whole, `run.rs` a run, `json.rs`
//! the `--json` documents, `text.rs` stored text escaped.

use crate::domain::format_age;
use crate::ledger::{Applied, PruneReport, Stats};

mod json;
mod list;
mod run;
mod show;
mod text;

pub use json::{json, step};
pub use list::{ListFormat, list};
pub use run::{run, runs};
pub use show::show;
pub use text::esc;

pub fn applied(a: &Applied, what: &str) {
    let key = esc(&a.key);
    // a person's action is named, to take it back by (manual: Taking an action back)
    let id = a
        .action
        .as_ref()
        .map_or(String::new(), |id| format!(" (action {})", esc(id)));
    match a.kind {
        None => say!("{key}: nothing to change ({})", a.to),
        Some(_) if a.from == a.to => say!("{key}: {what} ({}){id}", a.to),
        Some(_) => say!("{key}: {what}: {} -> {}{id}", a.from, a.to),
    }
    if let Some(w) = &a.warning {
        crate::tell!("warning: {}", esc(w));
    }
}

/// What a prune removed (or, dry, would remove).
pub fn pruned(r: &PruneReport) {
    let cutoff = |t: Option<chrono::DateTime<chrono::Utc>>| {
        t.map_or("kept".to_string(), |t| {
            format!("terminal before {}", t.format("%Y-%m-%d %H:%M UTC"))
        })
    };
    let verb = if r.dry_run { "would prune" } else { "pruned" };
    say!(
        "{verb} {} succeeded ({}) and {} closed ({}) operation(s)",
        r.succeeded,
        cutoff(r.succeeded_before),
        r.closed,
        cutoff(r.closed_before)
    );
    if let Some(a) = &r.archive
        && !r.dry_run
    {
        say!("archived {} to {}", r.archived, esc(a));
    }
    say!(
        "{verb} {} message(s) to the owners done with",
        r.notifications
    );
    if !r.dry_run {
        say!("{} pruned key(s) past their horizon freed", r.keys_freed);
    }
}

pub fn stats(s: &Stats) {
    say!("{s}");
}

/// A bulk action's preview (manual: Many at once): "retry 212: 180 to do; left alone: 12 claimed by another,
/// 8 unknown at a destination that does not deduplicate". `json`: `matched`, `eligible`, `refused`.
pub fn bulk_preview(verb: &str, p: &crate::ledger::BulkPreview, as_json: bool) {
    if as_json {
        json(p);
        return;
    }
    say!("{}", esc(&p.summary(verb)));
}

/// A bulk action's summary line (manual: Many at once), or with `json` the whole report.
pub fn bulk_report(verb: &str, r: &crate::ledger::BulkReport, as_json: bool) {
    if as_json {
        json(r);
        return;
    }
    say!("{}", esc(&r.summary(verb)));
    for (why, keys) in &r.changed_meanwhile {
        crate::tell!("  {}: {}", esc(why), esc(&keys.join(" ")));
    }
}

/// `settle report` as text (manual: The review after a release): what a person pastes into a post-release review.
pub fn review(r: &crate::ledger::Review, scope: &crate::ledger::ReviewScope) {
    let age = |s: Option<i64>| {
        s.map_or("-".to_string(), |s| {
            format_age(chrono::TimeDelta::seconds(s))
        })
    };
    let of = match (&scope.workflow, &scope.destination) {
        (Some(w), _) => format!("workflow {}", esc(w)),
        (None, Some(d)) => format!("destination {}", esc(d)),
        (None, None) => "all workflows".into(),
    };
    let window = match r.window_seconds {
        86_400 => "day".to_string(),
        s if s % 86_400 == 0 => format!("{} days", s / 86_400),
        s => format_age(chrono::TimeDelta::seconds(s)),
    };
    say!(
        "settle report: {of}, the last {window} to {}",
        r.at.format("%Y-%m-%d %H:%M UTC")
    );
    say!();
    say!("open exceptions {}", r.open_exceptions);
    let buckets: Vec<String> = r
        .age_buckets
        .iter()
        .map(|b| format!("{} {}", b.bucket, b.count))
        .collect();
    say!("  by age        {}", buckets.join(" · "));
    say!();
    say!("{:<12} {:>7} {:>9}", "day", "opened", "resolved");
    for d in &r.per_day {
        say!("{:<12} {:>7} {:>9}", d.day, d.opened, d.resolved);
    }
    for (title, table) in [
        ("workflow", &r.by_workflow),
        ("destination", &r.by_destination),
    ] {
        say!();
        say!(
            "{:<20} {:>5} {:>8} {:>7} {:>8} {:>8} {:>8} {:>11}",
            title,
            "open",
            "oldest",
            "unknown",
            "resolved",
            "p50",
            "p90",
            "auto pauses"
        );
        for (name, g) in table {
            say!(
                "{:<20} {:>5} {:>8} {:>7} {:>8} {:>8} {:>8} {:>11}",
                esc(name),
                g.open,
                age(g.oldest_seconds),
                g.unknown,
                g.resolved,
                age(g.resolve_p50_seconds),
                age(g.resolve_p90_seconds),
                g.auto_pauses
            );
        }
    }
    say!();
    let runs = &r.runs;
    say!(
        "runs: {} started, {} done, {} stalled ({} stalled now), {} closed",
        runs.started,
        runs.done,
        runs.stalled,
        runs.stalled_now,
        runs.closed
    );
    for t in &runs.transitions {
        say!(
            "  {} {} -> {}: next step recorded after p50 {}, p90 {} ({} runs)",
            esc(&t.workflow),
            esc(&t.from),
            esc(&t.to),
            age(t.p50_seconds),
            age(t.p90_seconds),
            t.count
        );
    }
    say!();
    let d = &r.duplicates;
    say!(
        "duplicates: {} cleaned up (closed as duplicate_cleaned_up), {} conflicts (a key came with new contents), {} prevented (unknown outcomes found done by lookup or reconcile: a blind retry would have repeated them)",
        d.cleaned_up,
        d.conflicts,
        d.prevented
    );
    corrections(r);
}

/// The review's corrections, by workflow and destination.
fn corrections(r: &crate::ledger::Review) {
    let by: Vec<String> = [
        ("workflow", &r.by_workflow),
        ("destination", &r.by_destination),
    ]
    .iter()
    .flat_map(|(what, t)| t.iter().map(move |(name, g)| (what, name, g)))
    .filter(|(_, _, g)| g.corrections > 0)
    .map(|(what, name, g)| format!("{what} {} {}", esc(name), g.corrections))
    .collect();
    say!(
        "corrections: {} (rejected or failed requests corrected and sent under a new key){}",
        r.corrections,
        if by.is_empty() {
            String::new()
        } else {
            format!(": {}", by.join(", "))
        }
    );
}
