//! The real binary: exit codes, one-line errors, redaction of every output, concurrent claims.

mod common;

use std::path::Path;
use std::process::{Command, Stdio};

use common::{Run, TestDb};

const BIN: &str = env!("CARGO_BIN_EXE_settle");

fn settle(db: &str, dir: &Path, args: &[&str]) -> Run {
    common::settle_as(db, dir, "alice", args)
}

fn ok(r: &Run) {
    assert_eq!(r.code, 0, "stdout: {}\nstderr: {}", r.stdout, r.stderr);
}

/// Plain SQL on the test database, as an older settle or a person with the credentials would run
/// it (the tests' back door): each statement must succeed.
fn raw_sql(url: &str, statements: &[&str]) {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(async {
            let mut c = common::Raw::connect(url).await;
            for sql in statements {
                c.execute(sql).await.unwrap();
            }
        });
}

/// A bad-input case: the manual's exit code, one line on stderr, no panic.
fn one_line(r: &Run, code: i32, what: &str) {
    assert_eq!(r.code, code, "{what}: stderr {:?}", r.stderr);
    assert_eq!(
        r.stderr.trim_end().lines().count(),
        1,
        "{what}: one line, got {:?}",
        r.stderr
    );
    assert!(
        !r.stderr.contains("panicked") && !r.stderr.contains("backtrace"),
        "{what}: {:?}",
        r.stderr
    );
}

/// What the database holds, as the CLI shows it, without the readings of the clock (ages, and the
/// safe next step that quotes them): every operation with its attempts and history, and the
/// totals. Two snapshots differ only when something was written.
fn snapshot(db: &str, dir: &Path) -> serde_json::Value {
    let r = settle(db, dir, &["list", "--all", "--json"]);
    ok(&r);
    let list: serde_json::Value = serde_json::from_str(&r.stdout).unwrap();
    let mut ops: Vec<serde_json::Value> = Vec::new();
    for op in list.as_array().unwrap() {
        let key = op["key"].as_str().unwrap();
        let s = settle(db, dir, &["show", key, "--json"]);
        ok(&s);
        ops.push(serde_json::from_str(&s.stdout).unwrap());
    }
    let s = settle(db, dir, &["stats", "--json"]);
    ok(&s);
    let mut v = serde_json::json!({
        "operations": ops,
        "stats": serde_json::from_str::<serde_json::Value>(&s.stdout).unwrap(),
    });
    without_clock(&mut v);
    v
}

fn without_clock(v: &mut serde_json::Value) {
    match v {
        serde_json::Value::Object(m) => {
            for clocked in ["age_seconds", "oldest_exception_seconds", "next_step"] {
                m.remove(clocked);
            }
            m.values_mut().for_each(without_clock);
        }
        serde_json::Value::Array(a) => a.iter_mut().for_each(without_clock),
        _ => {}
    }
}

