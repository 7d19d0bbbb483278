//! What the group writer reads before it judges a group (`ledger::group`): the operations
//! its writes name, their attempts' outcomes and which of their workflows and destinations are
//! paused. On PostgreSQL one statement, not three: each round trip of the writer's chain costs
//! about as much as the statement it carries.

use std::collections::HashMap;

use sqlx::Row;

use super::columns::{self, OpCol};
use super::sql::{db, get};
use super::{Open, Tx};
use crate::domain::{Op, Outcome};
use crate::error::Result;

/// A group's reads: the operations by key, every attempt's outcome by `(operation id, number)`
/// (`None` while open; read only when asked for), and each paused workflow and destination as
/// (whether it is a workflow, its name).
#[derive(Default)]
pub(crate) struct GroupReads {
    pub ops: HashMap<String, (i64, Op)>,
    pub attempts: HashMap<(i64, u32), Option<Outcome>>,
    pub paused: Vec<(bool, String)>,
}

static PG_LOAD: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
    // one row per operation found, or one row with no operation: the pause flags ride on each;
    // the operation's columns first, where `columns::decode` reads them, then the two read by
    // position (`columns::AFTER`; only `o` has the operation's names). Each name is looked up
    // by its key (`name = ANY(...)`): written `name = ANY($2) OR name IN (...)` it cannot be,
    // and with scans ruled out its cost passed PostgreSQL's threshold for compiling the query,
    // which then took far longer than running it
    format!(
        "SELECT {}, p.group_paused, a.group_tried \
         FROM (SELECT ARRAY( \
                 SELECT 'w' || name FROM workflows WHERE paused = 1 \
                   AND name = ANY($2 || ARRAY(SELECT workflow FROM operations WHERE key = ANY($1))) \
                 UNION ALL \
                 SELECT 'd' || name FROM destinations WHERE paused = 1 \
                   AND name = ANY($3 || ARRAY(SELECT destination FROM operations WHERE key = ANY($1))) \
               ) AS group_paused) p \
         LEFT JOIN operations o ON o.key = ANY($1) \
         LEFT JOIN LATERAL (SELECT ARRAY_AGG(t.n || ':' || COALESCE(t.outcome, '')) AS group_tried \
                 FROM attempts t WHERE $4 AND t.operation_id = o.id) a ON TRUE",
        columns::select()
    )
});

impl Tx {
    /// The operations with these keys (not held), with their attempts' outcomes where
    /// `with_attempts`, and which of `workflows`, `destinations` and the operations' own are
    /// paused.
    pub(crate) async fn load_group(
        &mut self,
        keys: &[&str],
        workflows: &[&str],
        destinations: &[&str],
        with_attempts: bool,
    ) -> Result<GroupReads> {
        let keep = self.keeps_plans();
        let Open::Postgres(t, _) = &mut self.open else {
            // SQLite: in the process, a statement costs no round trip
            let ops = self.load_ops(keys, false).await?;
            let ids: Vec<i64> = ops.values().map(|(id, _)| *id).collect();
            let attempts = match with_attempts {
                true => self.attempt_outcomes(&ids).await?,
                false => HashMap::new(),
            };
            let mut workflows = workflows.to_vec();
            let mut destinations = destinations.to_vec();
            workflows.extend(ops.values().map(|(_, op)| op.workflow.as_str()));
            destinations.extend(ops.values().map(|(_, op)| op.destination.as_str()));
            workflows.sort_unstable();
            workflows.dedup();
            destinations.sort_unstable();
            destinations.dedup();
            let paused = self.paused_among(&workflows, &destinations).await?;
            return Ok(GroupReads {
                ops,
                attempts,
                paused,
            });
        };
        let rows = sqlx::query(&PG_LOAD)
            .bind(keys)
            .bind(workflows)
            .bind(destinations)
            .bind(with_attempts)
            .persistent(keep)
            .fetch_all(&mut **t)
            .await
            .map_err(db)?;
        // after the operation's own columns, by position (a lookup by name compares every name)
        let (paused_at, tried_at) = (OpCol::ALL.len(), OpCol::ALL.len() + 1);
        let mut reads = GroupReads::default();
        for (i, row) in rows.iter().enumerate() {
            if i == 0 {
                let paused: Vec<String> = row.try_get(paused_at).map_err(db)?;
                reads.paused = paused
                    .into_iter()
                    .filter_map(|p| {
                        let (kind, name) = p.split_at_checked(1)?;
                        Some((kind == "w", name.to_string()))
                    })
                    .collect();
            }
            if get::<Option<i64>>(row, OpCol::Id.at())?.is_none() {
                continue;
            }
            let (id, op) = columns::decode(row)?;
            let tried: Option<Vec<String>> = row.try_get(tried_at).map_err(db)?;
            for t in tried.unwrap_or_default() {
                let corrupt = || super::sql::corrupt("attempts");
                let (n, outcome) = t.split_once(':').ok_or_else(corrupt)?;
                let n: u32 = n.parse().map_err(|_| corrupt())?;
                let outcome = match outcome {
                    "" => None,
                    o => Some(Outcome::parse(o).map_err(|_| corrupt())?),
                };
                reads.attempts.insert((id, n), outcome);
            }
            reads.ops.insert(op.key.clone(), (id, op));
        }
        Ok(reads)
    }
}

