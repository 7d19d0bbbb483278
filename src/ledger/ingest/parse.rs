//! One line of `settle ingest` read: its fields checked, by type, into what the batch takes.

use serde::Deserialize;
use serde_json::Value;

use crate::domain::redact::redact_text;
use crate::domain::{Op, Outcome, escape_text};
use crate::error::Result;
use crate::ledger::{AttemptReport, Intent, Ledger};

/// One line as written: a plain struct rather than an enum tagged by `type`, because serde reads a
/// tagged enum through a buffer that turns numbers written in full (`arbitrary_precision`, which
/// keeps a payload's numbers as given) into maps; which fields each type needs is checked after.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawLine {
    #[serde(rename = "type")]
    kind: String,
    key: Option<String>,
    workflow: Option<String>,
    step: Option<String>,
    destination: Option<String>,
    action: Option<String>,
    #[serde(default, deserialize_with = "strict_payload")]
    payload: Option<Value>,
    run: Option<String>,
    attempt: Option<u32>,
    outcome: Option<Outcome>,
    error: Option<String>,
    http_status: Option<u16>,
    reference: Option<String>,
}

fn strict_payload<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<Value>, D::Error> {
    crate::domain::payload::deserialize_strict(d).map(Some)
}

/// The fields of a line of type `kind` that another type owns.
fn foreign_fields(line: &RawLine) -> Vec<&'static str> {
    let intent = [
        ("workflow", line.workflow.is_some()),
        ("step", line.step.is_some()),
        ("destination", line.destination.is_some()),
        ("action", line.action.is_some()),
        ("payload", line.payload.is_some()),
        ("run", line.run.is_some()),
    ];
    let attempt = [
        ("attempt", line.attempt.is_some()),
        ("outcome", line.outcome.is_some()),
        ("error", line.error.is_some()),
        ("http_status", line.http_status.is_some()),
        ("reference", line.reference.is_some()),
    ];
    // a start line has a key and an attempt number only
    let start: Vec<(&'static str, bool)> = intent.iter().chain(&attempt[1..]).copied().collect();
    let other: &[(&'static str, bool)] = match line.kind.as_str() {
        "intent" => &attempt,
        "start" => &start,
        _ => &intent,
    };
    other
        .iter()
        .filter(|(_, set)| *set)
        .map(|(f, _)| *f)
        .collect()
}

pub(super) enum Parsed {
    Intent(Box<Op>, String),
    Attempt(AttemptReport),
    /// Start attempt N of this key (the caller will send it).
    Start(String, u32),
}

pub(super) fn parse_line(ledger: &Ledger, text: &str) -> std::result::Result<Parsed, String> {
    let line: RawLine = serde_json::from_str(text).map_err(|e| {
        // serde quotes the offending value: it goes through redaction like everything else.
        escape_text(&redact_text(&e.to_string())).into_owned()
    })?;
    let foreign = foreign_fields(&line);
    let missing = |fields: &[(&str, bool)]| -> std::result::Result<(), String> {
        let absent: Vec<&str> = fields
            .iter()
            .filter(|(_, set)| !set)
            .map(|(f, _)| *f)
            .collect();
        if absent.is_empty() {
            Ok(())
        } else {
            Err(format!("an {} line needs {}", line.kind, absent.join(", ")))
        }
    };
    match line.kind.as_str() {
        "intent" | "attempt" | "start" if !foreign.is_empty() => {
            return Err(format!(
                "an {} line has no field {}",
                line.kind,
                foreign.join(", ")
            ));
        }
        "intent" => missing(&[
            ("key", line.key.is_some()),
            ("workflow", line.workflow.is_some()),
            ("destination", line.destination.is_some()),
            ("action", line.action.is_some()),
            ("payload", line.payload.is_some()),
        ])?,
        "attempt" => missing(&[
            ("key", line.key.is_some()),
            ("attempt", line.attempt.is_some()),
            ("outcome", line.outcome.is_some()),
        ])?,
        "start" => missing(&[
            ("key", line.key.is_some()),
            ("attempt", line.attempt.is_some()),
        ])?,
        other => {
            return Err(format!(
                "unknown type '{}': use intent, start or attempt",
                escape_text(&redact_text(other))
            ));
        }
    }
    let key = line.key.unwrap_or_default();
    if line.kind == "start" {
        crate::domain::validate_key(&key)?;
        return match line.attempt {
            Some(0) | None => Err("attempts are numbered from 1".into()),
            Some(n) => Ok(Parsed::Start(key, n)),
        };
    }
    Ok(if line.kind == "intent" {
        let intent = Intent {
            key,
            workflow: line.workflow.unwrap_or_default(),
            step: line.step.unwrap_or_default(),
            destination: line.destination.unwrap_or_default(),
            action: line.action.unwrap_or_default(),
            payload: line.payload.unwrap_or_default(),
            run: line.run,
        };
        let op = ledger.prepare(&intent).map_err(|e| e.to_string())?;
        Parsed::Intent(Box::new(op), intent.workflow)
    } else {
        let attempt = line.attempt.unwrap_or_default();
        if attempt == 0 {
            return Err("attempts are numbered from 1".into());
        }
        let report = AttemptReport {
            key,
            attempt: Some(attempt),
            outcome: line.outcome,
            reference: line.reference,
            error: line.error,
            http_status: line.http_status,
            retry_after: None,
        };
        crate::ledger::checks::check_report(&report).map_err(|e| e.to_string())?;
        Parsed::Attempt(report)
    })
}
