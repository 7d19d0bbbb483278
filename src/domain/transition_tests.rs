use super::*;
use crate::domain::next_step::{StepKind, safe_next_step};
use chrono::TimeDelta;

const TIMEOUT: Duration = Duration::from_secs(300);

fn t0() -> DateTime<Utc> {
    DateTime::parse_from_rfc3339("2026-12-01T10:00:00Z")
        .unwrap()
        .to_utc()
}

fn base() -> Op {
    Op::new(
        "onb-42-task",
        "onboarding",
        "create-task",
        "projects",
        "create_task",
        "{}".into(),
        "fp1".into(),
        t0(),
    )
}

/// An operation in `state` as it would be after getting there; `stuck` for an old in_flight.
fn op_in(state: State, stuck: bool) -> Op {
    let mut op = base();
    op.state = state;
    op.next_attempt_at = None;
    if state != State::Pending {
        op.attempts = 1;
        op.first_sent_at = Some(t0());
    }
    match state {
        State::InFlight => {
            let started = if stuck {
                t0() - TimeDelta::minutes(10)
            } else {
                t0() - TimeDelta::seconds(5)
            };
            op.attempt_started_at = Some(started);
            op.exception_since = Some(started + TimeDelta::from_std(TIMEOUT).unwrap());
        }
        State::RetryWait => op.next_attempt_at = Some(t0() - TimeDelta::seconds(1)),
        State::Pending => op.next_attempt_at = Some(t0()),
        State::Unknown | State::Rejected | State::Failed | State::Conflict => {
            op.exception_since = Some(t0() - TimeDelta::hours(1));
            op.reason = Some("read timeout".into());
        }
        _ => {}
    }
    op
}

fn with_claim(mut op: Op, by: &str) -> Op {
    op.claim = Some(Claim {
        by: by.into(),
        since: t0() - TimeDelta::minutes(1),
        expires: t0() + TimeDelta::minutes(29),
    });
    op
}

fn ctx<'a>(policy: &'a DestinationPolicy, actor: &'a str) -> Ctx<'a> {
    Ctx {
        now: t0(),
        actor,
        policy,
        lease: Duration::from_secs(1800),
        attempt_timeout: TIMEOUT,
        paused: false,
        jitter: 0.5,
        role: crate::domain::Role::Lead,
    }
}

#[derive(Debug, PartialEq)]
enum Expect {
    To(State),
    Nothing,
    Refused,
}
use Expect::*;

fn run(op: &Op, cmd: &Command, ctx: &Ctx) -> Expect {
    match apply(op, cmd, ctx) {
        Ok(Some(t)) => {
            assert_eq!(
                t.op.version,
                op.version + 1,
                "each change bumps the version"
            );
            // the dispatcher's due query relies on this (it does not filter on state)
            assert!(
                t.op.next_attempt_at.is_none()
                    || matches!(t.op.state, State::Pending | State::RetryWait),
                "only pending and retry_wait have a next attempt: {:?} at {:?}",
                t.op.state,
                t.op.next_attempt_at
            );
            To(t.op.state)
        }
        Ok(None) => Nothing,
        Err(Refusal(text)) => {
            assert!(
                !text.is_empty() && !text.contains('\n'),
                "a refusal is one line: {text:?}"
            );
            Refused
        }
    }
}

fn commands(op: &Op) -> Vec<(&'static str, Command)> {
    let next = if op.attempt_started_at.is_some() {
        op.attempts
    } else {
        op.attempts + 1
    };
    let finish = |outcome| Command::FinishAttempt {
        n: next,
        outcome,
        reference: Some("T-1".into()),
        error: None,
        http_status: None,
        retry_after: None,
    };
    vec![
        (
            "record same",
            Command::Record {
                payload: "{}".into(),
                fingerprint: "fp1".into(),
            },
        ),
        (
            "record changed",
            Command::Record {
                payload: "{\"a\":1}".into(),
                fingerprint: "fp2".into(),
            },
        ),
        ("start", Command::StartAttempt),
        ("accepted", finish(Outcome::Accepted)),
        ("rejected", finish(Outcome::Rejected)),
        ("transient", finish(Outcome::Transient)),
        ("unknown", finish(Outcome::Unknown)),
        ("sweep", Command::Sweep),
        (
            "claim",
            Command::Staff(StaffAction::Claim { force_reason: None }),
        ),
        ("release", Command::Staff(StaffAction::Release)),
        (
            "found",
            Command::Staff(StaffAction::ReconcileFound {
                reference: "T-9".into(),
                note: None,
            }),
        ),
        (
            "absent",
            Command::Staff(StaffAction::ReconcileAbsent { note: None }),
        ),
        ("retry", Command::Staff(StaffAction::Retry { note: None })),
        (
            "close",
            Command::Staff(StaffAction::Close {
                resolution: Resolution::Abandoned,
                reference: None,
                superseded_by: None,
                note: "gone".into(),
            }),
        ),
        (
            "note",
            Command::Staff(StaffAction::Note {
                text: "looked at it".into(),
            }),
        ),
    ]
}

