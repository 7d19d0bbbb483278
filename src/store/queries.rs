//! The ledger's SQL, written once for both backends (bound parameters, `$n` placeholders).

use chrono::{DateTime, Utc};
use sqlx::AnyConnection;
use sqlx::any::AnyArguments;
use sqlx::query::Query;

use super::ReadPool;
use super::rows::*;
use crate::domain::{Op, Outcome, State};
use crate::error::{Error, Result};

pub(crate) fn db(e: sqlx::Error) -> Error {
    Error::db("database", e)
}

pub(crate) async fn load_op(conn: &mut AnyConnection, key: &str) -> Result<Option<(i64, Op)>> {
    let row = sqlx::query(&format!(
        "SELECT {OP_COLUMNS} FROM operations WHERE key = $1"
    ))
    .bind(key)
    .fetch_optional(conn)
    .await
    .map_err(db)?;
    row.as_ref().map(op_from_row).transpose()
}

/// Inserts new operations, many to a statement; returns `(id, key)` of those inserted (a key
/// already stored, or twice in `ops`, is inserted once).
pub(crate) async fn insert_ops(
    conn: &mut AnyConnection,
    ops: &[&Op],
) -> Result<Vec<(i64, String)>> {
    const WIDTH: usize = 8 + MUTABLE.len();
    let style = Marks::in_order(conn);
    let mut inserted = Vec::with_capacity(ops.len());
    for chunk in ops.chunks(500) {
        let rows: Vec<String> = (0..chunk.len())
            .map(|i| marks(style, 1 + i * WIDTH, WIDTH, &[]))
            .collect();
        let mut cells = Vec::with_capacity(chunk.len() * WIDTH);
        for op in chunk {
            cells.extend([
                Cell::Text(Some(op.key.as_str())),
                Cell::Text(Some(op.workflow.as_str())),
                Cell::Text(Some(op.step.as_str())),
                Cell::Text(Some(op.destination.as_str())),
                Cell::Text(Some(op.action.as_str())),
                Cell::Text(Some(op.payload.as_str())),
                Cell::Text(Some(op.fingerprint.as_str())),
                Cell::Int(Some(ms(op.created_at))),
            ]);
            mutable_cells(op, &mut cells);
        }
        let stmt = Stmt::new(
            format!(
                "INSERT INTO operations (key, workflow, step, destination, action, payload, fingerprint, created_at, \
                 conflicting_payload, conflicting_fingerprint, state, reason, attempts, budget_start, ambiguous, \
                 first_sent_at, attempt_started_at, next_attempt_at, reference, last_error, updated_at, \
                 exception_since, claimed_by, claimed_at, claim_expires_at, resolution, superseded_by, version) \
                 VALUES {} ON CONFLICT (key) DO NOTHING RETURNING id, key",
                rows.join(", ")
            ),
            cells,
        );
        for row in stmt.query().fetch_all(&mut *conn).await.map_err(db)? {
            inserted.push((get(&row, "id")?, get(&row, "key")?));
        }
    }
    Ok(inserted)
}

/// Inserts a new operation; `None` when the key already exists.
pub(crate) async fn insert_op(conn: &mut AnyConnection, op: &Op) -> Result<Option<i64>> {
    Ok(insert_ops(conn, &[op]).await?.pop().map(|(id, _)| id))
}

/// Appends audit events, many to a statement.
pub(crate) async fn insert_events(conn: &mut AnyConnection, events: &[NewEvent<'_>]) -> Result<()> {
    let style = Marks::in_order(conn);
    for chunk in events.chunks(500) {
        let stmt = insert_events_stmt(style, chunk);
        stmt.query().execute(&mut *conn).await.map_err(db)?;
    }
    Ok(())
}

/// The columns a transition may change, in the order `insert_op` ($9..$28) and `update_ops` bind
/// them. Not `created_at`: an update that sets a column rewrites every index holding it, changed
/// or not, and three indexes hold it.
fn mutable_cells<'a>(op: &'a Op, cells: &mut Vec<Cell<'a>>) {
    let claim = op.claim.as_ref();
    let text = |v: Option<&'a str>| Cell::Text(v);
    let int = |v: Option<i64>| Cell::Int(v);
    cells.extend([
        text(op.conflicting_payload.as_deref()),
        text(op.conflicting_fingerprint.as_deref()),
        text(Some(op.state.as_str())),
        text(op.reason.as_deref()),
        int(Some(i64::from(op.attempts))),
        int(Some(i64::from(op.budget_start))),
        int(Some(i64::from(op.ambiguous))),
        int(opt_ms(op.first_sent_at)),
        int(opt_ms(op.attempt_started_at)),
        int(opt_ms(op.next_attempt_at)),
        text(op.reference.as_deref()),
        text(op.last_error.as_deref()),
        int(Some(ms(op.updated_at))),
        int(opt_ms(op.exception_since)),
        text(claim.map(|c| c.by.as_str())),
        int(claim.map(|c| ms(c.since))),
        int(claim.map(|c| ms(c.expires))),
        text(op.resolution.map(|r| r.as_str())),
        text(op.superseded_by.as_deref()),
        int(Some(op.version)),
    ]);
}

pub(crate) struct NewEvent<'a> {
    pub operation_id: Option<i64>,
    pub workflow: Option<&'a str>,
    pub at: DateTime<Utc>,
    pub actor: &'a str,
    pub kind: &'a str,
    pub from_state: Option<State>,
    pub to_state: Option<State>,
    pub detail: &'a str,
}

impl<'a> NewEvent<'a> {
    /// The event of a change to one operation.
    pub(crate) fn on_operation(
        id: i64,
        at: DateTime<Utc>,
        actor: &'a str,
        kind: &'a str,
        from_state: Option<State>,
        to_state: State,
        detail: &'a str,
    ) -> NewEvent<'a> {
        NewEvent {
            operation_id: Some(id),
            workflow: None,
            at,
            actor,
            kind,
            from_state,
            to_state: Some(to_state),
            detail,
        }
    }
}

pub(crate) async fn insert_event(conn: &mut AnyConnection, e: &NewEvent<'_>) -> Result<()> {
    insert_events(conn, std::slice::from_ref(e)).await
}