#[cfg(test)]
mod tests {
    use super::super::store_tests::{Fresh, postgres, sqlite};
    use super::super::{AttemptWrite, Pausable};
    use crate::domain::{Op, Outcome};

    /// The group writer's reads, in its own transaction: the operations found (a missing key is
    /// no row), every attempt's outcome only when asked for, and which workflows and destinations
    /// are paused among the operations' own and those named, on either backend.
    async fn reads_what_a_group_needs(f: Fresh) {
        let now = chrono::Utc::now();
        let mut tx = f.store.begin_only_lookups().await.unwrap();
        let a = Op::new("a", "w", "s", "d", "x", "{}".into(), "fp".into(), now);
        let b = Op::new("b", "v", "s", "e", "x", "{}".into(), "fp".into(), now);
        let ids = tx.insert_ops(&[&a, &b]).await.unwrap();
        let id = ids.iter().find(|(_, k)| k == "a").unwrap().0;
        let opened = [(id, 1, "bot", now), (id, 2, "bot", now)];
        assert!(tx.write_changes(&[], &opened, &[], &[], &[]).await.unwrap());
        let first = AttemptWrite {
            operation_id: id,
            n: 1,
            actor: "bot",
            at: now,
            outcome: Outcome::Rejected,
            http_status: Some(422),
            reference: None,
            error: Some("no"),
        };
        assert!(
            tx.write_changes(&[], &[], &[first], &[], &[])
                .await
                .unwrap()
        );
        // paused: a's workflow, b's destination, a workflow only named, one neither has nor names
        for (kind, name) in [
            (Pausable::Workflow, "w"),
            (Pausable::Destination, "e"),
            (Pausable::Workflow, "z"),
            (Pausable::Workflow, "q"),
        ] {
            assert!(
                tx.set_paused(kind, name, true, None, "alice", now, None)
                    .await
                    .unwrap()
            );
        }
        let r = tx
            .load_group(&["a", "b", "gone"], &["z"], &["d"], true)
            .await
            .unwrap();
        let mut keys: Vec<&String> = r.ops.keys().collect();
        keys.sort();
        assert_eq!(keys, ["a", "b"]);
        assert_eq!(r.ops["a"].0, id);
        assert_eq!(r.ops["a"].1.workflow, "w");
        assert_eq!(r.attempts.len(), 2, "{:?}", r.attempts);
        assert_eq!(r.attempts[&(id, 1)], Some(Outcome::Rejected));
        assert_eq!(r.attempts[&(id, 2)], None);
        let mut paused = r.paused.clone();
        paused.sort();
        assert_eq!(
            paused,
            [
                (false, "e".to_string()),
                (true, "w".to_string()),
                (true, "z".to_string())
            ]
        );
        // attempts only when asked for; a group of keys not stored still hears the flags
        let r = tx.load_group(&["a"], &[], &[], false).await.unwrap();
        assert!(r.attempts.is_empty());
        assert_eq!(r.paused, [(true, "w".to_string())]);
        let r = tx.load_group(&["gone"], &["z"], &[], true).await.unwrap();
        assert!(r.ops.is_empty() && r.attempts.is_empty());
        assert_eq!(r.paused, [(true, "z".to_string())]);
        tx.rollback().await;
    }

    #[tokio::test]
    async fn reads_what_a_group_needs_on_sqlite() {
        reads_what_a_group_needs(sqlite().await).await;
    }

    #[tokio::test]
    #[cfg_attr(not(settle_pg), ignore = "needs SETTLE_TEST_POSTGRES_URL")]
    async fn reads_what_a_group_needs_on_postgres() {
        reads_what_a_group_needs(postgres().await).await;
    }
}
