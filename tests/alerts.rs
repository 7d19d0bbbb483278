//! The alert rules (manual: Alerts): Prometheus' own `promtool` checks them and runs their unit
//! tests (`assets/alerts.test.yml`), and the example Prometheus config that loads them;
//! Alertmanager's `amtool` checks the example routes. Every command an alert's annotation
//! suggests is run as written (its labels filled in) on a ledger where that alert would fire,
//! on both backends, and exits 0.

mod common;

use std::process::Command;
use std::sync::{Arc, Mutex};

use chrono::{DateTime, TimeDelta, Utc};
use common::TestDb;
use serde_json::json;
use settle::{AttemptReport, Intent, Ledger, Outcome};

const RULES: &str = include_str!("../assets/alerts.yml");

/// Runs a tool in `assets/`; its output when it fails.
fn tool(program: &str, args: &[&str]) {
    let out = Command::new(program)
        .args(args)
        .current_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/assets"))
        .output()
        .unwrap_or_else(|e| panic!("{program}: {e}"));
    assert!(
        out.status.success(),
        "{program} {args:?}:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
#[cfg_attr(
    not(settle_promtool),
    ignore = "needs promtool and amtool (apt-get install prometheus prometheus-alertmanager)"
)]
fn prometheus_and_alertmanager_accept_the_rules_and_their_tests_pass() {
    tool("promtool", &["check", "rules", "alerts.yml"]);
    tool("promtool", &["test", "rules", "alerts.test.yml"]);
    tool("promtool", &["check", "config", "prometheus.yml"]);
    tool("amtool", &["check-config", "alertmanager.yml"]);
}

/// The unit tests cover what the rules promise: each of these alerts is expected to fire in
/// them, and the restarts to page nobody.
#[test]
fn the_rules_unit_tests_cover_every_alert() {
    let tests = include_str!("../assets/alerts.test.yml");
    for alert in RULES
        .lines()
        .filter_map(|l| l.trim().strip_prefix("- alert: "))
    {
        assert!(
            tests.contains(&format!(
                "alertname: {alert}\n        exp_alerts:\n          - "
            )),
            "assets/alerts.test.yml never expects {alert} to fire"
        );
    }
    for case in ["stopped cleanly", "killed", "from none", "database is down"] {
        assert!(tests.contains(case), "no unit test of {case}");
    }
}

/// The commands the annotations suggest: each `settle ...` in backquotes, with the alert's name.
fn suggested() -> Vec<(String, String)> {
    let mut alert = String::new();
    let mut commands = Vec::new();
    for line in RULES.lines().map(str::trim) {
        if let Some(name) = line.strip_prefix("- alert: ") {
            alert = name.to_string();
        }
        if !(line.starts_with("description:") || line.starts_with("summary:")) {
            continue;
        }
        for (i, part) in line.split('`').enumerate() {
            if i % 2 == 1 && part.starts_with("settle ") {
                commands.push((alert.clone(), part.to_string()));
            }
        }
    }
    commands
}

fn t0() -> DateTime<Utc> {
    Utc::now() - TimeDelta::days(2)
}

fn intent(key: &str, run: Option<&str>, step: &str) -> Intent {
    Intent {
        key: key.into(),
        workflow: "onboarding".into(),
        step: step.into(),
        destination: "tasks".into(),
        action: "create_task".into(),
        payload: json!({"title": "welcome"}),
        run: run.map(str::to_string),
    }
}

fn report(key: &str, outcome: Outcome) -> AttemptReport {
    AttemptReport {
        key: key.into(),
        outcome: Some(outcome),
        error: Some("timed out".into()),
        ..Default::default()
    }
}

