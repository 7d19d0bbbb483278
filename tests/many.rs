//! Many settle processes on one ledger (manual: Running settle for a team): they behave as one.
//! A token's rate is one budget across every `settle serve --http` on the ledger: requests
//! alternating between two servers get what one server alone gives, within 10%. On both backends
//! (two processes on one SQLite file share it as two on PostgreSQL do).

mod common;

use std::time::{Duration, Instant};

use common::TestDb;
use common::api::{ApiServer, SLOW, config_text, sha256};

/// Two tokens of the same rate (20 a second, a burst of 10), one per measurement, so that each
/// starts with a full bucket of its own.
const FIRST: &str = "settle_f1f1f1f1f1f1f1f1f1f1f1f1f1f1f1f1f1f1f1f1f1f1f1f1f1f1f1f1f1f1f1f1";
const SECOND: &str = "settle_5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e";

fn config() -> String {
    let token = |name: &str, token: &str| {
        format!(
            "[automations.{name}]\ntoken_sha256 = \"{}\"\nworkflows = [\"*\"]\nrate = \"20/s\"\nburst = 10\n",
            sha256(token)
        )
    };
    config_text(&(token("first", FIRST) + &token("second", SECOND)))
}

/// Requests one after another for `long`, to the servers in turn: how many were let through.
async fn through(bases: &[&str], token: &str, long: Duration) -> (usize, usize) {
    let client = reqwest::Client::new();
    let (mut passed, mut sent) = (0, 0);
    let end = Instant::now() + long;
    while Instant::now() < end {
        let base = bases[sent % bases.len()];
        let status = client
            .get(format!("{base}/v1/operations?limit=1"))
            .bearer_auth(token)
            .send()
            .await
            .expect("the server answers")
            .status()
            .as_u16();
        sent += 1;
        if status != 429 {
            assert_eq!(status, 200);
            passed += 1;
        }
    }
    (passed, sent)
}

async fn a_tokens_rate_is_one_budget_across_servers(db: &TestDb) {
    let one = ApiServer::start_with(&db.url, &config(), &[]);
    let two = ApiServer::start_with(&db.url, &config(), &[]);
    // the burst of two a minute: alternating, still two in all
    let mut passed = 0;
    for i in 0..6 {
        let base = if i % 2 == 0 { &one.base } else { &two.base };
        let status = reqwest::Client::new()
            .get(format!("{base}/v1/operations?limit=1"))
            .bearer_auth(SLOW)
            .send()
            .await
            .unwrap()
            .status();
        passed += usize::from(status != 429);
    }
    assert_eq!(passed, 2, "the burst is the token's, not each server's");
    // 20 a second for three seconds: one server alone, then the two in turn
    let long = Duration::from_secs(3);
    let (alone, sent_alone) = through(&[&one.base], FIRST, long).await;
    let (both, sent_both) = through(&[&one.base, &two.base], SECOND, long).await;
    eprintln!("one server: {alone} of {sent_alone}; two in turn: {both} of {sent_both}");
    assert!(
        sent_alone > alone * 2 && sent_both > both * 2,
        "the rate was reached"
    );
    let ratio = both as f64 / alone as f64;
    assert!(
        (0.9..=1.1).contains(&ratio),
        "two servers let {both} through where one let {alone} ({ratio:.2}x)"
    );
}

both_backends!(a_tokens_rate_is_one_budget_across_servers);
