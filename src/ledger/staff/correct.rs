//! Correcting requests (manual: Correcting a request): what a correction of each chosen operation
//! would change, field by field and redacted, before anything is written. The correction itself is
//! a staff action like the others (`Staff::act`, `Staff::bulk_apply_each`): the write engine makes
//! the new operation and closes the original in one transaction.

use serde::Serialize;
use serde_json::Value;

use super::{BulkPreview, Staff};
use crate::domain::StaffAction;
use crate::domain::edit::{Edit, apply_edits, value_at};
use crate::domain::transition::correction_key;
use crate::error::{Error, Result};

/// One field a correction changes, its values as readers see them (a redacted field stays
/// `[redacted]`, before and after).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct FieldChange {
    pub path: String,
    pub before: Option<Value>,
    pub after: Option<Value>,
}

/// What correcting one operation would do.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct CorrectionLine {
    pub key: String,
    pub corrected_as: String,
    pub changes: Vec<FieldChange>,
}

/// The preview of a correction of many: the bulk preview (what is left alone, and why) and, for
/// each item it will correct, what changes.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct CorrectionPreview {
    #[serde(flatten)]
    pub bulk: BulkPreview,
    pub items: Vec<CorrectionLine>,
}

impl Staff<'_> {
    /// The correction of `key` as a staff action: under `new_key`, or the first free key along
    /// its chain (`KEY:c2`, `KEY:c3`, ...).
    pub async fn correction(
        self,
        key: &str,
        new_key: Option<&str>,
        edits: Vec<Edit>,
        note: &str,
    ) -> Result<StaffAction> {
        let corrected_as = match new_key {
            Some(k) => k.to_string(),
            None => self.free_correction_key(key).await?,
        };
        Ok(StaffAction::Correct {
            corrected_as,
            edits,
            note: note.to_string(),
        })
    }

    /// The first key along `key`'s chain that no operation holds: a key an automation recorded
    /// itself (`KEY:c2`) is skipped, never taken over nor in the way. Refused, naming
    /// `--new-key`, where the chain would pass 128 characters or its next 16 keys are all taken.
    pub async fn free_correction_key(self, key: &str) -> Result<String> {
        const TRIED: usize = 16;
        let mut chain = vec![correction_key(key)?];
        while chain.len() < TRIED {
            match correction_key(&chain[chain.len() - 1]) {
                Ok(next) => chain.push(next),
                Err(_) => break,
            }
        }
        let refs: Vec<&str> = chain.iter().map(String::as_str).collect();
        let taken = self.0.store.load_ops(&refs).await?;
        chain
            .iter()
            .find(|k| !taken.contains_key(k.as_str()))
            .cloned()
            .ok_or_else(|| {
                Error::Refused(format!(
                    "{key}: the keys of its correction's chain ({} to {}) are taken: name the correction's key with --new-key",
                    chain[0],
                    chain[chain.len() - 1]
                ))
            })
    }

    /// What correcting these operations would do, nothing written: the rules asked of each (as
    /// `bulk_preview_each`), and each eligible payload edited, redacted before and after. An item
    /// whose payload the edits do not fit is left alone, with the reason.
    pub async fn correction_preview(
        self,
        items: &[(String, StaffAction)],
        actor: &str,
    ) -> Result<CorrectionPreview> {
        let mut bulk = self.bulk_preview_each(items, actor).await?;
        let keys: Vec<&str> = bulk.eligible.iter().map(String::as_str).collect();
        let ops = self.0.store.load_ops(&keys).await?;
        // the corrections' keys taken already, asked in one statement
        let new_keys: Vec<&str> = items
            .iter()
            .filter_map(|(_, a)| match a {
                StaffAction::Correct { corrected_as, .. } => Some(corrected_as.as_str()),
                _ => None,
            })
            .collect();
        let taken = self.0.store.load_ops(&new_keys).await?;
        let mut lines = Vec::new();
        let mut eligible = Vec::new();
        for (key, action) in items {
            let (
                Some((_, op)),
                StaffAction::Correct {
                    corrected_as,
                    edits,
                    ..
                },
            ) = (ops.get(key.as_str()), action)
            else {
                continue;
            };
            if !bulk.eligible.contains(key) {
                continue;
            }
            if taken.contains_key(corrected_as.as_str()) {
                let why = "its correction's key exists already".to_string();
                bulk.refused.entry(why).or_default().push(key.clone());
                continue;
            }
            let before: Value = serde_json::from_str(&op.payload)
                .map_err(|_| Error::Unavailable(format!("{key}: its payload is not JSON")))?;
            let after = match apply_edits(&before, edits) {
                Ok(after) => after,
                Err(why) => {
                    let why = self.0.scrubbers.of(&self.0.redactor, op).text(&why);
                    bulk.refused.entry(why).or_default().push(key.clone());
                    continue;
                }
            };
            let shown = |v: &Value| {
                self.0
                    .redactor
                    .for_operation(&op.destination, &op.action, &v.to_string())
                    .payload
            };
            let (before, after) = (shown(&before), shown(&after));
            let mut changes: Vec<FieldChange> = edits
                .iter()
                .map(|e| FieldChange {
                    path: e.path().to_string(),
                    before: value_at(&before, e.path()).cloned(),
                    after: value_at(&after, e.path()).cloned(),
                })
                .collect();
            changes.dedup_by(|a, b| a.path == b.path);
            eligible.push(key.clone());
            lines.push(CorrectionLine {
                key: key.clone(),
                corrected_as: corrected_as.clone(),
                changes,
            });
        }
        bulk.eligible = eligible;
        Ok(CorrectionPreview { bulk, items: lines })
    }
}
