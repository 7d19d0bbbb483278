//! Tells the tests whether a PostgreSQL server was given (`SETTLE_TEST_POSTGRES_URL`): without
//! one, the PostgreSQL tests are compiled as ignored, so a run without PostgreSQL shows them as
//! skipped rather than as passed (`cargo test -- --include-ignored` runs them anyway, and then
//! they fail for want of a server). Where PostgreSQL is required (`SETTLE_REQUIRE_POSTGRES`, any
//! non-empty value, as `.ci/run` sets it), a missing server URL stops the build instead. The same
//! for the OpenAPI validator the HTTP API's tests run (`pip install openapi-spec-validator`).

fn main() {
    println!("cargo::rustc-check-cfg=cfg(settle_pg)");
    println!("cargo::rustc-check-cfg=cfg(settle_oas)");
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
    // An OpenAPI validator that is not ours (SPEC 20): the `openapi-spec-validator` Python
    // package. Without it the test that runs it is compiled as ignored, saying so; where the CI
    // requires everything (SETTLE_REQUIRE_POSTGRES), its absence stops the build.
    let validator = std::process::Command::new("python3")
        .args(["-c", "import openapi_spec_validator"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if validator {
        println!("cargo::rustc-cfg=settle_oas");
    } else if set("SETTLE_REQUIRE_POSTGRES") {
        panic!(
            "SETTLE_REQUIRE_POSTGRES is set but python3 cannot import openapi_spec_validator: pip install openapi-spec-validator"
        );
    }
}
