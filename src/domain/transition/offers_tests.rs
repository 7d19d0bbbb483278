//! What the console offers equals what the ledger accepts (manual: The console).

use super::super::test_support::*;

/// `offered` asks `staff_check` with each offer's sample by its position in `Offer::ALL`.
#[test]
fn offers_and_their_samples_line_up() {
    for (i, o) in Offer::ALL.iter().enumerate() {
        assert_eq!(*o as usize, i, "{o:?}");
    }
}

/// What `offered` says equals what `apply` accepts, for every state, claim situation and
/// destination capability of the generators (the console's footer is built from `offered`).
#[test]
fn offered_equals_what_apply_accepts() {
    let now = t0();
    let policies = [
        DestinationPolicy::default(),
        DestinationPolicy {
            dedupes: true,
            key_retention: Some(Duration::from_secs(86_400)),
            ..Default::default()
        },
        DestinationPolicy {
            lookup: true,
            can_look_up: true,
            ..Default::default()
        },
    ];
    for policy in &policies {
        for state in State::ALL {
            for stuck in [false, true] {
                for holder in [None, Some("alice"), Some("bob"), Some("expired")] {
                    let mut op = op_in(state, stuck);
                    op.first_sent_at = Some(now - TimeDelta::minutes(1));
                    if let Some(h) = holder {
                        op = with_claim(op, if h == "expired" { "bob" } else { h });
                        if h == "expired" {
                            op.claim.as_mut().unwrap().expires = now - TimeDelta::seconds(1);
                        }
                    }
                    let c = ctx(policy, "alice");
                    let offers = offered(&op, &c);
                    for o in Offer::ALL {
                        let accepted =
                            matches!(apply(&op, &Command::Staff(o.sample()), &c), Ok(Some(_)));
                        let expected = accepted
                            && match o {
                                // offered only where it changes something / over another's live claim
                                Offer::Claim => op.claim.as_ref().is_none_or(|c| !c.is_live(now)),
                                Offer::TakeOver => op.claimed_by_other("alice", now).is_some(),
                                _ => true,
                            };
                        assert_eq!(
                            offers.contains(o),
                            expected,
                            "{state} stuck {stuck} holder {holder:?} dedupes {}: {o:?}",
                            policy.dedupes
                        );
                    }
                }
            }
        }
    }
}
