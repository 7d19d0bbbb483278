//! the metrics (manual: Metrics): the Prometheus text parsed as a scraper would, its gauges equal to what
//! `stats` says on the same database (both backends); while PostgreSQL is cut off, `/healthz`
//! 503 and `/metrics` 200 with `settle_database_up 0` and the ledger's gauges as they last
//! were; once it is back, 200 and 1.

mod common;

use std::sync::Arc;
use std::sync::atomic::AtomicUsize;

use common::TestDb;
use common::parse_prometheus as parse;
use serde_json::json;
use settle::ledger::Pausable;
use settle::{AttemptReport, Intent, Ledger, Outcome};

/// Serves the metrics router on a free port; its base URL.
async fn serve(ledger: Ledger, sessions: usize) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let router = settle::metrics::router(ledger, Arc::new(AtomicUsize::new(sessions)));
    tokio::spawn(async move {
        let _ = axum::serve(listener, router).await;
    });
    format!("http://{addr}")
}

fn intent(key: &str, workflow: &str, dest: &str) -> Intent {
    Intent {
        key: key.into(),
        workflow: workflow.into(),
        step: "s".into(),
        destination: dest.into(),
        action: "a".into(),
        payload: json!({}),
        run: None,
    }
}

async fn the_gauges_equal_stats(db: &TestDb) {
    let l = Ledger::open(&db.url, common::config()).await.unwrap();
    for (i, (wf, outcome)) in [
        ("onboarding", Outcome::Unknown),
        ("onboarding", Outcome::Rejected),
        ("crm-sync", Outcome::Unknown),
        ("crm-sync", Outcome::Accepted),
    ]
    .into_iter()
    .enumerate()
    {
        let k = format!("m-{i}");
        l.record(&intent(&k, wf, "sms"), "bot").await.unwrap();
        let report = AttemptReport {
            key: k,
            outcome: Some(outcome),
            error: Some("e".into()),
            ..Default::default()
        };
        l.report_attempt(&report, "bot").await.unwrap();
    }
    l.record(&intent("m-9", "onboarding", "sms"), "bot")
        .await
        .unwrap();
    l.staff()
        .pause_one(Pausable::Workflow, "crm-sync", "maintenance", "alice")
        .await
        .unwrap();
    l.staff()
        .pause_one(Pausable::Destination, "sms", "outage", "alice")
        .await
        .unwrap();
    l.staff()
        .set_breaker("sms", true, "their outage", "alice")
        .await
        .unwrap();
    l.rounds().heartbeat("dispatcher-1").await.unwrap();
    let base = serve(l.clone(), 3).await;
    let r = reqwest::get(format!("{base}/metrics")).await.unwrap();
    assert_eq!(r.status(), 200);
    assert!(
        r.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/plain; version=0.0.4")
    );
    let text = r.text().await.unwrap();
    let samples = parse(&text);
    let stats = l.read().stats().await.unwrap();
    // the alert rules name only metrics settle serves
    let rules = include_str!("../assets/alerts.yml");
    let mut named = std::collections::BTreeSet::new();
    // every line of the rules but the comments: the expressions span lines
    for expr in rules.lines().filter(|l| !l.trim().starts_with('#')) {
        let mut rest = expr;
        while let Some(at) = rest.find("settle_") {
            let name: String = rest[at..]
                .chars()
                .take_while(|c| c.is_ascii_lowercase() || *c == '_')
                .collect();
            rest = &rest[at + name.len()..];
            named.insert(name);
        }
    }
    assert_eq!(named.len(), 11, "{named:?}");
    for name in &named {
        assert!(
            text.contains(&format!("# TYPE {name} gauge"))
                || text.contains(&format!("# TYPE {name} counter")),
            "assets/alerts.yml names {name}, which settle does not serve"
        );
    }
    assert_eq!(rules.matches("- alert: ").count(), 12);
    let sum = |name: &str| -> f64 {
        samples
            .iter()
            .filter(|(n, _, _)| n == name)
            .map(|(_, _, v)| v)
            .sum()
    };
    assert_eq!(sum("settle_exceptions"), stats.exceptions as f64);
    for (state, n) in &stats.by_state {
        let got = samples
            .iter()
            .find(|(name, l, _)| name == "settle_operations" && l["state"] == state.as_str())
            .map(|(_, _, v)| *v);
        assert_eq!(got, Some(*n as f64), "{state:?}");
    }
    let exc = |wf: &str, state: &str| {
        samples
            .iter()
            .find(|(n, l, _)| {
                n == "settle_exceptions"
                    && l.get("workflow").map(String::as_str) == Some(wf)
                    && l.get("state").map(String::as_str) == Some(state)
            })
            .map(|(_, _, v)| *v)
    };
    assert_eq!(exc("onboarding", "unknown"), Some(1.0));
    assert_eq!(exc("onboarding", "rejected"), Some(1.0));
    assert_eq!(exc("crm-sync", "unknown"), Some(1.0));
    let oldest = samples
        .iter()
        .filter(|(n, _, _)| n == "settle_oldest_exception_seconds")
        .map(|(_, _, v)| *v)
        .fold(0.0, f64::max);
    assert!((oldest - stats.oldest_exception_seconds.unwrap() as f64).abs() <= 1.0);
    let paused: Vec<(String, String)> = samples
        .iter()
        .filter(|(n, _, _)| n == "settle_paused")
        .map(|(_, l, _)| (l["kind"].clone(), l["name"].clone()))
        .collect();
    assert_eq!(
        paused,
        [
            ("workflow".to_string(), "crm-sync".to_string()),
            ("destination".to_string(), "sms".to_string())
        ]
    );
    // the breaker opened by hand: its state, and the transition this process made
    let state = |s: &str| {
        samples
            .iter()
            .find(|(n, l, _)| {
                n == "settle_destination_state" && l["destination"] == "sms" && l["state"] == s
            })
            .map(|(_, _, v)| *v)
    };
    assert_eq!((state("open"), state("closed")), (Some(1.0), Some(0.0)));
    assert!(
        samples
            .iter()
            .any(|(n, l, v)| n == "settle_breaker_transitions_total"
                && l["destination"] == "sms"
                && l["to"] == "open"
                && *v >= 1.0)
    );
    assert!(sum("settle_dispatcher_last_seen_seconds") < 5.0);
    assert_eq!(sum("settle_console_sessions"), 3.0);
    let health = reqwest::get(format!("{base}/healthz")).await.unwrap();
    assert_eq!(health.status(), 200);
}

