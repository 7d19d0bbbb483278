//! Runs (manual: Runs) on both backends with an injected clock: the run state of every situation of a
//! step against a table, found by `runs` and the index of waits as the state says; a run's own
//! claim, note and close, audited; stalled runs counted as exceptions and toward the stopping
//! threshold.

mod common;

use std::sync::{Arc, Mutex};

use chrono::{DateTime, TimeDelta, Utc};
use common::TestDb;
use serde_json::json;
use settle::domain::run::RunState;
use settle::domain::run_action::RunAction;
use settle::{AttemptReport, Intent, Ledger, Outcome, Resolution, StaffAction, State};

fn t0() -> DateTime<Utc> {
    DateTime::from_timestamp(1_800_000_000, 0).unwrap()
}

/// A ledger on a clock the test moves, with `onboarding` declaring two steps (gap one hour),
/// `loose` declaring none, and `guarded` declaring two and pausing at 3 exceptions.
async fn ledger(db: &TestDb) -> (Ledger, Arc<Mutex<DateTime<Utc>>>) {
    let mut config = common::config();
    let declared = |pause_when| settle::config::WorkflowConfig {
        steps: vec!["first".into(), "second".into()],
        step_gap: Some(std::time::Duration::from_secs(3600)),
        pause_when,
        owner: None,
    };
    config.workflows.insert("onboarding".into(), declared(None));
    config.workflows.insert(
        "guarded".into(),
        declared(Some(settle::config::PauseWhen {
            unresolved: Some(3),
            oldest: None,
        })),
    );
    let clock = Arc::new(Mutex::new(t0()));
    let c = clock.clone();
    let l = Ledger::open(&db.url, config)
        .await
        .unwrap()
        .with_clock(move || *c.lock().unwrap());
    (l, clock)
}

fn step(run: &str, workflow: &str, step: &str, payload: serde_json::Value) -> Intent {
    Intent {
        key: format!("{run}:{step}"),
        workflow: workflow.into(),
        step: step.into(),
        destination: "sms".into(),
        action: "send".into(),
        payload,
        run: Some(run.into()),
    }
}

fn report(key: &str, o: Outcome) -> AttemptReport {
    AttemptReport {
        key: key.into(),
        outcome: Some(o),
        reference: (o == Outcome::Accepted).then(|| format!("REF-{key}")),
        error: (o != Outcome::Accepted).then(|| "said so".into()),
        ..Default::default()
    }
}

/// The second step's situations, each made through the ledger as an automation and staff would.
const SITUATIONS: [&str; 12] = [
    "not recorded",
    "pending",
    "in flight",
    "retry_wait",
    "succeeded",
    "closed done_elsewhere",
    "rejected",
    "unknown",
    "failed",
    "conflict",
    "closed abandoned",
    "claimed unknown",
];

async fn make(l: &Ledger, run: &str, workflow: &str, situation: &str) {
    let first = step(run, workflow, "first", json!({}));
    l.record(&first, "bot").await.unwrap();
    l.report_attempt(&report(&first.key, Outcome::Accepted), "bot")
        .await
        .unwrap();
    if situation == "not recorded" {
        return;
    }
    let second = step(run, workflow, "second", json!({"n": 1}));
    let key = second.key.as_str();
    l.record(&second, "bot").await.unwrap();
    let attempt = |o| async move { l.report_attempt(&report(key, o), "bot").await.unwrap() };
    let staff = |a| async move { l.staff().act(key, "alice", a).await.unwrap() };
    let close = |resolution| StaffAction::Close {
        resolution,
        reference: (resolution == Resolution::DoneElsewhere).then(|| "DONE-1".to_string()),
        superseded_by: None,
        note: "by hand".into(),
    };
    match situation {
        "pending" => {}
        "in flight" => {
            l.start_attempt(key, "bot").await.unwrap();
        }
        "retry_wait" => {
            attempt(Outcome::Transient).await;
        }
        "succeeded" => {
            attempt(Outcome::Accepted).await;
        }
        "closed done_elsewhere" => {
            staff(close(Resolution::DoneElsewhere)).await;
        }
        "rejected" => {
            attempt(Outcome::Rejected).await;
        }
        "unknown" => {
            attempt(Outcome::Unknown).await;
        }
        "failed" => {
            attempt(Outcome::Unknown).await;
            staff(StaffAction::ReconcileAbsent { note: None }).await;
        }
        "conflict" => {
            l.record(&step(run, workflow, "second", json!({"n": 2})), "bot")
                .await
                .unwrap();
        }
        "closed abandoned" => {
            staff(close(Resolution::Abandoned)).await;
        }
        "claimed unknown" => {
            attempt(Outcome::Unknown).await;
            staff(StaffAction::Claim { force_reason: None }).await;
        }
        other => panic!("no situation {other}"),
    }
}

