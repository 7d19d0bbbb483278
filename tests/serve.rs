//! `settle serve` (manual: Running settle for a team) as staff meet it: the real OpenSSH client `ssh` against the real
//! binary, consoles in tmux, on SQLite and PostgreSQL. Who logs in and as whom comes from the
//! keys; what each role may do is what the ledger lets it do; the events say who did it and with
//! which key.

mod common;

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::ssh::{Keys, ssh_options};
use common::tmux::Tmux;
use common::{Raw, TestDb, parse_prometheus};

const BIN: &str = env!("CARGO_BIN_EXE_settle");

/// The server, stopped (by PID) when dropped.
struct Serve {
    child: Child,
    port: u16,
    metrics: String,
    log: PathBuf,
    keys: PathBuf,
}

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Serve {
    fn start(db: &str, keys: &Keys, extra: &[&str]) -> Serve {
        let log = keys.path("serve.log");
        let mut child = Command::new(BIN)
            .args([
                "serve",
                "--db",
                db,
                "--listen",
                "127.0.0.1:0",
                "--metrics",
                "127.0.0.1:0",
            ])
            .arg("--config")
            .arg(keys.config())
            .arg("--host-key")
            .arg(keys.path("host_key"))
            .args(extra)
            .env("SETTLE_LOG_FILE", &log)
            .env_remove("SETTLE_DATABASE_URL")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("settle serve");
        use std::io::BufRead;
        let mut lines = std::io::BufReader::new(child.stdout.take().unwrap()).lines();
        let (mut port, mut metrics) = (None, None);
        while port.is_none() || metrics.is_none() {
            let line = lines
                .next()
                .expect("settle serve said where it listens")
                .unwrap();
            if let Some(a) = line.strip_prefix("settle serve: listening on ") {
                port = Some(a.rsplit_once(':').unwrap().1.parse().unwrap());
            }
            if let Some(m) = line.strip_prefix("settle serve: metrics on ") {
                metrics = Some(m.trim_end_matches("/metrics").to_string());
            }
        }
        // the rest of stdout is read and dropped, so the server never blocks on it
        std::thread::spawn(move || for _ in lines {});
        Serve {
            child,
            port: port.unwrap(),
            metrics: metrics.unwrap(),
            log,
            keys: keys.dir.path().to_path_buf(),
        }
    }

    /// `ssh` with `key` to the server, batch mode (no prompt), the host key unchecked.
    fn ssh(&self, key: &str) -> Command {
        let mut c = Command::new("ssh");
        c.args(ssh_options(self.port))
            .arg("-i")
            .arg(self.keys.join(key))
            .stdin(Stdio::null());
        c
    }

    /// An exec request: (exit status, stdout, stderr).
    fn exec(&self, key: &str, args: &[&str]) -> (i32, String, String) {
        let out = self.ssh(key).arg("127.0.0.1").args(args).output().unwrap();
        (
            out.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&out.stdout).into(),
            String::from_utf8_lossy(&out.stderr).into(),
        )
    }

    /// The command that opens a console with `key`, for a tmux window.
    fn console_cmd(&self, key: &str, env: &str) -> String {
        format!(
            "{env} ssh -tt -o SendEnv=SETTLE_OPERATOR -o SendEnv=NO_COLOR {} -i {} 127.0.0.1; echo SSH-EXITED-$?; sleep 60",
            ssh_options(self.port).join(" "),
            self.keys.join(key).display()
        )
    }

    fn get(&self, path: &str) -> (u16, String) {
        get(&format!("{}{path}", self.metrics))
    }

    fn sessions(&self) -> f64 {
        let (_, text) = self.get("/metrics");
        parse_prometheus(&text)
            .into_iter()
            .find(|(n, _, _)| n == "settle_console_sessions")
            .map(|(_, _, v)| v)
            .expect("settle_console_sessions")
    }
}

/// A plain HTTP/1.0 GET: (status, body).
fn get(url: &str) -> (u16, String) {
    use std::io::{Read, Write};
    let rest = url.strip_prefix("http://").unwrap();
    let (host, path) = rest
        .split_once('/')
        .map_or((rest, "/".to_string()), |(h, p)| (h, format!("/{p}")));
    let mut s = std::net::TcpStream::connect(host).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    write!(s, "GET {path} HTTP/1.0\r\nHost: {host}\r\n\r\n").unwrap();
    let mut text = String::new();
    s.read_to_string(&mut text).unwrap();
    let status = text.split_whitespace().nth(1).unwrap().parse().unwrap();
    let body = text
        .split_once("\r\n\r\n")
        .map_or("", |(_, b)| b)
        .to_string();
    (status, body)
}