both_backends!(the_gauges_equal_stats);

/// `/healthz` says 503 while the database is cut off, 200 once it is back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(not(settle_pg), ignore = "needs SETTLE_TEST_POSTGRES_URL")]
async fn health_and_database_up_follow_the_database() {
    let db = common::postgres().await;
    let (proxy, via) = common::Proxy::before(&db).await;
    let l = Ledger::open(&via, common::config()).await.unwrap();
    l.record(&intent("h-1", "onboarding", "sms"), "bot")
        .await
        .unwrap();
    let report = AttemptReport {
        key: "h-1".into(),
        outcome: Some(Outcome::Unknown),
        ..Default::default()
    };
    l.report_attempt(&report, "bot").await.unwrap();
    let base = serve(l, 0).await;
    // a first scrape while the database answers: the gauges it keeps
    let first = reqwest::get(format!("{base}/metrics")).await.unwrap();
    assert!(first.text().await.unwrap().contains("settle_database_up 1"));
    let status = || async {
        reqwest::get(format!("{base}/healthz"))
            .await
            .unwrap()
            .status()
    };
    assert_eq!(status().await, 200);
    proxy.cut();
    let mut down = false;
    for _ in 0..100 {
        if status().await == 503 {
            down = true;
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert!(down, "503 while cut off");
    // the metrics still answer: the database is down, the ledger's gauges as they last were
    let metrics = reqwest::get(format!("{base}/metrics")).await.unwrap();
    assert_eq!(metrics.status(), 200);
    let text = metrics.text().await.unwrap();
    assert!(!text.contains("127.0.0.1"), "no host in the answer");
    assert!(text.contains("settle_database_up 0"), "{text}");
    assert!(
        text.contains("settle_operations{state=\"unknown\"} 1"),
        "{text}"
    );
    assert!(
        text.contains("# TYPE settle_attempts_total counter"),
        "{text}"
    );
    let _back = proxy.restore().await;
    let mut up = false;
    for _ in 0..150 {
        if status().await == 200 {
            up = true;
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert!(up, "200 once the database is back");
    let text = reqwest::get(format!("{base}/metrics"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(text.contains("settle_database_up 1"), "{text}");
}
