//! The failover drill (manual: Failover): a primary and a synchronous streaming standby of the
//! test's own (`initdb`, `pg_basebackup -R`, `synchronous_standby_names`), every settle process
//! reaching them through one multi-host URL with `target_session_attrs=read-write`. Under the
//! chaos run's load (the automation through `settle ingest` and two `settle serve --http`, two
//! `settle dispatch`, the manual's script, a person), at half the ingest the primary is stopped
//! with `-m immediate` and the standby promoted with `pg_ctl promote`. Every long-running process
//! carries on by itself within 10 s (none is restarted), no operation the automation was told
//! was recorded is missing, and the checker finds no key sent twice and nothing lost.

mod common;

use std::time::Duration;

use common::chaos::{self, Plan};

#[test]
#[cfg_attr(not(settle_pg), ignore = "needs SETTLE_TEST_POSTGRES_URL")]
fn a_primary_fails_over_to_its_synchronous_standby_mid_run() {
    let seed = common::env_count("SETTLE_CHAOS_SEED", 1) as u64;
    let plan = Plan::failover(seed, 1000);
    let outcome = chaos::run(&plan);
    println!("{}", outcome.summary());
    // nothing lost, nothing sent twice, nothing acknowledged missing
    outcome.assert_clean();
    let t = &outcome.tally;
    let seen = t.failover.as_ref().expect("the drill failed over");
    // the primary went at half the ingest, with work in hand
    assert!(seen.acked >= plan.ops / 2, "{}", outcome.summary());
    // each process carried on by itself: none ended, none was started again
    assert_eq!(t.dispatcher_exits, 0, "{}", outcome.summary());
    for (who, when) in &seen.carried_on {
        assert!(
            when.is_some_and(|w| w <= Duration::from_secs(10)),
            "{who} carried on after {when:?}: {}",
            outcome.summary()
        );
    }
    // some of the operations went over the HTTP API
    assert!(t.served > 0, "{}", outcome.summary());
}
