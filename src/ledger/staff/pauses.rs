//! Pausing and resuming a workflow or a destination by hand (manual: Staff actions): no attempt
//! of it starts, by any dispatcher or `settle start`; nothing pending is lost.

use super::Staff;
use crate::error::{Error, Result};
use crate::ledger::checks::{check_name, check_text};
use crate::store::{self, Pausable};

impl Staff<'_> {
    /// Pauses a workflow: the dispatcher starts no attempt for it; nothing pending is lost.
    /// Returns false when it was already paused.
    pub async fn pause(self, workflow: &str, reason: &str, actor: &str) -> Result<bool> {
        self.pause_one(Pausable::Workflow, workflow, reason, actor)
            .await
    }

    /// Resumes a paused workflow. Returns false when it was not paused.
    pub async fn resume(self, workflow: &str, actor: &str) -> Result<bool> {
        self.resume_one(Pausable::Workflow, workflow, actor).await
    }

    /// Pauses a workflow or a destination (manual: Staff actions): no attempt of it starts, by any dispatcher
    /// or `settle start`; nothing pending is lost. Returns false when it was already paused.
    pub async fn pause_one(
        self,
        what: Pausable,
        name: &str,
        reason: &str,
        actor: &str,
    ) -> Result<bool> {
        check_name(what.noun(), name, false)?;
        self.0.check_acting(actor)?;
        self.0.require_lead("pausing")?;
        check_text("the reason", Some(reason))?;
        if reason.trim().is_empty() {
            return Err(Error::Invalid("pause needs --reason".into()));
        }
        let reason = crate::domain::redact::redact_text(reason);
        let id = crate::ledger::change::new_action_id();
        store::in_tx!(self.0.store, |tx| self
            .0
            .set_paused_in(
                tx,
                what,
                name,
                true,
                Some(&reason),
                actor,
                "paused",
                Some(&id)
            )
            .await)
        .inspect(|_| crate::counters::inc(crate::counters::STAFF_ACTIONS, &["pause"]))
    }

    /// Resumes a paused workflow or destination. Returns false when it was not paused.
    pub async fn resume_one(self, what: Pausable, name: &str, actor: &str) -> Result<bool> {
        check_name(what.noun(), name, false)?;
        self.0.check_acting(actor)?;
        self.0.require_lead("resuming")?;
        let id = crate::ledger::change::new_action_id();
        store::in_tx!(self.0.store, |tx| self
            .0
            .set_paused_in(tx, what, name, false, None, actor, "resumed", Some(&id))
            .await)
        .inspect(|_| crate::counters::inc(crate::counters::STAFF_ACTIONS, &["resume"]))
    }

    /// Opens (`open`) or closes a destination's breaker by hand
    /// (manual: Recovery that follows the destination): opened, nothing is sent there, not even a probe, until a person closes
    /// it; closed, sending resumes at the starting pace. Audited, and the owners told. Returns
    /// false when it already was so.
    pub async fn set_breaker(
        self,
        destination: &str,
        open: bool,
        reason: &str,
        actor: &str,
    ) -> Result<bool> {
        check_name("destination", destination, false)?;
        self.0.check_acting(actor)?;
        self.0.require_lead(if open {
            "opening a breaker"
        } else {
            "closing a breaker"
        })?;
        check_text("the reason", Some(reason))?;
        if reason.trim().is_empty() {
            return Err(Error::Invalid(
                "a breaker opened or closed by hand needs --reason".into(),
            ));
        }
        let reason = crate::domain::redact::redact_text(reason);
        let policy = self.0.config.breaker(destination);
        let kind = if open {
            "breaker_opened"
        } else {
            "breaker_closed"
        };
        let changed = store::in_tx!(self.0.store, |tx| {
            let change =
                crate::ledger::health::change_health(self.0, tx, destination, actor, |h, now| {
                    match open {
                        true => h.open_by_hand(&reason, now),
                        false => h.close_by_hand(&policy, now),
                    }
                })
                .await?;
            if let store::Tried::Done(Some(_)) = &change {
                let detail = serde_json::json!({ "destination": destination, "reason": reason });
                let detail = detail.to_string();
                tx.insert_events(&[store::NewEvent {
                    operation_id: None,
                    workflow: None,
                    at: self.0.now(),
                    actor,
                    kind,
                    from_state: None,
                    to_state: None,
                    detail: &detail,
                    action: None,
                    restore: None,
                }])
                .await?;
            }
            Ok::<_, Error>(change)
        })?;
        crate::counters::inc(crate::counters::STAFF_ACTIONS, &[kind]);
        if changed.is_some() {
            let to = if open { "open" } else { "closed" };
            crate::counters::inc(crate::counters::BREAKER_TRANSITIONS, &[destination, to]);
        }
        Ok(changed.is_some())
    }
}
