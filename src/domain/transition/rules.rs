//! What a staff action must pass on an operation now (manual: Staff actions, Running settle for a team), and nothing else: the one
//! place these rules are written. `apply` asks [`staff_check`] before it changes anything, and
//! the console's offers ask it for each action, so what is offered is what the ledger accepts.

use super::op::Op;
use super::terms::fmt_time;
use super::terms::{Ctx, Refusal, StaffAction};
use crate::domain::lookup::LookupAnswer;
use crate::domain::state::{Resolution, State};

/// Why a staff action is refused, put into words only when someone reads it (the console asks
/// the rules about every listed row, and most answers there are "no").
pub struct Why<'a> {
    /// What kind of "no" it is, the same for every item (a bulk preview groups by it).
    pub class: &'static str,
    text: Box<dyn FnOnce() -> String + 'a>,
}

impl Why<'_> {
    pub(super) fn refusal(self) -> Refusal {
        Refusal((self.text)())
    }

    /// The one-line refusal, in words.
    pub fn text(self) -> String {
        (self.text)()
    }
}

/// What a refusal is made into: words for a person ([`Why`]), or nothing where only the yes or
/// no is wanted (`()`: [`offered`] asks about every listed row, and most answers are "no").
pub trait Reason<'a>: Sized {
    fn new(class: &'static str, why: impl FnOnce() -> String + 'a) -> Self;
}

impl<'a> Reason<'a> for Why<'a> {
    fn new(class: &'static str, why: impl FnOnce() -> String + 'a) -> Self {
        Why {
            class,
            text: Box::new(why),
        }
    }
}

impl<'a> Reason<'a> for () {
    fn new(_: &'static str, _: impl FnOnce() -> String + 'a) -> Self {}
}

fn deny<'a, T, R: Reason<'a>>(
    class: &'static str,
    why: impl FnOnce() -> String + 'a,
) -> Result<T, R> {
    Err(R::new(class, why))
}

/// Every rule a staff action must pass on this operation now (manual: Staff actions), and nothing else.
/// `Ok(true)`: the action claims the item for the actor (nobody holds a live claim).
pub fn staff_check<'a, R: Reason<'a>>(
    op: &'a Op,
    action: &'a StaffAction,
    ctx: &'a Ctx,
) -> Result<bool, R> {
    let key = &op.key;
    // the roles (manual: Running settle for a team) come first: a viewer takes no action, taking over a claim is a lead's
    if !ctx.role.acts() {
        return deny("not for a viewer", move || {
            format!(
                "{} is a viewer: a viewer reads, and takes no action",
                ctx.actor
            )
        });
    }
    if !ctx.role.leads()
        && let StaffAction::Claim {
            force_reason: Some(_),
        } = action
        && let Some(c) = op.claimed_by_other(ctx.actor, ctx.now)
    {
        return deny("needs a lead", move || {
            format!(
                "{key} is claimed by {}: taking a claim over is for a lead",
                c.by
            )
        });
    }
    if op.state.is_terminal()
        && !matches!(
            action,
            StaffAction::Note { .. } | StaffAction::Correct { .. }
        )
    {
        return deny("already terminal", move || {
            format!("{key} is {}: nothing more can be done to it", op.state)
        });
    }
    match action {
        StaffAction::Claim { force_reason } => claim(op, force_reason, ctx),
        StaffAction::Release => release(op, ctx),
        StaffAction::ReconcileFound { reference, .. } => found(op, reference, ctx),
        StaffAction::ReconcileAbsent { .. } => absent(op, ctx),
        StaffAction::Retry { .. } => retry(op, ctx),
        StaffAction::Close {
            resolution,
            reference,
            superseded_by,
            note,
        } => close(op, *resolution, reference, superseded_by, note, ctx),
        StaffAction::Note { text } => {
            if text.trim().is_empty() {
                return deny("needs a note", || "a note needs some text".into());
            }
            Ok(false)
        }
        StaffAction::LookUp { answer } => look_up(op, answer, ctx),
        StaffAction::Correct { edits, note, .. } => {
            let claims = correctable(op, ctx)?;
            if edits.is_empty() {
                return deny("needs a change", || {
                    "a correction changes at least one field (--set or --unset)".into()
                });
            }
            if note.trim().is_empty() {
                return deny("needs a note", || "a correction needs a note".into());
            }
            Ok(claims)
        }
    }
}

