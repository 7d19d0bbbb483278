//! The dispatcher's work: operations due for an attempt, the destinations' retry budgets,
//! heartbeats, and what automation may still move.

use chrono::{DateTime, Utc};

use super::columns;
use super::sql::{Cell, Marks, Stmt, get, marks, ms, time};
use super::{Db, Open, Store, Tx};
use crate::domain::Op;
use crate::error::Result;

/// A destination's retry budget as stored: tokens, when they were last topped up, version.
pub(crate) struct BudgetRow {
    pub tokens: u32,
    pub refilled_at: DateTime<Utc>,
    pub version: i64,
    /// Its destination's health as JSON (schema 22); none: never troubled.
    pub health: Option<String>,
}

/// Due `pending`/`retry_wait` operations of these destinations, oldest due first: not claimed,
/// workflow not paused nor `full` (no room for another attempt under its stopping threshold), destination not paused; retries left out at the `starved` destinations (their budget
/// is empty). `None` when there is nothing to ask.
///
/// Only `pending` and `retry_wait` operations have a `next_attempt_at` (every transition clears
/// it for the other states), so the statement does not filter on `state`: PostgreSQL reads the
/// state's statistics, finds most rows `in_flight` under a busy dispatcher, expects few due rows
/// and reads and sorts all of them instead of walking the index in order to its limit. The rules
/// check the state again.
///
/// `until` (at or after `now`) looks ahead: rows due by then, for the moment the next one is due.
#[allow(clippy::too_many_arguments)]
fn due_stmt<'a>(
    destinations: &'a [String],
    starved: &'a [String],
    full: &'a [String],
    now: DateTime<Utc>,
    until: DateTime<Utc>,
    limit: usize,
    what: &str,
    lock: &str,
) -> Option<Stmt<'a>> {
    if destinations.is_empty() || limit == 0 {
        return None;
    }
    let mut next = 4 + destinations.len();
    let waiting = if starved.is_empty() {
        String::new()
    } else {
        let s = format!(
            " AND NOT (attempts > budget_start AND destination IN {})",
            marks(Marks::Numbered, next, starved.len())
        );
        next += starved.len();
        s
    };
    let full_back = if full.is_empty() {
        String::new()
    } else {
        format!(
            " AND workflow NOT IN {}",
            marks(Marks::Numbered, next, full.len())
        )
    };
    let sql = format!(
        "SELECT {what} FROM operations \
         WHERE next_attempt_at IS NOT NULL AND next_attempt_at <= $3 \
         AND (claimed_by IS NULL OR claim_expires_at <= $1) \
         AND workflow NOT IN (SELECT name FROM workflows WHERE paused = 1) \
         AND destination NOT IN (SELECT name FROM destinations WHERE paused = 1) \
         AND destination IN {}{waiting}{full_back} ORDER BY next_attempt_at, id LIMIT $2{lock}",
        marks(Marks::Numbered, 4, destinations.len()),
    );
    let mut cells = vec![
        Cell::Int(Some(ms(now))),
        Cell::Int(Some(limit as i64)),
        Cell::Int(Some(ms(until.max(now)))),
    ];
    cells.extend(
        destinations
            .iter()
            .chain(starved)
            .chain(full)
            .map(|d| Cell::Text(Some(d.as_str()))),
    );
    Some(Stmt::new(sql, cells))
}

async fn budget(conn: Db<'_>, destination: &str, hold: bool) -> Result<Option<BudgetRow>> {
    let lock = match (&conn, hold) {
        (Db::Postgres(_), true) => " FOR UPDATE",
        _ => "",
    };
    let stmt = Stmt::new(
        format!(
            "SELECT tokens, refilled_at, version, health FROM retry_budgets WHERE destination = $1{lock}"
        ),
        vec![Cell::Text(Some(destination))],
    );
    stmt.row(conn, |r| {
        Ok(BudgetRow {
            tokens: get::<i64>(r, "tokens")?.clamp(0, i64::from(u32::MAX)) as u32,
            refilled_at: time(get(r, "refilled_at")?),
            version: get(r, "version")?,
            health: get(r, "health")?,
        })
    })
    .await
}

