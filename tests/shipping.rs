//! What is shipped agrees with itself (manual: Upgrades and migrations): `settle --version`
//! names the version and the commit it was built from; the two systemd units, the example
//! Prometheus config, the alert rules and the runbook name the same units, user, files, scrape
//! job and ports (a team lead's first day went wrong where they did not).

use std::path::Path;

fn read(path: &str) -> String {
    std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join(path)).unwrap()
}

#[test]
fn the_version_names_the_commit() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_settle"))
        .arg("--version")
        .output()
        .unwrap();
    assert!(out.status.success());
    let said = String::from_utf8(out.stdout).unwrap();
    let git = std::process::Command::new("git")
        .args(["rev-parse", "--short=12", "HEAD"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8(o.stdout).unwrap().trim().to_string());
    let commit = git.unwrap_or_else(|| "unknown".into());
    assert_eq!(
        said.trim(),
        format!("settle {} ({commit})", env!("CARGO_PKG_VERSION"))
    );
}

/// The shipped units: the console (`settle serve`, metrics on 9464) and the dispatcher
/// (`settle dispatch`, metrics on 9465), both as the `settle` user with the same files.
#[test]
fn the_units_prometheus_the_alerts_and_the_runbook_agree() {
    let units = [
        ("settle.service", "settle serve", "9464"),
        ("settle-dispatch.service", "settle dispatch", "9465"),
    ];
    for (unit, runs, port) in units {
        let text = read(&format!("assets/{unit}"));
        let exec = text
            .lines()
            .find(|l| l.starts_with("ExecStart="))
            .unwrap_or_else(|| panic!("{unit}: no ExecStart"));
        assert!(exec.contains(runs), "{unit}: {exec}");
        assert!(
            exec.contains(&format!("--metrics 0.0.0.0:{port}")),
            "{unit}: {exec}"
        );
        for line in [
            "User=settle",
            "Group=settle",
            "EnvironmentFile=/etc/settle/env",
            "Environment=SETTLE_CONFIG=/etc/settle/settle.toml",
            "StateDirectory=settle",
        ] {
            assert!(text.lines().any(|l| l == line), "{unit} lacks {line}");
        }
        let prometheus = read("assets/prometheus.yml");
        assert!(
            prometheus.contains(&format!(":{port}\"")) && prometheus.contains(unit),
            "prometheus.yml scrapes {unit} on {port}"
        );
        let runbook = read("docs/runbook.md");
        let name = unit.trim_end_matches(".service");
        assert!(
            runbook.contains(&format!("systemctl status {name} ")),
            "the runbook looks at {unit}"
        );
        assert!(runbook.contains(port), "the runbook names {port}");
    }
    // the scrape job the rules are written for is the one the example config defines
    let prometheus = read("assets/prometheus.yml");
    assert!(prometheus.contains("job_name: settle\n"), "{prometheus}");
    let alerts = read("assets/alerts.yml");
    assert!(alerts.contains("up{job=\"settle\"}"), "{alerts}");
    // no other port in settle's targets (Alertmanager's is its own)
    for target in prometheus
        .lines()
        .filter(|l| l.contains("targets:") && !l.contains("alertmanager"))
    {
        for port in target.split(".internal:").skip(1) {
            let port = &port[..4];
            assert!(["9464", "9465"].contains(&port), "{target}");
        }
    }
}

/// The package's services run as the user `settle`, one of settle's own names: as `$USER` it is
/// nobody's name (no error), while `--as settle` is still refused.
#[test]
fn the_service_user_is_not_an_operator() {
    let dir = tempfile::tempdir().unwrap();
    let db = format!("sqlite://{}", dir.path().join("svc.db").display());
    let run = |args: &[&str]| {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_settle"))
            .arg("--db")
            .arg(&db)
            .args(args)
            .env("USER", "settle")
            .env_remove("SETTLE_OPERATOR")
            .env("SETTLE_LOG_FILE", dir.path().join("log"))
            .env("XDG_CONFIG_HOME", dir.path())
            .output()
            .unwrap();
        let said = String::from_utf8_lossy(&out.stdout).to_string()
            + &String::from_utf8_lossy(&out.stderr);
        (out.status.code(), said)
    };
    let (code, said) = run(&["init"]);
    assert_eq!(code, Some(0), "{said}");
    let (code, said) = run(&["stats"]);
    assert_eq!(code, Some(0), "{said}");
    let (code, said) = run(&["claim", "k1"]);
    assert_eq!(code, Some(2), "{said}");
    assert!(
        said.contains("pass --as NAME or set SETTLE_OPERATOR"),
        "{said}"
    );
    let (code, said) = run(&["--as", "settle", "claim", "k1"]);
    assert_eq!(code, Some(2), "{said}");
    assert!(said.contains("reserved"), "{said}");
}