/// Staff actions other than claim, release and note act for the holder of the claim. When
/// nobody holds a live claim the action claims the item for the actor in the same transition,
/// so that acting never needs a separate claim step and two people can still never both act;
/// a live claim of another refuses it.
fn hold<'a, R: Reason<'a>>(op: &'a Op, ctx: &'a Ctx) -> Result<bool, R> {
    match &op.claim {
        Some(c) if c.is_live(ctx.now) && c.by == ctx.actor => Ok(false),
        Some(c) if c.is_live(ctx.now) => deny("claimed by another", move || {
            format!(
                "{} is claimed by {} until {}: take it over first",
                op.key,
                c.by,
                fmt_time(c.expires)
            )
        }),
        _ => Ok(true),
    }
}

fn stuck(op: &Op, ctx: &Ctx) -> bool {
    op.is_stuck(ctx.now, ctx.attempt_timeout)
}

fn claim<'a, R: Reason<'a>>(
    op: &'a Op,
    force_reason: &'a Option<String>,
    ctx: &'a Ctx,
) -> Result<bool, R> {
    let key = &op.key;
    match (op.claimed_by_other(ctx.actor, ctx.now), force_reason) {
        (Some(c), None) => deny("claimed by another", move || {
            format!(
                "{key} is claimed by {} until {}; take it over only with --force --reason",
                c.by,
                fmt_time(c.expires)
            )
        }),
        (Some(_), Some(reason)) if reason.trim().is_empty() => deny("needs a reason", || {
            "taking over a live claim needs a reason".into()
        }),
        _ => Ok(false),
    }
}

fn release<'a, R: Reason<'a>>(op: &'a Op, ctx: &'a Ctx) -> Result<bool, R> {
    let key = &op.key;
    match &op.claim {
        Some(c) if c.by == ctx.actor => Ok(false),
        Some(c) if c.is_live(ctx.now) => deny("claimed by another", move || {
            format!("{key} is claimed by {}, not by you", c.by)
        }),
        _ => deny("not claimed by you", move || {
            format!("{key} is not claimed by you")
        }),
    }
}

fn found<'a, R: Reason<'a>>(op: &'a Op, reference: &'a str, ctx: &'a Ctx) -> Result<bool, R> {
    let claims = hold(op, ctx)?;
    if !(matches!(op.state, State::Unknown | State::Failed | State::Conflict) || stuck(op, ctx)) {
        return deny("not in a state it applies to", move || {
            format!(
                "{} is {}: reconcile --found applies to unknown, failed, conflict or a stuck in_flight",
                op.key, op.state
            )
        });
    }
    if reference.trim().is_empty() {
        return deny("needs a reference", || {
            "reconcile --found needs the destination's reference".into()
        });
    }
    Ok(claims)
}

fn absent<'a, R: Reason<'a>>(op: &'a Op, ctx: &'a Ctx) -> Result<bool, R> {
    let claims = hold(op, ctx)?;
    if !(op.state == State::Unknown || stuck(op, ctx)) {
        return deny("not in a state it applies to", move || {
            format!(
                "{} is {}: reconcile --absent applies to unknown or a stuck in_flight",
                op.key, op.state
            )
        });
    }
    Ok(claims)
}

fn retry<'a, R: Reason<'a>>(op: &'a Op, ctx: &'a Ctx) -> Result<bool, R> {
    let claims = hold(op, ctx)?;
    let key = &op.key;
    match op.state {
        State::Failed | State::Rejected => Ok(claims),
        State::Unknown if ctx.policy.dedupes_at(op.first_sent_at, ctx.now) => Ok(claims),
        State::Unknown => deny(
            "unknown at a destination that does not deduplicate",
            move || {
                format!(
                    "{key}'s outcome is unknown and {} {}: a retry could do it twice; check {} and reconcile first",
                    op.destination,
                    if ctx.policy.dedupes {
                        "is past its key retention"
                    } else {
                        "does not deduplicate"
                    },
                    op.destination
                )
            },
        ),
        s => deny("not in a state it applies to", move || {
            format!("{key} is {s}: retry applies to failed, rejected or a deduplicated unknown")
        }),
    }
}

