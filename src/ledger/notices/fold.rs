//! The inbox folded into messages (manual: Owners and notifications), in one transaction: the
//! exceptions that arrived join their group (team, workflow, destination, state, masked reason);
//! a group is told once its first arrival is `group_window` old, and again at most every
//! `repeat`; exceptions passing `warn_after` and `critical_after` are told once per level; a
//! pause and a resume are told as they come. Each message to each channel is recorded here,
//! before anything is sent.

use std::collections::BTreeMap;

use chrono::{DateTime, Duration, Utc};

use super::message::{Message, new_id, open_command};
use super::outbox::Notices;
use crate::domain::mask::told_reason;
use crate::domain::next_step::Paused;
use crate::domain::patterns::redact_text;
use crate::domain::{Op, safe_next_step};
use crate::error::Result;
use crate::store::{self, GroupState, MessageRow, Tried, Tx};

/// How many notices, and aged exceptions per level, one fold takes.
const FOLD_BATCH: i64 = 2000;
/// Keys a message names.
const KEYS_SHOWN: usize = 5;

/// A group's identity: team, workflow, destination, state, masked reason.
type GroupKey = (String, String, String, String, String);

/// What one fold gathered for a group: how many, when the first came, some keys, the oldest.
struct Arrivals {
    count: i64,
    first: DateTime<Utc>,
    keys: Vec<String>,
    oldest: Option<DateTime<Utc>>,
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
            if op.state.is_exception()
                && let Some(key) = self.group_of(&op)
            {
                let at = op.exception_since.unwrap_or(now);
                let a = arrived.entry(key).or_insert(Arrivals {
                    count: 0,
                    first: at,
                    keys: Vec::new(),
                    oldest: None,
                });
                a.count += 1;
                a.first = a.first.min(at);
                a.oldest = Some(a.oldest.map_or(at, |o| o.min(at)));
                if a.keys.len() < KEYS_SHOWN {
                    a.keys.push(op.key.clone());
                }
            }
        }
        for n in taken.iter().filter(|n| n.operation_id.is_none()) {
            messages.extend(self.pause_messages(n, now));
        }
        self.join_groups(tx, arrived).await?;
        messages.extend(self.due_groups(tx, now).await?);
        messages.extend(self.aging(tx, now).await?);
        let mut recorded = 0;
        for m in &messages {
            recorded += self.record(tx, m, now).await?;
        }
        Ok(Tried::Done(recorded))
    }

    /// The group an exception belongs to, where a team is told of its workflow.
    fn group_of(&self, op: &Op) -> Option<GroupKey> {
        let team = self.0.config.told_of(&op.workflow)?;
        // its payload's sensitive values scrubbed, as every view of it is; then, as told to
        // people, summarized, every value of its payload taken out, masked
        let scrubbed = match op.reason.as_deref() {
            Some(r) => self.0.scrubbers.of(&self.0.redactor, op).text(r),
            None => String::new(),
        };
        let payload = serde_json::from_str(&op.payload).ok();
        let reason = told_reason(&redact_text(&scrubbed), payload.as_ref());
        Some((
            team.to_string(),
            op.workflow.clone(),
            op.destination.clone(),
            op.state.as_str().to_string(),
            reason,
        ))
    }

    /// Adds what arrived to the groups as stored.
    async fn join_groups(&self, tx: &mut Tx, arrived: BTreeMap<GroupKey, Arrivals>) -> Result<()> {
        let names: Vec<String> = arrived.keys().map(group_name).collect();
        let refs: Vec<&str> = names.iter().map(String::as_str).collect();
        let stored: BTreeMap<String, GroupState> = tx
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
            keys.truncate(KEYS_SHOWN);
            g.keys = serde_json::to_string(&keys).unwrap_or_else(|_| "[]".into());
            g.pending += a.count;
            g.pending_since = Some(g.pending_since.map_or(a.first, |p| p.min(a.first)));
            g.oldest_at = match (g.oldest_at, a.oldest) {
                (Some(x), Some(y)) => Some(x.min(y)),
                (x, y) => x.or(y),
            };
            tx.save_group(&g).await?;
        }
        Ok(())
    }

    /// The groups whose wait is over: told now, their count back to none.
    async fn due_groups(&self, tx: &mut Tx, now: DateTime<Utc>) -> Result<Vec<Message>> {
        let notify = &self.0.config.notify;
        let window = Duration::from_std(notify.group_window).unwrap_or_default();
        let repeat = Duration::from_std(notify.repeat).unwrap_or_default();
        let mut out = Vec::new();
        for mut g in tx.pending_groups().await? {
            let gathered = g.pending_since.is_none_or(|p| p + window <= now);
            let rested = g.told_at.is_none_or(|t| t + repeat <= now);
            let Some(key) = parse_group(&g.key).filter(|_| gathered && rested) else {
                continue;
            };
            let told = Arrivals {
                count: g.pending,
                first: now,
                keys: serde_json::from_str(&g.keys).unwrap_or_default(),
                oldest: g.oldest_at,
            };
            out.push(
                self.message(tx, ("queue", "warning"), key, told, now)
                    .await?,
            );
            g.pending = 0;
            g.pending_since = None;
            g.keys = "[]".into();
            g.told_at = Some(now);
            tx.save_group(&g).await?;
        }
        Ok(out)
    }

    /// The message of a group (`kind` and `level`): what arrived or aged in it, its first key's
    /// step and safe next step, the command that lists it.
    async fn message(
        &self,
        tx: &mut Tx,
        (kind, level): (&str, &str),
        (team, workflow, destination, state, reason): GroupKey,
        a: Arrivals,
        now: DateTime<Utc>,
    ) -> Result<Message> {
        let sample = self.sample(tx, a.keys.first(), &reason, now).await?;
        Ok(Message {
            id: String::new(),
            kind: kind.into(),
            level: level.into(),
            team: Some(team),
            step: sample.as_ref().map(|(s, _)| s.clone()),
            open: Some(open_command(&format!(
                "wf:{workflow} dest:{destination} state:{state}"
            ))),
            workflow: Some(workflow),
            destination: Some(destination),
            state: Some(state),
            reason: Some(reason).filter(|r| !r.is_empty()),
            count: a.count,
            oldest_seconds: a.oldest.map_or(0, |o| (now - o).num_seconds().max(0)),
            keys: a.keys,
            next_step: sample.map(|(_, n)| n),
            created_at: now,
        })
    }

    /// The step and the safe next step of a group's first key, its reason as the group shows it.
    async fn sample(
        &self,
        tx: &mut Tx,
        key: Option<&String>,
        reason: &str,
        now: DateTime<Utc>,
    ) -> Result<Option<(String, String)>> {
        let Some(key) = key else {
            return Ok(None);
        };
        let Some((_, mut op)) = tx.load_ops(&[key.as_str()], false).await?.remove(key) else {
            return Ok(None);
        };
        op.reason = Some(reason.to_string()).filter(|r| !r.is_empty());
        let policy = self.0.config.destination(&op.destination);
        let step = safe_next_step(
            &op,
            &policy,
            "",
            Paused::default(),
            self.0.config.attempt_timeout,
            now,
        );
        Ok(Some((op.step.clone(), step.text)))
    }

    /// The exceptions that passed `warn_after` or `critical_after` since the last fold, by group:
    /// one message per group and level.
    async fn aging(&self, tx: &mut Tx, now: DateTime<Utc>) -> Result<Vec<Message>> {
        let c = &self.0.config;
        let limits = [("warning", c.warn_after), ("critical", c.critical_after)];
        let (warn_mark, critical_mark) = tx.aging_marks().await?;
        let mut marks = [warn_mark, critical_mark];
        let mut out = Vec::new();
        for (i, (level, after)) in limits.into_iter().enumerate() {
            let until = now - Duration::from_std(after).unwrap_or_default();
            // a ledger told for the first time: only what passes the level from now on
            let from = marks[i].unwrap_or(until);
            let aged = if from < until {
                tx.exceptions_entered(from, until, FOLD_BATCH).await?
            } else {
                Vec::new()
            };
            marks[i] = Some(match aged.last() {
                Some((_, op)) if aged.len() as i64 == FOLD_BATCH => {
                    op.exception_since.unwrap_or(until)
                }
                _ => until.max(from),
            });
            let mut groups: BTreeMap<GroupKey, Arrivals> = BTreeMap::new();
            for (_, op) in &aged {
                let Some(key) = self.group_of(op) else {
                    continue;
                };
                let at = op.exception_since.unwrap_or(now);
                let a = groups.entry(key).or_insert(Arrivals {
                    count: 0,
                    first: at,
                    keys: Vec::new(),
                    oldest: Some(at),
                });
                a.count += 1;
                if a.keys.len() < KEYS_SHOWN {
                    a.keys.push(op.key.clone());
                }
            }
            for (key, a) in groups {
                out.push(self.message(tx, ("aging", level), key, a, now).await?);
            }
        }
        if let [Some(w), Some(c)] = marks {
            tx.set_aging_marks(w, c).await?;
        }
        Ok(out)
    }

    /// A pause or a resume, to the teams told of the workflow (a destination's: every team with
    /// a channel).
    fn pause_messages(&self, n: &store::TakenNotice, now: DateTime<Utc>) -> Vec<Message> {
        let c = &self.0.config;
        let teams: Vec<String> = match (&n.workflow, &n.destination) {
            (Some(w), _) => c.told_of(w).map(str::to_string).into_iter().collect(),
            (None, Some(_)) => c
                .teams
                .iter()
                .filter(|(_, t)| !t.notify.is_empty())
                .map(|(name, _)| name.clone())
                .collect(),
            _ => Vec::new(),
        };
        let paused = n.kind == "paused";
        let reason = n
            .reason
            .as_deref()
            .map(|r| told_reason(&redact_text(r), None));
        let next_step = if paused {
            match (&n.workflow, &n.destination) {
                (Some(w), _) => format!("Find why, then: settle resume {w}"),
                (_, Some(d)) => format!("Find why, then: settle resume --destination {d}"),
                _ => String::new(),
            }
        } else {
            "Nothing to do: sends go on".to_string()
        };
        teams
            .into_iter()
            .map(|team| Message {
                id: String::new(),
                kind: n.kind.clone(),
                level: if paused { "warning" } else { "info" }.into(),
                team: Some(team),
                workflow: n.workflow.clone(),
                step: None,
                destination: n.destination.clone(),
                state: None,
                reason: reason.clone().filter(|r| !r.is_empty()),
                count: 0,
                oldest_seconds: (now - n.at).num_seconds().max(0),
                keys: Vec::new(),
                next_step: Some(next_step.clone()).filter(|s| !s.is_empty()),
                open: None,
                created_at: now,
            })
            .collect()
    }

    /// Records `m` once per channel of its team that hears of it: how many.
    async fn record(&self, tx: &mut Tx, m: &Message, now: DateTime<Utc>) -> Result<usize> {
        let Some(team) = m.team.as_deref().and_then(|t| self.0.config.teams.get(t)) else {
            return Ok(0);
        };
        let mut channels: Vec<&String> = team.notify.iter().collect();
        if m.level == "critical" {
            channels.extend(team.escalate.iter().filter(|c| !team.notify.contains(c)));
        }
        for channel in &channels {
            let msg = Message {
                id: new_id(),
                ..m.clone()
            };
            tx.add_message(&MessageRow {
                id: msg.id.clone(),
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

fn group_name(k: &GroupKey) -> String {
    serde_json::to_string(&[&k.0, &k.1, &k.2, &k.3, &k.4]).unwrap_or_default()
}

fn parse_group(name: &str) -> Option<GroupKey> {
    let [a, b, c, d, e]: [String; 5] = serde_json::from_str(name).ok()?;
    Some((a, b, c, d, e))
}
