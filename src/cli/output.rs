//! What the CLI prints: tables and text with stored text escaped, JSON documents with snake_case.

use std::borrow::Cow;
use std::io::Write;

use chrono::{DateTime, Utc};
use serde::Serialize;

use crate::domain::patterns::is_hostile;
use crate::domain::{escape_text, format_age};
use crate::error::{Error, Result};
use crate::ledger::{Applied, Ledger, ListFilter, OperationDetail, OperationView, Stats};

const PAGE: usize = 500;

pub fn esc(text: &str) -> Cow<'_, str> {
    escape_text(text)
}

fn io(e: std::io::Error) -> Error {
    Error::Invalid(format!("cannot write output: {e}"))
}

/// serde_json's formatting, with every character of [`is_hostile`] written as `\uXXXX` as well:
/// serde_json escapes the C0 controls but leaves C1 controls, DEL, bidi overrides, zero-width
/// characters and U+2028/U+2029 as they are, and a terminal showing `--json` would act on them
/// (SPEC 12). The layout is the inner formatter's.
struct Safe<F>(F);

impl<F: serde_json::ser::Formatter> serde_json::ser::Formatter for Safe<F> {
    fn write_string_fragment<W: ?Sized + Write>(
        &mut self,
        w: &mut W,
        fragment: &str,
    ) -> std::io::Result<()> {
        let mut start = 0;
        for (i, c) in fragment.char_indices() {
            if is_hostile(c) {
                w.write_all(&fragment.as_bytes()[start..i])?;
                write!(w, "\\u{:04x}", c as u32)?;
                start = i + c.len_utf8();
            }
        }
        w.write_all(&fragment.as_bytes()[start..])
    }
    fn begin_array<W: ?Sized + Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        self.0.begin_array(w)
    }
    fn end_array<W: ?Sized + Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        self.0.end_array(w)
    }
    fn begin_array_value<W: ?Sized + Write>(
        &mut self,
        w: &mut W,
        first: bool,
    ) -> std::io::Result<()> {
        self.0.begin_array_value(w, first)
    }
    fn end_array_value<W: ?Sized + Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        self.0.end_array_value(w)
    }
    fn begin_object<W: ?Sized + Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        self.0.begin_object(w)
    }
    fn end_object<W: ?Sized + Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        self.0.end_object(w)
    }
    fn begin_object_key<W: ?Sized + Write>(
        &mut self,
        w: &mut W,
        first: bool,
    ) -> std::io::Result<()> {
        self.0.begin_object_key(w, first)
    }
    fn end_object_key<W: ?Sized + Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        self.0.end_object_key(w)
    }
    fn begin_object_value<W: ?Sized + Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        self.0.begin_object_value(w)
    }
    fn end_object_value<W: ?Sized + Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        self.0.end_object_value(w)
    }
}

/// A value as JSON text that is safe to show on a terminal: pretty (indented) or on one line.
pub fn to_json<T: Serialize>(
    value: &T,
    pretty: bool,
) -> std::result::Result<String, serde_json::Error> {
    let mut out = Vec::with_capacity(256);
    if pretty {
        let mut ser = serde_json::Serializer::with_formatter(
            &mut out,
            Safe(serde_json::ser::PrettyFormatter::new()),
        );
        value.serialize(&mut ser)?;
    } else {
        let mut ser = serde_json::Serializer::with_formatter(
            &mut out,
            Safe(serde_json::ser::CompactFormatter),
        );
        value.serialize(&mut ser)?;
    }
    // serde_json writes UTF-8, and the escapes above are ASCII
    Ok(String::from_utf8(out).unwrap_or_default())
}

pub fn json<T: Serialize>(value: &T) {
    match to_json(value, true) {
        Ok(text) => say!("{text}"),
        Err(e) => crate::tell!("settle: cannot encode JSON: {e}"),
    }
}

/// What a script following the protocol (SPEC 11) reads after `record`, `start` or `attempt`
/// with `--json`: whether it may send now, and the attempt to report.
#[derive(Serialize)]
struct Step<'a> {
    key: &'a str,
    state: &'a str,
    attempt: Option<u32>,
    send: bool,
    next_step: &'a str,
}

pub fn step(detail: &OperationDetail, attempt: Option<u32>, send: bool) {
    json(&Step {
        key: &detail.op.key,
        state: detail.op.state.as_str(),
        attempt,
        send,
        next_step: &detail.op.next_step,
    });
}

pub fn applied(a: &Applied, what: &str) {
    let key = esc(&a.key);
    match a.kind {
        None => say!("{key}: nothing to change ({})", a.to),
        Some(_) if a.from == a.to => say!("{key}: {what} ({})", a.to),
        Some(_) => say!("{key}: {what}: {} -> {}", a.from, a.to),
    }
    if let Some(w) = &a.warning {
        crate::tell!("warning: {}", esc(w));
    }
}

fn cut(text: &str, width: usize) -> String {
    let text = esc(text);
    if text.chars().count() <= width {
        format!("{text:<width$}")
    } else {
        let mut s: String = text.chars().take(width.saturating_sub(1)).collect();
        s.push('…');
        s
    }
}

