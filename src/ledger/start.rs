//! `start` for a caller that sends the attempt itself (manual: The protocol), under the rules a dispatcher's
//! round applies; and what scrubs a destination's answer to a started operation.

use super::StartedOp;
use super::budgets::Budgets;
use super::change::{Ask, Decided};
use super::engine::Batch;
use super::{Applied, Ledger};
use crate::domain::{Command, State, validate_key};
use crate::error::{Error, Result};
use crate::store::Tried;
use crate::store::{self, Tx};

impl Ledger {
    /// Starts the next attempt of one operation for a caller that sends it itself (`settle
    /// start`, the manual's protocol), under the rules a dispatcher's round applies: only a due `pending` or
    /// `retry_wait` operation, never one claimed by someone else or of a paused workflow or
    /// destination, and a
    /// retry only when its destination's budget pays for it (it takes the cost, as a round does).
    /// Two callers starting one operation at once: one starts it, the other is refused (the
    /// operation is in flight). Returns the change; the attempt's number is the operation's
    /// attempt count after it.
    pub async fn start_attempt(&self, key: &str, actor: &str) -> Result<Applied> {
        validate_key(key).map_err(Error::Invalid)?;
        super::checks::check_name("actor", actor, false)?;
        store::in_tx!(self.store, |tx| self.start_in(tx, key, actor).await).map(|(a, _)| a)
    }

    /// The manual's protocol's `start` for a caller that sends itself: the number of the attempt it may send
    /// now, or `Error::Refused` saying why not (as [`Ledger::start_attempt`] decides).
    pub async fn start(&self, key: &str, actor: &str) -> Result<u32> {
        validate_key(key).map_err(Error::Invalid)?;
        super::checks::check_name("actor", actor, false)?;
        let (a, n) = store::in_tx!(self.store, |tx| self.start_in(tx, key, actor).await)?;
        if a.kind.is_some() && a.to == State::InFlight {
            Ok(n)
        } else {
            Err(Error::Refused(format!("{key}: {}: not started", a.to)))
        }
    }

    pub(super) async fn start_in(
        &self,
        tx: &mut Tx,
        key: &str,
        actor: &str,
    ) -> Result<Tried<(Applied, u32)>> {
        let now = self.now();
        let mut batch = Batch::hold(tx, &[key]).await?;
        let Some((_, op)) = batch.row(key) else {
            return Err(not_there_to_start(tx, key, now).await?);
        };
        let op = op.clone();
        let ask = Ask::Cmd(Command::StartAttempt);
        let change = match batch.judge(self, tx, key, actor, &ask, None).await? {
            Decided::Unchanged(a) => return Ok(Tried::Done((a, op.attempts))),
            Decided::Change(c) => c,
        };
        // its pause and its health in one read: a destination never troubled costs nothing more
        let (paused, health) = tx.destination_now(&op.destination).await?;
        let d = &op.destination;
        if let Some(why) = paused {
            return Err(Error::Refused(format!(
                "{key}: destination {d} is paused ({why}): `settle resume --destination {d}` lifts it"
            )));
        }
        self.threshold_room(tx, key, &op.workflow, now).await?;
        let mut budgets = Budgets::default();
        let policy = self.config.breaker(d);
        let open_road = health
            .and_then(|h| serde_json::from_str::<crate::domain::breaker::Health>(&h).ok())
            .is_none_or(|h| h.is_open_road(&policy));
        let held = match open_road && policy.pace_max.is_none() {
            true => None,
            false => budgets.let_through(tx, d, &policy, now).await?,
        };
        if let Some((why, until)) = held {
            return Err(held_by_breaker(key, d, &why, until, now));
        }
        budgets.pay_for_retry(tx, &op, now).await?;
        let done = (change.applied.clone(), change.op.attempts);
        batch.take(change);
        if batch.write(self, tx, actor).await?.is_none() {
            return Ok(Tried::Raced);
        }
        if !budgets.save(tx).await? {
            return Ok(Tried::Raced);
        }
        Ok(Tried::Done(done))
    }

    /// The gateway's repeat of a request confirmed not done (manual: The gateway): `failed` made `pending`
    /// again with a fresh attempt budget, so that the repeat's `start` may send it. Refused for
    /// any other state, and while a person holds it.
    pub async fn resend(&self, key: &str, actor: &str) -> Result<Applied> {
        validate_key(key).map_err(Error::Invalid)?;
        super::checks::check_name("actor", actor, false)?;
        self.act(key, actor, super::change::Ask::Cmd(Command::Resend))
            .await
    }

    /// What scrubs a destination's answer to one started operation before it is stored, logged or
    /// printed: the built-in patterns and the sensitive values of the payload that was sent, which
    /// a destination may echo back (manual: Redaction, Destinations and the dispatcher).
    pub fn answer_scrubber(&self, op: &StartedOp) -> crate::domain::redact::OperationRedaction {
        self.redactor
            .scrubber(&op.destination, &op.action, &op.payload)
    }
}

/// Why a start finds no operation under `key`: a pruned one's key refuses it (its operation was
/// terminal), any other is not found. The single call and the group writer answer alike.
pub(super) async fn not_there_to_start(
    tx: &mut Tx,
    key: &str,
    now: chrono::DateTime<chrono::Utc>,
) -> Result<Error> {
    Ok(match tx.pruned_key(key, store::ms(now)).await? {
        Some(p) => Error::Refused(format!("{key} is {} (pruned): nothing to send", p.state)),
        None => Error::NotFound(format!("no operation with key {key}")),
    })
}

/// A start its destination's breaker or pace holds
/// (manual: Recovery that follows the destination): refused, saying why and when to try again.
pub(super) fn held_by_breaker(
    key: &str,
    destination: &str,
    why: &str,
    until: chrono::DateTime<chrono::Utc>,
    now: chrono::DateTime<chrono::Utc>,
) -> Error {
    let wait = (until - now).num_milliseconds().max(0) as f64 / 1000.0;
    Error::Refused(format!(
        "{key}: destination {destination} is held by its breaker: {why}: not sent; try again in {wait:.1}s"
    ))
}
