//! The destinations' retry budgets (manual: Automatic retries) as a round or a caller's start draws on them: kept
//! in the database, so every dispatcher draws on the same ones; loaded once a transaction and
//! topped up for the time since.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};

use super::Ledger;
use crate::domain::policy::RetryBudget;
use crate::error::Result;
use crate::store::Tx;

/// A destination's budget inside one round.
pub(super) struct Budget {
    pub(super) bucket: RetryBudget,
    pub(super) since: DateTime<Utc>,
    pub(super) version: Option<i64>,
    pub(super) changed: bool,
}

impl Ledger {
    /// A caller's start of `op` (manual: The protocol) paying for its retry from its destination's budget, as
    /// a round's start does: nothing for a first attempt of the budget; refused, saying so, when
    /// the budget is spent.
    pub(super) async fn pay_for_retry(
        &self,
        conn: &mut Tx,
        budgets: &mut BTreeMap<String, Budget>,
        op: &crate::domain::Op,
        now: DateTime<Utc>,
    ) -> Result<()> {
        if op.attempts <= op.budget_start {
            return Ok(());
        }
        let b = self.budget(conn, budgets, &op.destination, now).await?;
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

    /// A destination's budget in this round: loaded once, topped up for the time since.
    pub(super) async fn budget<'b>(
        &self,
        conn: &mut Tx,
        budgets: &'b mut BTreeMap<String, Budget>,
        destination: &str,
        now: DateTime<Utc>,
    ) -> Result<&'b mut Budget> {
        if !budgets.contains_key(destination) {
            let stored = conn.budget(destination).await?;
            let (bucket, since, version) = match stored {
                Some(row) => (
                    RetryBudget { tokens: row.tokens },
                    row.refilled_at,
                    Some(row.version),
                ),
                None => (RetryBudget::full(), now, None),
            };
            let (bucket, since) = bucket.refilled(since, now);
            budgets.insert(
                destination.to_string(),
                Budget {
                    bucket,
                    since,
                    version,
                    changed: false,
                },
            );
        }
        Ok(budgets.get_mut(destination).expect("inserted above"))
    }

    /// A destination's retry budget as it stands now (full when never drawn on).
    pub async fn retry_budget(&self, destination: &str) -> Result<u32> {
        let now = self.now();
        Ok(match self.store.budget(destination).await? {
            Some(row) => {
                RetryBudget { tokens: row.tokens }
                    .refilled(row.refilled_at, now)
                    .0
                    .tokens
            }
            None => RetryBudget::CAPACITY,
        })
    }
}
