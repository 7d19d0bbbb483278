//! The short chaos run of the manual's Proof under faults in CI, on both backends: a few hundred operations
//! under every fault at once (see `common/chaos.rs`), then every invariant checked against the
//! destinations' own records. The long run is `cargo bench --bench chaos` (docs/development.md).

mod common;

use common::chaos::{self, Plan};

fn short(postgres: bool) {
    let seed = common::env_count("SETTLE_CHAOS_SEED", 1) as u64;
    let plan = Plan::of(seed, 1000, postgres);
    let outcome = chaos::run(&plan);
    println!("{}", outcome.summary());
    outcome.assert_clean();
    // a share of the operations went through the two servers, each sent to both at once
    assert!(outcome.tally.served > 0, "{}", outcome.summary());
    // the run did what it says: faults of every kind, kills, and (on PostgreSQL) the outages
    let t = &outcome.tally;
    for kind in [
        "reject",
        "drop",
        "late",
        "unavailable",
        "error",
        "outage",
        "limited",
    ] {
        assert!(
            outcome.faults.get(kind).copied().unwrap_or(0) > 0,
            "no {kind}: {}",
            outcome.summary()
        );
    }
    assert!(
        t.dispatcher_kills > 0 && t.script_kills > 0,
        "{}",
        outcome.summary()
    );
    assert!(
        t.person.keys().any(|a| a.ends_with("done")),
        "{}",
        outcome.summary()
    );
    // every ingested operation, and the steps the script runs reached (a run stopped for a person
    // records no later step)
    let ops = outcome.operations as usize;
    assert!(
        (plan.ops + plan.runs / 2..=plan.ops + 3 * plan.runs).contains(&ops),
        "{}",
        outcome.summary()
    );
    if postgres {
        assert_eq!((t.db_restarts, t.db_cuts), (2, 1), "{}", outcome.summary());
    }
}

#[test]
fn a_short_chaos_run_on_sqlite() {
    short(false);
}

#[test]
#[cfg_attr(not(settle_pg), ignore = "needs SETTLE_TEST_POSTGRES_URL")]
fn a_short_chaos_run_on_postgres() {
    short(true);
}
