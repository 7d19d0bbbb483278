//! One conformance suite, run against SQLite and PostgreSQL: the ledger must behave the same on both.

mod common;

use std::sync::{Arc, Mutex};

use chrono::{DateTime, TimeDelta, Utc};
use common::TestDb;
use serde_json::json;
use settle::ledger::{Applied, Finished, Page};
use settle::{
    AttemptReport, Error, Intent, Ledger, ListFilter, Outcome, Recorded, Resolution, Scope,
    StaffAction, State,
};

async fn ledger(db: &TestDb) -> Ledger {
    Ledger::open(&db.url, common::config())
        .await
        .expect("open ledger")
}

/// A ledger whose destination `projects` never opens its breaker: what the retry budget alone
/// does with a destination answering 503 to everything (the breaker would hold them all).
async fn budget_only(db: &TestDb) -> Ledger {
    let text = common::CONFIG.replace(
        "[destinations.projects]\n",
        "[destinations.projects]\nbreaker = { failures = 1000000 }\n",
    );
    let config = settle::Config::parse(&text, "test config").unwrap();
    Ledger::open(&db.url, config).await.expect("open ledger")
}

/// A ledger whose clock the test moves.
async fn ledger_at(db: &TestDb, start: DateTime<Utc>) -> (Ledger, Arc<Mutex<DateTime<Utc>>>) {
    let clock = Arc::new(Mutex::new(start));
    let c = clock.clone();
    let l = ledger(db).await.with_clock(move || *c.lock().unwrap());
    (l, clock)
}

fn intent(key: &str, dest: &str, payload: serde_json::Value) -> Intent {
    Intent {
        key: key.into(),
        workflow: "onboarding".into(),
        step: "create-task".into(),
        destination: dest.into(),
        action: "create_task".into(),
        payload,
        run: None,
    }
}

fn outcome(key: &str, o: Outcome, error: Option<&str>) -> AttemptReport {
    AttemptReport {
        key: key.into(),
        outcome: Some(o),
        error: error.map(Into::into),
        ..Default::default()
    }
}

/// The review's runs of a ledger without any.
fn no_runs() -> serde_json::Value {
    json!({"started": 0, "done": 0, "stalled": 0, "closed": 0, "stalled_now": 0, "transitions": []})
}

async fn state(l: &Ledger, key: &str) -> State {
    l.read().show(key, "t").await.unwrap().op.state
}

async fn claim(l: &Ledger, key: &str, who: &str) -> settle::Result<Applied> {
    l.staff()
        .act(key, who, StaffAction::Claim { force_reason: None })
        .await
}

async fn recording_is_idempotent_and_a_conflict_keeps_both(db: &TestDb) {
    let l = ledger(db).await;
    let i = intent(
        "onb-1",
        "projects",
        json!({"title": "Kickoff", "assignee": {"id": 7}}),
    );
    assert_eq!(l.record(&i, "bot").await.unwrap(), Recorded::Created);
    let before = l.counts().await.unwrap();
    // same contents, keys in another order: harmless
    let same = intent(
        "onb-1",
        "projects",
        json!({"assignee": {"id": 7}, "title": "Kickoff"}),
    );
    assert_eq!(l.record(&same, "bot").await.unwrap(), Recorded::Unchanged);
    assert_eq!(l.counts().await.unwrap(), before);
    // changed contents: conflict, both kept, never replayed
    let changed = intent(
        "onb-1",
        "projects",
        json!({"title": "Kickoff (moved)", "assignee": {"id": 7}}),
    );
    assert_eq!(l.record(&changed, "bot").await.unwrap(), Recorded::Conflict);
    let d = l.read().show("onb-1", "t").await.unwrap();
    assert_eq!(d.op.state, State::Conflict);
    assert_eq!(d.payload["title"], "Kickoff");
    assert_eq!(d.conflicting_payload.unwrap()["title"], "Kickoff (moved)");
    assert_ne!(d.conflicting_fingerprint.unwrap(), d.fingerprint);
    assert_eq!(d.op.next_attempt_at, None, "a conflict is never replayed");
}

/// Staff actions: `close --resolution superseded` needs a key that exists; nothing changes otherwise.
async fn a_superseding_key_must_exist(db: &TestDb) {
    let l = ledger(db).await;
    for k in ["old-1", "new-1"] {
        l.record(&intent(k, "sms", json!({})), "bot").await.unwrap();
    }
    let close = |by: &str| StaffAction::Close {
        resolution: Resolution::Superseded,
        reference: None,
        superseded_by: Some(by.into()),
        note: "replaced".into(),
    };
    let err = l
        .staff()
        .act("old-1", "alice", close("made-up-9"))
        .await
        .unwrap_err();
    assert!(
        matches!(&err, Error::Refused(m) if m.contains("no operation made-up-9")),
        "{err}"
    );
    assert_eq!(state(&l, "old-1").await, State::Pending);
    let a = l
        .staff()
        .act("old-1", "alice", close("new-1"))
        .await
        .unwrap();
    assert_eq!(a.to, State::Closed);
    let shown = l.read().show("old-1", "alice").await.unwrap();
    assert_eq!(shown.op.superseded_by.as_deref(), Some("new-1"));
}

async fn a_terminal_operation_refuses_new_contents(db: &TestDb) {
    let l = ledger(db).await;
    l.record(&intent("onb-2", "projects", json!({"t": 1})), "bot")
        .await
        .unwrap();
    l.report_attempt(
        &AttemptReport {
            reference: Some("T-1".into()),
            ..outcome("onb-2", Outcome::Accepted, None)
        },
        "bot",
    )
    .await
    .unwrap();
    let before = l.counts().await.unwrap();
    let err = l
        .record(&intent("onb-2", "projects", json!({"t": 2})), "bot")
        .await
        .unwrap_err();
    assert!(matches!(err, Error::Refused(_)), "{err}");
    assert_eq!(l.counts().await.unwrap(), before);
    let d = l.read().show("onb-2", "t").await.unwrap();
    assert_eq!(
        (
            d.op.state,
            d.payload["t"].as_i64(),
            d.op.reference.as_deref()
        ),
        (State::Succeeded, Some(1), Some("T-1"))
    );
}

async fn outcomes_follow_the_destination_capabilities(db: &TestDb) {
    let l = ledger(db).await;
    for (key, dest) in [("p-1", "projects"), ("c-1", "crm"), ("s-1", "sms")] {
        l.record(&intent(key, dest, json!({})), "bot")
            .await
            .unwrap();
        l.report_attempt(
            &outcome(key, Outcome::Unknown, Some("read timeout after 30s")),
            "bot",
        )
        .await
        .unwrap();
    }
    // projects deduplicates: retried automatically; the others wait for a person
    assert_eq!(state(&l, "p-1").await, State::RetryWait);
    assert_eq!(state(&l, "c-1").await, State::Unknown);
    assert_eq!(
        l.read().show("c-1", "t").await.unwrap().op.next_step,
        "Look up c-1 in crm, then reconcile found/absent"
    );
    assert!(
        l.read()
            .show("s-1", "t")
            .await
            .unwrap()
            .op
            .next_step
            .starts_with("Check sms for this request (s-1")
    );
    // an exception refuses further automatic attempts
    let err = l
        .report_attempt(&outcome("s-1", Outcome::Accepted, None), "bot")
        .await
        .unwrap_err();
    assert!(matches!(err, Error::Refused(_)));
    // transient three times at sms (max 3): failed
    l.record(&intent("s-2", "sms", json!({})), "bot")
        .await
        .unwrap();
    for _ in 0..3 {
        l.report_attempt(&outcome("s-2", Outcome::Transient, Some("503")), "bot")
            .await
            .unwrap();
    }
    assert_eq!(state(&l, "s-2").await, State::Failed);
    let d = l.read().show("s-2", "t").await.unwrap();
    assert_eq!(d.attempt_log.len(), 3);
    assert!(
        d.attempt_log
            .iter()
            .all(|a| a.outcome == Some(Outcome::Transient))
    );
}

async fn fifty_concurrent_claims_one_winner(db: &TestDb) {
    let l = ledger(db).await;
    l.record(&intent("race-1", "crm", json!({})), "bot")
        .await
        .unwrap();
    l.report_attempt(&outcome("race-1", Outcome::Unknown, None), "bot")
        .await
        .unwrap();
    let mut tasks = Vec::new();
    for i in 0..50 {
        let l = l.clone();
        tasks.push(tokio::spawn(async move {
            claim(&l, "race-1", &format!("op{i}")).await
        }));
    }
    let mut won = Vec::new();
    let mut refused = 0;
    for t in tasks {
        match t.await.unwrap() {
            Ok(a) => won.push(a),
            Err(Error::Refused(msg)) => {
                assert!(msg.contains("claimed by op"), "{msg}");
                refused += 1;
            }
            Err(e) => panic!("unexpected error: {e}"),
        }
    }
    assert_eq!((won.len(), refused), (1, 49));
    let holder = l
        .read()
        .show("race-1", "t")
        .await
        .unwrap()
        .op
        .claimed_by
        .unwrap();
    let claims = l
        .read()
        .show("race-1", "t")
        .await
        .unwrap()
        .history
        .iter()
        .filter(|e| e.kind == "claimed")
        .count();
    assert_eq!(claims, 1, "only the winner's claim is audited");
    assert!(holder.starts_with("op"));
}

async fn two_concurrent_retries_one_wins(db: &TestDb) {
    let l = ledger(db).await;
    l.record(&intent("retry-1", "sms", json!({})), "bot")
        .await
        .unwrap();
    l.report_attempt(
        &outcome("retry-1", Outcome::Rejected, Some("bad number")),
        "bot",
    )
    .await
    .unwrap();
    claim(&l, "retry-1", "alice").await.unwrap();
    let (a, b) = tokio::join!(
        l.staff()
            .act("retry-1", "alice", StaffAction::Retry { note: None }),
        l.staff()
            .act("retry-1", "alice", StaffAction::Retry { note: None })
    );
    assert_eq!(
        [a.is_ok(), b.is_ok()].iter().filter(|ok| **ok).count(),
        1,
        "{a:?} {b:?}"
    );
    let d = l.read().show("retry-1", "t").await.unwrap();
    assert_eq!(d.op.state, State::Pending);
    assert_eq!(
        d.history
            .iter()
            .filter(|e| e.kind == "retry_requested")
            .count(),
        1
    );
}

async fn every_action_writes_exactly_one_event(db: &TestDb) {
    let l = ledger(db).await;
    let events = |l: &Ledger| {
        let l = l.clone();
        async move { l.counts().await.unwrap().2 }
    };
    let mut n = events(&l).await;
    let mut step = |label: &str, now: i64| {
        assert_eq!(now, n + 1, "{label} writes one event");
        n = now;
    };
    l.record(&intent("ev-1", "crm", json!({})), "bot")
        .await
        .unwrap();
    step("record", events(&l).await);
    l.report_attempt(&outcome("ev-1", Outcome::Unknown, None), "bot")
        .await
        .unwrap();
    step("attempt", events(&l).await);
    claim(&l, "ev-1", "alice").await.unwrap();
    step("claim", events(&l).await);
    l.staff()
        .act(
            "ev-1",
            "alice",
            StaffAction::Note {
                text: "checking".into(),
            },
        )
        .await
        .unwrap();
    step("note", events(&l).await);
    l.staff()
        .act("ev-1", "alice", StaffAction::ReconcileAbsent { note: None })
        .await
        .unwrap();
    step("reconcile absent", events(&l).await);
    l.staff()
        .act("ev-1", "alice", StaffAction::Release)
        .await
        .unwrap();
    step("release", events(&l).await);
    claim(&l, "ev-1", "bob").await.unwrap();
    step("claim", events(&l).await);
    l.staff()
        .act("ev-1", "bob", StaffAction::Retry { note: None })
        .await
        .unwrap();
    step("retry", events(&l).await);
    claim(&l, "ev-1", "bob").await.unwrap();
    step("claim", events(&l).await);
    l.staff()
        .act(
            "ev-1",
            "bob",
            StaffAction::Close {
                resolution: Resolution::Abandoned,
                reference: None,
                superseded_by: None,
                note: "dropped".into(),
            },
        )
        .await
        .unwrap();
    step("close", events(&l).await);
    l.staff()
        .pause("onboarding", "incident", "bob")
        .await
        .unwrap();
    step("pause", events(&l).await);
    l.staff().resume("onboarding", "bob").await.unwrap();
    step("resume", events(&l).await);
    // refusals write nothing
    assert!(
        l.staff()
            .act("ev-1", "bob", StaffAction::Retry { note: None })
            .await
            .is_err()
    );
    assert_eq!(events(&l).await, n);
}