impl Tx {
    /// See [`due_stmt`]. On PostgreSQL the rows are locked until the transaction ends and rows
    /// another dispatcher holds are passed over (`FOR UPDATE SKIP LOCKED`), so dispatchers share
    /// the work and never start one operation twice.
    pub(crate) async fn due_ops(
        &mut self,
        destinations: &[String],
        starved: &[String],
        full: &[String],
        now: DateTime<Utc>,
        limit: usize,
    ) -> Result<Vec<(i64, Op)>> {
        let lock = match self.open {
            Open::Postgres(..) => " FOR UPDATE SKIP LOCKED",
            Open::Sqlite(_) => "",
        };
        let what = columns::select();
        let Some(stmt) = due_stmt(destinations, starved, full, now, now, limit, what, lock) else {
            return Ok(Vec::new());
        };
        stmt.rows(self.db(), columns::decode).await
    }

    /// A destination's budget, locked until the transaction ends (PostgreSQL), so that concurrent
    /// dispatchers take their turns instead of racing.
    pub(crate) async fn budget(&mut self, destination: &str) -> Result<Option<BudgetRow>> {
        budget(self.db(), destination, true).await
    }

    /// [`Tx::budget`] without holding the row (on PostgreSQL): a look at its health.
    pub(crate) async fn budget_unheld(&mut self, destination: &str) -> Result<Option<BudgetRow>> {
        budget(self.db(), destination, false).await
    }

    /// Stores a destination's budget and health; a compare-and-set on its version (`None`
    /// makes the row). False when another writer changed it first.
    pub(crate) async fn save_budget(
        &mut self,
        destination: &str,
        tokens: u32,
        refilled_at: DateTime<Utc>,
        health: Option<&str>,
        expected_version: Option<i64>,
    ) -> Result<bool> {
        let mut cells = vec![
            Cell::Text(Some(destination)),
            Cell::Int(Some(i64::from(tokens))),
            Cell::Int(Some(ms(refilled_at))),
            Cell::Text(health),
        ];
        let sql = match expected_version {
            None => {
                "INSERT INTO retry_budgets (destination, tokens, refilled_at, health, version) \
                 VALUES ($1, $2, $3, $4, 1) ON CONFLICT (destination) DO NOTHING"
            }
            Some(_) => {
                cells.push(Cell::Int(expected_version));
                "UPDATE retry_budgets SET tokens = $2, refilled_at = $3, health = $4, \
                 version = version + 1 WHERE destination = $1 AND version = $5"
            }
        };
        let stmt = Stmt::new(sql, cells);
        Ok(stmt.execute(self.db()).await? == 1)
    }
}

/// What the dispatcher asks of the database between its rounds (`Store::work`): the next due
/// time, the interrupted unknowns, the stuck attempts, the budgets as they stand, the heartbeats.
#[derive(Clone, Copy)]
pub(crate) struct Work<'a>(&'a Store);

impl Store {
    pub(crate) fn work(&self) -> Work<'_> {
        Work(self)
    }
}