/// Every state against every event and staff action: the SPEC's result, or a refusal.
#[test]
fn the_whole_transition_table() {
    use State::*;
    let policy = DestinationPolicy::default();
    // (state, stuck) -> expected per command, in the order of `commands`.
    #[rustfmt::skip]
    let table: Vec<((State, bool), [Expect; 15])> = vec![
        //                 rec=     rec!=          start          acc            rej            trans            unk            sweep      claim          release        found          absent         retry          close          note
        ((Pending, false),   [Nothing, To(Conflict), To(InFlight),  To(Succeeded), To(Rejected),  To(RetryWait),  To(Unknown),   Nothing,   To(Pending),   To(Pending),   Refused,       Refused,       Refused,       To(Closed),    To(Pending)]),
        ((InFlight, false),  [Nothing, To(Conflict), Refused,       To(Succeeded), To(Rejected),  To(RetryWait),  To(Unknown),   Nothing,   To(InFlight),  To(InFlight),  Refused,       Refused,       Refused,       Refused,       To(InFlight)]),
        ((InFlight, true),   [Nothing, To(Conflict), Refused,       To(Succeeded), To(Rejected),  To(RetryWait),  To(Unknown),   To(Unknown), To(InFlight), To(InFlight),  To(Succeeded), To(Failed),    Refused,       To(Closed),    To(InFlight)]),
        ((RetryWait, false), [Nothing, To(Conflict), To(InFlight),  To(Succeeded), To(Rejected),  To(RetryWait),  To(Unknown),   Nothing,   To(RetryWait), To(RetryWait), Refused,       Refused,       Refused,       To(Closed),    To(RetryWait)]),
        ((Succeeded, false), [Nothing, Refused,      Refused,       Refused,       Refused,       Refused,        Refused,       Nothing,   Refused,       Refused,       Refused,       Refused,       Refused,       Refused,       To(Succeeded)]),
        ((Rejected, false),  [Nothing, To(Conflict), Refused,       Refused,       Refused,       Refused,        Refused,       Nothing,   To(Rejected),  To(Rejected),  Refused,       Refused,       To(Pending),   To(Closed),    To(Rejected)]),
        ((Unknown, false),   [Nothing, To(Conflict), Refused,       Refused,       Refused,       Refused,        Refused,       Nothing,   To(Unknown),   To(Unknown),   To(Succeeded), To(Failed),    Refused,       To(Closed),    To(Unknown)]),
        ((Failed, false),    [Nothing, To(Conflict), Refused,       Refused,       Refused,       Refused,        Refused,       Nothing,   To(Failed),    To(Failed),    To(Succeeded), Refused,       To(Pending),   To(Closed),    To(Failed)]),
        ((Conflict, false),  [Nothing, Nothing,      Refused,       Refused,       Refused,       Refused,        Refused,       Nothing,   To(Conflict),  To(Conflict),  To(Succeeded), Refused,       Refused,       To(Closed),    To(Conflict)]),
        ((Closed, false),    [Nothing, Refused,      Refused,       Refused,       Refused,       Refused,        Refused,       Nothing,   Refused,       Refused,       Refused,       Refused,       Refused,       Refused,       To(Closed)]),
    ];
    assert_eq!(
        table.len(),
        State::ALL.len() + 1,
        "every state, and in_flight both live and stuck"
    );
    for ((state, stuck), expected) in table {
        let plain = op_in(state, stuck);
        // Conflict already holds fp2, so "record changed" repeats it.
        let plain = if state == Conflict {
            Op {
                conflicting_fingerprint: Some("fp2".into()),
                ..plain
            }
        } else {
            plain
        };
        for ((name, cmd), want) in commands(&plain).into_iter().zip(expected) {
            // Staff actions other than claim are made by the holder of a live claim.
            let op = match name {
                "release" | "found" | "absent" | "retry" | "close" if !state.is_terminal() => {
                    with_claim(plain.clone(), "alice")
                }
                _ => plain.clone(),
            };
            let got = run(&op, &cmd, &ctx(&policy, "alice"));
            assert_eq!(got, want, "{state} (stuck: {stuck}) + {name}");
        }
    }
}

