//! How PostgreSQL plans a write transaction's statements: as lookups by key (no hash or merge
//! joins; in the group writer also no scans), and whether the change set's statements are kept
//! on the connection or planned at each call.

use super::conn::{Plans, Pool};
use super::{Open, Store, Tx, sql};
use crate::error::Result;

impl Tx {
    /// Whether this transaction's change-set statements may be kept on the connection: only in
    /// [`Store::begin_only_lookups`]'s transaction, and never through PgBouncer (which names no
    /// statement).
    pub(crate) fn keeps_plans(&self) -> bool {
        matches!(self.open, Open::Postgres(_, Plans::Kept))
    }

    /// Plans the rest of this transaction's statements as the lookups by key they are: on
    /// PostgreSQL no hash or merge joins, so that a change set of a few dozen rows joins its
    /// arrays to `operations` and `attempts` through their primary keys. Without this a prepared
    /// statement's generic plan scans the whole `attempts` table to update a few of its rows, and
    /// a dispatcher round's write grows with the ledger.
    pub(crate) async fn lookups_by_key(&mut self) -> Result<()> {
        self.plan_as_lookups().await
    }

    async fn plan_as_lookups(&mut self) -> Result<()> {
        if let Open::Sqlite(_) = self.open {
            return Ok(());
        }
        sql::Stmt::new(settings(false), Vec::new())
            .execute(self.db())
            .await?;
        Ok(())
    }
}

impl Store {
    /// A transaction that runs nothing but lookups by key (the group writer's): on PostgreSQL
    /// [`Tx::lookups_by_key`]'s settings and also no scan of a table whose index answers, sent
    /// with its `BEGIN` (one round trip, not two), and the change set's statements kept on the
    /// connection ([`Plans::Kept`]). Planned at each call, the change set's update still chose to
    /// scan `operations` as the table grew. Not for a transaction with other queries: with scans
    /// ruled out, a query that must scan a small table (the dispatcher's due query, past the
    /// paused workflows) has every plan's cost swamped by the penalty and takes a bad one.
    pub(crate) async fn begin_only_lookups(&self) -> Result<Tx> {
        let Pool::Postgres(p) = &self.pool else {
            return self.begin().await;
        };
        let t = p
            .begin_with(format!("BEGIN; {}", settings(true)))
            .await
            .map_err(|e| self.err(e))?;
        // through PgBouncer no statement is named, so none is kept
        let plans = match super::bouncer::names_statements() {
            true => Plans::Kept,
            false => Plans::EachCall,
        };
        Ok(Tx::of(Open::Postgres(t, plans)))
    }
}

/// The settings of a transaction of lookups by key, for its own transaction only; with `only`,
/// no scans either (see [`Store::begin_only_lookups`]).
fn settings(only: bool) -> String {
    let joins_off = "SELECT set_config('enable_hashjoin', 'off', true), \
                     set_config('enable_mergejoin', 'off', true)";
    match only {
        false => joins_off.to_string(),
        // and never compiled: the penalty a scan pays may pass the cost that asks for it
        true => format!(
            "{joins_off}, set_config('enable_seqscan', 'off', true), set_config('jit', 'off', true)"
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::super::store_tests::{postgres, sqlite};
    use super::*;

    /// The plan a connection keeps for a change set's update (a generic plan, as a named
    /// statement gets after its first runs), made while `operations` is empty: each line.
    async fn kept_update_plan(tx: &mut Tx) -> Vec<String> {
        let Open::Postgres(t, _) = &mut tx.open else {
            unreachable!("PostgreSQL")
        };
        let mut lines = Vec::new();
        for sql in [
            "SET LOCAL plan_cache_mode = force_generic_plan",
            "PREPARE settle_kept(BIGINT[], BIGINT[]) AS UPDATE operations o SET version = v.expected + 1 \
             FROM UNNEST($1, $2) AS v(id, expected) WHERE o.id = v.id AND o.version = v.expected",
            "EXPLAIN EXECUTE settle_kept('{1,2}', '{0,0}')",
            "DEALLOCATE settle_kept",
        ] {
            let rows: Vec<String> = sqlx::query_scalar(sql)
                .persistent(false)
                .fetch_all(&mut **t)
                .await
                .unwrap_or_default();
            lines.extend(rows);
        }
        lines
    }

    #[tokio::test]
    #[cfg_attr(not(settle_pg), ignore = "needs SETTLE_TEST_POSTGRES_URL")]
    async fn the_group_writers_kept_plans_look_rows_up_by_key_at_any_size() {
        let f = postgres().await;
        // a round's transaction: hash and merge joins ruled out, scans not, nothing kept; the
        // plan it would keep scans the table it was made on while it was empty
        let mut tx = f.store.begin().await.unwrap();
        assert!(!tx.keeps_plans());
        tx.lookups_by_key().await.unwrap();
        assert!(
            !tx.keeps_plans(),
            "a round's change set is planned at each call"
        );
        let round = kept_update_plan(&mut tx).await;
        tx.rollback().await;
        assert!(
            round.iter().any(|l| l.contains("Seq Scan on operations")),
            "{round:#?}"
        );
        // the group writer's: kept, and the plan finds each row by its key
        let mut tx = f.store.begin_only_lookups().await.unwrap();
        assert!(
            tx.keeps_plans(),
            "the group writer keeps its change set's plans"
        );
        let group = kept_update_plan(&mut tx).await;
        tx.rollback().await;
        assert!(
            group
                .iter()
                .any(|l| l.contains("Index Scan using operations_pkey")),
            "{group:#?}"
        );
        assert!(!group.iter().any(|l| l.contains("Seq Scan")), "{group:#?}");
    }

    #[tokio::test]
    async fn sqlite_has_no_plans_to_keep() {
        let f = sqlite().await;
        let tx = f.store.begin_only_lookups().await.unwrap();
        assert!(!tx.keeps_plans());
        tx.rollback().await;
    }
}