/// The local CLI on the same database (a lead, the manual's Running settle for a team).
fn settle(db: &str, who: &str, args: &[&str]) -> String {
    let out = Command::new(BIN)
        .arg("--db")
        .arg(db)
        .args(["--as", who])
        .args(args)
        .env("SETTLE_LOG_FILE", "/dev/null")
        .env("XDG_CONFIG_HOME", "/nonexistent")
        .env_remove("SETTLE_CONFIG")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "settle {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into()
}

fn show(db: &str, key: &str) -> serde_json::Value {
    serde_json::from_str(&settle(db, "seed", &["show", key, "--json"])).unwrap()
}

/// `n` operations `s-1`..`s-n`, each an unknown outcome, their payload holding an email.
fn seed(db: &str, n: usize) {
    for i in 1..=n {
        let key = format!("s-{i}");
        let payload = format!("{{\"customer\":{{\"email\":\"ada{i}@example.com\"}},\"n\":{i}}}");
        settle(
            db,
            "seed",
            &[
                "record",
                "--key",
                &key,
                "--workflow",
                "onboarding",
                "--destination",
                "crm",
                "--action",
                "upsert",
                "--payload",
                &payload,
            ],
        );
        settle(
            db,
            "seed",
            &[
                "attempt",
                "--key",
                &key,
                "--outcome",
                "unknown",
                "--error",
                "read timeout after 30s",
            ],
        );
    }
}

/// Waits until `ok` holds (20 s at most).
fn eventually(what: &str, ok: impl FnMut() -> bool) {
    eventually_within(what, Duration::from_secs(20), ok);
}

