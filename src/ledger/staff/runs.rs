//! A person's actions on a run as a whole (manual: Runs): claim, release, note, close. Each is one
//! transaction: the run's row held, the rules asked (`domain::run_action`), the row written
//! with a compare-and-set on its version, and one audit event of the run's own.

use super::Staff;
use crate::domain::redact::redact_text;
use crate::domain::run_action::RunRow;
use crate::domain::run_action::{RunAction, RunCtx, apply_run_action};
use crate::domain::time::after;
use crate::domain::validate_run;
use crate::error::{Error, Result};
use crate::ledger::RunView;
use crate::ledger::checks::check_text;
use crate::store::{self, NewEvent, RunKept, RunWrite, StoredRun, Tried, Tx};
use chrono::{DateTime, Utc};

impl Staff<'_> {
    /// `action` on the run `run` by `actor`; the run as it then is.
    pub async fn run_action(self, run: &str, actor: &str, action: RunAction) -> Result<RunView> {
        validate_run(run).map_err(Error::Invalid)?;
        self.0.check_acting(actor)?;
        let action = match action {
            RunAction::Note { text } => {
                check_text("the note", Some(&text))?;
                if text.trim().is_empty() {
                    return Err(Error::Invalid("a note needs its text".into()));
                }
                RunAction::Note {
                    text: redact_text(&text),
                }
            }
            RunAction::Close { resolution, note } => {
                check_text("the note", Some(&note))?;
                RunAction::Close {
                    resolution,
                    note: redact_text(&note),
                }
            }
            other => other,
        };
        store::in_tx!(self.0.store, |tx| self
            .run_action_in(tx, run, actor, &action)
            .await)?;
        self.0.read().run(run, actor).await
    }

    async fn run_action_in(
        self,
        tx: &mut Tx,
        run: &str,
        actor: &str,
        action: &RunAction,
    ) -> Result<Tried<()>> {
        let locked = tx.lock_runs(&[run]).await?;
        let Some(stored) = locked.get(run) else {
            return Err(Error::NotFound(format!("no run {run}")));
        };
        let now = self.0.now();
        let ctx = RunCtx {
            actor,
            role: self.0.role(),
            now,
            lease: self.0.config.lease,
        };
        let made = apply_run_action(&stored.row, action, &ctx).map_err(Error::Refused)?;
        if !tx.write_run(&made.row, stored.row.version).await? {
            return Ok(Tried::Raced);
        }
        // a stalled run closed by a person stalled all the same: the review counts it
        if let Some(stalled_at) = self.stalled_until_closed(stored, &made.row) {
            let kept = RunKept {
                stalled_at: Some(stalled_at),
                ..stored.kept.clone()
            };
            tx.keep_runs(&[RunWrite {
                run,
                workflow: &stored.row.workflow,
                started_at: stored.row.started_at,
                kept: &kept,
            }])
            .await?;
        }
        let mut detail = made.detail;
        // a session's events hold the key it authenticated with (manual: Running settle for a team)
        self.0.sign(&mut detail);
        let detail = detail.to_string();
        tx.insert_events(&[NewEvent {
            operation_id: None,
            workflow: Some(&stored.row.workflow),
            at: now,
            actor,
            kind: made.kind,
            from_state: None,
            to_state: None,
            detail: &detail,
            action: None,
            restore: None,
        }])
        .await?;
        Ok(Tried::Done(()))
    }

    /// When a run that `closed` closes had stalled: its wait between declared steps outlasted
    /// the gap before the close.
    fn stalled_until_closed(self, before: &StoredRun, closed: &RunRow) -> Option<DateTime<Utc>> {
        if before.row.closed_at.is_some() {
            return None;
        }
        let at = closed.closed_at?;
        let since = before.kept.waiting_since?;
        let stalled = after(since, self.0.run_rules(&before.row.workflow).1);
        (stalled < at).then_some(stalled)
    }
}
