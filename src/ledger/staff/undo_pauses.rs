//! A person's pause or resume taken back (manual: Taking an action back): the workflow's or the
//! destination's flag (and its reason) as it was, while nobody has paused or resumed it since.

use serde::Deserialize;

use super::Staff;
use crate::error::Result;
use crate::store::{self, Pausable, Tried, WorkflowRow};

/// What a person's pause or resume keeps on its event: the flag before it, and the version it
/// left.
#[derive(Clone, Debug, Deserialize)]
pub(super) struct PauseRestore {
    pausable: String,
    name: String,
    paused: bool,
    reason: Option<String>,
    v: i64,
}

impl PauseRestore {
    fn what(&self) -> Pausable {
        match self.pausable.as_str() {
            "destination" => Pausable::Destination,
            _ => Pausable::Workflow,
        }
    }

    /// What the undo's answer calls it: `workflow onboarding`, `destination crm`.
    pub(super) fn label(&self) -> String {
        format!("{} {}", self.pausable, self.name)
    }

    fn check(&self, row: Option<WorkflowRow>) -> std::result::Result<(), String> {
        match row {
            Some(w) if w.version == self.v => Ok(()),
            _ => Err(format!("{} was paused or resumed since", self.label())),
        }
    }
}

impl Staff<'_> {
    /// The id of `actor`'s newest action (a pause's or a resume's, just taken, to name it).
    pub async fn newest_action(self, actor: &str) -> Result<Option<String>> {
        store::last_action(self.0.store.conn().await?.db(), actor).await
    }

    /// Whether the pause or resume can be taken back now (a preview), else why not.
    pub(super) async fn pause_undoable(
        self,
        r: &PauseRestore,
    ) -> Result<std::result::Result<(), String>> {
        let mut tx = self.0.store.begin().await?;
        let row = tx.pause_row(r.what(), &r.name).await;
        tx.rollback().await;
        Ok(r.check(row?))
    }

    /// Takes a pause or a resume back: the flag and reason as they were, by an `undone` event
    /// naming the action (owners are told as of any pause or resume); else why not.
    pub(super) async fn undo_pause(
        self,
        r: &PauseRestore,
        action: &str,
        actor: &str,
    ) -> Result<std::result::Result<(), String>> {
        self.0.require_lead("pausing and resuming")?;
        store::in_tx!(self.0.store, |tx| self
            .undo_pause_in(tx, r, action, actor)
            .await)
    }

    async fn undo_pause_in(
        self,
        tx: &mut store::Tx,
        r: &PauseRestore,
        action: &str,
        actor: &str,
    ) -> Result<Tried<std::result::Result<(), String>>> {
        let row = tx.pause_row(r.what(), &r.name).await?;
        if let Err(why) = r.check(row) {
            return Ok(Tried::Done(Err(why)));
        }
        let (what, reason) = (r.what(), r.reason.as_deref());
        let set = self.0.set_paused_in(
            tx,
            what,
            &r.name,
            r.paused,
            reason,
            actor,
            "undone",
            Some(action),
        );
        Ok(match set.await? {
            Tried::Raced => Tried::Raced,
            Tried::Done(_) => Tried::Done(Ok(())),
        })
    }
}
