//! Correcting a request, the rule beside the other transitions:
//! only what is confirmed not done (`rejected`, `failed`) may be corrected, never what may have
//! been done or may still be sent; and the correction's key, along the chain KEY, KEY:c2, KEY:c3.
//!
//! The rest of the design, for the slices that follow (the ledger, the faces):
//! - one transaction: the new operation under the correction's key (or `--new-key`), same
//!   workflow, step, run, destination and action, the corrected payload and its fingerprint; the
//!   original closed `superseded` by it; `corrected` on the original (the new key, the changed
//!   paths, never their values) and `recorded` on the new one (`corrects: KEY`);
//! - the original key answers from the chain's end: `record` with its original contents exits 0
//!   with `send: false` and `corrected_as` (and `done` with the reference once the end
//!   succeeded), `start` exits 3, the HTTP API and the gateway give the end's answer, never a send.

use super::op::Op;
use super::terms::{Ctx, Refusal, refuse};
use crate::domain::key::MAX_KEY_LEN;
use crate::domain::state::State;

/// Whether `ctx.actor` may correct `op` now; the refusal says why not, and what to do instead.
pub fn may_correct(op: &Op, ctx: &Ctx) -> Result<(), Refusal> {
    let key = &op.key;
    match op.state {
        State::Rejected | State::Failed => {}
        State::Succeeded | State::Closed => {
            return refuse(format!(
                "{key} is {}: there is nothing to correct",
                op.state.as_str()
            ));
        }
        State::Unknown | State::InFlight => {
            return refuse(format!(
                "{key} is {}: it may have been done: reconcile it first (found, or absent to correct it)",
                op.state.as_str()
            ));
        }
        State::Pending | State::RetryWait => {
            return refuse(format!(
                "{key} is {}: it may still be sent as it is: only a rejected or failed request is corrected",
                op.state.as_str()
            ));
        }
        State::Conflict => {
            return refuse(format!(
                "{key} is in conflict: settle which contents stand first (the conflict's next step)"
            ));
        }
    }
    if let Some(c) = op.claimed_by_other(ctx.actor, ctx.now) {
        return refuse(format!("{key} is claimed by {}: leave it to them", c.by));
    }
    Ok(())
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
