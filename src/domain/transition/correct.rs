//! Correcting a request (manual: Correcting a request), the rule beside the other transitions:
//! only what is confirmed not done (`rejected`, `failed`) may be corrected, never what may have
//! been done or may still be sent; what a correction makes (a new operation under the correction's
//! key, same workflow, step, run, destination and action, the payload edited and fingerprinted
//! anew; the original closed `superseded` by it, its `corrected` event naming the changed paths,
//! never their values); and the correction's key, along the chain KEY, KEY:c2, KEY:c3.

use serde_json::json;

use super::op::Op;
use super::rules::{Why, correctable};
use super::terms::{Ctx, Made, Refusal, refuse};
use crate::domain::edit::{Edit, apply_edits};
use crate::domain::fingerprint::{canonical_json, fingerprint_of_canonical};
use crate::domain::key::MAX_KEY_LEN;
use crate::domain::state::{Resolution, State};

/// Whether `ctx.actor` may correct `op` now; the refusal says why not, and what to do instead.
pub fn may_correct(op: &Op, ctx: &Ctx) -> Result<(), Refusal> {
    correctable::<Why>(op, ctx)
        .map(|_| ())
        .map_err(Why::refusal)
}

/// The correction made: the original closed superseded by `corrected_as`, and the new operation
/// with the edited payload, due at once. Refused where an edit does not fit the payload or
/// changes nothing.
pub(super) fn correct(
    op: &Op,
    mut next: Op,
    corrected_as: &str,
    edits: &[Edit],
    note: &str,
    ctx: &Ctx,
) -> Result<Made, Refusal> {
    let payload: serde_json::Value =
        serde_json::from_str(&op.payload).map_err(|_| Refusal("the payload is not JSON".into()))?;
    let edited = apply_edits(&payload, edits).map_err(|e| Refusal(format!("{}: {e}", op.key)))?;
    let canonical = canonical_json(&edited);
    if canonical == op.payload {
        return refuse(format!(
            "{}: the corrected contents are the ones rejected: change a field",
            op.key
        ));
    }
    let fingerprint = fingerprint_of_canonical(&op.destination, &op.action, &canonical);
    let mut made = Op::new(
        corrected_as,
        &op.workflow,
        &op.step,
        &op.destination,
        &op.action,
        canonical,
        fingerprint,
        ctx.now,
    );
    made.run = op.run.clone();
    made.corrects = Some(op.key.clone());
    next.state = State::Closed;
    next.reason = None;
    next.resolution = Some(Resolution::Superseded);
    next.superseded_by = Some(corrected_as.to_string());
    let mut paths: Vec<&str> = edits.iter().map(Edit::path).collect();
    paths.dedup();
    let detail = json!({ "corrected_as": corrected_as, "paths": paths, "note": note });
    Ok(Made {
        made: Some(Box::new(made)),
        ..Made::new(next, "corrected", detail)
    })
}

