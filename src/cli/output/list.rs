//! `settle list` out: text, CSV or JSON lines, streamed page by page.

use std::io::Write;

use super::text::esc;
use crate::domain::format_age;
use crate::error::{Error, Result};
use crate::ledger::{Ledger, ListFilter, OperationView};

use super::json::to_json;

/// How many rows a page of `settle list` reads at a time.
const PAGE: usize = 500;

/// A column of the table: the text escaped, in `width` columns of the terminal (by display
/// width, so that a name two columns a character wide keeps the columns after it in line).
fn cut(text: &str, width: usize) -> String {
    crate::domain::escapes::fit_width(&esc(text), width, true)
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
    /// For a spreadsheet or a destination's support team (manual: Many at once): one header line, then a row
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
        Err(Failure::Io(e)) => Err(Error::Invalid(format!("cannot write output: {e}"))),
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
            .read()
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
