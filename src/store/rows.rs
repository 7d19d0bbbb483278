//! Rows as the store reads them, mapped to the domain's plain data.

use chrono::{DateTime, Utc};
use sqlx::Row;
use sqlx::any::AnyRow;

use crate::domain::{Claim, Op, Outcome, Resolution, State};
use crate::error::{Error, Result};

pub(crate) fn ms(t: DateTime<Utc>) -> i64 {
    t.timestamp_millis()
}

pub(crate) fn opt_ms(t: Option<DateTime<Utc>>) -> Option<i64> {
    t.map(ms)
}

pub(crate) fn time(ms: i64) -> DateTime<Utc> {
    DateTime::from_timestamp_millis(ms).unwrap_or_default()
}

fn corrupt(what: &str) -> Error {
    Error::Unavailable(format!(
        "the database holds a row settle cannot read ({what})"
    ))
}

/// The two kinds of cell settle stores, read from any backend's row type. (The list query runs
/// on the backend's own driver, which decodes lazily; everything else goes through `Any`.)
pub(crate) trait Cells {
    fn int(&self, col: Col) -> Result<Option<i64>>;
    fn text(&self, col: Col) -> Result<Option<String>>;
}

/// A column by name, or by position (for the operation columns, read on every list row: a
/// lookup by name hashes the name each time).
#[derive(Clone, Copy, Debug)]
pub(crate) enum Col {
    Name(&'static str),
    At(usize),
}

impl From<&'static str> for Col {
    fn from(name: &'static str) -> Col {
        Col::Name(name)
    }
}

impl Col {
    fn name(self) -> &'static str {
        match self {
            Col::Name(n) => n,
            Col::At(i) => OP_COLUMN_NAMES.get(i).copied().unwrap_or("?"),
        }
    }
}

macro_rules! cells {
    ($($row:ty),*) => {$(
        impl Cells for $row {
            fn int(&self, col: Col) -> Result<Option<i64>> {
                match col {
                    Col::Name(n) => self.try_get::<Option<i64>, _>(n),
                    Col::At(i) => self.try_get::<Option<i64>, _>(i),
                }
                .map_err(|_| corrupt(col.name()))
            }
            fn text(&self, col: Col) -> Result<Option<String>> {
                match col {
                    Col::Name(n) => self.try_get::<Option<String>, _>(n),
                    Col::At(i) => self.try_get::<Option<String>, _>(i),
                }
                .map_err(|_| corrupt(col.name()))
            }
        }
    )*};
}
cells!(AnyRow, sqlx::sqlite::SqliteRow, sqlx::postgres::PgRow);

pub(crate) trait FromCell: Sized {
    fn read(row: &impl Cells, col: Col) -> Result<Self>;
}

impl FromCell for Option<i64> {
    fn read(row: &impl Cells, col: Col) -> Result<Self> {
        row.int(col)
    }
}

impl FromCell for i64 {
    fn read(row: &impl Cells, col: Col) -> Result<Self> {
        row.int(col)?.ok_or_else(|| corrupt(col.name()))
    }
}

impl FromCell for Option<String> {
    fn read(row: &impl Cells, col: Col) -> Result<Self> {
        row.text(col)
    }
}

impl FromCell for String {
    fn read(row: &impl Cells, col: Col) -> Result<Self> {
        row.text(col)?.ok_or_else(|| corrupt(col.name()))
    }
}

pub(crate) fn get<T: FromCell>(row: &impl Cells, col: impl Into<Col>) -> Result<T> {
    T::read(row, col.into())
}

fn get_time(row: &impl Cells, col: impl Into<Col>) -> Result<Option<DateTime<Utc>>> {
    Ok(get::<Option<i64>>(row, col)?.map(time))
}

pub(crate) const OP_COLUMNS: &str = "id, key, workflow, step, destination, action, payload, fingerprint, \
    conflicting_payload, conflicting_fingerprint, state, reason, attempts, budget_start, ambiguous, \
    first_sent_at, attempt_started_at, next_attempt_at, reference, last_error, created_at, updated_at, \
    exception_since, claimed_by, claimed_at, claim_expires_at, resolution, superseded_by, version";

const OP_COLUMN_NAMES: [&str; 29] = [
    "id",
    "key",
    "workflow",
    "step",
    "destination",
    "action",
    "payload",
    "fingerprint",
    "conflicting_payload",
    "conflicting_fingerprint",
    "state",
    "reason",
    "attempts",
    "budget_start",
    "ambiguous",
    "first_sent_at",
    "attempt_started_at",
    "next_attempt_at",
    "reference",
    "last_error",
    "created_at",
    "updated_at",
    "exception_since",
    "claimed_by",
    "claimed_at",
    "claim_expires_at",
    "resolution",
    "superseded_by",
    "version",
];

/// The position of an operation column in `OP_COLUMNS`, found at compile time.
const fn op_index(name: &str) -> usize {
    let mut i = 0;
    while i < OP_COLUMN_NAMES.len() {
        let (a, b) = (OP_COLUMN_NAMES[i].as_bytes(), name.as_bytes());
        if a.len() == b.len() {
            let mut j = 0;
            while j < a.len() && a[j] == b[j] {
                j += 1;
            }
            if j == a.len() {
                return i;
            }
        }
        i += 1;
    }
    panic!("not an operation column")
}

