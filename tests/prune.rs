//! Retention (manual: Retention and the archive), on both backends: `settle prune` removes exactly the terminal operations
//! past retention with their attempts and events, archives each (redacted) before it is gone,
//! keeps one `pruned` event, and a pruned key answers as its live operation did until the
//! horizon; a prune killed with -9 at any moment and rerun loses nothing.

mod common;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::{DateTime, TimeDelta, Utc};
use common::{Raw, TestDb};
use serde_json::json;
use settle::config::RetentionConfig;
use settle::ledger::{PruneOptions, Write, Writer, Written};
use settle::{
    AttemptReport, Error, Intent, Ledger, Outcome, Recorded, Resolution, StaffAction, State,
};

const DAY: Duration = Duration::from_secs(86_400);

fn t0() -> DateTime<Utc> {
    "2026-01-01T00:00:00Z".parse().unwrap()
}

/// A ledger keeping succeeded operations a day and closed ones two, with a clock the test moves.
async fn ledger_at(db: &TestDb) -> (Ledger, Arc<Mutex<DateTime<Utc>>>) {
    let mut config = common::config();
    config.retention = RetentionConfig {
        succeeded: Some(DAY),
        closed: Some(2 * DAY),
        ..Default::default()
    };
    ledger_on(db, config).await
}

/// A ledger on `config` whose clock starts at `t0()` and moves as the test sets it.
async fn ledger_on(db: &TestDb, config: settle::Config) -> (Ledger, Arc<Mutex<DateTime<Utc>>>) {
    let clock = Arc::new(Mutex::new(t0()));
    let c = clock.clone();
    let l = Ledger::open(&db.url, config)
        .await
        .unwrap()
        .with_clock(move || *c.lock().unwrap());
    (l, clock)
}

fn intent(key: &str, payload: serde_json::Value) -> Intent {
    Intent {
        key: key.into(),
        workflow: "onboarding".into(),
        step: "create-contact".into(),
        destination: "crm".into(),
        action: "create_contact".into(),
        payload,
        run: None,
    }
}

async fn succeed(l: &Ledger, key: &str, reference: &str) {
    l.record(
        &intent(key, json!({"customer": {"name": "Ada Lovelace"}, "k": key})),
        "bot",
    )
    .await
    .unwrap();
    l.report_attempt(
        &AttemptReport {
            key: key.into(),
            outcome: Some(Outcome::Accepted),
            reference: Some(reference.into()),
            ..Default::default()
        },
        "bot",
    )
    .await
    .unwrap();
}

async fn close(l: &Ledger, key: &str) {
    l.record(&intent(key, json!({"k": key})), "bot")
        .await
        .unwrap();
    l.staff()
        .act(
            key,
            "alice",
            StaffAction::Close {
                resolution: Resolution::Abandoned,
                reference: None,
                superseded_by: None,
                note: "not needed".into(),
            },
        )
        .await
        .unwrap();
}

async fn rows(db: &TestDb, table: &str) -> i64 {
    Raw::connect(&db.url)
        .await
        .int(&format!("SELECT COUNT(*) FROM {table}"))
        .await
}

