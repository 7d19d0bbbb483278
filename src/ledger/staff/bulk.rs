//! Incident mode (manual: Many at once): one staff action on many operations, as safely as on one. The set is
//! chosen (keys, or every operation a filter matches) and frozen at a preview that says, grouped
//! by reason, what will be done and what left alone; then each item is re-checked and acted on in
//! its own transaction (one compare-and-set, one audit event carrying the batch id), so a stop
//! midway leaves what is done done and the rest untouched.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};

use serde::Serialize;

use super::Staff;
use crate::domain::{Command, StaffAction, staff_check, validate_key};
use crate::error::{Error, Result};
use crate::ledger::change::{Ask, Decided};
use crate::ledger::engine::Batch;
use crate::store::Tried;
use crate::store::{self, Tx};

/// Items per transaction of a bulk action: each still its own compare-and-set and event; a stop
/// takes effect between two chunks.
const CHUNK: usize = 200;

/// Operations read per statement by a preview (nothing is held: larger is fewer round trips).
const PREVIEW_CHUNK: usize = 2000;

/// What a bulk action would do, frozen when it was asked.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct BulkPreview {
    /// How many operations were chosen.
    pub matched: usize,
    /// The keys it will act on, in order.
    pub eligible: Vec<String>,
    /// The keys it leaves alone, by reason ("claimed by another", "already terminal", ...).
    pub refused: BTreeMap<String, Vec<String>>,
}

/// What a bulk action did.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct BulkReport {
    /// The id every event of this action carries in its detail (`batch`).
    pub batch: String,
    /// The action's id, to take it back by (manual: Taking an action back): the batch id.
    pub action: String,
    pub done: Vec<String>,
    /// Eligible at the preview, refused at their turn: another writer changed them meanwhile.
    pub changed_meanwhile: BTreeMap<String, Vec<String>>,
    /// Not reached: the action was stopped first.
    pub not_reached: Vec<String>,
    /// A retry's canary (manual: Recovery that follows the destination): sent alone first.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub canary: Option<Canary>,
    /// Not sent because the canary failed: left as they were.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub not_sent: Vec<String>,
    /// Why a retry of many went without a canary.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub canary_skipped: Option<String>,
}

/// A bulk retry's canary: the one item sent first, and what came of it.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Canary {
    pub key: String,
    /// The destination accepted it, so the others followed.
    pub went: bool,
    /// What it came to where it did not go: the destination's answer, or why none came.
    pub said: Option<String>,
}

impl BulkPreview {
    /// The preview in one line: "retry 212: 180 to do; left alone: 12 claimed by another, ...".
    pub fn summary(&self, verb: &str) -> String {
        let mut line = format!("{verb} {}: {} to do", self.matched, self.eligible.len());
        if !self.refused.is_empty() {
            let groups: Vec<String> = self
                .refused
                .iter()
                .map(|(why, keys)| format!("{} {why}", keys.len()))
                .collect();
            line.push_str(&format!("; left alone: {}", groups.join(", ")));
        }
        line
    }
}

impl BulkReport {
    /// The summary line: done, changed meanwhile, not reached (manual: Many at once).
    pub fn summary(&self, verb: &str) -> String {
        if let Some(c) = self.canary.as_ref().filter(|c| !c.went) {
            return format!(
                "canary {}: {}; {} not sent",
                c.key,
                c.said.as_deref().unwrap_or("failed"),
                self.not_sent.len()
            );
        }
        let mut line = format!("{verb}: {} done (batch {})", self.done.len(), self.batch);
        let changed: usize = self.changed_meanwhile.values().map(Vec::len).sum();
        if changed > 0 {
            line.push_str(&format!("; {changed} changed meanwhile, left alone"));
        }
        if !self.not_reached.is_empty() {
            line.push_str(&format!(
                "; stopped: {} not reached, untouched",
                self.not_reached.len()
            ));
        }
        if let Some(why) = &self.canary_skipped {
            line.push_str(&format!("; no canary: {why}"));
        }
        line
    }
}

