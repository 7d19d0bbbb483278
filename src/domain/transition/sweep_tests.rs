//! The sweep and the dispatcher's lookup (manual: States, Destinations and the dispatcher).

use super::super::test_support::*;

/// States: an interrupted attempt is swept by the rule of any unknown outcome: at a destination
/// that deduplicates, inside its horizon and with attempts left, to `retry_wait` (the next attempt
/// with the same key settles it); elsewhere to `unknown`, reason interrupted.
#[test]
fn sweep_retries_an_interrupted_attempt_where_the_destination_deduplicates() {
    let dedupe = DestinationPolicy {
        dedupes: true,
        key_retention: Some(Duration::from_secs(86_400)),
        ..Default::default()
    };
    let stuck = op_in(State::InFlight, true);
    let t = apply(&stuck, &Command::Sweep, &ctx(&dedupe, "settle"))
        .unwrap()
        .unwrap();
    assert_eq!((t.op.state, t.op.ambiguous), (State::RetryWait, true));
    assert!(t.op.next_attempt_at.is_some_and(|at| at >= t0()));
    assert_eq!(t.op.exception_since, None, "no longer an exception");
    assert_eq!(t.kind, "swept");
    assert!(matches!(
        t.attempt,
        AttemptEffect::Finish {
            n: 1,
            outcome: Outcome::Unknown,
            ..
        }
    ));
    // past the horizon, or with its attempts spent: an unknown for a person
    let mut old = stuck.clone();
    old.first_sent_at = Some(t0() - TimeDelta::hours(23));
    let mut spent = stuck.clone();
    spent.attempts = dedupe.retry.max_attempts;
    for op in [old, spent] {
        let t = apply(&op, &Command::Sweep, &ctx(&dedupe, "settle"))
            .unwrap()
            .unwrap();
        assert_eq!(
            (t.op.state, t.op.reason.as_deref()),
            (State::Unknown, Some("interrupted"))
        );
    }
}

#[test]
fn sweep_turns_a_stuck_attempt_into_an_interrupted_unknown() {
    let policy = DestinationPolicy::default();
    let stuck = op_in(State::InFlight, true);
    let t = apply(&stuck, &Command::Sweep, &ctx(&policy, "settle"))
        .unwrap()
        .unwrap();
    assert_eq!(
        (t.op.state, t.op.reason.as_deref()),
        (State::Unknown, Some("interrupted"))
    );
    assert!(matches!(
        t.attempt,
        AttemptEffect::Finish {
            n: 1,
            outcome: Outcome::Unknown,
            ..
        }
    ));
    assert_eq!(t.op.exception_since, stuck.exception_since);
}

/// The dispatcher's lookup, against every state: only an unknown outcome is settled by it, and
/// only a real answer settles it (manual: Destinations and the dispatcher: no answer leaves it unknown, saying why).
#[test]
fn a_lookup_settles_only_an_unknown_outcome() {
    let policy = DestinationPolicy {
        lookup: true,
        ..Default::default()
    };
    let found = || Command::Lookup {
        answer: LookupAnswer::Found {
            reference: "T-5".into(),
            http_status: 200,
        },
    };
    let absent = || Command::Lookup {
        answer: LookupAnswer::Absent { http_status: 404 },
    };
    let none = || Command::Lookup {
        answer: LookupAnswer::NoAnswer {
            why: "HTTP 503".into(),
        },
    };
    for state in State::ALL {
        for stuck in [false, true] {
            let op = op_in(state, stuck);
            let c = ctx(&policy, "settle");
            let got = (
                run(&op, &found(), &c),
                run(&op, &absent(), &c),
                run(&op, &none(), &c),
            );
            if state == State::Unknown {
                assert_eq!(
                    got,
                    (To(State::Succeeded), To(State::Failed), To(State::Unknown)),
                    "{state}"
                );
            } else {
                assert_eq!(got, (Refused, Refused, Refused), "{state}");
            }
        }
    }
    let claimed = with_claim(op_in(State::Unknown, false), "alice");
    assert_eq!(
        run(&claimed, &absent(), &ctx(&policy, "settle")),
        Refused,
        "a live claim keeps it away"
    );
    let c = ctx(&policy, "settle");
    let t = apply(&op_in(State::Unknown, false), &found(), &c)
        .unwrap()
        .unwrap();
    assert_eq!(
        (t.kind, t.op.reference.as_deref(), t.op.exception_since),
        ("looked_up", Some("T-5"), None)
    );
    let t = apply(&op_in(State::Unknown, false), &none(), &c)
        .unwrap()
        .unwrap();
    assert_eq!(
        (
            t.op.state,
            t.op.reason.as_deref(),
            t.detail["evidence"]["why"].as_str()
        ),
        (
            State::Unknown,
            Some("looked up at projects: no answer (HTTP 503)"),
            Some("HTTP 503")
        )
    );
    assert_eq!(
        t.op.exception_since,
        op_in(State::Unknown, false).exception_since
    );
}