/// The run state for a second step in each situation, with declared steps and without, inside
/// the gap (two minutes after the first step settled) and past it (two hours).
fn expected(situation: &str, declared: bool, past_gap: bool) -> RunState {
    use RunState::*;
    match situation {
        "not recorded" if !declared => Done,
        "not recorded" if past_gap => Stalled,
        "not recorded" => Running,
        "pending" | "retry_wait" => Running,
        // an attempt in flight past its timeout (five minutes) is an exception
        "in flight" if past_gap => Blocked,
        "in flight" => Running,
        "succeeded" | "closed done_elsewhere" => Done,
        _ => Blocked,
    }
}

/// the table (manual: Runs): every situation of a step x declared steps or none x inside or past
/// `step_gap`, as `run show` derives it and as `runs` finds it (`state:stalled` through the
/// index of waits, every other state by walking the runs), and counted by `stats`.
async fn every_situation_of_a_step_gives_its_run_state(db: &TestDb) {
    let (l, clock) = ledger(db).await;
    let mut cases = Vec::new();
    for (i, situation) in SITUATIONS.iter().enumerate() {
        for (workflow, declared) in [("onboarding", true), ("loose", false)] {
            let run = format!("r{i}-{workflow}");
            make(&l, &run, workflow, situation).await;
            cases.push((run, *situation, declared));
        }
    }
    for (minutes, past_gap) in [(2, false), (120, true)] {
        *clock.lock().unwrap() = t0() + TimeDelta::minutes(minutes);
        let mut stalled = Vec::new();
        for (run, situation, declared) in &cases {
            let want = expected(situation, *declared, past_gap);
            let got = l.read().run(run, "t").await.unwrap();
            assert_eq!(
                got.state, want,
                "{situation}, declared {declared}, past the gap {past_gap}: {}",
                got.next_step
            );
            let listed = l.read().runs(&format!("run:{run}"), "t", 10).await.unwrap();
            assert_eq!(listed.len(), 1, "{run}");
            assert_eq!(listed[0].state, want, "{run} as runs lists it");
            if want == RunState::Stalled {
                assert_eq!(listed[0].current_step.as_deref(), Some("second"));
                stalled.push(run.clone());
            }
        }
        let mut found: Vec<String> = l
            .read()
            .runs("state:stalled", "t", 100)
            .await
            .unwrap()
            .into_iter()
            .map(|r| r.run)
            .collect();
        found.sort();
        assert_eq!(found, stalled, "past the gap {past_gap}");
        assert_eq!(
            l.read().stats().await.unwrap().stalled_runs,
            stalled.len() as i64
        );
        let blocked = l.read().runs("state:blocked", "t", 100).await.unwrap();
        let want_blocked = cases
            .iter()
            .filter(|(_, s, d)| expected(s, *d, past_gap) == RunState::Blocked)
            .count();
        assert_eq!(blocked.len(), want_blocked);
    }
    // a rerun records the missing step: no longer stalled, found by nothing
    l.record(
        &step("r0-onboarding", "onboarding", "second", json!({})),
        "bot",
    )
    .await
    .unwrap();
    assert!(
        l.read()
            .runs("state:stalled", "t", 100)
            .await
            .unwrap()
            .is_empty()
    );
    assert_eq!(l.read().stats().await.unwrap().stalled_runs, 0);
}

