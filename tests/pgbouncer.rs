//! settle through PgBouncer in transaction pooling mode, as teams run PostgreSQL (manual: Retention and the archive):
//! scripts and people at the command line, and dispatchers, all at once. The ledger's
//! conformance suite runs through one as well (`through_pgbouncer` in tests/conformance.rs and
//! tests/runs.rs), and so do two consoles (tests/console_e2e.rs). Each test starts a PgBouncer of
//! its own that hands every transaction the next server connection in turn, so anything that
//! leans on a session (a named statement, a LISTEN) fails here at once.

mod common;

use common::{Drill, Sim, TestDb, drill};
use serde_json::Value;

/// Runs `body` (blocking: it starts processes and waits for them) on a fresh database that
/// settle reaches through a PgBouncer of its own.
async fn through_pgbouncer(body: impl FnOnce(&TestDb) + Send + 'static) {
    let db = common::pgbouncer().await;
    tokio::task::spawn_blocking(move || body(&db))
        .await
        .unwrap();
}

/// One script following the manual's protocol: record, start, send (here: nothing), attempt.
fn script(d: &Drill, key: &str, outcome: &str) {
    d.record(key);
    let started: Value = serde_json::from_str(&d.run(&["start", "--key", key, "--json"])).unwrap();
    assert_eq!(started["send"], true, "{key}: {started}");
    let mut args = vec!["attempt", "--key", key, "--outcome", outcome];
    let reference = format!("T-{key}");
    if outcome == "accepted" {
        args.extend(["--reference", &reference]);
    }
    d.run(&args);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    not(all(settle_pg, settle_pgbouncer)),
    ignore = "needs SETTLE_TEST_POSTGRES_URL and pgbouncer"
)]
async fn scripts_and_people_at_the_command_line() {
    through_pgbouncer(|db| {
        let sim = Sim::start(&[]);
        let d = drill(db, &sim, false, false, "");
        d.run(&["init"]);
        // forty scripts at once, every fourth losing its answer
        std::thread::scope(|s| {
            for i in 0..40 {
                let d = &d;
                s.spawn(move || {
                    let outcome = if i % 4 == 3 { "unknown" } else { "accepted" };
                    script(d, &format!("pgb-{i:02}"), outcome);
                });
            }
        });
        for i in 0..40 {
            let v = d.show(&format!("pgb-{i:02}"));
            let want = if i % 4 == 3 { "unknown" } else { "succeeded" };
            assert_eq!(v["state"], want, "{v}");
        }
        // the same again changes nothing: a repeat of the record is answered from the ledger
        let again = d.record("pgb-00");
        assert!(again.contains("done"), "{again}");
        // a person works the ten unknowns: claims them, reconciles two, retries the one found
        // absent, closes the rest; a dispatcher sends the retry
        let listed = d.run(&["list"]);
        assert_eq!(
            listed.lines().filter(|l| l.contains(" unknown ")).count(),
            10,
            "{listed}"
        );
        d.run(&["claim", "--where", "state:unknown", "--yes"]);
        d.run(&["reconcile", "pgb-03", "--found", "T-found-3"]);
        d.run(&["reconcile", "pgb-07", "--absent"]);
        assert_eq!(d.show("pgb-07")["state"], "failed");
        d.run(&["retry", "pgb-07"]);
        d.run(&[
            "close",
            "--where",
            "state:unknown",
            "--resolution",
            "abandoned",
            "--note",
            "not needed any more",
            "--yes",
        ]);
        assert_eq!(d.show("pgb-03")["state"], "succeeded");
        assert_eq!(d.show("pgb-03")["reference"], "T-found-3");
        assert_eq!(d.show("pgb-15")["state"], "closed");
        d.dispatch_until_settled();
        assert_eq!(d.show("pgb-07")["state"], "succeeded");
        assert_eq!(sim.tasks().0, 1, "the retry's one task");
        let stats = d.run(&["stats"]);
        let count = |state: &str| -> u64 {
            let line = stats.lines().find(|l| l.starts_with(state)).unwrap();
            line.split_whitespace().nth(1).unwrap().parse().unwrap()
        };
        assert_eq!(
            (count("succeeded"), count("closed"), count("failed")),
            (32, 8, 0),
            "{stats}"
        );
        let report = d.run(&["report", "--json"]);
        let report: Value = serde_json::from_str(&report).unwrap();
        assert!(report.is_object(), "{report}");
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    not(all(settle_pg, settle_pgbouncer)),
    ignore = "needs SETTLE_TEST_POSTGRES_URL and pgbouncer"
)]
async fn two_dispatchers_through_faults() {
    through_pgbouncer(|db| {
        let sim = Sim::start(&[
            "--fault-rate",
            "0.2",
            "--fault-kinds",
            "drop,error,unavailable",
            "--seed",
            "22",
        ]);
        // retries enough that no key runs out of attempts to faults (1 in 0.2^10)
        let d = common::drill_with(
            &db.url,
            &format!(
                "attempt_timeout = \"2s\"\n[destinations.tasks]\nurl = \"{}/tasks\"\n\
                 dedupes = true\nkey_retention = \"1h\"\nmax_attempts = 10\nbase = \"10ms\"\n\
                 cap = \"50ms\"\ntimeout = \"1s\"\n",
                sim.base
            ),
        );
        let dir = tempfile::tempdir().unwrap();
        let lines = dir.path().join("intents.jsonl");
        let text: String = (0..300)
            .map(|i| {
                format!(
                    "{{\"type\":\"intent\",\"key\":\"pgb-{i:03}\",\"workflow\":\"onboarding\",\
                     \"destination\":\"tasks\",\"action\":\"create_task\",\"payload\":{{\"n\":{i}}}}}\n"
                )
            })
            .collect();
        std::fs::write(&lines, text).unwrap();
        d.run(&["ingest", lines.to_str().unwrap()]);
        let both: Vec<_> = (0..2)
            .map(|_| {
                d.cmd(&["dispatch", "--until-settled"])
                    .stdout(std::process::Stdio::null())
                    .spawn()
                    .unwrap()
            })
            .collect();
        for mut c in both {
            assert!(c.wait().unwrap().success(), "a dispatcher failed");
        }
        let (total, by_key) = sim.tasks();
        assert_eq!(total, 300, "one task per key: {by_key:?}");
        let dests = [common::checker::Destination {
            name: "tasks",
            sim: &sim,
            dedupes: true,
        }];
        let found = common::checker::check_blocking(&db.url, &dests, true);
        assert!(found.is_empty(), "{}", common::checker::report(&found));
        assert!(by_key.values().all(|n| *n == 1), "{by_key:?}");
        for i in (0..300).step_by(7) {
            let v = d.show(&format!("pgb-{i:03}"));
            assert_eq!(v["state"], "succeeded", "{v}");
        }
        let stats = d.run(&["stats"]);
        assert!(
            stats.lines().any(|l| l.split_whitespace().eq(["succeeded", "300"])),
            "{stats}"
        );
    })
    .await;
}

/// Without `pgbouncer=true`, the first statement that meets another server connection fails,
/// and the one line says what to add.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    not(all(settle_pg, settle_pgbouncer)),
    ignore = "needs SETTLE_TEST_POSTGRES_URL and pgbouncer"
)]
async fn without_the_option_the_error_says_what_to_add() {
    through_pgbouncer(|db| {
        let bare = db.url.replace("?pgbouncer=true", "");
        let sim = Sim::start(&[]);
        let d = drill(db, &sim, false, false, "");
        d.record("pgb-1");
        // several server connections open behind the pooler, so that the next transaction
        // of any client goes to another one
        let readers: Vec<_> = (0..4)
            .map(|_| {
                d.cmd(&["show", "pgb-1"])
                    .stdout(std::process::Stdio::null())
                    .spawn()
                    .unwrap()
            })
            .collect();
        for mut r in readers {
            assert!(r.wait().unwrap().success());
        }
        let plain = common::drill_on(&bare, &sim, false, false, "");
        let (code, _, stderr) = plain.output(&["show", "pgb-1"]);
        assert_ne!(code, 0, "{stderr}");
        assert_eq!(stderr.lines().count(), 1, "{stderr}");
        assert!(
            stderr.contains("add pgbouncer=true to the database URL"),
            "{stderr}"
        );
    })
    .await;
}