#[test]
fn the_bad_input_matrix() {
    let db = common::sqlite();
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let url = db.url.as_str();
    ok(&settle(
        url,
        d,
        &[
            "record",
            "--key",
            "m-1",
            "--workflow",
            "w",
            "--destination",
            "crm",
            "--action",
            "a",
            "--payload",
            "{}",
        ],
    ));
    // m-1 was rejected; bob holds it
    ok(&settle(
        url,
        d,
        &[
            "attempt",
            "--key",
            "m-1",
            "--outcome",
            "rejected",
            "--error",
            "422",
        ],
    ));
    ok(&settle(url, d, &["--as", "bob", "claim", "m-1"]));
    let before = snapshot(url, d);
    assert_eq!(before["operations"][0]["claimed_by"], "bob");
    let rec = |key: &str, payload: &str| {
        settle(
            url,
            d,
            &[
                "record",
                "--key",
                key,
                "--workflow",
                "w",
                "--destination",
                "crm",
                "--action",
                "a",
                "--payload",
                payload,
            ],
        )
    };
    one_line(&rec("m-2", "{not json"), 2, "malformed JSON");
    one_line(&rec("bad key!", "{}"), 2, "bad key");
    let card = rec("pay-4111111111111111", "{}");
    one_line(&card, 2, "key holding a card number");
    assert!(!card.stderr.contains("4111"), "{}", card.stderr);
    one_line(
        &settle(url, d, &["list", "--where", "dest:crm colour:red"]),
        2,
        "filter term 'colour:red': unknown qualifier",
    );
    one_line(
        &settle(url, d, &["list", "--where", "age>soon"]),
        2,
        "filter term 'age>soon'",
    );
    one_line(
        &settle(url, d, &["list", "--state", "done"]),
        2,
        "unknown state",
    );
    one_line(
        &settle(url, d, &["list", "--older-than", "soon"]),
        2,
        "bad duration",
    );
    one_line(
        &settle(url, d, &["attempt", "--key", "m-1", "--outcome", "maybe"]),
        2,
        "unknown outcome",
    );
    one_line(&settle(url, d, &["frobnicate"]), 2, "unknown command");
    one_line(&settle(url, d, &["show", "nope"]), 3, "unknown key");
    // a rejected operation may be retried or closed, but not by alice while bob holds it
    let r = settle(url, d, &["retry", "m-1"]);
    one_line(&r, 3, "refused: claimed by another");
    assert!(r.stderr.contains("m-1 is claimed by bob"), "{}", r.stderr);
    let r = settle(
        url,
        d,
        &[
            "close",
            "m-1",
            "--resolution",
            "done_elsewhere",
            "--reference",
            "REF-1",
            "--note",
            "x",
        ],
    );
    one_line(&r, 3, "refused: claimed by another");
    assert!(r.stderr.contains("m-1 is claimed by bob"), "{}", r.stderr);
    // bob holds it, but done_elsewhere names where it was done
    let r = settle(
        url,
        d,
        &[
            "--as",
            "bob",
            "close",
            "m-1",
            "--resolution",
            "done_elsewhere",
            "--note",
            "x",
        ],
    );
    one_line(&r, 3, "refused: done_elsewhere without a reference");
    assert!(r.stderr.contains("needs --reference"), "{}", r.stderr);
    one_line(
        &settle(url, d, &["list", "--older-than", "106751991d"]),
        2,
        "a duration too large to take from the clock",
    );
    let r = settle(url, d, &["claim", "m-1", "--force"]);
    one_line(&r, 2, "--force without --reason");
    assert!(
        r.stderr.contains("--reason"),
        "names what is missing: {}",
        r.stderr
    );
    one_line(
        &settle(url, d, &["--as", "", "note", "m-1", "x"]),
        2,
        "an empty operator",
    );
    one_line(
        &settle(url, d, &["--as", "settle", "note", "m-1", "x"]),
        2,
        "settle's own name",
    );
    let missing = dir.path().join("missing.jsonl");
    one_line(
        &settle(url, d, &["ingest", missing.to_str().unwrap()]),
        2,
        "missing ingest file",
    );
    assert_eq!(
        snapshot(url, d),
        before,
        "nothing was written by any bad input"
    );

    // a malformed config key: the message names file, line and key
    let cfg = dir.path().join("bad.toml");
    std::fs::write(
        &cfg,
        "lease = \"30m\"\n\n[destinations.crm]\ndedupes = true\nretention = \"1d\"\n",
    )
    .unwrap();
    let r = settle(url, d, &["--config", cfg.to_str().unwrap(), "stats"]);
    one_line(&r, 2, "malformed config");
    assert!(
        r.stderr.contains("bad.toml:5:") && r.stderr.contains("`retention`"),
        "{}",
        r.stderr
    );

    // unreachable PostgreSQL, an unopenable file, a file that is not a database
    let r = settle(
        "postgres://settle:hunter2@127.0.0.1:1/settle",
        d,
        &["stats"],
    );
    one_line(&r, 4, "unreachable PostgreSQL");
    assert!(
        !r.stderr.contains("hunter2") && r.stderr.contains("***"),
        "{}",
        r.stderr
    );
    one_line(
        &settle("sqlite:///nonexistent-dir/x/settle.db", d, &["stats"]),
        4,
        "missing directory",
    );
    let junk = dir.path().join("junk.db");
    std::fs::write(&junk, vec![b'x'; 4096]).unwrap();
    let r = settle(&format!("sqlite://{}", junk.display()), d, &["stats"]);
    one_line(&r, 4, "not a database");
    assert!(
        r.stderr.contains("not a SQLite database"),
        "says what is wrong: {}",
        r.stderr
    );
    let r = settle(&format!("sqlite://{}", dir.path().display()), d, &["stats"]);
    one_line(&r, 4, "a directory");
    assert!(r.stderr.contains("directory"), "{}", r.stderr);
    one_line(&settle("mysql://h/db", d, &["stats"]), 2, "unsupported URL");
}

#[test]
fn a_database_from_a_newer_settle_is_refused() {
    let db = common::sqlite();
    let dir = tempfile::tempdir().unwrap();
    ok(&settle(&db.url, dir.path(), &["init"]));
    // a newer settle would have recorded its schema version: forge one
    raw_sql(&db.url, &["INSERT INTO settle_schema VALUES (99, 0)"]);
    let r = settle(&db.url, dir.path(), &["list"]);
    one_line(&r, 4, "newer schema");
    assert!(r.stderr.contains("newer than this settle"), "{}", r.stderr);
}

const SECRETS: [&str; 6] = [
    "ada@example.com",
    "4111111111111111",
    "abc.def-123",
    "+44 7700 900123",
    "Zebulon Quixote",
    "sk_live_c0ffee",
];