async fn events_are_append_only(db: &TestDb) {
    let l = ledger(db).await;
    l.record(&intent("ap-1", "crm", json!({})), "bot")
        .await
        .unwrap();
    l.close().await;
    let mut c = common::Raw::connect(&db.url).await;
    let update = c.execute("UPDATE events SET actor = 'mallory'").await;
    let delete = c.execute("DELETE FROM events").await;
    for r in [update, delete] {
        let err = r.expect_err("the audit refuses to change");
        assert!(err.contains("append-only"), "{err}");
    }
    let n = c
        .int("SELECT COUNT(*) FROM events WHERE actor = 'bot'")
        .await;
    assert_eq!(n, 1);
}

/// A file of new work is ingested without looking its keys up first; a batch that holds stored
/// keys among the new ones (an intent of a stored key first, then new keys and attempts for
/// both) is seen for what it is and judged the ordinary way: the stored ones unchanged or in
/// conflict, the new ones made, every attempt on its own operation.
async fn a_batch_of_new_and_stored_keys(db: &TestDb) {
    let l = ledger(db).await;
    let intent_line = |k: &str, n: i64| {
        format!(
            r#"{{"type":"intent","key":"{k}","workflow":"onboarding","destination":"crm","action":"create_task","payload":{{"n":{n}}}}}"#
        )
    };
    let attempt_line = |k: &str| {
        format!(
            r#"{{"type":"attempt","key":"{k}","attempt":1,"outcome":"unknown","error":"read timeout"}}"#
        )
    };
    let first: String = (0..10)
        .map(|i| intent_line(&format!("mix-{i}"), i) + "\n")
        .collect();
    assert_eq!(l.ingest(first.as_bytes(), "bot").await.unwrap().created, 10);
    let mut mixed = String::new();
    for i in 0..20 {
        let k = format!("mix-{i}");
        // the stored ones come first in the batch; mix-3 with new contents
        mixed.push_str(&(intent_line(&k, if i == 3 { -3 } else { i }) + "\n"));
        mixed.push_str(&(attempt_line(&k) + "\n"));
    }
    let r = l.ingest(mixed.as_bytes(), "bot").await.unwrap();
    assert_eq!(
        (r.created, r.unchanged, r.conflicts, r.attempts),
        (10, 9, 1, 19),
        "{:?}",
        r.problems
    );
    assert_eq!(state(&l, "mix-3").await, State::Conflict);
    for i in (0..20).filter(|i| *i != 3) {
        let d = l.read().show(&format!("mix-{i}"), "t").await.unwrap();
        assert_eq!(
            (d.op.state, d.attempt_log.len()),
            (State::Unknown, 1),
            "mix-{i}"
        );
    }
    assert_eq!(l.counts().await.unwrap().0, 20);
}