pub(crate) struct AttemptWrite<'a> {
    pub operation_id: i64,
    pub n: u32,
    pub actor: &'a str,
    pub at: DateTime<Utc>,
    pub outcome: Outcome,
    pub http_status: Option<u16>,
    pub reference: Option<&'a str>,
    pub error: Option<&'a str>,
}

/// Writes an attempt made elsewhere, with its outcome (an open attempt is closed by
/// [`finish_attempts_stmt`]).
pub(crate) fn whole_attempt_stmt<'a>(a: &AttemptWrite<'a>) -> Stmt<'a> {
    let mut cells = Vec::with_capacity(8);
    closed_cells(a, &mut cells);
    cells.push(Cell::Text(Some(a.actor)));
    Stmt::new(
        "INSERT INTO attempts (operation_id, n, started_at, finished_at, outcome, http_status, reference, error, actor) \
         VALUES ($1, $2, $3, $3, $4, $5, $6, $7, $8)",
        cells,
    )
}

pub(crate) async fn insert_whole_attempt(
    conn: &mut AnyConnection,
    a: &AttemptWrite<'_>,
) -> Result<()> {
    let stmt = whole_attempt_stmt(a);
    stmt.query().execute(conn).await.map_err(db)?;
    Ok(())
}

const ATTEMPT_COLUMNS: &str =
    "n, actor, started_at, finished_at, outcome, http_status, reference, error";

pub(crate) fn attempt_stmt(op_id: i64, n: u32) -> Stmt<'static> {
    Stmt::new(
        format!("SELECT {ATTEMPT_COLUMNS} FROM attempts WHERE operation_id = $1 AND n = $2"),
        vec![Cell::Int(Some(op_id)), Cell::Int(Some(i64::from(n)))],
    )
}

pub(crate) async fn attempt(
    conn: &mut AnyConnection,
    op_id: i64,
    n: u32,
) -> Result<Option<AttemptRow>> {
    let stmt = attempt_stmt(op_id, n);
    let row = stmt.query().fetch_optional(conn).await.map_err(db)?;
    row.as_ref().map(attempt_from_row).transpose()
}

pub(crate) async fn attempts(conn: &mut AnyConnection, op_id: i64) -> Result<Vec<AttemptRow>> {
    let rows = sqlx::query(&format!(
        "SELECT {ATTEMPT_COLUMNS} FROM attempts WHERE operation_id = $1 ORDER BY n"
    ))
    .bind(op_id)
    .fetch_all(conn)
    .await
    .map_err(db)?;
    rows.iter().map(attempt_from_row).collect()
}

const EVENT_COLUMNS: &str =
    "id, operation_id, workflow, at, actor, kind, from_state, to_state, detail";

pub(crate) async fn events_of(conn: &mut AnyConnection, op_id: i64) -> Result<Vec<EventRow>> {
    let rows = sqlx::query(&format!(
        "SELECT {EVENT_COLUMNS} FROM events WHERE operation_id = $1 ORDER BY id"
    ))
    .bind(op_id)
    .fetch_all(conn)
    .await
    .map_err(db)?;
    rows.iter().map(event_from_row).collect()
}

pub(crate) async fn latest_event_id(conn: &mut AnyConnection) -> Result<i64> {
    let id: Option<i64> = sqlx::query_scalar("SELECT MAX(id) FROM events")
        .fetch_one(conn)
        .await
        .map_err(db)?;
    Ok(id.unwrap_or(0))
}

pub(crate) async fn count_rows(conn: &mut AnyConnection, table: &str) -> Result<i64> {
    let table = match table {
        "operations" | "attempts" | "events" | "workflows" => table,
        _ => return Err(Error::Invalid(format!("no table {table}"))),
    };
    sqlx::query_scalar(&format!("SELECT COUNT(*) FROM {table}"))
        .fetch_one(conn)
        .await
        .map_err(db)
}

pub(crate) fn workflow_stmt(name: &str) -> Stmt<'_> {
    workflow_locked_stmt(name, "")
}

/// A workflow's row, held until the transaction ends where `lock` says so.
pub(crate) fn workflow_locked_stmt<'a>(name: &'a str, lock: &str) -> Stmt<'a> {
    Stmt::new(
        format!(
            "SELECT name, paused, paused_reason, paused_by, paused_at, version FROM workflows WHERE name = $1{lock}"
        ),
        vec![Cell::Text(Some(name))],
    )
}

/// Makes a workflow's row (unpaused, never paused or resumed) if it has none, so that it can be
/// held: the rounds of several dispatchers take turns on a workflow with a stopping threshold.
pub(crate) fn ensure_workflow_stmt(name: &str) -> Stmt<'_> {
    Stmt::new(
        "INSERT INTO workflows (name, paused, version) VALUES ($1, 0, 1) ON CONFLICT (name) DO NOTHING",
        vec![Cell::Text(Some(name))],
    )
}

/// A workflow's exceptions at `now` and its attempts still running (in flight, inside their
/// timeout): what its stopping threshold counts, and what may yet become exceptions.
pub(crate) fn threshold_counts_stmt(workflow: &str, now: DateTime<Utc>) -> Stmt<'_> {
    Stmt::new(
        "SELECT COALESCE(SUM(CASE WHEN exception_since <= $2 THEN 1 ELSE 0 END), 0) AS exceptions, \
         COALESCE(SUM(CASE WHEN exception_since > $2 AND state = 'in_flight' THEN 1 ELSE 0 END), 0) AS running \
         FROM operations WHERE workflow = $1 AND exception_since IS NOT NULL",
        vec![Cell::Text(Some(workflow)), Cell::Int(Some(ms(now)))],
    )
}

