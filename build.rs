//! Tells the tests whether a PostgreSQL server was given (`SETTLE_TEST_POSTGRES_URL`): without
//! one, the PostgreSQL tests are compiled as ignored, so a run without PostgreSQL shows them as
//! skipped rather than as passed (`cargo test -- --include-ignored` runs them anyway, and then
//! they fail for want of a server). Where PostgreSQL is required (`SETTLE_REQUIRE_POSTGRES`, any
//! non-empty value, as `.ci/run` sets it), a missing server URL stops the build instead. The same
//! for the tools other tests run: the OpenAPI validator and schemathesis (Python packages),
//! PgBouncer, Prometheus' `promtool` and Alertmanager's `amtool`, and aiosmtpd (an SMTP server).
//!
//! And names the commit the binary is built from, for `settle --version`
//! (manual: Upgrades and migrations): `git rev-parse` where the source is a checkout, else
//! `SETTLE_COMMIT` as a packager gives it, else `unknown`.

fn main() {
    commit();
    println!("cargo::rustc-check-cfg=cfg(settle_pg)");
    println!("cargo::rustc-check-cfg=cfg(settle_oas)");
    println!("cargo::rustc-check-cfg=cfg(settle_pgbouncer)");
    println!("cargo::rustc-check-cfg=cfg(settle_schemathesis)");
    println!("cargo::rustc-check-cfg=cfg(settle_promtool)");
    println!("cargo::rustc-check-cfg=cfg(settle_smtp)");
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
    // An OpenAPI validator that is not ours: the `openapi-spec-validator` Python package; and
    // schemathesis, which tries the HTTP API against its document. PgBouncer: the tests that run
    // through one in transaction pooling mode start their own. Without either, the tests that need it are compiled as ignored, saying
    // so; where the CI requires everything (SETTLE_REQUIRE_POSTGRES), its absence stops the build.
    let tools = [
        (
            "settle_oas",
            ["python3", "-c", "import openapi_spec_validator"],
            "python3 cannot import openapi_spec_validator: pip install openapi-spec-validator",
        ),
        (
            "settle_pgbouncer",
            ["pgbouncer", "--version", ""],
            "pgbouncer is not installed: apt-get install pgbouncer",
        ),
        (
            "settle_schemathesis",
            ["python3", "-c", "import schemathesis"],
            "schemathesis is not installed: pip install schemathesis",
        ),
        (
            "settle_smtp",
            ["python3", "-c", "import aiosmtpd"],
            "aiosmtpd is not installed: pip install aiosmtpd",
        ),
        (
            "settle_promtool",
            ["sh", "-c", "promtool --version && amtool --version"],
            "promtool and amtool are not installed: apt-get install prometheus prometheus-alertmanager",
        ),
    ];
    for (cfg, [program, args @ ..], missing) in tools {
        let found = std::process::Command::new(program)
            .args(args.iter().filter(|a| !a.is_empty()))
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        if found {
            println!("cargo::rustc-cfg={cfg}");
        } else if set("SETTLE_REQUIRE_POSTGRES") {
            panic!("SETTLE_REQUIRE_POSTGRES is set but {missing}");
        }
    }
}

/// `SETTLE_COMMIT` for the binary: the checkout's commit (12 hex digits), rebuilt when it moves.
fn commit() {
    println!("cargo::rerun-if-env-changed=SETTLE_COMMIT");
    let given = std::env::var("SETTLE_COMMIT")
        .ok()
        .filter(|c| !c.is_empty());
    let git = || {
        let out = std::process::Command::new("git")
            .args(["rev-parse", "--short=12", "HEAD"])
            .output()
            .ok()
            .filter(|o| o.status.success())?;
        let text = String::from_utf8(out.stdout).ok()?;
        Some(text.trim().to_string()).filter(|c| !c.is_empty())
    };
    let commit = given.or_else(git).unwrap_or_else(|| "unknown".into());
    println!("cargo::rustc-env=SETTLE_COMMIT={commit}");
    // a new commit moves the branch HEAD names (or HEAD itself, detached)
    if let Ok(head) = std::fs::read_to_string(".git/HEAD") {
        println!("cargo::rerun-if-changed=.git/HEAD");
        // only files that exist: a missing one would run this script, and build settle, every time
        let branch = head
            .trim()
            .strip_prefix("ref: ")
            .map(|b| format!(".git/{b}"));
        for file in branch.into_iter().chain([".git/packed-refs".to_string()]) {
            if std::path::Path::new(&file).exists() {
                println!("cargo::rerun-if-changed={file}");
            }
        }
    }
}
