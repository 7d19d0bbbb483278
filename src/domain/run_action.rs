//! What a person does to a run as a whole (manual: Runs): claim it, release it, note it, close it.
//! The run's steps are left as they are; each action is one audit event of the run's own.

use std::time::Duration;

use chrono::{DateTime, Utc};
use serde_json::{Value, json};

use super::role::Role;
use super::state::Resolution;
use super::time::after;
use super::transition::Claim;

/// A run's own row: who holds it and whether a person closed it (its state is derived from its
/// operations, see `run.rs`).
#[derive(Clone, Debug, PartialEq)]
pub struct RunRow {
    pub run: String,
    pub workflow: String,
    pub started_at: DateTime<Utc>,
    pub claim: Option<Claim>,
    pub closed_at: Option<DateTime<Utc>>,
    pub resolution: Option<Resolution>,
    pub version: i64,
}

impl RunRow {
    /// The live claim of someone other than `actor`.
    pub fn claimed_by_other(&self, actor: &str, now: DateTime<Utc>) -> Option<&Claim> {
        self.claim
            .as_ref()
            .filter(|c| c.by != actor && c.is_live(now))
    }

    /// Who holds it now.
    pub fn holder(&self, now: DateTime<Utc>) -> Option<&str> {
        self.claim
            .as_ref()
            .filter(|c| c.is_live(now))
            .map(|c| c.by.as_str())
    }
}

/// A staff action on a run.
#[derive(Clone, Debug, PartialEq)]
pub enum RunAction {
    Claim,
    Release,
    Note {
        text: String,
    },
    Close {
        resolution: Resolution,
        note: String,
    },
}

/// Who acts, when, and what their role and claims allow.
pub struct RunCtx<'a> {
    pub actor: &'a str,
    pub role: Role,
    pub now: DateTime<Utc>,
    pub lease: Duration,
}

/// What an action makes of a run: its new row and its event (kind and detail).
#[derive(Clone, Debug, PartialEq)]
pub struct RunMade {
    pub row: RunRow,
    pub kind: &'static str,
    pub detail: Value,
}