/// A ledger on which every alert with a command would fire: an unknown two days old, 25
/// unknowns in the last minutes, a run stalled between its steps, the workflow and the
/// destination paused, work due and no dispatcher. Each condition is read back from a scrape
/// before the commands run.
async fn every_suggested_command_runs_as_written(db: &TestDb) {
    let sim = common::Sim::start(&[]);
    let d = common::drill(
        db,
        &sim,
        false,
        true,
        "[workflows.onboarding]\nsteps = [\"first\", \"second\"]\nstep_gap = \"15m\"\n",
    );
    let config = settle::Config::load(&d.config).unwrap();
    let clock = Arc::new(Mutex::new(t0()));
    let c = clock.clone();
    let l = Ledger::open(&db.url, config)
        .await
        .unwrap()
        .with_clock(move || *c.lock().unwrap());
    l.record(&intent("old-1", None, "kickoff"), "bot")
        .await
        .unwrap();
    l.report_attempt(&report("old-1", Outcome::Unknown), "bot")
        .await
        .unwrap();
    l.record(&intent("r1:first", Some("r1"), "first"), "bot")
        .await
        .unwrap();
    l.report_attempt(&report("r1:first", Outcome::Accepted), "bot")
        .await
        .unwrap();
    *clock.lock().unwrap() = Utc::now() - TimeDelta::minutes(10);
    for i in 0..25 {
        let key = format!("new-{i}");
        l.record(&intent(&key, None, "kickoff"), "bot")
            .await
            .unwrap();
        l.report_attempt(&report(&key, Outcome::Unknown), "bot")
            .await
            .unwrap();
    }
    l.record(&intent("due-1", None, "kickoff"), "bot")
        .await
        .unwrap();
    *clock.lock().unwrap() = Utc::now();
    let text = settle::metrics::scrape(&l, 0).await;
    let samples = common::parse_prometheus(&text);
    let value = |name: &str, label: Option<(&str, &str)>| -> f64 {
        samples
            .iter()
            .filter(|(n, l, _)| {
                n == name && label.is_none_or(|(k, v)| l.get(k).map(String::as_str) == Some(v))
            })
            .map(|(_, _, v)| *v)
            .fold(0.0, f64::max)
    };
    // the conditions of the alerts whose annotations suggest a command
    assert!(
        value("settle_oldest_exception_seconds", None) > 86_400.0,
        "{text}"
    );
    assert!(
        value("settle_exceptions", Some(("state", "unknown"))) > 20.0,
        "{text}"
    );
    assert!(value("settle_runs_stalled", None) > 0.0, "{text}");
    assert!(value("settle_operations_due", None) > 0.0, "{text}");
    assert_eq!(value("settle_dispatchers_alive", None), 0.0, "{text}");
    l.staff()
        .pause_one(
            settle::ledger::Pausable::Workflow,
            "onboarding",
            "too many unknowns",
            "alice",
        )
        .await
        .unwrap();
    l.staff()
        .pause_one(
            settle::ledger::Pausable::Destination,
            "tasks",
            "credentials expired",
            "alice",
        )
        .await
        .unwrap();
    let text = settle::metrics::scrape(&l, 0).await;
    assert!(
        text.contains("settle_paused{kind=\"workflow\",name=\"onboarding\"} 1"),
        "{text}"
    );
    assert!(
        text.contains("settle_paused{kind=\"destination\",name=\"tasks\"} 1"),
        "{text}"
    );
    l.close().await;

    let commands = suggested();
    let alerts: std::collections::BTreeSet<&str> =
        commands.iter().map(|(a, _)| a.as_str()).collect();
    assert!(alerts.len() >= 7, "{commands:?}");
    let bin = std::path::Path::new(env!("CARGO_BIN_EXE_settle"))
        .parent()
        .unwrap();
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    for (alert, command) in &commands {
        let written = command
            .replace("{{ $labels.workflow }}", "onboarding")
            .replace("{{ $labels.name }}", "onboarding");
        assert!(
            !written.contains("{{"),
            "{alert}: a label this test does not fill: {command}"
        );
        let out = Command::new("sh")
            .args(["-c", &written])
            .env("PATH", &path)
            .env("SETTLE_DATABASE_URL", &d.db)
            .env("SETTLE_CONFIG", &d.config)
            .env("SETTLE_OPERATOR", "alice")
            .env("SETTLE_LOG_FILE", d.config.with_extension("log"))
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success() && !stdout.trim().is_empty(),
            "{alert}: `{written}` exited {:?}:\n{stdout}{}",
            out.status.code(),
            String::from_utf8_lossy(&out.stderr)
        );
        // what it shows is the ledger's own: the workflow the alert names, its keys and runs,
        // or the due work
        assert!(
            ["onboarding", "due", "new-", "old-1", "r1"]
                .iter()
                .any(|said| stdout.contains(said)),
            "{alert}: `{written}` says nothing of it:\n{stdout}"
        );
    }
}

