//! The inbox folded into messages (manual: Owners and notifications), in one transaction: the
//! exceptions that arrived, and those that passed `warn_after` or `critical_after`, join their
//! group (its id, `domain::group`, and the team told); a group is told once its first arrival is
//! `group_window` old, and again at most every `repeat`, after it is checked against the ledger:
//! what was settled meanwhile is not told, and a group with nothing left open is not told at
//! all. A group that reached both aging levels in one window is told once, at the higher. A
//! pause and a resume are told as they come. Each message to each channel is recorded here,
//! with its place in the ledger's order, before anything is sent.

use std::collections::BTreeMap;

use chrono::{DateTime, Duration, Utc};

use super::message::{Message, new_id, open_command};
use super::outbox::Notices;
use crate::domain::group::group_reason;
use crate::domain::next_step::Paused;
use crate::domain::{Op, safe_next_step};
use crate::error::Result;
use crate::store::{self, GroupState, MessageRow, Tried, Tx};

/// How many notices, and aged exceptions per level, one fold takes.
pub(super) const FOLD_BATCH: i64 = 2000;
/// Keys a message names.
pub(super) const KEYS_SHOWN: usize = 5;

/// What a group is told for: automatic recovery stopped, or an aging level passed.
pub(super) const QUEUE: &str = "queue";
pub(super) const WARNING: &str = "aging:warning";
pub(super) const CRITICAL: &str = "aging:critical";

/// A group as it is told: for what (`QUEUE`, `WARNING`, `CRITICAL`), the team, its id, and
/// what it is named by.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(super) struct GroupKey {
    pub(super) kind: String,
    pub(super) team: String,
    pub(super) id: String,
    pub(super) workflow: String,
    pub(super) destination: String,
    pub(super) state: String,
    pub(super) reason: String,
}

impl GroupKey {
    fn name(&self) -> String {
        serde_json::to_string(&[
            &self.kind,
            &self.team,
            &self.id,
            &self.workflow,
            &self.destination,
            &self.state,
            &self.reason,
        ])
        .unwrap_or_default()
    }

    /// A stored group's key; a group stored before groups had ids (five parts) is a queue's,
    /// its id made from its parts as the ledger makes it.
    fn parse(name: &str) -> Option<GroupKey> {
        if let Ok([kind, team, id, workflow, destination, state, reason]) =
            serde_json::from_str::<[String; 7]>(name)
        {
            return Some(GroupKey {
                kind,
                team,
                id,
                workflow,
                destination,
                state,
                reason,
            });
        }
        let [team, workflow, destination, state, reason]: [String; 5] =
            serde_json::from_str(name).ok()?;
        let id = crate::domain::group::group_id(&workflow, &destination, &state, &reason);
        Some(GroupKey {
            kind: QUEUE.into(),
            team,
            id,
            workflow,
            destination,
            state,
            reason,
        })
    }
}

/// What one fold gathered for a group: how many, when the first came, some keys, the oldest.
pub(super) struct Arrivals {
    pub(super) count: i64,
    pub(super) first: DateTime<Utc>,
    pub(super) keys: Vec<String>,
    pub(super) oldest: Option<DateTime<Utc>>,
}

impl Arrivals {
    pub(super) fn add(&mut self, op: &Op, at: DateTime<Utc>) {
        self.count += 1;
        self.first = self.first.min(at);
        self.oldest = Some(self.oldest.map_or(at, |o| o.min(at)));
        if self.keys.len() < KEYS_SHOWN {
            self.keys.push(op.key.clone());
        }
    }
}

