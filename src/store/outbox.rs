//! The messages to the teams' channels (manual: Owners and notifications) as the database keeps
//! them: each recorded in the transaction that folded it, then its tries and answers; and the
//! sender's lease given up.

use chrono::{DateTime, Utc};

use super::sql::{Cell, Cells, Stmt, get, get_time, ms};
use super::{Store, Tx};
use crate::error::Result;

/// One message to one channel, with its delivery.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct MessageRow {
    pub id: String,
    /// Its place in the ledger's order: a channel receives its messages in this order.
    pub seq: i64,
    pub created_at: DateTime<Utc>,
    pub channel: String,
    pub kind: String,
    pub level: String,
    pub team: Option<String>,
    /// The document (JSON) every format is made from.
    pub body: String,
    /// `pending`, `sent` or `given_up`.
    pub status: String,
    pub tries: i64,
    pub next_try_at: DateTime<Utc>,
    pub sent_at: Option<DateTime<Utc>>,
    /// Each try's time and answer, as a JSON list.
    pub answers: String,
}

const MESSAGE_COLUMNS: &str = "id, created_at, channel, kind, level, team, body, status, tries, \
                               next_try_at, sent_at, answers, seq";

fn message(r: &dyn Cells) -> Result<MessageRow> {
    Ok(MessageRow {
        id: get(r, "id")?,
        created_at: super::sql::time(get(r, "created_at")?),
        channel: get(r, "channel")?,
        kind: get(r, "kind")?,
        level: get(r, "level")?,
        team: get(r, "team")?,
        body: get(r, "body")?,
        status: get(r, "status")?,
        tries: get(r, "tries")?,
        next_try_at: super::sql::time(get(r, "next_try_at")?),
        sent_at: get_time(r, "sent_at")?,
        answers: get(r, "answers")?,
        seq: get::<Option<i64>>(r, "seq")?.unwrap_or(0),
    })
}

/// A channel whose messages wait: how many, and whether its last try failed.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct ChannelBacklog {
    pub channel: String,
    pub waiting: i64,
    pub failing: bool,
}

/// The messages' statements outside a write transaction: `store.outbox()`.
pub(crate) struct Outbox<'a>(&'a Store);

impl Store {
    pub(crate) fn outbox(&self) -> Outbox<'_> {
        Outbox(self)
    }
}

impl Tx {
    /// Records a message to send.
    pub(crate) async fn add_message(&mut self, m: &MessageRow) -> Result<()> {
        Stmt::new(
            format!(
                "INSERT INTO notifications ({MESSAGE_COLUMNS}) \
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)"
            ),
            vec![
                Cell::Text(Some(&m.id)),
                Cell::Int(Some(ms(m.created_at))),
                Cell::Text(Some(&m.channel)),
                Cell::Text(Some(&m.kind)),
                Cell::Text(Some(&m.level)),
                Cell::Text(m.team.as_deref()),
                Cell::Text(Some(&m.body)),
                Cell::Text(Some(&m.status)),
                Cell::Int(Some(m.tries)),
                Cell::Int(Some(ms(m.next_try_at))),
                Cell::Int(m.sent_at.map(ms)),
                Cell::Text(Some(&m.answers)),
                Cell::Int(Some(m.seq)),
            ],
        )
        .execute(self.db())
        .await?;
        Ok(())
    }
}

impl Outbox<'_> {
    /// Gives the sender's lease up (a clean stop), if `holder` has it.
    pub(crate) async fn drop_lease(&self, holder: &str) -> Result<()> {
        Stmt::new(
            "UPDATE notify_state SET holder = NULL, until_at = NULL \
             WHERE name = 'sender' AND holder = $1",
            vec![Cell::Text(Some(holder))],
        )
        .execute(self.0.conn().await?.db())
        .await?;
        Ok(())
    }

    /// The first `limit` messages waiting, in the ledger's order: each channel's due ones are
    /// those before its first that is not due yet (a channel receives its messages in order).
    pub(crate) async fn waiting_messages(&self, limit: i64) -> Result<Vec<MessageRow>> {
        Stmt::new(
            format!(
                "SELECT {MESSAGE_COLUMNS} FROM notifications \
                 WHERE status = 'pending' ORDER BY seq, created_at, id LIMIT $1"
            ),
            vec![Cell::Int(Some(limit))],
        )
        .rows(self.0.conn().await?.db(), message)
        .await
    }

    /// Keeps a try of message `id`: its new status, tries, next try and answers.
    pub(crate) async fn keep_try(&self, m: &MessageRow) -> Result<()> {
        Stmt::new(
            "UPDATE notifications SET status = $2, tries = $3, next_try_at = $4, sent_at = $5, \
             answers = $6 WHERE id = $1",
            vec![
                Cell::Text(Some(&m.id)),
                Cell::Text(Some(&m.status)),
                Cell::Int(Some(m.tries)),
                Cell::Int(Some(ms(m.next_try_at))),
                Cell::Int(m.sent_at.map(ms)),
                Cell::Text(Some(&m.answers)),
            ],
        )
        .execute(self.0.conn().await?.db())
        .await?;
        Ok(())
    }

    /// The latest messages, the newest first.
    pub(crate) async fn recent_messages(&self, limit: i64) -> Result<Vec<MessageRow>> {
        Stmt::new(
            format!(
                "SELECT {MESSAGE_COLUMNS} FROM notifications \
                 ORDER BY created_at DESC, id DESC LIMIT $1"
            ),
            vec![Cell::Int(Some(limit))],
        )
        .rows(self.0.conn().await?.db(), message)
        .await
    }

    /// The channels with messages waiting, and whether each one's last try failed.
    pub(crate) async fn channel_backlog(&self) -> Result<Vec<ChannelBacklog>> {
        Stmt::new(
            "SELECT channel, COUNT(*) AS waiting, MAX(tries) AS tried FROM notifications \
             WHERE status = 'pending' GROUP BY channel ORDER BY channel",
            vec![],
        )
        .rows(self.0.conn().await?.db(), |r| {
            Ok(ChannelBacklog {
                channel: get(r, "channel")?,
                waiting: get(r, "waiting")?,
                failing: get::<i64>(r, "tried")? > 0,
            })
        })
        .await
    }
}