async fn ingesting_twice_changes_nothing(db: &TestDb) {
    let l = ledger(db).await;
    let mut text = String::new();
    for i in 0..1200 {
        text.push_str(&format!(
            r#"{{"type":"intent","key":"ing-{i}","workflow":"onboarding","step":"create-task","destination":"crm","action":"create_task","payload":{{"n":{i}}}}}"#
        ));
        text.push('\n');
        if i % 3 == 0 {
            text.push_str(&format!(r#"{{"type":"attempt","key":"ing-{i}","attempt":1,"outcome":"unknown","error":"read timeout"}}"#));
            text.push('\n');
        }
    }
    text.push_str("{not json\n");
    text.push_str(r#"{"type":"intent","key":"bad key","workflow":"w","destination":"d","action":"a","payload":{}}"#);
    text.push('\n');
    let r1 = l.ingest(text.as_bytes(), "bot").await.unwrap();
    assert_eq!((r1.created, r1.attempts, r1.malformed()), (1200, 400, 2));
    assert_eq!(
        r1.problems.iter().map(|p| p.line).collect::<Vec<_>>(),
        vec![1601, 1602]
    );
    let after_first = l.counts().await.unwrap();
    assert_eq!(after_first, (1200, 400, 1600));
    let r2 = l.ingest(text.as_bytes(), "bot").await.unwrap();
    assert_eq!((r2.created, r2.attempts, r2.unchanged), (0, 0, 1600));
    assert_eq!(
        l.counts().await.unwrap(),
        after_first,
        "operations, attempts and events unchanged"
    );
    // changed contents under a known key: a conflict that keeps both; a terminal one is refused
    l.report_attempt(
        &AttemptReport {
            reference: Some("C-1".into()),
            ..outcome("ing-1", Outcome::Accepted, None)
        },
        "bot",
    )
    .await
    .unwrap();
    let changed = concat!(
        r#"{"type":"intent","key":"ing-2","workflow":"onboarding","step":"create-task","destination":"crm","action":"create_task","payload":{"n":-2}}"#,
        "\n",
        r#"{"type":"intent","key":"ing-1","workflow":"onboarding","step":"create-task","destination":"crm","action":"create_task","payload":{"n":-1}}"#,
        "\n"
    );
    let r3 = l.ingest(changed.as_bytes(), "bot").await.unwrap();
    assert_eq!((r3.conflicts, r3.refused()), (1, 1));
    assert_eq!(state(&l, "ing-2").await, State::Conflict);
    assert_eq!(l.read().show("ing-1", "t").await.unwrap().payload["n"], 1);
    // a new key three times in one run of intents (new ones go in many to a statement): created
    // once, the same again unchanged, changed contents a conflict, each judged in line order
    let line = |key: &str, n: i64| {
        format!(
            r#"{{"type":"intent","key":"{key}","workflow":"onboarding","destination":"crm","action":"create_task","payload":{{"n":{n}}}}}"#
        ) + "\n"
    };
    let before = l.counts().await.unwrap();
    let run = [
        line("rep-1", 1),
        line("rep-1", 1),
        line("rep-2", 2),
        line("rep-1", 9),
    ]
    .concat();
    let r4 = l.ingest(run.as_bytes(), "bot").await.unwrap();
    assert_eq!((r4.created, r4.unchanged, r4.conflicts), (2, 1, 1));
    assert_eq!(state(&l, "rep-1").await, State::Conflict);
    assert_eq!(state(&l, "rep-2").await, State::Pending);
    assert_eq!(l.read().show("rep-1", "t").await.unwrap().payload["n"], 1);
    let after = l.counts().await.unwrap();
    assert_eq!(
        (after.0 - before.0, after.1 - before.1, after.2 - before.2),
        (2, 0, 3),
        "two operations; recorded twice and one conflict in the audit"
    );
}

/// States: the sweep treats an interrupted attempt as an unknown outcome: at a destination that
/// deduplicates (projects) it goes to `retry_wait`, elsewhere to `unknown` (interrupted), whose
/// next step is a lookup where the destination has one (crm), else a person's reconcile (sms).
async fn sweep_interrupts_stuck_attempts_but_not_claimed_ones(db: &TestDb) {
    let t0 = Utc::now();
    let (l, clock) = ledger_at(db, t0).await;
    for (key, dest) in [
        ("sw-1", "crm"),
        ("sw-2", "crm"),
        ("sw-3", "crm"),
        ("sw-4", "sms"),
        ("sw-5", "projects"),
    ] {
        l.record(&intent(key, dest, json!({})), "bot")
            .await
            .unwrap();
        l.start_attempt(key, "dispatcher").await.unwrap();
    }
    claim(&l, "sw-2", "alice").await.unwrap();
    *clock.lock().unwrap() = t0 + TimeDelta::minutes(2);
    assert_eq!(
        l.rounds().sweep().await.unwrap(),
        0,
        "nothing is past its timeout yet"
    );
    *clock.lock().unwrap() = t0 + TimeDelta::minutes(6);
    // in_flight past its timeout is an exception even before the sweep
    let queue = l
        .read()
        .list(&ListFilter::default(), "t", None, 10)
        .await
        .unwrap();
    assert_eq!(queue.items.len(), 5);
    assert_eq!(l.rounds().sweep().await.unwrap(), 4);
    assert_eq!(state(&l, "sw-1").await, State::Unknown);
    assert_eq!(
        state(&l, "sw-2").await,
        State::InFlight,
        "a live claim keeps the sweep away"
    );
    let d = l.read().show("sw-3", "t").await.unwrap();
    assert_eq!(
        d.op.next_step,
        "Look up sw-3 in crm, then reconcile found/absent"
    );
    assert_eq!(d.attempt_log[0].outcome, Some(Outcome::Unknown));
    let d = l.read().show("sw-4", "t").await.unwrap();
    assert_eq!(
        (d.op.state, d.op.next_step.as_str()),
        (
            State::Unknown,
            "Attempt interrupted: reconcile as an unknown outcome"
        )
    );
    let d = l.read().show("sw-5", "t").await.unwrap();
    assert_eq!(
        d.op.state,
        State::RetryWait,
        "the next attempt with the same key settles it"
    );
    assert_eq!(d.attempt_log[0].outcome, Some(Outcome::Unknown));
    assert_eq!(
        l.read()
            .list(&ListFilter::default(), "t", None, 10)
            .await
            .unwrap()
            .items
            .len(),
        4,
        "no longer an exception"
    );
}

/// Runs: a run's state from its operations and its declared steps, as the clock moves:
/// running inside the gap, stalled past it (naming the step it stopped after and the missing
/// one), running again, blocked on an unknown, done once reconciled.
async fn a_runs_state_follows_its_steps_and_the_clock(db: &TestDb) {
    use settle::domain::run::RunState;
    let t0 = DateTime::from_timestamp(1_800_000_000, 0).unwrap();
    let mut config = common::config();
    config.workflows.insert(
        "onboarding".into(),
        settle::config::WorkflowConfig {
            steps: vec!["create-customer".into(), "create-task".into()],
            step_gap: Some(std::time::Duration::from_secs(15 * 60)),
            ..Default::default()
        },
    );
    let clock = Arc::new(Mutex::new(t0));
    let c = clock.clone();
    let l = Ledger::open(&db.url, config)
        .await
        .unwrap()
        .with_clock(move || *c.lock().unwrap());
    let at = |minutes: i64| *clock.lock().unwrap() = t0 + TimeDelta::minutes(minutes);
    let step = |key: &str, step: &str| Intent {
        step: step.into(),
        run: Some("onb-42".into()),
        ..intent(key, "crm", json!({}))
    };
    assert!(matches!(
        l.read().run("onb-42", "t").await,
        Err(settle::Error::NotFound(_))
    ));
    assert!(matches!(
        l.read().run("onb 42", "t").await,
        Err(settle::Error::Invalid(_))
    ));

    l.record(&step("onb-42:customer", "create-customer"), "bot")
        .await
        .unwrap();
    let r = l.read().run("onb-42", "t").await.unwrap();
    assert_eq!(
        (r.state, r.workflow.as_str(), r.declared),
        (RunState::Running, "onboarding", true)
    );
    let accepted = AttemptReport {
        reference: Some("CUST-77".into()),
        ..outcome("onb-42:customer", Outcome::Accepted, None)
    };
    l.report_attempt(&accepted, "bot").await.unwrap();
    at(10);
    let r = l.read().run("onb-42", "t").await.unwrap();
    assert_eq!(
        r.state,
        RunState::Running,
        "inside the gap: {}",
        r.next_step
    );
    assert!(r.next_step.contains("create-task"), "{}", r.next_step);
    at(16);
    let r = l.read().run("onb-42", "t").await.unwrap();
    assert_eq!(r.state, RunState::Stalled, "past the gap");
    assert!(
        r.next_step.contains("stopped after create-customer")
            && r.next_step.contains("create-task was never recorded"),
        "{}",
        r.next_step
    );
    assert_eq!(r.since, t0 + TimeDelta::minutes(15));
    let shown: Vec<(&str, &str, Option<&str>)> = r
        .steps
        .iter()
        .map(|s| (s.step.as_str(), s.state.as_str(), s.reference.as_deref()))
        .collect();
    assert_eq!(
        shown,
        [
            ("create-customer", "succeeded", Some("CUST-77")),
            ("create-task", "not_recorded", None)
        ]
    );

    // the rerun records the missing step: running, then blocked on its unknown outcome
    l.record(&step("onb-42:task", "create-task"), "bot")
        .await
        .unwrap();
    assert_eq!(
        l.read().run("onb-42", "t").await.unwrap().state,
        RunState::Running
    );
    l.report_attempt(
        &outcome("onb-42:task", Outcome::Unknown, Some("timeout")),
        "bot",
    )
    .await
    .unwrap();
    let r = l.read().run("onb-42", "t").await.unwrap();
    assert_eq!(r.state, RunState::Blocked);
    assert!(
        r.next_step.starts_with("create-task (onb-42:task): "),
        "{}",
        r.next_step
    );
    l.staff()
        .act(
            "onb-42:task",
            "alice",
            StaffAction::ReconcileFound {
                reference: "TASK-9".into(),
                note: None,
            },
        )
        .await
        .unwrap();
    let r = l.read().run("onb-42", "t").await.unwrap();
    assert_eq!(r.state, RunState::Done, "{}", r.next_step);

    // the filter's run: term: the operations of a run, or (negated) every other one
    l.record(&intent("no-run", "sms", json!({})), "bot")
        .await
        .unwrap();
    let keys = |text: &'static str| common::keys_listed(&l, settle::Scope::All, text, "t");
    assert_eq!(keys("run:onb-42").await, ["onb-42:customer", "onb-42:task"]);
    assert_eq!(keys("-run:onb-42").await, ["no-run"]);

    // a workflow without declared steps: never stalled, done once every step is terminal
    let mut free = step("free-1:a", "anything");
    free.workflow = "crm-sync".into();
    free.run = Some("free-1".into());
    l.record(&free, "bot").await.unwrap();
    l.report_attempt(&outcome("free-1:a", Outcome::Accepted, None), "bot")
        .await
        .unwrap();
    at(600);
    let r = l.read().run("free-1", "t").await.unwrap();
    assert_eq!((r.state, r.declared), (RunState::Done, false));
}

async fn the_stopping_threshold_pauses_a_workflow(db: &TestDb) {
    let l = ledger(db).await;
    for i in 0..3 {
        let key = format!("g-{i}");
        let mut it = intent(&key, "sms", json!({}));
        it.workflow = "guarded".into();
        l.record(&it, "bot").await.unwrap();
        assert!(l.read().stats().await.unwrap().paused_workflows.is_empty());
        l.report_attempt(&outcome(&key, Outcome::Rejected, Some("bad")), "bot")
            .await
            .unwrap();
    }
    let stats = l.read().stats().await.unwrap();
    assert_eq!(stats.paused_workflows, vec!["guarded".to_string()]);
    // the totals say why the pause holds: the threshold's numbers, by settle itself
    let why = &stats.pauses[0];
    assert_eq!(
        (why.what, why.name.as_str(), why.by.as_deref()),
        ("workflow", "guarded", Some("settle"))
    );
    assert_eq!(
        why.reason.as_deref(),
        Some("stopping threshold: 3 unresolved exceptions (limit 3)")
    );
    assert!(
        stats.to_string().contains(
            "  workflow guarded: stopping threshold: 3 unresolved exceptions (limit 3) (by settle, "
        ),
        "{stats}"
    );
    let paused = l.read().paused_workflows().await.unwrap();
    assert_eq!(paused[0].by.as_deref(), Some("settle"));
    assert!(
        paused[0]
            .reason
            .as_deref()
            .unwrap()
            .contains("3 unresolved")
    );
    // the paused workflow starts no attempt; nothing pending is lost
    let mut it = intent("g-9", "sms", json!({}));
    it.workflow = "guarded".into();
    l.record(&it, "bot").await.unwrap();
    assert!(matches!(
        l.start_attempt("g-9", "dispatcher").await,
        Err(Error::Refused(_))
    ));
    assert!(l.staff().resume("guarded", "alice").await.unwrap());
    assert_eq!(
        l.start_attempt("g-9", "dispatcher").await.unwrap().to,
        State::InFlight
    );
}

async fn lists_page_by_keyset_oldest_first(db: &TestDb) {
    let t0 = Utc::now() - TimeDelta::hours(3);
    let (l, clock) = ledger_at(db, t0).await;
    for i in 0..25 {
        *clock.lock().unwrap() = t0 + TimeDelta::minutes(i);
        let key = format!("pg-{i:02}");
        l.record(&intent(&key, "crm", json!({})), "bot")
            .await
            .unwrap();
        if i % 2 == 0 {
            l.report_attempt(&outcome(&key, Outcome::Unknown, None), "bot")
                .await
                .unwrap();
        }
    }
    *clock.lock().unwrap() = t0 + TimeDelta::hours(2);
    let mut seen = Vec::new();
    let mut after = None;
    loop {
        let Page { items, next, .. } = l
            .read()
            .list(&ListFilter::default(), "t", after, 4)
            .await
            .unwrap();
        seen.extend(items.iter().map(|v| v.key.clone()));
        match next {
            Some(c) => after = Some(c),
            None => break,
        }
    }
    let want: Vec<String> = (0..25).step_by(2).map(|i| format!("pg-{i:02}")).collect();
    assert_eq!(seen, want, "every exception once, oldest first");
    let all = l
        .read()
        .list(
            &ListFilter {
                scope: Scope::All,
                ..Default::default()
            },
            "t",
            None,
            100,
        )
        .await
        .unwrap();
    assert_eq!(all.items.len(), 25);
    let older = ListFilter {
        older_than: Some(std::time::Duration::from_secs(110 * 60)),
        ..Default::default()
    };
    let old = l.read().list(&older, "t", None, 100).await.unwrap();
    assert_eq!(
        old.items.iter().map(|v| v.key.as_str()).collect::<Vec<_>>(),
        ["pg-00", "pg-02", "pg-04", "pg-06", "pg-08", "pg-10"]
    );
    let failed = ListFilter {
        scope: Scope::All,
        state: Some(State::Pending),
        ..Default::default()
    };
    assert_eq!(
        l.read()
            .list(&failed, "t", None, 100)
            .await
            .unwrap()
            .items
            .len(),
        12
    );
}

async fn readers_never_see_sensitive_values(db: &TestDb) {
    let l = ledger(db).await;
    let secrets = [
        "ada@example.com",
        "4111111111111111",
        "abc.def-123",
        "+44 7700 900123",
        "Zebulon Quixote",
    ];
    let mut it = intent(
        "red-1",
        "crm",
        json!({"customer": {"name": "Zebulon Quixote", "contact": "ada@example.com"},
        "memo": "card 4111111111111111, call +44 7700 900123", "auth": "Bearer abc.def-123"}),
    );
    it.action = "upsert".into();
    l.record(&it, "bot").await.unwrap();
    let err = "502 from crm: Zebulon Quixote (ada@example.com, +44 7700 900123) Authorization: Bearer abc.def-123 card 4111111111111111";
    l.report_attempt(&outcome("red-1", Outcome::Rejected, Some(err)), "bot")
        .await
        .unwrap();
    let shown = serde_json::to_string(&l.read().show("red-1", "t").await.unwrap()).unwrap();
    let listed = serde_json::to_string(
        &l.read()
            .list(&ListFilter::default(), "t", None, 10)
            .await
            .unwrap()
            .items,
    )
    .unwrap();
    for s in secrets {
        assert!(!shown.contains(s), "{s} in show: {shown}");
        assert!(!listed.contains(s), "{s} in list: {listed}");
    }
    assert!(shown.contains("[redacted]"));
}

fn transient(key: &str) -> Finished {
    Finished {
        report: outcome(
            key,
            Outcome::Transient,
            Some("HTTP 503: not done, try later"),
        ),
        lookup: None,
        pause_destination: None,
    }
}

/// the budget (manual: Automatic retries) is per destination, kept in the database: two dispatchers (two ledgers on one
/// database) draw on the same 500 tokens; a retry costs 5; an empty budget leaves the operation
/// in `retry_wait` without holding up first attempts; time refills it; a first-try success
/// refunds one token.
async fn the_retry_budget_is_shared_by_every_dispatcher(db: &TestDb) {
    let t0 = Utc::now();
    let clock = Arc::new(Mutex::new(t0));
    let c = clock.clone();
    let a = budget_only(db).await.with_clock(move || *c.lock().unwrap());
    let c = clock.clone();
    let b = budget_only(db).await.with_clock(move || *c.lock().unwrap());
    let dests = vec!["projects".to_string()];
    let keys: Vec<String> = (0..120).map(|i| format!("budget-{i:03}")).collect();
    for k in &keys {
        a.record(&intent(k, "projects", json!({"n": k})), "bot")
            .await
            .unwrap();
    }
    // first attempts cost nothing, even beyond the budget's size
    let first = a
        .rounds()
        .round(&[], &dests, 500, "dispatcher")
        .await
        .unwrap();
    assert_eq!(first.started.len(), 120);
    assert!(first.started.iter().all(|s| s.attempt == 1 && !s.retry));
    let failed: Vec<Finished> = keys.iter().map(|k| transient(k)).collect();
    let recorded = a
        .rounds()
        .round(&failed, &dests, 0, "dispatcher")
        .await
        .unwrap();
    assert!(
        recorded
            .finished
            .iter()
            .all(|r| r.as_ref().unwrap().to == State::RetryWait)
    );
    assert_eq!(a.read().retry_budget("projects").await.unwrap(), 500);
    // every first retry is due within base = 1 s (full jitter); the budget did not change
    *clock.lock().unwrap() = t0 + TimeDelta::seconds(2);
    let by_a = a
        .rounds()
        .round(&[], &dests, 60, "dispatcher")
        .await
        .unwrap();
    let by_b = b
        .rounds()
        .round(&[], &dests, 60, "dispatcher")
        .await
        .unwrap();
    assert_eq!(by_a.started.len(), 60);
    assert!(by_a.started.iter().all(|s| s.attempt == 2 && s.retry));
    assert_eq!(by_b.started.len(), 40, "500 / 5 = 100 retries in all");
    assert_eq!(by_b.waiting_for_budget.len(), 20);
    assert_eq!(a.read().retry_budget("projects").await.unwrap(), 0);
    // a script's start (manual: The protocol) follows the same budget: the retry waits
    let refused = a
        .start_attempt(&by_b.waiting_for_budget[0], "script")
        .await
        .unwrap_err();
    assert!(
        matches!(&refused, settle::Error::Refused(m) if m.contains("retry budget of projects is spent")),
        "{refused}"
    );
    for k in &by_b.waiting_for_budget {
        assert_eq!(
            state(&a, k).await,
            State::RetryWait,
            "it waits for the budget"
        );
    }
    // an empty budget holds back retries only: a new operation behind them still goes
    a.record(&intent("budget-new", "projects", json!({})), "bot")
        .await
        .unwrap();
    let new = b
        .rounds()
        .round(&[], &dests, 5, "dispatcher")
        .await
        .unwrap();
    assert_eq!(new.started.len(), 1);
    assert_eq!(new.started[0].key, "budget-new");
    // 5 tokens a second: after 2 s two more retries may go
    *clock.lock().unwrap() = t0 + TimeDelta::seconds(4);
    assert_eq!(b.read().retry_budget("projects").await.unwrap(), 10);
    let later = a
        .rounds()
        .round(&[], &dests, 100, "dispatcher")
        .await
        .unwrap();
    assert_eq!(later.started.len(), 2);
    assert_eq!(later.waiting_for_budget.len(), 18);
    assert_eq!(a.read().retry_budget("projects").await.unwrap(), 0);
    // a first-try success refunds one token; a retry's success does not
    let ok = |k: &str| Finished {
        report: AttemptReport {
            reference: Some("T-1".into()),
            ..outcome(k, Outcome::Accepted, None)
        },
        lookup: None,
        pause_destination: None,
    };
    let done = b
        .rounds()
        .round(
            &[ok("budget-new"), ok(&by_a.started[0].key)],
            &dests,
            0,
            "dispatcher",
        )
        .await
        .unwrap();
    assert!(
        done.finished
            .iter()
            .all(|r| r.as_ref().unwrap().to == State::Succeeded)
    );
    assert_eq!(a.read().retry_budget("projects").await.unwrap(), 1);
}

/// A busy dispatcher's round decides the answers it records on the rows the rounds that started
/// them left (`round_knowing`), reading nothing again; a row another writer changed meanwhile (a
/// note, a claim) is seen all the same: the compare-and-set on the stale row fails and the round
/// is decided again on what the database holds, writing each change once.
async fn a_round_on_known_rows_sees_other_writers(db: &TestDb) {
    let l = ledger(db).await;
    let dests = vec!["projects".to_string()];
    for k in ["known-1", "known-2"] {
        l.record(&intent(k, "projects", json!({})), "bot")
            .await
            .unwrap();
    }
    let started = l
        .rounds()
        .round(&[], &dests, 10, "dispatcher")
        .await
        .unwrap();
    let rows = started.started_rows();
    assert_eq!(rows.len(), 2, "each start leaves its row");
    // meanwhile a person works known-2: a claim and a note change its row
    claim(&l, "known-2", "alice").await.unwrap();
    l.staff()
        .act(
            "known-2",
            "alice",
            StaffAction::Note {
                text: "customer called".into(),
            },
        )
        .await
        .unwrap();
    let ok = |k: &str| Finished {
        report: AttemptReport {
            reference: Some(format!("T-{k}")),
            ..outcome(k, Outcome::Accepted, None)
        },
        lookup: None,
        pause_destination: None,
    };
    let done = l
        .rounds()
        .round_knowing(
            &[ok("known-1"), ok("known-2")],
            &rows,
            &dests,
            0,
            "dispatcher",
        )
        .await
        .unwrap();
    assert!(
        done.finished
            .iter()
            .all(|r| r.as_ref().unwrap().to == State::Succeeded),
        "{:?}",
        done.finished
    );
    for k in ["known-1", "known-2"] {
        let d = l.read().show(k, "t").await.unwrap();
        assert_eq!(d.op.reference.as_deref(), Some(format!("T-{k}").as_str()));
        let kinds: Vec<&str> = d.history.iter().map(|e| e.kind.as_str()).collect();
        assert_eq!(
            kinds.iter().filter(|k| **k == "attempt").count(),
            1,
            "{k}: one event for its answer: {kinds:?}"
        );
    }
    let kept = l.read().show("known-2", "t").await.unwrap();
    assert!(
        kept.history.iter().any(|e| e.kind == "note"),
        "the note made meanwhile is kept"
    );
    // every change counted once on top of the other: record 0, start 1, claim 2, note 3, answer 4
    let mut raw = common::Raw::connect(&db.url).await;
    let version = |k: &str| format!("SELECT version FROM operations WHERE key = '{k}'");
    assert_eq!(raw.int(&version("known-1")).await, 2);
    assert_eq!(
        raw.int(&version("known-2")).await,
        4,
        "decided on the row as it is, not as it was"
    );
}

/// Rounds of two dispatchers at once draw on one budget: however their rounds interleave, no
/// more retries start than it pays for (500 / 5 = 100), none twice, and it ends empty, never
/// below. A round reads the budget without holding it and holds it (reading it again) only to
/// change it; this is where a change made to an earlier reading would overspend.
async fn rounds_at_once_never_spend_more_than_the_budget(db: &TestDb) {
    let t0 = Utc::now();
    let clock = Arc::new(Mutex::new(t0));
    let c = clock.clone();
    let a = budget_only(db).await.with_clock(move || *c.lock().unwrap());
    let c = clock.clone();
    let b = budget_only(db).await.with_clock(move || *c.lock().unwrap());
    let dests = vec!["projects".to_string()];
    let keys: Vec<String> = (0..150).map(|i| format!("spend-{i:03}")).collect();
    for k in &keys {
        a.record(&intent(k, "projects", json!({"n": k})), "bot")
            .await
            .unwrap();
    }
    let first = a
        .rounds()
        .round(&[], &dests, 500, "dispatcher")
        .await
        .unwrap();
    assert_eq!(first.started.len(), 150);
    let failed: Vec<Finished> = keys.iter().map(|k| transient(k)).collect();
    a.rounds()
        .round(&failed, &dests, 0, "dispatcher")
        .await
        .unwrap();
    // every retry is due; the clock stands still, so nothing refills the budget
    *clock.lock().unwrap() = t0 + TimeDelta::seconds(2);
    let run = |l: Ledger, name: &'static str| async move {
        let dests = vec!["projects".to_string()];
        let mut mine: Vec<String> = Vec::new();
        loop {
            let round = l.rounds().round(&[], &dests, 7, name).await.unwrap();
            if round.started.is_empty() {
                return mine;
            }
            assert!(round.started.iter().all(|s| s.retry && s.attempt == 2));
            mine.extend(round.started.into_iter().map(|s| s.key));
        }
    };
    let (by_a, by_b) = tokio::join!(
        tokio::spawn(run(a.clone(), "dispatcher-a")),
        tokio::spawn(run(b, "dispatcher-b"))
    );
    let mut all: Vec<String> = by_a.unwrap().into_iter().chain(by_b.unwrap()).collect();
    all.sort();
    let before = all.len();
    all.dedup();
    assert_eq!(before, all.len(), "a retry was started twice");
    assert_eq!(all.len(), 100, "the budget pays for exactly 100 retries");
    assert_eq!(a.read().retry_budget("projects").await.unwrap(), 0);
    let mut waiting = 0;
    for k in &keys {
        match state(&a, k).await {
            State::InFlight => {}
            State::RetryWait => waiting += 1,
            other => panic!("{k}: {other:?}"),
        }
    }
    assert_eq!(waiting, 50, "the rest wait for the budget");
}

/// Two dispatchers' rounds over the same due operations at once: each operation is started by
/// exactly one of them, once, and no round fails (PostgreSQL: rows to start are taken with
/// SKIP LOCKED; SQLite: one writer at a time).
async fn two_dispatchers_never_start_one_operation_twice(db: &TestDb) {
    let a = ledger(db).await;
    let keys: Vec<String> = (0..300).map(|i| format!("race-{i:03}")).collect();
    for k in &keys {
        a.record(&intent(k, "projects", json!({"n": k})), "bot")
            .await
            .unwrap();
    }
    let run = |l: Ledger, name: &'static str| async move {
        let dests = vec!["projects".to_string()];
        let mut mine: Vec<String> = Vec::new();
        let mut in_flight: Vec<Finished> = Vec::new();
        loop {
            let round = l
                .rounds()
                .round(&in_flight, &dests, 16, name)
                .await
                .unwrap();
            assert!(
                round
                    .finished
                    .iter()
                    .all(|r| r.as_ref().unwrap().to == State::Succeeded)
            );
            in_flight = round
                .started
                .iter()
                .map(|s| Finished {
                    report: AttemptReport {
                        reference: Some(format!("T-{}", s.key)),
                        ..outcome(&s.key, Outcome::Accepted, None)
                    },
                    lookup: None,
                    pause_destination: None,
                })
                .collect();
            if in_flight.is_empty() && round.finished.is_empty() {
                return mine;
            }
            mine.extend(round.started.into_iter().map(|s| s.key));
        }
    };
    let b = ledger(db).await;
    let (by_a, by_b) = tokio::join!(
        tokio::spawn(run(a.clone(), "dispatcher-a")),
        tokio::spawn(run(b, "dispatcher-b"))
    );
    let (by_a, by_b) = (by_a.unwrap(), by_b.unwrap());
    let mut all: Vec<&String> = by_a.iter().chain(&by_b).collect();
    all.sort();
    let before = all.len();
    all.dedup();
    assert_eq!(before, all.len(), "an operation was started twice");
    assert_eq!(all.len(), 300, "every operation was started");
    for k in &keys {
        let d = a.read().show(k, "t").await.unwrap();
        assert_eq!(d.op.state, State::Succeeded);
        assert_eq!(d.attempt_log.len(), 1, "{k}: one attempt");
    }
    println!(
        "{}: a started {}, b started {}",
        db.backend,
        by_a.len(),
        by_b.len()
    );
}

/// A script's `start` keeps to the stopping threshold as a round does (manual: The stopping threshold, The protocol): with
/// `unresolved = 3`, never more attempts running than could become the exceptions still short of
/// the limit.
async fn a_callers_start_keeps_to_the_stopping_threshold(db: &TestDb) {
    let l = ledger(db).await;
    for i in 0..5 {
        let mut it = intent(&format!("s-{i}"), "sms", json!({}));
        it.workflow = "guarded".into();
        l.record(&it, "bot").await.unwrap();
    }
    for i in 0..3 {
        // the library's `start`: the attempt number to send
        assert_eq!(l.start(&format!("s-{i}"), "script").await.unwrap(), 1);
    }
    let again = l.start("s-0", "script").await.unwrap_err();
    assert!(
        matches!(&again, Error::Refused(m) if m.contains("in_flight")),
        "{again}"
    );
    let refused = l.start_attempt("s-3", "script").await.unwrap_err();
    assert!(
        matches!(&refused, Error::Refused(m) if m.contains("stopping threshold") && m.contains("3 attempt(s) running")),
        "{refused}"
    );
    assert_eq!(state(&l, "s-3").await, State::Pending, "nothing changed");
    // one is rejected: an exception, two still running: 1 + 2 = the limit, still no room
    let mut r = outcome("s-0", Outcome::Rejected, Some("bad"));
    r.attempt = Some(1);
    l.report_attempt(&r, "script").await.unwrap();
    assert!(l.start_attempt("s-3", "script").await.is_err());
    // one succeeds: room for one more
    let mut r = outcome("s-1", Outcome::Accepted, None);
    r.attempt = Some(1);
    l.report_attempt(&r, "script").await.unwrap();
    assert_eq!(
        l.start_attempt("s-3", "script").await.unwrap().to,
        State::InFlight
    );
    assert!(l.start_attempt("s-4", "script").await.is_err());
}

/// the filter (manual: The filter) through the ledger: every qualifier, negation (also of a missing claim), ages
/// from an injected clock, and bare words, the same on both backends.
async fn the_filter_selects_what_each_term_says(db: &TestDb) {
    let t0 = DateTime::parse_from_rfc3339("2026-11-30T08:00:00Z")
        .unwrap()
        .with_timezone(&Utc);
    let (l, clock) = ledger_at(db, t0).await;
    l.record(&intent("f-1", "sms", json!({})), "bot")
        .await
        .unwrap();
    l.report_attempt(
        &outcome("f-1", Outcome::Unknown, Some("read timeout")),
        "bot",
    )
    .await
    .unwrap();
    *clock.lock().unwrap() = t0 + TimeDelta::hours(1);
    l.record(&intent("f-2", "sms", json!({})), "bot")
        .await
        .unwrap();
    l.report_attempt(&outcome("f-2", Outcome::Rejected, Some("HTTP 422")), "bot")
        .await
        .unwrap();
    l.record(&intent("f-3", "crm", json!({})), "bot")
        .await
        .unwrap();
    l.report_attempt(&outcome("f-3", Outcome::Unknown, Some("HTTP 502")), "bot")
        .await
        .unwrap();
    l.record(&intent("f-4", "projects", json!({})), "bot")
        .await
        .unwrap();
    *clock.lock().unwrap() = t0 + TimeDelta::hours(3);
    claim(&l, "f-3", "bob").await.unwrap();
    let keys = |scope: Scope, text: &'static str, viewer: &'static str| {
        let l = l.clone();
        async move {
            let filter = ListFilter {
                scope,
                query: settle::domain::filter::Filter::parse(text).unwrap(),
                ..Default::default()
            };
            let page = l.read().list(&filter, viewer, None, 50).await.unwrap();
            let mut k: Vec<String> = page.items.into_iter().map(|v| v.key).collect();
            k.sort();
            k.join(" ")
        }
    };
    let ex = Scope::Exceptions;
    for (text, viewer, want) in [
        ("", "alice", "f-1 f-2 f-3"),
        ("dest:sms", "alice", "f-1 f-2"),
        ("dest:sms state:unknown", "alice", "f-1"),
        ("-dest:sms", "alice", "f-3"),
        ("state:unknown,rejected -claimed:any", "alice", "f-1 f-2"),
        ("claimed:bob", "alice", "f-3"),
        ("claimed:me", "bob", "f-3"),
        ("claimed:me", "alice", ""),
        ("claimed:none", "alice", "f-1 f-2"),
        ("-claimed:bob", "alice", "f-1 f-2"),
        ("age>150m", "alice", "f-1"),
        ("age<150m", "alice", "f-2 f-3"),
        ("key:f-*", "alice", "f-1 f-2 f-3"),
        ("key:f-2", "alice", "f-2"),
        ("-key:f-2", "alice", "f-1 f-3"),
        (
            "wf:onboarding step:create-task action:create_task",
            "alice",
            "f-1 f-2 f-3",
        ),
        ("wf:billing", "alice", ""),
        ("TIMEOUT", "alice", "f-1"),
        ("-timeout http", "alice", "f-2 f-3"),
    ] {
        assert_eq!(keys(ex, text, viewer).await, want, "{text} as {viewer}");
    }
    assert_eq!(keys(Scope::All, "state:pending", "alice").await, "f-4");
    assert_eq!(keys(Scope::All, "dest:projects", "alice").await, "f-4");
}

/// Incidents: a bulk retry previews grouped by reason, freezes its set, re-checks each item at its
/// turn (one changed meanwhile is left alone and reported), writes one event per item with one
/// batch id (an unclaimed item claimed in that event), and a stop leaves the rest untouched.
async fn a_bulk_action_previews_freezes_and_acts_item_by_item(db: &TestDb) {
    use std::sync::atomic::AtomicBool;
    let l = ledger(db).await;
    for k in ["b-1", "b-2", "b-3", "b-4", "b-5", "b-6"] {
        l.record(&intent(k, "sms", json!({})), "bot").await.unwrap();
    }
    for k in ["b-1", "b-2", "b-3", "b-5"] {
        l.report_attempt(&outcome(k, Outcome::Rejected, Some("HTTP 422")), "bot")
            .await
            .unwrap();
    }
    l.report_attempt(&outcome("b-4", Outcome::Unknown, Some("timeout")), "bot")
        .await
        .unwrap();
    l.report_attempt(&outcome("b-6", Outcome::Accepted, None), "bot")
        .await
        .unwrap();
    claim(&l, "b-5", "bob").await.unwrap();
    let keys: Vec<String> = ["b-1", "b-2", "b-3", "b-4", "b-5", "b-6", "nope"]
        .map(String::from)
        .to_vec();
    let retry = StaffAction::Retry { note: None };
    let p = l
        .staff()
        .bulk_preview(&keys, &retry, "alice")
        .await
        .unwrap();
    assert_eq!(p.matched, 7);
    assert_eq!(p.eligible, vec!["b-1", "b-2", "b-3"]);
    let refused: Vec<(String, Vec<String>)> = p.refused.clone().into_iter().collect();
    assert_eq!(
        refused,
        vec![
            ("already terminal".into(), vec!["b-6".into()]),
            ("claimed by another".into(), vec!["b-5".into()]),
            ("no such operation".into(), vec!["nope".into()]),
            (
                "unknown at a destination that does not deduplicate".into(),
                vec!["b-4".into()]
            ),
        ]
    );
    // the preview wrote nothing
    assert_eq!(state(&l, "b-1").await, State::Rejected);
    // b-3 changes after the preview: bob claims it
    claim(&l, "b-3", "bob").await.unwrap();
    let stop = AtomicBool::new(false);
    let mut seen = Vec::new();
    let r = l
        .staff()
        .bulk_apply(&p.eligible, &retry, "alice", &stop, None, |i, n| {
            seen.push((i, n))
        })
        .await
        .unwrap();
    assert_eq!(r.done, vec!["b-1", "b-2"]);
    assert_eq!(
        r.changed_meanwhile.values().flatten().collect::<Vec<_>>(),
        vec!["b-3"]
    );
    assert!(r.not_reached.is_empty());
    assert_eq!(seen, vec![(1, 3), (2, 3), (3, 3)]);
    for k in ["b-1", "b-2"] {
        let d = l.read().show(k, "alice").await.unwrap();
        assert_eq!(d.op.state, State::Pending);
        let batched: Vec<_> = d
            .history
            .iter()
            .filter(|e| e.detail.get("batch").is_some())
            .collect();
        assert_eq!(batched.len(), 1, "{k}: one event for the item");
        assert_eq!(batched[0].kind, "retry_requested");
        assert_eq!(batched[0].detail["batch"], r.batch.as_str());
        assert_eq!(batched[0].detail["claimed"], true);
    }
    assert_eq!(state(&l, "b-3").await, State::Rejected, "left alone");
    // stopped before it began: nothing is touched
    let stop = AtomicBool::new(true);
    let close = StaffAction::Close {
        resolution: Resolution::Abandoned,
        reference: None,
        superseded_by: None,
        note: "outage".into(),
    };
    let r = l
        .staff()
        .bulk_apply(
            &["b-1".to_string()],
            &close,
            "alice",
            &stop,
            None,
            |_, _| {},
        )
        .await
        .unwrap();
    assert_eq!((r.done.len(), r.not_reached.len()), (0, 1));
    assert_eq!(state(&l, "b-1").await, State::Pending);
}

/// the paced (manual: Many at once) retry: `retry --rate 10/s` spaces the items' next attempts 100 ms apart,
/// the first at once, each noted in its event.
async fn a_paced_bulk_retry_spaces_the_next_attempts(db: &TestDb) {
    use std::sync::atomic::AtomicBool;
    let t0 = DateTime::parse_from_rfc3339("2026-11-30T08:00:00Z")
        .unwrap()
        .with_timezone(&Utc);
    let (l, _clock) = ledger_at(db, t0).await;
    let keys: Vec<String> = (0..4).map(|i| format!("p-{i}")).collect();
    for k in &keys {
        l.record(&intent(k, "sms", json!({})), "bot").await.unwrap();
        l.report_attempt(&outcome(k, Outcome::Rejected, Some("HTTP 422")), "bot")
            .await
            .unwrap();
    }
    let retry = StaffAction::Retry { note: None };
    let stop = AtomicBool::new(false);
    let pace = Some(std::time::Duration::from_millis(100));
    let r = l
        .staff()
        .bulk_apply(&keys, &retry, "alice", &stop, pace, |_, _| {})
        .await
        .unwrap();
    assert_eq!(r.done.len(), 4);
    for (i, k) in keys.iter().enumerate() {
        let d = l.read().show(k, "alice").await.unwrap();
        assert_eq!(d.op.state, State::Pending);
        assert_eq!(
            d.op.next_attempt_at,
            Some(t0 + TimeDelta::milliseconds(100 * i as i64)),
            "{k}"
        );
    }
}

/// `S` (manual: The console): a reversed list pages the same keyset the other way, newest first, in every
/// direction the console moves (first, after, before, in place, last).
async fn a_reversed_list_pages_newest_first(db: &TestDb) {
    use settle::ledger::Position;
    let t0 = DateTime::parse_from_rfc3339("2026-11-30T08:00:00Z")
        .unwrap()
        .with_timezone(&Utc);
    let (l, clock) = ledger_at(db, t0).await;
    for i in 0..5 {
        *clock.lock().unwrap() = t0 + TimeDelta::minutes(i);
        let k = format!("e-{i}");
        l.record(&intent(&k, "sms", json!({})), "bot")
            .await
            .unwrap();
        l.report_attempt(&outcome(&k, Outcome::Unknown, Some("timeout")), "bot")
            .await
            .unwrap();
    }
    *clock.lock().unwrap() = t0 + TimeDelta::hours(1);
    let filter = ListFilter {
        scope: Scope::Exceptions,
        reverse: true,
        ..Default::default()
    };
    let keys = |p: &Page| p.items.iter().map(|v| v.key.clone()).collect::<Vec<_>>();
    let first = l
        .read()
        .page(&filter, "alice", &Position::First, 2)
        .await
        .unwrap();
    assert_eq!(keys(&first), ["e-4", "e-3"]);
    assert!(first.more_after && !first.more_before);
    let second = l
        .read()
        .page(
            &filter,
            "alice",
            &Position::After(first.next.clone().unwrap()),
            2,
        )
        .await
        .unwrap();
    assert_eq!(keys(&second), ["e-2", "e-1"]);
    assert!(second.more_after && second.more_before);
    let third = l
        .read()
        .page(
            &filter,
            "alice",
            &Position::After(second.next.clone().unwrap()),
            2,
        )
        .await
        .unwrap();
    assert_eq!(keys(&third), ["e-0"]);
    assert!(!third.more_after && third.next.is_none());
    let back = l
        .read()
        .page(
            &filter,
            "alice",
            &Position::Before(second.items[0].cursor.clone()),
            2,
        )
        .await
        .unwrap();
    assert_eq!(keys(&back), ["e-4", "e-3"]);
    let in_place = l
        .read()
        .page(
            &filter,
            "alice",
            &Position::From(first.items[1].cursor.clone()),
            2,
        )
        .await
        .unwrap();
    assert_eq!(keys(&in_place), ["e-3", "e-2"]);
    let last = l
        .read()
        .page(&filter, "alice", &Position::Last, 2)
        .await
        .unwrap();
    assert_eq!(keys(&last), ["e-1", "e-0"]);
    // not reversed: the same rows oldest first
    let plain = ListFilter {
        reverse: false,
        ..filter
    };
    let first = l
        .read()
        .page(&plain, "alice", &Position::First, 5)
        .await
        .unwrap();
    assert_eq!(keys(&first), ["e-0", "e-1", "e-2", "e-3", "e-4"]);
}

/// A bare word, negated or not, is matched against what the reader is shown: a word found only
/// inside a redacted value neither finds a row nor hides one (either would tell it is there).
async fn filter_words_never_tell_a_redacted_value(db: &TestDb) {
    let l = ledger(db).await;
    for k in ["w-1", "w-2"] {
        l.record(&intent(k, "sms", json!({})), "bot").await.unwrap();
    }
    l.report_attempt(
        &outcome("w-1", Outcome::Unknown, Some("bounced for ada@example.com")),
        "bot",
    )
    .await
    .unwrap();
    l.report_attempt(&outcome("w-2", Outcome::Unknown, Some("bounced")), "bot")
        .await
        .unwrap();
    let keys = |text: &'static str| {
        let l = l.clone();
        async move {
            common::keys_listed(&l, settle::Scope::default(), text, "alice")
                .await
                .join(" ")
        }
    };
    assert_eq!(keys("bounced").await, "w-1 w-2");
    assert_eq!(
        keys("ada").await,
        "",
        "a word inside a redacted value finds nothing"
    );
    assert_eq!(keys("-ada").await, "w-1 w-2", "nor hides anything");
    assert_eq!(keys("-bounced").await, "");
}

