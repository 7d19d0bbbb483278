//! What readers see: pages of operations (keyset pagination on indexed columns, never the whole
//! queue), one operation's attempts and history, the activity feed, and counts.

use std::collections::HashMap;

use chrono::{DateTime, Utc};

use super::Store;
use super::attempts::{ATTEMPT_COLUMNS, AttemptRow, attempt_from_row};
use super::columns;
use super::sql::{Cell, Cells, Stmt, get, ms, time};
use crate::domain::filter::{Claimed, Match, Term};
use crate::domain::next_step::Paused;
use crate::domain::{Op, State};
use crate::error::{Error, Result};

/// A keyset position: the sort column's value (when sorting by one), the ordering time, the id.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Cursor {
    pub group: Option<String>,
    pub at: i64,
    pub id: i64,
}

/// The order of a page: by a column (then time and id), or by time and id alone.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) enum Order {
    #[default]
    Time,
    State,
    Workflow,
    Destination,
}

impl Order {
    fn column(self) -> Option<&'static str> {
        match self {
            Order::Time => None,
            Order::State => Some("state"),
            Order::Workflow => Some("workflow"),
            Order::Destination => Some("destination"),
        }
    }
}

impl ListQuery<'_> {
    /// The time a list is ordered by: since an item became an exception, or since it was made.
    fn time_column(&self) -> &'static str {
        if self.exceptions_only {
            "exception_since"
        } else {
            "created_at"
        }
    }
}

/// Which operations a page shows, in which order, and where it starts.
#[derive(Clone, Debug, Default)]
pub(crate) struct ListQuery<'a> {
    /// SPEC 12's filter terms, all of which hold; `now` and `viewer` read ages and `claimed:me`.
    pub terms: &'a [Term],
    pub now: DateTime<Utc>,
    pub viewer: &'a str,
    /// Only exceptions, ordered by when they became one; otherwise by creation.
    pub exceptions_only: bool,
    pub states: &'a [State],
    pub workflow: Option<&'a str>,
    pub claimed_by: Option<&'a str>,
    /// Only rows whose ordering time is at or before this.
    pub not_after: Option<DateTime<Utc>>,
    pub order: Order,
    /// Rows strictly after (or, `backwards`, strictly before) this position.
    pub from: Option<&'a Cursor>,
    /// Include the row at `from` itself.
    pub inclusive: bool,
    /// Walk the order backwards (the rows come back nearest first).
    pub backwards: bool,
    pub limit: i64,
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

