//! The real binary in a real terminal (tmux gives it a pseudo-terminal) against a real database:
//! keys in, screens out, then the database is checked.

mod common;

use std::process::{Command, Stdio};

use common::tmux::Tmux;
use common::{Proxy, TestDb};

const BIN: &str = env!("CARGO_BIN_EXE_settle");

/// The console in a window of a test's tmux.
trait Console {
    fn open(&self, window: &str, db: &str, operator: &str);
    fn open_sized(&self, window: &str, db: &str, operator: &str, size: (u16, u16));
}

impl Console for Tmux {
    /// Opens a window running a shell, in which the console is started (so that after `q` the
    /// screen is the shell's again).
    fn open(&self, window: &str, db: &str, operator: &str) {
        self.open_sized(window, db, operator, (100, 30));
    }

    /// [`Tmux::open`] in a window of `size` columns and rows.
    fn open_sized(&self, window: &str, db: &str, operator: &str, size: (u16, u16)) {
        let log = self.dir.path().join("settle.log");
        let cmd = format!(
            "env SETTLE_OPERATOR={operator} SETTLE_LOG_FILE={} XDG_CONFIG_HOME={} {BIN} --db '{db}'; echo SETTLE-EXITED-$?; sleep 60",
            log.display(),
            self.dir.path().display()
        );
        self.shell(window, size, &cmd);
    }
}

fn settle(db: &str, args: &[&str]) -> String {
    let out = Command::new(BIN)
        .arg("--db")
        .arg(db)
        .args(args)
        .env("SETTLE_OPERATOR", "seed")
        .env("SETTLE_LOG_FILE", "/dev/null")
        .env("XDG_CONFIG_HOME", "/nonexistent")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "settle {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into()
}

fn seed(db: &str) {
    for (key, wf) in [
        ("e2e-1", "onboarding"),
        ("e2e-2", "onboarding"),
        ("e2e-3", "crm-sync"),
        ("other-4", "crm-sync"),
    ] {
        settle(
            db,
            &[
                "record",
                "--key",
                key,
                "--workflow",
                wf,
                "--destination",
                "crm",
                "--action",
                "upsert",
                "--payload",
                "{\"n\":1}",
            ],
        );
        settle(
            db,
            &[
                "attempt",
                "--key",
                key,
                "--outcome",
                "unknown",
                "--error",
                "read timeout after 30s",
            ],
        );
    }
}

fn json(db: &str, key: &str) -> serde_json::Value {
    serde_json::from_str(&settle(db, &["show", key, "--json"])).unwrap()
}

fn have_tmux() -> bool {
    Command::new("tmux")
        .arg("-V")
        .output()
        .is_ok_and(|o| o.status.success())
}