macro_rules! op_col {
    ($name:literal) => {{
        const I: usize = op_index($name);
        Col::At(I)
    }};
}

/// An operation with its row id.
pub(crate) fn op_from_row(row: &impl Cells) -> Result<(i64, Op)> {
    let state: String = get(row, op_col!("state"))?;
    let resolution: Option<String> = get(row, op_col!("resolution"))?;
    let claim = match (
        get::<Option<String>>(row, op_col!("claimed_by"))?,
        get_time(row, op_col!("claimed_at"))?,
        get_time(row, op_col!("claim_expires_at"))?,
    ) {
        (Some(by), Some(since), Some(expires)) => Some(Claim { by, since, expires }),
        _ => None,
    };
    let op = Op {
        key: get(row, op_col!("key"))?,
        workflow: get(row, op_col!("workflow"))?,
        step: get(row, op_col!("step"))?,
        destination: get(row, op_col!("destination"))?,
        action: get(row, op_col!("action"))?,
        payload: get(row, op_col!("payload"))?,
        fingerprint: get(row, op_col!("fingerprint"))?,
        conflicting_payload: get(row, op_col!("conflicting_payload"))?,
        conflicting_fingerprint: get(row, op_col!("conflicting_fingerprint"))?,
        state: State::parse(&state).map_err(|_| corrupt("state"))?,
        reason: get(row, op_col!("reason"))?,
        attempts: get::<i64>(row, op_col!("attempts"))? as u32,
        budget_start: get::<i64>(row, op_col!("budget_start"))? as u32,
        ambiguous: get::<i64>(row, op_col!("ambiguous"))? != 0,
        first_sent_at: get_time(row, op_col!("first_sent_at"))?,
        attempt_started_at: get_time(row, op_col!("attempt_started_at"))?,
        next_attempt_at: get_time(row, op_col!("next_attempt_at"))?,
        reference: get(row, op_col!("reference"))?,
        last_error: get(row, op_col!("last_error"))?,
        created_at: time(get(row, op_col!("created_at"))?),
        updated_at: time(get(row, op_col!("updated_at"))?),
        exception_since: get_time(row, op_col!("exception_since"))?,
        claim,
        resolution: resolution
            .map(|r| Resolution::parse(&r).map_err(|_| corrupt("resolution")))
            .transpose()?,
        superseded_by: get(row, op_col!("superseded_by"))?,
        version: get(row, op_col!("version"))?,
    };
    Ok((get(row, op_col!("id"))?, op))
}

/// One attempt as stored (error and reference still raw: the ledger redacts them).
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct AttemptRow {
    pub n: u32,
    pub actor: String,
    pub started_at: DateTime<Utc>,
    pub finished_at: Option<DateTime<Utc>>,
    pub outcome: Option<Outcome>,
    pub http_status: Option<u16>,
    pub reference: Option<String>,
    pub error: Option<String>,
}

pub(crate) fn attempt_from_row(row: &impl Cells) -> Result<AttemptRow> {
    let outcome: Option<String> = get(row, "outcome")?;
    Ok(AttemptRow {
        n: get::<i64>(row, "n")? as u32,
        actor: get(row, "actor")?,
        started_at: time(get(row, "started_at")?),
        finished_at: get_time(row, "finished_at")?,
        outcome: outcome
            .map(|o| Outcome::parse(&o).map_err(|_| corrupt("outcome")))
            .transpose()?,
        http_status: get::<Option<i64>>(row, "http_status")?.map(|s| s as u16),
        reference: get(row, "reference")?,
        error: get(row, "error")?,
    })
}

/// One audit event as stored.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct EventRow {
    pub id: i64,
    pub operation_id: Option<i64>,
    pub workflow: Option<String>,
    pub at: DateTime<Utc>,
    pub actor: String,
    pub kind: String,
    pub from_state: Option<String>,
    pub to_state: Option<String>,
    pub detail: String,
}

pub(crate) fn event_from_row(row: &impl Cells) -> Result<EventRow> {
    Ok(EventRow {
        id: get(row, "id")?,
        operation_id: get(row, "operation_id")?,
        workflow: get(row, "workflow")?,
        at: time(get(row, "at")?),
        actor: get(row, "actor")?,
        kind: get(row, "kind")?,
        from_state: get(row, "from_state")?,
        to_state: get(row, "to_state")?,
        detail: get(row, "detail")?,
    })
}

#[derive(Clone, Debug, PartialEq)]
pub(crate) struct WorkflowRow {
    pub name: String,
    pub paused: bool,
    pub paused_reason: Option<String>,
    pub paused_by: Option<String>,
    pub paused_at: Option<DateTime<Utc>>,
    pub version: i64,
}

pub(crate) fn workflow_from_row(row: &impl Cells) -> Result<WorkflowRow> {
    Ok(WorkflowRow {
        name: get(row, "name")?,
        paused: get::<i64>(row, "paused")? != 0,
        paused_reason: get(row, "paused_reason")?,
        paused_by: get(row, "paused_by")?,
        paused_at: get_time(row, "paused_at")?,
        version: get(row, "version")?,
    })
}
