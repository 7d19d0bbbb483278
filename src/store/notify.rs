//! Notifications (manual: Owners and notifications) as the database keeps them: the inbox that a
//! write fills in its own transaction, the groups it is folded into, the messages with their tries,
//! and the one row that says which process sends and how far aging has been told.

use chrono::{DateTime, Utc};

use super::Tx;
use super::columns;
use super::sql::{Cell, Cells, Marks, Stmt, get, get_time, marks, ms};
use crate::domain::Op;
use crate::error::Result;

/// Something someone may be told of, as a write leaves it in the inbox.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Notice {
    pub at: DateTime<Utc>,
    /// `exception`, `paused` or `resumed`.
    pub kind: &'static str,
    pub operation_id: Option<i64>,
    pub workflow: Option<String>,
    pub destination: Option<String>,
    pub reason: Option<String>,
    /// Who paused or resumed (a notice of an exception names nobody).
    pub actor: Option<String>,
}

/// A notice read back from the inbox (its kind as stored).
pub(crate) struct TakenNotice {
    pub at: DateTime<Utc>,
    pub kind: String,
    pub operation_id: Option<i64>,
    pub workflow: Option<String>,
    pub destination: Option<String>,
    pub reason: Option<String>,
    pub actor: Option<String>,
}

/// A group of exceptions and what is waiting to be told of it.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct GroupState {
    pub key: String,
    pub pending: i64,
    pub pending_since: Option<DateTime<Utc>>,
    /// Up to five keys of what is pending, as JSON.
    pub keys: String,
    pub oldest_at: Option<DateTime<Utc>>,
    pub told_at: Option<DateTime<Utc>>,
}

fn group(r: &dyn Cells) -> Result<GroupState> {
    Ok(GroupState {
        key: get(r, "group_key")?,
        pending: get(r, "pending")?,
        pending_since: get_time(r, "pending_since")?,
        keys: get(r, "keys")?,
        oldest_at: get_time(r, "oldest_at")?,
        told_at: get_time(r, "told_at")?,
    })
}

impl Tx {
    /// Leaves `notices` in the inbox, in one statement.
    pub(crate) async fn add_notices(&mut self, notices: &[Notice]) -> Result<()> {
        if notices.is_empty() {
            return Ok(());
        }
        let times: Vec<i64> = notices.iter().map(|n| ms(n.at)).collect();
        let mut cells = Vec::with_capacity(notices.len() * 7);
        let mut rows = Vec::with_capacity(notices.len());
        for (i, n) in notices.iter().enumerate() {
            rows.push(marks(Marks::Numbered, i * 7 + 1, 7));
            cells.extend([
                Cell::Int(Some(times[i])),
                Cell::Text(Some(n.kind)),
                Cell::Int(n.operation_id),
                Cell::Text(n.workflow.as_deref()),
                Cell::Text(n.destination.as_deref()),
                Cell::Text(n.reason.as_deref()),
                Cell::Text(n.actor.as_deref()),
            ]);
        }
        Stmt::new(
            format!(
                "INSERT INTO notify_inbox (at, kind, operation_id, workflow, destination, reason, actor) \
                 VALUES {}",
                rows.join(", ")
            ),
            cells,
        )
        .execute(self.db())
        .await?;
        Ok(())
    }

    /// Takes up to `limit` notices out of the inbox, the oldest first.
    pub(crate) async fn take_notices(&mut self, limit: i64) -> Result<Vec<TakenNotice>> {
        let mut taken = Stmt::new(
            "DELETE FROM notify_inbox WHERE id IN \
             (SELECT id FROM notify_inbox ORDER BY id LIMIT $1) \
             RETURNING id, at, kind, operation_id, workflow, destination, reason, actor",
            vec![Cell::Int(Some(limit))],
        )
        .rows(self.db(), |r| {
            Ok((
                get::<i64>(r, "id")?,
                TakenNotice {
                    at: super::sql::time(get(r, "at")?),
                    kind: get(r, "kind")?,
                    operation_id: get(r, "operation_id")?,
                    workflow: get(r, "workflow")?,
                    destination: get(r, "destination")?,
                    reason: get(r, "reason")?,
                    actor: get(r, "actor")?,
                },
            ))
        })
        .await?;
        taken.sort_by_key(|(id, _)| *id);
        Ok(taken.into_iter().map(|(_, n)| n).collect())
    }

