//! `cargo bench --bench chaos`: the chaos run of the manual's Proof under faults (see `tests/common/chaos.rs`).
//!
//! SETTLE_CHAOS_SEED (default 1), SETTLE_CHAOS_OPS (default 10,000 operations at least, a run of the
//! manual's onboard.sh for every 30), SETTLE_CHAOS_DB=sqlite|postgres|failover (default sqlite;
//! postgres runs a cluster of its own, restarted twice, its connections cut once; failover a
//! primary and its synchronous standby, failed over at half the ingest). Prints the
//! seed, what was injected and each invariant's count of violations; exits 1 on any violation.

#[path = "../tests/common/mod.rs"]
mod common;

use common::chaos::{self, Plan};

fn main() {
    let seed = common::env_count("SETTLE_CHAOS_SEED", 1) as u64;
    let ops = common::env_count("SETTLE_CHAOS_OPS", 10_000);
    let plan = match std::env::var("SETTLE_CHAOS_DB").as_deref() {
        Ok("failover") => Plan::failover(seed, ops),
        Ok("postgres") => Plan::of(seed, ops, true),
        _ => Plan::of(seed, ops, false),
    };
    let outcome = chaos::run(&plan);
    println!("{}", outcome.summary());
    if !outcome.violations.is_empty() {
        print!("{}", common::checker::report(&outcome.violations));
        std::process::exit(1);
    }
}