#[test]
fn no_output_holds_a_sensitive_value_and_escapes_are_shown_escaped() {
    let db = common::sqlite();
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let cfg = d.join("settle.toml");
    std::fs::write(
        &cfg,
        "[[redaction.rules]]\ndestination = \"crm\"\nfields = [\"customer.name\"]\n",
    )
    .unwrap();
    let c = cfg.to_str().unwrap();
    let url = db.url.as_str();
    let payload = r#"{"customer":{"name":"Zebulon Quixote","contact":"ada@example.com","phone":"+44 7700 900123"},
        "memo":"card 4111111111111111","headers":{"auth":"Bearer abc.def-123"},"api_key":"sk_live_c0ffee",
        "title":"\u001b]0;owned\u0007\u001b[2J"}"#;
    ok(&settle(
        url,
        d,
        &[
            "--config",
            c,
            "record",
            "--key",
            "red-1",
            "--workflow",
            "crm-sync",
            "--destination",
            "crm",
            "--action",
            "upsert",
            "--payload",
            payload,
        ],
    ));
    let error = "502: Zebulon Quixote ada@example.com +44 7700 900123 Authorization: Bearer abc.def-123 4111111111111111 api_key=sk_live_c0ffee \u{1b}[31m";
    ok(&settle(
        url,
        d,
        &[
            "--config",
            c,
            "attempt",
            "--key",
            "red-1",
            "--outcome",
            "unknown",
            "--error",
            error,
        ],
    ));
    let mut outputs = Vec::new();
    for args in [
        vec!["list"],
        vec!["list", "--json"],
        vec!["show", "red-1"],
        vec!["show", "red-1", "--json"],
        vec!["stats"],
        vec!["stats", "--json"],
    ] {
        let mut full = vec!["--config", c];
        full.extend(args.iter());
        let r = settle(url, d, &full);
        ok(&r);
        outputs.push((args.join(" "), r.stdout + &r.stderr));
    }
    // error messages that carry user input
    let r = settle(url, d, &["--config", c, "note", "red-1", ""]);
    outputs.push(("empty note".into(), r.stdout + &r.stderr));
    let r = settle(
        url,
        d,
        &[
            "--config",
            c,
            "attempt",
            "--key",
            "red-1",
            "--outcome",
            "ada@example.com",
        ],
    );
    outputs.push(("bad outcome".into(), r.stdout + &r.stderr));
    let r = settle(
        url,
        d,
        &[
            "--config",
            c,
            "record",
            "--key",
            "red-1",
            "--workflow",
            "w",
            "--destination",
            "crm",
            "--action",
            "a",
            "--payload",
            "{\"x\": \"ada@example.com\" oops}",
        ],
    );
    outputs.push(("bad payload".into(), r.stdout + &r.stderr));
    let r = settle(
        url,
        d,
        &[
            "--config",
            c,
            "note",
            "red-1",
            "called ada@example.com at +44 7700 900123",
        ],
    );
    ok(&r);
    let r = settle(url, d, &["--config", c, "show", "red-1"]);
    outputs.push(("show after note".into(), r.stdout + &r.stderr));
    // the log holds a line for each command above, and a refusal
    let log = std::fs::read_to_string(d.join("settle.log")).expect("the commands wrote a log");
    for command in ["record", "attempt", "list", "show", "stats", "note"] {
        assert!(
            log.contains(&format!("start command={command} operator=alice")),
            "the log names the {command} run:\n{log}"
        );
    }
    assert!(
        log.lines()
            .any(|l| l.contains("command failed") && l.contains("a note needs some text")),
        "the log holds the empty note's refusal:\n{log}"
    );
    outputs.push(("log file".into(), log));
    for (what, text) in &outputs {
        for s in SECRETS {
            assert!(!text.contains(s), "{s} leaked in {what}: {text}");
        }
        assert!(
            !text.contains('\u{1b}') && !text.contains('\u{7}'),
            "raw escape in {what}: {text:?}"
        );
    }
    let show = &outputs[2].1;
    // in JSON (the payload) as \u001b, in plain text (the error) as \x1b: never raw
    assert!(
        show.contains("\\u001b]0;owned\\u0007\\u001b[2J"),
        "escapes shown escaped: {show}"
    );
    assert!(show.contains("\\x1b[31m"), "escapes shown escaped: {show}");
    assert!(show.contains("[redacted]"));
}