fn work_an_incident(db: &TestDb) {
    assert!(
        have_tmux(),
        "tmux is needed for the end-to-end console tests"
    );
    let url = db.url.as_str();
    seed(url);
    let t = Tmux::new("incident");
    t.open("a", url, "alice");
    t.wait("a", "the first data frame", |s| {
        s.contains("e2e-1") && s.contains("exceptions")
    });
    // filter, claim, reconcile found
    t.keys("a", &["/"]);
    t.literal("a", "e2e-2");
    t.wait("a", "the filter to narrow the list", |s| {
        s.contains("e2e-2") && !s.contains("e2e-1 ")
    });
    t.keys("a", &["Enter", "c"]);
    t.wait("a", "the confirmation", |s| s.contains("confirms"));
    t.keys("a", &["y"]);
    t.wait("a", "the claim", |s| s.contains("e2e-2: claimed"));
    t.keys("a", &["r", "f"]);
    t.literal("a", "REF-7");
    t.keys("a", &["Enter", "y"]);
    t.wait("a", "the reconcile", |s| s.contains("reconciled"));
    // another: claim, close as abandoned. Esc first clears the filter: wait for the list to show
    // it (an Esc and a key that arrive together read as Alt+key, as a person's never do)
    t.keys("a", &["Escape"]);
    t.wait("a", "the filter cleared", |s| {
        s.contains("e2e-1 ") && s.contains("e2e-3 ")
    });
    t.keys("a", &["/"]);
    t.literal("a", "e2e-3");
    t.wait("a", "e2e-3", |s| {
        s.contains("e2e-3") && !s.contains("e2e-2 ")
    });
    t.keys("a", &["Enter", "c", "y"]);
    t.wait("a", "the second claim", |s| s.contains("e2e-3: claimed"));
    t.keys("a", &["x", "3"]);
    t.literal("a", "customer cancelled");
    t.keys("a", &["Enter", "y"]);
    t.wait("a", "the close", |s| s.contains("e2e-3: closed"));
    t.keys("a", &["q"]);
    let after = t.screen("a");
    t.wait("a", "the console to exit", |s| {
        s.contains("SETTLE-EXITED-0")
    });
    let after_q = t.screen("a");
    assert!(
        !after_q.contains("[1 Exceptions") && !after_q.contains("SAFE NEXT STEP"),
        "the shell's screen is back:\n{after_q}\n(before: {after})"
    );

    // the database holds exactly those changes, by alice
    let two = json(url, "e2e-2");
    assert_eq!(
        (two["state"].as_str(), two["reference"].as_str()),
        (Some("succeeded"), Some("REF-7"))
    );
    let kinds: Vec<(String, String)> = two["history"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            (
                e["actor"].as_str().unwrap().to_string(),
                e["kind"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    assert_eq!(
        &kinds[2..],
        [
            ("alice".to_string(), "claimed".to_string()),
            ("alice".to_string(), "reconciled".to_string())
        ]
    );
    let three = json(url, "e2e-3");
    assert_eq!(three["state"], "closed");
    assert_eq!(
        three["history"].as_array().unwrap().last().unwrap()["actor"],
        "alice"
    );
    for untouched in ["e2e-1", "other-4"] {
        let v = json(url, untouched);
        assert_eq!(
            (v["state"].as_str(), v["history"].as_array().unwrap().len()),
            (Some("unknown"), 2),
            "{untouched}"
        );
    }
}

/// The manual's console at the design size, 80x24: on an unclaimed `failed` item
/// `R`, `y` retries it, claimed and retried in one event; `C` takes over bob's claim with a
/// reason; Activity `/actor:bob`, `Enter` opens the operation; a change by another writer is
/// highlighted.
fn on_call_at_80x24(db: &TestDb) {
    assert!(
        have_tmux(),
        "tmux is needed for the end-to-end console tests"
    );
    let url = db.url.as_str();
    seed(url);
    // e2e-1 confirmed not done (failed) and released: unclaimed; bob holds e2e-3
    settle(url, &["--as", "seed", "reconcile", "e2e-1", "--absent"]);
    settle(url, &["--as", "seed", "release", "e2e-1"]);
    settle(url, &["--as", "bob", "claim", "e2e-3"]);
    assert_eq!(json(url, "e2e-1")["state"], "failed");
    let t = Tmux::new("oncall");
    t.open_sized("a", url, "alice", (80, 24));
    t.wait("a", "the first data frame", |s| {
        s.contains("e2e-1") && s.contains("exc")
    });
    // R on the unclaimed failed item (it is the oldest exception: selected first)
    t.keys("a", &["/"]);
    t.literal("a", "key:e2e-1");
    t.wait("a", "the filter", |s| !s.contains("e2e-2 "));
    t.keys("a", &["Enter"]);
    t.wait("a", "R offered", |s| s.contains("R retry"));
    t.keys("a", &["R"]);
    t.wait("a", "the confirmation", |s| s.contains("confirms"));
    t.keys("a", &["y"]);
    t.wait("a", "the retry", |s| s.contains("e2e-1: will be retried"));
    let one = json(url, "e2e-1");
    let last = one["history"].as_array().unwrap().last().unwrap().clone();
    assert_eq!(
        (&last["actor"], &last["kind"], &last["detail"]["claimed"]),
        (&"alice".into(), &"retry_requested".into(), &true.into()),
        "claimed and retried in one event: {last}"
    );
    // C takes over bob's claim, with a reason
    t.keys("a", &["Escape"]);
    t.wait("a", "the filter cleared", |s| s.contains("e2e-3 "));
    t.keys("a", &["/"]);
    t.literal("a", "key:e2e-3");
    t.wait("a", "the filter", |s| !s.contains("e2e-2 "));
    t.keys("a", &["Enter"]);
    t.wait("a", "C offered", |s| s.contains("C take over"));
    t.keys("a", &["C"]);
    t.literal("a", "bob is off shift");
    t.keys("a", &["Enter", "y"]);
    t.wait("a", "the take-over", |s| s.contains("e2e-3: claimed"));
    let three = json(url, "e2e-3");
    assert_eq!(three["claimed_by"], "alice");
    let last = three["history"].as_array().unwrap().last().unwrap().clone();
    assert_eq!(last["kind"], "claim_taken", "{last}");
    assert!(last.to_string().contains("bob is off shift"), "{last}");
    // Activity: bob's actions, and Enter opens the operation
    t.keys("a", &["Escape"]);
    t.wait("a", "the filter cleared", |s| s.contains("e2e-2 "));
    t.keys("a", &["5", "/"]);
    t.literal("a", "actor:bob");
    t.keys("a", &["Enter"]);
    t.wait("a", "bob's claim in Activity", |s| {
        s.lines()
            .any(|l| l.contains("bob") && l.contains("claimed") && l.contains("e2e-3"))
            && !s.lines().skip(3).any(|l| l.contains("alice"))
    });
    t.keys("a", &["Enter"]);
    t.wait("a", "the operation opened", |s| {
        s.contains(" e2e-3 ─") && s.contains("next ")
    });
    // back to the list; another writer claims e2e-2: its row is highlighted
    t.keys("a", &["Escape"]);
    t.wait("a", "Activity again", |s| s.contains("ACTOR"));
    t.keys("a", &["Escape"]);
    t.keys("a", &["1"]);
    t.wait("a", "the exceptions", |s| s.contains("e2e-2 "));
    let row = |s: &str| {
        s.lines()
            .find(|l| l.contains("e2e-2"))
            .unwrap_or_default()
            .to_string()
    };
    // the highlight is a background colour (blue: SGR 48;5;4) that fades after 3 s (on a row
    // not selected: the selection keeps its own look)
    t.keys("a", &["G"]);
    const HIGHLIGHT: &str = "48;5;4";
    assert!(!row(&t.styled("a")).contains(HIGHLIGHT));
    settle(url, &["--as", "carol", "claim", "e2e-2"]);
    t.wait("a", "carol's claim highlighted", |_| {
        row(&t.styled("a")).contains(HIGHLIGHT) && row(&t.screen("a")).contains("carol")
    });
    t.wait("a", "the highlight to fade", |_| {
        !row(&t.styled("a")).contains(HIGHLIGHT)
    });
    t.keys("a", &["q"]);
    t.wait("a", "a clean exit", |s| s.contains("SETTLE-EXITED-0"));
}

#[test]
fn on_call_at_80x24_on_sqlite() {
    on_call_at_80x24(&common::sqlite());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(not(settle_pg), ignore = "needs SETTLE_TEST_POSTGRES_URL")]
async fn on_call_at_80x24_on_postgres() {
    let db = common::postgres().await;
    tokio::task::spawn_blocking(move || on_call_at_80x24(&db))
        .await
        .unwrap();
}

#[test]
fn an_incident_worked_with_keys_on_sqlite() {
    work_an_incident(&common::sqlite());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(not(settle_pg), ignore = "needs SETTLE_TEST_POSTGRES_URL")]
async fn an_incident_worked_with_keys_on_postgres() {
    let db = common::postgres().await;
    tokio::task::spawn_blocking(move || work_an_incident(&db))
        .await
        .unwrap();
}

/// Two consoles on one PostgreSQL database: a claim in one shows in the other by itself; both
/// claiming the same item leaves one holder and a clear refusal in the other.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(not(settle_pg), ignore = "needs SETTLE_TEST_POSTGRES_URL")]
async fn two_consoles_on_postgres() {
    two_consoles(common::postgres().await).await;
}

/// The same through PgBouncer in transaction mode, where no LISTEN lasts: bob's console sees
/// alice's claim by polling (manual: Retention and the archive).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    not(all(settle_pg, settle_pgbouncer)),
    ignore = "needs SETTLE_TEST_POSTGRES_URL and pgbouncer"
)]
async fn two_consoles_through_pgbouncer() {
    two_consoles(common::pgbouncer().await).await;
}

async fn two_consoles(db: TestDb) {
    tokio::task::spawn_blocking(move || {
        assert!(have_tmux());
        let url = db.url.as_str();
        seed(url);
        let t = Tmux::new("two");
        t.open("a", url, "alice");
        t.open("b", url, "bob");
        for w in ["a", "b"] {
            t.wait(w, "the first data frame", |s| s.contains("e2e-1"));
        }
        t.keys("a", &["c", "y"]);
        t.wait("a", "alice's claim", |s| s.contains("e2e-1: claimed"));
        // how soon is measured by `cargo bench --bench console` (live refresh), not here
        t.wait("b", "alice's claim in bob's console", |s| {
            s.lines()
                .any(|l| l.contains("e2e-1") && l.contains("alice"))
        });
        // both press c on e2e-2
        for w in ["a", "b"] {
            t.keys(w, &["j", "c"]);
            t.wait(w, "the confirmation", |s| s.contains("confirms"));
        }
        t.keys("a", &["y"]);
        t.keys("b", &["y"]);
        t.wait("a", "a's answer", |s| {
            s.contains("e2e-2: claimed") || s.contains("refused")
        });
        t.wait("b", "b's answer", |s| {
            s.contains("e2e-2: claimed") || s.contains("refused")
        });
        let (sa, sb) = (t.screen("a"), t.screen("b"));
        let won = [sa.contains("e2e-2: claimed"), sb.contains("e2e-2: claimed")];
        assert_eq!(
            won.iter().filter(|w| **w).count(),
            1,
            "one holder:\n{sa}\n{sb}"
        );
        let loser = if won[0] { &sb } else { &sa };
        assert!(
            loser.contains("refused: e2e-2 is claimed by"),
            "a clear refusal:\n{loser}"
        );
        let v = json(url, "e2e-2");
        let claims = v["history"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|e| e["kind"] == "claimed")
            .count();
        assert_eq!(claims, 1);
    })
    .await
    .unwrap();
}

/// Stopping the database under a running console: it shows the outage, keeps running with
/// actions off, and after the database is back it refreshes and actions work; nothing was
/// half-written.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(not(settle_pg), ignore = "needs SETTLE_TEST_POSTGRES_URL")]
async fn the_console_rides_out_a_database_outage() {
    let db = common::postgres().await;
    let (proxy, via_proxy) = Proxy::before(&db).await;
    let url = db.url.clone();
    let t = tokio::task::spawn_blocking({
        let via = via_proxy.clone();
        move || {
            seed(&url);
            let t = Tmux::new("outage");
            t.open("a", &via, "alice");
            t.wait("a", "the first data frame", |s| s.contains("e2e-1"));
            t
        }
    })
    .await
    .unwrap();
    proxy.cut();
    let t = tokio::task::spawn_blocking(move || {
        t.wait("a", "the outage in the header", |s| {
            s.contains("DATABASE UNREACHABLE")
        });
        t.keys("a", &["c"]);
        t.wait("a", "actions refused while down", |s| {
            s.contains("actions are off")
        });
        t
    })
    .await
    .unwrap();
    let back = proxy.restore().await;
    let url = db.url.clone();
    tokio::task::spawn_blocking(move || {
        t.wait("a", "the recovery", |s| {
            !s.contains("DATABASE UNREACHABLE") && s.contains("reachable again")
        });
        t.keys("a", &["c", "y"]);
        t.wait("a", "a claim after the outage", |s| {
            s.contains("e2e-1: claimed")
        });
        t.keys("a", &["q"]);
        t.wait("a", "a clean exit", |s| s.contains("SETTLE-EXITED-0"));
        let v = json(&url, "e2e-1");
        assert_eq!(v["claimed_by"], "alice");
        let kinds: Vec<_> = v["history"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["kind"].as_str().unwrap().to_string())
            .collect();
        assert_eq!(
            kinds,
            ["recorded", "attempt", "claimed"],
            "exactly one claim, nothing half-written"
        );
    })
    .await
    .unwrap();
    back.cut();
}

/// A payload holding `ESC ] 0 ; owned BEL` and `ESC [ 2 J` neither retitles the terminal nor
/// clears the screen: the console shows it escaped.
#[test]
fn escape_sequences_in_stored_text_never_reach_the_terminal() {
    assert!(have_tmux());
    let db = common::sqlite();
    let url = db.url.as_str();
    let payload = r#"{"title":"\u001b]0;owned\u0007\u001b[2J"}"#;
    settle(
        url,
        &[
            "record",
            "--key",
            "esc-1",
            "--workflow",
            "w",
            "--destination",
            "crm",
            "--action",
            "a",
            "--payload",
            payload,
        ],
    );
    settle(
        url,
        &[
            "attempt",
            "--key",
            "esc-1",
            "--outcome",
            "unknown",
            "--error",
            "boom \u{1b}]0;owned\u{7}\u{1b}[2J",
        ],
    );
    let t = Tmux::new("escape");
    t.open("a", url, "alice");
    // the detail pane is drawn in pieces over a slow terminal: wait for the whole of it (if the
    // escaping were gone, this gives up and shows the screen)
    t.wait(
        "a",
        "the payload and the error shown escaped in the detail pane",
        |s| s.contains("\\u001b]0;owned\\u0007\\u001b[2J") && s.contains("\\x1b]0;owned\\x07"),
    );
    let screen = t.screen("a");
    assert!(
        screen.contains("[1 Exceptions"),
        "the screen was not cleared:\n{screen}"
    );
    let title = t.run(&["display-message", "-p", "-t", "t:a", "#{pane_title}"]);
    assert_ne!(title.trim(), "owned", "the terminal title did not change");
    t.keys("a", &["q"]);
    t.wait("a", "a clean exit", |s| s.contains("SETTLE-EXITED-0"));
}

/// `settle demo --live`: the console shows a live dispatcher and new work moving.
#[test]
fn the_live_demo_moves() {
    assert!(have_tmux());
    let db = common::sqlite();
    let t = Tmux::new("live");
    let log = t.dir.path().join("settle.log");
    let cmd = format!(
        "cd {} && env SETTLE_OPERATOR=alice SETTLE_LOG_FILE={} {BIN} --db '{}' demo --live; echo SETTLE-EXITED-$?; sleep 60",
        env!("CARGO_MANIFEST_DIR"),
        log.display(),
        db.url
    );
    t.run(&[
        "new-session",
        "-d",
        "-s",
        "t",
        "-n",
        "a",
        "-x",
        "120",
        "-y",
        "30",
        "sh",
    ]);
    t.run(&["send-keys", "-t", "t:a", &cmd, "Enter"]);
    t.wait("a", "the console with a live dispatcher", |s| {
        s.contains("dispatcher ok")
    });
    // Activity shows people's actions; `a` adds automation's (the dispatcher's)
    t.keys("a", &["5", "a"]);
    t.wait("a", "new work dispatched", |s| {
        s.lines()
            .any(|l| l.contains("dispatcher") && l.contains("live-"))
    });
    t.keys("a", &["q"]);
    t.wait("a", "a clean exit", |s| s.contains("SETTLE-EXITED-0"));
}

/// Runs the binary as `who`; the exit code and stdout (bulk actions exit 3 when they leave items
/// alone).
fn settle_code(db: &str, who: &str, args: &[&str]) -> (i32, String) {
    let out = Command::new(BIN)
        .arg("--db")
        .arg(db)
        .args(args)
        .env("SETTLE_OPERATOR", who)
        .env("SETTLE_LOG_FILE", "/dev/null")
        .env("XDG_CONFIG_HOME", "/nonexistent")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(
        out.status.code().is_some_and(|c| c == 0 || c == 3),
        "settle {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    (
        out.status.code().unwrap(),
        String::from_utf8_lossy(&out.stdout).into(),
    )
}

/// What `--dry-run` must leave as it was: every operation as listed, and the totals.
fn db_snapshot(db: &str) -> String {
    let list = settle(db, &["list", "--all", "--json"]);
    let stats = settle(db, &["stats", "--json"]);
    let mut v: serde_json::Value = serde_json::from_str(&list).unwrap();
    // ages move with the clock; everything else must not
    for op in v.as_array_mut().unwrap() {
        op.as_object_mut().unwrap().remove("age_seconds");
        op.as_object_mut().unwrap().remove("next_step");
    }
    let mut s: serde_json::Value = serde_json::from_str(&stats).unwrap();
    s.as_object_mut()
        .unwrap()
        .remove("oldest_exception_seconds");
    format!("{v}\n{s}")
}

/// an outage left 300 unknowns at a destination that does not
/// deduplicate (sms) and 200 at another (email). `reconcile --from` a 250-line export (some
/// unknown keys, some in the wrong state) reports per line and applies the rest; the console at
/// 80x24 closes every sms unknown in one go (`/dest:sms state:unknown`, `A`, `x`): the preview
/// counts by reason, bob's claims are left alone, each item gets exactly one event, all with one
/// batch id; `retry --where ... --rate 10/s` spaces the next attempts 100 ms apart; `--dry-run`
/// changes nothing.
fn an_outage_worked_in_bulk(db: &TestDb) {
    assert!(
        have_tmux(),
        "tmux is needed for the end-to-end console tests"
    );
    let url = db.url.as_str();
    let dir = tempfile::tempdir().unwrap();
    let mut lines = String::new();
    let mut op = |key: &str, dest: &str, outcome: &str| {
        lines.push_str(&format!(
            "{{\"type\":\"intent\",\"key\":\"{key}\",\"workflow\":\"alerts\",\"step\":\"send\",\"destination\":\"{dest}\",\"action\":\"send\",\"payload\":{{\"phone\":\"+44 7700 900123\"}}}}\n\
             {{\"type\":\"attempt\",\"key\":\"{key}\",\"attempt\":1,\"outcome\":\"{outcome}\",\"error\":\"read timeout after 30s\"}}\n"
        ));
    };
    for i in 0..300 {
        op(&format!("alert-{i}"), "sms", "unknown");
    }
    for i in 0..200 {
        op(&format!("rcpt-{i}"), "email", "unknown");
    }
    for i in 0..25 {
        op(&format!("done-{i}"), "email", "accepted");
    }
    let history = dir.path().join("outage.jsonl");
    std::fs::write(&history, lines).unwrap();
    settle(url, &["ingest", history.to_str().unwrap()]);
    // bob already holds ten of the sms ones
    let bobs: Vec<String> = (0..10).map(|i| format!("alert-{i}")).collect();
    let mut claim = vec!["claim", "--yes"];
    claim.extend(bobs.iter().map(String::as_str));
    settle_code(url, "bob", &claim);

    // the email provider's export: 200 not sent, 25 keys settle never saw, 25 already done
    let mut csv = String::from("key,outcome,reference\n");
    for i in 0..200 {
        csv.push_str(&format!("rcpt-{i},absent,\n"));
    }
    for i in 0..25 {
        csv.push_str(&format!("ghost-{i},found,MSG-{i}\n"));
    }
    for i in 0..25 {
        csv.push_str(&format!("done-{i},found,MSG-D{i}\n"));
    }
    let export = dir.path().join("export.csv");
    std::fs::write(&export, csv).unwrap();
    let export = export.to_str().unwrap();
    let before = db_snapshot(url);
    let (_, preview) = settle_code(url, "alice", &["reconcile", "--from", export, "--dry-run"]);
    assert_eq!(db_snapshot(url), before, "--dry-run changed nothing");
    assert_eq!(
        preview.lines().filter(|l| l.starts_with("line ")).count(),
        250,
        "{preview}"
    );
    assert!(preview.contains("line 202: ghost-0: found MSG-0: left alone: no such operation"));
    assert!(preview.contains("line 227: done-0: found MSG-D0: left alone: already terminal"));
    let (code, done) = settle_code(url, "alice", &["reconcile", "--from", export, "--yes"]);
    assert_eq!(code, 3, "some lines were left alone: {done}");
    assert!(done.contains("reconcile: 200 done (batch b-"), "{done}");
    assert_eq!(json(url, "rcpt-7")["state"], "failed");

    // the console at 80x24: every sms unknown at once
    let t = Tmux::new("outage");
    t.open_sized("a", url, "alice", (80, 24));
    t.wait("a", "the first data frame", |s| s.contains("alert-"));
    t.keys("a", &["/"]);
    t.literal("a", "dest:sms state:unknown");
    t.keys("a", &["Enter"]);
    t.wait("a", "the filter's count", |s| s.contains("300 of "));
    t.keys("a", &["A"]);
    t.wait("a", "every match marked", |s| s.contains("300 marked"));
    t.keys("a", &["x", "3"]);
    t.literal("a", "customers told by email");
    t.keys("a", &["Enter"]);
    t.wait("a", "the preview", |s| {
        s.contains("close 300: 290 will be done") && s.contains("10 claimed by another")
    });
    t.keys("a", &["y"]);
    t.wait("a", "the summary", |s| {
        s.contains("close: 290 done (batch b-")
    });
    t.keys("a", &["q"]);
    t.wait("a", "a clean exit", |s| s.contains("SETTLE-EXITED-0"));
    let mut batches = std::collections::BTreeSet::new();
    for i in 10..300 {
        let v = json(url, &format!("alert-{i}"));
        assert_eq!(v["state"], "closed");
        let closes: Vec<&serde_json::Value> = v["history"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|e| e["actor"] == "alice")
            .collect();
        // claimed and closed in one event
        assert_eq!(closes.len(), 1, "alert-{i}: {closes:?}");
        assert_eq!(closes[0]["kind"], "closed");
        batches.insert(closes[0]["detail"]["batch"].as_str().unwrap().to_string());
    }
    assert_eq!(batches.len(), 1, "one batch id: {batches:?}");
    for k in &bobs {
        let v = json(url, k);
        assert_eq!(
            (v["state"].as_str(), v["claimed_by"].as_str()),
            (Some("unknown"), Some("bob"))
        );
    }

    // the email provider is back: retry the 200 failed, ten a second
    let before = db_snapshot(url);
    let (_, dry) = settle_code(
        url,
        "alice",
        &["retry", "--where", "dest:email state:failed", "--dry-run"],
    );
    assert!(dry.contains("retry 200: 200 to do"), "{dry}");
    assert_eq!(db_snapshot(url), before, "--dry-run changed nothing");
    let (code, out) = settle_code(
        url,
        "alice",
        &[
            "retry",
            "--where",
            "dest:email state:failed",
            "--rate",
            "10/s",
            "--yes",
        ],
    );
    assert_eq!(code, 0, "{out}");
    let list: serde_json::Value = serde_json::from_str(&settle(
        url,
        &[
            "list",
            "--where",
            "dest:email state:pending",
            "--all",
            "--json",
        ],
    ))
    .unwrap();
    let mut next: Vec<chrono::DateTime<chrono::Utc>> = list
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["next_attempt_at"].as_str().unwrap().parse().unwrap())
        .collect();
    assert_eq!(next.len(), 200);
    next.sort();
    for w in next.windows(2) {
        let gap = (w[1] - w[0]).num_milliseconds();
        assert!((99..=101).contains(&gap), "next attempts {gap} ms apart");
    }
}

