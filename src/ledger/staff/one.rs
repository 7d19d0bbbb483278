//! The staff's handle (`Ledger::staff`), one action on one operation, and what every action is
//! checked for first.

use crate::domain::{Command, StaffAction, validate_key};
use crate::error::{Error, Result};
use crate::ledger::change::Ask;
use crate::ledger::checks::{check_text, staff_texts};
use crate::ledger::{Applied, Ledger};

/// The ledger's handle for a person's actions (`Ledger::staff`).
#[derive(Clone, Copy)]
pub struct Staff<'a>(pub(in crate::ledger) &'a Ledger);

impl Staff<'_> {
    /// A staff action by `actor`: claim, release, reconcile, retry, close or note.
    pub async fn act(self, key: &str, actor: &str, action: StaffAction) -> Result<Applied> {
        validate_key(key).map_err(Error::Invalid)?;
        let action = self.along_the_chain(key, action).await?;
        self.check_staff_action(key, actor, &action).await?;
        let cmd = Command::Staff(action);
        self.0.act(key, actor, Ask::Cmd(cmd)).await
    }

    /// A correction under the chain's next key (as the console names it) made under the first
    /// free one, where an automation took that key for a request of its own.
    async fn along_the_chain(self, key: &str, action: StaffAction) -> Result<StaffAction> {
        match action {
            StaffAction::Correct {
                corrected_as,
                edits,
                note,
            } if crate::domain::transition::correction_key(key).ok().as_ref()
                == Some(&corrected_as) =>
            {
                Ok(StaffAction::Correct {
                    corrected_as: self.free_correction_key(key).await?,
                    edits,
                    note,
                })
            }
            other => Ok(other),
        }
    }

    /// Refused when an operator asks a bulk action of more than `bulk_limit` items (manual: Running settle for a team).
    pub(crate) fn check_bulk_size(self, n: usize) -> Result<()> {
        let limit = self.0.config.bulk_limit;
        if self.0.role() == crate::domain::Role::Operator && n > limit {
            return Err(Error::Refused(format!(
                "an operator acts on at most {limit} items at once ({n} chosen): narrow the choice, or ask a lead"
            )));
        }
        Ok(())
    }

    /// What a staff action's own texts and keys must be, before any operation is asked.
    pub(crate) async fn check_staff_action(
        self,
        key: &str,
        actor: &str,
        action: &StaffAction,
    ) -> Result<()> {
        self.0.check_acting(actor)?;
        for (what, text) in staff_texts(action) {
            check_text(what, text)?;
        }
        if let StaffAction::Close {
            superseded_by: Some(k),
            ..
        } = &action
        {
            validate_key(k).map_err(|e| Error::Invalid(format!("--superseded-by: {e}")))?;
            // Staff actions: the superseding operation must exist (a made-up key points nowhere)
            if self.0.store.load_op(k).await?.is_none() {
                return Err(Error::Refused(format!(
                    "{key}: no operation {k} to supersede it: record it first"
                )));
            }
        }
        if let StaffAction::Correct { corrected_as, .. } = &action {
            validate_key(corrected_as)
                .map_err(|e| Error::Invalid(format!("the correction's key: {e}")))?;
            if corrected_as == key {
                return Err(Error::Refused(format!(
                    "{key}: {corrected_as} exists already: name the correction another key (--new-key)"
                )));
            }
        }
        Ok(())
    }
}