/// The key of the correction of `key`: `KEY:c2`, and along a chain `KEY:c3`, `KEY:c4`, ...; refused
/// where it would pass the keys' length, so that the person names one.
pub fn correction_key(key: &str) -> Result<String, Refusal> {
    let next = match key.rsplit_once(":c") {
        Some((base, n)) if !base.is_empty() => match n.parse::<u32>() {
            Ok(n) if n >= 2 && n.to_string().len() == key.len() - base.len() - 2 => {
                format!("{base}:c{}", n + 1)
            }
            _ => format!("{key}:c2"),
        },
        _ => format!("{key}:c2"),
    };
    if next.len() > MAX_KEY_LEN {
        return refuse(format!(
            "{next} would pass {MAX_KEY_LEN} characters: name the correction's key with --new-key"
        ));
    }
    Ok(next)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::DestinationPolicy;
    use crate::domain::state::Resolution;
    use crate::domain::transition::test_support::{ctx, op_in, with_claim};

    #[test]
    fn only_what_is_confirmed_not_done_is_corrected() {
        let policy = DestinationPolicy::default();
        let c = ctx(&policy, "alice");
        for state in State::ALL {
            for stuck in [false, true] {
                let op = op_in(state, stuck);
                let allowed = matches!(state, State::Rejected | State::Failed);
                assert_eq!(may_correct(&op, &c).is_ok(), allowed, "{state:?}");
            }
        }
        let why = may_correct(&op_in(State::Unknown, false), &c)
            .unwrap_err()
            .0;
        assert!(why.contains("reconcile it first"), "{why}");
    }

    #[test]
    fn another_persons_claim_holds() {
        let policy = DestinationPolicy::default();
        let c = ctx(&policy, "alice");
        let held = with_claim(op_in(State::Rejected, false), "bob");
        assert!(
            may_correct(&held, &c)
                .unwrap_err()
                .0
                .contains("claimed by bob")
        );
        let mine = with_claim(op_in(State::Failed, false), "alice");
        assert!(may_correct(&mine, &c).is_ok());
    }

    #[test]
    fn a_correction_closes_the_original_and_makes_the_corrected_request() {
        use crate::domain::edit::Edit;
        use crate::domain::transition::{Command, StaffAction, apply};
        let policy = DestinationPolicy::default();
        let c = ctx(&policy, "alice");
        let mut op = op_in(State::Rejected, false);
        op.payload = r#"{"email":"nope","name":"Ada"}"#.into();
        op.run = Some("onb-42".into());
        let correct = |edits: Vec<Edit>| {
            Command::Staff(StaffAction::Correct {
                corrected_as: "onb-42-task:c2".into(),
                edits,
                note: "typo in the address".into(),
            })
        };
        let t = apply(
            &op,
            &correct(vec![Edit::set("email=\"a@b.example\"").unwrap()]),
            &c,
        )
        .unwrap()
        .unwrap();
        assert_eq!((t.op.state, t.kind), (State::Closed, "corrected"));
        assert_eq!(t.op.resolution, Some(Resolution::Superseded));
        assert_eq!(t.op.superseded_by.as_deref(), Some("onb-42-task:c2"));
        assert_eq!(t.op.exception_since, None);
        let made = t.made.unwrap();
        assert_eq!(made.key, "onb-42-task:c2");
        assert_eq!(made.corrects.as_deref(), Some("onb-42-task"));
        assert_eq!(
            (made.state, made.next_attempt_at),
            (State::Pending, Some(c.now))
        );
        assert_eq!(made.payload, r#"{"email":"a@b.example","name":"Ada"}"#);
        assert_ne!(made.fingerprint, op.fingerprint);
        assert_eq!(
            (
                &made.workflow,
                &made.step,
                &made.destination,
                &made.action,
                &made.run
            ),
            (&op.workflow, &op.step, &op.destination, &op.action, &op.run)
        );
        // the paths, never the values
        let detail = t.detail.to_string();
        assert!(
            detail.contains("\"paths\":[\"email\"]") && !detail.contains("a@b.example"),
            "{detail}"
        );
        // changing nothing, or a field that is not there, is refused
        let same = apply(&op, &correct(vec![Edit::set("name=Ada").unwrap()]), &c).unwrap_err();
        assert!(same.0.contains("change a field"), "{same}");
        let missing = apply(&op, &correct(vec![Edit::unset("phone").unwrap()]), &c).unwrap_err();
        assert!(missing.0.contains("no field phone"), "{missing}");
        assert!(
            apply(&op, &correct(vec![]), &c)
                .unwrap_err()
                .0
                .contains("at least one field")
        );
        // a closed request is not corrected again: its chain's end is
        let closed = apply(&t.op, &correct(vec![Edit::set("name=Bo").unwrap()]), &c).unwrap_err();
        assert!(
            closed.0.contains("correct onb-42-task:c2 instead"),
            "{closed}"
        );
    }

    #[test]
    fn the_chain_of_keys() {
        assert_eq!(correction_key("onb-42").unwrap(), "onb-42:c2");
        assert_eq!(correction_key("onb-42:c2").unwrap(), "onb-42:c3");
        assert_eq!(correction_key("onb-42:c9").unwrap(), "onb-42:c10");
        // keys that only look like a chain's
        assert_eq!(correction_key("x:c1").unwrap(), "x:c1:c2");
        assert_eq!(correction_key("x:c02").unwrap(), "x:c02:c2");
        assert_eq!(correction_key(":c2").unwrap(), ":c2:c2");
        let long = "k".repeat(MAX_KEY_LEN - 2);
        assert!(correction_key(&long).unwrap_err().0.contains("--new-key"));
        let longest = correction_key(&"k".repeat(MAX_KEY_LEN - 3)).unwrap();
        assert_eq!(longest.len(), MAX_KEY_LEN);
    }
}