/// Sets a workflow's pause flag, a compare-and-set on its version (no version: the row is new).
pub(crate) fn set_paused_stmt<'a>(
    name: &'a str,
    paused: bool,
    reason: Option<&'a str>,
    by: &'a str,
    at: DateTime<Utc>,
    expected_version: Option<i64>,
) -> Stmt<'a> {
    let mut cells = vec![
        Cell::Text(Some(name)),
        Cell::Int(Some(i64::from(paused))),
        Cell::Text(reason),
        Cell::Text(Some(by)),
        Cell::Int(Some(ms(at))),
    ];
    let sql = match expected_version {
        None => {
            "INSERT INTO workflows (name, paused, paused_reason, paused_by, paused_at, version) \
             VALUES ($1, $2, $3, $4, $5, 1) ON CONFLICT (name) DO NOTHING"
        }
        Some(v) => {
            cells.push(Cell::Int(Some(v)));
            "UPDATE workflows SET paused = $2, paused_reason = $3, paused_by = $4, paused_at = $5, \
             version = version + 1 WHERE name = $1 AND version = $6"
        }
    };
    Stmt::new(sql, cells)
}

pub(crate) async fn workflow(conn: &mut AnyConnection, name: &str) -> Result<Option<WorkflowRow>> {
    let stmt = workflow_stmt(name);
    let row = stmt.query().fetch_optional(conn).await.map_err(db)?;
    row.as_ref().map(workflow_from_row).transpose()
}

pub(crate) async fn paused_workflows(conn: &mut AnyConnection) -> Result<Vec<WorkflowRow>> {
    let rows = sqlx::query(
        "SELECT name, paused, paused_reason, paused_by, paused_at, version FROM workflows WHERE paused = 1 ORDER BY name",
    )
    .fetch_all(conn)
    .await
    .map_err(db)?;
    rows.iter().map(workflow_from_row).collect()
}

/// Sets a workflow's pause flag; compare-and-set on its version (`None` creates the row).
pub(crate) async fn set_paused(
    conn: &mut AnyConnection,
    name: &str,
    paused: bool,
    reason: Option<&str>,
    by: &str,
    at: DateTime<Utc>,
    expected_version: Option<i64>,
) -> Result<bool> {
    let stmt = set_paused_stmt(name, paused, reason, by, at, expected_version);
    Ok(stmt
        .query()
        .execute(conn)
        .await
        .map_err(db)?
        .rows_affected()
        == 1)
}

/// The exceptions at `now`, for one workflow or all: how many, and when the oldest and the newest
/// became exceptions.
pub(crate) struct ExceptionSummary {
    pub count: i64,
    pub oldest: Option<DateTime<Utc>>,
    pub newest: Option<DateTime<Utc>>,
}

pub(crate) async fn exception_summary(
    conn: &mut AnyConnection,
    workflow: Option<&str>,
    now: DateTime<Utc>,
) -> Result<ExceptionSummary> {
    let row = match workflow {
        Some(w) => sqlx::query(
            "SELECT COUNT(*) AS n, MIN(exception_since) AS oldest, MAX(exception_since) AS newest \
             FROM operations WHERE workflow = $1 AND exception_since IS NOT NULL AND exception_since <= $2",
        )
        .bind(w),
        None => sqlx::query(
            "SELECT COUNT(*) AS n, MIN(exception_since) AS oldest, MAX(exception_since) AS newest \
             FROM operations WHERE exception_since IS NOT NULL AND exception_since <= $1",
        ),
    }
    .bind(ms(now))
    .fetch_one(conn)
    .await
    .map_err(db)?;
    let n: i64 = sqlx::Row::try_get(&row, "n").map_err(db)?;
    let oldest: Option<i64> = sqlx::Row::try_get(&row, "oldest").map_err(db)?;
    let newest: Option<i64> = sqlx::Row::try_get(&row, "newest").map_err(db)?;
    Ok(ExceptionSummary {
        count: n,
        oldest: oldest.map(time),
        newest: newest.map(time),
    })
}

pub(crate) async fn count_by_state(conn: &mut AnyConnection) -> Result<Vec<(State, i64)>> {
    let rows = sqlx::query("SELECT state, COUNT(*) AS n FROM operations GROUP BY state")
        .fetch_all(conn)
        .await
        .map_err(db)?;
    rows.iter()
        .map(|r| {
            let s: String = sqlx::Row::try_get(r, "state").map_err(db)?;
            let n: i64 = sqlx::Row::try_get(r, "n").map_err(db)?;
            Ok((State::parse(&s).map_err(Error::Unavailable)?, n))
        })
        .collect()
}

/// Keys of `in_flight` operations whose attempt outlived its timeout.
pub(crate) async fn stuck_keys(
    conn: &mut AnyConnection,
    now: DateTime<Utc>,
    limit: i64,
) -> Result<Vec<String>> {
    sqlx::query_scalar(
        "SELECT key FROM operations WHERE exception_since IS NOT NULL AND exception_since <= $1 \
         AND state = 'in_flight' ORDER BY exception_since, id LIMIT $2",
    )
    .bind(ms(now))
    .bind(limit)
    .fetch_all(conn)
    .await
    .map_err(db)
}

/// A keyset position: the sort column's value (when sorting by one), the ordering time, the id.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Cursor {
    pub group: Option<String>,
    pub at: i64,
    pub id: i64,
}

/// Which operations a listing shows, in which order, and where its page starts.
#[derive(Clone, Debug, Default)]
pub(crate) struct ListQuery<'a> {
    /// Only exceptions, ordered by when they became one; otherwise by creation.
    pub exceptions_only: bool,
    pub states: &'a [State],
    pub workflow: Option<&'a str>,
    pub claimed_by: Option<&'a str>,
    /// Only rows whose ordering time is at or before this.
    pub not_after: Option<DateTime<Utc>>,
    /// Sort first by this column (`state`, `workflow`, `destination`), then by time and id.
    pub group_by: Option<&'static str>,
    /// Lowercase text that the key, workflow, step, destination, state or error must contain.
    pub text: Option<&'a str>,
    /// Rows strictly after (or, `backwards`, strictly before) this position.
    pub from: Option<&'a Cursor>,
    /// Include the row at `from` itself.
    pub inclusive: bool,
    /// Walk the order backwards (the rows come back nearest first).
    pub backwards: bool,
    pub limit: i64,
}

enum Arg<'a> {
    I(i64),
    S(&'a str),
    Owned(String),
}

