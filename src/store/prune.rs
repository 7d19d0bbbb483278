//! Pruning (manual: Retention and the archive): finding terminal operations past retention, and removing one batch of them
//! with their attempts and events, their keys kept in `pruned_keys` until their horizon.

use super::sql::{Cell, Marks, Stmt, corrupt, get, marks, time};
use super::{Store, Tx};
use crate::domain::{Op, Resolution, State};
use crate::error::Result;

/// A terminal operation that retention lets go: its id, key, and where a scan resumes after it.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Prunable {
    pub id: i64,
    pub key: String,
    pub created_at: i64,
}

/// The columns of an operation that `pruned_keys` keeps.
const KEPT: &str = "key, fingerprint, state, reference, workflow, step, destination, action, \
                    attempts, resolution, superseded_by, run, created_at";

impl Store {
    /// Up to `limit` operations in `state` (a terminal one) that became terminal before `before`
    /// (ms), oldest first after `after` (created_at, id): an operation of a run only once its run
    /// is done or closed. A terminal operation's `updated_at` is when it became terminal (or a
    /// later note), and never before its `created_at`, so the index on (state, created_at) finds
    /// them, from where the last batch ended (a row comparison, which both backends take as the
    /// start of the index's range: PostgreSQL walked instead from the first entry of the state,
    /// over every entry the batches before had deleted and VACUUM had not yet removed). A read:
    /// on SQLite it takes no write lock, which a dispatcher beside the prune would wait for.
    pub(crate) async fn prunable(
        &self,
        state: &str,
        before: i64,
        after: (i64, i64),
        limit: i64,
    ) -> Result<Vec<Prunable>> {
        Stmt::new(
            "SELECT id, key, created_at FROM operations o \
             WHERE state = $1 AND created_at < $2 AND updated_at < $2 \
               AND (created_at, id) > ($3, $4) \
               AND (run IS NULL OR EXISTS (SELECT 1 FROM runs r WHERE r.run = o.run \
                    AND (r.done_at IS NOT NULL OR r.closed_at IS NOT NULL))) \
             ORDER BY created_at, id LIMIT $5",
            vec![
                Cell::Text(Some(state)),
                Cell::Int(Some(before)),
                Cell::Int(Some(after.0)),
                Cell::Int(Some(after.1)),
                Cell::Int(Some(limit)),
            ],
        )
        .rows(self.conn().await?.db(), |r| {
            Ok(Prunable {
                id: get(r, "id")?,
                key: get(r, "key")?,
                created_at: get(r, "created_at")?,
            })
        })
        .await
    }
}

impl Tx {
    /// Removes the operations `ids` that are still terminal and became so before `before` (ms),
    /// with their attempts and events; each one's key goes to `pruned_keys` until `horizon_after`
    /// ms past its terminal time, and a run left without operations goes with them. The count
    /// removed.
    pub(crate) async fn prune_batch(
        &mut self,
        ids: &[i64],
        states: &[&str],
        before: i64,
        horizon_after: i64,
    ) -> Result<u64> {
        if ids.is_empty() {
            return Ok(0);
        }
        // the operations still prunable, by the conditions the scan chose them by: `$1` the
        // cutoff, then the ids, then the states; `extra` cells follow them
        let chosen = |extra: Vec<Cell<'static>>| {
            let list = marks(Marks::Numbered, 2, ids.len());
            let states_in = marks(Marks::Numbered, 2 + ids.len(), states.len());
            let mut cells = vec![Cell::Int(Some(before))];
            cells.extend(ids.iter().map(|id| Cell::Int(Some(*id))));
            cells.extend(states.iter().map(|s| Cell::Text(Some(*s))));
            let next = cells.len() + 1;
            cells.extend(extra);
            let sql = format!("id IN {list} AND state IN {states_in} AND updated_at < $1");
            (sql, cells, next)
        };
        let (cond, cells, next) = chosen(vec![Cell::Int(Some(horizon_after))]);
        Stmt::new(
            format!(
                "INSERT INTO pruned_keys ({KEPT}, terminal_at, horizon) \
                 SELECT {KEPT}, updated_at, updated_at + ${next} FROM operations WHERE {cond} \
                 ON CONFLICT (key) DO UPDATE SET {}",
                KEPT.split(", ")
                    .map(str::trim)
                    .chain(["terminal_at", "horizon"])
                    .map(|c| format!("{c} = excluded.{c}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            cells,
        )
        .execute(self.db())
        .await?;
        let (cond, cells, _) = chosen(vec![]);
        let of = format!("operation_id IN (SELECT id FROM operations WHERE {cond})");
        // events are append-only but for this: the gate's row lives only inside this transaction
        for stmt in [
            Stmt::new(format!("DELETE FROM attempts WHERE {of}"), cells.clone()),
            Stmt::new("INSERT INTO prune_gate (id) VALUES (1)", vec![]),
            Stmt::new(format!("DELETE FROM events WHERE {of}"), cells.clone()),
            Stmt::new("DELETE FROM prune_gate", vec![]),
        ] {
            stmt.execute(self.db()).await?;
        }
        let runs = Stmt::new(
            format!("SELECT DISTINCT run FROM operations WHERE {cond} AND run IS NOT NULL"),
            cells.clone(),
        )
        .rows(self.db(), |r| get::<String>(r, "run"))
        .await?;
        let removed = Stmt::new(format!("DELETE FROM operations WHERE {cond}"), cells)
            .execute(self.db())
            .await?;
        for run in &runs {
            Stmt::new(
                "DELETE FROM runs WHERE run = $1 AND NOT EXISTS (SELECT 1 FROM operations WHERE run = $1)",
                vec![Cell::Text(Some(run))],
            )
            .execute(self.db())
            .await?;
        }
        Ok(removed)
    }

    /// Frees the keys whose horizon passed before `now` (ms); how many.
    pub(crate) async fn free_pruned_keys(&mut self, now: i64) -> Result<u64> {
        Stmt::new(
            "DELETE FROM pruned_keys WHERE horizon < $1",
            vec![Cell::Int(Some(now))],
        )
        .execute(self.db())
        .await
    }

    /// A pruned operation as its key still answers for it until its horizon (`now`, ms): its
    /// names, fingerprint, terminal state and reference; no payload (the archive holds it).
    pub(crate) async fn pruned_key(&mut self, key: &str, now: i64) -> Result<Option<Op>> {
        Stmt::new(
            format!("SELECT {KEPT}, terminal_at FROM pruned_keys WHERE key = $1 AND horizon >= $2"),
            vec![Cell::Text(Some(key)), Cell::Int(Some(now))],
        )
        .row(self.db(), |r| {
            let text = |c| get::<String>(r, c);
            let mut op = Op::new(
                &text("key")?,
                &text("workflow")?,
                &text("step")?,
                &text("destination")?,
                &text("action")?,
                "null".into(),
                text("fingerprint")?,
                time(get(r, "created_at")?),
            );
            op.state = State::parse(&text("state")?).map_err(|_| corrupt("state"))?;
            op.reference = get(r, "reference")?;
            op.attempts = get::<i64>(r, "attempts")? as u32;
            op.resolution = get::<Option<String>>(r, "resolution")?
                .map(|t| Resolution::parse(&t).map_err(|_| corrupt("resolution")))
                .transpose()?;
            op.superseded_by = get(r, "superseded_by")?;
            op.run = get(r, "run")?;
            op.updated_at = time(get(r, "terminal_at")?);
            op.next_attempt_at = None;
            Ok(op)
        })
        .await
    }
}
