//! Operations as a write transaction reads and writes them, and the change sets that move them.
//! A change is a compare-and-set on the operation's `version`; many changes (the operations'
//! rows, their attempts and events) are written together: on SQLite as one multi-statement call (parameters bound in order), on PostgreSQL as
//! one statement over arrays (`UNNEST`), so a round or an ingest batch costs one round trip to
//! write whatever its size.

use std::collections::HashMap;

use chrono::{DateTime, Utc};

use super::arrays::{Array, array_marks, lost_a_race, pg_query};
use super::attempts::{AttemptWrite, NewEvent, event_arrays, pg_event_insert, runs};
use super::columns::{self, Kind, changing, inserted};
use super::sql::{Cell, Stmt, db, get, ms, rows_of_marks};
use super::{Open, Tx};
use crate::domain::Op;
use crate::error::Result;

/// An operation's new row, `(id, new row, expected version)`: a compare-and-set.
pub(crate) type OpRow<'a> = (i64, &'a Op, i64);
/// An attempt opened: `(operation id, number, actor, started at)`.
pub(crate) type Opened<'a> = (i64, u32, &'a str, DateTime<Utc>);

/// An opened attempt's cells, in the order of [`OPENED_KINDS`] and of the attempts' insert.
fn opened_cells<'a>((id, n, actor, at): &Opened<'a>) -> [Cell<'a>; 4] {
    [
        Cell::Int(Some(*id)),
        Cell::Int(Some(i64::from(*n))),
        Cell::Text(Some(*actor)),
        Cell::Int(Some(ms(*at))),
    ]
}

const OPENED_KINDS: [Kind; 4] = [Kind::Int, Kind::Int, Kind::Text, Kind::Int];
const CLOSED_KINDS: [Kind; 7] = [
    Kind::Int,
    Kind::Int,
    Kind::Int,
    Kind::Text,
    Kind::Int,
    Kind::Text,
    Kind::Text,
];

/// The statement that writes a change set on PostgreSQL in one round trip: the operations' new
/// rows (a compare-and-set on each), attempts opened, closed and made elsewhere, and the events
/// in order. It answers how many operations it updated.
static PG_WRITE: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
    let changing = changing();
    let kinds: Vec<Kind> = [Kind::Int, Kind::Int]
        .into_iter()
        .chain(changing.iter().map(|c| c.kind()))
        .collect();
    let names: Vec<String> = ["id".to_string(), "expected".to_string()]
        .into_iter()
        .chain(changing.iter().map(|c| c.name().to_string()))
        .collect();
    let sets: Vec<String> = changing
        .iter()
        .map(|c| format!("{0} = v.{0}", c.name()))
        .collect();
    let mut next = 1 + kinds.len();
    let opened = array_marks(next, &OPENED_KINDS);
    next += OPENED_KINDS.len();
    let closed = array_marks(next, &CLOSED_KINDS);
    next += CLOSED_KINDS.len();
    let whole = array_marks(next, &CLOSED_KINDS);
    let whole_actor = next + CLOSED_KINDS.len();
    next = whole_actor + 1;
    let events = pg_event_insert(next);
    format!(
        "WITH u AS (UPDATE operations o SET {sets} FROM UNNEST({ops}) AS v({names}) \
           WHERE o.id = v.id AND o.version = v.expected RETURNING 1), \
         s AS (INSERT INTO attempts (operation_id, n, actor, started_at) SELECT * FROM UNNEST({opened}) RETURNING 1), \
         f AS (UPDATE attempts a SET finished_at = v.at, outcome = v.outcome, http_status = v.status, \
           reference = v.reference, error = v.error FROM UNNEST({closed}) AS v(op, n, at, outcome, status, reference, error) \
           WHERE a.operation_id = v.op AND a.n = v.n RETURNING 1), \
         w AS (INSERT INTO attempts (operation_id, n, started_at, finished_at, outcome, http_status, reference, error, actor) \
           SELECT v.op, v.n, v.at, v.at, v.outcome, v.status, v.reference, v.error, v.actor \
           FROM UNNEST({whole}, ${whole_actor}::TEXT[]) AS v(op, n, at, outcome, status, reference, error, actor) RETURNING 1), \
         e AS ({events} RETURNING 1) \
         SELECT (SELECT COUNT(*) FROM u) AS updated, (SELECT COUNT(*) FROM s) + (SELECT COUNT(*) FROM f) \
           + (SELECT COUNT(*) FROM w) + (SELECT COUNT(*) FROM e) AS others",
        sets = sets.join(", "),
        ops = array_marks(1, &kinds),
        names = names.join(", "),
    )
});

impl Tx {
    /// The operation with this key, held until the transaction ends (PostgreSQL; a SQLite write
    /// transaction holds the whole database): two writers of one operation take turns, and the
    /// second decides on what the first wrote instead of racing it. (A lost compare-and-set is
    /// retried, but a change that adds an attempt would meet the first's attempt row first.)
    pub(crate) async fn hold_op(&mut self, key: &str) -> Result<Option<(i64, Op)>> {
        Ok(self.load_ops(&[key], true).await?.remove(key))
    }