/// Lists operations with keyset pagination on indexed columns: never the whole table. Each row
/// comes with whether its workflow is paused (one round trip, not two).
pub(crate) async fn list_ops(read: &ReadPool, q: &ListQuery<'_>) -> Result<Vec<(i64, Op, bool)>> {
    let time = if q.exceptions_only {
        "exception_since"
    } else {
        "created_at"
    };
    let mut cond: Vec<String> = Vec::new();
    let mut args: Vec<Arg> = Vec::new();
    if q.exceptions_only {
        cond.push("exception_since IS NOT NULL".into());
    }
    if let Some(t) = q.not_after {
        args.push(Arg::I(ms(t)));
        cond.push(format!("{time} <= ${}", args.len()));
    }
    if !q.states.is_empty() {
        let mut marks = Vec::new();
        for s in q.states {
            args.push(Arg::S(s.as_str()));
            marks.push(format!("${}", args.len()));
        }
        cond.push(format!("state IN ({})", marks.join(", ")));
    }
    if let Some(w) = q.workflow {
        args.push(Arg::S(w));
        cond.push(format!("workflow = ${}", args.len()));
    }
    if let Some(c) = q.claimed_by {
        args.push(Arg::S(c));
        cond.push(format!("claimed_by = ${}", args.len()));
    }
    if let Some(text) = q.text.filter(|t| !t.is_empty()) {
        let escaped: String = text
            .chars()
            .flat_map(|c| match c {
                '%' | '_' | '\\' => vec!['\\', c],
                c => vec![c],
            })
            .collect();
        args.push(Arg::Owned(format!("%{escaped}%")));
        let n = args.len();
        cond.push(format!(
            "(LOWER(key) LIKE ${n} ESCAPE '\\' OR LOWER(workflow) LIKE ${n} ESCAPE '\\' \
             OR LOWER(step) LIKE ${n} ESCAPE '\\' OR LOWER(destination) LIKE ${n} ESCAPE '\\' \
             OR state LIKE ${n} ESCAPE '\\' OR LOWER(COALESCE(last_error, '')) LIKE ${n} ESCAPE '\\')"
        ));
    }
    let columns = match q.group_by {
        Some(g) => format!("{g}, {time}, id"),
        None => format!("{time}, id"),
    };
    if let Some(c) = q.from {
        let mut marks = Vec::new();
        if q.group_by.is_some() {
            args.push(Arg::Owned(c.group.clone().unwrap_or_default()));
            marks.push(format!("${}", args.len()));
        }
        args.push(Arg::I(c.at));
        marks.push(format!("${}", args.len()));
        args.push(Arg::I(c.id));
        marks.push(format!("${}", args.len()));
        let cmp = match (q.backwards, q.inclusive) {
            (true, false) => "<",
            (true, true) => "<=",
            (false, false) => ">",
            (false, true) => ">=",
        };
        cond.push(format!("({columns}) {cmp} ({})", marks.join(", ")));
    }
    let direction = if q.backwards { " DESC" } else { "" };
    let order: Vec<String> = columns
        .split(", ")
        .map(|c| format!("{c}{direction}"))
        .collect();
    args.push(Arg::I(q.limit));
    let sql = format!(
        "SELECT {OP_COLUMNS}, COALESCE((SELECT paused FROM workflows w WHERE w.name = operations.workflow), 0) \
         AS workflow_paused FROM operations {} ORDER BY {} LIMIT ${}",
        if cond.is_empty() {
            String::new()
        } else {
            format!("WHERE {}", cond.join(" AND "))
        },
        order.join(", "),
        args.len()
    );
    macro_rules! fetch {
        ($pool:expr) => {{
            let mut query = sqlx::query(&sql);
            for a in &args {
                query = match a {
                    Arg::I(v) => query.bind(*v),
                    Arg::S(v) => query.bind(*v),
                    Arg::Owned(v) => query.bind(v.as_str()),
                };
            }
            let rows = query.fetch_all($pool).await.map_err(db)?;
            rows.iter()
                .map(|r| {
                    let (id, op) = op_from_row(r)?;
                    let paused: i64 = get(r, "workflow_paused")?;
                    Ok((id, op, paused != 0))
                })
                .collect()
        }};
    }
    match read {
        ReadPool::Sqlite(pool) => fetch!(pool),
        ReadPool::Postgres(pool) => fetch!(pool),
    }
}

pub(crate) async fn count_live_claims(
    conn: &mut AnyConnection,
    who: &str,
    now: DateTime<Utc>,
) -> Result<i64> {
    sqlx::query_scalar(
        "SELECT COUNT(*) FROM operations WHERE claimed_by = $1 AND claim_expires_at > $2",
    )
    .bind(who)
    .bind(ms(now))
    .fetch_one(conn)
    .await
    .map_err(db)
}

/// An event's operation, as the activity feed needs it: its key, and what redacts the detail
/// (destination, action, payload and any conflicting payload).
pub(crate) struct EventSubject {
    pub key: String,
    pub destination: String,
    pub action: String,
    pub payload: String,
    pub conflicting_payload: Option<String>,
}

/// The newest audit events with their operation.
pub(crate) async fn recent_events(
    conn: &mut AnyConnection,
    limit: i64,
) -> Result<Vec<(EventRow, Option<EventSubject>)>> {
    let rows = sqlx::query(
        "SELECT e.id, e.operation_id, e.workflow, e.at, e.actor, e.kind, e.from_state, e.to_state, e.detail, \
         o.key AS op_key, o.destination AS op_destination, o.action AS op_action, o.payload AS op_payload, \
         o.conflicting_payload AS op_conflicting_payload \
         FROM events e LEFT JOIN operations o ON o.id = e.operation_id ORDER BY e.id DESC LIMIT $1",
    )
    .bind(limit)
    .fetch_all(conn)
    .await
    .map_err(db)?;
    rows.iter()
        .map(|r| {
            let e = event_from_row(r)?;
            let key: Option<String> = get(r, "op_key")?;
            let op = match key {
                Some(key) => Some(EventSubject {
                    key,
                    destination: get(r, "op_destination")?,
                    action: get(r, "op_action")?,
                    payload: get(r, "op_payload")?,
                    conflicting_payload: get(r, "op_conflicting_payload")?,
                }),
                None => None,
            };
            Ok((e, op))
        })
        .collect()
}

