//! The table tests of the automation's own commands (manual: States, Automatic retries, The protocol).

use super::super::test_support::*;

#[test]
fn outcomes_follow_the_retry_rules() {
    let policy = DestinationPolicy::default();
    let c = ctx(&policy, "settle");
    let op = op_in(State::InFlight, false);
    let fin = |outcome, n, retry_after| Command::FinishAttempt {
        n,
        outcome,
        reference: None,
        error: Some("boom".into()),
        http_status: Some(503),
        retry_after,
    };

    // transient: retry_wait with full jitter under base * 2^0
    let t = apply(&op, &fin(Outcome::Transient, 1, None), &c)
        .unwrap()
        .unwrap();
    assert_eq!(t.op.state, State::RetryWait);
    assert_eq!(
        t.op.next_attempt_at,
        Some(t0() + TimeDelta::milliseconds(500))
    );
    assert!(t.op.exception_since.is_none());
    // Retry-After honoured
    let t = apply(
        &op,
        &fin(Outcome::Transient, 1, Some(Duration::from_secs(30))),
        &c,
    )
    .unwrap()
    .unwrap();
    assert_eq!(t.op.next_attempt_at, Some(t0() + TimeDelta::seconds(30)));

    // the sixth transient spends the policy: failed, or unknown when an earlier attempt was ambiguous
    let mut sixth = op.clone();
    sixth.attempts = 6;
    let t = apply(&sixth, &fin(Outcome::Transient, 6, None), &c)
        .unwrap()
        .unwrap();
    assert_eq!(
        (t.op.state, t.op.exception_since),
        (State::Failed, Some(t0()))
    );
    sixth.ambiguous = true;
    assert_eq!(
        apply(&sixth, &fin(Outcome::Transient, 6, None), &c)
            .unwrap()
            .unwrap()
            .op
            .state,
        State::Unknown
    );
    // a staff retry starts a fresh budget
    sixth.budget_start = 6;
    sixth.attempts = 7;
    assert_eq!(
        apply(&sixth, &fin(Outcome::Transient, 7, None), &c)
            .unwrap()
            .unwrap()
            .op
            .state,
        State::RetryWait
    );

    // unknown: retried only where the destination dedupes, inside 80% of its retention
    assert_eq!(
        apply(&op, &fin(Outcome::Unknown, 1, None), &c)
            .unwrap()
            .unwrap()
            .op
            .state,
        State::Unknown
    );
    let dedupe = DestinationPolicy {
        dedupes: true,
        key_retention: Some(Duration::from_secs(3600)),
        ..Default::default()
    };
    let cd = ctx(&dedupe, "settle");
    let t = apply(&op, &fin(Outcome::Unknown, 1, None), &cd)
        .unwrap()
        .unwrap();
    assert_eq!((t.op.state, t.op.ambiguous), (State::RetryWait, true));
    let mut late = op.clone();
    late.first_sent_at = Some(t0() - TimeDelta::minutes(49));
    assert_eq!(
        apply(&late, &fin(Outcome::Unknown, 1, None), &cd)
            .unwrap()
            .unwrap()
            .op
            .state,
        State::Unknown
    );

    // rejected keeps the reason; accepted stores the reference and clears the schedule
    let t = apply(&op, &fin(Outcome::Rejected, 1, None), &c)
        .unwrap()
        .unwrap();
    assert_eq!(
        (t.op.state, t.op.reason.as_deref()),
        (State::Rejected, Some("boom"))
    );
    let acc = Command::FinishAttempt {
        n: 1,
        outcome: Outcome::Accepted,
        reference: Some("T-77".into()),
        error: None,
        http_status: Some(201),
        retry_after: None,
    };
    let t = apply(&op, &acc, &c).unwrap().unwrap();
    assert_eq!(
        (
            t.op.state,
            t.op.reference.as_deref(),
            t.op.attempt_started_at
        ),
        (State::Succeeded, Some("T-77"), None)
    );
}

/// Automatic retries: a 409 from a deduplicating destination (its first request with this key still runs)
/// makes the next attempt wait at least the destination's timeout, or its Retry-After if longer,
/// and not capped by the backoff's cap; elsewhere a 409 is a plain transient answer.
#[test]
fn a_409_from_a_deduplicating_destination_waits_out_the_first_request() {
    let dedupe = DestinationPolicy {
        dedupes: true,
        key_retention: Some(Duration::from_secs(3600)),
        timeout: Duration::from_secs(1),
        retry: crate::domain::RetryPolicy {
            max_attempts: 6,
            base: Duration::from_millis(100),
            cap: Duration::from_millis(500),
        },
        ..Default::default()
    };
    let plain = DestinationPolicy {
        dedupes: false,
        ..dedupe.clone()
    };
    let op = op_in(State::InFlight, false);
    let fin = |status, retry_after| Command::FinishAttempt {
        n: 1,
        outcome: Outcome::Transient,
        reference: None,
        error: Some("HTTP 409: not done, try later".into()),
        http_status: Some(status),
        retry_after,
    };
    let next_at = |policy: &DestinationPolicy, cmd: &Command| {
        let t = apply(&op, cmd, &ctx(policy, "settle")).unwrap().unwrap();
        assert_eq!(t.op.state, State::RetryWait);
        t.op.next_attempt_at.unwrap() - t0()
    };
    assert_eq!(next_at(&dedupe, &fin(409, None)), TimeDelta::seconds(1));
    assert_eq!(
        next_at(&dedupe, &fin(409, Some(Duration::from_secs(3)))),
        TimeDelta::seconds(3),
        "a longer Retry-After wins, past the cap"
    );
    // jitter as drawn (0.5 of base): no floor for a 409 elsewhere, nor another status here
    assert_eq!(
        next_at(&plain, &fin(409, None)),
        TimeDelta::milliseconds(50)
    );
    assert_eq!(
        next_at(&dedupe, &fin(503, None)),
        TimeDelta::milliseconds(50)
    );
}