/// SPEC 5: an action on an item nobody holds claims it in the same transition (one event whose
/// detail says so); a live claim of another refuses it; an expired one does not.
#[test]
fn acting_on_an_unclaimed_item_claims_it() {
    let policy = DestinationPolicy::default();
    let failed = op_in(State::Failed, false);
    let absent = Command::Staff(StaffAction::ReconcileAbsent { note: None });
    let retry = Command::Staff(StaffAction::Retry { note: None });
    let t = apply(&failed, &retry, &ctx(&policy, "alice"))
        .unwrap()
        .unwrap();
    assert_eq!((t.op.state, t.kind), (State::Pending, "retry_requested"));
    assert_eq!(t.detail["claimed"], true);
    assert_eq!(t.op.claim, None, "a retry releases the claim it took");
    // reconcile absent leaves the item open: the claim it took stays with the actor
    let unknown = op_in(State::Unknown, false);
    let t = apply(&unknown, &absent, &ctx(&policy, "alice"))
        .unwrap()
        .unwrap();
    assert_eq!(t.op.state, State::Failed);
    assert_eq!(t.detail["claimed"], true);
    assert_eq!(t.op.claim.as_ref().map(|c| c.by.as_str()), Some("alice"));
    // held by alice: bob is refused, alice acts without claiming again
    let held = with_claim(unknown, "alice");
    let err = apply(&held, &absent, &ctx(&policy, "bob")).unwrap_err();
    assert!(
        err.0.contains("claimed by alice until") && err.0.contains("take it over"),
        "{err}"
    );
    let t = apply(&held, &absent, &ctx(&policy, "alice"))
        .unwrap()
        .unwrap();
    assert_eq!(t.detail.get("claimed"), None);
    // an expired claim of alice's: bob's action claims it
    let mut expired = held.clone();
    if let Some(c) = expired.claim.as_mut() {
        c.expires = t0() - TimeDelta::seconds(1);
    }
    let t = apply(&expired, &absent, &ctx(&policy, "bob"))
        .unwrap()
        .unwrap();
    assert_eq!(t.detail["claimed"], true);
    assert_eq!(t.op.claim.as_ref().map(|c| c.by.as_str()), Some("bob"));
}

#[test]
fn refusals_change_nothing_and_name_the_reason() {
    let policy = DestinationPolicy::default();
    let op = op_in(State::Unknown, false);
    let err = apply(
        &op,
        &Command::Staff(StaffAction::Retry { note: None }),
        &ctx(&policy, "alice"),
    )
    .unwrap_err();
    // unclaimed: the action would claim it, but the retry rule refuses it as a held one would
    assert!(err.0.contains("does not deduplicate"), "{err}");
    let held = with_claim(op, "alice");
    let err = apply(
        &held,
        &Command::Staff(StaffAction::Retry { note: None }),
        &ctx(&policy, "alice"),
    )
    .unwrap_err();
    assert!(err.0.contains("does not deduplicate"), "{err}");
    let err = apply(
        &held,
        &Command::Staff(StaffAction::Release),
        &ctx(&policy, "bob"),
    )
    .unwrap_err();
    assert!(err.0.contains("claimed by alice"), "{err}");
}

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