fn fifty_claims(db: &TestDb) {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    ok(&settle(
        &db.url,
        d,
        &[
            "record",
            "--key",
            "race-1",
            "--workflow",
            "w",
            "--destination",
            "crm",
            "--action",
            "a",
            "--payload",
            "{}",
        ],
    ));
    ok(&settle(
        &db.url,
        d,
        &["attempt", "--key", "race-1", "--outcome", "unknown"],
    ));
    let children: Vec<_> = (0..50)
        .map(|i| {
            Command::new(BIN)
                .args([
                    "--db",
                    &db.url,
                    "--as",
                    &format!("op{i}"),
                    "claim",
                    "race-1",
                ])
                .env("SETTLE_LOG_FILE", d.join("settle.log"))
                .stdout(Stdio::null())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    let mut codes = Vec::new();
    for c in children {
        let out = c.wait_with_output().unwrap();
        let code = out.status.code().unwrap_or(-1);
        if code == 3 {
            let err = String::from_utf8_lossy(&out.stderr);
            assert!(err.contains("is claimed by op"), "{err}");
        }
        codes.push(code);
    }
    assert_eq!(codes.iter().filter(|c| **c == 0).count(), 1, "{codes:?}");
    assert_eq!(codes.iter().filter(|c| **c == 3).count(), 49, "{codes:?}");
}

#[test]
fn fifty_processes_claim_one_operation_on_sqlite() {
    fifty_claims(&common::sqlite());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(not(settle_pg), ignore = "needs SETTLE_TEST_POSTGRES_URL")]
async fn fifty_processes_claim_one_operation_on_postgres() {
    let db = common::postgres().await;
    tokio::task::spawn_blocking(move || fifty_claims(&db))
        .await
        .unwrap();
}

#[test]
fn ingest_reports_lines_and_is_idempotent_through_the_binary() {
    let db = common::sqlite();
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let file = d.join("events.jsonl");
    std::fs::write(
        &file,
        concat!(
            r#"{"type":"intent","key":"onb-42-task","workflow":"onboarding","step":"create-task","destination":"projects","action":"create_task","payload":{"title":"Kickoff call"}}"#, "\n",
            r#"{"type":"attempt","key":"onb-42-task","attempt":1,"outcome":"unknown","error":"read timeout after 30s","http_status":null,"reference":null}"#, "\n",
            "{\"type\":\"intent\"\n",
        ),
    )
    .unwrap();
    let f = file.to_str().unwrap();
    let r = settle(&db.url, d, &["ingest", f]);
    assert_eq!(r.code, 2, "a malformed line makes the exit non-zero");
    assert!(r.stderr.starts_with("line 3: "), "{}", r.stderr);
    assert!(
        r.stdout.contains("1 recorded") && r.stdout.contains("1 attempt(s)"),
        "{}",
        r.stdout
    );
    let before = snapshot(&db.url, d);
    let r = settle(&db.url, d, &["ingest", f]);
    assert!(
        r.stdout.contains("0 recorded") && r.stdout.contains("2 unchanged"),
        "{}",
        r.stdout
    );
    assert_eq!(snapshot(&db.url, d), before);
    let show = settle(&db.url, d, &["show", "onb-42-task", "--json"]);
    let v: serde_json::Value = serde_json::from_str(&show.stdout).unwrap();
    assert_eq!(v["state"], "unknown");
    assert_eq!(v["attempt_log"][0]["error"], "read timeout after 30s");
    for field in [
        "key",
        "state",
        "workflow",
        "step",
        "destination",
        "action",
        "created_at",
        "age_seconds",
        "attempts",
        "claimed_by",
        "reference",
        "next_step",
        "payload",
        "fingerprint",
        "attempt_log",
        "history",
    ] {
        assert!(v.get(field).is_some(), "show --json has {field}");
    }
    let h = &v["history"][0];
    for field in ["at", "actor", "kind", "from_state", "to_state", "detail"] {
        assert!(h.get(field).is_some(), "history has {field}");
    }
}

/// The manual's Many at once through the binary: `--where` chooses the set, `--dry-run --json` previews it and
/// changes nothing, a bulk action without a terminal needs `--yes`, and with it each eligible
/// item is acted on while one held by another is left alone (exit 3, said in the summary).
#[test]
fn bulk_actions_through_the_cli() {
    let db = common::sqlite();
    let dir = tempfile::tempdir().unwrap();
    let (d, url) = (dir.path(), db.url.as_str());
    for k in ["n-1", "n-2", "n-3", "other-1"] {
        let dest = if k.starts_with('n') { "crm" } else { "sms" };
        ok(&settle(
            url,
            d,
            &[
                "record",
                "--key",
                k,
                "--workflow",
                "w",
                "--destination",
                dest,
                "--action",
                "a",
                "--payload",
                "{}",
            ],
        ));
        ok(&settle(
            url,
            d,
            &[
                "attempt",
                "--key",
                k,
                "--outcome",
                "rejected",
                "--error",
                "422",
            ],
        ));
    }
    ok(&settle(url, d, &["--as", "bob", "claim", "n-3"]));
    let before = snapshot(url, d);
    let r = settle(
        url,
        d,
        &["retry", "--where", "dest:crm", "--dry-run", "--json"],
    );
    ok(&r);
    let p: serde_json::Value = serde_json::from_str(&r.stdout).unwrap();
    assert_eq!(p["matched"], 3);
    assert_eq!(p["eligible"], serde_json::json!(["n-1", "n-2"]));
    assert_eq!(
        p["refused"]["claimed by another"],
        serde_json::json!(["n-3"])
    );
    let r = settle(
        url,
        d,
        &["retry", "--where", "dest:crm", "--rate", "fast", "--yes"],
    );
    one_line(&r, 2, "a bad rate");
    assert!(r.stderr.contains("--rate 'fast'"), "{}", r.stderr);
    let r = settle(url, d, &["retry", "--where", "dest:crm"]);
    one_line(&r, 2, "no terminal, no --yes");
    assert!(r.stderr.contains("needs --yes"), "{}", r.stderr);
    assert_eq!(
        snapshot(url, d),
        before,
        "the preview and the refusal changed nothing"
    );
    let r = settle(
        url,
        d,
        &["retry", "--where", "dest:crm", "--rate", "10/s", "--yes"],
    );
    assert_eq!(r.code, 3, "{}{}", r.stdout, r.stderr);
    assert!(
        r.stdout
            .contains("retry 3: 2 to do; left alone: 1 claimed by another"),
        "{}",
        r.stdout
    );
    assert!(r.stdout.contains("retry: 2 done (batch b-"), "{}", r.stdout);
    // with no dispatcher to send a canary, none is waited for, and the answer says so
    assert!(
        r.stdout
            .contains("no canary: no dispatcher is running to send one first"),
        "{}",
        r.stdout
    );
    let after = snapshot(url, d);
    let states: Vec<(String, String)> = after["operations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| {
            (
                o["key"].as_str().unwrap().into(),
                o["state"].as_str().unwrap().into(),
            )
        })
        .collect();
    assert!(
        states.contains(&("n-1".into(), "pending".into())),
        "{states:?}"
    );
    assert!(
        states.contains(&("n-3".into(), "rejected".into())),
        "{states:?}"
    );
    assert!(
        states.contains(&("other-1".into(), "rejected".into())),
        "{states:?}"
    );
    // several keys name the set too
    let r = settle(
        url,
        d,
        &[
            "close",
            "n-1",
            "n-2",
            "--resolution",
            "abandoned",
            "--note",
            "outage",
            "--yes",
        ],
    );
    ok(&r);
    assert!(r.stdout.contains("close: 2 done"), "{}", r.stdout);
}

/// A claim term reaches past the exception queue: a claim holds automation off a `pending` or
/// `retry_wait` item too, so `release --where claimed:me` at the end of a shift must find it (the
/// chaos run the chaos run left such a claim behind, and with it an operation nobody retried).
#[test]
fn a_claim_filter_finds_claims_on_items_that_are_not_exceptions() {
    let db = common::sqlite();
    let dir = tempfile::tempdir().unwrap();
    let (d, url) = (dir.path(), db.url.as_str());
    for k in ["waiting-1", "waiting-2"] {
        ok(&settle(
            url,
            d,
            &[
                "record",
                "--key",
                k,
                "--workflow",
                "w",
                "--destination",
                "crm",
                "--action",
                "a",
                "--payload",
                "{}",
            ],
        ));
    }
    ok(&settle(url, d, &["--as", "bob", "claim", "waiting-1"]));
    let keys = |args: &[&str]| -> Vec<String> {
        let r = settle(url, d, args);
        ok(&r);
        let v: serde_json::Value = serde_json::from_str(&r.stdout).unwrap();
        v.as_array()
            .unwrap()
            .iter()
            .map(|o| o["key"].as_str().unwrap().to_string())
            .collect()
    };
    assert_eq!(
        keys(&["list", "--json", "--where", "claimed:bob"]),
        ["waiting-1"]
    );
    assert_eq!(
        keys(&["--as", "bob", "list", "--json", "--where", "claimed:me"]),
        ["waiting-1"]
    );
    // "nobody's" is not a reason to list every unclaimed operation: still the exception queue
    assert!(keys(&["list", "--json", "--where", "claimed:none"]).is_empty());
    let r = settle(
        url,
        d,
        &["--as", "bob", "release", "--where", "claimed:me", "--yes"],
    );
    ok(&r);
    assert!(r.stdout.contains("release: 1 done"), "{}", r.stdout);
    assert!(keys(&["list", "--json", "--where", "claimed:any"]).is_empty());
}

/// `list --csv` (manual: Many at once): a header, a row per operation, quoted where needed, and no cell a
/// spreadsheet would run as a formula.
#[test]
fn list_as_csv() {
    let db = common::sqlite();
    let dir = tempfile::tempdir().unwrap();
    let (d, url) = (dir.path(), db.url.as_str());
    ok(&settle(
        url,
        d,
        &[
            "record",
            "--key",
            "csv-1",
            "--workflow",
            "w",
            "--destination",
            "crm",
            "--action",
            "a",
            "--payload",
            "{}",
        ],
    ));
    ok(&settle(
        url,
        d,
        &[
            "attempt",
            "--key",
            "csv-1",
            "--outcome",
            "accepted",
            "--reference",
            "=HYPERLINK(\"x\",\"y\")",
        ],
    ));
    let r = settle(url, d, &["list", "--all", "--csv"]);
    ok(&r);
    let lines: Vec<&str> = r.stdout.lines().collect();
    assert_eq!(
        lines[0],
        "key,state,workflow,step,destination,action,created_at,age_seconds,attempts,claimed_by,reference,next_step"
    );
    assert_eq!(lines.len(), 2, "{}", r.stdout);
    assert!(
        lines[1].starts_with("csv-1,succeeded,w,,crm,a,"),
        "{}",
        lines[1]
    );
    assert!(
        lines[1].contains(r#","'=HYPERLINK(""x"",""y"")","#),
        "{}",
        lines[1]
    );
}

/// `reconcile --from FILE` (manual: Many at once): the destination's records as CSV or JSON lines; the preview
/// says per line what will happen; unknown keys and items in the wrong state are reported, not
/// applied; a malformed line is named and left out (exit 2), the rest applied.
#[test]
fn reconcile_from_the_destinations_records() {
    let db = common::sqlite();
    let dir = tempfile::tempdir().unwrap();
    let (d, url) = (dir.path(), db.url.as_str());
    let record = |k: &str, outcome: &str| {
        ok(&settle(
            url,
            d,
            &[
                "record",
                "--key",
                k,
                "--workflow",
                "w",
                "--destination",
                "crm",
                "--action",
                "a",
                "--payload",
                "{}",
            ],
        ));
        ok(&settle(
            url,
            d,
            &["attempt", "--key", k, "--outcome", outcome],
        ));
    };
    for i in 0..10 {
        record(&format!("u-{i}"), "unknown");
    }
    record("s-1", "accepted");
    let mut csv = String::from("key,outcome,reference\n");
    for i in 0..8 {
        csv.push_str(&format!("u-{i},found,T-{i}\n"));
    }
    csv.push_str("u-8,absent,\nnope,found,T-99\ns-1,found,T-1\nu-9,maybe,\n");
    let file = d.join("export.csv");
    std::fs::write(&file, &csv).unwrap();
    let f = file.to_str().unwrap();
    let before = snapshot(url, d);
    let r = settle(url, d, &["reconcile", "--from", f, "--dry-run"]);
    assert_eq!(r.code, 2, "a malformed line: {}{}", r.stdout, r.stderr);
    assert!(
        r.stderr
            .contains("line 13: outcome 'maybe': use found or absent"),
        "{}",
        r.stderr
    );
    for expected in [
        "line 2: u-0: found T-0: will be reconciled",
        "line 10: u-8: absent: will be reconciled",
        "line 11: nope: found T-99: left alone: no such operation",
        "line 12: s-1: found T-1: left alone: already terminal",
        "reconcile 11: 9 to do; left alone: 1 already terminal, 1 no such operation",
    ] {
        assert!(
            r.stdout.contains(expected),
            "{expected:?} in:\n{}",
            r.stdout
        );
    }
    assert_eq!(snapshot(url, d), before, "--dry-run changed nothing");
    let r = settle(url, d, &["reconcile", "--from", f, "--yes"]);
    assert_eq!(r.code, 2, "{}{}", r.stdout, r.stderr);
    assert!(r.stdout.contains("reconcile: 9 done"), "{}", r.stdout);
    let after = snapshot(url, d);
    let state = |k: &str| {
        after["operations"]
            .as_array()
            .unwrap()
            .iter()
            .find(|o| o["key"] == k)
            .map(|o| o["state"].as_str().unwrap().to_string())
            .unwrap()
    };
    assert_eq!(state("u-0"), "succeeded");
    assert_eq!(state("u-8"), "failed");
    assert_eq!(
        state("u-9"),
        "unknown",
        "the malformed line was not applied"
    );
    // JSON lines too
    record("j-1", "unknown");
    let file = d.join("export.jsonl");
    std::fs::write(
        &file,
        "{\"key\":\"j-1\",\"outcome\":\"found\",\"reference\":\"T-7\"}\n",
    )
    .unwrap();
    let r = settle(
        url,
        d,
        &["reconcile", "--from", file.to_str().unwrap(), "--yes"],
    );
    ok(&r);
    assert!(r.stdout.contains("reconcile: 1 done"), "{}", r.stdout);
}

/// `settle report` (manual: The review after a release): the JSON document's fields, the text a person pastes, and a bad
/// window refused in one line.
#[test]
fn the_report_says_what_the_review_holds() {
    let db = common::sqlite();
    let dir = tempfile::tempdir().unwrap();
    let (url, d) = (db.url.as_str(), dir.path());
    for (key, wf) in [("rp-1", "onboarding"), ("rp-2", "crm-sync")] {
        ok(&settle(
            url,
            d,
            &[
                "record",
                "--key",
                key,
                "--workflow",
                wf,
                "--destination",
                "sms",
                "--action",
                "a",
                "--payload",
                "{}",
            ],
        ));
        ok(&settle(
            url,
            d,
            &[
                "attempt",
                "--key",
                key,
                "--outcome",
                "unknown",
                "--error",
                "timeout",
            ],
        ));
    }
    let r = settle(url, d, &["report", "--json", "--since", "30d"]);
    ok(&r);
    let v: serde_json::Value = serde_json::from_str(&r.stdout).unwrap();
    assert_eq!(v["window_seconds"], 30 * 86_400);
    assert_eq!(v["open_exceptions"], 2);
    assert_eq!(
        v["age_buckets"][0],
        serde_json::json!({"bucket": "<1h", "count": 2})
    );
    assert_eq!(v["per_day"].as_array().unwrap().len(), 30);
    assert_eq!(v["per_day"][29]["opened"], 2);
    assert_eq!(v["by_workflow"]["onboarding"]["unknown"], 1);
    assert_eq!(v["by_destination"]["sms"]["open"], 2);
    assert_eq!(
        v["duplicates"],
        serde_json::json!({"cleaned_up": 0, "conflicts": 0, "prevented": 0})
    );
    let r = settle(url, d, &["report", "--workflow", "crm-sync"]);
    ok(&r);
    assert!(
        r.stdout
            .contains("settle report: workflow crm-sync, the last 7 days"),
        "{}",
        r.stdout
    );
    assert!(r.stdout.contains("open exceptions 1"), "{}", r.stdout);
    assert!(!r.stdout.contains("onboarding"), "{}", r.stdout);
    for bad in ["0s", "soon", "4000d"] {
        one_line(&settle(url, d, &["report", "--since", bad]), 2, bad);
    }
}

/// the command line is its own reference. `settle completions bash` is
/// a script bash accepts; `settle man` renders; `list --limit N` stops at N rows; a global option
/// given to a command it means nothing to is one clear line.
#[test]
fn completions_man_page_and_list_limit() {
    let db = common::sqlite();
    let dir = tempfile::tempdir().unwrap();
    let (d, url) = (dir.path(), db.url.as_str());
    // what needs no database is run without one
    let plain = |args: &[&str]| {
        let out = Command::new(BIN).args(args).output().unwrap();
        Run {
            code: out.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&out.stdout).into(),
            stderr: String::from_utf8_lossy(&out.stderr).into(),
        }
    };
    let bash = plain(&["completions", "bash"]);
    ok(&bash);
    let script = d.join("settle.bash");
    std::fs::write(&script, &bash.stdout).unwrap();
    let checked = Command::new("bash")
        .arg("-n")
        .arg(&script)
        .output()
        .unwrap();
    assert!(
        checked.status.success(),
        "bash -n: {}",
        String::from_utf8_lossy(&checked.stderr)
    );
    assert!(bash.stdout.contains("lookup") && bash.stdout.contains("--where"));
    for shell in ["zsh", "fish"] {
        let r = plain(&["completions", shell]);
        ok(&r);
        assert!(r.stdout.contains("settle"), "{shell}");
    }
    let man = plain(&["man"]);
    ok(&man);
    assert!(man.stdout.starts_with(".ie") && man.stdout.contains(".SH SYNOPSIS"));
    let pages = d.join("man");
    std::fs::create_dir(&pages).unwrap();
    ok(&plain(&["man", "--dir", pages.to_str().unwrap()]));
    let record = std::fs::read_to_string(pages.join("settle-record.1")).unwrap();
    assert!(record.contains("idempotency"), "{record}");
    // list --limit
    for i in 0..5 {
        let key = format!("lim-{i}");
        ok(&settle(
            url,
            d,
            &[
                "record",
                "--key",
                &key,
                "--workflow",
                "w",
                "--destination",
                "crm",
                "--action",
                "a",
                "--payload",
                "{}",
            ],
        ));
    }
    let r = settle(url, d, &["list", "--all", "--json", "--limit", "3"]);
    ok(&r);
    let rows: serde_json::Value = serde_json::from_str(&r.stdout).unwrap();
    assert_eq!(rows.as_array().unwrap().len(), 3, "{}", r.stdout);
    let r = settle(url, d, &["list", "--all", "--limit", "2"]);
    assert_eq!(
        r.stdout.lines().count(),
        3,
        "a header and two rows: {}",
        r.stdout
    );
    // a global option where it means nothing
    let r = plain(&["sim", "--as", "bob"]);
    one_line(&r, 2, "sim --as");
    assert!(
        r.stderr.contains("unexpected argument '--as'"),
        "{}",
        r.stderr
    );
    // a command of the ledger takes every global option after it, as before it (the one a
    // person acting through an alias types last)
    ok(&settle(url, d, &["stats", "--as", "bob"]));
    ok(&settle(url, d, &["--as", "bob", "stats"]));
}

/// Names of an operation use the keys' alphabet: one outside it is refused in one line that says
/// the rule, whatever face records it. Rows an older settle recorded with such names, and an
/// operator whose name is two columns a character wide, still leave `settle list`'s columns in
/// line: every row's key starts where the header's KEY does, counted in terminal columns.
#[test]
fn names_outside_the_alphabet_are_refused_and_the_table_keeps_its_columns() {
    use unicode_width::UnicodeWidthStr;
    let db = common::sqlite();
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let record = |key: &str, flag: &str, value: &str| {
        let mut args = vec![
            "record",
            "--key",
            key,
            "--workflow",
            "onboarding",
            "--destination",
            "crm",
            "--action",
            "a",
            "--payload",
            "{}",
        ];
        match args.iter().position(|a| *a == flag) {
            Some(i) => args[i + 1] = value,
            None => args.extend([flag, value]),
        }
        settle(&db.url, d, &args)
    };
    for (flag, value) in [
        ("--workflow", "ü?\""),
        ("--destination", "数据同步"),
        ("--action", "create task"),
        ("--step", "a/b"),
    ] {
        let r = record("odd-1", flag, value);
        one_line(&r, 2, flag);
        assert!(
            r.stderr
                .contains("is not allowed (names use A-Z a-z 0-9 . _ : -)"),
            "{flag}: {}",
            r.stderr
        );
    }
    // rows as an older settle kept them, one claimed by a person named in two-column characters
    for key in ["wide-1", "wide-2", "plain-3"] {
        ok(&record(key, "--workflow", "onboarding"));
        ok(&settle(
            &db.url,
            d,
            &["attempt", "--key", key, "--outcome", "rejected"],
        ));
    }
    raw_sql(
        &db.url,
        &[
            "UPDATE operations SET workflow = '数据同步', destination = 'ü?\"' WHERE key = 'wide-1'",
            "UPDATE operations SET step = '日本語テキスト処理' WHERE key = 'wide-2'",
        ],
    );
    ok(&common::settle_as(&db.url, d, "李雷", &["claim", "wide-2"]));
    let r = settle(&db.url, d, &["list"]);
    ok(&r);
    let lines: Vec<&str> = r.stdout.lines().collect();
    let column = |line: &str, text: &str| line.find(text).map(|i| line[..i].width());
    let key_at = column(lines[0], "KEY").unwrap();
    let claim_at = column(lines[0], "CLAIM").unwrap();
    for key in ["wide-1", "wide-2", "plain-3"] {
        let line = lines.iter().find(|l| l.contains(key)).unwrap();
        assert_eq!(column(line, key), Some(key_at), "{key}:\n{}", r.stdout);
    }
    let claimed = lines.iter().find(|l| l.contains("wide-2")).unwrap();
    assert_eq!(column(claimed, "李雷"), Some(claim_at), "\n{}", r.stdout);
    assert!(r.stdout.contains("数据同步"), "{}", r.stdout);
}

/// `settle stats` says why each pause holds: who paused it, when, and their note, as text and
/// as JSON (a stopping threshold's numbers: the conformance suite).
#[test]
fn stats_say_why_each_pause_holds() {
    let db = common::sqlite();
    let dir = tempfile::tempdir().unwrap();
    let (url, d) = (db.url.as_str(), dir.path());
    ok(&settle(
        url,
        d,
        &["pause", "onboarding", "--reason", "vendor outage, ticket 7"],
    ));
    ok(&settle(
        url,
        d,
        &["pause", "--destination", "crm", "--reason", "their 401s"],
    ));
    let text = settle(url, d, &["stats"]);
    ok(&text);
    for line in [
        "paused      onboarding",
        "paused dest crm",
        "  workflow onboarding: vendor outage, ticket 7 (by alice, 20",
        "  destination crm: their 401s (by alice, 20",
    ] {
        assert!(
            text.stdout.contains(line),
            "{line:?} not in:\n{}",
            text.stdout
        );
    }
    let json = settle(url, d, &["stats", "--json"]);
    ok(&json);
    let stats: serde_json::Value = serde_json::from_str(&json.stdout).unwrap();
    let pauses = stats["pauses"].as_array().expect("pauses");
    assert_eq!(pauses.len(), 2, "{stats}");
    assert_eq!(pauses[0]["what"], "workflow");
    assert_eq!(pauses[0]["name"], "onboarding");
    assert_eq!(pauses[0]["reason"], "vendor outage, ticket 7");
    assert_eq!(pauses[0]["by"], "alice");
    assert!(pauses[0]["at"].as_str().is_some(), "{stats}");
    assert_eq!(
        (&pauses[1]["what"], &pauses[1]["name"], &pauses[1]["by"]),
        (&"destination".into(), &"crm".into(), &"alice".into())
    );
}

/// A base64 password holds `/` (and `+`, `=`): it is never printed, in the error nor in the log,
/// while the user, host and database a person needs stay readable. The replica's URL the same.
#[test]
fn a_password_with_a_slash_is_never_printed() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let url = "postgres://settle:Zk9QmW2xT/Vb7+R4pLq=@127.0.0.1:1/settle";
    let r = settle(url, d, &["stats"]);
    one_line(&r, 4, "unreachable PostgreSQL");
    assert!(
        r.stderr
            .contains("postgres://settle:***@127.0.0.1:1/settle"),
        "{}",
        r.stderr
    );
    let log = std::fs::read_to_string(d.join("settle.log")).unwrap_or_default();
    for said in [&r.stderr, &r.stdout, &log] {
        assert!(
            !said.contains("Zk9QmW2xT") && !said.contains("Vb7"),
            "{said}"
        );
    }
    // a URL without a password: the user and host are shown, not taken for an address
    let r = settle("postgres://settle@127.0.0.1:1/settle", d, &["stats"]);
    assert!(
        r.stderr.contains("postgres://settle@127.0.0.1:1/settle"),
        "{}",
        r.stderr
    );
}