    /// The operations with these keys, by key; with `hold` (PostgreSQL) held until the
    /// transaction ends, taken in key order so that two writers never wait for each other in a
    /// circle.
    pub(crate) async fn load_ops(
        &mut self,
        keys: &[&str],
        hold: bool,
    ) -> Result<HashMap<String, (i64, Op)>> {
        let mut found = HashMap::with_capacity(keys.len());
        if keys.is_empty() {
            return Ok(found);
        }
        let keep = self.keeps_plans();
        match &mut self.open {
            Open::Sqlite(_) => {
                // one statement per key: prepared once, whatever the number of keys
                let sql = format!("SELECT {} FROM operations WHERE key = ?", columns::select());
                for key in keys {
                    let stmt = Stmt::new(sql.as_str(), vec![Cell::Text(Some(*key))]);
                    if let Some((id, op)) = stmt.row(self.db(), columns::decode).await? {
                        found.insert(op.key.clone(), (id, op));
                    }
                }
            }
            Open::Postgres(t, _) => {
                let sql = format!(
                    "SELECT {} FROM operations WHERE key = ANY($1){}",
                    columns::select(),
                    if hold { " ORDER BY key FOR UPDATE" } else { "" }
                );
                // Planned for each call unless the planner was told these are lookups by key
                // (`Plans`): a plan kept on the connection and made while the table was nearly
                // empty (the first batches of a large ingest) scans the whole table once it is
                // not (the re-ingest of 100,000 lines took 5x as long).
                let rows = sqlx::query(&sql)
                    .bind(keys)
                    .persistent(keep)
                    .fetch_all(&mut **t)
                    .await
                    .map_err(db)?;
                for row in rows {
                    let (id, op) = columns::decode(&row)?;
                    found.insert(op.key.clone(), (id, op));
                }
            }
        }
        Ok(found)
    }

    /// Inserts new operations; returns `(id, key)` of those inserted (a key already stored, or
    /// twice in `ops`, is inserted once; a pruned operation's key is taken until its horizon,
    /// The manual's Retention and the archive).
    pub(crate) async fn insert_ops(&mut self, ops: &[&Op]) -> Result<Vec<(i64, String)>> {
        let cols = inserted();
        let names: Vec<&str> = cols.iter().map(|c| c.name()).collect();
        let mut out = Vec::with_capacity(ops.len());
        if ops.is_empty() {
            return Ok(out);
        }
        match &mut self.open {
            Open::Sqlite(_) => {
                // SQLite allows 32,766 parameters in a statement
                for chunk in ops.chunks(500) {
                    let cells = chunk
                        .iter()
                        .flat_map(|op| cols.iter().map(|c| c.cell(op)))
                        .collect();
                    // VALUES names its columns column1, column2, ...
                    let column = |name| {
                        let at = names.iter().position(|n| *n == name).expect("inserted");
                        format!("v.column{}", at + 1)
                    };
                    let stmt = Stmt::new(
                        format!(
                            "INSERT INTO operations ({}) SELECT * FROM (VALUES {}) AS v WHERE {} \
                             ON CONFLICT (key) DO NOTHING RETURNING id, key",
                            names.join(", "),
                            rows_of_marks(chunk.len(), cols.len()),
                            not_pruned(&column("key"), &column("created_at"))
                        ),
                        cells,
                    );
                    let rows = stmt
                        .rows(self.db(), |r| Ok((get(r, "id")?, get(r, "key")?)))
                        .await?;
                    out.extend(rows);
                }
            }
            Open::Postgres(t, _) => {
                let kinds: Vec<Kind> = cols.iter().map(|c| c.kind()).collect();
                let sql = format!(
                    "INSERT INTO operations ({0}) SELECT * FROM UNNEST({1}) AS v ({0}) WHERE {2} \
                     ON CONFLICT (key) DO NOTHING RETURNING id, key",
                    names.join(", "),
                    array_marks(1, &kinds),
                    not_pruned("v.key", "v.created_at")
                );
                let arrays = cols
                    .iter()
                    .map(|c| Array::of(c.kind(), ops.iter().map(|op| c.cell(op))))
                    .collect();
                for row in pg_query(&sql, arrays)
                    .fetch_all(&mut **t)
                    .await
                    .map_err(db)?
                {
                    out.push((get(&row, "id")?, get(&row, "key")?));
                }
            }
        }
        Ok(out)
    }