/// Runs: a run is claimed, noted and closed as a whole, each audited; another's claim
/// refuses the close; a closed run is neither stalled nor counted; stalled runs count toward
/// their workflow's stopping threshold (manual: The stopping threshold).
async fn a_run_is_claimed_noted_and_closed_by_people(db: &TestDb) {
    let (l, clock) = ledger(db).await;
    for r in ["g1", "g2", "g3"] {
        make(&l, r, "guarded", "not recorded").await;
    }
    *clock.lock().unwrap() = t0() + TimeDelta::hours(2);
    let s = l.read().stats().await.unwrap();
    assert_eq!((s.stalled_runs, s.exceptions), (3, 3));
    l.rounds().sweep().await.unwrap();
    let paused = l.read().paused_workflows().await.unwrap();
    assert_eq!(
        paused.iter().map(|p| p.name.as_str()).collect::<Vec<_>>(),
        ["guarded"],
        "three stalled runs reach the threshold"
    );

    let claimed = l
        .staff()
        .run_action("g1", "alice", RunAction::Claim)
        .await
        .unwrap();
    assert_eq!(claimed.claimed_by.as_deref(), Some("alice"));
    let close = |note: &str| RunAction::Close {
        resolution: Resolution::Abandoned,
        note: note.into(),
    };
    let refused = l.staff().run_action("g1", "bob", close("mine now")).await;
    assert!(
        matches!(&refused, Err(settle::Error::Refused(m)) if m.contains("claimed by alice")),
        "{refused:?}"
    );
    l.staff()
        .run_action(
            "g1",
            "bob",
            RunAction::Note {
                text: "customer called".into(),
            },
        )
        .await
        .unwrap();
    let closed = l
        .staff()
        .run_action("g1", "alice", close("customer left"))
        .await
        .unwrap();
    assert_eq!(
        (closed.state, closed.resolution, closed.claimed_by),
        (RunState::Closed, Some(Resolution::Abandoned), None)
    );
    let history: Vec<(String, String)> = closed
        .history
        .iter()
        .map(|e| (e.actor.clone(), e.kind.clone()))
        .collect();
    assert_eq!(
        history,
        [
            ("alice".to_string(), "run_claimed".to_string()),
            ("bob".into(), "run_noted".into()),
            ("alice".into(), "run_closed".into()),
        ]
    );
    assert_eq!(closed.history[2].detail["note"], "customer left");
    // its steps are left as they are
    assert_eq!(closed.steps[0].state, State::Succeeded.as_str());
    assert!(matches!(
        l.staff().run_action("g1", "alice", RunAction::Claim).await,
        Err(settle::Error::Refused(_))
    ));
    let stalled: Vec<String> = l
        .read()
        .runs("state:stalled", "t", 10)
        .await
        .unwrap()
        .into_iter()
        .map(|r| r.run)
        .collect();
    assert_eq!(stalled, ["g2", "g3"]);
    assert_eq!(
        l.read().runs("state:closed", "t", 10).await.unwrap().len(),
        1
    );
    // view 1's "N of M" counts the stalled runs it shows
    let count = |text: &str| {
        let filter = settle::ListFilter {
            query: settle::domain::filter::Filter::parse(text).unwrap(),
            scope: settle::Scope::Exceptions,
            ..Default::default()
        };
        let l = l.clone();
        async move { l.read().count_matching(&filter, "t").await.unwrap() }
    };
    assert_eq!(count("state:stalled").await, Some(2));
    assert_eq!(count("wf:guarded").await, Some(2));
    assert_eq!(count("wf:onboarding").await, Some(0));
    assert_eq!(count("run:g2").await, Some(1));
    assert_eq!(count("state:unknown").await, Some(0));
    assert_eq!(l.read().stats().await.unwrap().stalled_runs, 2);
    assert!(matches!(
        l.staff()
            .run_action("nope", "alice", RunAction::Claim)
            .await,
        Err(settle::Error::NotFound(_))
    ));
}