/// Exceptions in one state (through the partial index of exceptions by state).
pub(crate) async fn count_exceptions_in(
    conn: &mut AnyConnection,
    state: State,
    now: DateTime<Utc>,
) -> Result<i64> {
    sqlx::query_scalar(
        "SELECT COUNT(*) FROM operations WHERE state = $1 AND exception_since IS NOT NULL AND exception_since <= $2",
    )
    .bind(state.as_str())
    .bind(ms(now))
    .fetch_one(conn)
    .await
    .map_err(db)
}

/// Due `pending`/`retry_wait` operations of these destinations, oldest due first: not claimed,
/// workflow not paused; retries left out at the `starved` destinations (their retry budget is
/// empty). With `lock` (PostgreSQL), the rows are held until the transaction ends and rows another
/// dispatcher holds are passed over (`SKIP LOCKED`). `None` when there is nothing to ask.
pub(crate) fn due_ops_stmt<'a>(
    destinations: &'a [String],
    starved: &'a [String],
    held: &'a [String],
    now: DateTime<Utc>,
    limit: usize,
    lock: &str,
) -> Option<Stmt<'a>> {
    if destinations.is_empty() || limit == 0 {
        return None;
    }
    let waiting = if starved.is_empty() {
        String::new()
    } else {
        format!(
            " AND NOT (attempts > budget_start AND destination IN {})",
            marks(Marks::Numbered, 3 + destinations.len(), starved.len(), &[])
        )
    };
    let held_back = if held.is_empty() {
        String::new()
    } else {
        format!(
            " AND workflow NOT IN {}",
            marks(
                Marks::Numbered,
                3 + destinations.len() + starved.len(),
                held.len(),
                &[]
            )
        )
    };
    let sql = format!(
        "SELECT {OP_COLUMNS} FROM operations \
         WHERE next_attempt_at IS NOT NULL AND next_attempt_at <= $1 AND state IN ('pending', 'retry_wait') \
         AND (claimed_by IS NULL OR claim_expires_at <= $1) \
         AND workflow NOT IN (SELECT name FROM workflows WHERE paused = 1) \
         AND destination IN {}{waiting}{held_back} ORDER BY next_attempt_at, id LIMIT $2{lock}",
        marks(Marks::Numbered, 3, destinations.len(), &[]),
    );
    let mut cells = vec![Cell::Int(Some(ms(now))), Cell::Int(Some(limit as i64))];
    cells.extend(
        destinations
            .iter()
            .chain(starved)
            .chain(held)
            .map(|d| Cell::Text(Some(d.as_str()))),
    );
    Some(Stmt::new(sql, cells))
}

#[allow(clippy::too_many_arguments)]
pub(crate) async fn due_ops(
    conn: &mut AnyConnection,
    destinations: &[String],
    starved: &[String],
    held: &[String],
    now: DateTime<Utc>,
    limit: usize,
    backend: super::Backend,
    lock: Option<Lock>,
) -> Result<Vec<(i64, Op)>> {
    let lock = lock.map_or("", |l| lock_clause(backend, l));
    let Some(stmt) = due_ops_stmt(destinations, starved, held, now, limit, lock) else {
        return Ok(Vec::new());
    };
    let rows = stmt.query().fetch_all(conn).await.map_err(db)?;
    rows.iter().map(op_from_row).collect()
}

/// Operations of these destinations that automation may still move: pending, retry_wait or in
/// flight, not claimed, workflow not paused.
pub(crate) async fn count_unsettled(
    conn: &mut AnyConnection,
    destinations: &[String],
    now: DateTime<Utc>,
) -> Result<i64> {
    if destinations.is_empty() {
        return Ok(0);
    }
    let sql = format!(
        "SELECT COUNT(*) FROM operations WHERE state IN ('pending', 'retry_wait', 'in_flight') \
         AND (claimed_by IS NULL OR claim_expires_at <= $1) \
         AND workflow NOT IN (SELECT name FROM workflows WHERE paused = 1) AND destination IN {}",
        marks(Marks::Numbered, 2, destinations.len(), &[])
    );
    let mut q = sqlx::query_scalar(&sql).bind(ms(now));
    for d in destinations {
        q = q.bind(d.as_str());
    }
    q.fetch_one(conn).await.map_err(db)
}

/// A dispatcher says it is alive.
pub(crate) async fn heartbeat(
    conn: &mut AnyConnection,
    name: &str,
    now: DateTime<Utc>,
) -> Result<()> {
    sqlx::query("INSERT INTO dispatchers (name, seen_at) VALUES ($1, $2) ON CONFLICT (name) DO UPDATE SET seen_at = $2")
        .bind(name)
        .bind(ms(now))
        .execute(conn)
        .await
        .map_err(db)?;
    Ok(())
}

/// When any dispatcher last said it was alive.
pub(crate) async fn last_heartbeat(conn: &mut AnyConnection) -> Result<Option<DateTime<Utc>>> {
    let t: Option<i64> = sqlx::query_scalar("SELECT MAX(seen_at) FROM dispatchers")
        .fetch_one(conn)
        .await
        .map_err(db)?;
    Ok(t.map(time))
}

/// A destination's retry budget as stored: tokens, when they were last topped up, version.
pub(crate) struct BudgetRow {
    pub tokens: u32,
    pub refilled_at: DateTime<Utc>,
    pub version: i64,
}

/// A destination's budget; with `lock`, held until the transaction ends, so that concurrent
/// dispatchers on PostgreSQL take their turns instead of racing.
pub(crate) fn budget_stmt<'a>(destination: &'a str, lock: &str) -> Stmt<'a> {
    Stmt::new(
        format!(
            "SELECT tokens, refilled_at, version FROM retry_budgets WHERE destination = $1{lock}"
        ),
        vec![Cell::Text(Some(destination))],
    )
}

pub(crate) fn budget_from_row(r: &impl Cells) -> Result<BudgetRow> {
    let tokens: i64 = get(r, "tokens")?;
    let at: i64 = get(r, "refilled_at")?;
    Ok(BudgetRow {
        tokens: u32::try_from(tokens.max(0)).unwrap_or(u32::MAX),
        refilled_at: time(at),
        version: get(r, "version")?,
    })
}