/// the bare (manual: The command line) word: found in the key, workflow, step, destination, state or error, in any
/// case, with `%` and `_` as themselves, never across two of them (schema 15 looks for it in their
/// text joined by spaces, through an index on both backends).
async fn filter_words_find_each_field_and_never_across_two(db: &TestDb) {
    let l = ledger(db).await;
    let mut a = intent("Key-AB", "crm", json!({}));
    a.workflow = "cd-flow".into();
    l.record(&a, "bot").await.unwrap();
    let mut b = intent("plain_1", "sms", json!({}));
    b.step = "Send-Welcome".into();
    l.record(&b, "bot").await.unwrap();
    l.record(&intent("plain.2", "tasks", json!({})), "bot")
        .await
        .unwrap();
    for (k, e) in [
        ("Key-AB", "HTTP 503"),
        ("plain_1", "bounced"),
        ("plain.2", "read TIMEOUT at 100%"),
    ] {
        let o = if k == "plain_1" {
            Outcome::Rejected
        } else {
            Outcome::Unknown
        };
        l.report_attempt(&outcome(k, o, Some(e)), "bot")
            .await
            .unwrap();
    }
    let keys = |text: &'static str| {
        let l = l.clone();
        async move {
            common::keys_listed(&l, settle::Scope::default(), text, "alice")
                .await
                .join(" ")
        }
    };
    assert_eq!(keys("key-ab").await, "Key-AB", "the key, in any case");
    assert_eq!(keys("CD-FL").await, "Key-AB", "the workflow");
    assert_eq!(keys("welcome").await, "plain_1", "the step");
    assert_eq!(keys("sms").await, "plain_1", "the destination");
    assert_eq!(keys("rejec").await, "plain_1", "the state");
    assert_eq!(keys("timeout").await, "plain.2", "the error");
    assert_eq!(keys("503").await, "Key-AB");
    assert_eq!(
        keys("abcd").await,
        "",
        "never across the key and the workflow"
    );
    assert_eq!(keys("bcd").await, "");
    assert_eq!(keys("n_1").await, "plain_1", "`_` is itself");
    assert_eq!(keys("n_2").await, "", "`_` is not any letter");
    assert_eq!(keys("00%").await, "plain.2", "`%` is itself");
    assert_eq!(keys("n%").await, "", "`%` is not any text");
    assert_eq!(keys("plain").await, "plain.2 plain_1");
    assert_eq!(keys("onboarding").await, "plain.2 plain_1");
    assert_eq!(keys("-timeout").await, "Key-AB plain_1");
}