    /// Writes a change set: the operations' new rows (a compare-and-set on each), the attempts
    /// opened, closed and made elsewhere, and the audit events in order. False when an operation
    /// changed meanwhile (or PostgreSQL broke a deadlock with this transaction): nothing written
    /// stays, the caller rolls back and tries again.
    pub(crate) async fn write_changes(
        &mut self,
        ops: &[OpRow<'_>],
        opened: &[Opened<'_>],
        closed: &[AttemptWrite<'_>],
        whole: &[AttemptWrite<'_>],
        events: &[NewEvent<'_>],
    ) -> Result<bool> {
        let keep = self.keeps_plans();
        match &mut self.open {
            Open::Sqlite(_) => self.write_sqlite(ops, opened, closed, whole, events).await,
            Open::Postgres(t, _) => {
                let mut arrays = Vec::new();
                let changing = changing();
                arrays.push(Array::Int(ops.iter().map(|(id, _, _)| Some(*id)).collect()));
                arrays.push(Array::Int(ops.iter().map(|(_, _, v)| Some(*v)).collect()));
                for c in changing {
                    arrays.push(Array::of(c.kind(), ops.iter().map(|(_, op, _)| c.cell(op))));
                }
                let opened_cells: Vec<[Cell; 4]> = opened.iter().map(opened_cells).collect();
                for (i, k) in OPENED_KINDS.iter().enumerate() {
                    arrays.push(Array::of(*k, opened_cells.iter().map(|r| r[i])));
                }
                for set in [closed, whole] {
                    let rows: Vec<[Cell; 7]> = set.iter().map(AttemptWrite::cells).collect();
                    for (i, k) in CLOSED_KINDS.iter().enumerate() {
                        arrays.push(Array::of(*k, rows.iter().map(|r| r[i])));
                    }
                }
                arrays.push(Array::Text(whole.iter().map(|a| Some(a.actor)).collect()));
                arrays.extend(event_arrays(events));
                // planned for each call unless kept (`Plans`): a plan kept on the connection and
                // made while the table was small (a fresh ledger, before its first autoanalyze)
                // scans every operation for each row it updates
                let query = pg_query(&PG_WRITE, arrays).persistent(keep);
                match query.fetch_one(&mut **t).await {
                    Ok(row) => Ok(get::<i64>(&row, "updated")? == ops.len() as i64),
                    Err(e) if lost_a_race(&e) => Ok(false),
                    Err(e) => Err(db(e)),
                }
            }
        }
    }

    /// SQLite: the change set statement by statement, each prepared once per connection (one
    /// plain `UPDATE` per operation: SQLite's `UPDATE ... FROM` took three times as long per row).
    /// A lost compare-and-set shows as an operation's update writing no row.
    async fn write_sqlite(
        &mut self,
        ops: &[OpRow<'_>],
        opened: &[Opened<'_>],
        closed: &[AttemptWrite<'_>],
        whole: &[AttemptWrite<'_>],
        events: &[NewEvent<'_>],
    ) -> Result<bool> {
        let changing = changing();
        let sets: Vec<String> = changing
            .iter()
            .map(|c| format!("{} = ?", c.name()))
            .collect();
        let update = format!(
            "UPDATE operations SET {} WHERE id = ? AND version = ?",
            sets.join(", ")
        );
        for (id, op, expected) in ops {
            let mut cells: Vec<Cell> = changing.iter().map(|c| c.cell(op)).collect();
            cells.extend([Cell::Int(Some(*id)), Cell::Int(Some(*expected))]);
            if Stmt::new(update.as_str(), cells).execute(self.db()).await? != 1 {
                return Ok(false);
            }
        }
        for run in runs(opened) {
            let cells = run.iter().flat_map(opened_cells).collect();
            Stmt::new(
                format!(
                    "INSERT INTO attempts (operation_id, n, actor, started_at) VALUES {}",
                    rows_of_marks(run.len(), 4)
                ),
                cells,
            )
            .execute(self.db())
            .await?;
        }
        for a in closed {
            let mut cells = a.cells().to_vec();
            // the key (the first two) goes last here
            cells.rotate_left(2);
            Stmt::new(
                "UPDATE attempts SET finished_at = ?, outcome = ?, http_status = ?, reference = ?, \
                 error = ? WHERE operation_id = ? AND n = ?",
                cells,
            )
            .execute(self.db())
            .await?;
        }
        // attempts made elsewhere and the events: runs of a fixed number of rows to a statement,
        // the rest row by row, so every statement's text is one of two and stays prepared
        for run in runs(whole) {
            // operation, number, started = finished, outcome, status, reference, error, actor
            let cells = run
                .iter()
                .flat_map(|a| {
                    let c = a.cells();
                    [
                        c[0],
                        c[1],
                        c[2],
                        c[2],
                        c[3],
                        c[4],
                        c[5],
                        c[6],
                        Cell::Text(Some(a.actor)),
                    ]
                })
                .collect();
            Stmt::new(
                format!(
                    "INSERT INTO attempts (operation_id, n, started_at, finished_at, outcome, http_status, reference, error, actor) \
                     VALUES {}",
                    rows_of_marks(run.len(), 9)
                ),
                cells,
            )
            .execute(self.db())
            .await?;
        }
        self.insert_events(events).await?;
        Ok(true)
    }
}

/// The condition that a new operation's key (the column `key`, made at `created_at`) is not a
/// pruned operation's still inside its horizon.
fn not_pruned(key: &str, created_at: &str) -> String {
    format!(
        "NOT EXISTS (SELECT 1 FROM pruned_keys p WHERE p.key = {key} AND p.horizon >= {created_at})"
    )
}
