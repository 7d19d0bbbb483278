//! Workflows and destinations: pausing and resuming them (manual: Staff actions), and the stopping threshold
//! that pauses a workflow by itself when its unresolved exceptions reach the configured limit.

use serde_json::json;

use super::{Ledger, SYSTEM_ACTOR};
use crate::error::Result;
use crate::store::Pausable;
use crate::store::{self, NewEvent, Tried, Tx};

impl Ledger {
    /// Sets the pause flag and writes its audit event (a destination's names it in the detail;
    /// a workflow's in the event's workflow). `action`: a person's action's id, or the id of the
    /// one an undo takes back; a person's pause or resume keeps what taking it back restores
    /// (manual: Taking an action back).
    #[allow(clippy::too_many_arguments)]
    pub(super) async fn set_paused_in(
        &self,
        tx: &mut Tx,
        what: Pausable,
        name: &str,
        paused: bool,
        reason: Option<&str>,
        actor: &str,
        kind: &'static str,
        action: Option<&str>,
    ) -> Result<Tried<bool>> {
        let now = self.now();
        let current = tx.pause_row(what, name).await?;
        if current.as_ref().is_some_and(|w| w.paused) == paused {
            return Ok(Tried::Done(false));
        }
        let restore = (matches!(kind, "paused" | "resumed") && action.is_some()).then(|| {
            json!({
                "pausable": what.noun(), "name": name,
                "paused": current.as_ref().is_some_and(|w| w.paused),
                "reason": current.as_ref().and_then(|w| w.paused_reason.clone()),
                "v": current.as_ref().map_or(1, |w| w.version + 1),
            })
            .to_string()
        });
        if !tx
            .set_paused(
                what,
                name,
                paused,
                reason,
                actor,
                now,
                current.map(|w| w.version),
            )
            .await?
        {
            return Ok(Tried::Raced);
        }
        let (workflow, detail) = match what {
            Pausable::Workflow => (Some(name), json!({ "reason": reason })),
            Pausable::Destination => (None, json!({ "destination": name, "reason": reason })),
        };
        let detail = detail.to_string();
        let event = NewEvent {
            operation_id: None,
            workflow,
            at: now,
            actor,
            kind,
            from_state: None,
            to_state: None,
            detail: &detail,
            action,
            restore: restore.as_deref(),
        };
        tx.insert_events(&[event]).await?;
        let told = match what {
            Pausable::Workflow => self.config.told_of(name).is_some(),
            Pausable::Destination => self.config.teams.values().any(|t| !t.notify.is_empty()),
        };
        if told {
            let notice = crate::store::Notice {
                at: now,
                kind: if paused { "paused" } else { "resumed" },
                operation_id: None,
                workflow: (what == Pausable::Workflow).then(|| name.to_string()),
                destination: (what == Pausable::Destination).then(|| name.to_string()),
                reason: reason.map(str::to_string),
                actor: Some(actor.to_string()),
            };
            tx.add_notices(&[notice]).await?;
        }
        Ok(Tried::Done(true))
    }

    /// The stopping threshold (manual: The stopping threshold): pause a workflow whose exceptions passed it. A
    /// resume holds: after one, only an exception recorded since can pause the workflow again
    /// (a sweep, a restart or a console start never re-pauses by itself).
    pub async fn check_threshold(&self, workflow: &str) -> Result<bool> {
        let Some(limit) = self
            .config
            .workflows
            .get(workflow)
            .and_then(|w| w.pause_when.clone())
        else {
            return Ok(false);
        };
        store::in_tx!(self.store, |tx| self
            .threshold_in(tx, workflow, &limit)
            .await)
    }

    async fn threshold_in(
        &self,
        tx: &mut Tx,
        workflow: &str,
        limit: &crate::config::PauseWhen,
    ) -> Result<Tried<bool>> {
        let now = self.now();
        let row = tx.workflow(workflow).await?;
        if row.as_ref().is_some_and(|w| w.paused) {
            return Ok(Tried::Done(false));
        }
        let mut summary = tx.exception_summary(Some(workflow), now).await?;
        // its stalled runs are exceptions too (manual: Runs)
        if let Some(s) = self
            .read()
            .stalls()
            .await?
            .into_iter()
            .find(|s| s.workflow == workflow)
        {
            summary.count += s.count;
            summary.oldest = Some(summary.oldest.map_or(s.oldest, |o| o.min(s.oldest)));
            summary.newest = Some(summary.newest.map_or(s.newest, |n| n.max(s.newest)));
        }
        // an unpaused row with a time of change was resumed then
        let resumed = row.as_ref().and_then(|w| w.paused_at);
        if resumed.is_some_and(|r| summary.newest.is_none_or(|n| n <= r)) {
            return Ok(Tried::Done(false));
        }
        let count = summary.count;
        let by_count = limit
            .unresolved
            .filter(|n| count as u64 >= *n)
            .map(|n| format!("{count} unresolved exceptions (limit {n})"));
        let by_age = match (limit.oldest, summary.oldest) {
            (Some(max), Some(t)) if (now - t).to_std().unwrap_or_default() > max => Some(format!(
                "oldest exception {} old (limit {})",
                crate::domain::format_age(now - t),
                crate::domain::time::format_duration(max)
            )),
            _ => None,
        };
        match by_count.or(by_age) {
            Some(why) => {
                let reason = format!("stopping threshold: {why}");
                self.set_paused_in(
                    tx,
                    Pausable::Workflow,
                    workflow,
                    true,
                    Some(&reason),
                    SYSTEM_ACTOR,
                    "auto_paused",
                    None,
                )
                .await
            }
            None => Ok(Tried::Done(false)),
        }
    }
}