pub(crate) async fn budget(
    conn: &mut AnyConnection,
    destination: &str,
    backend: super::Backend,
    lock: Option<Lock>,
) -> Result<Option<BudgetRow>> {
    let stmt = budget_stmt(destination, lock.map_or("", |l| lock_clause(backend, l)));
    let row = stmt.query().fetch_optional(conn).await.map_err(db)?;
    row.as_ref().map(budget_from_row).transpose()
}

/// Stores a destination's budget; compare-and-set on its version (`None` creates the row). The
/// statement writes one row, or none when another writer changed the budget first.
pub(crate) fn save_budget_stmt(
    destination: &str,
    tokens: u32,
    refilled_at: DateTime<Utc>,
    expected_version: Option<i64>,
) -> Stmt<'_> {
    let sql = match expected_version {
        None => {
            "INSERT INTO retry_budgets (destination, tokens, refilled_at, version) \
             VALUES ($1, $2, $3, 1) ON CONFLICT (destination) DO NOTHING"
        }
        Some(_) => {
            "UPDATE retry_budgets SET tokens = $2, refilled_at = $3, version = version + 1 \
             WHERE destination = $1 AND version = $4"
        }
    };
    let mut cells = vec![
        Cell::Text(Some(destination)),
        Cell::Int(Some(i64::from(tokens))),
        Cell::Int(Some(ms(refilled_at))),
    ];
    if let Some(v) = expected_version {
        cells.push(Cell::Int(Some(v)));
    }
    Stmt::new(sql, cells)
}

pub(crate) async fn save_budget(
    conn: &mut AnyConnection,
    destination: &str,
    tokens: u32,
    refilled_at: DateTime<Utc>,
    expected_version: Option<i64>,
) -> Result<bool> {
    let stmt = save_budget_stmt(destination, tokens, refilled_at, expected_version);
    Ok(stmt
        .query()
        .execute(conn)
        .await
        .map_err(db)?
        .rows_affected()
        == 1)
}

// Many rows per statement, for the dispatcher's rounds: one statement costs far more than one row.

/// A bound value, for either driver: sqlx, or SQLite directly (the dispatcher's rounds).
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum Cell<'a> {
    Int(Option<i64>),
    Text(Option<&'a str>),
}

fn bind_cells<'q>(
    mut q: Query<'q, sqlx::Any, AnyArguments<'q>>,
    cells: &[Cell<'q>],
) -> Query<'q, sqlx::Any, AnyArguments<'q>> {
    for c in cells {
        q = match c {
            Cell::Int(v) => q.bind(*v),
            Cell::Text(v) => q.bind(*v),
        };
    }
    q
}

/// A statement with its parameters, written once for both drivers.
#[derive(Clone, Debug)]
pub(crate) struct Stmt<'a> {
    pub sql: String,
    pub cells: Vec<Cell<'a>>,
}

impl<'a> Stmt<'a> {
    fn new(sql: impl Into<String>, cells: Vec<Cell<'a>>) -> Stmt<'a> {
        Stmt {
            sql: sql.into(),
            cells,
        }
    }

    pub(crate) fn query(&self) -> Query<'_, sqlx::Any, AnyArguments<'_>> {
        bind_cells(sqlx::query(&self.sql), &self.cells)
    }
}

/// How a statement names its parameters.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Marks {
    /// `$1, $2, ...`: both backends; a parameter may appear twice.
    Numbered,
    /// SQLite's plain `?`, bound in the order they appear. SQLite finds a numbered parameter by
    /// walking the statement's list of names, so binding hundreds of them (a round's VALUES
    /// lists) costs their number squared: that was a sixth of a busy dispatcher's time.
    InOrder,
}

impl Marks {
    /// `InOrder` on SQLite, for statements whose parameters appear once each, in bind order.
    fn in_order(conn: &AnyConnection) -> Marks {
        if conn.backend_name() == "SQLite" {
            Marks::InOrder
        } else {
            Marks::Numbered
        }
    }
}

/// `($first, ..., $first+n-1)` (or `(?, ...)`), the first cells cast to the types `casts` gives.
fn marks(style: Marks, first: usize, n: usize, casts: &[&str]) -> String {
    let cells: Vec<String> = (0..n)
        .map(|i| {
            let mark = match style {
                Marks::Numbered => format!("${}", first + i),
                Marks::InOrder => "?".to_string(),
            };
            match casts.get(i) {
                Some(t) => format!("CAST({mark} AS {t})"),
                None => mark,
            }
        })
        .collect();
    format!("({})", cells.join(", "))
}

/// How a dispatcher's round holds the rows it loads. Only PostgreSQL needs it: a SQLite write
/// transaction holds the whole database from its start.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Lock {
    /// Wait for each row, taken in key order (its own attempts' outcomes).
    Wait,
    /// Leave out rows another transaction holds (another dispatcher is starting them).
    SkipLocked,
}

pub(crate) fn lock_clause(backend: super::Backend, lock: Lock) -> &'static str {
    match (backend, lock) {
        (super::Backend::Sqlite, _) => "",
        (super::Backend::Postgres, Lock::Wait) => " FOR UPDATE",
        (super::Backend::Postgres, Lock::SkipLocked) => " FOR UPDATE SKIP LOCKED",
    }
}

/// The operations with these keys (at most 500), in key order, held as `lock` says.
pub(crate) fn load_ops_stmt<'a>(style: Marks, keys: &[&'a str], lock: &str) -> Stmt<'a> {
    Stmt::new(
        format!(
            "SELECT {OP_COLUMNS} FROM operations WHERE key IN {} ORDER BY key{lock}",
            marks(style, 1, keys.len(), &[]),
        ),
        keys.iter().map(|k| Cell::Text(Some(*k))).collect(),
    )
}

/// The operations with these keys, by key, held as `lock` says until the transaction ends.
pub(crate) async fn load_ops(
    conn: &mut AnyConnection,
    keys: &[&str],
    backend: super::Backend,
    lock: Lock,
) -> Result<std::collections::HashMap<String, (i64, Op)>> {
    let style = Marks::in_order(conn);
    let mut found = std::collections::HashMap::with_capacity(keys.len());
    for chunk in keys.chunks(500) {
        let stmt = load_ops_stmt(style, chunk, lock_clause(backend, lock));
        for row in stmt.query().fetch_all(&mut *conn).await.map_err(db)? {
            let (id, op) = op_from_row(&row)?;
            found.insert(op.key.clone(), (id, op));
        }
    }
    Ok(found)
}