/// Retention and the archive: exactly the terminal operations past retention go, with their attempts and events;
/// exceptions and live operations stay; the archive holds each one gone, redacted; one `pruned`
/// event is kept; a pruned key answers as its live operation until the horizon, then is free.
async fn prune_removes_exactly_what_retention_lets_go(db: &TestDb) {
    let (l, clock) = ledger_at(db).await;
    succeed(&l, "s-old", "T-1").await;
    close(&l, "c-old").await;
    l.record(&intent("x-unknown", json!({})), "bot")
        .await
        .unwrap();
    l.report_attempt(
        &AttemptReport {
            key: "x-unknown".into(),
            outcome: Some(Outcome::Unknown),
            ..Default::default()
        },
        "bot",
    )
    .await
    .unwrap();
    l.record(&intent("p-pending", json!({})), "bot")
        .await
        .unwrap();
    *clock.lock().unwrap() = t0() + TimeDelta::days(1);
    close(&l, "c-mid").await;
    *clock.lock().unwrap() = t0() + TimeDelta::days(2);
    succeed(&l, "s-new", "T-2").await;
    *clock.lock().unwrap() = t0() + TimeDelta::hours(60);
    let ops_before = rows(db, "operations").await;
    let events_before = rows(db, "events").await;
    let stats_before = l.read().stats().await.unwrap();

    // a dry run counts and removes nothing
    let dry = l
        .retention()
        .prune(
            "alice",
            &PruneOptions {
                dry_run: true,
                archive: None,
            },
        )
        .await
        .unwrap();
    assert_eq!((dry.succeeded, dry.closed, dry.dry_run), (1, 1, true));
    assert_eq!(rows(db, "operations").await, ops_before);
    assert_eq!(rows(db, "events").await, events_before);

    let dir = tempfile::tempdir().unwrap();
    let archive = dir.path().join("pruned.jsonl");
    let options = PruneOptions {
        dry_run: false,
        archive: Some(archive.clone()),
    };
    let report = l.retention().prune("alice", &options).await.unwrap();
    assert_eq!(
        (report.succeeded, report.closed, report.archived),
        (1, 1, 2)
    );
    assert_eq!(rows(db, "operations").await, ops_before - 2);
    let mut raw = Raw::connect(&db.url).await;
    let left = raw.texts("SELECT key FROM operations ORDER BY key").await;
    assert_eq!(left, ["c-mid", "p-pending", "s-new", "x-unknown"]);
    for table in ["attempts", "events"] {
        let orphans = raw
            .int(&format!(
                "SELECT COUNT(*) FROM {table} WHERE operation_id IS NOT NULL \
                 AND operation_id NOT IN (SELECT id FROM operations)"
            ))
            .await;
        assert_eq!(orphans, 0, "{table} of pruned operations are gone");
    }
    let pruned_events = raw
        .texts("SELECT detail FROM events WHERE kind = 'pruned' AND operation_id IS NULL")
        .await;
    assert_eq!(pruned_events.len(), 1, "{pruned_events:?}");
    let detail: serde_json::Value = serde_json::from_str(&pruned_events[0]).unwrap();
    assert_eq!(
        (detail["succeeded"].as_u64(), detail["closed"].as_u64()),
        (Some(1), Some(1))
    );
    // the counts the console and metrics read follow the removal
    let stats = l.read().stats().await.unwrap();
    let n = |s: &settle::ledger::Stats, state: State| s.by_state.get(&state).copied().unwrap_or(0);
    assert_eq!(
        n(&stats, State::Succeeded),
        n(&stats_before, State::Succeeded) - 1
    );
    assert_eq!(
        n(&stats, State::Closed),
        n(&stats_before, State::Closed) - 1
    );
    assert_eq!(stats.exceptions, stats_before.exceptions);

    // the archive: each removed operation's document, redacted
    let text = std::fs::read_to_string(&archive).unwrap();
    assert!(!text.contains("Ada Lovelace"), "redacted: {text}");
    let mut keys: Vec<String> = text
        .lines()
        .map(|line| {
            let doc: serde_json::Value = serde_json::from_str(line).unwrap();
            doc["key"].as_str().unwrap().to_string()
        })
        .collect();
    keys.sort();
    assert_eq!(keys, ["c-old", "s-old"]);

    // the pruned key answers as its live operation did
    let same = intent(
        "s-old",
        json!({"customer": {"name": "Ada Lovelace"}, "k": "s-old"}),
    );
    assert_eq!(l.record(&same, "bot").await.unwrap(), Recorded::Unchanged);
    let changed = l
        .record(&intent("s-old", json!({"k": "other"})), "bot")
        .await;
    assert!(
        matches!(&changed, Err(Error::Refused(m)) if m.contains("succeeded")),
        "{changed:?}"
    );
    let start = l.start("s-old", "bot").await;
    assert!(matches!(&start, Err(Error::Refused(_))), "{start:?}");
    // through the HTTP API's group writer and through ingest alike
    let writer = Writer::new(&l, 1);
    let (r, s) = writer
        .write_two(
            &l,
            "bot",
            Write::Record(same.clone()),
            Write::Start("s-old".into()),
        )
        .await;
    assert!(
        matches!(
            r.as_ref().map(|a| &a.written),
            Ok(Written::Recorded(Recorded::Unchanged))
        ),
        "{:?}",
        r.map(|a| a.written)
    );
    assert!(
        matches!(&s, Err(Error::Refused(_))),
        "{:?}",
        s.map(|a| a.written)
    );
    // a start alone in its group is judged in the batch, and refused there as by the single call
    let alone = writer.write(&l, "bot", Write::Start("s-old".into())).await;
    assert!(
        matches!(&alone, Err(Error::Refused(m)) if m.contains("pruned")),
        "{:?}",
        alone.map(|a| a.written)
    );
    let line = json!({"type": "intent", "key": "c-old", "workflow": "onboarding",
        "step": "create-contact", "destination": "crm", "action": "create_contact",
        "payload": {"k": "c-old"}})
    .to_string()
        + "\n";
    let ingested = l.ingest(line.as_bytes(), "bot").await.unwrap();
    assert_eq!(
        (ingested.created, ingested.unchanged),
        (0, 1),
        "{ingested:?}"
    );
    // read, it is what its key still answers: the terminal state and reference, marked pruned
    let shown = l.read().show("s-old", "alice").await.unwrap();
    assert!(shown.pruned);
    assert_eq!(shown.op.state, State::Succeeded);
    assert_eq!(shown.op.reference.as_deref(), Some("T-1"));
    assert!(shown.op.is_done() && shown.attempt_log.is_empty() && shown.payload.is_null());
    let listed = l.read().operation("c-old", "alice").await.unwrap();
    assert_eq!(listed.state, State::Closed);
    let never = l.read().show("never-was", "alice").await.unwrap_err();
    assert!(matches!(never, Error::NotFound(_)), "{never}");
    assert_eq!(
        rows(db, "operations").await,
        ops_before - 2,
        "nothing recorded anew"
    );

    // past the horizon (30 days by default) the key is free, pruned again or not; a prune frees
    // the keys past theirs, its own included (c-mid became terminal 31 days ago)
    *clock.lock().unwrap() = t0() + TimeDelta::hours(31 * 24 + 12);
    assert_eq!(l.record(&same, "bot").await.unwrap(), Recorded::Created);
    let later = l
        .retention()
        .prune("alice", &PruneOptions::default())
        .await
        .unwrap();
    assert_eq!(
        (later.succeeded, later.closed, later.keys_freed),
        (1, 1, 3),
        "{later:?}"
    );
    let kept = Raw::connect(&db.url)
        .await
        .texts("SELECT key FROM pruned_keys")
        .await;
    assert_eq!(kept, ["s-new"]);
}