fn eventually_within(what: &str, limit: Duration, mut ok: impl FnMut() -> bool) {
    let deadline = Instant::now() + limit;
    while !ok() {
        assert!(Instant::now() < deadline, "waited for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Filters the console to one key and waits for it (Enter leaves the filter).
fn select(t: &Tmux, w: &str, key: &str) {
    t.keys(w, &["/"]);
    t.literal(w, &format!("key:{key}"));
    t.keys(w, &["Enter"]);
    let other = if key == "s-1" { "s-2 " } else { "s-1 " };
    t.wait(w, &format!("{key} alone"), |s| {
        s.contains(&format!("{key} ")) && !s.contains(other)
    });
}

fn events(db: &str, key: &str) -> Vec<serde_json::Value> {
    show(db, key)["history"].as_array().unwrap().clone()
}

/// The manual's Running settle for a team: a key that is no operator's, a password and
/// keyboard-interactive are refused at authentication; a viewer's `stats --json` answers what
/// the local `stats --json` does; what the client says about who it is changes nothing.
fn keys_decide_who_logs_in(db: &TestDb) {
    seed(&db.url, 3);
    let keys = Keys::new();
    let s = Serve::start(&db.url, &keys, &[]);
    let (code, out, err) = s.exec("stranger", &["stats"]);
    assert_eq!((code, out.as_str()), (255, ""), "{err}");
    assert!(err.contains("Permission denied (publickey)"), "{err}");
    for method in ["password", "keyboard-interactive"] {
        let out = s
            .ssh("viewer")
            .args([
                "-o",
                &format!("PreferredAuthentications={method}"),
                "127.0.0.1",
                "stats",
            ])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(255), "{method}");
        assert!(
            String::from_utf8_lossy(&out.stderr).contains("Permission denied"),
            "{method}"
        );
    }
    let (code, out, err) = s.exec("viewer", &["stats", "--json"]);
    assert_eq!(code, 0, "{err}");
    let remote: serde_json::Value = serde_json::from_str(&out).unwrap();
    let local: serde_json::Value =
        serde_json::from_str(&settle(&db.url, "seed", &["stats", "--json"])).unwrap();
    assert_eq!(remote["by_state"], local["by_state"]);
    assert_eq!(remote["exceptions"], local["exceptions"]);
    // list and show, redacted as everywhere
    let (code, out, _) = s.exec("viewer", &["show", "s-1", "--json"]);
    assert_eq!(code, 0);
    assert!(
        out.contains("\"s-1\"") && !out.contains("ada1@example.com"),
        "{out}"
    );
    let (code, out, _) = s.exec("oper", &["list", "--json"]);
    assert_eq!(code, 0);
    assert_eq!(
        serde_json::from_str::<serde_json::Value>(&out)
            .unwrap()
            .as_array()
            .unwrap()
            .len(),
        3
    );
    // the name comes from the key: --as, --db and --config are refused; writing commands too
    let (code, _, err) = s.exec("viewer", &["stats", "--as", "leo"]);
    assert_eq!(code, 2);
    assert!(err.contains("you are vera (viewer)"), "{err}");
    let (code, _, err) = s.exec("viewer", &["list", "--db", "sqlite:///tmp/other.db"]);
    assert_eq!(code, 2, "{err}");
    let (code, _, err) = s.exec("oper", &["claim", "s-1"]);
    assert_eq!(code, 2);
    assert!(
        err.contains("stats, list, show, groups, report, runs and run show"),
        "{err}"
    );
    // the exceptions by group, as the local command gives them
    let (code, out, err) = s.exec("viewer", &["groups", "--json"]);
    assert_eq!(code, 0, "{err}");
    let local: serde_json::Value =
        serde_json::from_str(&settle(&db.url, "seed", &["groups", "--json"])).unwrap();
    // what names the groups and counts them (their ages move with the clock)
    let named = |v: &serde_json::Value| -> Vec<String> {
        v.as_array()
            .unwrap()
            .iter()
            .map(|g| {
                format!(
                    "{} {} {} {} {}",
                    g["owner"], g["workflow"], g["state"], g["reason"], g["count"]
                )
            })
            .collect()
    };
    let remote = serde_json::from_str::<serde_json::Value>(&out).unwrap();
    assert!(!named(&remote).is_empty(), "{out}");
    assert_eq!(named(&remote), named(&local));
    assert!(show(&db.url, "s-1")["claimed_by"].is_null());
    // a run's own actions are the console's too; its reads are answered
    let (code, _, err) = s.exec("oper", &["run", "claim", "r-1"]);
    assert_eq!(code, 2, "{err}");
    let (code, out, err) = s.exec("viewer", &["runs"]);
    assert_eq!((code, out.trim()), (0, "no runs"), "{err}");
    // a console needs a terminal
    let (code, _, err) = s.exec("oper", &[]);
    assert_eq!(code, 1);
    assert!(err.contains("needs a terminal"), "{err}");
}

/// The manual's Running settle for a team: as an operator over `ssh -tt`, claim, retry and close with keys; every
/// event names the operator and holds the key's fingerprint; `SETTLE_OPERATOR` sent by the
/// client changes nothing. `q` ends the session with status 0 and gives the terminal back.
fn an_operator_works_items_over_ssh(db: &TestDb) {
    seed(&db.url, 3);
    // s-2 confirmed not done and released: a retry is its safe next step
    settle(&db.url, "seed", &["reconcile", "s-2", "--absent"]);
    settle(&db.url, "seed", &["release", "s-2"]);
    let keys = Keys::new();
    let s = Serve::start(&db.url, &keys, &[]);
    let t = Tmux::new("serve-op");
    t.shell(
        "a",
        (80, 24),
        &s.console_cmd("oper", "env SETTLE_OPERATOR=mallory NO_COLOR=1"),
    );
    t.wait("a", "the console as olga", |s| {
        s.contains("settle · olga") && s.contains("s-1")
    });
    assert!(
        !coloured(&t.styled("a")),
        "NO_COLOR from the client is honoured"
    );
    select(&t, "a", "s-1");
    t.keys("a", &["c"]);
    t.wait("a", "the confirmation", |s| s.contains("confirms"));
    t.keys("a", &["y"]);
    t.wait("a", "the claim", |s| s.contains("s-1: claimed"));
    t.keys("a", &["Escape"]);
    select(&t, "a", "s-2");
    t.wait("a", "R offered", |s| s.contains("R retry"));
    t.keys("a", &["R"]);
    t.wait("a", "the confirmation", |s| s.contains("confirms"));
    t.keys("a", &["y"]);
    t.wait("a", "the retry", |s| s.contains("s-2: will be retried"));
    t.keys("a", &["Escape"]);
    select(&t, "a", "s-3");
    t.keys("a", &["c"]);
    t.wait("a", "the confirmation", |s| s.contains("confirms"));
    t.keys("a", &["y"]);
    t.wait("a", "the claim", |s| s.contains("s-3: claimed"));
    t.keys("a", &["x", "3"]);
    t.literal("a", "customer cancelled");
    t.keys("a", &["Enter", "y"]);
    t.wait("a", "the close", |s| s.contains("s-3: closed"));
    t.keys("a", &["q"]);
    t.wait("a", "ssh to end", |s| s.contains("SSH-EXITED-0"));
    let after = t.screen("a");
    assert!(
        !after.contains("SAFE NEXT STEP"),
        "the terminal is the shell's again:\n{after}"
    );

    let print = keys.fingerprint("oper");
    let mut staff = 0;
    for key in ["s-1", "s-2", "s-3"] {
        for e in events(&db.url, key) {
            if e["actor"] == "seed" || e["actor"] == "settle" {
                continue;
            }
            assert_eq!(e["actor"], "olga", "{e}");
            assert_eq!(e["detail"]["key"], print.as_str(), "{e}");
            staff += 1;
        }
    }
    assert!(staff >= 4, "claims, retry and close were recorded: {staff}");
    assert_eq!(show(&db.url, "s-1")["claimed_by"], "olga");
    assert_eq!(show(&db.url, "s-3")["state"], "closed");
    assert!(
        !std::fs::read_to_string(&s.log)
            .unwrap_or_default()
            .contains("mallory")
    );
}

/// Whether a screen captured with its attributes (`tmux capture-pane -e`) sets any colour.
fn coloured(styled: &str) -> bool {
    styled.split('\u{1b}').skip(1).any(|seq| {
        let Some(params) = seq
            .strip_prefix('[')
            .and_then(|p| p.split_once('m'))
            .map(|(p, _)| p)
        else {
            return false;
        };
        params.split(';').any(|p| {
            p.parse::<u32>().is_ok_and(|n| {
                (30..=38).contains(&n) || (40..=48).contains(&n) || (90..=107).contains(&n)
            })
        })
    })
}

/// The manual's Running settle for a team: a viewer is offered no action key, and pressing them changes nothing.
fn a_viewer_acts_on_nothing(db: &TestDb) {
    seed(&db.url, 2);
    let keys = Keys::new();
    let s = Serve::start(&db.url, &keys, &[]);
    let before: Vec<usize> = ["s-1", "s-2"]
        .iter()
        .map(|k| events(&db.url, k).len())
        .collect();
    let t = Tmux::new("serve-viewer");
    t.shell("a", (80, 24), &s.console_cmd("viewer", ""));
    t.wait("a", "the console as vera", |s| {
        s.contains("settle · vera") && s.contains("s-1")
    });
    assert!(coloured(&t.styled("a")), "colours without NO_COLOR");
    let footer = t.screen("a").lines().last().unwrap_or("").to_string();
    for action in [
        "claim",
        "retry",
        "close",
        "mark",
        "reconcile",
        "pause",
        "note",
    ] {
        assert!(
            !footer.contains(action),
            "{action} offered to a viewer: {footer}"
        );
    }
    for k in [
        "c", "C", "u", "r", "R", "x", "n", "P", "Space", "A", "y", "Tab", "v", "y", "Escape",
    ] {
        t.keys("a", &[k]);
    }
    t.keys("a", &["?"]);
    t.wait("a", "the help", |s| {
        s.contains("a viewer reads, and acts on nothing")
    });
    let help = t.screen("a");
    assert!(
        !help.contains("claim the item") && !help.contains("take over"),
        "{help}"
    );
    t.keys("a", &["Escape", "q"]);
    t.wait("a", "ssh to end", |s| s.contains("SSH-EXITED-0"));
    let after: Vec<usize> = ["s-1", "s-2"]
        .iter()
        .map(|k| events(&db.url, k).len())
        .collect();
    assert_eq!(before, after, "a viewer changed nothing");
}

/// The manual's Running settle for a team: a lead reveals one value with a reason (the event has the path and the
/// reason; the value is in no event, log or metric), takes over a claim and pauses a destination.
fn a_lead_reveals_takes_over_and_pauses(db: &TestDb) {
    seed(&db.url, 2);
    settle(&db.url, "bob", &["claim", "s-2"]);
    let keys = Keys::new();
    let s = Serve::start(&db.url, &keys, &[]);
    let t = Tmux::new("serve-lead");
    t.shell("a", (80, 24), &s.console_cmd("lead", ""));
    t.wait("a", "the console as leo", |s| {
        s.contains("settle · leo") && s.contains("s-1")
    });
    select(&t, "a", "s-1");
    t.keys("a", &["Tab"]);
    t.wait("a", "v offered", |s| s.contains("v reveal"));
    t.keys("a", &["v"]);
    t.wait("a", "the fields", |s| s.contains("customer.email"));
    let choice = t
        .screen("a")
        .lines()
        .find(|l| l.contains("customer.email"))
        .and_then(|l| {
            l.split_whitespace()
                .find(|w| w.len() == 1 && w.chars().all(|c| c.is_ascii_digit()))
                .map(String::from)
        })
        .expect("a key for customer.email");
    t.keys("a", &[&choice]);
    t.literal("a", "customer asked which address");
    t.keys("a", &["Enter", "y"]);
    t.wait("a", "the value", |s| s.contains("ada1@example.com"));
    let revealed = events(&db.url, "s-1")
        .into_iter()
        .find(|e| e["kind"] == "revealed")
        .expect("a revealed event");
    assert_eq!(revealed["actor"], "leo");
    assert_eq!(revealed["detail"]["field"], "customer.email");
    assert_eq!(revealed["detail"]["reason"], "customer asked which address");
    assert_eq!(revealed["detail"]["key"], keys.fingerprint("lead").as_str());
    // take over bob's claim, with a reason
    t.keys("a", &["Escape", "Escape"]);
    select(&t, "a", "s-2");
    t.wait("a", "C offered", |s| s.contains("C take over"));
    t.keys("a", &["C"]);
    t.literal("a", "bob is off shift");
    t.keys("a", &["Enter", "y"]);
    t.wait("a", "the take-over", |s| s.contains("s-2: claimed"));
    assert_eq!(show(&db.url, "s-2")["claimed_by"], "leo");
    // pause the item's destination
    t.keys("a", &["P"]);
    t.wait("a", "the choice", |s| s.contains("pause destination crm"));
    t.keys("a", &["d"]);
    t.literal("a", "crm is down");
    t.keys("a", &["Enter", "y"]);
    t.wait("a", "the pause", |s| s.contains("destination crm paused"));
    let stats: serde_json::Value =
        serde_json::from_str(&settle(&db.url, "seed", &["stats", "--json"])).unwrap();
    assert!(stats.to_string().contains("crm"), "crm paused: {stats}");
    t.keys("a", &["q"]);
    t.wait("a", "ssh to end", |s| s.contains("SSH-EXITED-0"));
    // the value is in no event, no log and no metric
    let all_events = settle(&db.url, "seed", &["show", "s-1", "--json"]);
    assert!(!all_events.contains("ada1@example.com"));
    let mut raw_events = dump_events(db);
    raw_events.push_str(&std::fs::read_to_string(&s.log).unwrap_or_default());
    raw_events.push_str(&s.get("/metrics").1);
    assert!(!raw_events.contains("ada1@example.com"), "the value leaked");
}

/// Every event's detail, as stored.
fn dump_events(db: &TestDb) -> String {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let mut raw = Raw::connect(&db.url).await;
        raw.texts("SELECT detail FROM events").await.join("\n")
    })
}