#[test]
fn attempts_are_numbered_and_gaps_refused() {
    let policy = DestinationPolicy::default();
    let op = op_in(State::Pending, false);
    let fin = |n| Command::FinishAttempt {
        n,
        outcome: Outcome::Transient,
        reference: None,
        error: None,
        http_status: None,
        retry_after: None,
    };
    let t = apply(&op, &fin(1), &ctx(&policy, "bot")).unwrap().unwrap();
    assert_eq!(t.op.attempts, 1);
    assert!(matches!(
        t.attempt,
        AttemptEffect::Finish {
            n: 1,
            whole: true,
            ..
        }
    ));
    assert!(
        apply(&op, &fin(3), &ctx(&policy, "bot"))
            .unwrap_err()
            .0
            .contains("attempt 3 reported")
    );
}

#[test]
fn a_conflict_keeps_both_contents_and_its_exception_age() {
    let policy = DestinationPolicy::default();
    let op = op_in(State::Unknown, false);
    let t = apply(
        &op,
        &Command::Record {
            payload: "{\"b\":2}".into(),
            fingerprint: "fp2".into(),
            run: None,
        },
        &ctx(&policy, "bot"),
    )
    .unwrap()
    .unwrap();
    assert_eq!(t.op.payload, "{}");
    assert_eq!(t.op.conflicting_payload.as_deref(), Some("{\"b\":2}"));
    assert_eq!(
        t.op.exception_since, op.exception_since,
        "still an exception since it first became one"
    );
}

/// Runs: an operation's run is the one it was recorded with, in every state; naming none
/// leaves it as it is.
#[test]
fn a_record_keeps_its_run() {
    let policy = DestinationPolicy::default();
    let c = ctx(&policy, "settle");
    let record = |run: Option<&str>| Command::Record {
        payload: "{}".into(),
        fingerprint: "fp1".into(),
        run: run.map(str::to_string),
    };
    for state in [State::Pending, State::Succeeded, State::Unknown] {
        let mut op = op_in(state, false);
        op.run = Some("onb-42".into());
        assert_eq!(
            apply(&op, &record(Some("onb-42")), &c).unwrap(),
            None,
            "{state}"
        );
        assert_eq!(apply(&op, &record(None), &c).unwrap(), None, "{state}");
        let why = apply(&op, &record(Some("onb-43")), &c).unwrap_err();
        assert!(
            why.0.contains("belongs to run onb-42, not onb-43"),
            "{state}: {}",
            why.0
        );
        op.run = None;
        let why = apply(&op, &record(Some("onb-42")), &c).unwrap_err();
        assert!(
            why.0.contains("recorded without a run"),
            "{state}: {}",
            why.0
        );
    }
}

#[test]
fn a_repeat_sends_again_only_what_is_confirmed_not_done_and_unclaimed() {
    let policy = DestinationPolicy::default();
    let c = ctx(&policy, "bot");
    let mut failed = op_in(State::Failed, false);
    failed.attempts = 6;
    failed.reason = Some("reconciled absent".into());
    let t = apply(&failed, &Command::Resend, &c).unwrap().unwrap();
    assert_eq!(t.op.state, State::Pending);
    assert_eq!(t.op.next_attempt_at, Some(t0()));
    // a fresh budget: the next attempt is the first of it
    assert_eq!(t.op.budget_start, 6);
    assert_eq!((t.kind, t.op.reason.clone()), ("resend_requested", None));
    assert!(t.op.exception_since.is_none(), "no longer an exception");
    // a person holding it keeps the repeat away
    let held = with_claim(failed.clone(), "alice");
    assert_eq!(run(&held, &Command::Resend, &c), Refused);
}

#[test]
fn an_outcome_that_settles_leaves_its_state_under_any_policy() {
    for dedupes in [false, true] {
        let policy = DestinationPolicy {
            dedupes,
            ..DestinationPolicy::default()
        };
        let c = ctx(&policy, "settle");
        for outcome in Outcome::ALL {
            let finish = Command::FinishAttempt {
                n: 1,
                outcome,
                reference: Some("T-1".into()),
                error: Some("boom".into()),
                http_status: None,
                retry_after: None,
            };
            let after = apply(&op_in(State::InFlight, false), &finish, &c)
                .unwrap()
                .unwrap()
                .op
                .state;
            match outcome.settles() {
                Some(state) => assert_eq!(after, state, "{outcome:?}"),
                None => assert!(
                    matches!(after, State::RetryWait | State::Unknown | State::Failed),
                    "{outcome:?}: {after:?}"
                ),
            }
        }
    }
}
