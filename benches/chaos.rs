//! `cargo bench --bench chaos`: the chaos run of the manual's Proof under faults (see `tests/common/chaos.rs`).
//!
//! SETTLE_CHAOS_SEED (default 1), SETTLE_CHAOS_OPS (default 10,000 operations at least, a run of the
//! manual's onboard.sh for every 30), SETTLE_CHAOS_DB=sqlite|postgres (default sqlite;
//! postgres runs a cluster of its own, restarted twice, its connections cut once). Prints the
//! seed, what was injected and each invariant's count of violations; exits 1 on any violation.

#[path = "../tests/common/mod.rs"]
mod common;

use common::chaos::{self, Plan};

fn main() {
    let plan = Plan::of(
        common::env_count("SETTLE_CHAOS_SEED", 1) as u64,
        common::env_count("SETTLE_CHAOS_OPS", 10_000),
        std::env::var("SETTLE_CHAOS_DB").is_ok_and(|d| d == "postgres"),
    );
    let outcome = chaos::run(&plan);
    println!("{}", outcome.summary());
    if !outcome.violations.is_empty() {
        print!("{}", common::checker::report(&outcome.violations));
        std::process::exit(1);
    }
}