fn row(v: &OperationView) -> String {
    format!(
        "{} {} {} {} {} {} {}",
        cut(&format_age(chrono::TimeDelta::seconds(v.age_seconds)), 7),
        cut(v.state.as_str(), 10),
        cut(&format!("{}/{}", v.workflow, v.step), 26),
        cut(&v.destination, 10),
        cut(&v.key, 22),
        cut(v.claimed_by.as_deref().unwrap_or("-"), 10),
        esc(&v.next_step)
    )
}

/// Streams a list page by page (keyset pagination): memory stays flat whatever the queue's size.
/// How `settle list` writes its rows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ListFormat {
    Text,
    Json,
    /// For a spreadsheet or a destination's support team (SPEC 16): one header line, then a row
    /// per operation.
    Csv,
}

pub async fn list(
    ledger: &Ledger,
    filter: &ListFilter,
    viewer: &str,
    format: ListFormat,
    limit: Option<usize>,
) -> Result<()> {
    let mut out = std::io::BufWriter::new(crate::out::stdout());
    let result = stream(ledger, filter, viewer, format, limit, &mut out).await;
    match result.and_then(|()| out.flush().map_err(Failure::Io)) {
        Ok(()) => Ok(()),
        // the reader went away (`settle list | head`): a quiet end, as for any Unix tool
        Err(Failure::Io(e)) if e.kind() == std::io::ErrorKind::BrokenPipe => {
            crate::stdout_failed(&e);
            Ok(())
        }
        Err(Failure::Io(e)) => Err(io(e)),
        Err(Failure::Ledger(e)) => Err(e),
    }
}

enum Failure {
    Io(std::io::Error),
    Ledger(Error),
}

async fn stream(
    ledger: &Ledger,
    filter: &ListFilter,
    viewer: &str,
    format: ListFormat,
    limit: Option<usize>,
    out: &mut impl Write,
) -> std::result::Result<(), Failure> {
    let mut after = None;
    let mut first = true;
    let mut left = limit.unwrap_or(usize::MAX);
    let as_json = format == ListFormat::Json;
    if as_json {
        write!(out, "[").map_err(Failure::Io)?;
    } else if format == ListFormat::Csv {
        writeln!(out, "{}", CSV_COLUMNS.join(",")).map_err(Failure::Io)?;
    } else {
        writeln!(
            out,
            "{:<7} {:<10} {:<26} {:<10} {:<22} {:<10} SAFE NEXT STEP",
            "AGE", "STATE", "WORKFLOW/STEP", "DEST", "KEY", "CLAIM"
        )
        .map_err(Failure::Io)?;
    }
    while left > 0 {
        let page = ledger
            .list(filter, viewer, after, PAGE.min(left))
            .await
            .map_err(Failure::Ledger)?;
        left = left.saturating_sub(page.items.len());
        for v in &page.items {
            if as_json {
                let text = to_json(v, false).unwrap_or_default();
                write!(out, "{}\n  {text}", if first { "" } else { "," }).map_err(Failure::Io)?;
            } else if format == ListFormat::Csv {
                writeln!(out, "{}", csv_row(v)).map_err(Failure::Io)?;
            } else {
                writeln!(out, "{}", row(v)).map_err(Failure::Io)?;
            }
            first = false;
        }
        match page.next {
            Some(c) => after = Some(c),
            None => break,
        }
    }
    if as_json {
        writeln!(out, "{}]", if first { "" } else { "\n" }).map_err(Failure::Io)?;
    }
    Ok(())
}

const CSV_COLUMNS: [&str; 12] = [
    "key",
    "state",
    "workflow",
    "step",
    "destination",
    "action",
    "created_at",
    "age_seconds",
    "attempts",
    "claimed_by",
    "reference",
    "next_step",
];

fn csv_row(v: &crate::ledger::OperationView) -> String {
    let cells = [
        v.key.clone(),
        v.state.as_str().to_string(),
        v.workflow.clone(),
        v.step.clone(),
        v.destination.clone(),
        v.action.clone(),
        v.created_at
            .to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
        v.age_seconds.to_string(),
        v.attempts.to_string(),
        v.claimed_by.clone().unwrap_or_default(),
        v.reference.clone().unwrap_or_default(),
        v.next_step.clone(),
    ];
    cells
        .iter()
        .map(|c| csv_cell(c))
        .collect::<Vec<_>>()
        .join(",")
}

/// One CSV cell: escaped like everything settle prints, quoted where it holds a comma, a quote or
/// a line break, and never read as a formula by a spreadsheet (a leading `=`, `+`, `-` or `@`
/// gets a `'` before it).
fn csv_cell(text: &str) -> String {
    let text = esc(text).into_owned();
    let text = if text.starts_with(['=', '+', '-', '@']) {
        format!("'{text}")
    } else {
        text
    };
    if text.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", text.replace('"', "\"\""))
    } else {
        text
    }
}

fn when(t: DateTime<Utc>) -> String {
    t.format("%Y-%m-%d %H:%M:%S UTC").to_string()
}

