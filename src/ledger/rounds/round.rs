//! A dispatcher's round (see `steps.rs` for its steps): the outcomes of finished attempts and the
//! starts of new ones, many operations in one transaction.

use super::types::{Finished, Round, StartedRows};
use super::work::RoundWork;
use crate::domain::validate_key;
use crate::error::{Error, Result};
use crate::ledger::Ledger;
use crate::store::Tried;
use crate::store::{self, Tx};

/// The ledger's handle for a dispatcher: its rounds, what it asks between them, the sweep.
#[derive(Clone, Copy)]
pub struct Rounds<'a>(pub(in crate::ledger) &'a Ledger);

impl Rounds<'_> {
    /// Records `finished` attempts (and their lookups), then starts up to `limit` due operations
    /// of `destinations`, oldest due first, within their destinations' retry budgets: all in one
    /// transaction, as `actor`. A retry takes its cost from the budget (manual: Automatic retries), a first-try
    /// success refunds one token; retries at a destination whose budget is empty are passed over,
    /// so that first attempts behind them still go. On PostgreSQL the rows to start are taken
    /// with `SKIP LOCKED`: several dispatchers share the work and never start one operation twice.
    pub async fn round(
        self,
        finished: &[Finished],
        destinations: &[String],
        limit: usize,
        actor: &str,
    ) -> Result<Round> {
        self.round_knowing(finished, &StartedRows::new(), destinations, limit, actor)
            .await
    }

    /// [`Ledger::round`], deciding the finished attempts of `started` on the rows their own
    /// rounds left (see [`StartedOp::row`]): a round of a busy dispatcher then reads only the
    /// rows it starts. A row another writer changed meanwhile makes the first try lose its
    /// compare-and-set; the next reads every row again.
    pub async fn round_knowing(
        self,
        finished: &[Finished],
        started: &StartedRows,
        destinations: &[String],
        limit: usize,
        actor: &str,
    ) -> Result<Round> {
        for f in finished {
            validate_key(&f.report.key).map_err(Error::Invalid)?;
            if f.report.outcome.is_none() {
                return Err(Error::Invalid("an attempt needs an outcome".into()));
            }
        }
        let tries = std::sync::atomic::AtomicUsize::new(0);
        let round = store::in_tx!(self.0.store, |tx| {
            let first = tries.fetch_add(1, std::sync::atomic::Ordering::SeqCst) == 0;
            let known = if first { Some(started) } else { None };
            self.round_in(tx, finished, known, destinations, limit, actor)
                .await
        })?;
        let mut workflows: Vec<&str> = round
            .finished
            .iter()
            .flatten()
            .filter(|a| a.to != a.from && a.to.is_exception())
            .map(|a| a.workflow.as_str())
            .collect();
        workflows.sort_unstable();
        workflows.dedup();
        for w in workflows {
            self.0.check_threshold(w).await?;
        }
        Ok(round)
    }

    async fn round_in(
        self,
        conn: &mut Tx,
        finished: &[Finished],
        known: Option<&StartedRows>,
        destinations: &[String],
        limit: usize,
        actor: &str,
    ) -> Result<Tried<Round>> {
        let now = self.0.now();
        let mut w = RoundWork::default();
        self.hold_for_round(conn, &mut w, finished, known, destinations, now)
            .await?;
        self.record_finished(conn, &mut w, finished, actor, now)
            .await?;
        if !self.pause_at_limits(conn, &mut w, now).await? {
            return Ok(Tried::Raced);
        }
        self.start_due(conn, &mut w, destinations, limit, actor, now)
            .await?;
        Ok(match self.write_round(conn, &mut w, now).await? {
            Tried::Done(()) => Tried::Done(w.round),
            Tried::Raced => Tried::Raced,
        })
    }
}
