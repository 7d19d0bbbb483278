//! PostgreSQL's pages of a filter with bare words (manual: The command line), at the ten million operations.
//!
//! A word is looked for in each row's text (`terms::EXCEPTION_TEXT`; schema 15 keeps a trigram
//! index of the exceptions'). The planner cannot know how many rows hold a word. Taking it for a
//! common one, it walks the order's index and stops at a full page: for a word that no row holds
//! that reads every row (1.6 s at a million exceptions). Taking it for a rare one, it reads
//! every match through the trigram index and sorts them: for a word that every row holds that
//! reads them all (6 s). So a page is read in two tries, each planned for its own values (never
//! by a plan made once for any word):
//!
//! 1. the next `WALKED` rows of the view in the order (whatever the filter), walked: a common
//!    word fills its page here;
//! 2. only if the page is not full and rows remain past those, the matches among the rest, found
//!    by the index and sorted: a word that left the page short in `WALKED` rows is a rare one.
//!
//! A word that is rare where the page starts and common past it costs the sort of its matches.
//! SQLite needs none of this: its index on the text, in the order, rules a row out without
//! reading it (a million exceptions in 0.1 s); the tests run the two tries on both.

use super::page_sql::page_statement;
use super::page_sql::{Bound, Extra, order_by, order_columns, page_conditions, page_row};
use super::sql::{Stmt, get};
use super::terms::{Arg, Cursor, ListQuery, cells, mark, where_clause};
use super::{Backend, Store};
use crate::domain::Op;
use crate::domain::next_step::Paused;
use crate::error::Result;

/// How many rows of the order the first try walks: a common word fills its page within them.
pub(super) const WALKED: i64 = 20_000;

impl Store {
    /// A page of `q`, whose filter has bare words, in two tries (the first walks `walked` rows).
    pub(super) async fn page_by_words(
        &self,
        q: &ListQuery<'_>,
        walked: i64,
    ) -> Result<Vec<(i64, Op, Paused)>> {
        let horizon = self.horizon(q, walked).await?;
        let walked = Extra {
            bound: horizon.as_ref().map(Bound::Before),
            ..Extra::default()
        };
        let sql = page_statement(q, walked);
        let mut rows = self.page_rows(&sql.stmt().planned_each_time()).await?;
        let Some(h) = horizon else {
            return Ok(rows);
        };
        if rows.len() as i64 >= q.limit {
            return Ok(rows);
        }
        let rest = ListQuery {
            limit: q.limit - rows.len() as i64,
            ..q.clone()
        };
        let sorted = Extra {
            bound: Some(Bound::From(&h)),
            sorted_apart: true,
            ..Extra::default()
        };
        let stmt = page_statement(&rest, sorted);
        let stmt = stmt.stmt().planned_each_time();
        if self.backend() == Backend::Sqlite {
            rows.extend(self.page_rows(&stmt).await?);
            return Ok(rows);
        }
        // without PostgreSQL's JIT: the sort's estimated cost passes its threshold, and
        // compiling would take far longer than reading the page
        let mut tx = self.begin().await?;
        let no_jit = Stmt::new("SET LOCAL jit = off", Vec::new()).planned_each_time();
        let more = match no_jit.execute(tx.db()).await {
            Ok(_) => stmt.rows(tx.db(), page_row).await,
            Err(e) => Err(e),
        };
        tx.rollback().await;
        rows.extend(more?);
        Ok(rows)
    }

    /// Where the first try stops: the row `walked` rows past where the page starts, in the order
    /// of the view's rows whatever the filter (the view's own index, read alone); `None` when
    /// fewer rows remain.
    async fn horizon(&self, q: &ListQuery<'_>, walked: i64) -> Result<Option<Cursor>> {
        let mut args: Vec<Arg> = Vec::new();
        let scope = Extra {
            no_terms: true,
            ..Extra::default()
        };
        let cond = page_conditions(q, scope, &mut args);
        let offset = mark(&mut args, Arg::Int(walked));
        let sql = format!(
            "SELECT {} FROM operations{} ORDER BY {} LIMIT 1 OFFSET {offset}",
            order_columns(q),
            where_clause(&cond),
            order_by(q, false)
        );
        let time = q.time_column();
        let group = q.order.column();
        Stmt::new(sql, cells(&args))
            .row(super::replica::reads(self).conn().await?.db(), |r| {
                Ok(Cursor {
                    group: group.map(|g| get(r, g)).transpose()?,
                    at: get(r, time)?,
                    id: get(r, "id")?,
                })
            })
            .await
    }
}