/// The manual's Runs in the review (manual: The review after a release): a known ledger's runs as `review` counts them, as
/// `settle report --json` gives them, and as view 6 draws them at 80x24.
async fn the_review_counts_a_known_ledgers_runs(db: &TestDb) {
    let t0 = Utc::now() - TimeDelta::hours(3);
    let (l, clock) = ledger(db).await;
    let at = |minutes: i64| *clock.lock().unwrap() = t0 + TimeDelta::minutes(minutes);
    at(0);
    for r in ["done-a", "stalled-b", "rerun-c", "closed-d"] {
        make(&l, r, "onboarding", "not recorded").await;
    }
    // done-a: its second step recorded 10 minutes after the first settled, then done
    at(10);
    let second = |run: &str| step(run, "onboarding", "second", json!({}));
    l.record(&second("done-a"), "bot").await.unwrap();
    l.report_attempt(&report("done-a:second", Outcome::Accepted), "bot")
        .await
        .unwrap();
    // rerun-c: stalled (the gap is an hour), rerun after two hours, done
    at(120);
    l.record(&second("rerun-c"), "bot").await.unwrap();
    l.report_attempt(&report("rerun-c:second", Outcome::Accepted), "bot")
        .await
        .unwrap();
    // closed-d: a person closed it
    l.staff()
        .run_action(
            "closed-d",
            "alice",
            RunAction::Close {
                resolution: Resolution::Abandoned,
                note: "withdrawn".into(),
            },
        )
        .await
        .unwrap();
    at(180);
    let scope = settle::ledger::ReviewScope::default();
    let review = l
        .read()
        .review(std::time::Duration::from_secs(86_400), &scope)
        .await
        .unwrap();
    let runs = &review.runs;
    assert_eq!(
        (
            runs.started,
            runs.done,
            runs.stalled,
            runs.closed,
            runs.stalled_now
        ),
        // stalled: rerun-c, stalled-b, and closed-d (closed an hour after it stalled)
        (4, 2, 3, 1, 1),
        "{runs:?}"
    );
    let t: Vec<_> = runs
        .transitions
        .iter()
        .map(|t| {
            (
                t.workflow.as_str(),
                t.from.as_str(),
                t.to.as_str(),
                t.count,
                t.p50_seconds,
                t.p90_seconds,
            )
        })
        .collect();
    assert_eq!(
        t,
        [("onboarding", "first", "second", 2, Some(600), Some(7200))]
    );

    // settle report --json, the real binary at the real time (the clock above ends about now)
    let v = report_json(db);
    let r = &v["runs"];
    assert_eq!(
        [
            &r["started"],
            &r["done"],
            &r["stalled"],
            &r["closed"],
            &r["stalled_now"]
        ],
        [&json!(4), &json!(2), &json!(3), &json!(1), &json!(1)],
        "{r}"
    );
    assert_eq!(r["transitions"][0]["p90_seconds"], 7200);

    // view 6 at 80x24
    let mut app = settle::console::app::App::new("sqlite://settle.db", "alice");
    app.view = settle::console::app::View::Review;
    app.review.shown = Some(Box::new(review));
    let mut term = ratatui::Terminal::new(ratatui::backend::TestBackend::new(80, 24)).unwrap();
    term.draw(|f| {
        settle::console::ui::draw(f, &app, &settle::console::theme::Theme { color: false })
    })
    .unwrap();
    let buf = term.backend().buffer().clone();
    let screen: Vec<String> = (0..24)
        .map(|y| (0..80).map(|x| buf[(x, y)].symbol().to_string()).collect())
        .collect();
    assert!(
        screen.iter().any(|l| l.contains(
            "runs 4 started · 2 done · 3 stalled (1 now) · 1 closed · first→second p50 10m"
        )),
        "{}",
        screen.join("\n")
    );
}