/// Retention and the archive: a prune killed with -9 at random moments and rerun loses nothing: every operation
/// gone is in the archive (some twice, none never), and the last run removes the rest.
async fn a_prune_killed_anywhere_loses_nothing(db: &TestDb) {
    killed_prunes(db, "archive.jsonl").await;
}

/// The same with a zstd archive (one frame a batch): a kill tears at worst the last frame.
async fn a_zstd_prune_killed_anywhere_loses_nothing(db: &TestDb) {
    killed_prunes(db, "archive.jsonl.zst").await;
}

async fn killed_prunes(db: &TestDb, name: &str) {
    let (l, _clock) = ledger_at(db).await;
    let n = 1_500;
    let mut text = String::new();
    for i in 0..n {
        text.push_str(&format!(
            r#"{{"type":"intent","key":"k-{i:05}","workflow":"onboarding","destination":"crm","action":"a","payload":{{"i":{i}}}}}"#
        ));
        text.push_str(&format!(
            "\n{{\"type\":\"attempt\",\"key\":\"k-{i:05}\",\"attempt\":1,\"outcome\":\"accepted\",\"reference\":\"T-{i}\"}}\n"
        ));
    }
    let ingested = l.ingest(text.as_bytes(), "bot").await.unwrap();
    assert_eq!(
        (ingested.created, ingested.attempts),
        (n, n),
        "{ingested:?}"
    );
    let drill = common::drill_with(&db.url, "[retention]\nsucceeded = \"1d\"\n");
    let archive = drill.config.with_file_name(name);
    let args = ["prune", "--archive", archive.to_str().unwrap()];
    let mut kills = 0;
    for _ in 0..6 {
        let size = |p: &std::path::Path| std::fs::metadata(p).map_or(0, |m| m.len());
        let before = size(&archive);
        let mut run = common::Killed(drill.cmd(&args).spawn().unwrap());
        // once this run has archived something: anywhere in its next moments
        common::wait_until("the run archives", Duration::from_secs(30), || {
            size(&archive) > before
        });
        std::thread::sleep(Duration::from_millis(rand::random_range(0..150)));
        run.kill_9();
        let left = rows(db, "operations").await;
        eprintln!("killed with {left} operations left");
        if left < n as i64 {
            kills += 1;
        }
        if left == 0 {
            break;
        }
    }
    drill.run(&args);
    assert_eq!(
        rows(db, "operations").await,
        0,
        "the last run removed the rest"
    );
    let bytes = std::fs::read(&archive).unwrap_or_default();
    let text = match name.ends_with(".zst") {
        true => String::from_utf8(zstd::stream::decode_all(&bytes[..]).unwrap()).unwrap(),
        false => String::from_utf8(bytes).unwrap(),
    };
    let archived: std::collections::BTreeSet<String> = text
        .lines()
        .map(|line| {
            let doc: serde_json::Value = serde_json::from_str(line)
                .unwrap_or_else(|e| panic!("a whole line ({e}): {line:?}"));
            doc["key"].as_str().unwrap().to_string()
        })
        .collect();
    assert!(kills > 0, "a run was killed while it pruned");
    assert_eq!(
        archived.len(),
        n,
        "every pruned operation archived ({kills} kills)"
    );
    // recorded eleven months before the real clock: past the horizon, their keys are free
    assert_eq!(rows(db, "pruned_keys").await, 0);
    assert_eq!(rows(db, "events WHERE operation_id IS NOT NULL").await, 0);
    assert!(rows(db, "events WHERE kind = 'pruned'").await >= 1);
}

