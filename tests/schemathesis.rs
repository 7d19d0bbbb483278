//! schemathesis, a client nobody here wrote, against the real `settle serve --http` on both
//! backends: every check it has (`--checks all`: schema-valid requests accepted, schema-violating
//! ones refused, answers as documented, no server error, the stateful links between operations),
//! the OpenAPI document as the server serves it, and the gateway sending to a real destination (a
//! `settle sim` of the test's own). It must find nothing: the document says exactly what the server
//! accepts. What the run needs beside the document is in `tests/schemathesis/`: its config (the
//! pinned destination) and a serializer for JSON lines.
//!
//! The run is bounded (`SETTLE_SCHEMATHESIS_SECONDS`, 75 by default) and seeded
//! (`SETTLE_SCHEMATHESIS_SEED`, 1 by default, so that CI repeats itself; `random` for a new one
//! each run, as a fuzzing session would use it).

mod common;

use std::process::Command;

use common::TestDb;
use common::api::{ApiServer, sha256};

/// The token of the run's automation, which writes every workflow.
const FUZZ: &str = "settle_f022f022f022f022f022f022f022f022f022f022f022f022f022f022f022f022";

fn config(destination: &str) -> String {
    format!(
        "[destinations.projects]\nurl = \"{destination}/tasks\"\n\
         [automations.fuzz]\ntoken_sha256 = \"{}\"\nworkflows = [\"*\"]\n\
         rate = \"100000/s\"\nburst = 100000\n",
        sha256(FUZZ)
    )
}

async fn schemathesis_finds_nothing(db: &TestDb) {
    let sim = common::Sim::start(&[]);
    let server = ApiServer::start_with(&db.url, &config(&sim.base), &[]);
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/schemathesis");
    let seconds = std::env::var("SETTLE_SCHEMATHESIS_SECONDS").unwrap_or_else(|_| "75".into());
    let seed = std::env::var("SETTLE_SCHEMATHESIS_SEED").unwrap_or_else(|_| "1".into());
    // its caches and crash files go in a directory of the run's own, not the repository
    let scratch = tempfile::tempdir().unwrap();
    let mut st = Command::new("python3");
    st.current_dir(scratch.path())
        .args(["-m", "schemathesis.cli"])
        .args(["--config-file", &format!("{dir}/schemathesis.toml"), "run"])
        .arg(format!("{}/openapi.json", server.base))
        .args(["--checks", "all", "--max-time", &seconds, "--no-color"])
        .args(["--generation-database", "none"])
        .arg("-H")
        .arg(format!("Authorization: Bearer {FUZZ}"))
        .env("SCHEMATHESIS_HOOKS", "hooks")
        .env("PYTHONPATH", dir);
    if seed != "random" {
        st.args(["--seed", &seed]);
    }
    let out =
        tokio::task::spawn_blocking(move || st.output().expect("run python3 -m schemathesis.cli"))
            .await
            .unwrap();
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.status.success(),
        "schemathesis found something:\n{said}"
    );
    let generated = said
        .lines()
        .find(|l| l.contains("generated"))
        .unwrap_or_default();
    eprintln!("{}: {}", db.backend, generated.trim());
    assert!(
        generated.contains("passed"),
        "schemathesis ran no case:\n{said}"
    );
    // the server said no 5xx to any of it, and logged nothing but its requests
    let log = server.log();
    assert!(
        log.lines().count() > 1000,
        "{} requests",
        log.lines().count()
    );
    let odd: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("status=5") || !l.contains("INFO"))
        .take(5)
        .collect();
    assert!(odd.is_empty(), "{odd:#?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    not(settle_schemathesis),
    ignore = "needs schemathesis (pip install schemathesis)"
)]
async fn on_sqlite() {
    schemathesis_finds_nothing(&common::sqlite()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    not(all(settle_pg, settle_schemathesis)),
    ignore = "needs SETTLE_TEST_POSTGRES_URL and schemathesis (pip install schemathesis)"
)]
async fn on_postgres() {
    schemathesis_finds_nothing(&common::postgres().await).await;
}
