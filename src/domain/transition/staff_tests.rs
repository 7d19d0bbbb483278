//! The staff actions and their rules (manual: Staff actions, Many at once, Running settle for a team).

use super::super::test_support::*;

/// Staff actions: an action on an item nobody holds claims it in the same transition (one event whose
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
    // (manual: Staff actions: nobody holds a live claim), and the event says so
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

/// A lookup a person asks for (manual: Many at once) reconciles by its answer, names the lookup as the
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