/// The columns `bind_mutable` binds, with the types a VALUES list must be cast to (PostgreSQL
/// reads an uncast parameter there as text).
const MUTABLE: [(&str, &str); 20] = [
    ("conflicting_payload", "TEXT"),
    ("conflicting_fingerprint", "TEXT"),
    ("state", "TEXT"),
    ("reason", "TEXT"),
    ("attempts", "BIGINT"),
    ("budget_start", "BIGINT"),
    ("ambiguous", "BIGINT"),
    ("first_sent_at", "BIGINT"),
    ("attempt_started_at", "BIGINT"),
    ("next_attempt_at", "BIGINT"),
    ("reference", "TEXT"),
    ("last_error", "TEXT"),
    ("updated_at", "BIGINT"),
    ("exception_since", "BIGINT"),
    ("claimed_by", "TEXT"),
    ("claimed_at", "BIGINT"),
    ("claim_expires_at", "BIGINT"),
    ("resolution", "TEXT"),
    ("superseded_by", "TEXT"),
    ("version", "BIGINT"),
];

/// Operations' new rows, `(id, new row, expected version)`: a compare-and-set on each.
pub(crate) type OpRow<'a> = (i64, &'a Op, i64);
/// An attempt opened: `(operation id, number, actor, started at)`.
pub(crate) type Opened<'a> = (i64, u32, &'a str, DateTime<Utc>);

/// New rows for `ops` (one `UPDATE ... FROM (VALUES ...)`); it writes one row per operation
/// whose version still is the expected one.
///
/// SQLite gets one plain `UPDATE ... WHERE id = ? AND version = ?` per operation instead (run as
/// one call): its `UPDATE ... FROM` took three times as long per row.
pub(crate) fn update_ops_stmt<'a>(style: Marks, ops: &[OpRow<'a>]) -> Stmt<'a> {
    let width = MUTABLE.len() + 2;
    if style == Marks::InOrder {
        let sets: Vec<String> = MUTABLE.iter().map(|(c, _)| format!("{c} = ?")).collect();
        let one = format!(
            "UPDATE operations SET {} WHERE id = ? AND version = ?",
            sets.join(", ")
        );
        let mut cells = Vec::with_capacity(ops.len() * width);
        for (id, op, expected) in ops {
            mutable_cells(op, &mut cells);
            cells.extend([Cell::Int(Some(*id)), Cell::Int(Some(*expected))]);
        }
        return Stmt::new(vec![one; ops.len()].join(";\n"), cells);
    }
    let mut casts: Vec<&str> = MUTABLE.iter().map(|(_, t)| *t).collect();
    casts.extend(["BIGINT", "BIGINT"]);
    let rows: Vec<String> = (0..ops.len())
        .map(|i| marks(style, 1 + i * width, width, &casts))
        .collect();
    let sets: Vec<String> = MUTABLE
        .iter()
        .enumerate()
        .map(|(i, (c, _))| format!("{c} = v.column{}", i + 1))
        .collect();
    let mut cells = Vec::with_capacity(ops.len() * width);
    for (id, op, expected) in ops {
        mutable_cells(op, &mut cells);
        cells.extend([Cell::Int(Some(*id)), Cell::Int(Some(*expected))]);
    }
    Stmt::new(
        format!(
            "UPDATE operations SET {} FROM (VALUES {}) AS v \
             WHERE operations.id = v.column{} AND operations.version = v.column{}",
            sets.join(", "),
            rows.join(", "),
            MUTABLE.len() + 1,
            MUTABLE.len() + 2,
        ),
        cells,
    )
}

pub(crate) fn insert_events_stmt<'a>(style: Marks, events: &[NewEvent<'a>]) -> Stmt<'a> {
    let rows: Vec<String> = (0..events.len())
        .map(|i| marks(style, 1 + i * 8, 8, &[]))
        .collect();
    let mut cells = Vec::with_capacity(events.len() * 8);
    for e in events {
        cells.extend([
            Cell::Int(e.operation_id),
            Cell::Text(e.workflow),
            Cell::Int(Some(ms(e.at))),
            Cell::Text(Some(e.actor)),
            Cell::Text(Some(e.kind)),
            Cell::Text(e.from_state.map(|s| s.as_str())),
            Cell::Text(e.to_state.map(|s| s.as_str())),
            Cell::Text(Some(e.detail)),
        ]);
    }
    Stmt::new(
        format!(
            "INSERT INTO events (operation_id, workflow, at, actor, kind, from_state, to_state, detail) VALUES {}",
            rows.join(", ")
        ),
        cells,
    )
}

pub(crate) fn start_attempts_stmt<'a>(style: Marks, opened: &[Opened<'a>]) -> Stmt<'a> {
    let rows: Vec<String> = (0..opened.len())
        .map(|i| marks(style, 1 + i * 4, 4, &[]))
        .collect();
    let mut cells = Vec::with_capacity(opened.len() * 4);
    for (id, n, actor, at) in opened {
        cells.extend([
            Cell::Int(Some(*id)),
            Cell::Int(Some(i64::from(*n))),
            Cell::Text(Some(*actor)),
            Cell::Int(Some(ms(*at))),
        ]);
    }
    Stmt::new(
        format!(
            "INSERT INTO attempts (operation_id, n, actor, started_at) VALUES {}",
            rows.join(", ")
        ),
        cells,
    )
}

/// The first seven cells of an attempt's outcome, in the order the attempt statements bind them.
fn closed_cells<'a>(a: &AttemptWrite<'a>, cells: &mut Vec<Cell<'a>>) {
    cells.extend([
        Cell::Int(Some(a.operation_id)),
        Cell::Int(Some(i64::from(a.n))),
        Cell::Int(Some(ms(a.at))),
        Cell::Text(Some(a.outcome.as_str())),
        Cell::Int(a.http_status.map(i64::from)),
        Cell::Text(a.reference),
        Cell::Text(a.error),
    ]);
}