impl Notices<'_> {
    /// Folds the inbox and the aging into messages: how many messages it recorded.
    pub async fn fold(&self) -> Result<usize> {
        store::in_tx!(self.0.store, |tx| self.fold_in(tx).await)
    }

    async fn fold_in(&self, tx: &mut Tx) -> Result<Tried<usize>> {
        let now = self.0.now();
        let mut messages = Vec::new();
        let taken = tx.take_notices(FOLD_BATCH).await?;
        let mut ids: Vec<i64> = taken.iter().filter_map(|n| n.operation_id).collect();
        ids.sort_unstable();
        ids.dedup();
        let mut arrived: BTreeMap<GroupKey, Arrivals> = BTreeMap::new();
        for (_, op) in tx.ops_by_id(&ids).await? {
            if let Some(key) = self.group_of(&op, QUEUE) {
                let at = op.exception_since.unwrap_or(now);
                arrived.entry(key).or_insert_with(|| empty(at)).add(&op, at);
            }
        }
        for n in taken.iter().filter(|n| n.operation_id.is_none()) {
            messages.extend(self.pause_messages(tx, n, now).await?);
        }
        self.aged(tx, now, &mut arrived).await?;
        self.join_groups(tx, arrived).await?;
        messages.extend(self.due_groups(tx, now).await?);
        let mut recorded = 0;
        for m in &messages {
            recorded += self.record(tx, m, now).await?;
        }
        Ok(Tried::Done(recorded))
    }

    /// The group an exception belongs to, told for `kind`, where a team is told of its workflow.
    pub(super) fn group_of(&self, op: &Op, kind: &str) -> Option<GroupKey> {
        let team = self.0.config.told_of(&op.workflow)?;
        let id = op.group.clone()?;
        Some(GroupKey {
            kind: kind.into(),
            team: team.to_string(),
            id,
            workflow: op.workflow.clone(),
            destination: op.destination.clone(),
            state: op.state.as_str().to_string(),
            reason: group_reason(op.reason.as_deref(), &op.payload),
        })
    }

    /// Adds what arrived to the groups as stored.
    async fn join_groups(&self, tx: &mut Tx, arrived: BTreeMap<GroupKey, Arrivals>) -> Result<()> {
        let names: Vec<String> = arrived.keys().map(GroupKey::name).collect();
        let refs: Vec<&str> = names.iter().map(String::as_str).collect();
        let stored: BTreeMap<String, GroupState> = tx
            .told()
            .groups_of(&refs)
            .await?
            .into_iter()
            .map(|g| (g.key.clone(), g))
            .collect();
        for (name, a) in names.into_iter().zip(arrived.into_values()) {
            let mut g = stored.get(&name).cloned().unwrap_or(GroupState {
                key: name,
                pending: 0,
                pending_since: None,
                keys: "[]".into(),
                oldest_at: None,
                told_at: None,
            });
            let mut keys: Vec<String> = serde_json::from_str(&g.keys).unwrap_or_default();
            keys.extend(a.keys);
            keys.truncate(KEYS_SHOWN * 4);
            g.keys = serde_json::to_string(&keys).unwrap_or_else(|_| "[]".into());
            g.pending += a.count;
            g.pending_since = Some(g.pending_since.map_or(a.first, |p| p.min(a.first)));
            g.oldest_at = match (g.oldest_at, a.oldest) {
                (Some(x), Some(y)) => Some(x.min(y)),
                (x, y) => x.or(y),
            };
            tx.told().save_group(&g).await?;
        }
        Ok(())
    }

    /// The groups whose wait is over, checked against the ledger and told now, their count back
    /// to none; a warning and a critical of one group due together are told once, as critical.
    async fn due_groups(&self, tx: &mut Tx, now: DateTime<Utc>) -> Result<Vec<Message>> {
        let notify = &self.0.config.notify;
        let window = Duration::from_std(notify.group_window).unwrap_or_default();
        let repeat = Duration::from_std(notify.repeat).unwrap_or_default();
        let mut due: BTreeMap<GroupKey, GroupState> = BTreeMap::new();
        // the groups that reached the critical level, told or about to be: their warning is
        // not told on its own
        let mut critical: Vec<(String, String)> = Vec::new();
        for g in tx.told().pending_groups().await? {
            let Some(key) = GroupKey::parse(&g.key) else {
                continue;
            };
            if key.kind == CRITICAL {
                critical.push((key.team.clone(), key.id.clone()));
            }
            let gathered = g.pending_since.is_none_or(|p| p + window <= now);
            let rested = g.told_at.is_none_or(|t| t + repeat <= now);
            if gathered && rested {
                due.insert(key, g);
            }
        }
        let mut out = Vec::new();
        for (key, mut g) in due {
            let outdone =
                key.kind == WARNING && critical.contains(&(key.team.clone(), key.id.clone()));
            if !outdone && let Some(m) = self.told_now(tx, &key, &g, now).await? {
                out.push(m);
            }
            g.pending = 0;
            g.pending_since = None;
            g.keys = "[]".into();
            g.told_at = Some(now);
            tx.told().save_group(&g).await?;
        }
        Ok(out)
    }

    /// The message of a group as the ledger holds it now: none when nothing of it is open. Its
    /// count is what arrived since it was last told and is still open, beside the group's own.
    async fn told_now(
        &self,
        tx: &mut Tx,
        key: &GroupKey,
        g: &GroupState,
        now: DateTime<Utc>,
    ) -> Result<Option<Message>> {
        let where_ = (
            key.workflow.as_str(),
            key.destination.as_str(),
            key.state.as_str(),
        );
        let (open, oldest) = tx.told().group_now(where_, &key.id).await?;
        if open == 0 {
            return Ok(None);
        }
        let named: Vec<String> = serde_json::from_str(&g.keys).unwrap_or_default();
        let refs: Vec<&str> = named.iter().map(String::as_str).collect();
        let held = tx.load_ops(&refs, false).await?;
        let mut still: Vec<String> = named
            .iter()
            .filter(|k| {
                held.get(k.as_str())
                    .is_some_and(|(_, op)| op.group.as_deref() == Some(key.id.as_str()))
            })
            .cloned()
            .collect();
        // what was settled of the new ones meanwhile is not told: at most what is still open
        let gone = named.len() - still.len();
        still.truncate(KEYS_SHOWN);
        let new = (g.pending - gone as i64).clamp(0, open);
        if new == 0 {
            return Ok(None);
        }
        let (kind, level) = match key.kind.as_str() {
            WARNING => ("aging", "warning"),
            CRITICAL => ("aging", "critical"),
            _ => ("queue", "warning"),
        };
        let sample = match still.first() {
            Some(k) => held.get(k.as_str()).map(|(_, op)| self.next_step(op, now)),
            None => None,
        };
        Ok(Some(Message {
            kind: kind.into(),
            level: level.into(),
            team: Some(key.team.clone()),
            step: sample.as_ref().map(|(s, _)| s.clone()),
            open: Some(open_command(&format!(
                "wf:{} dest:{} state:{} group:{}",
                key.workflow, key.destination, key.state, key.id
            ))),
            group: Some(key.id.clone()),
            workflow: Some(key.workflow.clone()),
            destination: Some(key.destination.clone()),
            state: Some(key.state.clone()),
            reason: Some(key.reason.clone()).filter(|r| !r.is_empty()),
            count: new,
            group_count: open,
            oldest_seconds: oldest.map_or(0, |o| (now - o).num_seconds().max(0)),
            keys: still,
            next_step: sample.map(|(_, n)| n),
            created_at: now,
            ..Message::default()
        }))
    }

    /// An exception's step and its safe next step, its reason as its group tells it.
    fn next_step(&self, op: &Op, now: DateTime<Utc>) -> (String, String) {
        let mut op = op.clone();
        op.reason = Some(group_reason(op.reason.as_deref(), &op.payload)).filter(|r| !r.is_empty());
        let policy = self.0.config.destination(&op.destination);
        let step = safe_next_step(
            &op,
            &policy,
            "",
            Paused::default(),
            self.0.config.attempt_timeout,
            now,
        );
        (op.step.clone(), step.text)
    }

    /// Records `m` once per channel of its team that hears of it, each with its place in the
    /// ledger's order: how many.
    async fn record(&self, tx: &mut Tx, m: &Message, now: DateTime<Utc>) -> Result<usize> {
        let Some(team) = m.team.as_deref().and_then(|t| self.0.config.teams.get(t)) else {
            return Ok(0);
        };
        let mut channels: Vec<&String> = team.notify.iter().collect();
        if m.level == "critical" {
            channels.extend(team.escalate.iter().filter(|c| !team.notify.contains(c)));
        }
        for channel in &channels {
            let seq = tx.told().next_seq().await?;
            let msg = Message {
                id: new_id(),
                seq,
                ..m.clone()
            };
            tx.add_message(&MessageRow {
                id: msg.id.clone(),
                seq,
                created_at: now,
                channel: channel.to_string(),
                kind: msg.kind.clone(),
                level: msg.level.clone(),
                team: msg.team.clone(),
                body: serde_json::to_string(&msg).unwrap_or_default(),
                status: "pending".into(),
                tries: 0,
                next_try_at: now,
                sent_at: None,
                answers: "[]".into(),
            })
            .await?;
        }
        Ok(channels.len())
    }
}

/// An empty gathering whose first arrival is `at`.
pub(super) fn empty(at: DateTime<Utc>) -> Arrivals {
    Arrivals {
        count: 0,
        first: at,
        keys: Vec::new(),
        oldest: None,
    }
}
