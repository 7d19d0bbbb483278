//! The destinations' retry budgets (manual: Automatic retries) as a round or a caller's start draws on them: kept
//! in the database, so every dispatcher draws on the same ones; loaded once a transaction and
//! topped up for the time since.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};

use crate::domain::breaker::Health;
use crate::domain::policy::RetryBudget;
use crate::error::Result;
use crate::store::Tx;

/// A destination's budget, and its health (its breaker and pace, kept on the same row), inside
/// one round.
pub(super) struct Budget {
    pub(super) bucket: RetryBudget,
    pub(super) since: DateTime<Utc>,
    pub(super) version: Option<i64>,
    pub(super) changed: bool,
    /// Its health as stored: none, never troubled.
    pub(super) health: Option<Health>,
}

impl Budget {
    /// Its health to change: a destination never troubled starts closed.
    pub(super) fn health_mut(&mut self, now: DateTime<Utc>) -> &mut Health {
        self.changed = true;
        self.health.get_or_insert_with(|| Health::new(now))
    }
}

/// The budgets one transaction draws on, by destination: each loaded once, topped up for the
/// time since, saved at the end with a compare-and-set on its version.
#[derive(Default)]
pub(super) struct Budgets(BTreeMap<String, Budget>, std::collections::BTreeSet<String>);

impl Budgets {
    /// A caller's start of `op` (manual: The protocol) paying for its retry from its destination's
    /// budget, as a round's start does: nothing for a first attempt of the budget; refused, saying
    /// so, when the budget is spent.
    pub(super) async fn pay_for_retry(
        &mut self,
        conn: &mut Tx,
        op: &crate::domain::Op,
        now: DateTime<Utc>,
    ) -> Result<()> {
        if op.attempts <= op.budget_start {
            return Ok(());
        }
        let b = self.of(conn, &op.destination, now).await?;
        let Some(left) = b.bucket.take(op.ambiguous) else {
            return Err(crate::error::Error::Refused(format!(
                "{}: the retry budget of {} is spent ({} tokens left): it waits in {}",
                op.key, op.destination, b.bucket.tokens, op.state
            )));
        };
        b.bucket = left;
        b.changed = true;
        Ok(())
    }

    /// A destination's budget in this transaction: loaded once, topped up for the time since.
    pub(super) async fn of(
        &mut self,
        conn: &mut Tx,
        destination: &str,
        now: DateTime<Utc>,
    ) -> Result<&mut Budget> {
        if !self.0.contains_key(destination) {
            let stored = conn.budget(destination).await?;
            // a health this build cannot read is started again: closed, as never troubled
            let health = stored
                .as_ref()
                .and_then(|r| r.health.as_deref())
                .and_then(|h| serde_json::from_str(h).ok());
            let (bucket, since, version) = match stored {
                Some(row) => (
                    RetryBudget { tokens: row.tokens },
                    row.refilled_at,
                    Some(row.version),
                ),
                None => (RetryBudget::full(), now, None),
            };
            let (bucket, since) = bucket.refilled(since, now);
            self.0.insert(
                destination.to_string(),
                Budget {
                    bucket,
                    since,
                    version,
                    changed: false,
                    health,
                },
            );
        }
        Ok(self.0.get_mut(destination).expect("inserted above"))
    }

    /// Whether `destination`'s breaker and pace let a caller's start go now
    /// (manual: Recovery that follows the destination): `None` when they do (it takes its share of the pace), else
    /// why not and until when.
    pub(super) async fn let_through(
        &mut self,
        conn: &mut Tx,
        destination: &str,
        policy: &crate::domain::breaker::BreakerPolicy,
        now: DateTime<Utc>,
    ) -> Result<Option<(String, DateTime<Utc>)>> {
        use crate::domain::breaker::Gate;
        if policy.pace_max.is_none() && !self.0.contains_key(destination) {
            // a look first, holding nothing: a destination on an open road is not held for it
            if self.1.contains(destination) {
                return Ok(None);
            }
            let row = conn.budget_unheld(destination).await?;
            let health: Option<Health> =
                (row.and_then(|r| r.health)).and_then(|h| serde_json::from_str(&h).ok());
            if health.is_none_or(|h| h.is_open_road(policy)) {
                self.1.insert(destination.to_string());
                return Ok(None);
            }
        }
        let b = self.of(conn, destination, now).await?;
        if b.health.as_ref().is_none_or(|h| h.is_open_road(policy)) && policy.pace_max.is_none() {
            return Ok(None);
        }
        let h = b.health_mut(now);
        let why = h.why.clone().unwrap_or_default();
        let state = h.state;
        Ok(match h.gate(policy, now) {
            Gate::Send(_) => {
                h.took(1);
                None
            }
            // the dispatcher's probe is the one to find it well: a caller waits for it
            Gate::Probe => Some((
                format!("it is down ({why}); a probe finds when it is back"),
                now,
            )),
            Gate::Held(until) if state == crate::domain::breaker::BreakerState::Closed => {
                Some(("its pace holds this start".into(), until))
            }
            Gate::Held(until) => Some((format!("it is down ({why})"), until)),
        })
    }

    /// A budget loaded before in this transaction.
    pub(super) fn loaded(&mut self, destination: &str) -> Option<&mut Budget> {
        self.0.get_mut(destination)
    }

    /// The destinations whose budget cannot pay for a retry now.
    pub(super) fn starved(&self) -> Vec<String> {
        self.0
            .iter()
            .filter(|(_, b)| b.bucket.tokens < RetryBudget::RETRY_COST)
            .map(|(d, _)| d.clone())
            .collect()
    }

    /// Saves the budgets drawn on. False when another writer changed one first.
    pub(super) async fn save(&self, conn: &mut Tx) -> Result<bool> {
        for (destination, b) in self.0.iter().filter(|(_, b)| b.changed) {
            let health = b
                .health
                .as_ref()
                .and_then(|h| serde_json::to_string(h).ok());
            if !conn
                .save_budget(
                    destination,
                    b.bucket.tokens,
                    b.since,
                    health.as_deref(),
                    b.version,
                )
                .await?
            {
                return Ok(false);
            }
        }
        Ok(true)
    }
}