/// Closes open attempts (on SQLite one plain `UPDATE` per attempt, as for operations).
pub(crate) fn finish_attempts_stmt<'a>(style: Marks, closed: &[AttemptWrite<'a>]) -> Stmt<'a> {
    if style == Marks::InOrder {
        let one = "UPDATE attempts SET finished_at = ?, outcome = ?, http_status = ?, reference = ?, \
                   error = ? WHERE operation_id = ? AND n = ?";
        let mut cells = Vec::with_capacity(closed.len() * 7);
        for a in closed {
            let mut row = Vec::with_capacity(7);
            closed_cells(a, &mut row);
            // the key (the first two) goes last here
            row.rotate_left(2);
            cells.extend(row);
        }
        return Stmt::new(vec![one; closed.len()].join(";\n"), cells);
    }
    const CASTS: [&str; 7] = [
        "BIGINT", "BIGINT", "BIGINT", "TEXT", "BIGINT", "TEXT", "TEXT",
    ];
    let rows: Vec<String> = (0..closed.len())
        .map(|i| marks(style, 1 + i * 7, 7, &CASTS))
        .collect();
    let mut cells = Vec::with_capacity(closed.len() * 7);
    for a in closed {
        closed_cells(a, &mut cells);
    }
    Stmt::new(
        format!(
            "UPDATE attempts SET finished_at = v.column3, outcome = v.column4, http_status = v.column5, \
             reference = v.column6, error = v.column7 FROM (VALUES {}) AS v \
             WHERE attempts.operation_id = v.column1 AND attempts.n = v.column2",
            rows.join(", ")
        ),
        cells,
    )
}

/// PostgreSQL's code for a transaction it broke to end a deadlock, or could not serialize.
fn lost_a_race(e: &sqlx::Error) -> bool {
    matches!(e, sqlx::Error::Database(d) if matches!(d.code().as_deref(), Some("40P01" | "40001")))
}

/// A round's writes (or one change's): the operations' new rows (a compare-and-set on each),
/// the attempts opened and closed, the audit events. Returns false, having written nothing that
/// will stay, when any operation changed meanwhile (or PostgreSQL broke a deadlock with this
/// transaction): the caller rolls back and tries again.
///
/// On SQLite all four go in one multi-statement call (its parameters bound in order), one trip
/// to the database thread instead of four; PostgreSQL takes one statement per kind of row.
pub(crate) async fn write_rows(
    conn: &mut AnyConnection,
    ops: &[OpRow<'_>],
    opened: &[Opened<'_>],
    closed: &[AttemptWrite<'_>],
    events: &[NewEvent<'_>],
) -> Result<bool> {
    let style = Marks::in_order(conn);
    let params =
        ops.len() * (MUTABLE.len() + 2) + opened.len() * 4 + closed.len() * 7 + events.len() * 8;
    // SQLite allows 32,766 parameters in a statement
    if style == Marks::Numbered || params > 30_000 {
        for chunk in ops.chunks(400) {
            match update_ops_stmt(style, chunk)
                .query()
                .execute(&mut *conn)
                .await
            {
                Ok(done) if done.rows_affected() == chunk.len() as u64 => {}
                Ok(_) => return Ok(false),
                Err(e) if lost_a_race(&e) => return Ok(false),
                Err(e) => return Err(db(e)),
            }
        }
        for chunk in opened.chunks(500) {
            let stmt = start_attempts_stmt(style, chunk);
            stmt.query().execute(&mut *conn).await.map_err(db)?;
        }
        for chunk in closed.chunks(500) {
            let stmt = finish_attempts_stmt(style, chunk);
            stmt.query().execute(&mut *conn).await.map_err(db)?;
        }
        insert_events(conn, events).await?;
        return Ok(true);
    }
    let mut all = Stmt::new(String::new(), Vec::with_capacity(params));
    for stmt in [
        (!ops.is_empty()).then(|| update_ops_stmt(style, ops)),
        (!opened.is_empty()).then(|| start_attempts_stmt(style, opened)),
        (!closed.is_empty()).then(|| finish_attempts_stmt(style, closed)),
        (!events.is_empty()).then(|| insert_events_stmt(style, events)),
    ]
    .into_iter()
    .flatten()
    {
        if !all.sql.is_empty() {
            all.sql.push_str(";\n");
        }
        all.sql.push_str(&stmt.sql);
        all.cells.extend(stmt.cells);
    }
    if all.sql.is_empty() {
        return Ok(true);
    }
    let done = all.query().execute(&mut *conn).await.map_err(db)?;
    // every row is written once: fewer means an operation's version moved
    let rows = ops.len() + opened.len() + closed.len() + events.len();
    Ok(done.rows_affected() == rows as u64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::fixture::OnePending;

    async fn counts(conn: &mut AnyConnection) -> (i64, i64) {
        (
            count_rows(conn, "attempts").await.unwrap(),
            count_rows(conn, "events").await.unwrap(),
        )
    }

    /// SQLite writes a round in one multi-statement call and learns of a lost compare-and-set
    /// only from the number of rows written: a stale version must come back false, and a
    /// rolled-back try must leave nothing behind.
    #[tokio::test]
    async fn a_round_with_a_stale_version_is_refused_whole() {
        let f = OnePending::new().await;
        let (opened, event) = (f.opened(), f.event());
        let events = std::slice::from_ref(&event);
        let mut tx = f.store.begin().await.unwrap();
        assert!(
            !write_rows(&mut tx, &[(f.id, &f.next, 7)], &opened, &[], events)
                .await
                .unwrap(),
            "expected version 7, stored 0"
        );
        tx.rollback().await.unwrap();
        let mut tx = f.store.begin().await.unwrap();
        assert_eq!(counts(&mut tx).await, (0, 0));
        assert_eq!(load_op(&mut tx, "k-1").await.unwrap().unwrap().1.version, 0);

        assert!(
            write_rows(&mut tx, &[(f.id, &f.next, 0)], &opened, &[], events)
                .await
                .unwrap()
        );
        tx.commit().await.unwrap();
        let mut tx = f.store.begin().await.unwrap();
        assert_eq!(counts(&mut tx).await, (1, 1));
        let (_, stored) = load_op(&mut tx, "k-1").await.unwrap().unwrap();
        assert_eq!((stored.state, stored.version), (State::InFlight, 1));
    }
}