    /// The operations with these ids, as they are now.
    pub(crate) async fn ops_by_id(&mut self, ids: &[i64]) -> Result<Vec<(i64, Op)>> {
        let mut out = Vec::with_capacity(ids.len());
        for chunk in ids.chunks(500) {
            let sql = format!(
                "SELECT {} FROM operations WHERE id IN {}",
                columns::select(),
                marks(Marks::Numbered, 1, chunk.len())
            );
            let cells = chunk.iter().map(|id| Cell::Int(Some(*id))).collect();
            out.extend(
                Stmt::new(sql, cells)
                    .rows(self.db(), columns::decode)
                    .await?,
            );
        }
        Ok(out)
    }

    /// The open exceptions that became exceptions in `(after, until]`, the oldest first.
    pub(crate) async fn exceptions_entered(
        &mut self,
        after: DateTime<Utc>,
        until: DateTime<Utc>,
        limit: i64,
    ) -> Result<Vec<(i64, Op)>> {
        let sql = format!(
            "SELECT {} FROM operations WHERE exception_since > $1 AND exception_since <= $2 \
             AND state IN ({}) ORDER BY exception_since LIMIT $3",
            columns::select(),
            super::counts::exception_states()
        );
        Stmt::new(
            sql,
            vec![
                Cell::Int(Some(ms(after))),
                Cell::Int(Some(ms(until))),
                Cell::Int(Some(limit)),
            ],
        )
        .rows(self.db(), columns::decode)
        .await
    }
}

/// The statements of the notices' fold, the sender's lease and the aging inside a write
/// transaction: `tx.told()`.
pub(crate) struct Told<'a>(&'a mut Tx);

impl Tx {
    pub(crate) fn told(&mut self) -> Told<'_> {
        Told(self)
    }
}

