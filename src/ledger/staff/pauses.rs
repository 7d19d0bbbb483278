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
        store::in_tx!(self.0.store, |tx| self
            .0
            .set_paused_in(tx, what, name, true, Some(&reason), actor, "paused")
            .await)
        .inspect(|_| crate::counters::inc(crate::counters::STAFF_ACTIONS, &["pause"]))
    }

    /// Resumes a paused workflow or destination. Returns false when it was not paused.
    pub async fn resume_one(self, what: Pausable, name: &str, actor: &str) -> Result<bool> {
        check_name(what.noun(), name, false)?;
        self.0.check_acting(actor)?;
        self.0.require_lead("resuming")?;
        store::in_tx!(self.0.store, |tx| self
            .0
            .set_paused_in(tx, what, name, false, None, actor, "resumed")
            .await)
        .inspect(|_| crate::counters::inc(crate::counters::STAFF_ACTIONS, &["resume"]))
    }
}
