//! What a dispatcher asks between its rounds: when the next retry is due, the interrupted
//! attempts to look up, what a lookup is asked with, what is left to move, its heartbeat.

use chrono::{DateTime, Utc};

use super::Rounds;
use crate::domain::Command;
use crate::error::{Error, Result};
use crate::ledger::SYSTEM_ACTOR;
use crate::ledger::change::Ask;

impl Rounds<'_> {
    /// Sweeps attempts that outlived their timeout to `unknown` and applies the stopping thresholds.
    /// Returns how many attempts were swept.
    pub async fn sweep(self) -> Result<usize> {
        self.sweep_sparing(&|_| false).await
    }

    /// [`Rounds::sweep`], leaving alone the operations `spare` names: a running dispatcher's own
    /// attempts, whose answers it is waiting for or holds.
    pub async fn sweep_sparing(self, spare: &(dyn Fn(&str) -> bool + Sync)) -> Result<usize> {
        let keys = self
            .0
            .store
            .work()
            .stuck_keys(self.0.now(), 100_000)
            .await?;
        let mut swept = 0;
        for key in keys.into_iter().filter(|k| !spare(k)) {
            match self
                .0
                .act(&key, SYSTEM_ACTOR, Ask::Cmd(Command::Sweep))
                .await
            {
                Ok(a) if a.kind.is_some() => swept += 1,
                Ok(_) | Err(Error::Refused(_)) | Err(Error::NotFound(_)) => {}
                Err(e) => return Err(e),
            }
        }
        let workflows: Vec<String> = self.0.config.workflows.keys().cloned().collect();
        for w in workflows {
            self.0.check_threshold(&w).await?;
        }
        Ok(swept)
    }

    /// When the next operation of these destinations is due for an automatic attempt, if one
    /// is within `ahead` (at or before now: due now).
    pub async fn next_due(
        self,
        destinations: &[String],
        ahead: std::time::Duration,
    ) -> Result<Option<DateTime<Utc>>> {
        let now = self.0.now();
        let until = crate::domain::time::after(now, ahead);
        self.0.store.work().next_due(destinations, now, until).await
    }

    /// Up to `limit` operations of these destinations whose attempt was interrupted and that
    /// nobody has looked up since, as the dispatcher sends a lookup for them (manual: States: where the
    /// destination has a lookup, the dispatcher looks it up).
    pub async fn interrupted_to_look_up(
        self,
        destinations: &[String],
        limit: usize,
    ) -> Result<Vec<super::types::StartedOp>> {
        let keys = self
            .0
            .store
            .work()
            .interrupted_unknowns(destinations, self.0.now(), limit)
            .await?;
        self.lookup_requests(&keys).await
    }

    /// What a lookup of these operations is asked with (their destination, action and stored
    /// request, whose values a lookup's placeholders may name), in the order given; keys that
    /// name no operation are left out.
    pub async fn lookup_requests(self, keys: &[String]) -> Result<Vec<super::types::StartedOp>> {
        let keys: Vec<&str> = keys
            .iter()
            .map(String::as_str)
            .filter(|k| crate::domain::validate_key(k).is_ok())
            .collect();
        let ops = self.0.store.load_ops(&keys).await?;
        Ok(keys
            .iter()
            .filter_map(|k| ops.get(*k))
            .map(|(_, op)| super::types::StartedOp {
                key: op.key.clone(),
                destination: op.destination.clone(),
                action: op.action.clone(),
                attempt: op.attempts,
                retry: false,
                payload: op.payload.clone(),
                row: None,
            })
            .collect())
    }

    /// How many operations of these destinations automation may still move.
    pub async fn unsettled(self, destinations: &[String]) -> Result<i64> {
        self.0
            .store
            .work()
            .count_unsettled(destinations, self.0.now())
            .await
    }

    /// Records that the dispatcher `name` is alive (not audited: it is not a change of state), and
    /// refreshes stale planner statistics (see `Store::refresh_stale_statistics`).
    pub async fn heartbeat(self, name: &str) -> Result<()> {
        let now = self.0.now();
        let forget = now - self.0.config.dispatcher_gone_after;
        self.0.store.work().heartbeat(name, now, forget).await?;
        // the due query's plan depends on them (a bulk load may have landed since)
        self.0.store.refresh_stale_statistics().await
    }

    /// The dispatcher `name` stops cleanly: it is no longer listed, and its stop pages nobody.
    pub async fn stopped(self, name: &str) -> Result<()> {
        self.0.store.work().forget(name).await
    }

    /// Folds the counters' rows of differences and refreshes stale planner statistics, once
    /// (PostgreSQL; nothing to do on SQLite): a heartbeat's upkeep without the heartbeat.
    pub async fn fold_counters(self) -> Result<()> {
        self.0.store.refresh_stale_statistics().await
    }

    /// Folds the counters' rows of differences and refreshes stale planner statistics
    /// (PostgreSQL; nothing to do on SQLite) now and every `every`, while the guard lives: what a
    /// dispatcher's heartbeat does, for a `settle serve` that runs without a dispatcher (its
    /// scrapes and consoles sum those rows, so unfolded ones make every scrape slower).
    pub fn keep_counters_folded(self, every: std::time::Duration) -> Background {
        let store = self.0.store.clone();
        Background(tokio::spawn(async move {
            loop {
                if let Err(e) = store.refresh_stale_statistics().await {
                    tracing::warn!(error = %e, "folding the counters");
                }
                tokio::time::sleep(every).await;
            }
        }))
    }
}

/// A task of the ledger's own in the background (a prune now and then, the counters folded),
/// stopped when this guard is dropped.
pub struct Background(pub(in crate::ledger) tokio::task::JoinHandle<()>);

impl Drop for Background {
    fn drop(&mut self) {
        self.0.abort();
    }
}