impl Told<'_> {
    /// How many exceptions the group `id` (of this workflow, destination and state) holds now,
    /// and when its oldest became one: what a message is checked against before it is told.
    pub(crate) async fn group_now(
        &mut self,
        (workflow, destination, state): (&str, &str, &str),
        id: &str,
    ) -> Result<(i64, Option<DateTime<Utc>>)> {
        Stmt::new(
            "SELECT COUNT(*) AS n, MIN(exception_since) AS oldest FROM operations \
             WHERE workflow = $1 AND destination = $2 AND state = $3 AND group_id = $4 \
             AND exception_since IS NOT NULL",
            vec![
                Cell::Text(Some(workflow)),
                Cell::Text(Some(destination)),
                Cell::Text(Some(state)),
                Cell::Text(Some(id)),
            ],
        )
        .one(self.0.db(), |r| Ok((get(r, "n")?, get_time(r, "oldest")?)))
        .await
    }

    /// The workflows with work not yet settled at `destination`: whose teams hear of its pause.
    pub(crate) async fn workflows_at(&mut self, destination: &str) -> Result<Vec<String>> {
        Stmt::new(
            "SELECT DISTINCT workflow FROM operations WHERE destination = $1 \
             AND state NOT IN ('succeeded', 'closed')",
            vec![Cell::Text(Some(destination))],
        )
        .rows(self.0.db(), |r| get(r, "workflow"))
        .await
    }

    /// The next place in the ledger's order of messages.
    pub(crate) async fn next_seq(&mut self) -> Result<i64> {
        Stmt::new(
            "UPDATE notify_state SET next_seq = next_seq + 1 WHERE name = 'sender' RETURNING next_seq",
            vec![],
        )
        .one(self.0.db(), |r| get(r, "next_seq"))
        .await
    }

    /// The messages done with (sent, settled, given up) made before `before` (ms), and the groups
    /// told before it with nothing waiting: removed, or counted on a `dry_run`. How many messages.
    pub(crate) async fn prune_messages(&mut self, before: i64, dry_run: bool) -> Result<u64> {
        if dry_run {
            return Stmt::new(
                "SELECT COUNT(*) AS n FROM notifications WHERE status <> 'pending' AND created_at < $1",
                vec![Cell::Int(Some(before))],
            )
            .one(self.0.db(), |r| Ok(get::<i64>(r, "n")? as u64))
            .await;
        }
        let n = Stmt::new(
            "DELETE FROM notifications WHERE status <> 'pending' AND created_at < $1",
            vec![Cell::Int(Some(before))],
        )
        .execute(self.0.db())
        .await?;
        Stmt::new(
            "DELETE FROM notify_groups WHERE pending = 0 AND told_at < $1",
            vec![Cell::Int(Some(before))],
        )
        .execute(self.0.db())
        .await?;
        Ok(n)
    }

    /// These groups as they are now.
    pub(crate) async fn groups_of(&mut self, keys: &[&str]) -> Result<Vec<GroupState>> {
        let mut out = Vec::new();
        for chunk in keys.chunks(500) {
            let sql = format!(
                "SELECT * FROM notify_groups WHERE group_key IN {}",
                marks(Marks::Numbered, 1, chunk.len())
            );
            let cells = chunk.iter().map(|k| Cell::Text(Some(*k))).collect();
            out.extend(Stmt::new(sql, cells).rows(self.0.db(), group).await?);
        }
        Ok(out)
    }

    /// Every group with something waiting to be told.
    pub(crate) async fn pending_groups(&mut self) -> Result<Vec<GroupState>> {
        Stmt::new("SELECT * FROM notify_groups WHERE pending > 0", vec![])
            .rows(self.0.db(), group)
            .await
    }

    /// Writes a group as it now is.
    pub(crate) async fn save_group(&mut self, g: &GroupState) -> Result<()> {
        let t = |v: Option<DateTime<Utc>>| Cell::Int(v.map(ms));
        Stmt::new(
            "INSERT INTO notify_groups (group_key, pending, pending_since, keys, oldest_at, told_at) \
             VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (group_key) DO UPDATE SET \
             pending = $2, pending_since = $3, keys = $4, oldest_at = $5, told_at = $6",
            vec![
                Cell::Text(Some(&g.key)),
                Cell::Int(Some(g.pending)),
                t(g.pending_since),
                Cell::Text(Some(&g.keys)),
                t(g.oldest_at),
                t(g.told_at),
            ],
        )
        .execute(self.0.db())
        .await?;
        Ok(())
    }

    /// Takes (or keeps) the sender's lease for `holder` until `until`: false where another
    /// process holds it.
    pub(crate) async fn take_lease(
        &mut self,
        holder: &str,
        now: DateTime<Utc>,
        until: DateTime<Utc>,
    ) -> Result<bool> {
        let n = Stmt::new(
            "UPDATE notify_state SET holder = $1, until_at = $2 WHERE name = 'sender' \
             AND (holder IS NULL OR holder = $1 OR until_at IS NULL OR until_at < $3)",
            vec![
                Cell::Text(Some(holder)),
                Cell::Int(Some(ms(until))),
                Cell::Int(Some(ms(now))),
            ],
        )
        .execute(self.0.db())
        .await?;
        Ok(n == 1)
    }

    /// How far aging has been told: the warning's and the critical level's marks.
    pub(crate) async fn aging_marks(
        &mut self,
    ) -> Result<(Option<DateTime<Utc>>, Option<DateTime<Utc>>)> {
        Stmt::new(
            "SELECT warn_mark, critical_mark FROM notify_state WHERE name = 'sender'",
            vec![],
        )
        .one(self.0.db(), |r| {
            Ok((get_time(r, "warn_mark")?, get_time(r, "critical_mark")?))
        })
        .await
    }

    pub(crate) async fn set_aging_marks(
        &mut self,
        warn: DateTime<Utc>,
        critical: DateTime<Utc>,
    ) -> Result<()> {
        Stmt::new(
            "UPDATE notify_state SET warn_mark = $1, critical_mark = $2 WHERE name = 'sender'",
            vec![Cell::Int(Some(ms(warn))), Cell::Int(Some(ms(critical)))],
        )
        .execute(self.0.db())
        .await?;
        Ok(())
    }
}
