//! the checker (manual: Proof under faults) (tests/common/checker.rs) shown to catch each violation it is for: a clean
//! run checks clean; then, one at a time, a second task at a destination that does not
//! deduplicate, a reference that is not the task's, a `failed` operation whose task exists, a
//! missing event, a counter off by one and an `unknown` whose answer settle saw are planted, and the checker names each one's key.

mod common;

use common::checker::{self, Destination, Violation};
use common::{Raw, Sim, TestDb};

/// A second task for `key` at the simulator, as a blind retry of another tool would make it.
fn second_task(sim: &Sim, key: &str) {
    let url = format!("{}/tasks", sim.base);
    let status = common::on_a_thread(async {
        reqwest::Client::new()
            .post(url)
            .header("Idempotency-Key", key)
            .json(&serde_json::json!({"title": "Kickoff call"}))
            .send()
            .await
            .unwrap()
            .status()
    });
    assert!(status.is_success(), "{status}");
}

async fn planted_violations_are_named(db: &TestDb) {
    let sim = Sim::start(&["--no-dedupe"]);
    let d = common::drill(db, &sim, false, false, "");
    let keys = ["chk-1", "chk-2", "chk-3", "chk-4", "chk-5"];
    for k in keys {
        d.record(k);
    }
    d.dispatch_until_settled();
    d.run(&["sweep"]);
    let dests = [Destination {
        name: "tasks",
        sim: &sim,
        dedupes: false,
    }];
    let check = async || checker::check(&db.url, &dests, true).await;
    let clean = check().await;
    assert!(clean.is_empty(), "{}", checker::report(&clean));

    let only = |found: &[Violation], invariant: u8, key: &str| {
        assert!(
            found
                .iter()
                .any(|v| v.invariant == invariant && v.key == key),
            "invariant {invariant} for {key:?} not named: {}",
            checker::report(found)
        );
    };
    // 1: a second task at a destination that does not deduplicate
    second_task(&sim, "chk-1");
    let found = check().await;
    only(&found, 1, "chk-1");
    assert_eq!(found.len(), 1, "{}", checker::report(&found));

    let mut raw = Raw::connect(&db.url).await;
    // 2: a reference that is not the task's id
    raw.execute("UPDATE operations SET reference = 'T-not-its-own' WHERE key = 'chk-2'")
        .await
        .unwrap();
    only(&check().await, 2, "chk-2");
    // 3: `failed` (confirmed not done) where the task exists; its events no longer end at its
    // state either
    raw.execute("UPDATE operations SET state = 'failed' WHERE key = 'chk-3'")
        .await
        .unwrap();
    let found = check().await;
    only(&found, 3, "chk-3");
    only(&found, 6, "chk-3");
    // 6: a state change without its event
    for sql in [
        "INSERT INTO prune_gate (id) VALUES (1)",
        "DELETE FROM events WHERE id = (SELECT MAX(id) FROM events WHERE to_state IS NOT NULL \
         AND (from_state IS NULL OR from_state <> to_state) \
         AND operation_id = (SELECT id FROM operations WHERE key = 'chk-4'))",
        "DELETE FROM prune_gate",
    ] {
        raw.execute(sql).await.unwrap();
    }
    only(&check().await, 6, "chk-4");
    // 6: a counter off by one
    let off = match raw {
        Raw::Sqlite(_) => "UPDATE state_counts SET n = n + 1 WHERE state = 'succeeded'",
        Raw::Postgres(_) => {
            "INSERT INTO state_counts (workflow, state, n) VALUES ('onboarding', 'succeeded', 1)"
        }
    };
    assert!(!check().await.iter().any(|v| v.key.is_empty()));
    raw.execute(off).await.unwrap();
    let found = check().await;
    only(&found, 6, "");
    assert!(
        found.iter().any(|v| v.what.starts_with("succeeded:")),
        "{}",
        checker::report(&found)
    );
    // chk-5 was never touched: never named
    assert!(
        !found.iter().any(|v| v.key == "chk-5"),
        "{}",
        checker::report(&found)
    );
    // 4: unknown, though settle saw the destination accept it
    raw.execute("UPDATE operations SET state = 'unknown' WHERE key = 'chk-5'")
        .await
        .unwrap();
    only(&check().await, 4, "chk-5");
}

/// Invariant 5: an attempt started and never answered stays `in_flight` until a sweep; the
/// checker names it when told a sweep has run.
async fn in_flight_after_a_sweep_is_named(db: &TestDb) {
    let sim = Sim::start(&["--no-dedupe"]);
    let d = common::drill(db, &sim, false, false, "");
    d.record("chk-open");
    d.run(&["start", "--key", "chk-open"]);
    let dests = [Destination {
        name: "tasks",
        sim: &sim,
        dedupes: false,
    }];
    let found = checker::check(&db.url, &dests, true).await;
    assert!(
        found
            .iter()
            .any(|v| v.invariant == 5 && v.key == "chk-open"),
        "{}",
        checker::report(&found)
    );
    // before any sweep, in flight is where it should be
    let found = checker::check(&db.url, &dests, false).await;
    assert!(found.is_empty(), "{}", checker::report(&found));
}

both_backends!(
    planted_violations_are_named,
    in_flight_after_a_sweep_is_named
);