/// A PgBouncer as shipped refuses startup parameters it does not know: settle sends none of its
/// own (it would not `init` otherwise: "unsupported startup parameter: extra_float_digits"), and
/// one that a team put in the URL is named in the one line, with the two ways out, never taken
/// for a missing `pgbouncer=true`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    not(all(settle_pg, settle_pgbouncer)),
    ignore = "needs SETTLE_TEST_POSTGRES_URL and pgbouncer"
)]
async fn a_refused_startup_parameter_is_named() {
    through_pgbouncer(|db| {
        let sim = Sim::start(&[]);
        let d = drill(db, &sim, false, false, "");
        let (code, out, stderr) = d.output(&["init"]);
        assert_eq!(code, 0, "{out}{stderr}");
        let with_options = format!("{}&options=-c%20statement_timeout%3D5000", db.url);
        let other = common::drill_on(&with_options, &sim, false, false, "");
        let (code, _, stderr) = other.output(&["stats"]);
        assert_eq!(code, 4, "{stderr}");
        assert_eq!(stderr.lines().count(), 1, "{stderr}");
        assert!(
            stderr.contains("startup parameter `options`")
                && stderr.contains("ignore_startup_parameters"),
            "{stderr}"
        );
        assert!(!stderr.contains("add pgbouncer=true"), "{stderr}");
    })
    .await;
}