/// The manual's Running settle for a team: an operator added while the server runs logs in within 2 s of SIGHUP;
/// one removed is refused, and their open console ends.
fn operators_are_reread_on_sighup(db: &TestDb) {
    seed(&db.url, 1);
    let keys = Keys::new();
    keys.write_config(&[("olga", "operator", "oper")]);
    let s = Serve::start(&db.url, &keys, &[]);
    assert_eq!(
        s.exec("lead", &["stats"]).0,
        255,
        "leo is not an operator yet"
    );
    let t = Tmux::new("serve-hup");
    t.shell("a", (80, 24), &s.console_cmd("oper", ""));
    t.wait("a", "olga's console", |s| s.contains("settle · olga"));

    keys.write_config(&[("olga", "operator", "oper"), ("leo", "lead", "lead")]);
    let hup = Instant::now();
    unsafe_free_kill("HUP", s.child.id());
    eventually("leo to log in", || s.exec("lead", &["stats"]).0 == 0);
    let took = hup.elapsed();
    assert!(
        took <= Duration::from_secs(2),
        "leo logged in {took:?} after SIGHUP"
    );

    keys.write_config(&[("leo", "lead", "lead")]);
    unsafe_free_kill("HUP", s.child.id());
    eventually("olga refused", || s.exec("oper", &["stats"]).0 == 255);
    t.wait("a", "olga's console to end", |s| s.contains("SSH-EXITED-1"));
    assert!(
        t.screen("a").contains("changed in the configuration"),
        "{}",
        t.screen("a")
    );
}