fn close<'a, R: Reason<'a>>(
    op: &'a Op,
    resolution: Resolution,
    reference: &'a Option<String>,
    superseded_by: &'a Option<String>,
    note: &'a str,
    ctx: &'a Ctx,
) -> Result<bool, R> {
    let claims = hold(op, ctx)?;
    let key = &op.key;
    if op.state == State::InFlight && !stuck(op, ctx) {
        return deny("attempt running", move || {
            format!("{key} has an attempt running: wait for its outcome before closing")
        });
    }
    if note.trim().is_empty() {
        return deny("needs a note", || {
            "close needs a note saying what was done".into()
        });
    }
    match resolution {
        Resolution::DoneElsewhere if reference.as_deref().is_none_or(|r| r.trim().is_empty()) => {
            deny("needs a reference", || {
                "close --resolution done_elsewhere needs --reference REF".into()
            })
        }
        Resolution::Superseded if superseded_by.is_none() => deny("needs the new key", || {
            "close --resolution superseded needs --superseded-by KEY".into()
        }),
        Resolution::Superseded if superseded_by.as_deref() == Some(key.as_str()) => {
            deny("supersedes itself", || {
                "an operation cannot supersede itself".into()
            })
        }
        _ => Ok(claims),
    }
}

fn look_up<'a, R: Reason<'a>>(
    op: &'a Op,
    answer: &'a LookupAnswer,
    ctx: &'a Ctx,
) -> Result<bool, R> {
    let claims = hold(op, ctx)?;
    let key = &op.key;
    if !ctx.policy.can_look_up {
        return deny("no lookup configured", move || {
            format!(
                "{} has no lookup settle can run (no lookup_url in the config): check it there, then reconcile",
                op.destination
            )
        });
    }
    let applies = match answer {
        LookupAnswer::Found { .. } => {
            matches!(op.state, State::Unknown | State::Failed) || stuck(op, ctx)
        }
        _ => op.state == State::Unknown || stuck(op, ctx),
    };
    if !applies {
        return deny("not in a state it applies to", move || {
            format!(
                "{key} is {}: a lookup settles an unknown outcome, a stuck in_flight or (when found) a failed one",
                op.state
            )
        });
    }
    if let LookupAnswer::NoAnswer { why } = answer {
        return deny("no answer", move || {
            format!(
                "{key}: the lookup at {} gave no answer ({why}): nothing to reconcile, it stays {}",
                op.destination, op.state
            )
        });
    }
    Ok(claims)
}

/// What a correction must pass (manual: Correcting a request): only what is confirmed not done
/// (`rejected`, `failed`). `Ok(true)` where it claims the item for the actor on its way.
pub(super) fn correctable<'a, R: Reason<'a>>(op: &'a Op, ctx: &'a Ctx) -> Result<bool, R> {
    let key = &op.key;
    let state = op.state.as_str();
    match op.state {
        State::Rejected | State::Failed => {}
        State::Succeeded | State::Closed => {
            return deny("already terminal", move || match &op.superseded_by {
                Some(by) => format!("{key} is {state}, superseded by {by}: correct {by} instead"),
                None => format!("{key} is {state}: there is nothing to correct"),
            });
        }
        State::Unknown | State::InFlight => {
            return deny("may have been done", move || {
                format!(
                    "{key} is {state}: it may have been done: reconcile it first (found, or absent to correct it)"
                )
            });
        }
        State::Pending | State::RetryWait => {
            return deny("may still be sent", move || {
                format!(
                    "{key} is {state}: it may still be sent as it is: only a rejected or failed request is corrected"
                )
            });
        }
        State::Conflict => {
            return deny("in conflict", move || {
                format!(
                    "{key} is in conflict: settle which contents stand first (the conflict's next step)"
                )
            });
        }
    }
    hold(op, ctx)
}