/// The console's "N of M" counts what the list shows, for the view's own bounds (the exceptions
/// up to now), ages and qualifiers (SQLite reads the time bounds apart from its indexes there).
async fn counts_agree_with_the_list(db: &TestDb) {
    let l = ledger(db).await;
    for (i, dest) in ["crm", "crm", "sms", "sms", "tasks", "crm"]
        .iter()
        .enumerate()
    {
        let key = format!("n-{i}");
        l.record(&intent(&key, dest, json!({})), "bot")
            .await
            .unwrap();
        let o = [Outcome::Unknown, Outcome::Rejected][i % 2];
        l.report_attempt(&outcome(&key, o, None), "bot")
            .await
            .unwrap();
    }
    l.record(&intent("n-live", "crm", json!({})), "bot")
        .await
        .unwrap();
    for text in [
        "",
        "state:unknown",
        "dest:crm",
        "dest:crm state:rejected",
        "age>1h",
        "age<1h",
        "age<1h wf:onboarding state:unknown",
        "-state:unknown",
    ] {
        let filter = ListFilter {
            query: settle::domain::filter::Filter::parse(text).unwrap(),
            ..Default::default()
        };
        let shown = l
            .read()
            .list(&filter, "alice", None, 50)
            .await
            .unwrap()
            .items
            .len();
        let counted = l.read().count_matching(&filter, "alice").await.unwrap();
        assert_eq!(counted, Some(shown as i64), "{text:?}");
    }
}