fn unsafe_free_kill(signal: &str, pid: u32) {
    let ok = Command::new("kill")
        .arg(format!("-{signal}"))
        .arg(pid.to_string())
        .status()
        .unwrap()
        .success();
    assert!(ok, "kill -{signal} {pid}");
}

/// The manual's Running settle for a team (the server's own `--metrics`): the gauges parsed by a Prometheus text
/// parser equal `stats --json` over SSH on the same database; sessions are counted.
fn the_servers_metrics_match_stats(db: &TestDb) {
    seed(&db.url, 4);
    settle(&db.url, "seed", &["reconcile", "s-2", "--absent"]);
    let keys = Keys::new();
    let s = Serve::start(&db.url, &keys, &[]);
    let (code, out, _) = s.exec("viewer", &["stats", "--json"]);
    assert_eq!(code, 0);
    let stats: serde_json::Value = serde_json::from_str(&out).unwrap();
    let (status, text) = s.get("/metrics");
    assert_eq!(status, 200);
    let samples = parse_prometheus(&text);
    for (state, n) in stats["by_state"].as_object().unwrap() {
        let got = samples
            .iter()
            .find(|(name, l, _)| name == "settle_operations" && l["state"] == *state)
            .map(|(_, _, v)| *v);
        assert_eq!(got, Some(n.as_f64().unwrap()), "{state}");
    }
    let exceptions: f64 = samples
        .iter()
        .filter(|(n, _, _)| n == "settle_exceptions")
        .map(|(_, _, v)| v)
        .sum();
    assert_eq!(exceptions, stats["exceptions"].as_f64().unwrap());
    assert_eq!(s.sessions(), 0.0);
    let t = Tmux::new("serve-metrics");
    t.shell("a", (80, 24), &s.console_cmd("viewer", ""));
    t.wait("a", "the console", |s| s.contains("settle · vera"));
    eventually("one session counted", || s.sessions() == 1.0);
    t.keys("a", &["q"]);
    eventually("no session counted", || s.sessions() == 0.0);
    assert_eq!(s.get("/healthz").0, 200);
}

