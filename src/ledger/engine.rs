//! The one way settle writes operations: a [`Batch`] holds the rows
//! the rules need for its keys, asks the rules (`change::decide`) what each intent does to a row
//! as the batch has left it, and writes what stands in one statement per kind of row: the new
//! operations, then every changed row with its compare-and-set on `version`, the attempts and the
//! events, then the runs' rows.
//!
//! The single call is a batch of one. A bulk chunk, a dispatcher's round, an ingest batch and a
//! group of the HTTP API's writes are batches of many; `start` and the staff actions are batches of
//! one with their own checks around the judging. None of them judges or writes on its own.

use std::borrow::Cow;
use std::collections::HashMap;

use super::Ledger;
use super::change::{Ask, Change, Decided, decide};
use super::run_rows::keep_runs;
use super::terms::KnownAttempts;
use crate::domain::{AttemptEffect, Op, State};
use crate::error::{Error, Result};
use crate::store::{NewEvent, Notice, Tx};

/// Operations held for judging and the changes judged so far, written together by
/// [`Batch::write`]. Rows are owned where the batch loaded them, borrowed where its caller made
/// them (an ingest batch's new operations are written once, in their final state).
pub(super) struct Batch<'a> {
    rows: HashMap<String, (i64, Cow<'a, Op>)>,
    /// The stored attempts of the held rows, where the caller loaded them (else each repeated
    /// attempt is asked of the database).
    known: Option<KnownAttempts>,
    /// The keys of the operations this batch makes, in order: the first is numbered -1 until the
    /// database numbers it, the next -2, ...
    made: Vec<String>,
    /// Boxed as the rules hand them over.
    #[allow(clippy::vec_box)]
    changes: Vec<Box<Change>>,
    /// It records intents: the runs they belong to may be new.
    records: bool,
}

impl<'a> Batch<'a> {
    /// A batch on rows its caller loaded (none: an empty batch).
    pub(super) fn of(rows: HashMap<String, (i64, Op)>) -> Batch<'a> {
        Batch {
            rows: rows
                .into_iter()
                .map(|(k, (id, op))| (k, (id, Cow::Owned(op))))
                .collect(),
            known: None,
            made: Vec::new(),
            changes: Vec::new(),
            records: false,
        }
    }

    /// A batch holding `keys`' rows for this transaction (one statement; a key not stored is
    /// simply not held).
    pub(super) async fn hold(tx: &mut Tx, keys: &[&str]) -> Result<Batch<'a>> {
        let rows = match keys {
            [key] => tx
                .hold_op(key)
                .await?
                .map(|row| (key.to_string(), row))
                .into_iter()
                .collect(),
            _ => tx.load_ops(keys, true).await?,
        };
        Ok(Batch::of(rows))
    }

    /// This batch records intents (a record, an ingest batch, a group of the API's writes): the
    /// runs they belong to may be new.
    pub(super) fn recording(mut self) -> Batch<'a> {
        self.records = true;
        self
    }

    /// Repeated attempts are decided on `known`, the stored attempts of the held rows, without
    /// asking the database again.
    pub(super) fn knowing(mut self, known: KnownAttempts) -> Batch<'a> {
        self.known = Some(known);
        self
    }

    /// One more row, loaded elsewhere in this transaction (a round's due operations).
    pub(super) fn add(&mut self, id: i64, op: Op) {
        self.rows.insert(op.key.clone(), (id, Cow::Owned(op)));
    }

    /// A key's row as the batch has left it.
    pub(super) fn row(&self, key: &str) -> Option<(i64, &Op)> {
        self.rows.get(key).map(|(id, op)| (*id, op.as_ref()))
    }

    /// A new operation, written with the batch (numbered once the database numbers it).
    pub(super) fn make(&mut self, op: Cow<'a, Op>) {
        let id = -(self.made.len() as i64) - 1;
        self.made.push(op.key.clone());
        self.rows.insert(op.key.clone(), (id, op));
    }

    /// What `ask` does to `key`'s row as the batch has left it, by the rules; nothing stands
    /// until [`Batch::take`] takes it. `paused`: the workflow's pause flag where the caller knows
    /// it.
    pub(super) async fn judge(
        &self,
        ledger: &Ledger,
        tx: &mut Tx,
        key: &str,
        actor: &str,
        ask: &Ask<'_>,
        paused: Option<bool>,
    ) -> Result<Decided> {
        let Some((id, op)) = self.row(key) else {
            return Err(Error::NotFound(format!("no operation with key {key}")));
        };
        let decided = decide(ledger, tx, id, op, actor, ask, paused, self.known.as_ref()).await?;
        if let Some(new) = ask.makes()
            && self.row(new).is_some()
        {
            return Err(Error::Refused(format!(
                "{key}: {new} exists already: name the correction another key (--new-key)"
            )));
        }
        Ok(decided)
    }

    /// A judged change stands: the row is as it made it, for what the batch judges next.
    pub(super) fn take(&mut self, mut c: Box<Change>) {
        if let Some(made) = c.made.take() {
            self.make(Cow::Owned(*made));
        }
        if let (Some(known), AttemptEffect::Finish { n, outcome, .. }) =
            (self.known.as_mut(), &c.attempt)
        {
            known.insert((c.id, *n), Some(*outcome));
        }
        self.rows
            .insert(c.op.key.clone(), (c.id, Cow::Owned(c.op.clone())));
        self.changes.push(c);
    }

    /// Writes what the batch made and took: the new operations (one statement), every change and
    /// every event (one more), then the rows of the runs they touched. The new operations' ids in
    /// order, or `None` where another writer came first (a row changed since it was held, or a
    /// key made meanwhile): the transaction must then be rolled back.
    pub(super) async fn write(
        &mut self,
        ledger: &Ledger,
        tx: &mut Tx,
        actor: &str,
    ) -> Result<Option<Vec<i64>>> {
        let made: Vec<&Op> = self.made.iter().map(|k| self.rows[k].1.as_ref()).collect();
        let mut ids = Vec::new();
        let mut details = Vec::new();
        if !made.is_empty() {
            let numbered: HashMap<String, i64> = tx
                .insert_ops(&made)
                .await?
                .into_iter()
                .map(|(id, k)| (k, id))
                .collect();
            if numbered.len() != made.len() {
                return Ok(None);
            }
            ids = made.iter().map(|op| numbered[&op.key]).collect();
            details = made.iter().map(|op| ledger.recorded_detail(op)).collect();
        }
        for c in self.changes.iter_mut().filter(|c| c.id < 0) {
            c.id = ids[(-c.id - 1) as usize];
            c.made_here = true;
        }
        // the new operations' `recorded` events before the events of what was done to them
        let recorded: Vec<NewEvent> = made
            .iter()
            .zip(&ids)
            .zip(&details)
            .map(|((op, id), detail)| recorded_event(*id, op, actor, detail))
            .collect();
        if self.changes.is_empty() {
            // only new operations (a record, a file of new work): their events in a statement
            // of their own, lighter than the change set's
            tx.insert_events(&recorded).await?;
        } else if !write_after(tx, recorded, &self.changes).await? {
            return Ok(None);
        }
        let mut touched: Vec<(&Op, bool)> = made
            .iter()
            .map(|op| (*op, op.state.is_terminal()))
            .collect();
        touched.extend(
            self.changes
                .iter()
                .map(|c| (&c.op, c.from.is_terminal() || c.op.state.is_terminal())),
        );
        keep_runs(ledger, tx, &touched, self.records).await?;
        tx.add_notices(&self.notices(ledger, &made, &ids)).await?;
        tx.tally(
            self.changes
                .iter_mut()
                .flat_map(|c| std::mem::take(&mut c.tally)),
        );
        Ok(Some(ids))
    }
}