pub fn show(d: &OperationDetail, now: DateTime<Utc>) {
    let v = &d.op;
    say!("key          {}", esc(&v.key));
    say!(
        "state        {}{}",
        v.state,
        v.reason
            .as_deref()
            .map(|r| format!(" ({})", esc(r)))
            .unwrap_or_default()
    );
    say!("safe next    {}", esc(&v.next_step));
    say!(
        "workflow     {}/{}{}",
        esc(&v.workflow),
        esc(&v.step),
        if v.workflow_paused { " (paused)" } else { "" }
    );
    say!(
        "destination  {} {}{}",
        esc(&v.destination),
        esc(&v.action),
        if v.destination_paused {
            " (paused)"
        } else {
            ""
        }
    );
    say!(
        "created      {} ({} ago)",
        when(v.created_at),
        format_age(now - v.created_at)
    );
    if let Some(t) = v.exception_since {
        say!("exception    since {} ({})", when(t), format_age(now - t));
    }
    if let Some(t) = v.next_attempt_at {
        say!("next attempt {}", when(t));
    }
    if let Some(by) = &v.claimed_by {
        let until = v.claim_expires_at.map(when).unwrap_or_default();
        say!("claimed by   {} until {until}", esc(by));
    }
    if let Some(r) = &v.reference {
        say!("reference    {}", esc(r));
    }
    if let Some(r) = v.resolution {
        say!(
            "resolution   {}{}",
            r.as_str(),
            v.superseded_by
                .as_deref()
                .map(|k| format!(" by {}", esc(k)))
                .unwrap_or_default()
        );
    }
    say!("fingerprint  {}", d.fingerprint);
    say!(
        "payload      {}",
        esc(&serde_json::to_string_pretty(&d.payload).unwrap_or_default())
            .replace("\\x0a", "\n             ")
    );
    if let (Some(p), Some(f)) = (&d.conflicting_payload, &d.conflicting_fingerprint) {
        say!("conflicting  {f}");
        say!(
            "             {}",
            esc(&serde_json::to_string(p).unwrap_or_default())
        );
    }
    say!(
        "attempts     {}",
        if d.attempt_log.is_empty() {
            "none yet"
        } else {
            ""
        }
    );
    for a in &d.attempt_log {
        let outcome = a.outcome.map_or("in flight".to_string(), |o| o.to_string());
        let mut line = format!(
            "  #{} {} {} by {}",
            a.n,
            when(a.started_at),
            outcome,
            esc(&a.actor)
        );
        if let Some(s) = a.http_status {
            line.push_str(&format!(" HTTP {s}"));
        }
        if let Some(r) = &a.reference {
            line.push_str(&format!(" ref {}", esc(r)));
        }
        if let Some(e) = &a.error {
            line.push_str(&format!(": {}", esc(e)));
        }
        say!("{line}");
    }
    say!("history");
    for e in &d.history {
        let states = match (&e.from_state, &e.to_state) {
            (Some(f), Some(t)) if f != t => format!(" {f} -> {t}"),
            (None, Some(t)) => format!(" -> {t}"),
            _ => String::new(),
        };
        let detail = match &e.detail {
            serde_json::Value::Object(m) if m.values().all(|v| v.is_null()) => String::new(),
            serde_json::Value::Object(m) if m.is_empty() => String::new(),
            other => format!(" {}", esc(&other.to_string())),
        };
        say!(
            "  {} {} {}{states}{detail}",
            when(e.at),
            esc(&e.actor),
            esc(&e.kind)
        );
    }
}

pub fn stats(s: &Stats) {
    for (state, n) in &s.by_state {
        say!("{:<11} {n}", state.as_str());
    }
    say!("exceptions  {}", s.exceptions);
    say!(
        "oldest      {}",
        s.oldest_exception_seconds
            .map_or("-".to_string(), |secs| format_age(
                chrono::TimeDelta::seconds(secs)
            ))
    );
    let listed = |names: &[String]| {
        if names.is_empty() {
            "-".to_string()
        } else {
            esc(&names.join(", ")).into_owned()
        }
    };
    say!("paused      {}", listed(&s.paused_workflows));
    say!("paused dest {}", listed(&s.paused_destinations));
}

/// A bulk action's preview (SPEC 16): "retry 212: 180 to do; left alone: 12 claimed by another,
/// 8 unknown at a destination that does not deduplicate". `json`: `matched`, `eligible`, `refused`.
pub fn bulk_preview(verb: &str, p: &crate::ledger::BulkPreview, as_json: bool) {
    if as_json {
        json(p);
        return;
    }
    say!("{}", esc(&p.summary(verb)));
}

/// A bulk action's summary line (SPEC 16), or with `json` the whole report.
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

/// `settle report` as text (SPEC 18): what a person pastes into a post-release review.
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
    let d = &r.duplicates;
    say!(
        "duplicates: {} cleaned up (closed as duplicate_cleaned_up), {} conflicts (a key came with new contents), {} prevented (unknown outcomes found done by lookup or reconcile: a blind retry would have repeated them)",
        d.cleaned_up,
        d.conflicts,
        d.prevented
    );
}