/// The limit of sessions and the idle timeout (manual: Running settle for a team): a session past the limit is told why
/// and ends; an idle console is warned, then ends.
fn limits_hold(db: &TestDb) {
    seed(&db.url, 1);
    let keys = Keys::new();
    let s = Serve::start(
        &db.url,
        &keys,
        &["--max-sessions", "1", "--idle-timeout", "3s"],
    );
    let t = Tmux::new("serve-limits");
    t.shell("a", (80, 24), &s.console_cmd("oper", ""));
    t.wait("a", "the console", |s| s.contains("settle · olga"));
    let (code, _, err) = s.exec("viewer", &["stats"]);
    assert_eq!(code, 1);
    assert!(err.contains("1 sessions are open"), "{err}");
    t.wait("a", "the idle warning", |s| {
        s.contains("idle: this session ends in")
    });
    t.wait("a", "the idle end", |s| s.contains("SSH-EXITED-1"));
    assert!(t.screen("a").contains("ended after being idle"));
    eventually("the place freed", || s.exec("viewer", &["stats"]).0 == 0);
}

macro_rules! on_both {
    ($($name:ident),* $(,)?) => {
        mod sqlite {
            $(
                #[test]
                fn $name() {
                    super::$name(&super::common::sqlite());
                }
            )*
        }
        mod postgres {
            $(
                #[test]
                #[cfg_attr(not(settle_pg), ignore = "needs SETTLE_TEST_POSTGRES_URL")]
                fn $name() {
                    let rt = tokio::runtime::Runtime::new().unwrap();
                    let db = rt.block_on(super::common::postgres());
                    super::$name(&db);
                }
            )*
        }
    };
}

