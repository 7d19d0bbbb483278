//! Tells the tests whether a PostgreSQL server was given (`SETTLE_TEST_POSTGRES_URL`): without
//! one, the PostgreSQL tests are compiled as ignored, so a run without PostgreSQL shows them as
//! skipped rather than as passed (`cargo test -- --include-ignored` runs them anyway, and then
//! they fail for want of a server). Where PostgreSQL is required (`SETTLE_REQUIRE_POSTGRES`, any
//! non-empty value, as `.ci/run` sets it), a missing server URL stops the build instead.

fn main() {
    println!("cargo::rustc-check-cfg=cfg(settle_pg)");
    println!("cargo::rerun-if-env-changed=SETTLE_TEST_POSTGRES_URL");
    println!("cargo::rerun-if-env-changed=SETTLE_REQUIRE_POSTGRES");
    println!("cargo::rerun-if-changed=build.rs");
    let set = |name: &str| std::env::var_os(name).is_some_and(|v| !v.is_empty());
    if set("SETTLE_TEST_POSTGRES_URL") {
        println!("cargo::rustc-cfg=settle_pg");
    } else if set("SETTLE_REQUIRE_POSTGRES") {
        panic!(
            "SETTLE_REQUIRE_POSTGRES is set but SETTLE_TEST_POSTGRES_URL is not: the PostgreSQL tests would be skipped"
        );
    }
}