/// Many clients of few server connections, each read ending without a COMMIT of its own (its
/// transaction dropped) and each write beginning its own: the rollback sqlx queues for a
/// dropped transaction must reach the pooler alone. Sent together with the pool's release
/// check (a Sync), PgBouncer hands the server on after the rollback's answer, and the Sync's
/// answer ("idle") then reaches the next client as the answer to its BEGIN: "got unexpected
/// connection status after attempting to begin transaction" (CI, stop 36).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    not(all(settle_pg, settle_pgbouncer)),
    ignore = "needs SETTLE_TEST_POSTGRES_URL and pgbouncer"
)]
async fn reads_and_writes_of_many_clients_on_few_server_connections() {
    let db = common::pgbouncer().await;
    let first = settle::Ledger::open(&db.url, common::config())
        .await
        .unwrap();
    first.close().await;
    // each client on a thread and a runtime of its own, as the processes of a team would be
    let url = db.url.clone();
    tokio::task::spawn_blocking(move || {
        std::thread::scope(|s| {
            for client in 0..24 {
                let url = &url;
                s.spawn(move || {
                    tokio::runtime::Builder::new_current_thread()
                        .enable_all()
                        .build()
                        .unwrap()
                        .block_on(one_client(url, client))
                });
            }
        })
    })
    .await
    .unwrap();
    let ledger = settle::Ledger::open(&db.url, common::config())
        .await
        .unwrap();
    let stats = ledger.read().stats().await.unwrap();
    let total: i64 = stats.by_state.values().sum();
    assert_eq!(total, 24 * 40, "{stats:?}");
}

/// One client: forty records, each read back.
async fn one_client(url: &str, client: usize) {
    let ledger = settle::Ledger::open(url, common::config()).await.unwrap();
    for i in 0..40 {
        let key = format!("many-{client:02}-{i:02}");
        let intent = settle::Intent {
            key: key.clone(),
            workflow: "onboarding".into(),
            step: "create-task".into(),
            destination: "tasks".into(),
            action: "create_task".into(),
            payload: serde_json::json!({"n": i}),
            run: None,
        };
        ledger.record(&intent, "t").await.unwrap();
        assert_eq!(ledger.read().show(&key, "t").await.unwrap().op.key, key);
    }
    ledger.close().await;
}
