//! Taking a person's action back (manual: Taking an action back): found by its id (or one's own
//! last), within `undo_window`, one's own unless a lead; each item it changed restored by a new
//! `undone` event through the write engine, `CHUNK` items to a transaction, exactly while
//! nothing has touched it since. What cannot be taken back is listed, each with who or what
//! touched it.

use chrono::{DateTime, Utc};

use super::Staff;
use super::undo_pauses::PauseRestore;
use super::undo_report::UndoReport;
use crate::domain::{Command, Restore, format_age};
use crate::error::{Error, Result};
use crate::ledger::change::{Ask, Decided};
use crate::ledger::engine::Batch;
use crate::store::{self, ActionEvent, Tried, Tx};

/// Items per transaction of an undo, as of a bulk action.
const CHUNK: usize = 200;

/// Operations read per statement by a preview.
const PREVIEW_CHUNK: usize = 2000;

/// Which action to take back.
#[derive(Clone, Copy, Debug)]
pub enum UndoOf<'a> {
    /// The action with this id.
    Id(&'a str),
    /// The person's own newest action.
    Last,
}

/// An item of the action still to take back: its event and what it keeps.
struct Item {
    event: ActionEvent,
    restore: Restore,
}

impl Staff<'_> {
    /// What taking back `which` would do, changing nothing: the items it would restore now and
    /// those it would leave, each with why.
    pub async fn undo_preview(self, which: UndoOf<'_>, actor: &str) -> Result<UndoReport> {
        let (mut report, items, pauses) = self.undo_items(which, actor).await?;
        for p in pauses {
            match self.pause_undoable(&p).await? {
                Ok(()) => report.taken_back.push(p.label()),
                Err(why) => report.refused.push((p.label(), why)),
            }
        }
        let now = self.0.now();
        for chunk in items.chunks(PREVIEW_CHUNK) {
            let keys: Vec<&str> = chunk.iter().map(|i| i.event.key.as_str()).collect();
            let held = self.0.store.load_ops(&keys).await?;
            for item in chunk {
                let key = item.event.key.clone();
                let version = held.get(&key).map(|(_, op)| op.version);
                if item.restore.note || version == Some(item.restore.v) {
                    match self.unsent(&item.restore).await? {
                        _ if item.restore.ended_attempt && !item.restore.note => {
                            report.refused.push((key.clone(), ended(&key)))
                        }
                        Some(why) => report.refused.push((key, why)),
                        None => report.taken_back.push(key),
                    }
                    continue;
                }
                match self.since(&item.event, &report.was, now).await? {
                    Since::Notes => match self.unsent(&item.restore).await? {
                        Some(why) => report.refused.push((key, why)),
                        None => report.taken_back.push(key),
                    },
                    Since::Changed(why) => report.refused.push((key, why)),
                }
            }
        }
        Ok(report)
    }

    /// Takes back `which` (manual: Taking an action back): every item it changed that nothing
    /// has changed since (but notes) returns to exactly the state, claim and next step it had
    /// before, by a new `undone` event naming the action and `actor` (and `note`); the rest is
    /// listed.
    pub async fn undo(
        self,
        which: UndoOf<'_>,
        actor: &str,
        note: Option<&str>,
    ) -> Result<UndoReport> {
        if let Some(n) = note {
            crate::ledger::checks::check_text("the note", Some(n))?;
        }
        let (mut report, items, pauses) = self.undo_items(which, actor).await?;
        for p in pauses {
            match self.undo_pause(&p, &report.action, actor).await? {
                Ok(()) => report.taken_back.push(p.label()),
                Err(why) => report.refused.push((p.label(), why)),
            }
        }
        let now = self.0.now();
        // an item only noted on since is taken back on a second pass, from where the notes left it
        let mut noted = Vec::new();
        for chunk in items.chunks(CHUNK) {
            let answers = crate::store::in_tx!(self.0.store, |tx| self
                .undo_chunk(tx, chunk, &report.action, actor, note)
                .await)?;
            for (item, answer) in chunk.iter().zip(answers) {
                let key = item.event.key.clone();
                match answer {
                    Ok(()) => report.taken_back.push(key),
                    Err(why) if why.ends_with("changed since") => {
                        match self.since(&item.event, &report.was, now).await? {
                            Since::Notes => noted.push(item),
                            Since::Changed(why) => report.refused.push((key, why)),
                        }
                    }
                    Err(why) => report.refused.push((key, why)),
                }
            }
        }
        let mut again = Vec::new();
        for item in noted {
            if let Some((_, op)) = self.0.store.load_op(&item.event.key).await? {
                let mut restore = item.restore.clone();
                restore.v = op.version;
                again.push(Item {
                    event: item.event.clone(),
                    restore,
                });
            }
        }
        for chunk in again.chunks(CHUNK) {
            let answers = crate::store::in_tx!(self.0.store, |tx| self
                .undo_chunk(tx, chunk, &report.action, actor, note)
                .await)?;
            for (item, answer) in chunk.iter().zip(answers) {
                match answer {
                    Ok(()) => report.taken_back.push(item.event.key.clone()),
                    Err(_) => {
                        let why = match self.since(&item.event, &report.was, now).await? {
                            Since::Changed(why) => why,
                            Since::Notes => format!("{} changed since", item.event.key),
                        };
                        report.refused.push((item.event.key.clone(), why));
                    }
                }
            }
        }
        Ok(report)
    }

    /// The action's items still to take back, once the person may take it back at all.
    async fn undo_items(
        self,
        which: UndoOf<'_>,
        actor: &str,
    ) -> Result<(UndoReport, Vec<Item>, Vec<PauseRestore>)> {
        self.0.check_acting(actor)?;
        let id = match which {
            UndoOf::Id(id) => id.to_string(),
            UndoOf::Last => store::last_action(self.0.store.conn().await?.db(), actor)
                .await?
                .ok_or_else(|| {
                    Error::NotFound(format!("{actor} has taken no action to take back"))
                })?,
        };
        let events = store::action_events(self.0.store.conn().await?.db(), &id).await?;
        let Some(first) = events.iter().find(|e| e.kind != "undone") else {
            return Err(Error::NotFound(format!("no action {id}")));
        };
        let by = first.actor.clone();
        if by != actor && !self.0.role().leads() {
            return Err(Error::Refused(format!(
                "{id} is {by}'s action: one takes back one's own; a lead takes back anyone's"
            )));
        }
        let age = self.0.now() - first.at;
        let window = self.0.config.undo_window;
        if age.to_std().unwrap_or_default() > window {
            return Err(Error::Refused(format!(
                "{id} was taken {} ago: an action can be taken back for {} after it",
                format_age(age),
                crate::domain::time::format_duration(window)
            )));
        }
        let mut report = UndoReport {
            action: id.clone(),
            was: first.kind.clone(),
            by,
            at: first.at,
            ..Default::default()
        };
        let undone: std::collections::HashSet<Option<i64>> = events
            .iter()
            .filter(|e| e.kind == "undone")
            .map(|e| e.op_id)
            .collect();
        let (mut items, mut pauses) = (Vec::new(), Vec::new());
        let mut seen = std::collections::HashSet::new();
        for event in events.into_iter().filter(|e| e.kind != "undone") {
            // a pause or a resume names no operation: its own restore
            let pause = match event.op_id {
                None => event.restore.as_deref(),
                Some(_) => None,
            };
            let pause = pause.and_then(|r| serde_json::from_str::<PauseRestore>(r).ok());
            if undone.contains(&event.op_id) {
                report.already.push(pause.map_or(event.key, |p| p.label()));
                continue;
            }
            if let Some(p) = pause {
                pauses.push(p);
                continue;
            }
            // a key the action met twice (a file repeating it): taken back from its first
            // state, which only its last event's version can still allow
            if !seen.insert(event.op_id) {
                continue;
            }
            let restore = event
                .restore
                .as_deref()
                .and_then(|r| serde_json::from_str::<Restore>(r).ok());
            match restore {
                Some(restore) => items.push(Item { event, restore }),
                None => report.refused.push((
                    event.key,
                    "its event keeps nothing to restore (written by an older settle)".into(),
                )),
            }
        }
        Ok((report, items, pauses))
    }

    /// One chunk of an undo in one transaction: each item judged by the rules and written with
    /// the others; an item refused is that item's answer.
    async fn undo_chunk(
        self,
        tx: &mut Tx,
        chunk: &[Item],
        action: &str,
        actor: &str,
        note: Option<&str>,
    ) -> Result<Tried<Vec<std::result::Result<(), String>>>> {
        // a correction's new operation is held too: withdrawn with it
        let mut keys: Vec<&str> = chunk.iter().map(|i| i.event.key.as_str()).collect();
        keys.extend(
            chunk
                .iter()
                .filter_map(|i| Some(i.restore.corrected_as.as_ref()?.0.as_str())),
        );
        let mut batch = Batch::hold(tx, &keys).await?;
        let mut answers = Vec::with_capacity(chunk.len());
        for item in chunk {
            let undo = Ask::Cmd(Command::Undo {
                action: action.to_string(),
                undid: item.event.kind.clone(),
                restore: Box::new(item.restore.clone()),
            });
            let mut asks = vec![(item.event.key.as_str(), undo)];
            if let Some((made, v)) = &item.restore.corrected_as {
                let withdraw = Command::Withdraw {
                    action: action.to_string(),
                    v: *v,
                };
                asks.push((made.as_str(), Ask::Cmd(withdraw)));
            }
            // the item and the correction it made are taken back together, or neither
            let mut changes = Vec::new();
            let mut refused = None;
            for (key, ask) in &asks {
                match batch.judge(self.0, tx, key, actor, ask, None).await {
                    Ok(Decided::Change(c)) => changes.push(c),
                    Ok(Decided::Unchanged(_)) => {}
                    Err(Error::Refused(why) | Error::NotFound(why)) => {
                        refused = Some(why);
                        break;
                    }
                    Err(e) => return Err(e),
                }
            }
            if let Some(why) = refused {
                answers.push(Err(why));
                continue;
            }
            for mut c in changes {
                c.of_action(action);
                if let Some(n) = note
                    && let Ok(mut d) = serde_json::from_str::<serde_json::Value>(&c.detail)
                {
                    d["note"] = n.into();
                    c.detail = d.to_string();
                }
                batch.take(c);
            }
            answers.push(Ok(()));
        }
        if batch.write(self.0, tx, actor).await?.is_none() {
            return Ok(Tried::Raced);
        }
        Ok(Tried::Done(answers))
    }

    /// Why a correction the action made can no longer be withdrawn (it was sent or worked
    /// since); none where it made none, or that one is as made.
    async fn unsent(self, restore: &Restore) -> Result<Option<String>> {
        let Some((made, v)) = &restore.corrected_as else {
            return Ok(None);
        };
        Ok(match self.0.store.load_op(made).await? {
            Some((_, op)) if op.version == *v && op.attempts == 0 => None,
            Some((_, op)) => Some(format!(
                "its correction {made} is {} since: a correction once sent or worked is not taken back",
                op.state
            )),
            None => Some(format!("its correction {made} is gone (pruned)")),
        })
    }

    /// What happened to an item of the action since it: only notes (taken back all the same),
    /// or a change, in words: who or what changed it first, and when.
    async fn since(self, event: &ActionEvent, was: &str, now: DateTime<Utc>) -> Result<Since> {
        let key = &event.key;
        let mut conn = self.0.store.conn().await?;
        let op_id = event.op_id.unwrap_or_default();
        let changes = store::changes_after(conn.db(), op_id, event.event_id).await?;
        let Some(c) = changes.first() else {
            return Ok(Since::Changed(format!("{key} changed since")));
        };
        if changes.iter().all(|c| c.kind == "note") {
            return Ok(Since::Notes);
        }
        let c = changes.iter().find(|c| c.kind != "note").unwrap_or(c);
        let ago = format_age(now - c.at);
        Ok(Since::Changed(match (was, c.kind.as_str()) {
            ("retry_requested", "attempt_started") => format!(
                "{key}: its retry was sent ({} started it {ago} ago): a request once sent is not taken back",
                c.actor
            ),
            _ => format!("{key} changed since: {} by {}, {ago} ago", c.kind, c.actor),
        }))
    }
}

/// What happened to an item since the action.
enum Since {
    /// Nothing but notes: it is taken back all the same.
    Notes,
    /// Changed, in words.
    Changed(String),
}

fn ended(key: &str) -> String {
    format!("{key}: the action ended an attempt that was under way, and no undo reopens an attempt")
}