/// SPEC 6: a 409 from a deduplicating destination (its first request with this key still runs)
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
fn claims_exclude_automation_and_other_people() {
    let policy = DestinationPolicy::default();
    let op = with_claim(op_in(State::RetryWait, false), "alice");
    assert!(
        apply(&op, &Command::StartAttempt, &ctx(&policy, "settle"))
            .unwrap_err()
            .0
            .contains("claimed by alice")
    );
    let fin = Command::FinishAttempt {
        n: 2,
        outcome: Outcome::Accepted,
        reference: None,
        error: None,
        http_status: None,
        retry_after: None,
    };
    assert!(
        apply(&op, &fin, &ctx(&policy, "bot")).is_err(),
        "no new automatic attempt on a claimed item"
    );
    let err = apply(
        &op,
        &Command::Staff(StaffAction::Claim { force_reason: None }),
        &ctx(&policy, "bob"),
    )
    .unwrap_err();
    assert!(
        err.0.contains("claimed by alice") && err.0.contains("--force"),
        "{err}"
    );
    let t = apply(
        &op,
        &Command::Staff(StaffAction::Claim {
            force_reason: Some("alice is off shift".into()),
        }),
        &ctx(&policy, "bob"),
    )
    .unwrap()
    .unwrap();
    assert_eq!(
        (t.kind, t.op.claim.unwrap().by.as_str()),
        ("claim_taken", "bob")
    );
    assert!(
        apply(
            &op,
            &Command::Staff(StaffAction::Claim {
                force_reason: Some(" ".into())
            }),
            &ctx(&policy, "bob")
        )
        .is_err()
    );
    // an expired claim can be taken without force; its old holder acting claims it afresh
    // (SPEC 5: nobody holds a live claim), and the event says so
    let mut expired = op.clone();
    expired.claim.as_mut().unwrap().expires = t0() - TimeDelta::seconds(1);
    assert!(
        apply(
            &expired,
            &Command::Staff(StaffAction::Claim { force_reason: None }),
            &ctx(&policy, "bob")
        )
        .is_ok()
    );
    let again = apply(
        &expired,
        &Command::Staff(StaffAction::Close {
            resolution: Resolution::Abandoned,
            reference: None,
            superseded_by: None,
            note: "no longer needed".into(),
        }),
        &ctx(&policy, "alice"),
    )
    .unwrap()
    .unwrap();
    assert_eq!(
        (again.op.state, again.detail["claimed"].clone()),
        (State::Closed, serde_json::json!(true))
    );
    // the open attempt's outcome is still recorded while someone holds the claim
    let flying = with_claim(op_in(State::InFlight, false), "alice");
    let fin1 = Command::FinishAttempt {
        n: 1,
        outcome: Outcome::Accepted,
        reference: None,
        error: None,
        http_status: None,
        retry_after: None,
    };
    assert_eq!(
        apply(&flying, &fin1, &ctx(&policy, "settle"))
            .unwrap()
            .unwrap()
            .op
            .state,
        State::Succeeded
    );
    // the sweep leaves a live claim alone
    let stuck = with_claim(op_in(State::InFlight, true), "alice");
    assert!(apply(&stuck, &Command::Sweep, &ctx(&policy, "settle")).is_err());
}