both_backends!(
    prune_removes_exactly_what_retention_lets_go,
    a_prune_killed_anywhere_loses_nothing,
    a_zstd_prune_killed_anywhere_loses_nothing,
    auto_prune_runs_in_the_background,
    a_runs_operations_wait_for_the_run
);

/// The archive a killed prune left with half a line: the half goes before the rerun appends
/// (its batch was never deleted, so it is archived again whole); a file that is not an archive
/// keeps its text, and the documents start on a line of their own.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_half_written_archive_line_is_cut_before_appending() {
    let db = common::sqlite();
    let (l, clock) = ledger_at(&db).await;
    succeed(&l, "a-1", "T-1").await;
    succeed(&l, "a-2", "T-2").await;
    *clock.lock().unwrap() = t0() + TimeDelta::days(3);
    let dir = tempfile::tempdir().unwrap();
    let archive = dir.path().join("a.jsonl");
    std::fs::write(&archive, "{\"key\":\"a-0\"}\n{\"key\":\"a-1\",\"sta").unwrap();
    let options = PruneOptions {
        dry_run: false,
        archive: Some(archive.clone()),
    };
    assert_eq!(
        l.retention()
            .prune("alice", &options)
            .await
            .unwrap()
            .archived,
        2
    );
    let text = std::fs::read_to_string(&archive).unwrap();
    let keys: Vec<String> = text
        .lines()
        .map(|line| {
            let doc: serde_json::Value = serde_json::from_str(line).unwrap();
            doc["key"].as_str().unwrap().to_string()
        })
        .collect();
    assert_eq!(keys, ["a-0", "a-1", "a-2"], "{text}");

    let other = dir.path().join("notes.txt");
    std::fs::write(&other, "my notes, no newline").unwrap();
    succeed(&l, "a-3", "T-3").await;
    *clock.lock().unwrap() = t0() + TimeDelta::days(6);
    let options = PruneOptions {
        dry_run: false,
        archive: Some(other.clone()),
    };
    assert_eq!(
        l.retention()
            .prune("alice", &options)
            .await
            .unwrap()
            .archived,
        1
    );
    let text = std::fs::read_to_string(&other).unwrap();
    let mut lines = text.lines();
    assert_eq!(lines.next(), Some("my notes, no newline"));
    assert!(
        lines.next().unwrap().starts_with("{\"key\":\"a-3\""),
        "{text}"
    );
}

