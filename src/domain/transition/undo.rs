//! Taking a person's action back (manual: Taking an action back): the one rule that restores
//! what its event kept of the item before it ([`Restore`]): exactly, while nothing has touched
//! the item since (its version is the one the action left); otherwise not at all.

use serde_json::json;

use super::op::{Op, Restore};
use super::terms::{AttemptEffect, Ctx, Refusal, Transition, refuse};
use crate::domain::state::{Resolution, State};

/// Takes back on `op` the action `action` (whose event was of kind `undid`) by restoring what
/// `restore` kept: one new event (`undone`), nothing deleted.
pub fn undo(
    op: &Op,
    action: &str,
    undid: &str,
    restore: &Restore,
    ctx: &Ctx,
) -> Result<Transition, Refusal> {
    let key = &op.key;
    if !ctx.role.acts() {
        return refuse(format!(
            "{} is a viewer: a viewer reads, and takes no action",
            ctx.actor
        ));
    }
    let mut next = op.clone();
    next.updated_at = ctx.now;
    next.version = op.version + 1;
    let detail = json!({ "action": action, "undid": undid });
    if restore.note {
        // a note changed nothing but its holder's lease: withdrawn, the item left as it is
        return Ok(transition(next, detail));
    }
    if op.version != restore.v {
        return refuse(format!("{key} changed since"));
    }
    if restore.ended_attempt {
        return refuse(format!(
            "{key}: the action ended an attempt that was under way, and no undo reopens an attempt"
        ));
    }
    next.state = restore.state;
    next.reason = restore.reason.clone();
    next.claim = restore.claim.clone();
    next.reference = restore.reference.clone();
    next.resolution = restore.resolution;
    next.superseded_by = restore.superseded_by.clone();
    next.next_attempt_at = restore.next_attempt_at;
    next.exception_since = restore.exception_since;
    next.budget_start = restore.budget_start;
    next.ambiguous = restore.ambiguous;
    next.group = crate::domain::group::group_of(&next);
    Ok(transition(next, detail))
}

/// The correction an action made (`op`, as made at version `v`), withdrawn with the action:
/// closed `withdrawn`, only while nothing has touched it (so it was never sent).
pub fn withdraw(op: &Op, action: &str, v: i64, ctx: &Ctx) -> Result<Transition, Refusal> {
    if !ctx.role.acts() {
        return refuse(format!(
            "{} is a viewer: a viewer reads, and takes no action",
            ctx.actor
        ));
    }
    if op.version != v || op.attempts > 0 || op.state != State::Pending {
        return refuse(format!(
            "its correction {} is {} since: a correction once sent or worked is not taken back",
            op.key, op.state
        ));
    }
    let mut next = op.clone();
    next.updated_at = ctx.now;
    next.version = op.version + 1;
    next.state = State::Closed;
    next.resolution = Some(Resolution::Withdrawn);
    next.next_attempt_at = None;
    next.exception_since = None;
    next.claim = None;
    next.group = crate::domain::group::group_of(&next);
    Ok(transition(
        next,
        json!({ "action": action, "undid": "recorded" }),
    ))
}

fn transition(op: Op, mut detail: serde_json::Value) -> Transition {
    detail["to"] = json!(op.state.as_str());
    Transition {
        op,
        attempt: AttemptEffect::None,
        kind: "undone",
        detail,
        warning: None,
        made: None,
    }
}