#[test]
fn staff_retry_and_close_rules() {
    let dedupe = DestinationPolicy {
        dedupes: true,
        key_retention: Some(Duration::from_secs(86_400)),
        ..Default::default()
    };
    let unknown = with_claim(op_in(State::Unknown, false), "alice");
    let t = apply(
        &unknown,
        &Command::Staff(StaffAction::Retry { note: None }),
        &ctx(&dedupe, "alice"),
    )
    .unwrap()
    .unwrap();
    assert_eq!(
        (
            t.op.state,
            t.op.budget_start,
            t.op.claim.clone(),
            t.op.next_attempt_at
        ),
        (State::Pending, 1, None, Some(t0()))
    );
    let rejected = with_claim(op_in(State::Rejected, false), "alice");
    let t = apply(
        &rejected,
        &Command::Staff(StaffAction::Retry { note: None }),
        &ctx(&dedupe, "alice"),
    )
    .unwrap()
    .unwrap();
    assert!(t.warning.unwrap().contains("may reject it again"));

    let policy = DestinationPolicy::default();
    let close = |resolution, reference: Option<&str>, sup: Option<&str>, note: &str| {
        Command::Staff(StaffAction::Close {
            resolution,
            reference: reference.map(Into::into),
            superseded_by: sup.map(Into::into),
            note: note.into(),
        })
    };
    let failed = with_claim(op_in(State::Failed, false), "alice");
    let c = ctx(&policy, "alice");
    assert!(
        apply(
            &failed,
            &close(Resolution::DoneElsewhere, None, None, "x"),
            &c
        )
        .unwrap_err()
        .0
        .contains("--reference")
    );
    assert!(
        apply(&failed, &close(Resolution::Superseded, None, None, "x"), &c)
            .unwrap_err()
            .0
            .contains("--superseded-by")
    );
    assert!(
        apply(&failed, &close(Resolution::Abandoned, None, None, " "), &c)
            .unwrap_err()
            .0
            .contains("note")
    );
    let t = apply(
        &failed,
        &close(Resolution::DoneElsewhere, Some("T-5"), None, "made by hand"),
        &c,
    )
    .unwrap()
    .unwrap();
    assert_eq!(
        (
            t.op.state,
            t.op.reference.as_deref(),
            t.op.claim.clone(),
            t.op.exception_since
        ),
        (State::Closed, Some("T-5"), None, None)
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

/// SPEC 3: an interrupted attempt is swept by the rule of any unknown outcome: at a destination
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

// ---- the safe next step: one test per row of SPEC section 4 ----

#[test]
fn step_waits_for_a_paused_destination() {
    let op = op_in(State::RetryWait, false);
    let paused = crate::domain::next_step::Paused {
        workflow: false,
        destination: true,
    };
    let s = safe_next_step(
        &op,
        &DestinationPolicy::default(),
        "alice",
        paused,
        TIMEOUT,
        t0(),
    );
    assert_eq!(
        (s.kind, s.text.as_str()),
        (
            StepKind::Paused,
            format!(
                "Automatic attempt waits: destination {} paused",
                op.destination
            )
            .as_str()
        )
    );
}

fn next(op: &Op, policy: &DestinationPolicy, paused: bool) -> (StepKind, String) {
    let paused = crate::domain::next_step::Paused {
        workflow: paused,
        destination: false,
    };
    let s = safe_next_step(op, policy, "alice", paused, TIMEOUT, t0());
    (s.kind, s.text)
}

#[test]
fn step_claimed_by_someone_else() {
    let (k, text) = next(
        &with_claim(op_in(State::Unknown, false), "bob"),
        &DestinationPolicy::default(),
        false,
    );
    assert_eq!(
        (k, text.as_str()),
        (
            StepKind::LeaveToHolder,
            "Claimed by bob for 1m: leave it to them"
        )
    );
}

#[test]
fn step_in_flight_live() {
    assert_eq!(
        next(
            &op_in(State::InFlight, false),
            &DestinationPolicy::default(),
            false
        )
        .0,
        StepKind::Wait
    );
}

/// SPEC 4: an interrupted attempt asks a person to reconcile it only where the destination
/// neither deduplicates nor can be looked up; elsewhere the destination settles it.
#[test]
fn step_in_flight_stuck_or_interrupted() {
    let dedupes = DestinationPolicy {
        dedupes: true,
        key_retention: Some(Duration::from_secs(10 * 3600)),
        ..Default::default()
    };
    let lookup = DestinationPolicy {
        lookup: true,
        ..Default::default()
    };
    let neither = DestinationPolicy::default();
    let stuck = op_in(State::InFlight, true);
    let mut interrupted = op_in(State::Unknown, false);
    interrupted.reason = Some("interrupted".into());
    let cases = [
        (
            &stuck,
            &dedupes,
            StepKind::Wait,
            "Attempt interrupted: the sweep retries it with the same key (projects deduplicates until 18:00 UTC)",
        ),
        (
            &stuck,
            &lookup,
            StepKind::LookUp,
            "Attempt interrupted: look up onb-42-task in projects, then reconcile found/absent",
        ),
        (
            &stuck,
            &neither,
            StepKind::ReconcileInterrupted,
            "Attempt interrupted: reconcile as an unknown outcome",
        ),
        (
            &interrupted,
            &dedupes,
            StepKind::RetrySameKey,
            "Retry with the same key: projects deduplicates until 18:00 UTC",
        ),
        (
            &interrupted,
            &lookup,
            StepKind::LookUp,
            "Look up onb-42-task in projects, then reconcile found/absent",
        ),
        (
            &interrupted,
            &neither,
            StepKind::ReconcileInterrupted,
            "Attempt interrupted: reconcile as an unknown outcome",
        ),
    ];
    for (op, policy, kind, text) in cases {
        assert_eq!(next(op, policy, false), (kind, text.to_string()), "{op:?}");
    }
}

#[test]
fn step_unknown_deduplicated() {
    let p = DestinationPolicy {
        dedupes: true,
        key_retention: Some(Duration::from_secs(10 * 3600)),
        lookup: true,
        ..Default::default()
    };
    let (k, text) = next(&op_in(State::Unknown, false), &p, false);
    assert_eq!(
        (k, text.as_str()),
        (
            StepKind::RetrySameKey,
            "Retry with the same key: projects deduplicates until 18:00 UTC"
        )
    );
}

#[test]
fn step_unknown_with_lookup() {
    let p = DestinationPolicy {
        lookup: true,
        ..Default::default()
    };
    let (k, text) = next(&op_in(State::Unknown, false), &p, false);
    assert_eq!(
        (k, text.as_str()),
        (
            StepKind::LookUp,
            "Look up onb-42-task in projects, then reconcile found/absent"
        )
    );
}

#[test]
fn step_unknown_neither() {
    let mut op = op_in(State::Unknown, false);
    op.created_at = t0() - TimeDelta::hours(52);
    op.first_sent_at = Some(op.created_at);
    // dedupes, but its retention is long past: the same as not deduplicating
    let p = DestinationPolicy {
        dedupes: true,
        key_retention: Some(Duration::from_secs(60)),
        ..Default::default()
    };
    let (k, text) = next(&op, &p, false);
    assert_eq!(k, StepKind::CheckDestination);
    assert_eq!(
        text,
        "Check projects for this request (onb-42-task, created 2d 4h ago); reconcile found/absent before any retry"
    );
}

#[test]
fn step_failed() {
    let (k, text) = next(
        &op_in(State::Failed, false),
        &DestinationPolicy::default(),
        false,
    );
    assert_eq!(
        (k, text.as_str()),
        (
            StepKind::RetryOrAbandon,
            "Confirmed not done: retry, or close as abandoned"
        )
    );
}

#[test]
fn step_rejected() {
    let mut op = op_in(State::Rejected, false);
    op.reason = Some("422 due date in the past".into());
    let (k, text) = next(&op, &DestinationPolicy::default(), false);
    assert_eq!(k, StepKind::CorrectAtSource);
    assert_eq!(
        text,
        "projects rejected it: 422 due date in the past. Correct it at the source and close as superseded"
    );
}

#[test]
fn step_conflict() {
    let (k, text) = next(
        &op_in(State::Conflict, false),
        &DestinationPolicy::default(),
        false,
    );
    assert_eq!(k, StepKind::DecideContents);
    assert!(
        text.starts_with("Request changed under onb-42-task: decide which contents are intended")
    );
}

#[test]
fn step_pending_and_retry_wait() {
    let p = DestinationPolicy::default();
    let (k, text) = next(&op_in(State::Pending, false), &p, false);
    assert_eq!(
        (k, text.as_str()),
        (StepKind::Automatic, "Automatic attempt 1 of 6 at now")
    );
    let mut op = op_in(State::RetryWait, false);
    op.next_attempt_at = Some(t0() + TimeDelta::minutes(5));
    let (k, text) = next(&op, &p, false);
    assert_eq!(
        (k, text.as_str()),
        (StepKind::Automatic, "Automatic attempt 2 of 6 at 10:05 UTC")
    );
    let (k, text) = next(&op, &p, true);
    assert_eq!(
        (k, text.as_str()),
        (
            StepKind::Paused,
            "Automatic attempt waits: workflow onboarding paused"
        )
    );
}

#[test]
fn step_terminal() {
    for s in [State::Succeeded, State::Closed] {
        assert_eq!(
            next(&op_in(s, false), &DestinationPolicy::default(), false),
            (StepKind::Nothing, "Nothing to do".into())
        );
    }
}

/// The dispatcher's lookup, against every state: only an unknown outcome is settled by it, and
/// only a real answer settles it (SPEC 11a: no answer leaves it unknown, saying why).
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

/// A lookup a person asks for (SPEC 16) reconciles by its answer, names the lookup as the
/// evidence, and needs what a reconcile needs; no answer reconciles nothing and says why.
#[test]
fn a_lookup_a_person_asks_for_reconciles_by_its_answer() {
    let policy = DestinationPolicy {
        lookup: true,
        can_look_up: true,
        ..Default::default()
    };
    let look = |answer| Command::Staff(StaffAction::LookUp { answer });
    let found = || {
        look(LookupAnswer::Found {
            reference: "T-5".into(),
            http_status: 200,
        })
    };
    let absent = || look(LookupAnswer::Absent { http_status: 404 });
    let c = ctx(&policy, "alice");
    let unknown = op_in(State::Unknown, false);
    let t = apply(&unknown, &found(), &c).unwrap().unwrap();
    assert_eq!(
        (t.op.state, t.op.reference.as_deref(), t.kind),
        (State::Succeeded, Some("T-5"), "reconciled")
    );
    assert_eq!(t.detail["evidence"]["by"], "lookup");
    assert_eq!(t.detail["evidence"]["http_status"], 200);
    assert_eq!(
        t.detail["claimed"], true,
        "nobody held it: claimed in the same event"
    );
    let t = apply(&unknown, &absent(), &c).unwrap().unwrap();
    assert_eq!(
        (t.op.state, t.op.claim.as_ref().map(|c| c.by.as_str())),
        (State::Failed, Some("alice"))
    );
    // a stuck attempt is closed by it; a failed one only changes when it is found
    let stuck = op_in(State::InFlight, true);
    assert_eq!(run(&stuck, &found(), &c), To(State::Succeeded));
    assert_eq!(run(&stuck, &absent(), &c), To(State::Failed));
    let failed = op_in(State::Failed, false);
    assert_eq!(run(&failed, &found(), &c), To(State::Succeeded));
    assert_eq!(run(&failed, &absent(), &c), Refused);
    for state in [
        State::Pending,
        State::RetryWait,
        State::Rejected,
        State::Conflict,
    ] {
        assert_eq!(run(&op_in(state, false), &found(), &c), Refused, "{state}");
    }
    let err = apply(
        &unknown,
        &look(LookupAnswer::NoAnswer {
            why: "no answer within 1s".into(),
        }),
        &c,
    )
    .unwrap_err();
    assert!(
        err.0.contains("gave no answer (no answer within 1s)"),
        "{err}"
    );
    // roles and claims as for a reconcile; a destination settle cannot ask is refused
    let viewer = Ctx {
        role: crate::domain::Role::Viewer,
        ..c.clone()
    };
    assert_eq!(run(&unknown, &found(), &viewer), Refused);
    assert_eq!(
        run(&with_claim(unknown.clone(), "bob"), &found(), &c),
        Refused
    );
    let by_hand = DestinationPolicy {
        lookup: true,
        ..Default::default()
    };
    let err = apply(&unknown, &found(), &ctx(&by_hand, "alice")).unwrap_err();
    assert!(err.0.contains("no lookup settle can run"), "{err}");
}

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

/// A closed or reconciled item no longer gives its old error as its reason (the attempts and
/// `last_error` keep it): the console's state line shows the resolution, not the old failure.
#[test]
fn closing_or_reconciling_clears_the_old_reason() {
    let policy = DestinationPolicy::default();
    let rejected = with_claim(op_in(State::Rejected, false), "alice");
    assert!(rejected.reason.is_some());
    let t = apply(
        &rejected,
        &Command::Staff(StaffAction::Close {
            resolution: Resolution::Abandoned,
            reference: None,
            superseded_by: None,
            note: "not needed".into(),
        }),
        &ctx(&policy, "alice"),
    )
    .unwrap()
    .unwrap();
    assert_eq!((t.op.state, t.op.reason.clone()), (State::Closed, None));
    let unknown = with_claim(op_in(State::Unknown, false), "alice");
    let t = apply(
        &unknown,
        &Command::Staff(StaffAction::ReconcileFound {
            reference: "T-9".into(),
            note: None,
        }),
        &ctx(&policy, "alice"),
    )
    .unwrap()
    .unwrap();
    assert_eq!((t.op.state, t.op.reason), (State::Succeeded, None));
}