#[test]
fn an_outage_worked_in_bulk_on_sqlite() {
    an_outage_worked_in_bulk(&common::sqlite());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(not(settle_pg), ignore = "needs SETTLE_TEST_POSTGRES_URL")]
async fn an_outage_worked_in_bulk_on_postgres() {
    let db = common::postgres().await;
    tokio::task::spawn_blocking(move || an_outage_worked_in_bulk(&db))
        .await
        .unwrap();
}

/// the view 6 on the demo's week: `6`, then `]` `]`: the title,
/// the chart and the table change with the window; `q` gives the terminal back.
#[test]
fn the_review_of_the_demo_week_follows_its_window() {
    assert!(
        have_tmux(),
        "tmux is needed for the end-to-end console tests"
    );
    let t = Tmux::new("review");
    let dir = t.dir.path().display().to_string();
    t.shell(
        "a",
        (80, 24),
        &format!(
            "cd {dir} && env SETTLE_OPERATOR=alice SETTLE_LOG_FILE={dir}/settle.log XDG_CONFIG_HOME={dir} {BIN} demo; echo SETTLE-EXITED-$?; sleep 60"
        ),
    );
    t.wait("a", "the demo's console", |s| s.contains("[1 Exc"));
    t.keys("a", &["6"]);
    let loaded = |days: &'static str| {
        move |s: &str| s.contains(days) && s.contains("duplicates") && s.contains("workflow")
    };
    t.wait("a", "the week's review", loaded("last 7 days"));
    let week = t.screen("a");
    t.keys("a", &["]"]);
    t.wait("a", "the month's review", loaded("last 30 days"));
    let month = t.screen("a");
    t.keys("a", &["]"]);
    t.wait("a", "the day's review", loaded("last 1 day "));
    let day = t.screen("a");
    // the per-day chart: seven pairs of bars, a sparkline pair, one pair
    let chart = |s: &str| s.lines().skip(3).take(7).collect::<Vec<_>>().join("\n");
    assert_ne!(chart(&week), chart(&month), "{week}\n{month}");
    assert_ne!(chart(&week), chart(&day), "{week}\n{day}");
    // the table's resolved counts: the day's are fewer than the week's
    // the table's resolved counts, read under the header's "resolved"
    let resolved = |s: &str| -> i64 {
        let mut lines = s.lines().skip_while(|l| !l.starts_with("workflow"));
        let header = lines.next().unwrap_or_default();
        let at = header.find("resolved").expect("a resolved column");
        lines
            .take_while(|l| !l.starts_with("destination"))
            .filter_map(|l| l.get(at..at + 8).and_then(|n| n.trim().parse::<i64>().ok()))
            .sum()
    };
    assert!(resolved(&day) < resolved(&week), "{day}\n{week}");
    t.keys("a", &["q"]);
    t.wait("a", "the console to exit", |s| {
        s.contains("SETTLE-EXITED-0")
    });
    assert!(
        !t.screen("a").contains("Review ·"),
        "the shell's screen is back"
    );
}