/// `settle report --since 1d --json` of the real binary on `db`, with the tests' two declared
/// steps an hour apart.
fn report_json(db: &TestDb) -> serde_json::Value {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("settle.toml");
    std::fs::write(
        &config,
        "[destinations.sms]\nmax_attempts = 3\n[workflows.onboarding]\nsteps = [\"first\", \"second\"]\nstep_gap = \"1h\"\n",
    )
    .unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_settle"))
        .args(["--db", &db.url, "--config", config.to_str().unwrap()])
        .args(["report", "--since", "1d", "--json"])
        .env("SETTLE_LOG_FILE", "/dev/null")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// Every run that stalled in the window counts once in `runs.stalled`, whatever happened to it
/// since: two still stalled, one closed by a person, one rerun to done are four.
async fn every_run_stalled_in_the_window_counts(db: &TestDb) {
    let t0 = Utc::now() - TimeDelta::hours(5);
    let (l, clock) = ledger(db).await;
    let at = |minutes: i64| *clock.lock().unwrap() = t0 + TimeDelta::minutes(minutes);
    at(0);
    for r in ["still-a", "still-b", "closed-c", "rerun-d"] {
        make(&l, r, "onboarding", "not recorded").await;
    }
    // every one stalls at minute 60 (the gap is an hour)
    at(90);
    l.staff()
        .run_action(
            "closed-c",
            "alice",
            RunAction::Close {
                resolution: Resolution::Abandoned,
                note: "the customer left".into(),
            },
        )
        .await
        .unwrap();
    at(120);
    let second = step("rerun-d", "onboarding", "second", json!({}));
    l.record(&second, "bot").await.unwrap();
    l.report_attempt(&report("rerun-d:second", Outcome::Accepted), "bot")
        .await
        .unwrap();
    // a run closed before it stalled is not counted
    at(130);
    make(&l, "early-e", "onboarding", "not recorded").await;
    l.staff()
        .run_action(
            "early-e",
            "alice",
            RunAction::Close {
                resolution: Resolution::DoneElsewhere,
                note: "sent by hand".into(),
            },
        )
        .await
        .unwrap();
    at(240);
    let review = l
        .read()
        .review(
            std::time::Duration::from_secs(86_400),
            &settle::ledger::ReviewScope::default(),
        )
        .await
        .unwrap();
    let runs = &review.runs;
    assert_eq!(
        (runs.started, runs.stalled, runs.closed, runs.stalled_now),
        (5, 4, 2, 2),
        "{runs:?}"
    );
    // and a window that begins after they stalled counts none of them
    let late = l
        .read()
        .review(
            std::time::Duration::from_secs(30 * 60),
            &settle::ledger::ReviewScope::default(),
        )
        .await
        .unwrap();
    assert_eq!(late.runs.stalled, 0, "{:?}", late.runs);
    // as settle report --json gives it
    let v = report_json(db);
    assert_eq!(v["runs"]["stalled"], 4, "{}", v["runs"]);
    assert_eq!(v["runs"]["stalled_now"], 2, "{}", v["runs"]);
}

/// JSON lines keep the runs' rows as record and attempt do: a step recorded and accepted in one
/// batch (its row made in the batch, its change written with it) leaves its run found by the
/// index of waits once the gap has passed, and the missing step ingested later takes it out.
async fn ingested_steps_keep_their_runs(db: &TestDb) {
    let (l, clock) = ledger(db).await;
    let line = |run: &str, step: &str| {
        format!(
            "{{\"type\":\"intent\",\"key\":\"{run}:{step}\",\"workflow\":\"onboarding\",\"step\":\"{step}\",\"destination\":\"sms\",\"action\":\"send\",\"payload\":{{}},\"run\":\"{run}\"}}\n\
             {{\"type\":\"attempt\",\"key\":\"{run}:{step}\",\"attempt\":1,\"outcome\":\"accepted\",\"reference\":\"R\"}}\n"
        )
    };
    let text = [
        line("in-a", "first"),
        line("in-b", "first"),
        line("in-b", "second"),
    ]
    .concat();
    let r = l.ingest(text.as_bytes(), "bot").await.unwrap();
    assert!(r.problems.is_empty(), "{:?}", r.problems);
    *clock.lock().unwrap() = t0() + TimeDelta::hours(2);
    let stalled = |l: &Ledger| {
        let l = l.clone();
        async move {
            l.read()
                .runs("state:stalled", "t", 10)
                .await
                .unwrap()
                .into_iter()
                .map(|r| r.run)
                .collect::<Vec<_>>()
        }
    };
    assert_eq!(stalled(&l).await, ["in-a"]);
    assert_eq!(
        l.read().run("in-b", "t").await.unwrap().state,
        RunState::Done
    );
    l.ingest(line("in-a", "second").as_bytes(), "bot")
        .await
        .unwrap();
    assert!(stalled(&l).await.is_empty());
    assert_eq!(l.read().stats().await.unwrap().stalled_runs, 0);
    assert_eq!(
        l.read().run("in-a", "t").await.unwrap().state,
        RunState::Done
    );
}

both_backends!(
    pgbouncer:
    ingested_steps_keep_their_runs,
    every_situation_of_a_step_gives_its_run_state,
    a_run_is_claimed_noted_and_closed_by_people,
    the_review_counts_a_known_ledgers_runs,
    every_run_stalled_in_the_window_counts,
);