impl Staff<'_> {
    /// The preview of `action` by `actor` on these keys: the rules of a single action, asked of
    /// each operation as it stands, nothing written.
    pub async fn bulk_preview(
        self,
        keys: &[String],
        action: &StaffAction,
        actor: &str,
    ) -> Result<BulkPreview> {
        let items: Vec<(String, StaffAction)> =
            keys.iter().map(|k| (k.clone(), action.clone())).collect();
        self.bulk_preview_each(&items, actor).await
    }

    /// The preview of an action per key (`reconcile --from`: found or absent, line by line).
    pub async fn bulk_preview_each(
        self,
        items: &[(String, StaffAction)],
        actor: &str,
    ) -> Result<BulkPreview> {
        let now = self.0.now();
        let mut preview = BulkPreview {
            matched: items.len(),
            ..Default::default()
        };
        self.0.check_acting(actor)?;
        self.check_bulk_size(items.len())?;
        // the operations read two statements at a time (two connections: the server's reading
        // and the decoding here overlap), then each item asked of the rules
        let load = async |chunk: &[(String, StaffAction)]| {
            let keys: Vec<&str> = chunk
                .iter()
                .map(|(k, _)| k.as_str())
                .filter(|k| validate_key(k).is_ok())
                .collect();
            self.0.store.load_ops(&keys).await
        };
        let chunks: Vec<&[(String, StaffAction)]> = items.chunks(PREVIEW_CHUNK).collect();
        for pair in chunks.chunks(2) {
            let (first, second) = match pair {
                [a, b] => {
                    let (a, b) = tokio::join!(load(a), load(b));
                    (a?, Some(b?))
                }
                [a] => (load(a).await?, None),
                _ => continue,
            };
            for (chunk, ops) in pair.iter().zip([Some(first), second].into_iter().flatten()) {
                for (key, action) in chunk.iter() {
                    let mut refuse =
                        |why: String| preview.refused.entry(why).or_default().push(key.clone());
                    // an item's own texts and keys: a bad one is that item's, not the batch's
                    match self.check_staff_action(key, actor, action).await {
                        Ok(()) => {}
                        Err(e @ (Error::Invalid(_) | Error::Refused(_))) => {
                            refuse(e.to_string());
                            continue;
                        }
                        Err(e) => return Err(e),
                    }
                    if let Err(e) = validate_key(key) {
                        refuse(e);
                        continue;
                    }
                    let Some((_, op)) = ops.get(key.as_str()) else {
                        refuse("no such operation".into());
                        continue;
                    };
                    let policy = self.0.config.destination(&op.destination);
                    let ctx = self.0.rules_ctx(actor, &policy, now);
                    match staff_check::<crate::domain::Why>(op, action, &ctx) {
                        Ok(_) => preview.eligible.push(key.clone()),
                        Err(why) => refuse(why.class.to_string()),
                    }
                }
            }
        }
        Ok(preview)
    }

    /// Acts on the preview's eligible keys one by one, each with its own compare-and-set and its
    /// own event (whose detail holds `batch`), `CHUNK` items to a transaction; an item another
    /// writer changed since the preview is refused by the rules and reported. `stop` set: the
    /// items not yet reached are left alone. `progress` is told after each item (done so far, of
    /// how many), once its chunk is written. `pace` (retries only)
    /// spaces the items' next attempts this far apart, the first at once, so that a recovering
    /// destination is not flooded (paced retries, manual: Many at once; the retry budget still applies).
    pub async fn bulk_apply(
        self,
        eligible: &[String],
        action: &StaffAction,
        actor: &str,
        stop: &AtomicBool,
        pace: Option<std::time::Duration>,
        progress: impl FnMut(usize, usize),
    ) -> Result<BulkReport> {
        let items: Vec<(String, StaffAction)> = eligible
            .iter()
            .map(|k| (k.clone(), action.clone()))
            .collect();
        self.bulk_apply_each(&items, actor, stop, pace, progress)
            .await
    }

    /// [`Ledger::bulk_apply`] with an action per key.
    pub async fn bulk_apply_each(
        self,
        items: &[(String, StaffAction)],
        actor: &str,
        stop: &AtomicBool,
        pace: Option<std::time::Duration>,
        mut progress: impl FnMut(usize, usize),
    ) -> Result<BulkReport> {
        let start = self.0.now();
        self.0.check_acting(actor)?;
        self.check_bulk_size(items.len())?;
        // the id of the whole action, which an undo takes back by: unique however many act at once
        let batch = format!(
            "b-{}-{:08x}",
            self.0.now().format("%Y%m%dT%H%M%S"),
            rand::random::<u32>()
        );
        let mut report = BulkReport {
            action: batch.clone(),
            batch,
            ..Default::default()
        };
        let mut done = 0;
        for chunk in items.chunks(CHUNK) {
            if stop.load(Ordering::SeqCst) {
                report
                    .not_reached
                    .extend(items[done..].iter().map(|(k, _)| k.clone()));
                break;
            }
            let pace_of = |i: usize| {
                pace.map(|p| {
                    let offset = p.saturating_mul(u32::try_from(done + i).unwrap_or(u32::MAX));
                    crate::domain::time::after(start, offset)
                })
            };
            let batch = report.batch.clone();
            let outcomes = store::in_tx!(self.0.store, |tx| self
                .act_on_chunk(tx, chunk, actor, &batch, &pace_of)
                .await)?;
            // told item by item, once its chunk is committed
            for ((key, _), outcome) in chunk.iter().zip(outcomes) {
                match outcome {
                    Ok(()) => report.done.push(key.clone()),
                    Err(why) => report
                        .changed_meanwhile
                        .entry(why)
                        .or_default()
                        .push(key.clone()),
                }
                done += 1;
                progress(done, items.len());
            }
        }
        Ok(report)
    }

    /// One chunk of a bulk action in one transaction: the operations loaded (and held) at once,
    /// each decided by the rules of a single action, and every change written together: per
    /// item still one compare-and-set and one event. An item the rules refuse now (another
    /// writer changed it since the preview) is that item's answer, not the chunk's.
    async fn act_on_chunk(
        self,
        tx: &mut Tx,
        chunk: &[(String, StaffAction)],
        actor: &str,
        batch_id: &str,
        pace_of: &(dyn Fn(usize) -> Option<chrono::DateTime<chrono::Utc>> + Sync),
    ) -> Result<Tried<Vec<std::result::Result<(), String>>>> {
        let mut keys: Vec<&str> = chunk.iter().map(|(k, _)| k.as_str()).collect();
        // a correction's new key is held too: taken meanwhile, that item is refused
        keys.extend(chunk.iter().filter_map(|(_, a)| match a {
            StaffAction::Correct { corrected_as, .. } => Some(corrected_as.as_str()),
            _ => None,
        }));
        let mut batch = Batch::hold(tx, &keys).await?;
        let mut outcomes = Vec::with_capacity(chunk.len());
        for (i, (key, action)) in chunk.iter().enumerate() {
            // a key twice in one chunk (a file may repeat it): the second is judged on what the
            // first made of it, as one after the other would be
            let ask = Ask::Cmd(Command::Staff(action.clone()));
            match batch.judge(self.0, tx, key, actor, &ask, None).await {
                Ok(Decided::Unchanged(_)) => outcomes.push(Ok(())),
                Ok(Decided::Change(mut c)) => {
                    c.of_action(batch_id);
                    let mut detail: serde_json::Value =
                        serde_json::from_str(&c.detail).unwrap_or_default();
                    if let Some(d) = detail.as_object_mut() {
                        d.insert("batch".into(), batch_id.into());
                        // a paced retry: its next attempt takes its place in the pace (the
                        // first at the start, each next one a pace later)
                        if let Some(at) = pace_of(i)
                            && c.op.state == crate::domain::State::Pending
                            && c.op.next_attempt_at.is_some()
                        {
                            c.op.next_attempt_at = Some(at);
                            d.insert("not_before".into(), at.to_rfc3339().into());
                        }
                    }
                    c.detail = detail.to_string();
                    batch.take(c);
                    outcomes.push(Ok(()));
                }
                Err(Error::Refused(why) | Error::NotFound(why)) => outcomes.push(Err(why)),
                Err(e) => return Err(e),
            }
        }
        if batch.write(self.0, tx, actor).await?.is_none() {
            return Ok(Tried::Raced);
        }
        Ok(Tried::Done(outcomes))
    }
}