/// (the console) and 3 (the filter in the header): at 80x24, `L` asks
/// `settle sim`'s GET lookup. Found becomes succeeded with the destination's reference, absent
/// becomes failed, no answer leaves the item as it was and says why; marked items are looked
/// up together, their answers tallied, and reconciled one event each. With a filter on, the
/// header holds the filter's text and its "N of M".
fn look_up_with_l_at_80x24(db: &TestDb) {
    assert!(
        have_tmux(),
        "tmux is needed for the end-to-end console tests"
    );
    let url = db.url.as_str();
    let sim = common::Sim::start(&["--no-dedupe"]);
    let t = Tmux::new("lookup");
    let config = t.dir.path().join("settle.toml");
    std::fs::write(
        &config,
        format!(
            "[destinations.tasks]\nlookup_url = \"{}/tasks?key={{key}}\"\ntimeout = \"2s\"\n\
             [destinations.down]\nlookup_url = \"http://127.0.0.1:9/t?key={{key}}\"\ntimeout = \"1s\"\n",
            sim.base
        ),
    )
    .unwrap();
    let cfg = config.to_str().unwrap();
    let mut lines = String::new();
    let mut unknown = |key: &str, dest: &str| {
        lines.push_str(&format!(
            "{{\"type\":\"intent\",\"key\":\"{key}\",\"workflow\":\"onboarding\",\"destination\":\"{dest}\",\"action\":\"create_task\",\"payload\":{{\"title\":\"Kickoff\"}}}}\n\
             {{\"type\":\"attempt\",\"key\":\"{key}\",\"attempt\":1,\"outcome\":\"unknown\",\"error\":\"read timeout after 30s\"}}\n"
        ));
    };
    for key in ["lk-found", "lk-absent"] {
        unknown(key, "tasks");
    }
    unknown("lk-down", "down");
    for i in 0..6 {
        unknown(&format!("many-{i}"), "tasks");
    }
    let file = t.dir.path().join("unknowns.jsonl");
    std::fs::write(&file, lines).unwrap();
    settle(url, &["--config", cfg, "ingest", file.to_str().unwrap()]);
    for key in ["lk-found", "many-0", "many-2", "many-4"] {
        let ok = Command::new("curl")
            .args(["-sf", "-o", "/dev/null", "-X", "POST", "-H"])
            .arg(format!("Idempotency-Key: {key}"))
            .args([
                "-H",
                "Content-Type: application/json",
                "-d",
                "{\"title\":\"Kickoff\"}",
            ])
            .arg(format!("{}/tasks", sim.base))
            .status()
            .unwrap()
            .success();
        assert!(ok);
    }
    let log = t.dir.path().join("settle.log");
    t.shell(
        "a",
        (80, 24),
        &format!(
            "env SETTLE_OPERATOR=alice SETTLE_LOG_FILE={} XDG_CONFIG_HOME={} {BIN} --db '{url}' --config {cfg}; echo SETTLE-EXITED-$?; sleep 60",
            log.display(),
            t.dir.path().display()
        ),
    );
    t.wait("a", "the first data frame", |s| s.contains("lk-found"));
    let filter = |text: &str| {
        t.keys("a", &["Escape", "/"]);
        t.literal("a", text);
        t.keys("a", &["Enter"]);
    };
    // found: the answer, then the reconcile
    filter("key:lk-found");
    t.wait("a", "the filter and its count in the header", |s| {
        s.lines()
            .next()
            .is_some_and(|h| h.contains("/key:lk-found 1 of 9"))
    });
    t.keys("a", &["L"]);
    t.wait("a", "the lookup's answer", |s| {
        s.contains("found at tasks: T-1 (HTTP 200)") && s.contains("reference T-1?")
    });
    t.keys("a", &["y"]);
    t.wait("a", "the reconcile", |s| s.contains("lk-found: reconciled"));
    let v = json(url, "lk-found");
    assert_eq!(
        (v["state"].as_str(), v["reference"].as_str()),
        (Some("succeeded"), Some("T-1"))
    );
    // absent
    filter("key:lk-absent");
    t.wait("a", "the filtered row", |s| {
        s.contains("lk-absent") && !s.contains("lk-down")
    });
    t.keys("a", &["L"]);
    t.wait("a", "the lookup's answer", |s| {
        s.contains("not at tasks (HTTP 404)")
    });
    t.keys("a", &["y"]);
    t.wait("a", "the reconcile", |s| {
        s.contains("lk-absent: reconciled")
    });
    assert_eq!(json(url, "lk-absent")["state"], "failed");
    // no answer: left as it was, and why
    filter("key:lk-down");
    t.wait("a", "the filtered row", |s| {
        s.contains("lk-down") && !s.contains("lk-absent")
    });
    t.keys("a", &["L"]);
    t.wait("a", "no answer, and why", |s| {
        s.contains("no answer from down") && s.contains("left as it was")
    });
    let v = json(url, "lk-down");
    assert_eq!(v["state"], "unknown");
    assert_eq!(v["history"].as_array().unwrap().len(), 2, "nothing written");
    // marked items: looked up together, tallied, reconciled one event each
    filter("key:many-*");
    t.wait("a", "the six", |s| {
        s.lines()
            .next()
            .is_some_and(|h| h.contains("/key:many-* 6 of 8"))
    });
    t.keys("a", &["A"]);
    t.wait("a", "all marked", |s| s.contains("6 marked"));
    t.keys("a", &["L"]);
    t.wait("a", "the preview", |s| {
        s.contains("look up 6: 6 will be done")
    });
    t.keys("a", &["y"]);
    t.wait("a", "the answers", |s| {
        s.contains("looked up 6: 3 found, 3 absent") && s.contains("reconcile 6: 6 will be done")
    });
    t.keys("a", &["y"]);
    t.wait("a", "the summary", |s| {
        s.contains("reconcile by lookup: 6 done")
    });
    for i in 0..6 {
        let v = json(url, &format!("many-{i}"));
        let want = if i % 2 == 0 { "succeeded" } else { "failed" };
        assert_eq!(v["state"], want, "many-{i}: {v}");
        let last = v["history"].as_array().unwrap().last().unwrap().clone();
        assert_eq!(
            (
                last["kind"].as_str(),
                last["detail"]["evidence"]["by"].as_str()
            ),
            (Some("reconciled"), Some("lookup"))
        );
    }
    t.keys("a", &["q"]);
    t.wait("a", "a clean exit", |s| s.contains("SETTLE-EXITED-0"));
}