on_both!(
    keys_decide_who_logs_in,
    an_operator_works_items_over_ssh,
    a_viewer_acts_on_nothing,
    a_lead_reveals_takes_over_and_pauses,
    operators_are_reread_on_sighup,
    the_servers_metrics_match_stats,
    limits_hold,
);

/// The manual's Running settle for a team: eight sessions on PostgreSQL work different items; one dropped
/// mid-confirmation (`kill` of its `ssh`) leaves nothing half-done and nothing leaked (the
/// server's sessions and database connections return to their baseline), the others go on; a
/// resize of one redraws it at the new size.
#[test]
#[cfg_attr(not(settle_pg), ignore = "needs SETTLE_TEST_POSTGRES_URL")]
fn eight_sessions_on_postgres_one_dropped_mid_confirmation() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let db = rt.block_on(common::postgres());
    seed(&db.url, 8);
    let keys = Keys::new();
    let s = Serve::start(&db.url, &keys, &[]);
    let mut raw = rt.block_on(Raw::connect(&db.url));
    let mut connections = || {
        // everyone on this database but this probe
        rt.block_on(raw.int(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()",
        ))
    };
    // the baseline: the server warm (one session opened and closed), then idle
    let (code, _, _) = s.exec("oper", &["stats"]);
    assert_eq!(code, 0);
    let baseline = connections();
    assert_eq!(s.sessions(), 0.0);

    let t = Tmux::new("serve-eight");
    for i in 1..=8 {
        t.shell(&format!("w{i}"), (80, 24), &s.console_cmd("oper", ""));
    }
    for i in 1..=8 {
        t.wait(&format!("w{i}"), "the console", |s| {
            s.contains("settle · olga") && s.contains("s-")
        });
    }
    eventually("eight sessions", || s.sessions() == 8.0);
    for i in 1..=8 {
        let w = format!("w{i}");
        select(&t, &w, &format!("s-{i}"));
        t.keys(&w, &["c"]);
        t.wait(&w, "the confirmation", |s| s.contains("confirms"));
    }
    // w8 is dropped with its confirmation open
    let pane = t.run(&["list-panes", "-t", "t:w8", "-F", "#{pane_pid}"]);
    let shell: u32 = pane.trim().parse().unwrap();
    let ok = Command::new("pkill")
        .args(["-TERM", "-P", &shell.to_string(), "ssh"])
        .status()
        .unwrap()
        .success();
    assert!(ok, "killed w8's ssh");
    for i in 1..=7 {
        let w = format!("w{i}");
        t.keys(&w, &["y"]);
        t.wait(&w, "the claim", |s| s.contains(&format!("s-{i}: claimed")));
    }
    // one resized: drawn again at the new size (the wide header names the database)
    t.run(&["resize-window", "-t", "t:w1", "-x", "120", "-y", "30"]);
    t.wait("w1", "the wide layout", |s| {
        s.contains("WORKFLOW/STEP") && s.lines().any(|l| l.trim_end().chars().count() > 80)
    });
    eventually("seven sessions", || s.sessions() == 7.0);
    for i in 1..=7 {
        t.keys(&format!("w{i}"), &["q"]);
    }
    for i in 1..=7 {
        t.wait(&format!("w{i}"), "ssh to end", |s| {
            s.contains("SSH-EXITED-0")
        });
    }
    eventually("no session", || s.sessions() == 0.0);
    for i in 1..=7 {
        assert_eq!(
            show(&db.url, &format!("s-{i}"))["claimed_by"],
            "olga",
            "s-{i}"
        );
    }
    let dropped = show(&db.url, "s-8");
    assert!(
        dropped["claimed_by"].is_null(),
        "nothing half-done: {dropped}"
    );
    assert!(events(&db.url, "s-8").iter().all(|e| e["actor"] != "olga"));
    // connections back to the baseline: the pool lets idle ones go after 10 s; none is a session's
    eventually_within(
        "connections back to the baseline",
        Duration::from_secs(45),
        || connections() <= baseline,
    );
}
