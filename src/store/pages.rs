//! What readers see of the operations: pages of them (keyset pagination on indexed columns,
//! never the whole queue), the keys a filter matches and their count, one operation. The
//! history and the activity feed are in `history.rs`, the counts in `counts.rs`.

use std::collections::HashMap;

use super::Store;
use super::columns;
use super::page_sql::{Extra, order_by, page_statement};
use super::sql::{Cell, Stmt, get};
use super::terms::{ListQuery, cells, conditions, where_clause};
use crate::domain::Op;
use crate::domain::filter::{Match, Term};
use crate::domain::next_step::Paused;
use crate::error::Result;

impl Store {
    /// A page of operations (see [`ListQuery`]); each with whether its workflow or destination
    /// is paused (one round trip, not three). PostgreSQL looks for bare words its own way
    /// (`words.rs`).
    pub(crate) async fn page(&self, q: &ListQuery<'_>) -> Result<Vec<(i64, Op, Paused)>> {
        let word = |t: &Term| !t.negated && matches!(t.matches, Match::Word(_));
        if self.backend() == super::Backend::Postgres && q.terms.iter().any(word) {
            return self.page_by_words(q, super::words::WALKED).await;
        }
        let sql = page_statement(q, Extra::default());
        self.page_rows(&sql.stmt()).await
    }

    /// The keys of every operation a list's filter matches, in the list's order (`backwards`:
    /// reversed); `from` and `limit` are not read. What `A` and `--where` act on: the keys only,
    /// one statement, however many match.
    pub(crate) async fn matching_keys(&self, q: &ListQuery<'_>) -> Result<Vec<String>> {
        let mut args = Vec::new();
        let cond = where_clause(&conditions(q, q.time_column(), &mut args, true));
        let sql = format!(
            "SELECT key FROM operations{cond} ORDER BY {}",
            order_by(q, false)
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
        // SQLite: the ordering time's bounds (the exceptions' "not after now", an age) read from
        // the rows an index finds, never as the range of an index: otherwise the planner takes
        // the workflow's or state's index for its range, and reads each row of it for the rest
        // instead of counting the narrow index that holds workflow, destination and state
        let time = match self.backend() {
            super::Backend::Sqlite => format!("+{}", q.time_column()),
            super::Backend::Postgres => q.time_column().to_string(),
        };
        let cond = where_clause(&conditions(q, &time, &mut args, true));
        let sql = format!("SELECT COUNT(*) AS n FROM operations{cond}");
        Stmt::new(sql, cells(&args))
            .one(super::replica::reads(self).conn().await?.db(), |r| {
                get(r, "n")
            })
            .await
    }

    /// The exceptions a filter matches, by workflow, destination, state and group id (schema 21;
    /// manual: Owners and notifications): how many, the first and last to become one. SQLite
    /// reads one narrow index in its order; PostgreSQL counts them in memory.
    pub(crate) async fn exception_groups(&self, q: &ListQuery<'_>) -> Result<Vec<GroupRow>> {
        let mut args = Vec::new();
        let cond = where_clause(&conditions(q, q.time_column(), &mut args, true));
        // SQLite: the groups' index in its order, rather than the narrower one by state that it
        // would pick and then sort (1.1 s at 1,000,000 exceptions)
        let index = match self.backend() {
            super::Backend::Sqlite => " INDEXED BY operations_exception_groups",
            super::Backend::Postgres => "",
        };
        let sql = format!(
            "SELECT workflow, destination, state, group_id, COUNT(*) AS n, \
             MIN(exception_since) AS oldest, MAX(exception_since) AS newest \
             FROM operations{index}{cond} GROUP BY workflow, destination, state, group_id"
        );
        let stmt = Stmt::new(sql, cells(&args));
        let reads = super::replica::reads(self);
        if reads.backend() == super::Backend::Sqlite {
            return stmt.rows(reads.conn().await?.db(), group_row).await;
        }
        // PostgreSQL: room to count the groups in a hash table. Its planner guesses their number
        // from statistics that a burst of new exceptions has outrun (100,000 groups for 210),
        // judges the table too large for the default memory, and sorts a million rows on disk
        // instead: 1.3 s where the count in memory takes 0.35 s (1,000,000 exceptions). And not
        // compiled: the sort's estimated cost may pass JIT's threshold, and compiling costs more
        // than it saves on a count.
        let mut tx = reads.begin().await?;
        let room = Stmt::new(
            "SELECT set_config('work_mem', '64MB', true), set_config('jit', 'off', true)",
            Vec::new(),
        )
        .planned_each_time();
        let rows = match room.execute(tx.db()).await {
            Ok(_) => stmt.rows(tx.db(), group_row).await,
            Err(e) => Err(e),
        };
        tx.rollback().await;
        rows
    }

    /// The key of a group's exception that became one at `at` (its oldest).
    pub(crate) async fn group_sample(&self, g: &GroupRow) -> Result<Option<String>> {
        let group = match g.group {
            Some(_) => "group_id = $4",
            None => "group_id IS NULL AND $4 IS NULL",
        };
        Stmt::new(
            format!(
                "SELECT key FROM operations WHERE workflow = $1 AND destination = $2 \
                 AND state = $3 AND {group} AND exception_since IS NOT NULL \
                 AND exception_since = $5 LIMIT 1"
            ),
            vec![
                Cell::Text(Some(&g.workflow)),
                Cell::Text(Some(&g.destination)),
                Cell::Text(Some(g.state.as_str())),
                Cell::Text(g.group.as_deref()),
                Cell::Int(g.oldest.map(super::sql::ms)),
            ],
        )
        .row(self.conn().await?.db(), |r| get(r, "key"))
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
}

/// One row of [`Store::exception_groups`].
fn group_row(r: &dyn super::sql::Cells) -> Result<GroupRow> {
    let state: String = get(r, "state")?;
    Ok(GroupRow {
        workflow: get(r, "workflow")?,
        destination: get(r, "destination")?,
        state: crate::domain::State::parse(&state).map_err(crate::error::Error::Unavailable)?,
        group: get(r, "group_id")?,
        count: get(r, "n")?,
        oldest: get::<Option<i64>>(r, "oldest")?.map(super::sql::time),
        newest: get::<Option<i64>>(r, "newest")?.map(super::sql::time),
    })
}

/// Exceptions sharing a workflow, destination, state and stored reason.
pub(crate) struct GroupRow {
    pub workflow: String,
    pub destination: String,
    pub state: crate::domain::State,
    /// Its id (none for attempts stuck in flight, which are no group's).
    pub group: Option<String>,
    pub count: i64,
    pub oldest: Option<chrono::DateTime<chrono::Utc>>,
    pub newest: Option<chrono::DateTime<chrono::Utc>>,
}
