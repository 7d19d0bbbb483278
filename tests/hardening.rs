//! What a hostile destination, file or person can do to settle: nothing they send can
//! stop, crash or leak it. The real binary, the real simulator, both databases.

mod common;

use std::io::Write as _;
use std::process::Stdio;
use std::time::Duration;

use common::{Drill, Sim, TestDb, drill_on};
use serde_json::Value;

/// The values that must never leave settle: a password and a configured field the payload holds
/// (the destination echoes them back), a conflicting payload's token and email.
const SECRETS: [&str; 5] = [
    "hunter2-very-secret",
    "ada@example.com",
    "Zebulon Quixote",
    "sk_live_conflict_42",
    "new@example.com",
];

const REDACT_NAME: &str =
    "[[redaction.rules]]\ndestination = \"tasks\"\nfields = [\"customer.name\"]\n";

/// Runs a blocking drill on the test's database.
async fn blocking(db: &TestDb, f: fn(&str)) {
    let url = db.url.clone();
    tokio::task::spawn_blocking(move || f(&url)).await.unwrap();
}

/// `dispatch --until-settled`, which must end by itself (it is killed and the test fails if not).
fn dispatch_until_settled(d: &Drill, concurrency: usize) -> String {
    let mut child = d
        .cmd(&[
            "dispatch",
            "--until-settled",
            "--concurrency",
            &concurrency.to_string(),
        ])
        .env("RUST_BACKTRACE", "1")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    loop {
        if child.try_wait().unwrap().is_some() {
            break;
        }
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            let out = child.wait_with_output().unwrap();
            panic!(
                "the dispatcher did not end by itself: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "dispatch: {stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Every string cell of these tables, read straight from the database.
async fn stored_texts(url: &str, sql: &str) -> Vec<String> {
    common::Raw::connect(url).await.texts(sql).await
}

fn stored(url: &str, sql: &str) -> Vec<String> {
    let (url, sql) = (url.to_string(), sql.to_string());
    std::thread::spawn(move || {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
            .block_on(stored_texts(&url, &sql))
    })
    .join()
    .unwrap()
}

/// The log file holds one event per line, each starting with its time, and no control byte but
/// the line ends: nothing written into it forged a line or carries an escape sequence.
fn log_is_one_event_per_line(d: &Drill) -> String {
    let bytes = std::fs::read(d.config.with_extension("log")).expect("the run wrote a log");
    assert!(
        bytes
            .iter()
            .all(|b| *b == b'\n' || (*b >= 0x20 && *b != 0x7f)),
        "a raw control byte in the log: {:?}",
        String::from_utf8_lossy(&bytes)
    );
    let text = String::from_utf8(bytes).expect("the log is UTF-8");
    for line in text.lines() {
        let stamp = line.split(' ').next().unwrap_or("");
        assert!(
            stamp.len() >= 20 && stamp.starts_with("20") && stamp.as_bytes()[10] == b'T',
            "a log line that is not an event of its own: {line:?}"
        );
        // the forgeries below all start with this stamp: settle never writes it
        assert!(
            !line.starts_with("2026-01-01T00:00:00Z"),
            "a forged line: {line}"
        );
        assert!(
            !line.contains('\u{202e}') && !line.contains('\u{2028}'),
            "{line:?}"
        );
    }
    text
}

// 1. A destination's answer holding NUL bytes, and one echoing the payload's secrets.

fn answers_with_nul_and_echoed_secrets(url: &str) {
    let sim = Sim::start(&["--no-dedupe"]);
    let d = drill_on(url, &sim, false, false, REDACT_NAME);
    d.record_as(
        "nul-1",
        "onboarding",
        r#"{"_sim_fault":"reject-nul","title":"a"}"#,
    );
    d.record_as(
        "echo-1",
        "onboarding",
        r#"{"_sim_fault":"echo","customer":{"email":"ada@example.com","name":"Zebulon Quixote"},"password":"hunter2-very-secret","title":"b"}"#,
    );
    for i in 0..4 {
        d.record_as(
            &format!("ok-{i}"),
            "onboarding",
            &format!(r#"{{"title":"c{i}"}}"#),
        );
    }
    dispatch_until_settled(&d, 4);
    let show = |k: &str| d.show(k);
    let nul = show("nul-1");
    assert_eq!(nul["state"], "rejected", "{nul}");
    assert_eq!(show("echo-1")["state"], "rejected");
    for i in 0..4 {
        assert_eq!(show(&format!("ok-{i}"))["state"], "succeeded");
    }
    assert_eq!(sim.tasks().0, 4);
    // the NUL is kept escaped, the same on both backends
    let errors = stored(url, "SELECT error FROM attempts ORDER BY operation_id, n");
    assert!(
        errors.iter().any(|e| e.contains("bad\\x00request")),
        "{errors:?}"
    );
    assert!(errors.iter().all(|e| !e.contains('\0')));
    // the echoed secrets: nowhere
    let mut places = vec![
        ("stored answers", errors.join("\n")),
        (
            "stored events",
            stored(url, "SELECT detail FROM events").join("\n"),
        ),
        ("log file", log_is_one_event_per_line(&d)),
    ];
    for args in [
        vec!["show", "echo-1"],
        vec!["show", "echo-1", "--json"],
        vec!["list", "--all", "--json"],
        vec!["list", "--all"],
    ] {
        let (code, out, err) = d.output(&args);
        assert_eq!(code, 0, "{args:?}: {err}");
        places.push(("output", out + &err));
    }
    for (place, text) in &places {
        for s in SECRETS {
            assert!(!text.contains(s), "{s} in the {place}: {text}");
        }
    }
    assert!(
        places[4].1.contains("invalid request"),
        "the echo is there, scrubbed: {}",
        places[4].1
    );
}

async fn dispatching_answers_with_nul_and_secrets(db: &TestDb) {
    blocking(db, answers_with_nul_and_echoed_secrets).await;
}

// 2. Ingest: a NUL in an error, a NUL in a payload string, invalid UTF-8, a duplicate key.

fn a_bad_line_costs_only_itself(url: &str) {
    let sim = Sim::start(&[]);
    let d = drill_on(url, &sim, true, false, "");
    let file = d.config.with_extension("jsonl");
    let mut f = std::fs::File::create(&file).unwrap();
    for i in 1..=3000 {
        let line: Vec<u8> = match i {
            1000 => br#"{"type":"attempt","key":"ing-1","attempt":1,"outcome":"rejected","error":"bad\u0000request"}"#.to_vec(),
            1500 => br#"{"type":"intent","key":"ing-1500","workflow":"w","destination":"tasks","action":"a","payload":{"t":"a\u0000b"}}"#.to_vec(),
            2000 => b"{\"type\":\"intent\",\"key\":\"ing-2000\",\"workflow\":\"w\xff\xfe\",\"destination\":\"tasks\",\"action\":\"a\",\"payload\":{}}".to_vec(),
            2500 => br#"{"type":"intent","key":"ing-2500","workflow":"w","destination":"tasks","action":"a","payload":{"a":1,"a":2}}"#.to_vec(),
            _ => format!(
                r#"{{"type":"intent","key":"ing-{i}","workflow":"w","destination":"tasks","action":"a","payload":{{"n":{i}}}}}"#
            )
            .into_bytes(),
        };
        f.write_all(&line).unwrap();
        f.write_all(b"\n").unwrap();
    }
    drop(f);
    for round in 0..2 {
        let (code, out, err) = d.output(&["ingest", file.to_str().unwrap()]);
        assert_eq!(code, 2, "a malformed line makes the exit 2: {err}");
        let lines: Vec<&str> = err.lines().collect();
        assert_eq!(lines.len(), 4, "{err}");
        assert!(
            lines[0].starts_with("line 1000: ") && lines[0].contains("NUL"),
            "{err}"
        );
        assert!(
            lines[1].starts_with("line 1500: ") && lines[1].contains("NUL"),
            "{err}"
        );
        assert!(lines[2].starts_with("line 2000: invalid UTF-8"), "{err}");
        assert!(
            lines[3].starts_with("line 2500: ") && lines[3].contains("twice"),
            "{err}"
        );
        let recorded = if round == 0 { 2996 } else { 0 };
        assert!(
            out.contains(&format!("3000 line(s): {recorded} recorded"))
                && out.contains("4 malformed"),
            "{out}"
        );
    }
    let stats: Value = serde_json::from_str(&d.run(&["stats", "--json"])).unwrap();
    assert_eq!(stats["by_state"]["pending"], 2996, "{stats}");
    assert_eq!(d.show("ing-3000")["state"], "pending");
    assert_eq!(d.show("ing-1")["attempt_log"].as_array().unwrap().len(), 0);
}

async fn ingesting_bad_lines(db: &TestDb) {
    blocking(db, a_bad_line_costs_only_itself).await;
}

// 3. Every duration, from the command line or the config, at and past its limit.

#[test]
fn every_duration_is_checked_against_its_range() {
    let db = common::sqlite();
    let sim = Sim::start(&[]);
    let d = drill_on(&db.url, &sim, true, false, "");
    d.record("dur-1");
    // (arguments, accepted): at the limit a value is taken, past it refused with exit 2
    let cases: Vec<(Vec<&str>, bool)> = vec![
        (vec!["list", "--older-than", "36500d"], true),
        (vec!["list", "--older-than", "36501d"], false),
        (vec!["list", "--older-than", "106751991d"], false),
        (
            vec!["list", "--older-than", "99999999999999999999999999d"],
            false,
        ),
        (
            vec![
                "attempt",
                "--key",
                "dur-1",
                "--outcome",
                "transient",
                "--retry-after",
                "366d",
            ],
            false,
        ),
        (
            vec![
                "attempt",
                "--key",
                "dur-1",
                "--outcome",
                "transient",
                "--retry-after",
                "365d",
            ],
            true,
        ),
        (
            vec!["sim", "--listen", "127.0.0.1:0", "--late", "61m"],
            false,
        ),
        (
            vec!["sim", "--listen", "127.0.0.1:0", "--latency", "2h"],
            false,
        ),
        (
            vec!["sim", "--listen", "127.0.0.1:0", "--key-retention", "3651d"],
            false,
        ),
    ];
    for (args, accepted) in cases {
        let (code, _, err) = d.output(&args);
        if accepted {
            assert_eq!(code, 0, "{args:?}: {err}");
        } else {
            assert_eq!(code, 2, "{args:?}: {err}");
            assert_eq!(err.trim_end().lines().count(), 1, "{args:?}: {err}");
            assert!(
                err.contains("bad duration") && err.contains("must be from"),
                "{err}"
            );
        }
    }
    // every duration of the config: (table, key, the largest value taken)
    let keys = [
        ("", "lease", "7d"),
        ("", "attempt_timeout", "7d"),
        ("", "warn_after", "365d"),
        ("", "critical_after", "365d"),
        ("[destinations.tasks]\n", "key_retention", "3650d"),
        ("[destinations.tasks]\n", "base", "7d"),
        ("[destinations.tasks]\n", "cap", "7d"),
        ("[destinations.tasks]\n", "timeout", "1h"),
    ];
    // the drill's own config file, rewritten for each case
    let file = d.config.clone();
    for (table, key, max) in keys {
        for (value, accepted) in [
            (max.to_string(), true),
            (format!("{max}1d"), false),
            ("106751991d".into(), false),
        ] {
            std::fs::write(&file, format!("{table}{key} = \"{value}\"\n")).unwrap();
            let (code, _, err) = d.output(&["stats"]);
            if accepted {
                assert_eq!(code, 0, "{key} = {value}: {err}");
            } else {
                let line = if table.is_empty() { 1 } else { 2 };
                assert_eq!(code, 2, "{key} = {value}: {err}");
                assert!(
                    err.contains(&format!("settle.toml:{line}: key `{key}`"))
                        && err.contains("must be from"),
                    "{key} = {value}: {err}"
                );
            }
        }
    }
    std::fs::write(&file, "[workflows.w]\npause_when = { oldest = \"366d\" }\n").unwrap();
    let (code, _, err) = d.output(&["stats"]);
    assert!(
        code == 2 && err.contains("settle.toml:2:") && err.contains("must be from"),
        "{err}"
    );
}

// 4. Redaction of every class, through every output and the log.

fn redaction_of_every_class(url: &str) {
    let sim = Sim::start(&["--no-dedupe"]);
    let d = drill_on(url, &sim, false, false, REDACT_NAME);
    // a conflicting payload: its values are scrubbed like the original's
    d.record_as(
        "red-1",
        "w",
        r#"{"customer":{"name":"Zebulon Quixote"},"title":"t"}"#,
    );
    // an answer that already quotes what the key will hold next
    d.run(&[
        "attempt",
        "--key",
        "red-1",
        "--outcome",
        "unknown",
        "--error",
        "409: token sk_live_conflict_42 exists for Zebulon Quixote",
    ]);
    let (code, _, _) = d.output(&[
        "record",
        "--key",
        "red-1",
        "--workflow",
        "w",
        "--destination",
        "tasks",
        "--action",
        "create_task",
        "--payload",
        r#"{"email":"new@example.com","secret_token":"sk_live_conflict_42","title":"t"}"#,
    ]);
    assert!(code == 0 || code == 3, "a conflict is recorded");
    d.run(&[
        "note",
        "red-1",
        "called about sk_live_conflict_42 and new@example.com",
    ]);
    // card numbers whatever separates their digits, and as JSON numbers
    let cards = [
        "4111.1111.1111.1111",
        "4111_1111_1111_1111",
        "4111:1111:1111:1111",
        "4111/1111/1111/1111",
        "4111  1111  1111  1111",
        "4111-1111-1111-1111",
    ];
    let payload = format!(
        r#"{{"a":"{}","b":"{}","c":"{}","d":"{}","e":"{}","n":4111111111111111}}"#,
        cards[0], cards[1], cards[2], cards[3], cards[4]
    );
    d.record_as("card-1", "w", &payload);
    d.run(&[
        "attempt",
        "--key",
        "card-1",
        "--outcome",
        "rejected",
        "--error",
        &format!("card {} declined; also {}", cards[5], cards[0]),
    ]);
    // names that would carry customer data are refused, without repeating them
    for (flag, value) in [
        ("--workflow", "onb a@b.co"),
        ("--step", "step 4111111111111111"),
        ("--destination", "Bearer abc.def-123"),
        ("--action", "mail zoe@example.org"),
    ] {
        let mut args = vec![
            "record",
            "--key",
            "name-1",
            "--workflow",
            "w",
            "--destination",
            "tasks",
            "--action",
            "a",
            "--payload",
            "{}",
        ];
        let at = args.iter().position(|a| *a == flag);
        match at {
            Some(i) => args[i + 1] = value,
            None => args.extend([flag, value]),
        }
        let (code, _, err) = d.output(&args);
        assert_eq!(code, 2, "{flag} {value}: {err}");
        assert!(err.contains("must not hold customer data"), "{err}");
        assert!(!err.contains(value), "{err}");
    }
    let (code, _, err) = d.output(&["pause", "leak@example.com", "--reason", "x"]);
    assert!(code == 2 && !err.contains("leak@example.com"), "{err}");
    // messages that quote input
    let mut places = Vec::new();
    for args in [
        vec!["list", "--state", "leak@example.com"],
        vec!["list", "--older-than", "leak@example.com"],
        vec![
            "record",
            "--key",
            "x-1",
            "--workflow",
            "w",
            "--destination",
            "tasks",
            "--action",
            "a",
            "--payload",
            r#"{"x": "leak@example.com" oops}"#,
        ],
        vec!["attempt", "--key", "red-1", "--outcome", "leak@example.com"],
    ] {
        let (code, out, err) = d.output(&args);
        assert_eq!(code, 2, "{args:?}: {err}");
        places.push((format!("{args:?}"), out + &err));
    }
    let file = d.config.with_extension("jsonl");
    std::fs::write(&file, "{\"type\":\"leak@example.com\",\"key\":\"k\"}\n").unwrap();
    let (code, out, err) = d.output(&["ingest", file.to_str().unwrap()]);
    assert_eq!(code, 2, "{err}");
    places.push(("ingest".into(), out + &err));
    for args in [
        vec!["list"],
        vec!["list", "--json"],
        vec!["list", "--all", "--json"],
        vec!["show", "red-1"],
        vec!["show", "red-1", "--json"],
        vec!["show", "card-1"],
        vec!["show", "card-1", "--json"],
        vec!["stats"],
        vec!["stats", "--json"],
    ] {
        let (code, out, err) = d.output(&args);
        assert_eq!(code, 0, "{args:?}: {err}");
        places.push((format!("{args:?}"), out + &err));
    }
    // what is written after the conflict is scrubbed of its values before it is stored (the
    // answer recorded before it could not know them; readers scrub it as they show it)
    places.push((
        "stored notes".into(),
        stored(url, "SELECT detail FROM events WHERE kind = 'note'").join("\n"),
    ));
    assert!(
        places
            .last()
            .unwrap()
            .1
            .contains("called about [redacted] and [redacted]"),
        "the note is stored, scrubbed: {}",
        places.last().unwrap().1
    );
    places.push(("log file".into(), log_is_one_event_per_line(&d)));
    // the card numbers in every shape they were written in (not a bare "4111": a log's time
    // stamp may hold those digits)
    for (place, text) in &places {
        for s in SECRETS
            .iter()
            .chain(&["leak@example.com", "4111111111111111"])
            .chain(&cards)
        {
            assert!(!text.contains(s), "{s} in {place}: {text}");
        }
    }
    let shown = &places
        .iter()
        .find(|(p, _)| p.contains("\"card-1\", \"--json\""))
        .unwrap()
        .1;
    assert!(shown.contains(r#""n": "[redacted]""#), "{shown}");
}

// 5. The log: operator names and values with newlines, ESC and BEL stay one line each.

#[test]
fn nothing_forges_a_log_line() {
    let db = common::sqlite();
    let sim = Sim::start(&["--no-dedupe"]);
    let d = drill_on(&db.url, &sim, false, false, "");
    d.record("log-1");
    for args in [
        vec!["--as", "bob\n2026-01-01T00:00:00Z INFO FORGED", "list"],
        vec!["--as", "op\u{1b}]0;T\u{7}", "note", "log-1", "x"],
        vec!["--as", "op\u{202e}x", "list"],
        vec![
            "list",
            "--older-than",
            "\u{1b}]0;T\u{7}\n2026-01-01T00:00:00Z INFO FORGED",
        ],
        vec![
            "list",
            "--state",
            "x\n2026-01-01T00:00:00Z INFO FORGED\u{2028}",
        ],
        vec![
            "note",
            "log-1",
            "line\n2026-01-01T00:00:00Z INFO FORGED \u{1b}[31m",
        ],
    ] {
        let (code, _, err) = d.output(&args);
        assert!(
            !err.contains('\u{1b}') && !err.contains('\u{7}'),
            "{args:?}: raw escape on stderr: {err:?}"
        );
        assert!(code == 0 || code == 2, "{args:?}: {err}");
    }
    // an empty or missing operator: refused for a write, with how to set one
    let (code, _, err) = d.output(&["--as", "", "note", "log-1", "x"]);
    assert_eq!(code, 2, "{err}");
    let out = d
        .cmd(&["note", "log-1", "x"])
        .env_remove("SETTLE_OPERATOR")
        .env_remove("USER")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("--as NAME or set SETTLE_OPERATOR"), "{err}");
    let (code, _, err) = d.output(&["--as", "settle", "note", "log-1", "x"]);
    assert!(code == 2 && err.contains("reserved"), "{err}");
    let log = log_is_one_event_per_line(&d);
    assert!(
        log.contains("\\x1b"),
        "escapes are in the log escaped: {log}"
    );
    // each command ran as one event or two (its start, and its failure): no more lines
    assert!(log.lines().count() <= 2 * 10, "{log}");
}

// 6. --json escapes every character class of the manual's command line.

#[test]
fn json_output_escapes_every_hostile_character() {
    let db = common::sqlite();
    let sim = Sim::start(&[]);
    let d = drill_on(&db.url, &sim, true, false, "");
    let hostile = "\u{1}\u{7f}\u{85}\u{9b}\u{61c}\u{200b}\u{200c}\u{200d}\u{200e}\u{200f}\u{2028}\u{2029}\u{202a}\u{202b}\u{202c}\u{202d}\u{202e}\u{2060}\u{2066}\u{2067}\u{2068}\u{2069}\u{feff}";
    let golden = r"\u0001\u007f\u0085\u009b\u061c\u200b\u200c\u200d\u200e\u200f\u2028\u2029\u202a\u202b\u202c\u202d\u202e\u2060\u2066\u2067\u2068\u2069\ufeff";
    let payload = serde_json::json!({ "title": format!("x{hostile}y") }).to_string();
    d.record_as("json-1", "w", &payload);
    d.run(&[
        "attempt",
        "--key",
        "json-1",
        "--outcome",
        "rejected",
        "--error",
        &format!("e{hostile}f"),
    ]);
    for args in [
        vec!["show", "json-1", "--json"],
        vec!["list", "--json"],
        vec!["list", "--all", "--json"],
    ] {
        let out = d.run(&args);
        assert!(
            out.chars()
                .all(|c| c == '\n' || !(c.is_control() || hostile.contains(c))),
            "{args:?}: a raw hostile character: {out:?}"
        );
        assert!(
            out.contains(&format!("e{golden}f")),
            "{args:?}: the error escaped as {golden}: {out}"
        );
        let v: Value = serde_json::from_str(&out).unwrap();
        let text = v.to_string();
        assert!(
            text.contains('\u{202e}'),
            "the JSON still means the same text"
        );
    }
    let out = d.run(&["show", "json-1", "--json"]);
    assert!(out.contains(&format!("\"title\": \"x{golden}y\"")), "{out}");
    // the text form too
    let out = d.run(&["show", "json-1"]);
    assert!(
        out.contains("\\u{2028}") && out.contains("\\u{feff}") && out.contains("\\x9b"),
        "{out}"
    );
    assert!(!out.contains('\u{2028}') && !out.contains('\u{feff}'));
}

// 7. Numbers are sent exactly as given.

fn numbers_are_sent_as_given(url: &str) {
    let sim = Sim::start(&[]);
    let d = drill_on(url, &sim, true, true, "");
    let payload =
        r#"{"amount":123456789012345678901234567890,"rate":1.00000000000000000001,"zero":-0}"#;
    d.record_as("num-1", "w", payload);
    dispatch_until_settled(&d, 1);
    assert_eq!(d.show("num-1")["state"], "succeeded");
    let received: Value = std::thread::spawn({
        let url = format!("{}/tasks?key=num-1", sim.base);
        move || {
            tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap()
                .block_on(async { reqwest::get(url).await.unwrap().text().await.unwrap() })
        }
    })
    .join()
    .map(|t| serde_json::from_str(&t).unwrap())
    .unwrap();
    assert_eq!(
        received["received"], payload,
        "the body as the destination got it"
    );
    let shown = d.run(&["show", "num-1", "--json"]);
    assert!(shown.contains("123456789012345678901234567890"), "{shown}");
}

// 8. The stopping threshold stops at its limit, and a resume holds.

fn threshold_at(url: &str, concurrency: usize) {
    let reject = Sim::start(&["--no-dedupe", "--fault", "reject"]);
    let accept = Sim::start(&["--no-dedupe"]);
    let guarded = "[workflows.guarded]\npause_when = { unresolved = 3 }\n";
    let d = drill_on(url, &reject, false, false, guarded);
    let keys: Vec<String> = (0..10).map(|i| format!("th-{i}")).collect();
    for k in &keys {
        d.record_as(k, "guarded", r#"{"title":"t"}"#);
    }
    dispatch_until_settled(&d, concurrency);
    let requests = |sim: &Sim| -> u64 {
        sim.stats()["requests"]
            .as_u64()
            .expect("/stats counts requests")
    };
    assert_eq!(
        requests(&reject),
        3,
        "exactly 3 requests at concurrency {concurrency}"
    );
    let paused = || -> bool {
        let s: Value = serde_json::from_str(&d.run(&["stats", "--json"])).unwrap();
        s["paused_workflows"]
            .as_array()
            .unwrap()
            .iter()
            .any(|w| w == "guarded")
    };
    assert!(paused(), "the threshold paused it");
    // the destination recovers; a person resumes; a sweep and a dispatcher's start keep it resumed
    let cfg = std::fs::read_to_string(&d.config)
        .unwrap()
        .replace(&reject.base, &accept.base);
    std::fs::write(&d.config, cfg).unwrap();
    d.run(&["resume", "guarded"]);
    d.run(&["sweep"]);
    assert!(!paused(), "a sweep does not pause it again");
    dispatch_until_settled(&d, concurrency);
    assert!(
        !paused(),
        "a dispatcher does not pause it again without a new exception"
    );
    let (tasks, by_key) = accept.tasks();
    assert_eq!(tasks, 7, "the held operations were sent");
    assert!(by_key.values().all(|n| *n == 1), "once each: {by_key:?}");
    // the next new exception pauses it again
    d.record_as(
        "th-new",
        "guarded",
        r#"{"_sim_fault":"reject","title":"t"}"#,
    );
    dispatch_until_settled(&d, concurrency);
    assert_eq!(d.show("th-new")["state"], "rejected");
    assert!(paused(), "a new exception over the limit pauses it again");
}

fn threshold_drills(url: &str) {
    threshold_at(url, 1);
}

fn threshold_drills_concurrent(url: &str) {
    threshold_at(url, 8);
}

async fn redacting_every_class(db: &TestDb) {
    blocking(db, redaction_of_every_class).await;
}

async fn sending_numbers_as_given(db: &TestDb) {
    blocking(db, numbers_are_sent_as_given).await;
}

async fn stopping_threshold_at_concurrency_1(db: &TestDb) {
    // a fresh database per concurrency: each run starts from no exception
    blocking(db, threshold_drills).await;
}

async fn stopping_threshold_at_concurrency_8(db: &TestDb) {
    blocking(db, threshold_drills_concurrent).await;
}

/// (manual: Configuration, Redaction): a payload over `max_payload` (300 KiB against 256 KiB)
/// is refused by `record`, by `ingest` (its line, the others kept) and by the library, each with
/// its size and the limit, and nothing of it is stored; a 100 MB line is read past, never held.
/// A payload whose keys are themselves redacted (emails as keys) shows every field.
fn payloads_over_the_limit_and_redacted_keys(url: &str) {
    let sim = Sim::start(&[]);
    let d = drill_on(url, &sim, true, false, "");
    let big = format!("{{\"blob\":\"{}\"}}", "x".repeat(300 * 1024));
    // too large for an argument (Linux takes at most 128 KiB): from a file
    let big_file = d.config.with_extension("big.json");
    std::fs::write(&big_file, &big).unwrap();
    let from_file = format!("@{}", big_file.display());
    let (code, out, err) = d.output(&[
        "record",
        "--key",
        "big-1",
        "--workflow",
        "w",
        "--destination",
        "tasks",
        "--action",
        "a",
        "--payload",
        &from_file,
    ]);
    assert_eq!(code, 2, "{out}{err}");
    assert!(
        err.contains("the payload is 300.0 KiB; the limit is 256.0 KiB (max_payload)"),
        "{err}"
    );
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    // ingest: the big line refused with its size, the small ones on either side kept; a line of
    // 100 MB is read past
    let line = |key: &str, payload: &str| {
        format!(
            "{{\"type\":\"intent\",\"key\":\"{key}\",\"workflow\":\"w\",\"destination\":\"tasks\",\"action\":\"a\",\"payload\":{payload}}}\n"
        )
    };
    let huge = format!("{{\"blob\":\"{}\"}}", "y".repeat(100 * 1024 * 1024));
    let text = [
        line("small-1", "{}"),
        line("big-2", &big),
        line("huge-3", &huge),
        line("small-4", "{}"),
    ]
    .concat();
    let file = d.config.with_extension("jsonl");
    std::fs::write(&file, text).unwrap();
    let (code, _, err) = d.output(&["ingest", file.to_str().unwrap()]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("line 2: big-2: the payload is 300.0 KiB; the limit is 256.0 KiB"),
        "{err}"
    );
    assert!(
        err.contains("line 3: the line is 100.0 MiB; a payload may be at most 256.0 KiB"),
        "{err}"
    );
    for k in ["small-1", "small-4"] {
        assert_eq!(d.show(k)["state"], "pending", "{k}: kept");
    }
    for k in ["big-1", "big-2", "huge-3"] {
        let (code, _, _) = d.output(&["show", k]);
        assert_eq!(code, 3, "{k}: nothing of it is stored");
    }
    let stored_blobs = stored(
        url,
        "SELECT payload FROM operations WHERE payload LIKE '%xxxx%' OR payload LIKE '%yyyy%'",
    );
    assert!(stored_blobs.is_empty(), "nothing of it is stored");
    // the library
    let url = url.to_string();
    let refused = std::thread::spawn(move || {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
            .block_on(async {
                let l = settle::Ledger::open(&url, settle::Config::default())
                    .await
                    .unwrap();
                let intent = settle::Intent {
                    key: "big-5".into(),
                    workflow: "w".into(),
                    step: String::new(),
                    destination: "tasks".into(),
                    action: "a".into(),
                    payload: serde_json::json!({ "blob": "z".repeat(300 * 1024) }),
                    run: None,
                };
                let e = l.record(&intent, "bot").await.unwrap_err();
                let exists = l.read().show("big-5", "t").await.is_ok();
                (e.to_string(), e.exit_code(), exists)
            })
    })
    .join()
    .unwrap();
    assert_eq!(
        refused,
        (
            "big-5: the payload is 300.0 KiB; the limit is 256.0 KiB (max_payload): nothing of it is stored".to_string(),
            2,
            false
        )
    );
    // a payload that fits, from stdin (kept off the command line, where `ps` shows it)
    let mut child = d
        .cmd(&[
            "record",
            "--key",
            "stdin-1",
            "--workflow",
            "w",
            "--destination",
            "tasks",
            "--action",
            "a",
            "--payload",
            "-",
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(b"{\"title\": \"Kickoff call\"}")
        .unwrap();
    assert!(child.wait().unwrap().success());
    assert_eq!(d.show("stdin-1")["payload"]["title"], "Kickoff call");
    // emails as keys: both fields stay in view, neither address does
    d.run(&[
        "record",
        "--key",
        "keys-1",
        "--workflow",
        "w",
        "--destination",
        "tasks",
        "--action",
        "a",
        "--payload",
        "{\"members\":{\"ada@example.com\":\"owner\",\"zed@example.org\":\"viewer\"}}",
    ]);
    let v = d.show("keys-1");
    assert_eq!(
        v["payload"]["members"],
        serde_json::json!({"[redacted 1]": "owner", "[redacted 2]": "viewer"})
    );
    let shown = d.run(&["show", "keys-1"]);
    assert!(
        shown.contains("[redacted 1]") && shown.contains("[redacted 2]"),
        "{shown}"
    );
    assert!(!shown.contains("example"), "{shown}");
}

async fn refusing_payloads_over_the_limit(db: &TestDb) {
    blocking(db, payloads_over_the_limit_and_redacted_keys).await;
}

both_backends!(
    refusing_payloads_over_the_limit,
    dispatching_answers_with_nul_and_secrets,
    ingesting_bad_lines,
    redacting_every_class,
    sending_numbers_as_given,
    stopping_threshold_at_concurrency_1,
    stopping_threshold_at_concurrency_8,
);

// 19. A closed pipe ends settle quietly.

#[test]
fn a_closed_pipe_ends_settle_quietly() {
    let db = common::sqlite();
    let sim = Sim::start(&[]);
    let d = drill_on(&db.url, &sim, true, false, "");
    let file = d.config.with_extension("jsonl");
    let text: String = (0..3000)
        .map(|i| format!("{{\"type\":\"intent\",\"key\":\"pipe-{i}\",\"workflow\":\"w\",\"destination\":\"tasks\",\"action\":\"a\",\"payload\":{{}}}}\n"))
        .collect();
    std::fs::write(&file, text).unwrap();
    d.run(&["ingest", file.to_str().unwrap()]);
    for (args, expected) in [
        (vec!["--help"], 0),
        (vec!["list", "--all"], 141),
        (vec!["list", "--all", "--json"], 141),
    ] {
        let mut child = d
            .cmd(&args)
            .env("RUST_BACKTRACE", "1")
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        // the reader goes away at once, as `| head -1` does after its line
        drop(child.stdout.take());
        let out = child.wait_with_output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            !err.contains("panicked") && !err.contains("Broken pipe"),
            "{args:?}: {err}"
        );
        assert_eq!(out.status.code(), Some(expected), "{args:?}: {err}");
    }
}