/// `[retention] auto = true`: the background prune of `serve` and `dispatch` removes what the
/// retention lets go, again and again, as settle; without `auto` there is none.
async fn auto_prune_runs_in_the_background(db: &TestDb) {
    let (l, _) = ledger_at(db).await;
    assert!(
        l.retention().auto_prune().is_none(),
        "only where the config asks"
    );
    let mut config = l.config().clone();
    config.retention.auto = true;
    let (l, clock) = ledger_on(db, config).await;
    succeed(&l, "b-1", "T-1").await;
    *clock.lock().unwrap() = t0() + TimeDelta::days(2);
    let pruning = l
        .retention()
        .auto_prune_every(Duration::from_millis(10), Duration::from_millis(50));
    assert!(pruning.is_some());
    let gone = |key: &'static str| {
        let l = l.clone();
        async move {
            l.read()
                .show(key, "alice")
                .await
                .map(|d| d.pruned)
                .unwrap_or(false)
        }
    };
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while !gone("b-1").await {
        assert!(std::time::Instant::now() < deadline, "b-1 was never pruned");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // a later one on a later round
    succeed(&l, "b-2", "T-2").await;
    *clock.lock().unwrap() = t0() + TimeDelta::days(4);
    while !gone("b-2").await {
        assert!(std::time::Instant::now() < deadline, "b-2 was never pruned");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // each prune's event follows its last batch
    let mut raw = Raw::connect(&db.url).await;
    let actors = loop {
        let actors = raw
            .texts("SELECT actor FROM events WHERE kind = 'pruned'")
            .await;
        if actors.len() >= 2 {
            break actors;
        }
        assert!(std::time::Instant::now() < deadline, "{actors:?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    drop(pruning);
    assert!(actors.iter().all(|a| a == "settle"), "{actors:?}");
}

/// An operation of a run is pruned only once its run is done (or closed), and the run's row
/// goes with its last operation: a run is never left half pruned while it still waits for a
/// step.
async fn a_runs_operations_wait_for_the_run(db: &TestDb) {
    let mut config = settle::Config::parse(
        "[destinations.crm]\n[workflows.onboarding]\nsteps = [\"first\", \"second\"]\n",
        "t",
    )
    .unwrap();
    config.retention = RetentionConfig {
        succeeded: Some(DAY),
        ..Default::default()
    };
    let (l, clock) = ledger_on(db, config).await;
    let step = |key: &str, step: &str| Intent {
        step: step.into(),
        run: Some("run-1".into()),
        ..intent(key, json!({"k": key}))
    };
    let done = |key: &str| AttemptReport {
        key: key.into(),
        outcome: Some(Outcome::Accepted),
        reference: Some(format!("T-{key}")),
        ..Default::default()
    };
    l.record(&step("r-first", "first"), "bot").await.unwrap();
    l.report_attempt(&done("r-first"), "bot").await.unwrap();
    l.record(&step("r-second", "second"), "bot").await.unwrap();
    *clock.lock().unwrap() = t0() + TimeDelta::days(3);
    let r = l
        .retention()
        .prune("alice", &PruneOptions::default())
        .await
        .unwrap();
    assert_eq!(r.succeeded, 0, "its run still waits for its second step");
    assert_eq!(rows(db, "runs").await, 1);
    l.report_attempt(&done("r-second"), "bot").await.unwrap();
    *clock.lock().unwrap() = t0() + TimeDelta::days(6);
    let r = l
        .retention()
        .prune("alice", &PruneOptions::default())
        .await
        .unwrap();
    assert_eq!(r.succeeded, 2, "the run is done: both steps go");
    assert_eq!(rows(db, "operations").await, 0);
    assert_eq!(rows(db, "runs").await, 0, "and the run's row with them");
}
