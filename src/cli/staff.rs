//! The staff's actions on the command line: claim, release, reconcile, retry, close, note, pause
//! and resume, on one operation or many (manual: Many at once).

use super::args::Cmd;
use super::bulk::{Confirm, act_on, reconcile_from};
use super::common::{invalid, parse_rate, required};
use super::output;
use crate::domain::Resolution;
use crate::error::Result;
use crate::ledger::{Ledger, StaffAction};

/// Claim, release, reconcile and retry.
pub(super) async fn staff(
    ledger: &Ledger,
    command: &Cmd,
    operator: &Option<String>,
) -> Result<i32> {
    let viewer = operator.as_deref().unwrap_or("");
    match command {
        Cmd::Claim {
            many,
            force,
            reason,
        } => {
            let force_reason = if *force { reason.clone() } else { None };
            let what = format!("claimed by {}", output::esc(viewer));
            let action = StaffAction::Claim { force_reason };
            return act_on(
                ledger,
                many,
                action,
                required(operator)?,
                &what,
                "claim",
                None,
            )
            .await;
        }
        Cmd::Release { many } => {
            let action = StaffAction::Release;
            return act_on(
                ledger,
                many,
                action,
                required(operator)?,
                "released",
                "release",
                None,
            )
            .await;
        }
        Cmd::Reconcile {
            key,
            found,
            absent: _,
            note,
            from,
            dry_run,
            yes,
            json,
        } => {
            if let Some(file) = from {
                let how = Confirm {
                    dry_run: *dry_run,
                    yes: *yes,
                    json: *json,
                };
                return reconcile_from(ledger, file, how, required(operator)?).await;
            }
            let key = key.as_deref().unwrap_or_default();
            let action = match found {
                Some(reference) => StaffAction::ReconcileFound {
                    reference: reference.clone(),
                    note: note.clone(),
                },
                None => StaffAction::ReconcileAbsent { note: note.clone() },
            };
            let a = ledger.staff(key, required(operator)?, action).await?;
            output::applied(&a, "reconciled");
        }
        Cmd::Retry { many, note, rate } => {
            let action = StaffAction::Retry { note: note.clone() };
            let what = "will be retried with the same key";
            let pace = rate.as_deref().map(parse_rate).transpose()?;
            return act_on(
                ledger,
                many,
                action,
                required(operator)?,
                what,
                "retry",
                pace,
            )
            .await;
        }
        _ => unreachable!("only its own commands come here"),
    }
    Ok(0)
}

/// Close, note, pause and resume.
pub(super) async fn close_or_mark(
    ledger: &Ledger,
    command: &Cmd,
    operator: &Option<String>,
) -> Result<i32> {
    match command {
        Cmd::Close {
            many,
            resolution,
            reference,
            superseded_by,
            note,
        } => {
            let action = StaffAction::Close {
                resolution: Resolution::parse(resolution).map_err(invalid)?,
                reference: reference.clone(),
                superseded_by: superseded_by.clone(),
                note: note.clone(),
            };
            return act_on(
                ledger,
                many,
                action,
                required(operator)?,
                "closed",
                "close",
                None,
            )
            .await;
        }
        Cmd::Note { key, text } => {
            let a = ledger
                .staff(
                    key,
                    required(operator)?,
                    StaffAction::Note { text: text.clone() },
                )
                .await?;
            output::applied(&a, "note added");
        }
        Cmd::Pause { what, reason } => {
            let (what, name) = what.get();
            let n = output::esc(name);
            let noun = what.noun();
            if ledger
                .pause_one(what, name, reason, required(operator)?)
                .await?
            {
                say!("{noun} {n} paused: no attempt of it starts until it is resumed");
            } else {
                say!("{noun} {n} was already paused; nothing changed");
            }
        }
        Cmd::Resume { what } => {
            let (what, name) = what.get();
            let n = output::esc(name);
            let noun = what.noun();
            if ledger.resume_one(what, name, required(operator)?).await? {
                say!("{noun} {n} resumed");
            } else {
                say!("{noun} {n} was not paused; nothing changed");
            }
        }
        _ => unreachable!("only its own commands come here"),
    }
    Ok(0)
}