fn event_from_row(row: &dyn Cells) -> Result<EventRow> {
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

const EVENT_COLUMNS: &str =
    "id, operation_id, workflow, at, actor, kind, from_state, to_state, detail";

/// An event's operation, as the activity feed needs it: its key, and what redacts the detail
/// (destination, action, payload and any conflicting payload).
pub(crate) struct EventSubject {
    pub key: String,
    pub destination: String,
    pub action: String,
    pub payload: String,
    pub conflicting_payload: Option<String>,
}

enum Arg {
    Int(i64),
    Text(String),
}

impl Store {
    /// A page of operations (see [`ListQuery`]); each with whether its workflow or destination
    /// is paused (one round trip, not three).
    pub(crate) async fn page(&self, q: &ListQuery<'_>) -> Result<Vec<(i64, Op, Paused)>> {
        let time = q.time_column();
        let mut args: Vec<Arg> = Vec::new();
        let mut cond = conditions(q, time, &mut args);
        let columns = match q.order.column() {
            Some(g) => format!("{g}, {time}, id"),
            None => format!("{time}, id"),
        };
        if let Some(c) = q.from {
            let mut marks = Vec::new();
            if q.order.column().is_some() {
                marks.push(mark(
                    &mut args,
                    Arg::Text(c.group.clone().unwrap_or_default()),
                ));
            }
            marks.push(mark(&mut args, Arg::Int(c.at)));
            marks.push(mark(&mut args, Arg::Int(c.id)));
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
        let limit = mark(&mut args, Arg::Int(q.limit));
        let sql = format!(
            "SELECT {}, COALESCE((SELECT paused FROM workflows w WHERE w.name = operations.workflow), 0) \
             AS workflow_paused, \
             COALESCE((SELECT paused FROM destinations d WHERE d.name = operations.destination), 0) \
             AS destination_paused FROM operations{} ORDER BY {} LIMIT {limit}",
            columns::select(),
            where_clause(&cond),
            order.join(", "),
        );
        let stmt = Stmt::new(sql, cells(&args));
        stmt.rows(self.conn().await?.db(), |r| {
            let (id, op) = columns::decode(r)?;
            let workflow: i64 = get(r, columns::AFTER)?;
            let destination: i64 = get(r, columns::AFTER_NEXT)?;
            let paused = Paused {
                workflow: workflow != 0,
                destination: destination != 0,
            };
            Ok((id, op, paused))
        })
        .await
    }

    /// The keys of every operation a list's filter matches, in the list's order (`backwards`:
    /// reversed); `from` and `limit` are not read. What `A` and `--where` act on: the keys only,
    /// one statement, however many match.
    pub(crate) async fn matching_keys(&self, q: &ListQuery<'_>) -> Result<Vec<String>> {
        let (time, mut args) = (q.time_column(), Vec::new());
        let cond = where_clause(&conditions(q, time, &mut args));
        let direction = if q.backwards { " DESC" } else { "" };
        let order: Vec<String> = match q.order.column() {
            Some(g) => vec![g.to_string(), time.to_string(), "id".into()],
            None => vec![time.to_string(), "id".into()],
        }
        .into_iter()
        .map(|c| format!("{c}{direction}"))
        .collect();
        let sql = format!(
            "SELECT key FROM operations{cond} ORDER BY {}",
            order.join(", ")
        );
        Stmt::new(sql, cells(&args))
            .rows(self.conn().await?.db(), |r| get(r, "key"))
            .await
    }

    /// The operations with these keys, by key (nothing held).
    pub(crate) async fn load_ops(&self, keys: &[&str]) -> Result<HashMap<String, (i64, Op)>> {
        let mut tx = self.begin().await?;
        let found = tx.load_ops(keys, false).await;
        tx.rollback().await;
        found
    }

    /// How many operations a list's filter matches (the console's "N of M").
    pub(crate) async fn count_matching(&self, q: &ListQuery<'_>) -> Result<i64> {
        let mut args = Vec::new();
        let cond = where_clause(&conditions(q, q.time_column(), &mut args));
        let sql = format!("SELECT COUNT(*) AS n FROM operations{cond}");
        Stmt::new(sql, cells(&args))
            .one(self.conn().await?.db(), |r| get(r, "n"))
            .await
    }

    /// The operation with this key (for reading).
    pub(crate) async fn load_op(&self, key: &str) -> Result<Option<(i64, Op)>> {
        let stmt = Stmt::new(
            format!(
                "SELECT {} FROM operations WHERE key = $1",
                columns::select()
            ),
            vec![Cell::Text(Some(key))],
        );
        stmt.row(self.conn().await?.db(), columns::decode).await
    }

    /// An operation's attempts, in order.
    pub(crate) async fn attempts_of(&self, op_id: i64) -> Result<Vec<AttemptRow>> {
        let stmt = Stmt::new(
            format!("SELECT {ATTEMPT_COLUMNS} FROM attempts WHERE operation_id = $1 ORDER BY n"),
            vec![Cell::Int(Some(op_id))],
        );
        stmt.rows(self.conn().await?.db(), attempt_from_row).await
    }

    /// An operation's audit events, in order.
    pub(crate) async fn events_of(&self, op_id: i64) -> Result<Vec<EventRow>> {
        let stmt = Stmt::new(
            format!("SELECT {EVENT_COLUMNS} FROM events WHERE operation_id = $1 ORDER BY id"),
            vec![Cell::Int(Some(op_id))],
        );
        stmt.rows(self.conn().await?.db(), event_from_row).await
    }

    /// The newest audit events, newest first, with their operation.
    pub(crate) async fn recent_events(
        &self,
        limit: i64,
        q: &crate::domain::filter::ActivityFilter,
    ) -> Result<Vec<(EventRow, Option<EventSubject>)>> {
        let mut args: Vec<Arg> = Vec::new();
        let mut cond: Vec<String> = Vec::new();
        let mut any_of = |column: &str, values: &[String], args: &mut Vec<Arg>| {
            let marks: Vec<String> = values
                .iter()
                .map(|v| mark(args, Arg::Text(v.clone())))
                .collect();
            cond.push(format!("{column} IN ({})", marks.join(", ")));
        };
        if !q.actors.is_empty() {
            any_of("actor", &q.actors, &mut args);
        }
        if !q.kinds.is_empty() {
            any_of("kind", &q.kinds, &mut args);
        }
        if !q.automation {
            cond.push(crate::domain::filter::PEOPLE_ONLY.into());
        }
        let limit = mark(&mut args, Arg::Int(limit));
        let sql = format!(
            "SELECT e.id, e.operation_id, e.workflow, e.at, e.actor, e.kind, e.from_state, e.to_state, e.detail, \
             o.key AS op_key, o.destination AS op_destination, o.action AS op_action, o.payload AS op_payload, \
             o.conflicting_payload AS op_conflicting_payload \
             FROM (SELECT * FROM events{} ORDER BY id DESC LIMIT {limit}) e \
             LEFT JOIN operations o ON o.id = e.operation_id ORDER BY e.id DESC",
            where_clause(&cond)
        );
        let stmt = Stmt::new(sql, cells(&args));
        stmt.rows(self.conn().await?.db(), |r| {
            let e = event_from_row(r)?;
            let subject = match get::<Option<String>>(r, "op_key")? {
                Some(key) => Some(EventSubject {
                    key,
                    destination: get(r, "op_destination")?,
                    action: get(r, "op_action")?,
                    payload: get(r, "op_payload")?,
                    conflicting_payload: get(r, "op_conflicting_payload")?,
                }),
                None => None,
            };
            Ok((e, subject))
        })
        .await
    }

    /// The newest audit event's id (0 when there is none): what the console polls.
    pub(crate) async fn latest_event_id(&self) -> Result<i64> {
        self.scalar(Stmt::new(
            "SELECT COALESCE(MAX(id), 0) AS n FROM events",
            Vec::new(),
        ))
        .await
    }

    /// How many operations are in each state: the counters the triggers of schema 7 keep, never
    /// a count of the operations.
    pub(crate) async fn count_by_state(&self) -> Result<Vec<(State, i64)>> {
        let stmt = Stmt::new(
            "SELECT state, CAST(SUM(n) AS BIGINT) AS n FROM state_counts GROUP BY state",
            Vec::new(),
        );
        stmt.rows(self.conn().await?.db(), |r| {
            let s: String = get(r, "state")?;
            Ok((State::parse(&s).map_err(Error::Unavailable)?, get(r, "n")?))
        })
        .await
    }

    /// The attempts in flight that have overrun their timeout now (exceptions of no exception
    /// state: a range of the partial index by state, a few rows), and the oldest exception's
    /// start (the first entry of the exceptions' index).
    pub(crate) async fn stuck_and_oldest(
        &self,
        now: DateTime<Utc>,
    ) -> Result<(i64, Option<DateTime<Utc>>)> {
        let stmt = Stmt::new(
            "SELECT (SELECT COUNT(*) FROM operations WHERE state = 'in_flight' \
               AND exception_since IS NOT NULL AND exception_since <= $1) AS stuck, \
             (SELECT MIN(exception_since) FROM operations WHERE exception_since IS NOT NULL \
               AND exception_since <= $1) AS oldest",
            vec![Cell::Int(Some(ms(now)))],
        );
        stmt.one(self.conn().await?.db(), |r| {
            Ok((get(r, "stuck")?, get::<Option<i64>>(r, "oldest")?.map(time)))
        })
        .await
    }

    /// The exceptions now by workflow and state (SPEC 17's metrics): the counters of the
    /// exception states (schema 8) and the attempts in flight past their timeout (a range of the
    /// exceptions' index by state); and each workflow's oldest exception (the first entry of its
    /// range of the exceptions' index by workflow). Nothing reads the operations at large.
    pub(crate) async fn exceptions_by_workflow(
        &self,
        now: DateTime<Utc>,
    ) -> Result<(Vec<(String, State, i64)>, Vec<(String, DateTime<Utc>)>)> {
        let exception_states = State::ALL
            .iter()
            .filter(|s| s.is_exception())
            .map(|s| format!("'{}'", s.as_str()))
            .collect::<Vec<_>>()
            .join(", ");
        let counts = Stmt::new(
            format!(
                "SELECT workflow, state, CAST(SUM(n) AS BIGINT) AS n FROM state_counts \
                 WHERE state IN ({exception_states}) GROUP BY workflow, state HAVING SUM(n) > 0 \
                 UNION ALL \
                 SELECT workflow, state, COUNT(*) AS n FROM operations WHERE state = 'in_flight' \
                 AND exception_since IS NOT NULL AND exception_since <= $1 GROUP BY workflow, state \
                 ORDER BY workflow, state"
            ),
            vec![Cell::Int(Some(ms(now)))],
        );
        let oldest = Stmt::new(
            "SELECT w.workflow, (SELECT MIN(o.exception_since) FROM operations o \
               WHERE o.workflow = w.workflow AND o.exception_since IS NOT NULL \
               AND o.exception_since <= $1) AS oldest \
             FROM (SELECT DISTINCT workflow FROM state_counts) w ORDER BY w.workflow",
            vec![Cell::Int(Some(ms(now)))],
        );
        let mut conn = self.conn().await?;
        let counts = counts
            .rows(conn.db(), |r| {
                let s: String = get(r, "state")?;
                Ok((
                    get(r, "workflow")?,
                    State::parse(&s).map_err(Error::Unavailable)?,
                    get(r, "n")?,
                ))
            })
            .await?;
        let oldest = oldest
            .rows(conn.db(), |r| {
                Ok((
                    get::<String>(r, "workflow")?,
                    get::<Option<i64>>(r, "oldest")?.map(time),
                ))
            })
            .await?;
        Ok((
            counts,
            oldest
                .into_iter()
                .filter_map(|(w, t)| Some((w, t?)))
                .collect(),
        ))
    }

    /// How many live claims `who` holds.
    pub(crate) async fn count_live_claims(&self, who: &str, now: DateTime<Utc>) -> Result<i64> {
        self.scalar(Stmt::new(
            "SELECT COUNT(*) AS n FROM operations WHERE claimed_by = $1 AND claim_expires_at > $2",
            vec![Cell::Text(Some(who)), Cell::Int(Some(ms(now)))],
        ))
        .await
    }

    /// Rows in each of the ledger's tables: (operations, attempts, events).
    pub(crate) async fn count_rows(&self) -> Result<(i64, i64, i64)> {
        let count = |t: &str| Stmt::new(format!("SELECT COUNT(*) AS n FROM {t}"), Vec::new());
        Ok((
            self.scalar(count("operations")).await?,
            self.scalar(count("attempts")).await?,
            self.scalar(count("events")).await?,
        ))
    }

    /// One integer a statement answers (its column `n`).
    async fn scalar(&self, stmt: Stmt<'_>) -> Result<i64> {
        stmt.one(self.conn().await?.db(), |r| get(r, "n")).await
    }
}

/// Appends a value and gives its placeholder.
/// ` WHERE a AND b`, or nothing when there is no condition.
fn where_clause(cond: &[String]) -> String {
    if cond.is_empty() {
        String::new()
    } else {
        format!(" WHERE {}", cond.join(" AND "))
    }
}

fn cells(args: &[Arg]) -> Vec<Cell<'_>> {
    args.iter()
        .map(|a| match a {
            Arg::Int(v) => Cell::Int(Some(*v)),
            Arg::Text(v) => Cell::Text(Some(v.as_str())),
        })
        .collect()
}

fn mark(args: &mut Vec<Arg>, a: Arg) -> String {
    args.push(a);
    format!("${}", args.len())
}

/// The conditions of a list's filter (scope, states, workflow, claim, SPEC 12's terms),
/// shared by a page and its count; their values are appended to `args`.
fn conditions(q: &ListQuery<'_>, time: &str, args: &mut Vec<Arg>) -> Vec<String> {
    let mut cond: Vec<String> = Vec::new();
    if q.exceptions_only {
        cond.push("exception_since IS NOT NULL".into());
    }
    if let Some(t) = q.not_after {
        let m = mark(args, Arg::Int(ms(t)));
        cond.push(format!("{time} <= {m}"));
    }
    if !q.states.is_empty() {
        let marks: Vec<String> = q
            .states
            .iter()
            .map(|s| mark(args, Arg::Text(s.as_str().to_string())))
            .collect();
        cond.push(format!("state IN ({})", marks.join(", ")));
    }
    if let Some(w) = q.workflow {
        let m = mark(args, Arg::Text(w.to_string()));
        cond.push(format!("workflow = {m}"));
    }
    if let Some(c) = q.claimed_by {
        let m = mark(args, Arg::Text(c.to_string()));
        cond.push(format!("claimed_by = {m}"));
    }
    // a negated bare word is left to the reader, who checks it against the redacted row
    for t in q
        .terms
        .iter()
        .filter(|t| !(t.negated && matches!(t.matches, Match::Word(_))))
    {
        let now = ms(q.now);
        let live = |args: &mut Vec<Arg>| mark(args, Arg::Int(now));
        let sql = match &t.matches {
            Match::States(states) => {
                let marks: Vec<String> = states
                    .iter()
                    .map(|s| mark(args, Arg::Text(s.as_str().to_string())))
                    .collect();
                format!("state IN ({})", marks.join(", "))
            }
            Match::Workflow(v) => {
                format!("workflow = {}", mark(args, Arg::Text(v.clone())))
            }
            Match::Step(v) => format!("step = {}", mark(args, Arg::Text(v.clone()))),
            Match::Destination(v) => {
                format!("destination = {}", mark(args, Arg::Text(v.clone())))
            }
            Match::Action(v) => format!("action = {}", mark(args, Arg::Text(v.clone()))),
            Match::Claimed(c) => {
                let who = match c {
                    Claimed::By(name) => Some(name.clone()),
                    Claimed::Me => Some(q.viewer.to_string()),
                    Claimed::Nobody | Claimed::Anyone => None,
                };
                let at = live(args);
                match (c, who) {
                    (Claimed::Nobody, _) => {
                        format!("(claimed_by IS NULL OR claim_expires_at <= {at})")
                    }
                    (_, Some(name)) => format!(
                        "(claimed_by = {} AND claim_expires_at > {at})",
                        mark(args, Arg::Text(name))
                    ),
                    _ => format!("(claimed_by IS NOT NULL AND claim_expires_at > {at})"),
                }
            }
            Match::AgeOver(d) => {
                let t0 = ms(crate::domain::time::before(q.now, *d));
                format!("{time} <= {}", mark(args, Arg::Int(t0)))
            }
            Match::AgeUnder(d) => {
                let t0 = ms(crate::domain::time::before(q.now, *d));
                format!("{time} > {}", mark(args, Arg::Int(t0)))
            }
            // exact on both backends (SQLite's LIKE ignores case, PostgreSQL's does not)
            Match::KeyPrefix(p) => format!(
                "substr(key, 1, {}) = {}",
                p.chars().count(),
                mark(args, Arg::Text(p.clone()))
            ),
            Match::Key(k) => format!("key = {}", mark(args, Arg::Text(k.clone()))),
            Match::Word(w) => {
                let n = mark(args, Arg::Text(format!("%{}%", like_escaped(w))));
                words_match(&n)
            }
        };
        // a negated term keeps the rows where it is false or unknown (a NULL claim)
        cond.push(if t.negated {
            format!("({sql}) IS NOT TRUE")
        } else {
            sql
        });
    }
    cond
}

/// Text for a LIKE pattern: its own `%`, `_` and `\` match only themselves.
fn like_escaped(text: &str) -> String {
    text.chars()
        .flat_map(|c| match c {
            '%' | '_' | '\\' => vec!['\\', c],
            c => vec![c],
        })
        .collect()
}

/// A bare word of the filter: found in the key, workflow, step, destination, state or error.
fn words_match(n: &str) -> String {
    format!(
        "(LOWER(key) LIKE {n} ESCAPE '\\' OR LOWER(workflow) LIKE {n} ESCAPE '\\' \
         OR LOWER(step) LIKE {n} ESCAPE '\\' OR LOWER(destination) LIKE {n} ESCAPE '\\' \
         OR state LIKE {n} ESCAPE '\\' OR LOWER(COALESCE(last_error, '')) LIKE {n} ESCAPE '\\')"
    )
}