/// the Activity (manual: The console): people's actions by default, automation's on request, by actor and kind,
/// and words matched against what is shown (a redacted value never matches).
async fn activity_is_people_first_and_filters_by_actor_kind_and_shown_words(db: &TestDb) {
    use settle::domain::activity_filter::ActivityFilter;
    let l = ledger(db).await;
    for k in ["act-1", "act-2"] {
        l.record(
            &intent(
                k,
                "projects",
                json!({"title": "t", "email": "ada@example.com"}),
            ),
            "bot",
        )
        .await
        .unwrap();
        l.start_attempt(k, "dispatcher").await.unwrap();
        l.report_attempt(&outcome(k, Outcome::Unknown, Some("timeout")), "dispatcher")
            .await
            .unwrap();
    }
    claim(&l, "act-1", "bob").await.unwrap();
    l.staff()
        .act(
            "act-1",
            "bob",
            StaffAction::Note {
                text: "asked the team".into(),
            },
        )
        .await
        .unwrap();
    claim(&l, "act-2", "carol").await.unwrap();
    let people = l
        .read()
        .activity(50, &ActivityFilter::default())
        .await
        .unwrap();
    let kinds: Vec<(&str, &str)> = people
        .iter()
        .map(|e| (e.actor.as_str(), e.kind.as_str()))
        .collect();
    assert_eq!(
        kinds,
        [("carol", "claimed"), ("bob", "note"), ("bob", "claimed")],
        "people's actions, newest first"
    );
    let all = ActivityFilter {
        automation: true,
        ..Default::default()
    };
    let everything = l.read().activity(50, &all).await.unwrap();
    assert!(everything.len() > people.len());
    assert!(everything.iter().any(|e| e.kind == "recorded"));
    assert!(everything.windows(2).all(|w| w[0].id > w[1].id));
    let (bob, _) = ActivityFilter::lenient("actor:bob", false);
    let bob = l.read().activity(50, &bob).await.unwrap();
    assert!(bob.len() == 2 && bob.iter().all(|e| e.actor == "bob"));
    let (notes, _) = ActivityFilter::lenient("kind:note team", false);
    let notes = l.read().activity(50, &notes).await.unwrap();
    assert_eq!(notes.len(), 1);
    assert_eq!(notes[0].op_key.as_deref(), Some("act-1"));
    let (secret, _) = ActivityFilter::lenient("ada@example.com", true);
    assert!(
        l.read().activity(50, &secret).await.unwrap().is_empty(),
        "a redacted value never matches"
    );
}

/// The console, Redaction: an unknown at a destination that cannot be looked up names what to search it
/// by (when it was sent and the redaction hints), never a value.
async fn a_check_at_the_destination_names_what_to_search_by(db: &TestDb) {
    let text = r#"
[destinations.sms]
[redaction]
hints = true
"#;
    let l = Ledger::open(&db.url, settle::Config::parse(text, "hints").unwrap())
        .await
        .unwrap();
    let payload = json!({"phone": "+44 7700 900123", "email": "ada@example.com", "body": "hi"});
    l.record(&intent("sms-1", "sms", payload), "bot")
        .await
        .unwrap();
    l.start_attempt("sms-1", "dispatcher").await.unwrap();
    l.report_attempt(
        &outcome("sms-1", Outcome::Unknown, Some("timeout")),
        "dispatcher",
    )
    .await
    .unwrap();
    let d = l.read().show("sms-1", "alice").await.unwrap();
    let next = &d.op.next_step;
    assert!(next.contains("Search by: sent "), "{next}");
    assert!(next.contains("[redacted a…@example.com]"), "{next}");
    assert!(next.contains("[redacted …0123]"), "{next}");
    assert!(!next.contains("ada@") && !next.contains("900123"), "{next}");
}

/// for every state x claim situation x destination capability x role
/// (manual: Running settle for a team: viewer, operator, lead), the keys the console offers are exactly the actions the
/// ledger accepts, tried one by one on a copy of the situation made afresh. Accepted means it
/// did what the key says: a claim by its holder changes nothing, and a take-over where nobody
/// holds a live claim is a plain claim (`c`), so neither is offered.
async fn the_console_offers_exactly_what_the_ledger_accepts(db: &TestDb) {
    use settle::console::keymap::{KEYMAP, When};
    use settle::domain::{Identity, Offer, Role};
    let t0 = Utc::now();
    let (l, clock) = ledger_at(db, t0).await;
    let states = [
        "pending",
        "in_flight",
        "retry_wait",
        "unknown",
        "failed",
        "rejected",
        "conflict",
        "succeeded",
        "closed",
    ];
    let claims = ["none", "mine", "other", "other_expired"];
    // projects deduplicates and can be looked up, crm can be looked up, sms neither
    let dests = ["projects", "crm", "sms"];
    // each action with well-formed details, as the rules' own `offered` asks them
    // a correction's key is the operation's own next one (each copy is a key of its own)
    let action = |o: Offer, key: &str| match o.sample() {
        StaffAction::Correct { edits, note, .. } => StaffAction::Correct {
            corrected_as: format!("{key}:c2"),
            edits,
            note,
        },
        a => a,
    };
    let mut n = 0;
    let mut seen: std::collections::BTreeSet<(String, &str, &str)> = Default::default();
    // makes one operation in the situation; `None` when the situation cannot arise
    let mut make = async |state: &str, claim: &str, dest: &str| -> Option<String> {
        n += 1;
        let key = format!("p-{n}");
        *clock.lock().unwrap() = t0 - TimeDelta::hours(3);
        l.record(&intent(&key, dest, json!({"n": n})), "bot")
            .await
            .unwrap();
        let report = |o| outcome(&key, o, Some("e"));
        let seed = |a| l.staff().act(&key, "seed", a);
        match state {
            "pending" => {}
            "conflict" => {
                l.record(&intent(&key, dest, json!({"n": -1})), "bot")
                    .await
                    .unwrap();
            }
            _ => {
                l.start_attempt(&key, "dispatcher").await.unwrap();
                match state {
                    "in_flight" => {}
                    "retry_wait" => drop(
                        l.report_attempt(&report(Outcome::Transient), "d")
                            .await
                            .unwrap(),
                    ),
                    "rejected" => drop(
                        l.report_attempt(&report(Outcome::Rejected), "d")
                            .await
                            .unwrap(),
                    ),
                    "succeeded" => drop(
                        l.report_attempt(&report(Outcome::Accepted), "d")
                            .await
                            .unwrap(),
                    ),
                    _ => {
                        l.report_attempt(&report(Outcome::Unknown), "d")
                            .await
                            .unwrap();
                        match state {
                            "failed" => {
                                // (not where an unknown is retried by itself)
                                seed(StaffAction::ReconcileAbsent { note: None })
                                    .await
                                    .ok()?;
                                seed(StaffAction::Release).await.ok()?;
                            }
                            "closed" => {
                                seed(Offer::Close.sample()).await.unwrap();
                            }
                            _ => {}
                        }
                    }
                }
            }
        }
        let claimed = match claim {
            "none" => Ok(()),
            "mine" => claim_as(&l, &key, "alice").await,
            "other" => claim_as(&l, &key, "bob").await,
            _ => {
                // bob's claim, long expired (the lease is 30 minutes)
                *clock.lock().unwrap() = t0 - TimeDelta::hours(2);
                claim_as(&l, &key, "bob").await
            }
        };
        *clock.lock().unwrap() = t0;
        claimed.ok().map(|()| key)
    };
    for state in states {
        for claim in claims {
            for dest in dests {
                let Some(key) = make(state, claim, dest).await else {
                    continue;
                };
                // (an unknown at a deduplicating destination is retried by itself: it is a
                // retry_wait there; the situation is named by the state it is in)
                let state = l
                    .read()
                    .show(&key, "alice")
                    .await
                    .unwrap()
                    .op
                    .state
                    .as_str()
                    .to_string();
                let state = state.as_str();
                seen.insert((state.to_string(), claim, dest));
                for role in Role::ALL {
                    // alice through a session of her role (manual: Running settle for a team): the rules read it
                    let as_role = l.for_session(Identity {
                        name: "alice".into(),
                        role,
                        fingerprint: "SHA256:test".into(),
                    });
                    let offered = as_role.read().show(&key, "alice").await.unwrap().op.actions;
                    let mut accepted = Vec::new();
                    for o in Offer::ALL {
                        // each action tried on a copy of the situation made afresh
                        let copy = make(state, claim, dest).await.unwrap();
                        // accepted: it did what the key says (a claim that changes nothing, or
                        // a "take-over" of a claim nobody holds, is a plain claim)
                        let did = match as_role.staff().act(&copy, "alice", action(o, &copy)).await
                        {
                            Ok(a) if o == Offer::TakeOver => a.kind == Some("claim_taken"),
                            Ok(a) => a.kind.is_some(),
                            Err(_) => false,
                        };
                        if did {
                            accepted.push(o);
                        }
                    }
                    let offered_list: Vec<Offer> = offered.iter().collect();
                    assert_eq!(
                        offered_list, accepted,
                        "{role}: {state} / claim {claim} / {dest}: offered vs accepted"
                    );
                    if role == Role::Viewer {
                        assert!(accepted.is_empty(), "a viewer takes no action");
                    }
                    // and the keys: a key is offered iff one of its actions is accepted
                    for b in KEYMAP.iter().filter(|b| b.when == When::Offered) {
                        let key_offered = b.offers.iter().any(|o| offered.contains(*o));
                        let key_works = b.offers.iter().any(|o| accepted.contains(o));
                        assert_eq!(
                            key_offered, key_works,
                            "{role}: {} on {state} / {claim} / {dest}",
                            b.keys
                        );
                    }
                }
            }
        }
    }
    // every state arose, and most with each claim situation and destination
    let states_seen: std::collections::BTreeSet<&str> =
        seen.iter().map(|(s, _, _)| s.as_str()).collect();
    assert_eq!(states_seen.len(), states.len(), "{states_seen:?}");
    assert!(seen.len() >= 60, "situations checked: {}", seen.len());
}