#[cfg(test)]
mod tests {
    use chrono::{DateTime, TimeDelta};

    use super::super::page_sql::{Extra, page_statement};
    use super::super::store_tests::{Fresh, sqlite};
    use super::super::terms::{ListQuery, Order};
    use super::Cursor;
    use crate::domain::filter::Filter;
    use crate::domain::{Op, State};

    /// The two tries read the very pages that one statement reads, for words common, rare (and
    /// only past the first walk), absent and short, in every order, both ways, from every page's
    /// start: 60 exceptions, a walk of 7 rows.
    async fn two_tries_read_what_one_statement_reads(f: &Fresh) {
        let at = DateTime::from_timestamp_millis(1_800_000_000_000).unwrap();
        let ops: Vec<Op> = (0..60)
            .map(|i| {
                let wf = ["wf-a", "wf-b", "wf-c"][i % 3];
                let t = at + TimeDelta::seconds(i as i64 / 2);
                let mut op = Op::new(
                    &format!("k-{i:02}"),
                    wf,
                    "s",
                    "d",
                    "a",
                    "{}".into(),
                    "f".into(),
                    t,
                );
                op.state = [State::Unknown, State::Rejected][i % 2];
                op.exception_since = Some(t);
                let rare = [3, 41, 42, 55].contains(&i);
                op.last_error = Some(if rare { "common needle" } else { "common" }.into());
                op
            })
            .collect();
        let mut tx = f.store.begin().await.unwrap();
        tx.insert_ops(&ops.iter().collect::<Vec<_>>())
            .await
            .unwrap();
        tx.commit().await.unwrap();
        let now = at + TimeDelta::days(1);
        for text in ["needle", "wf-b", "zzz", "k-4", "n", "common state:unknown"] {
            let terms = Filter::parse(text).unwrap().terms;
            for order in [Order::Time, Order::State, Order::Workflow] {
                for backwards in [false, true] {
                    let mut from: Option<Cursor> = None;
                    loop {
                        let q = ListQuery {
                            terms: &terms,
                            now,
                            viewer: "alice",
                            exceptions_only: true,
                            order,
                            from: from.as_ref(),
                            backwards,
                            limit: 5,
                            ..ListQuery::default()
                        };
                        let one = page_statement(&q, Extra::default());
                        let one = f.store.page_rows(&one.stmt()).await.unwrap();
                        let two = f.store.page_by_words(&q, 7).await.unwrap();
                        let ids =
                            |rows: &[(i64, Op, _)]| rows.iter().map(|r| r.0).collect::<Vec<_>>();
                        assert_eq!(
                            ids(&two),
                            ids(&one),
                            "{text} {order:?} {backwards} {from:?}"
                        );
                        let Some((id, op, _)) = one.last().filter(|_| one.len() == 5) else {
                            break;
                        };
                        from = Some(Cursor {
                            group: match order {
                                Order::State => Some(op.state.as_str().to_string()),
                                Order::Workflow => Some(op.workflow.clone()),
                                _ => None,
                            },
                            at: op.exception_since.unwrap().timestamp_millis(),
                            id: *id,
                        });
                    }
                }
            }
        }
    }

    #[tokio::test]
    async fn on_sqlite() {
        two_tries_read_what_one_statement_reads(&sqlite().await).await;
    }

    #[tokio::test]
    #[cfg_attr(not(settle_pg), ignore = "needs SETTLE_TEST_POSTGRES_URL")]
    async fn on_postgres() {
        two_tries_read_what_one_statement_reads(&super::super::store_tests::postgres().await).await;
    }
}