impl Work<'_> {
    /// Every destination's health as stored (JSON), by name: those never troubled have none.
    pub(crate) async fn healths(&self) -> Result<Vec<(String, String)>> {
        let stmt = Stmt::new(
            "SELECT destination, health FROM retry_budgets WHERE health IS NOT NULL ORDER BY destination"
                .to_string(),
            vec![],
        );
        stmt.rows(self.0.conn().await?.db(), |r| {
            Ok((get(r, "destination")?, get(r, "health")?))
        })
        .await
    }

    /// A destination's retry budget as stored (for reading, not full).
    pub(crate) async fn budget(&self, destination: &str) -> Result<Option<BudgetRow>> {
        budget(self.0.conn().await?.db(), destination, false).await
    }

    /// When the next operation of these destinations is due for an automatic attempt, if one is
    /// by `until` (one row, by the due index): at or before `now` means due now.
    pub(crate) async fn next_due(
        &self,
        destinations: &[String],
        now: DateTime<Utc>,
        until: DateTime<Utc>,
    ) -> Result<Option<DateTime<Utc>>> {
        let Some(stmt) = due_stmt(destinations, &[], &[], now, until, 1, "next_attempt_at", "")
        else {
            return Ok(None);
        };
        stmt.row(self.0.conn().await?.db(), |r| {
            Ok(time(get(r, "next_attempt_at")?))
        })
        .await
    }

    /// Keys of `unknown` operations of these destinations whose attempt was interrupted and not
    /// looked up since (their reason is still exactly `interrupted`), not claimed: what the
    /// dispatcher looks up at a destination with a lookup (manual: States). By the exceptions-by-state
    /// index.
    pub(crate) async fn interrupted_unknowns(
        &self,
        destinations: &[String],
        now: DateTime<Utc>,
        limit: usize,
    ) -> Result<Vec<String>> {
        if destinations.is_empty() || limit == 0 {
            return Ok(Vec::new());
        }
        let sql = format!(
            "SELECT key FROM operations WHERE state = 'unknown' AND exception_since IS NOT NULL \
             AND reason = 'interrupted' AND (claimed_by IS NULL OR claim_expires_at <= $1) \
             AND destination IN {} ORDER BY exception_since, id LIMIT $2",
            marks(Marks::Numbered, 3, destinations.len())
        );
        let mut cells = vec![Cell::Int(Some(ms(now))), Cell::Int(Some(limit as i64))];
        cells.extend(destinations.iter().map(|d| Cell::Text(Some(d.as_str()))));
        Stmt::new(sql, cells)
            .rows(self.0.conn().await?.db(), |r| get(r, "key"))
            .await
    }

    /// Operations of these destinations that automation may still move: pending, retry_wait or
    /// in flight, not claimed, workflow and destination not paused.
    pub(crate) async fn count_unsettled(
        &self,
        destinations: &[String],
        now: DateTime<Utc>,
    ) -> Result<i64> {
        if destinations.is_empty() {
            return Ok(0);
        }
        let sql = format!(
            "SELECT COUNT(*) AS n FROM operations WHERE state IN ('pending', 'retry_wait', 'in_flight') \
             AND (claimed_by IS NULL OR claim_expires_at <= $1) \
             AND workflow NOT IN (SELECT name FROM workflows WHERE paused = 1) \
             AND destination NOT IN (SELECT name FROM destinations WHERE paused = 1) AND destination IN {}",
            marks(Marks::Numbered, 2, destinations.len())
        );
        let mut cells = vec![Cell::Int(Some(ms(now)))];
        cells.extend(destinations.iter().map(|d| Cell::Text(Some(d.as_str()))));
        let stmt = Stmt::new(sql, cells);
        stmt.one(self.0.conn().await?.db(), |r| get(r, "n")).await
    }

    /// Keys of `in_flight` operations whose attempt outlived its timeout.
    pub(crate) async fn stuck_keys(&self, now: DateTime<Utc>, limit: i64) -> Result<Vec<String>> {
        let stmt = Stmt::new(
            "SELECT key FROM operations WHERE exception_since IS NOT NULL AND exception_since <= $1 \
             AND state = 'in_flight' ORDER BY exception_since, id LIMIT $2",
            vec![Cell::Int(Some(ms(now))), Cell::Int(Some(limit))],
        );
        stmt.rows(self.0.conn().await?.db(), |r| get(r, "key"))
            .await
    }

    /// A dispatcher says it is alive; the heartbeats of dispatchers silent since before `forget`
    /// go (they stopped without saying so, and were listed as down meanwhile).
    pub(crate) async fn heartbeat(
        &self,
        name: &str,
        now: DateTime<Utc>,
        forget: DateTime<Utc>,
    ) -> Result<()> {
        let beat = Stmt::new(
            "INSERT INTO dispatchers (name, seen_at) VALUES ($1, $2) \
             ON CONFLICT (name) DO UPDATE SET seen_at = $2",
            vec![Cell::Text(Some(name)), Cell::Int(Some(ms(now)))],
        );
        let gone = Stmt::new(
            "DELETE FROM dispatchers WHERE seen_at < $1",
            vec![Cell::Int(Some(ms(forget)))],
        );
        // a write: in a transaction (a read's connection may be a read-only one, see `Conn`)
        let mut tx = self.0.begin().await?;
        beat.execute(tx.db()).await?;
        gone.execute(tx.db()).await?;
        tx.commit().await
    }

    /// A dispatcher that stops cleanly is no longer listed.
    pub(crate) async fn forget(&self, name: &str) -> Result<()> {
        let stmt = Stmt::new(
            "DELETE FROM dispatchers WHERE name = $1",
            vec![Cell::Text(Some(name))],
        );
        let mut tx = self.0.begin().await?;
        stmt.execute(tx.db()).await?;
        tx.commit().await
    }

    /// The dispatchers heard from since `since`, and when each last was.
    pub(crate) async fn dispatchers(
        &self,
        since: DateTime<Utc>,
    ) -> Result<Vec<(String, DateTime<Utc>)>> {
        let stmt = Stmt::new(
            "SELECT name, seen_at FROM dispatchers WHERE seen_at >= $1 ORDER BY name",
            vec![Cell::Int(Some(ms(since)))],
        );
        stmt.rows(super::replica::reads(self.0).conn().await?.db(), |r| {
            Ok((get(r, "name")?, time(get(r, "seen_at")?)))
        })
        .await
    }

    /// Operations of these destinations due now that a dispatcher would start (not claimed,
    /// workflow and destination not paused), counted up to `cap`: for each destination, its
    /// range of the due index walked in order to the cap (never a bitmap of every due row, which
    /// a million due operations make slow), the destinations' counts added.
    pub(crate) async fn count_due(
        &self,
        destinations: &[String],
        now: DateTime<Utc>,
        cap: i64,
    ) -> Result<i64> {
        if destinations.is_empty() {
            return Ok(0);
        }
        let each: Vec<String> = (0..destinations.len())
            .map(|i| {
                format!(
                    "SELECT one FROM (SELECT 1 AS one FROM operations WHERE destination = ${} \
                     AND next_attempt_at IS NOT NULL AND next_attempt_at <= $1 \
                     AND (claimed_by IS NULL OR claim_expires_at <= $1) \
                     AND workflow NOT IN (SELECT name FROM workflows WHERE paused = 1) \
                     AND destination NOT IN (SELECT name FROM destinations WHERE paused = 1) \
                     ORDER BY next_attempt_at, id LIMIT $2) d{i}",
                    i + 3
                )
            })
            .collect();
        let sql = format!(
            "SELECT COUNT(*) AS n FROM ({}) due",
            each.join(" UNION ALL ")
        );
        let mut cells = vec![Cell::Int(Some(ms(now))), Cell::Int(Some(cap))];
        cells.extend(destinations.iter().map(|d| Cell::Text(Some(d.as_str()))));
        let n: i64 = Stmt::new(sql, cells)
            .one(super::replica::reads(self.0).conn().await?.db(), |r| {
                get(r, "n")
            })
            .await?;
        Ok(n.min(cap))
    }

    pub(crate) async fn last_heartbeat(&self) -> Result<Option<DateTime<Utc>>> {
        let stmt = Stmt::new("SELECT MAX(seen_at) AS t FROM dispatchers", Vec::new());
        stmt.one(super::replica::reads(self.0).conn().await?.db(), |r| {
            Ok(get::<Option<i64>>(r, "t")?.map(time))
        })
        .await
    }
}