async fn claim_as(l: &Ledger, key: &str, who: &str) -> Result<(), ()> {
    l.staff()
        .act(key, who, StaffAction::Claim { force_reason: None })
        .await
        .map(|_| ())
        .map_err(|_| ())
}

/// The review's kept counts of exceptions opened per day, and the same counted from the spans:
/// "day workflow destination n" lines.
async fn opened_per_day(db: &TestDb) -> (Vec<String>, Vec<String>) {
    let mut raw = common::Raw::connect(&db.url).await;
    let kept = raw
        .texts(
            "SELECT CAST(day AS TEXT) || ' ' || workflow || ' ' || destination || ' ' || \
             CAST(SUM(n) AS TEXT) FROM review_opened GROUP BY day, workflow, destination \
             HAVING SUM(n) <> 0 ORDER BY 1",
        )
        .await;
    let recount = raw
        .texts(
            "SELECT CAST(opened_at / 86400000 AS TEXT) || ' ' || workflow || ' ' || destination \
             || ' ' || CAST(COUNT(*) AS TEXT) FROM exception_spans \
             GROUP BY opened_at / 86400000, workflow, destination ORDER BY 1",
        )
        .await;
    (kept, recount)
}

/// Schema 7: the counts `stats` and the console's tabs show are counters kept with every change;
/// through records, conflicts, attempts, staff actions, a bulk action, an ingest and the
/// dispatcher's heartbeat (which folds PostgreSQL's rows of differences) they equal what a count
/// of the operations says.
async fn the_state_counters_equal_a_count_of_the_operations(db: &TestDb) {
    use settle::ledger::{ListFilter, Scope};
    let t0 = Utc::now();
    let (l, clock) = ledger_at(db, t0).await;
    let check = async |when: &str| {
        let stats = l.read().stats().await.unwrap();
        for state in State::ALL {
            let filter = ListFilter {
                scope: Scope::All,
                query: settle::domain::filter::Filter::parse(&format!("state:{}", state.as_str()))
                    .unwrap(),
                ..Default::default()
            };
            let n = l
                .read()
                .matching_keys(&filter, "alice")
                .await
                .unwrap()
                .len() as i64;
            assert_eq!(stats.by_state[&state], n, "{when}: {state:?}");
        }
        let exceptions = l
            .read()
            .matching_keys(&ListFilter::default(), "alice")
            .await
            .unwrap()
            .len() as i64;
        assert_eq!(stats.exceptions, exceptions, "{when}: exceptions");
        // by workflow and state too (schema 8; the metrics read them)
        let (groups, _) = l.read().exceptions_by_workflow().await.unwrap();
        assert_eq!(
            groups.iter().map(|(_, _, n)| n).sum::<i64>(),
            exceptions,
            "{when}: by workflow"
        );
        for (workflow, state, n) in &groups {
            let filter = ListFilter {
                scope: Scope::All,
                query: settle::domain::filter::Filter::parse(&format!(
                    "wf:{workflow} state:{}",
                    state.as_str()
                ))
                .unwrap(),
                ..Default::default()
            };
            let counted = l
                .read()
                .matching_keys(&filter, "alice")
                .await
                .unwrap()
                .len() as i64;
            assert_eq!(*n, counted, "{when}: {workflow} {state:?}");
        }
        // the review's exceptions opened per day (schema 14) equal a count of the spans
        let (kept, recount) = opened_per_day(db).await;
        assert_eq!(kept, recount, "{when}: opened per day");
    };
    check("empty").await;
    for i in 0..12 {
        let k = format!("c-{i}");
        let workflow = ["onboarding", "crm-sync"][i / 6];
        l.record(
            &Intent {
                workflow: workflow.into(),
                ..intent(&k, ["sms", "crm", "projects"][i % 3], json!({"i": i}))
            },
            "bot",
        )
        .await
        .unwrap();
        if i % 4 != 0 {
            l.start_attempt(&k, "dispatcher").await.unwrap();
            let o = [Outcome::Unknown, Outcome::Rejected, Outcome::Accepted][i % 3];
            l.report_attempt(&outcome(&k, o, Some("e")), "dispatcher")
                .await
                .unwrap();
        }
    }
    l.record(&intent("c-0", "sms", json!({"changed": true})), "bot")
        .await
        .unwrap();
    check("after records and attempts").await;
    assert!(
        !opened_per_day(db).await.0.is_empty(),
        "exceptions were opened"
    );
    claim(&l, "c-3", "bob").await.unwrap();
    l.staff()
        .act("c-3", "bob", StaffAction::ReconcileAbsent { note: None })
        .await
        .unwrap();
    check("after staff actions").await;
    let keys = l
        .read()
        .matching_keys(&ListFilter::default(), "alice")
        .await
        .unwrap();
    let close = StaffAction::Close {
        resolution: Resolution::Abandoned,
        reference: None,
        superseded_by: None,
        note: "outage".into(),
    };
    let stop = std::sync::atomic::AtomicBool::new(false);
    l.staff()
        .bulk_apply(&keys, &close, "alice", &stop, None, |_, _| {})
        .await
        .unwrap();
    check("after a bulk close").await;
    let lines = (0..30)
        .map(|i| format!(r#"{{"type":"intent","key":"in-{i}","workflow":"w","step":"s","destination":"sms","action":"a","payload":{{}}}}"#))
        .collect::<Vec<_>>()
        .join("\n");
    l.ingest(lines.as_bytes(), "bot").await.unwrap();
    check("after an ingest").await;
    l.rounds().heartbeat("dispatcher-1").await.unwrap();
    check("after the heartbeat folded the counters").await;
    // an attempt in flight past its timeout (5 minutes) is an exception of no exception state
    l.start_attempt("in-0", "dispatcher").await.unwrap();
    check("an attempt in flight").await;
    let before = l.read().stats().await.unwrap().exceptions;
    *clock.lock().unwrap() = t0 + TimeDelta::minutes(10);
    assert_eq!(l.read().stats().await.unwrap().exceptions, before + 1);
    check("an attempt in flight past its timeout").await;
}

/// the review on a known history: exceptions opened and resolved at
/// chosen times, a conflict, a close as `duplicate_cleaned_up`, unknowns found by a reconcile and
/// by a lookup, an automatic pause; every number of `report --json` (the review serialized)
/// checked for a 7-day and a 1-day window.
async fn the_review_counts_what_happened(db: &TestDb) {
    use settle::ledger::ReviewScope;
    let d0 = DateTime::parse_from_rfc3339("2026-06-10T00:00:00Z")
        .unwrap()
        .with_timezone(&Utc);
    let (l, clock) = ledger_at(db, d0 + TimeDelta::hours(1)).await;
    let at = |t: DateTime<Utc>| *clock.lock().unwrap() = t;
    let rec = async |key: &str, workflow: &str, dest: &str, payload: serde_json::Value| {
        let mut it = intent(key, dest, payload);
        it.workflow = workflow.into();
        l.record(&it, "bot").await.unwrap()
    };
    // D0 01:00: two unknowns and a rejection at sms, an unknown at crm, a pending c-1 at crm
    for k in ["u-1", "u-2"] {
        rec(k, "onboarding", "sms", json!({})).await;
        l.report_attempt(&outcome(k, Outcome::Unknown, Some("timeout")), "bot")
            .await
            .unwrap();
    }
    rec("r-1", "onboarding", "sms", json!({})).await;
    l.report_attempt(&outcome("r-1", Outcome::Rejected, Some("dup")), "bot")
        .await
        .unwrap();
    rec("l-1", "onboarding", "crm", json!({})).await;
    l.report_attempt(&outcome("l-1", Outcome::Unknown, Some("timeout")), "bot")
        .await
        .unwrap();
    assert_eq!(state(&l, "l-1").await, State::Unknown);
    rec("c-1", "onboarding", "crm", json!({"v": 1})).await;
    // D0 03:00: u-1 found by a person (2 h); D0 05:00: l-1 found by lookup (4 h)
    at(d0 + TimeDelta::hours(3));
    claim(&l, "u-1", "alice").await.unwrap();
    l.staff()
        .act(
            "u-1",
            "alice",
            StaffAction::ReconcileFound {
                reference: "T-1".into(),
                note: None,
            },
        )
        .await
        .unwrap();
    at(d0 + TimeDelta::hours(5));
    let found = settle::domain::LookupAnswer::Found {
        reference: "CRM-9".into(),
        http_status: 200,
    };
    l.lookup("l-1", found).await.unwrap();
    assert_eq!(state(&l, "l-1").await, State::Succeeded);
    // D1 02:00: r-1 closed as a duplicate cleaned up (25 h); c-1 conflicts; guarded pauses itself
    let t3 = d0 + TimeDelta::hours(26);
    at(t3);
    claim(&l, "r-1", "alice").await.unwrap();
    l.staff()
        .act(
            "r-1",
            "alice",
            StaffAction::Close {
                resolution: Resolution::DuplicateCleanedUp,
                reference: None,
                superseded_by: None,
                note: "deleted the second task".into(),
            },
        )
        .await
        .unwrap();
    assert_eq!(
        rec("c-1", "onboarding", "crm", json!({"v": 2})).await,
        Recorded::Conflict
    );
    for i in 0..3 {
        let k = format!("g-{i}");
        rec(&k, "guarded", "sms", json!({})).await;
        l.report_attempt(&outcome(&k, Outcome::Rejected, Some("bad")), "bot")
            .await
            .unwrap();
    }
    assert_eq!(
        l.read().stats().await.unwrap().paused_workflows,
        vec!["guarded".to_string()]
    );
    // D2 11:30: one more unknown; the review is asked at D2 12:00
    let now = d0 + TimeDelta::hours(60);
    at(now - TimeDelta::minutes(30));
    rec("n-1", "onboarding", "sms", json!({})).await;
    l.report_attempt(&outcome("n-1", Outcome::Unknown, Some("timeout")), "bot")
        .await
        .unwrap();
    at(now);
    let since_t1 = 2 * 86_400 + 11 * 3600;
    let since_t3 = 34 * 3600;
    let buckets = |counts: [i64; 6]| {
        json!(
            ["<1h", "1h-4h", "4h-24h", "1d-3d", "3d-7d", ">7d"]
                .iter()
                .zip(counts)
                .map(|(b, c)| json!({"bucket": b, "count": c}))
                .collect::<Vec<_>>()
        )
    };
    let group = |open, oldest, unknown, resolved, p50: Option<i64>, p90: Option<i64>, auto| {
        json!({"open": open, "oldest_seconds": oldest, "unknown": unknown, "resolved": resolved,
               "resolve_p50_seconds": p50, "resolve_p90_seconds": p90, "auto_pauses": auto,
               "corrections": 0})
    };
    let week = serde_json::to_value(
        l.read()
            .review(
                std::time::Duration::from_secs(7 * 86_400),
                &ReviewScope::default(),
            )
            .await
            .unwrap(),
    )
    .unwrap();
    let days = |d: &[(&str, i64, i64)]| {
        json!(
            d.iter()
                .map(|(day, o, r)| json!({"day": day, "opened": o, "resolved": r}))
                .collect::<Vec<_>>()
        )
    };
    let expected = json!({
        "window_seconds": 7 * 86_400,
        "open_exceptions": 6,
        "age_buckets": buckets([1, 0, 0, 5, 0, 0]),
        "per_day": days(&[
            ("2026-06-06", 0, 0), ("2026-06-07", 0, 0), ("2026-06-08", 0, 0), ("2026-06-09", 0, 0),
            ("2026-06-10", 4, 2), ("2026-06-11", 4, 1), ("2026-06-12", 1, 0),
        ]),
        "by_workflow": {
            "onboarding": group(3, Some(since_t1), 2, 3, Some(14_400), Some(90_000), 0),
            "guarded": group(3, Some(since_t3), 0, 0, None, None, 1),
        },
        "by_destination": {
            "sms": group(5, Some(since_t1), 2, 2, Some(7_200), Some(90_000), 0),
            "crm": group(1, Some(since_t3), 0, 1, Some(14_400), Some(14_400), 0),
        },
        "duplicates": {"cleaned_up": 1, "conflicts": 1, "prevented": 2},
        // corrections are counted in tests/correct.rs
        "corrections": 0,
        // no operation of this ledger belongs to a run (tests/runs.rs counts runs)
        "runs": no_runs(),
    });
    let mut got = week.clone();
    got.as_object_mut().unwrap().remove("at");
    assert_eq!(got, expected, "7 days");
    // the last day only: what happened before it is out of the window; what is open is not
    let mut day = serde_json::to_value(
        l.read()
            .review(
                std::time::Duration::from_secs(86_400),
                &ReviewScope::default(),
            )
            .await
            .unwrap(),
    )
    .unwrap();
    day.as_object_mut().unwrap().remove("at");
    let expected = json!({
        "window_seconds": 86_400,
        "open_exceptions": 6,
        "age_buckets": buckets([1, 0, 0, 5, 0, 0]),
        "per_day": days(&[("2026-06-12", 1, 0)]),
        "by_workflow": {
            "onboarding": group(3, Some(since_t1), 2, 0, None, None, 0),
            "guarded": group(3, Some(since_t3), 0, 0, None, None, 0),
        },
        "by_destination": {
            "sms": group(5, Some(since_t1), 2, 0, None, None, 0),
            "crm": group(1, Some(since_t3), 0, 0, None, None, 0),
        },
        "duplicates": {"cleaned_up": 0, "conflicts": 0, "prevented": 0},
        "corrections": 0,
        "runs": no_runs(),
    });
    assert_eq!(day, expected, "1 day");
    // one workflow: its numbers only
    let guarded = l
        .read()
        .review(
            std::time::Duration::from_secs(7 * 86_400),
            &ReviewScope {
                workflow: Some("guarded".into()),
                destination: None,
            },
        )
        .await
        .unwrap();
    assert_eq!(guarded.open_exceptions, 3);
    assert_eq!(
        guarded.by_workflow.keys().collect::<Vec<_>>(),
        vec!["guarded"]
    );
    assert_eq!(guarded.by_workflow["guarded"].auto_pauses, 1);
    assert_eq!(guarded.duplicates.prevented, 0);
    assert_eq!(
        guarded.per_day.iter().map(|d| d.opened).sum::<i64>(),
        3,
        "{guarded:?}"
    );
}

/// the roles (manual: Running settle for a team), enforced in the ledger: a viewer takes no action, an operator works items
/// (bulk up to `bulk_limit`) but neither takes a claim over nor pauses, a lead does all of it; a
/// session acts under its operator's name only and its events hold the key's fingerprint.
async fn roles_are_enforced_in_the_ledger(db: &TestDb) {
    use settle::domain::{Identity, Role};
    use settle::ledger::Pausable;
    let text = "bulk_limit = 3\n[destinations.sms]\n";
    let l = Ledger::open(&db.url, settle::Config::parse(text, "roles").unwrap())
        .await
        .unwrap();
    for i in 0..5 {
        let k = format!("r-{i}");
        l.record(&intent(&k, "sms", json!({})), "bot")
            .await
            .unwrap();
        l.report_attempt(&outcome(&k, Outcome::Unknown, Some("timeout")), "bot")
            .await
            .unwrap();
    }
    let session = |name: &str, role| {
        l.for_session(Identity {
            name: name.into(),
            role,
            fingerprint: format!("SHA256:{name}-key"),
        })
    };
    let (viewer, operator, lead) = (
        session("vera", Role::Viewer),
        session("oscar", Role::Operator),
        session("lena", Role::Lead),
    );
    let claim = || StaffAction::Claim { force_reason: None };
    let refused = |r: settle::Result<_>| match r {
        Err(settle::Error::Refused(why)) => why,
        other => panic!("expected a refusal, got {other:?}"),
    };
    let why = refused(viewer.staff().act("r-0", "vera", claim()).await.map(|_| ()));
    assert!(why.contains("viewer"), "{why}");
    assert!(
        viewer
            .read()
            .show("r-0", "vera")
            .await
            .unwrap()
            .op
            .actions
            .iter()
            .next()
            .is_none()
    );
    // a session acts under its own name only
    let why = refused(
        operator
            .staff()
            .act("r-0", "lena", claim())
            .await
            .map(|_| ()),
    );
    assert!(why.contains("acts as oscar only"), "{why}");
    operator.staff().act("r-0", "oscar", claim()).await.unwrap();
    let d = l.read().show("r-0", "oscar").await.unwrap();
    let last = d.history.last().unwrap();
    assert_eq!(
        (last.actor.as_str(), &last.detail["key"]),
        ("oscar", &json!("SHA256:oscar-key"))
    );
    // taking over is a lead's
    let take = StaffAction::Claim {
        force_reason: Some("oscar is off".into()),
    };
    let why = refused(
        session("otto", Role::Operator)
            .staff()
            .act("r-0", "otto", take.clone())
            .await
            .map(|_| ()),
    );
    assert!(why.contains("for a lead"), "{why}");
    lead.staff().act("r-0", "lena", take).await.unwrap();
    // pausing is a lead's
    let why = refused(
        operator
            .staff()
            .pause_one(Pausable::Destination, "sms", "outage", "oscar")
            .await
            .map(|_| ()),
    );
    assert!(why.contains("for a lead"), "{why}");
    assert!(
        lead.staff()
            .pause_one(Pausable::Destination, "sms", "outage", "lena")
            .await
            .unwrap()
    );
    assert!(
        lead.staff()
            .resume_one(Pausable::Destination, "sms", "lena")
            .await
            .unwrap()
    );
    // bulk: an operator up to bulk_limit (3), a lead without limit
    let keys: Vec<String> = (1..5).map(|i| format!("r-{i}")).collect();
    let note = StaffAction::Note {
        text: "outage".into(),
    };
    let why = refused(
        operator
            .staff()
            .bulk_preview(&keys, &note, "oscar")
            .await
            .map(|_| ()),
    );
    assert!(why.contains("at most 3 items"), "{why}");
    let stop = std::sync::atomic::AtomicBool::new(false);
    let why = refused(
        operator
            .staff()
            .bulk_apply(&keys, &note, "oscar", &stop, None, |_, _| {})
            .await
            .map(|_| ()),
    );
    assert!(why.contains("at most 3 items"), "{why}");
    assert_eq!(
        operator
            .staff()
            .bulk_preview(&keys[..3], &note, "oscar")
            .await
            .unwrap()
            .eligible
            .len(),
        3
    );
    let r = lead
        .staff()
        .bulk_apply(&keys, &note, "lena", &stop, None, |_, _| {})
        .await
        .unwrap();
    assert_eq!(r.done.len(), 4);
    // the local CLI's handle acts as a lead under any name
    assert_eq!(l.role(), Role::Lead);
}

/// Redaction, Running settle for a team: a lead reveals one redacted field with a reason; the `revealed` event names
/// the field and the reason, never the value (even when the reason repeats it); others are
/// refused, and so is a field that is not redacted.
async fn a_lead_reveals_one_field_and_the_audit_never_holds_the_value(db: &TestDb) {
    use settle::domain::{Identity, Role};
    let l = ledger(db).await;
    let payload = json!({"title": "Kickoff", "customer": {"email": "ada@example.com"}});
    l.record(&intent("rv-1", "projects", payload), "bot")
        .await
        .unwrap();
    let as_role = |role| {
        l.for_session(Identity {
            name: "lena".into(),
            role,
            fingerprint: "SHA256:lena".into(),
        })
    };
    for role in [Role::Viewer, Role::Operator] {
        let e = as_role(role)
            .staff()
            .reveal("rv-1", "customer.email", "checking", "lena")
            .await
            .unwrap_err();
        assert!(e.to_string().contains("for a lead"), "{role}: {e}");
    }
    let lead = as_role(Role::Lead);
    let e = lead
        .staff()
        .reveal("rv-1", "title", "why not", "lena")
        .await
        .unwrap_err();
    assert!(
        e.to_string().contains("nothing is redacted at title"),
        "{e}"
    );
    let e = lead
        .staff()
        .reveal("rv-1", "customer.email", " ", "lena")
        .await
        .unwrap_err();
    assert!(e.to_string().contains("needs a reason"), "{e}");
    let value = lead
        .staff()
        .reveal(
            "rv-1",
            "customer.email",
            "customer asks; is it ada@example.com?",
            "lena",
        )
        .await
        .unwrap();
    assert_eq!(value, "ada@example.com");
    let d = l.read().show("rv-1", "lena").await.unwrap();
    let last = d.history.last().unwrap();
    assert_eq!(
        (last.kind.as_str(), last.actor.as_str()),
        ("revealed", "lena")
    );
    assert_eq!(last.detail["field"], "customer.email");
    assert_eq!(last.detail["key"], "SHA256:lena");
    let reason = last.detail["reason"].as_str().unwrap();
    assert!(
        reason.starts_with("customer asks") && !reason.contains("ada@"),
        "{reason}"
    );
    let everything = l
        .read()
        .activity(
            100,
            &settle::domain::activity_filter::ActivityFilter {
                automation: true,
                ..Default::default()
            },
        )
        .await
        .unwrap();
    assert!(!format!("{everything:?}").contains("ada@example.com"));
    // and as stored: no event row holds the value
    let mut raw = common::Raw::connect(&db.url).await;
    let details = raw.texts("SELECT detail FROM events").await;
    assert!(details.iter().any(|d| d.contains("customer.email")));
    assert!(
        !details.iter().any(|d| d.contains("ada@example.com")),
        "{details:?}"
    );
}

both_backends!(
    pgbouncer:
    a_batch_of_new_and_stored_keys,
    a_round_on_known_rows_sees_other_writers,
    a_lead_reveals_one_field_and_the_audit_never_holds_the_value,
    roles_are_enforced_in_the_ledger,
    the_state_counters_equal_a_count_of_the_operations,
    the_console_offers_exactly_what_the_ledger_accepts,
    a_check_at_the_destination_names_what_to_search_by,
    activity_is_people_first_and_filters_by_actor_kind_and_shown_words,
    recording_is_idempotent_and_a_conflict_keeps_both,
    a_terminal_operation_refuses_new_contents,
    a_superseding_key_must_exist,
    outcomes_follow_the_destination_capabilities,
    fifty_concurrent_claims_one_winner,
    two_concurrent_retries_one_wins,
    every_action_writes_exactly_one_event,
    events_are_append_only,
    ingesting_twice_changes_nothing,
    sweep_interrupts_stuck_attempts_but_not_claimed_ones,
    the_stopping_threshold_pauses_a_workflow,
    a_runs_state_follows_its_steps_and_the_clock,
    a_callers_start_keeps_to_the_stopping_threshold,
    the_filter_selects_what_each_term_says,
    filter_words_never_tell_a_redacted_value,
    filter_words_find_each_field_and_never_across_two,
    counts_agree_with_the_list,
    a_bulk_action_previews_freezes_and_acts_item_by_item,
    a_paced_bulk_retry_spaces_the_next_attempts,
    lists_page_by_keyset_oldest_first,
    a_reversed_list_pages_newest_first,
    readers_never_see_sensitive_values,
    the_retry_budget_is_shared_by_every_dispatcher,
    rounds_at_once_never_spend_more_than_the_budget,
    two_dispatchers_never_start_one_operation_twice,
    the_review_counts_what_happened,
);
