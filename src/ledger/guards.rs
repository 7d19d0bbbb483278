//! The stopping threshold by count (manual: The stopping threshold) as a round and a caller's start apply it: never more
//! attempts of a workflow start than could become the exceptions still short of its limit.

use chrono::{DateTime, Utc};

use super::Ledger;
use crate::domain::State;
use crate::error::{Error, Result};
use crate::store::Tx;

/// A workflow with a stopping threshold by count (manual: The stopping threshold), as one round sees it: its exceptions
/// and the attempts of it still running, kept up to date with the round's own changes.
pub(super) struct Guard {
    pub(super) limit: u64,
    pub(super) row: Option<crate::store::WorkflowRow>,
    pub(super) exceptions: i64,
    pub(super) running: i64,
    /// An operation of it became an exception in this round.
    pub(super) new_exception: bool,
    /// Paused in this round, with this reason (its audit event is written with the round's).
    pub(super) paused_now: Option<String>,
    pub(super) started: i64,
}

impl Guard {
    /// A workflow's guard as the database holds it now, before this round changes anything.
    pub(super) fn new(
        limit: u64,
        row: Option<crate::store::WorkflowRow>,
        exceptions: i64,
        running: i64,
    ) -> Guard {
        Guard {
            limit,
            row,
            exceptions,
            running,
            new_exception: false,
            paused_now: None,
            started: 0,
        }
    }

    pub(super) fn changed(
        &mut self,
        before: &crate::domain::Op,
        after: &crate::domain::Op,
        now: DateTime<Utc>,
    ) {
        // by state, not by the time it was stamped (a change is stamped by a later reading of
        // the clock than the round's): an exception state, or an attempt past its timeout
        let exception = |op: &crate::domain::Op| {
            op.state.is_exception() || (op.state == State::InFlight && op.is_exception(now))
        };
        let (was, is) = (exception(before), exception(after));
        self.exceptions += i64::from(is) - i64::from(was);
        let running =
            |op: &crate::domain::Op, exception: bool| op.state == State::InFlight && !exception;
        self.running += i64::from(running(after, is)) - i64::from(running(before, was));
        self.new_exception |= is && !was;
    }

    /// How many more attempts of it may start: never more than could become the exceptions that
    /// are still short of the limit, so that with a destination that rejects everything exactly
    /// `limit` requests reach it, at any concurrency. A workflow resumed while over its limit
    /// sends one at a time: its next exception pauses it again with nothing else in flight.
    pub(super) fn room(&self) -> i64 {
        let limit = self.limit as i64;
        let allowance = if self.exceptions < limit {
            limit - self.exceptions
        } else {
            1
        };
        allowance - self.running - self.started
    }
}

impl Ledger {
    /// A caller's start under its workflow's stopping threshold by count (manual: The stopping threshold), as a round
    /// applies it: refused when the attempts running could already bring the workflow to its
    /// limit, so that scripts starting one at a time never send more than the limit allows.
    pub(super) async fn threshold_room(
        &self,
        tx: &mut Tx,
        key: &str,
        workflow: &str,
        now: DateTime<Utc>,
    ) -> Result<()> {
        let Some(limit) = self
            .config
            .workflows
            .get(workflow)
            .and_then(|w| w.pause_when.as_ref())
            .and_then(|p| p.unresolved)
        else {
            return Ok(());
        };
        let row = tx.hold_workflow(workflow).await?;
        let (exceptions, running) = tx.threshold_counts(workflow, now).await?;
        if Guard::new(limit, row, exceptions, running).room() > 0 {
            return Ok(());
        }
        Err(Error::Refused(format!(
            "{key}: workflow {workflow} is at its stopping threshold ({exceptions} unresolved, \
             {running} attempt(s) running, limit {limit}): start again when one of them settles"
        )))
    }
}
