//! The messages on their way (manual: Owners and notifications): the `Notices` handle, the
//! sender's lease (one sender at a time across processes), the messages due, each try kept with
//! its answer, and what a person reads of them.

use chrono::{DateTime, Duration, Utc};
use serde::Serialize;

use super::message::Message;
use crate::error::Result;
use crate::ledger::Ledger;
use crate::store::{self, MessageRow, Tried};

/// This handle, for telling the owners: folding the inbox, and the messages' delivery.
pub struct Notices<'a>(pub(in crate::ledger) &'a Ledger);

/// A message as `settle notifications` lists it.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Delivery {
    pub id: String,
    pub channel: String,
    pub created_at: DateTime<Utc>,
    /// `pending`, `sent`, `given_up`, or `settled` (not sent: everything it named was settled
    /// before it could be).
    pub status: String,
    pub tries: i64,
    pub next_try_at: Option<DateTime<Utc>>,
    pub sent_at: Option<DateTime<Utc>>,
    /// The last try's answer.
    pub answer: Option<String>,
    pub message: Message,
}

/// A try's outcome: sent (the answer), or not (why).
pub enum Sent {
    Ok(String),
    Failed(String),
}

/// A message taken to be sent: which channel, and its document.
pub struct Outgoing {
    pub channel: String,
    pub message: Message,
    row: MessageRow,
}

/// How long a lease lasts without being renewed.
const LEASE: std::time::Duration = std::time::Duration::from_secs(30);

impl Notices<'_> {
    /// Takes or keeps the sender's lease for `holder`: false where another process sends.
    pub async fn lead(&self, holder: &str) -> Result<bool> {
        let now = self.0.now();
        let until = now + Duration::from_std(LEASE).unwrap_or_default();
        store::in_tx!(self.0.store, |tx| tx
            .told()
            .take_lease(holder, now, until)
            .await
            .map(Tried::Done))
    }

    /// Gives the lease up (a clean stop).
    pub async fn step_down(&self, holder: &str) -> Result<()> {
        self.0.store.outbox().drop_lease(holder).await
    }

    /// The messages due now, in the ledger's order: each channel's, up to its first that is
    /// not due yet (a channel receives its messages in order, a failed one first).
    pub async fn due(&self, limit: i64) -> Result<Vec<Outgoing>> {
        let now = self.0.now();
        let rows = self.0.store.outbox().waiting_messages(limit).await?;
        let mut held: Vec<String> = Vec::new();
        let mut out = Vec::new();
        for row in rows {
            if held.contains(&row.channel) {
                continue;
            }
            if row.next_try_at > now {
                held.push(row.channel.clone());
                continue;
            }
            if let Ok(message) = serde_json::from_str(&row.body) {
                out.push(Outgoing {
                    channel: row.channel.clone(),
                    message,
                    row,
                });
            }
        }
        Ok(out)
    }

    /// Whether what `out` tells of is still open: checked just before it is sent (a group all
    /// of whose items were settled while it waited is not told).
    pub async fn still_told(&self, out: &Outgoing) -> Result<bool> {
        let m = &out.message;
        let (Some(id), Some(w), Some(d), Some(s)) =
            (&m.group, &m.workflow, &m.destination, &m.state)
        else {
            return Ok(true);
        };
        let (open, _) = store::in_tx!(self.0.store, |tx| tx
            .told()
            .group_now((w, d, s), id)
            .await
            .map(Tried::Done))?;
        Ok(open > 0)
    }

    /// Keeps `out` unsent: everything it named was settled before it could be sent.
    pub async fn settled(&self, out: Outgoing) -> Result<()> {
        let mut row = out.row;
        row.status = "settled".into();
        let mut answers: Vec<serde_json::Value> =
            serde_json::from_str(&row.answers).unwrap_or_default();
        answers.push(serde_json::json!({ "at": self.0.now(), "ok": true,
            "answer": "not sent: everything it named was settled before it could be" }));
        row.answers = serde_json::to_string(&answers).unwrap_or_else(|_| "[]".into());
        self.0.store.outbox().keep_try(&row).await
    }

    /// Keeps a try and its answer: sent, or tried again after a backoff with full jitter until
    /// `notify_horizon`, then given up.
    pub async fn keep(&self, out: Outgoing, sent: Sent) -> Result<()> {
        let now = self.0.now();
        let mut row = out.row;
        let (ok, answer) = match sent {
            Sent::Ok(a) => (true, a),
            Sent::Failed(a) => (false, a),
        };
        row.tries += 1;
        let mut answers: Vec<serde_json::Value> =
            serde_json::from_str(&row.answers).unwrap_or_default();
        answers.push(serde_json::json!({ "at": now, "ok": ok, "answer": answer }));
        // the last fifty tries are enough to read what a channel said
        let skip = answers.len().saturating_sub(50);
        row.answers = serde_json::to_string(&answers[skip..]).unwrap_or_else(|_| "[]".into());
        let horizon = Duration::from_std(self.0.config.notify.notify_horizon).unwrap_or_default();
        if ok {
            row.status = "sent".into();
            row.sent_at = Some(now);
        } else {
            let wait = backoff(row.tries);
            if now + wait > row.created_at + horizon {
                row.status = "given_up".into();
            }
            row.next_try_at = now + wait;
        }
        crate::counters::inc(
            crate::counters::NOTIFICATIONS,
            &[&row.channel, if ok { "sent" } else { "failed" }],
        );
        self.0.store.outbox().keep_try(&row).await
    }

    /// The latest messages, the newest first.
    pub async fn recent(&self, limit: i64) -> Result<Vec<Delivery>> {
        let rows = self.0.store.outbox().recent_messages(limit).await?;
        Ok(rows
            .into_iter()
            .filter_map(|row| {
                let message = serde_json::from_str(&row.body).ok()?;
                let answers: Vec<serde_json::Value> =
                    serde_json::from_str(&row.answers).unwrap_or_default();
                let answer = answers
                    .last()
                    .and_then(|a| a["answer"].as_str())
                    .map(str::to_string);
                Some(Delivery {
                    id: row.id,
                    channel: row.channel,
                    created_at: row.created_at,
                    next_try_at: (row.status == "pending").then_some(row.next_try_at),
                    status: row.status,
                    tries: row.tries,
                    sent_at: row.sent_at,
                    answer,
                    message,
                })
            })
            .collect())
    }

    /// The channels whose last try failed and whose messages wait.
    pub async fn failing(&self) -> Result<Vec<String>> {
        Ok(self
            .0
            .store
            .outbox()
            .channel_backlog()
            .await?
            .into_iter()
            .filter(|b| b.failing)
            .map(|b| b.channel)
            .collect())
    }
}

/// The wait before try `n + 1`: exponential from 5 s, capped at 10 minutes, full jitter.
fn backoff(tries: i64) -> Duration {
    let cap = 5_000i64
        .saturating_mul(1i64 << tries.clamp(0, 7))
        .min(600_000);
    Duration::milliseconds(rand::random_range(cap / 10..=cap))
}