both_backends!(every_suggested_command_runs_as_written);

/// The shipped files agree with each other: Prometheus scrapes the ports the units serve their
/// metrics on, on an address it can reach; the rules are loaded by the name their header gives;
/// every unit the manual names is shipped; the runbook says what settle does now.
#[test]
fn the_shipped_files_agree() {
    let assets = std::path::Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/assets"));
    let read = |name: &str| std::fs::read_to_string(assets.join(name)).unwrap();
    let prometheus = read("prometheus.yml");
    let rule_file = prometheus
        .lines()
        .find_map(|l| l.strip_prefix("rule_files: ["))
        .and_then(|l| l.strip_suffix(']'))
        .expect("rule_files");
    assert!(
        RULES.contains(&format!("rule_files: [{rule_file}]")),
        "alerts.yml's header names another file than prometheus.yml loads ({rule_file})"
    );
    let mut served = std::collections::BTreeMap::new();
    for e in std::fs::read_dir(assets).unwrap() {
        let path = e.unwrap().path();
        if path.extension().is_some_and(|x| x == "service") {
            let text = std::fs::read_to_string(&path).unwrap();
            let exec = text.lines().find(|l| l.starts_with("ExecStart=")).unwrap();
            let at = exec
                .split_whitespace()
                .skip_while(|w| *w != "--metrics")
                .nth(1)
                .unwrap_or_else(|| panic!("{} serves no metrics", path.display()));
            let (host, port) = at.rsplit_once(':').unwrap();
            assert!(
                !host.starts_with("127.") && host != "localhost",
                "{}: Prometheus scrapes another host, but it binds {at}",
                path.display()
            );
            let unit = path.file_stem().unwrap().to_string_lossy().into_owned();
            served.insert(port.to_string(), unit);
        }
    }
    let targets = prometheus
        .lines()
        .find_map(|l| l.trim().strip_prefix("- targets: ["))
        .unwrap();
    for target in targets.trim_end_matches(']').split(',') {
        let target = target.trim().trim_matches('"');
        let port = target.rsplit_once(':').unwrap().1;
        assert!(
            served.contains_key(port),
            "prometheus.yml scrapes {target}, a port no shipped unit serves ({served:?})"
        );
    }
    // every unit the manual and the runbook name is shipped
    let docs = std::path::Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/docs"));
    for e in std::fs::read_dir(docs).unwrap() {
        let text = std::fs::read_to_string(e.unwrap().path()).unwrap();
        for line in text.lines() {
            for (at, _) in line.match_indices("settle-") {
                let unit: String = line[at..]
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || *c == '-')
                    .collect();
                let named = ["systemctl", "journalctl -u", ".service"]
                    .iter()
                    .any(|w| line.contains(w));
                if named && !line.contains(&format!("application_name={unit}")) {
                    assert!(
                        served.values().any(|u| *u == unit),
                        "the manual names the unit {unit}, which is not shipped: {line}"
                    );
                }
            }
        }
    }
    // the runbook says what settle does now: a rejected request is corrected by settle
    let runbook = std::fs::read_to_string(docs.join("runbook.md")).unwrap();
    let rising = runbook
        .split("\n## ")
        .find(|s| s.starts_with("SettleExceptionsRising"))
        .unwrap();
    assert!(rising.contains("settle correct"), "{rising}");
    assert!(!rising.contains("closed as superseded"), "{rising}");
    assert!(
        !rising.contains("the newest"),
        "list gives the oldest first: {rising}"
    );
}