impl Batch<'_> {
    /// What the owners are told of (manual: Owners and notifications): the exceptions this batch
    /// opened by automation, and the new operations that arrive as exceptions.
    fn notices(&self, ledger: &Ledger, made: &[&Op], ids: &[i64]) -> Vec<Notice> {
        let exception = |id: i64, at| Notice {
            at,
            kind: "exception",
            operation_id: Some(id),
            workflow: None,
            destination: None,
            reason: None,
            actor: None,
        };
        let told =
            |op: &Op| op.state.is_exception() && ledger.config.told_of(&op.workflow).is_some();
        let mut notices: Vec<Notice> = made
            .iter()
            .zip(ids)
            .filter(|(op, _)| told(op))
            .map(|(op, id)| exception(*id, op.updated_at))
            .collect();
        notices.extend(
            self.changes
                .iter()
                .filter(|c| c.notice && !(c.made_here && told(&c.op)))
                .map(|c| exception(c.id, c.at)),
        );
        notices
    }
}

/// The changes' rows (a compare-and-set on each; several changes to one operation make one row,
/// expected at the version first held), their attempts and their events after `events`, in one
/// call. False when another writer changed one of the operations first.
async fn write_after<'a>(
    tx: &mut Tx,
    mut events: Vec<NewEvent<'a>>,
    changes: &'a [Box<Change>],
) -> Result<bool> {
    if events.is_empty() && changes.is_empty() {
        return Ok(true);
    }
    let mut rows: Vec<(i64, &Op, i64)> = Vec::with_capacity(changes.len());
    let mut at: HashMap<i64, usize> = HashMap::new();
    for c in changes.iter().filter(|c| !c.made_here) {
        match at.get(&c.id) {
            Some(i) => rows[*i].1 = &c.op,
            None => {
                at.insert(c.id, rows.len());
                rows.push((c.id, &c.op, c.expected_version));
            }
        }
    }
    let opened: Vec<_> = changes
        .iter()
        .filter_map(|c| match c.attempt {
            AttemptEffect::Start { n } => Some((c.id, n, c.actor.as_str(), c.at)),
            _ => None,
        })
        .collect();
    let mut closed = Vec::new();
    let mut whole = Vec::new();
    for (write, made_elsewhere) in changes.iter().filter_map(|c| c.attempt_write()) {
        if made_elsewhere {
            whole.push(write);
        } else {
            closed.push(write);
        }
    }
    events.extend(changes.iter().map(|c| c.event()));
    tx.write_changes(&rows, &opened, &closed, &whole, &events)
        .await
}

/// The audit event of a new operation (`id` as stored), at the time it was created.
fn recorded_event<'a>(id: i64, op: &Op, actor: &'a str, detail: &'a str) -> NewEvent<'a> {
    NewEvent::on_operation(
        id,
        op.created_at,
        actor,
        "recorded",
        None,
        State::Pending,
        detail,
    )
}