/// `--read-db` whose password holds `/`: the replica cannot be read, the primary is, and the log
/// line saying so hides the password.
#[tokio::test]
#[cfg_attr(not(settle_pg), ignore = "needs SETTLE_TEST_POSTGRES_URL")]
async fn a_replicas_password_with_a_slash_is_never_logged() {
    let db = common::postgres().await;
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    ok(&settle(&db.url, d, &["init"]));
    let replica = "postgres://reader:Q8r/Wz+5kT0=@127.0.0.1:1/settle";
    let r = settle(&db.url, d, &["--read-db", replica, "list"]);
    ok(&r);
    let log = std::fs::read_to_string(d.join("settle.log")).unwrap();
    assert!(log.contains("reader:***@127.0.0.1:1/settle"), "{log}");
    for said in [&r.stderr, &r.stdout, &log] {
        assert!(!said.contains("Q8r") && !said.contains("Wz+5"), "{said}");
    }
}

/// Every global option is taken after any command that opens the ledger, as before it
/// (`settle groups --where owner:mine --as carol` once said `--as` was unexpected).
#[test]
fn every_global_option_is_taken_after_every_command() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let db = format!("sqlite://{}", d.join("g.db").display());
    ok(&settle(&db, d, &["init"]));
    for args in [
        &["groups", "--where", "owner:mine", "--as", "carol"][..],
        &["notifications", "--as", "carol"],
        &["stats", "--as", "carol"],
        &["report", "--as", "carol"],
        &["sweep", "--as", "carol"],
        &["runs", "--as", "carol"],
    ] {
        let r = settle(&db, d, args);
        assert!(
            !r.stderr.contains("unexpected argument"),
            "{args:?}: {}",
            r.stderr
        );
        ok(&r);
    }
    let help = settle(&db, d, &["groups", "--help"]);
    assert!(
        help.stdout.contains("mine: the teams of"),
        "{}",
        help.stdout
    );
}

