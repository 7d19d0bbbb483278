//! What the header, `stats`, the metrics and the activity feed read: totals from the counters,
//! what is paused, the dispatchers' heartbeats, the newest events, and word of a change.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};

use super::Reader;
use super::view::event_view;
use crate::domain::State;
use crate::error::Result;
use crate::ledger::views::{DispatcherSeen, EventView, PausedWorkflow, Stats};
use crate::store::Pausable;

/// `due` counts up to this many: enough to tell that work waits (the states' counters say how
/// much), cheap at any size.
const DUE_CAP: i64 = 1_000;

/// Notifications that something changed in the ledger.
pub struct ChangeListener(crate::store::Listener);

impl ChangeListener {
    /// Waits for the next change; `false` when the connection is gone.
    pub async fn next(&mut self) -> bool {
        self.0.next().await
    }
}

impl Reader<'_> {
    /// A destination's retry budget as it stands now (full when never drawn on).
    pub async fn retry_budget(self, destination: &str) -> Result<u32> {
        let now = self.0.now();
        Ok(match self.0.store.work().budget(destination).await? {
            Some(row) => {
                crate::domain::policy::RetryBudget { tokens: row.tokens }
                    .refilled(row.refilled_at, now)
                    .0
                    .tokens
            }
            None => crate::domain::policy::RetryBudget::CAPACITY,
        })
    }

    /// Totals for `stats` and the console's header.
    pub async fn stats(self) -> Result<Stats> {
        let now = self.0.now();
        let mut by_state: BTreeMap<State, i64> = State::ALL.iter().map(|s| (*s, 0)).collect();
        // the counters the store keeps with every change: no count of the operations
        for (s, n) in self.0.store.count_by_state().await? {
            by_state.insert(s, n);
        }
        // an exception is in an exception state, or an attempt in flight past its timeout
        let (stuck, oldest) = self.0.store.stuck_and_oldest(now).await?;
        // a stalled run is an exception too (manual: Runs), found by the index of waits
        let stalled = self.stalled_counts().await?;
        let stalled_runs: i64 = stalled.iter().map(|(_, n, _)| n).sum();
        let oldest = oldest
            .into_iter()
            .chain(stalled.iter().map(|(_, _, t)| *t))
            .min();
        let exceptions = stuck
            + stalled_runs
            + by_state
                .iter()
                .filter(|(s, _)| s.is_exception())
                .map(|(_, n)| n)
                .sum::<i64>();
        let mut pauses = self.paused(Pausable::Workflow).await?;
        pauses.extend(self.paused(Pausable::Destination).await?);
        let names = |what: &str| -> Vec<String> {
            pauses
                .iter()
                .filter(|p| p.what == what)
                .map(|p| p.name.clone())
                .collect()
        };
        let unowned_exceptions = match self.0.config.teams.is_empty() {
            true => None,
            false => {
                let per_workflow = self.0.store.exceptions_per_workflow().await?;
                let config = &self.0.config;
                Some(
                    per_workflow
                        .iter()
                        .filter(|(w, _)| config.owner_of(w).is_none())
                        .map(|(_, n)| n)
                        .sum(),
                )
            }
        };
        let due = self.operations_due(DUE_CAP).await?;
        let dispatchers = self
            .dispatchers()
            .await?
            .into_iter()
            .map(|(name, seen)| DispatcherSeen {
                name,
                seen_seconds: (now - seen).num_seconds().max(0),
            })
            .collect();
        let notify_failing = match self.0.config.channels.is_empty() {
            true => Vec::new(),
            false => self.0.notices().failing().await?,
        };
        Ok(Stats {
            notify_failing,
            breakers: self.breakers().await?,
            by_state,
            exceptions,
            stalled_runs,
            oldest_exception_seconds: oldest.map(|t| (now - t).num_seconds().max(0)),
            paused_workflows: names("workflow"),
            paused_destinations: names("destination"),
            pauses,
            due,
            dispatchers,
            unowned_exceptions,
        })
    }

    /// Every destination's breaker that was ever troubled, by name.
    pub async fn breakers(self) -> Result<Vec<crate::ledger::BreakerView>> {
        let now = self.0.now();
        let rows = self.0.store.work().healths().await?;
        Ok(rows
            .into_iter()
            .filter_map(|(d, json)| {
                let health = serde_json::from_str(&json).ok()?;
                Some(crate::ledger::BreakerView::of(d, health, now))
            })
            .collect())
    }

    /// Workflows paused now, with who paused them and why.
    pub async fn paused_workflows(self) -> Result<Vec<PausedWorkflow>> {
        self.paused(Pausable::Workflow).await
    }

    /// Workflows or destinations paused now, with who paused them and why.
    pub async fn paused(self, what: Pausable) -> Result<Vec<PausedWorkflow>> {
        Ok(self
            .0
            .store
            .paused(what)
            .await?
            .into_iter()
            .map(|w| PausedWorkflow {
                what: what.noun(),
                name: w.name,
                reason: w.paused_reason,
                by: w.paused_by,
                at: w.paused_at,
            })
            .collect())
    }

    /// The exceptions now by workflow and state, and every workflow with its oldest exception's
    /// start where it has one (metrics).
    #[allow(clippy::type_complexity)]
    pub async fn exceptions_by_workflow(
        self,
    ) -> Result<(
        Vec<(String, State, i64)>,
        Vec<(String, Option<DateTime<Utc>>)>,
    )> {
        self.0.store.exceptions_by_workflow(self.0.now()).await
    }

    /// The dispatchers not yet forgotten (heard from within `dispatcher_gone_after`), and when
    /// each last said it was alive (metrics).
    pub async fn dispatchers(self) -> Result<Vec<(String, DateTime<Utc>)>> {
        let since = self.0.now() - self.0.config.dispatcher_gone_after;
        self.0.store.work().dispatchers(since).await
    }

    /// Operations of the config's HTTP destinations due now, waiting for a dispatcher (counted
    /// up to `cap`).
    async fn operations_due(self, cap: i64) -> Result<i64> {
        let names: Vec<String> = self
            .0
            .config
            .http_destinations()
            .into_iter()
            .map(|(n, _)| n.to_string())
            .collect();
        self.0
            .store
            .work()
            .count_due(&names, self.0.now(), cap)
            .await
    }

    /// How long ago a dispatcher last said it was alive (`None`: never).
    pub async fn dispatcher_seen(self) -> Result<Option<i64>> {
        let now = self.0.now();
        Ok(self
            .0
            .store
            .work()
            .last_heartbeat()
            .await?
            .map(|t| (now - t).num_seconds().max(0)))
    }

    /// How far behind the primary the replica that lists and counts are read from is, in
    /// seconds (`None`: no replica). A replica that cannot be asked is not waited for.
    pub async fn replica_lag(self) -> Option<i64> {
        match crate::store::replica::lag(&self.0.store).await {
            Ok(lag) => lag.map(|d| d.as_secs() as i64),
            Err(_) => None,
        }
    }

    /// The console's "Mine" count: the live claims `who` holds and, for a member of teams, the
    /// exceptions their teams own that nobody holds (what view 2 lists).
    pub async fn count_mine(self, who: &str) -> Result<i64> {
        if self.0.config.teams_workflows(who).is_none() {
            return self.0.store.count_live_claims(who, self.0.now()).await;
        }
        // a member of teams: view 2 holds their teams' unheld exceptions too
        let mine = super::list::ListFilter {
            scope: super::list::Scope::Mine,
            ..Default::default()
        };
        Ok(self.count_matching(&mine, who).await?.unwrap_or(0))
    }

    /// The newest audit events across the ledger, newest first, redacted (the activity feed).
    pub async fn activity(
        self,
        limit: usize,
        filter: &crate::domain::activity_filter::ActivityFilter,
    ) -> Result<Vec<EventView>> {
        // words are matched against what is shown (redacted, in words), so they are looked for
        // among more of the newest events than are kept
        let fetch = if filter.words.is_empty() {
            limit
        } else {
            limit * 10
        };
        let rows = self.0.store.recent_events(fetch as i64, filter).await?;
        let views = rows.into_iter().map(|(e, op)| match op {
            Some(op) => {
                let mut payloads = vec![op.payload.as_str()];
                payloads.extend(op.conflicting_payload.as_deref());
                let red = self
                    .0
                    .redactor
                    .scrubber_of(&op.destination, &op.action, &payloads);
                let mut v = event_view(e, &|v| red.json(v), Some(op.key.clone()));
                v.op_key = Some(op.key);
                v
            }
            None => event_view(
                e,
                &|v| {
                    crate::domain::Redactor::default()
                        .scrubber("", "", "null")
                        .json(v)
                },
                None,
            ),
        });
        Ok(views
            .filter(|v| {
                let text = v.searchable();
                filter.words.iter().all(|w| text.contains(w.as_str()))
            })
            .take(limit)
            .collect())
    }

    /// A listener for changes by others (PostgreSQL `LISTEN settle_events`); `None` on SQLite,
    /// which is polled instead, or when the listener cannot connect now.
    pub async fn listen(self) -> Option<ChangeListener> {
        self.0.store.listen().await.map(ChangeListener)
    }

    /// The id of the newest audit event: cheap to poll for "has anything changed?".
    pub async fn latest_event_id(self) -> Result<i64> {
        self.0.store.latest_event_id().await
    }
}
