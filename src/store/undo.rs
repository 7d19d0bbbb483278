//! A person's actions found again by their id, to take them back (manual: Taking an action back):
//! the events an action wrote, one's own newest action, and what touched an item since.

use chrono::{DateTime, Utc};

use super::Db;
use super::sql::{Cell, Stmt, get, time};
use crate::error::Result;

/// One event of a person's action (or of an undo of it), with its operation's key; a pause's or
/// a resume's names none.
#[derive(Clone, Debug)]
pub(crate) struct ActionEvent {
    pub event_id: i64,
    pub op_id: Option<i64>,
    /// The operation's key (empty for a pause or a resume).
    pub key: String,
    pub actor: String,
    pub kind: String,
    pub at: DateTime<Utc>,
    /// What taking it back restores (JSON); none on an undo's own events.
    pub restore: Option<String>,
}

/// Who or what changed an item after one of its events: the first change since.
#[derive(Clone, Debug)]
pub(crate) struct ChangedBy {
    pub actor: String,
    pub kind: String,
    pub at: DateTime<Utc>,
}

/// Every event carrying this action's id, in order: the action's own and any undo's.
pub(crate) async fn action_events(db: Db<'_>, action: &str) -> Result<Vec<ActionEvent>> {
    let stmt = Stmt::new(
        "SELECT e.id, e.operation_id, COALESCE(o.key, '') AS key, e.actor, e.kind, e.at, \
         e.restore FROM events e LEFT JOIN operations o ON o.id = e.operation_id \
         WHERE e.action = $1 ORDER BY e.id"
            .to_string(),
        vec![Cell::Text(Some(action))],
    );
    stmt.rows(db, |r| {
        Ok(ActionEvent {
            event_id: get(r, "id")?,
            op_id: get(r, "operation_id")?,
            key: get(r, "key")?,
            actor: get(r, "actor")?,
            kind: get(r, "kind")?,
            at: time(get(r, "at")?),
            restore: get(r, "restore")?,
        })
    })
    .await
}

/// The id of `actor`'s newest action (an undo is not one).
pub(crate) async fn last_action(db: Db<'_>, actor: &str) -> Result<Option<String>> {
    let stmt = Stmt::new(
        "SELECT action FROM events WHERE actor = $1 AND action IS NOT NULL \
             AND kind <> 'undone' ORDER BY id DESC LIMIT 1"
            .to_string(),
        vec![Cell::Text(Some(actor))],
    );
    stmt.row(db, |r| get(r, "action")).await
}

/// The events on an operation after `event_id`, in order (the first hundred): who or what
/// changed it since.
pub(crate) async fn changes_after(db: Db<'_>, op_id: i64, event_id: i64) -> Result<Vec<ChangedBy>> {
    let stmt = Stmt::new(
        "SELECT actor, kind, at FROM events WHERE operation_id = $1 AND id > $2 \
             ORDER BY id LIMIT 100"
            .to_string(),
        vec![Cell::Int(Some(op_id)), Cell::Int(Some(event_id))],
    );
    stmt.rows(db, |r| {
        Ok(ChangedBy {
            actor: get(r, "actor")?,
            kind: get(r, "kind")?,
            at: time(get(r, "at")?),
        })
    })
    .await
}