/// Messages that say what to do: a correction with nothing to change says so; a refusal for
/// another's claim names the command that takes it over; an answer's status is said once; a
/// channel key that does nothing for its kind is said when the channel is used.
#[test]
fn messages_say_what_to_do() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let db = format!("sqlite://{}", d.join("m.db").display());
    let rec = |key: &str| {
        ok(&settle(
            &db,
            d,
            &[
                "record",
                "--key",
                key,
                "--workflow",
                "w",
                "--destination",
                "crm",
                "--action",
                "create",
                "--payload",
                "{\"n\":1}",
            ],
        ))
    };
    rec("m-1");
    ok(&settle(
        &db,
        d,
        &[
            "attempt",
            "--key",
            "m-1",
            "--outcome",
            "rejected",
            "--http-status",
            "422",
            "--error",
            "HTTP 422: name is missing",
        ],
    ));
    let r = settle(&db, d, &["correct", "m-1", "--note", "x"]);
    one_line(&r, 2, "nothing to change");
    assert!(r.stderr.contains("nothing to change"), "{}", r.stderr);
    let shown = settle(&db, d, &["show", "m-1"]);
    ok(&shown);
    assert!(
        shown.stdout.contains("HTTP 422: name is missing"),
        "{}",
        shown.stdout
    );
    assert!(
        !shown.stdout.contains("HTTP 422: HTTP 422"),
        "{}",
        shown.stdout
    );
    // bob holds it: alice's retry is refused, naming the command that takes it over
    ok(&common::settle_as(&db, d, "bob", &["claim", "m-1"]));
    let r = settle(&db, d, &["retry", "m-1"]);
    one_line(&r, 3, "claimed by another");
    assert!(
        r.stderr.contains("settle claim m-1 --force --reason"),
        "{}",
        r.stderr
    );
    // a slack channel's secret does nothing: said when the channel is used
    let cfg = d.join("c.toml");
    std::fs::write(
        &cfg,
        "[channels.chat]\nkind = \"slack\"\nurl_env = \"SETTLE_T_NONE\"\nsecret_env = \"SETTLE_T_S\"\n",
    )
    .unwrap();
    let r = settle(
        &db,
        d,
        &["--config", cfg.to_str().unwrap(), "notify", "test", "chat"],
    );
    assert!(
        r.stderr
            .contains("channels.chat.secret_env does nothing for a slack channel"),
        "{}",
        r.stderr
    );
}

/// A read of a SQLite ledger that does not exist says so and makes nothing; `init` makes one.
#[test]
fn a_read_makes_no_ledger() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let file = d.join("nothing-here.db");
    let db = format!("sqlite://{}", file.display());
    for args in [
        &["stats"][..],
        &["list"],
        &["groups"],
        &["report"],
        &["show", "k-1"],
    ] {
        let r = settle(&db, d, args);
        one_line(&r, 4, "a missing ledger");
        assert!(
            r.stderr.contains("no ledger at") && r.stderr.contains("settle init"),
            "{}",
            r.stderr
        );
        assert!(!file.exists(), "{args:?} made {}", file.display());
    }
    ok(&settle(&db, d, &["init"]));
    assert!(file.exists());
    ok(&settle(&db, d, &["stats"]));
}