/// The rules of a run's staff actions: the new row and its event, or why not.
pub fn apply_run_action(row: &RunRow, action: &RunAction, ctx: &RunCtx) -> Result<RunMade, String> {
    let r = &row.run;
    if !ctx.role.acts() {
        return Err(format!(
            "{} is a viewer: a viewer reads, and takes no action",
            ctx.actor
        ));
    }
    let mut next = row.clone();
    next.version += 1;
    let made = |row, kind, detail| Ok(RunMade { row, kind, detail });
    if let RunAction::Note { text } = action {
        return made(next, "run_noted", json!({ "run": r, "text": text }));
    }
    if row.closed_at.is_some() {
        return Err(format!(
            "run {r} is closed: nothing more can be done to it (a note is still taken)"
        ));
    }
    let other = row.claimed_by_other(ctx.actor, ctx.now);
    match action {
        RunAction::Claim => {
            if let Some(c) = other {
                return Err(format!("run {r} is claimed by {}", c.by));
            }
            let since = match &row.claim {
                Some(c) if c.by == ctx.actor && c.is_live(ctx.now) => c.since,
                _ => ctx.now,
            };
            next.claim = Some(Claim {
                by: ctx.actor.into(),
                since,
                expires: after(ctx.now, ctx.lease),
            });
            made(next, "run_claimed", json!({ "run": r }))
        }
        RunAction::Release => match (&row.claim, other) {
            (_, Some(c)) if !ctx.role.leads() => {
                Err(format!("run {r} is claimed by {}, not by you", c.by))
            }
            (Some(c), _) if c.is_live(ctx.now) => {
                let from = c.by.clone();
                next.claim = None;
                made(next, "run_released", json!({ "run": r, "from": from }))
            }
            _ => Err(format!("run {r} is not claimed")),
        },
        RunAction::Close { resolution, note } => {
            if let Some(c) = other {
                return Err(format!(
                    "run {r} is claimed by {}: they close it, or it is released first",
                    c.by
                ));
            }
            if !matches!(
                resolution,
                Resolution::Abandoned | Resolution::DoneElsewhere
            ) {
                return Err(format!(
                    "a run closes as abandoned or done_elsewhere, not {}",
                    resolution.as_str()
                ));
            }
            if note.trim().is_empty() {
                return Err(format!("closing run {r} needs a note"));
            }
            next.claim = None;
            next.closed_at = Some(ctx.now);
            next.resolution = Some(*resolution);
            made(
                next,
                "run_closed",
                json!({ "run": r, "resolution": resolution.as_str(), "note": note }),
            )
        }
        RunAction::Note { .. } => unreachable!("a note is taken above"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row() -> RunRow {
        RunRow {
            run: "onb-1".into(),
            workflow: "onboarding".into(),
            started_at: DateTime::UNIX_EPOCH,
            claim: None,
            closed_at: None,
            resolution: None,
            version: 3,
        }
    }

    fn ctx(actor: &str, role: Role) -> RunCtx<'_> {
        RunCtx {
            actor,
            role,
            now: DateTime::UNIX_EPOCH + chrono::TimeDelta::hours(1),
            lease: Duration::from_secs(600),
        }
    }

    #[test]
    fn a_claimed_run_is_refused_to_another_and_released_by_a_lead() {
        let ann = ctx("ann", Role::Operator);
        let claimed = apply_run_action(&row(), &RunAction::Claim, &ann).unwrap();
        assert_eq!(claimed.kind, "run_claimed");
        assert_eq!(claimed.row.version, 4);
        assert_eq!(claimed.row.holder(ann.now), Some("ann"));
        let bob = ctx("bob", Role::Operator);
        for action in [
            RunAction::Claim,
            RunAction::Release,
            RunAction::Close {
                resolution: Resolution::Abandoned,
                note: "x".into(),
            },
        ] {
            let err = apply_run_action(&claimed.row, &action, &bob).unwrap_err();
            assert!(err.contains("claimed by ann"), "{err}");
        }
        // a note is anyone's; a lead may release another's claim
        assert!(
            apply_run_action(&claimed.row, &RunAction::Note { text: "n".into() }, &bob).is_ok()
        );
        let lead = ctx("lee", Role::Lead);
        let released = apply_run_action(&claimed.row, &RunAction::Release, &lead).unwrap();
        assert_eq!(released.row.claim, None);
        assert_eq!(released.detail["from"], "ann");
    }

    #[test]
    fn a_closed_run_takes_only_notes_and_a_viewer_nothing() {
        let ann = ctx("ann", Role::Operator);
        let close = |note: &str, resolution| RunAction::Close {
            resolution,
            note: note.into(),
        };
        assert!(
            apply_run_action(&row(), &close(" ", Resolution::Abandoned), &ann)
                .unwrap_err()
                .contains("needs a note")
        );
        assert!(
            apply_run_action(&row(), &close("n", Resolution::Superseded), &ann)
                .unwrap_err()
                .contains("abandoned or done_elsewhere")
        );
        let closed =
            apply_run_action(&row(), &close("n", Resolution::DoneElsewhere), &ann).unwrap();
        assert_eq!(closed.row.closed_at, Some(ann.now));
        assert_eq!(closed.row.resolution, Some(Resolution::DoneElsewhere));
        assert!(
            apply_run_action(&closed.row, &RunAction::Claim, &ann)
                .unwrap_err()
                .contains("is closed")
        );
        assert!(apply_run_action(&closed.row, &RunAction::Note { text: "n".into() }, &ann).is_ok());
        let viewer = ctx("vic", Role::Viewer);
        assert!(
            apply_run_action(&row(), &RunAction::Note { text: "n".into() }, &viewer)
                .unwrap_err()
                .contains("viewer")
        );
    }
}
