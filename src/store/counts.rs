//! Counts for the header, `stats` and the metrics: from the counters the triggers keep and the
//! partial indexes of the exceptions, never a count of the operations at large (but for
//! `count_rows`, the tests' and benches' raw totals).

use chrono::{DateTime, Utc};

use super::Store;
use super::sql::{Cell, Stmt, get, ms, time};
use crate::domain::State;
use crate::error::{Error, Result};

impl Store {
    /// How many operations are in each state: the counters the triggers of schema 7 keep, never
    /// a count of the operations.
    pub(crate) async fn count_by_state(&self) -> Result<Vec<(State, i64)>> {
        let stmt = Stmt::new(
            "SELECT state, CAST(SUM(n) AS BIGINT) AS n FROM state_counts GROUP BY state",
            Vec::new(),
        );
        stmt.rows(super::replica::reads(self).conn().await?.db(), |r| {
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
        stmt.one(super::replica::reads(self).conn().await?.db(), |r| {
            Ok((get(r, "stuck")?, get::<Option<i64>>(r, "oldest")?.map(time)))
        })
        .await
    }

    /// The exceptions now by workflow and state (manual: Metrics): the counters of the
    /// exception states (schema 8) and the attempts in flight past their timeout (a range of the
    /// exceptions' index by state); and every workflow and its oldest exception (the first entry of its
    /// range of the exceptions' index by workflow). Nothing reads the operations at large.
    pub(crate) async fn exceptions_by_workflow(
        &self,
        now: DateTime<Utc>,
    ) -> Result<(
        Vec<(String, State, i64)>,
        Vec<(String, Option<DateTime<Utc>>)>,
    )> {
        let exception_states = exception_states();
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
        let mut conn = super::replica::reads(self).conn().await?;
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
        Ok((counts, oldest))
    }

    /// The exceptions in an exception state by workflow: the counters of schema 8 alone (what
    /// `stats` needs to say how many nobody owns; the metrics' gauges need the rest too).
    pub(crate) async fn exceptions_per_workflow(&self) -> Result<Vec<(String, i64)>> {
        let exception_states = exception_states();
        let stmt = Stmt::new(
            format!(
                "SELECT workflow, CAST(SUM(n) AS BIGINT) AS n FROM state_counts \
                 WHERE state IN ({exception_states}) GROUP BY workflow"
            ),
            Vec::new(),
        );
        stmt.rows(super::replica::reads(self).conn().await?.db(), |r| {
            Ok((get(r, "workflow")?, get(r, "n")?))
        })
        .await
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
    pub(super) async fn scalar(&self, stmt: Stmt<'_>) -> Result<i64> {
        stmt.one(super::replica::reads(self).conn().await?.db(), |r| {
            get(r, "n")
        })
        .await
    }
}

/// The exception states as an SQL list of literals (`'unknown', 'failed', ...`).
pub(super) fn exception_states() -> String {
    State::ALL
        .iter()
        .filter(|s| s.is_exception())
        .map(|s| format!("'{}'", s.as_str()))
        .collect::<Vec<_>>()
        .join(", ")
}