#[test]
fn look_up_with_l_at_80x24_on_sqlite() {
    look_up_with_l_at_80x24(&common::sqlite());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(not(settle_pg), ignore = "needs SETTLE_TEST_POSTGRES_URL")]
async fn look_up_with_l_at_80x24_on_postgres() {
    let db = common::postgres().await;
    tokio::task::spawn_blocking(move || look_up_with_l_at_80x24(&db))
        .await
        .unwrap();
}

/// The manual's Runs at 80x24: a stalled run stands in view 1 (KEY the run, DEST the missing step);
/// `Enter` opens it with its steps; claim, note and close of the run, each audited under the
/// operator's name; another's claimed run refuses the close; an operation's detail pane shows
/// its run's steps.
fn a_stalled_run_at_80x24(db: &TestDb) {
    assert!(
        have_tmux(),
        "tmux is needed for the end-to-end console tests"
    );
    let url = db.url.as_str();
    let t = Tmux::new("runs");
    let config = t.dir.path().join("settle.toml");
    std::fs::write(
        &config,
        "[workflows.onboarding]\nsteps = [\"create-customer\", \"create-task\", \"welcome-sms\"]\nstep_gap = \"1s\"\n",
    )
    .unwrap();
    let cfg = config.to_str().unwrap();
    let step = |run: &str, outcome: &str| {
        let key = format!("{run}:create-customer");
        settle(
            url,
            &[
                "--config",
                cfg,
                "record",
                "--key",
                &key,
                "--workflow",
                "onboarding",
                "--step",
                "create-customer",
                "--destination",
                "crm",
                "--action",
                "create",
                "--payload",
                "{\"name\":\"Ada\"}",
                "--run",
                run,
            ],
        );
        let mut args = vec![
            "--config",
            cfg,
            "attempt",
            "--key",
            &key,
            "--outcome",
            outcome,
        ];
        let reference = format!("CUST-{run}");
        if outcome == "accepted" {
            args.extend(["--reference", reference.as_str()]);
        } else {
            args.extend(["--error", "read timeout"]);
        }
        settle(url, &args);
    };
    step("st-1", "accepted");
    step("st-2", "accepted");
    step("bl-1", "unknown");
    std::thread::sleep(std::time::Duration::from_millis(1500));
    let (code, _) = settle_code(url, "bob", &["--config", cfg, "run", "claim", "st-2"]);
    assert_eq!(code, 0);
    let (code, out) = settle_code(
        url,
        "seed",
        &["--config", cfg, "runs", "--where", "state:stalled"],
    );
    assert_eq!(code, 0);
    assert!(out.contains("st-1") && out.contains("st-2"), "{out}");
    t.shell(
        "a",
        (80, 24),
        &format!(
            "env SETTLE_OPERATOR=alice SETTLE_LOG_FILE=/dev/null XDG_CONFIG_HOME={} {BIN} --db '{url}' --config {cfg}; echo SETTLE-EXITED-$?; sleep 60",
            t.dir.path().display()
        ),
    );
    // the oldest stall first, above the operations, and selected
    t.wait("a", "the stalled runs in view 1", |s| {
        let rows: Vec<&str> = s.lines().skip(3).take(3).collect();
        rows.len() == 3
            && rows[0].contains("stalled")
            && rows[0].contains("st-1")
            && rows[0].contains("create-t")
            && rows[1].contains("st-2")
            && rows[2].contains("bl-1:create-cus")
            && s.contains("3 exceptions")
    });
    t.keys("a", &["Enter"]);
    t.wait("a", "the run opened with its steps", |s| {
        s.contains(" run st-1 ")
            && s.contains("✓ create-customer  CUST-st-1")
            && s.contains("○ create-task      not recorded")
            && s.contains("stopped after create-customer")
    });
    t.keys("a", &["Escape", "c"]);
    t.wait("a", "the run claimed", |s| {
        s.contains("run st-1: claimed") && s.contains("claim    alice")
    });
    t.keys("a", &["n"]);
    t.literal("a", "called the customer");
    t.keys("a", &["Enter", "y"]);
    t.wait("a", "the note", |s| s.contains("run st-1: note added"));
    t.keys("a", &["x"]);
    t.wait("a", "the close form", |s| s.contains("Close run st-1"));
    t.keys("a", &["3"]);
    t.literal("a", "customer withdrew");
    t.keys("a", &["Enter", "y"]);
    t.wait("a", "the run closed and gone from view 1", |s| {
        s.contains("run st-1: closed") && !s.contains("st-1 ") && s.contains("2 exceptions")
    });
    // bob holds st-2: the close is refused, and says why
    t.wait("a", "st-2 selected", |s| s.contains(" run st-2 "));
    t.keys("a", &["x", "3"]);
    t.literal("a", "not mine");
    t.keys("a", &["Enter", "y"]);
    t.wait("a", "the refusal", |s| {
        s.contains("run st-2 is claimed by bob")
    });
    // an operation of a run shows its run's steps
    t.keys("a", &["j"]);
    t.wait("a", "the operation's run steps", |s| {
        s.contains(" bl-1:create-customer ")
            && s.contains("run      bl-1")
            && s.contains("✗ create-customer  unknown")
            && s.contains("○ welcome-sms      not recorded")
    });
    t.keys("a", &["q"]);
    t.wait("a", "a clean exit", |s| s.contains("SETTLE-EXITED-0"));
    let shown = settle(url, &["--config", cfg, "run", "show", "st-1", "--json"]);
    let v: serde_json::Value = serde_json::from_str(&shown).unwrap();
    assert_eq!(v["state"], "closed");
    let audit: Vec<(String, String)> = v["history"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            (
                e["actor"].as_str().unwrap().to_string(),
                e["kind"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    assert_eq!(
        audit,
        [
            ("alice".to_string(), "run_claimed".to_string()),
            ("alice".into(), "run_noted".into()),
            ("alice".into(), "run_closed".into()),
        ]
    );
    assert_eq!(v["history"][2]["detail"]["note"], "customer withdrew");
    let st2 = json_run(url, cfg, "st-2");
    assert_eq!(
        (st2["state"].as_str(), st2["claimed_by"].as_str()),
        (Some("stalled"), Some("bob"))
    );
}

fn json_run(db: &str, cfg: &str, run: &str) -> serde_json::Value {
    serde_json::from_str(&settle(
        db,
        &["--config", cfg, "run", "show", run, "--json"],
    ))
    .unwrap()
}

#[test]
fn a_stalled_run_at_80x24_on_sqlite() {
    a_stalled_run_at_80x24(&common::sqlite());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(not(settle_pg), ignore = "needs SETTLE_TEST_POSTGRES_URL")]
async fn a_stalled_run_at_80x24_on_postgres() {
    let db = common::postgres().await;
    tokio::task::spawn_blocking(move || a_stalled_run_at_80x24(&db))
        .await
        .unwrap();
}

/// Groups at 80x24 (manual: Owners and notifications): `t` shows view 1's exceptions by group,
/// the largest first; `j` and `Enter` list one group's items; `A` marks them all and `x` closes
/// them in one go; nothing of the other groups is touched.
fn groups_at_80x24(db: &TestDb) {
    assert!(
        have_tmux(),
        "tmux is needed for the end-to-end console tests"
    );
    let url = db.url.as_str();
    let dir = tempfile::tempdir().unwrap();
    let mut lines = String::new();
    let mut op = |key: String, dest: &str, outcome: &str, error: String| {
        lines.push_str(&format!(
            "{{\"type\":\"intent\",\"key\":\"{key}\",\"workflow\":\"alerts\",\"step\":\"send\",\"destination\":\"{dest}\",\"action\":\"send\",\"payload\":{{\"n\":1}}}}\n\
             {{\"type\":\"attempt\",\"key\":\"{key}\",\"attempt\":1,\"outcome\":\"{outcome}\",\"error\":\"{error}\"}}\n"
        ));
    };
    for i in 0..40 {
        op(
            format!("sms-{i}"),
            "sms",
            "unknown",
            format!("read timeout after {}s", 30 + i % 5),
        );
    }
    for i in 0..15 {
        op(
            format!("mail-{i}"),
            "email",
            "rejected",
            format!("422 invalid address #{i}"),
        );
    }
    for i in 0..5 {
        op(
            format!("crm-{i}"),
            "crm",
            "unknown",
            "connection reset".into(),
        );
    }
    let file = dir.path().join("incident.jsonl");
    std::fs::write(&file, lines).unwrap();
    settle(url, &["ingest", file.to_str().unwrap()]);

    let t = Tmux::new("groups");
    t.open_sized("a", url, "alice", (80, 24));
    t.wait("a", "the first data frame", |s| s.contains("sms-"));
    t.keys("a", &["t"]);
    t.wait("a", "the groups, the largest first", |s| {
        let first = s.lines().position(|l| l.contains("alerts → sms"));
        let second = s.lines().position(|l| l.contains("alerts → email"));
        s.contains("COUNT") && first.is_some() && second > first && s.contains("group 1 of 3")
    });
    let screen = t.screen("a");
    assert!(screen.contains("read timeout after Ns"), "{screen}");
    t.keys("a", &["j", "Enter"]);
    t.wait("a", "the group's items", |s| {
        s.contains("15 of ") && s.contains("mail-") && !s.contains("sms-")
    });
    t.keys("a", &["A"]);
    t.wait("a", "the group marked", |s| s.contains("15 marked"));
    t.keys("a", &["x", "3"]);
    t.literal("a", "bad addresses, fixed at the source");
    t.keys("a", &["Enter"]);
    t.wait("a", "the preview", |s| {
        s.contains("close 15: 15 will be done")
    });
    t.keys("a", &["y"]);
    t.wait("a", "the summary", |s| {
        s.contains("close: 15 done (batch b-")
    });
    t.keys("a", &["q"]);
    t.wait("a", "a clean exit", |s| s.contains("SETTLE-EXITED-0"));
    for i in 0..15 {
        assert_eq!(json(url, &format!("mail-{i}"))["state"], "closed");
    }
    assert_eq!(json(url, "sms-0")["state"], "unknown");
    assert_eq!(json(url, "crm-0")["state"], "unknown");
}

#[test]
fn groups_at_80x24_on_sqlite() {
    groups_at_80x24(&common::sqlite());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(not(settle_pg), ignore = "needs SETTLE_TEST_POSTGRES_URL")]
async fn groups_at_80x24_on_postgres() {
    let db = common::postgres().await;
    tokio::task::spawn_blocking(move || groups_at_80x24(&db))
        .await
        .unwrap();
}

/// A team lead's first day at 80x24: with rejected items marked the footer offers only what one
/// of them would take (no look up, no release of a claim nobody holds); leaving a group's items
/// clears what the status line said of them; the marks' help says which keys act on all; view
/// 2 tells the items you hold from your team's that nobody holds, and its tab counts its rows.
fn a_leads_first_day_at_80x24(db: &TestDb) {
    assert!(
        have_tmux(),
        "tmux is needed for the end-to-end console tests"
    );
    let url = db.url.as_str();
    let t = Tmux::new("firstday");
    // the console's config: alice's team owns the workflow
    let cfg = t.dir.path().join("settle");
    std::fs::create_dir_all(&cfg).unwrap();
    std::fs::write(
        cfg.join("settle.toml"),
        "[teams.ops]\nmembers = [\"alice\"]\n[workflows.billing]\nowner = \"ops\"\n",
    )
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let mut lines = String::new();
    for i in 0..8 {
        lines.push_str(&format!(
            "{{\"type\":\"intent\",\"key\":\"rej-{i}\",\"workflow\":\"billing\",\"step\":\"send\",\"destination\":\"mail\",\"action\":\"send\",\"payload\":{{\"n\":{i}}}}}\n\
             {{\"type\":\"attempt\",\"key\":\"rej-{i}\",\"attempt\":1,\"outcome\":\"rejected\",\"error\":\"HTTP 422: bad address\"}}\n"
        ));
    }
    for i in 0..2 {
        lines.push_str(&format!(
            "{{\"type\":\"intent\",\"key\":\"unk-{i}\",\"workflow\":\"billing\",\"step\":\"send\",\"destination\":\"mail\",\"action\":\"send\",\"payload\":{{\"n\":{i}}}}}\n\
             {{\"type\":\"attempt\",\"key\":\"unk-{i}\",\"attempt\":1,\"outcome\":\"unknown\",\"error\":\"read timeout\"}}\n"
        ));
    }
    let file = dir.path().join("day.jsonl");
    std::fs::write(&file, lines).unwrap();
    settle(url, &["ingest", file.to_str().unwrap()]);
    t.open_sized("a", url, "alice", (80, 24));
    t.wait("a", "the first data frame", |s| s.contains("rej-"));
    t.keys("a", &["t"]);
    t.wait("a", "the groups", |s| s.contains("group 1 of 2"));
    t.keys("a", &["Enter"]);
    t.wait("a", "the group's items", |s| {
        s.contains("8 of ") && !s.contains("unk-")
    });
    t.keys("a", &["A"]);
    t.wait("a", "the group marked", |s| s.contains("8 marked"));
    let footer = t.screen("a");
    let last = footer.lines().last().unwrap_or_default().to_string();
    assert!(
        !last.contains("L look up") && !last.contains("u release"),
        "{footer}"
    );
    assert!(
        last.contains("R retry") && last.contains("x close"),
        "{footer}"
    );
    t.keys("a", &["A"]);
    t.wait("a", "unmarked", |s| s.contains("8 unmarked"));
    t.keys("a", &["Escape"]);
    t.wait("a", "the whole list again", |s| s.contains("unk-"));
    assert!(
        !t.screen("a").contains("A marks them all"),
        "{}",
        t.screen("a")
    );
    t.keys("a", &["?"]);
    t.wait("a", "the help", |s| s.contains("act on all, e r C on one"));
    t.keys("a", &["Escape"]);
    // alice holds one; view 2 shows it as hers beside her team's unheld
    t.keys("a", &["c"]);
    t.wait("a", "the confirmation", |s| s.contains("confirms"));
    t.keys("a", &["y"]);
    t.wait("a", "claimed", |s| s.contains(": claimed"));
    t.keys("a", &["2"]);
    t.wait("a", "view 2", |s| {
        s.contains("CLAIM") && s.contains(" you ")
    });
    let screen = t.screen("a");
    // the list's rows begin with an age
    let rows = screen
        .lines()
        .filter(|l| l.starts_with(|c: char| c.is_ascii_digit()))
        .count();
    assert!(screen.contains(&format!("2 Mine {rows}]")), "{screen}");
    assert!(
        screen
            .lines()
            .any(|l| (l.contains("rej-") || l.contains("unk-")) && l.contains(" - ")),
        "{screen}"
    );
    t.keys("a", &["q"]);
    t.wait("a", "a clean exit", |s| s.contains("SETTLE-EXITED-0"));
}

#[test]
fn a_leads_first_day_at_80x24_on_sqlite() {
    a_leads_first_day_at_80x24(&common::sqlite());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(not(settle_pg), ignore = "needs SETTLE_TEST_POSTGRES_URL")]
async fn a_leads_first_day_at_80x24_on_postgres() {
    let db = common::postgres().await;
    tokio::task::spawn_blocking(move || a_leads_first_day_at_80x24(&db))
        .await
        .unwrap();
}

/// `U` at 80x24 (manual: Taking an action back): `c` `y` then `U` leaves the item unclaimed;
/// a bulk claim from `A`, one of whose items bob takes over meanwhile, taken back with a
/// one-screen preview of what will and will not be taken back.
fn a_slip_taken_back(db: &TestDb) {
    assert!(
        have_tmux(),
        "tmux is needed for the end-to-end console tests"
    );
    let url = db.url.as_str();
    seed(url);
    let t = Tmux::new("undo");
    t.open_sized("a", url, "alice", (80, 24));
    t.wait("a", "the first data frame", |s| s.contains("e2e-"));
    let first = || {
        ["e2e-1", "e2e-2", "e2e-3", "other-4"]
            .into_iter()
            .find(|k| json(url, k)["claimed_by"] == "alice")
    };
    t.keys("a", &["c"]);
    t.wait("a", "the claim's confirmation", |s| s.contains("Claim"));
    t.keys("a", &["y"]);
    t.wait("a", "the offer to take it back", |s| {
        s.contains("U takes it back (15m left)")
    });
    let claimed = first().expect("one item claimed by alice");
    t.keys("a", &["U"]);
    t.wait("a", "the claim taken back", |s| {
        s.contains("1 of 1 taken back")
    });
    assert!(
        json(url, claimed)["claimed_by"].is_null(),
        "{claimed} unclaimed"
    );
    // every item, claimed at once; bob takes one over meanwhile
    t.keys("a", &["A"]);
    t.wait("a", "every item marked", |s| s.contains("4 marked"));
    t.keys("a", &["c"]);
    t.wait("a", "the bulk claim's preview", |s| {
        s.contains("will be done")
    });
    t.keys("a", &["y"]);
    t.wait("a", "the bulk claim", |s| s.contains("claim: 4 done"));
    let (code, _) = settle_code(
        url,
        "bob",
        &[
            "claim",
            "e2e-2",
            "--force",
            "--reason",
            "on the phone with them",
        ],
    );
    assert_eq!(code, 0);
    t.keys("a", &["U"]);
    t.wait("a", "the preview of the undo", |s| {
        s.contains("3 will be taken back") && s.contains("1 will be left as it is")
    });
    let screen = t.screen("a");
    assert!(
        screen.contains("e2e-2 changed since: claim_taken by bob"),
        "{screen}"
    );
    assert!(screen.contains("y/Enter takes it back"), "{screen}");
    t.keys("a", &["y"]);
    t.wait("a", "the bulk claim taken back", |s| {
        s.contains("3 of 4 taken back")
    });
    t.keys("a", &["q"]);
    t.wait("a", "a clean exit", |s| s.contains("SETTLE-EXITED-0"));
    for key in ["e2e-1", "e2e-3", "other-4"] {
        assert!(json(url, key)["claimed_by"].is_null(), "{key}");
    }
    assert_eq!(json(url, "e2e-2")["claimed_by"], "bob");
}

#[test]
fn a_slip_taken_back_on_sqlite() {
    a_slip_taken_back(&common::sqlite());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(not(settle_pg), ignore = "needs SETTLE_TEST_POSTGRES_URL")]
async fn a_slip_taken_back_on_postgres() {
    let db = common::postgres().await;
    tokio::task::spawn_blocking(move || a_slip_taken_back(&db))
        .await
        .unwrap();
}
