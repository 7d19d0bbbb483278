//! Taking an action back (manual: Taking an action back), through the binary on both backends, as
//! a person who has just made a mistake meets it: a bulk close under the wrong filter taken back
//! whole; a bulk claim of which one item was taken over since; a reconcile as found that was not;
//! a retry whose request was sent, refused; one operator's `--last` never another's; the window.

mod common;

use common::{Drill, Sim, TestDb, drill};
use serde_json::Value;

/// `n` operations whose outcome is unknown, keys `{prefix}-00`...
fn unknowns(d: &Drill, prefix: &str, n: usize) -> Vec<String> {
    (0..n)
        .map(|i| {
            let key = format!("{prefix}-{i:02}");
            d.record(&key);
            d.run(&["start", "--key", &key]);
            d.run(&["attempt", "--key", &key, "--outcome", "unknown"]);
            key
        })
        .collect()
}

/// The action id an answer names: `(action a-...)`.
fn action_of(answer: &str) -> String {
    let at = answer.find("(action ").expect(answer) + "(action ".len();
    answer[at..].split(')').next().unwrap().to_string()
}

fn as_op(d: &Drill, operator: &str, args: &[&str]) -> (i32, String, String) {
    let out = d
        .cmd(args)
        .env("SETTLE_OPERATOR", operator)
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

async fn a_bulk_close_taken_back_whole(db: &TestDb) {
    let sim = Sim::start(&[]);
    let d = drill(db, &sim, false, false, "");
    d.run(&["init"]);
    let keys = unknowns(&d, "wrong", 30);
    let closed = d.run(&[
        "close",
        "--where",
        "state:unknown",
        "--resolution",
        "abandoned",
        "--note",
        "cleanup",
        "--yes",
    ]);
    assert!(closed.contains("30 done"), "{closed}");
    assert_eq!(d.show(&keys[7])["state"], "closed");
    // a note since is not a change: that item is taken back too, the note kept
    let (code, ..) = as_op(&d, "bob", &["note", &keys[3], "saw this close"]);
    assert_eq!(code, 0);
    let (code, out, err) = d.output(&["undo", "--last", "--note", "wrong filter"]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("30 of 30 taken back"), "{out}");
    for key in &keys {
        let v = d.show(key);
        assert_eq!(v["state"], "unknown", "{v}");
        assert!(v["claimed_by"].is_null(), "unclaimed as before: {v}");
        assert!(v["resolution"].is_null(), "{v}");
    }
    // the history holds the close and its undo, each naming who, under one action id
    let v = d.show(&keys[0]);
    let history = v["history"].as_array().unwrap();
    let close = history.iter().find(|e| e["kind"] == "closed").unwrap();
    let undo = history.iter().find(|e| e["kind"] == "undone").unwrap();
    assert_eq!(close["actor"], "alice");
    assert_eq!(undo["actor"], "alice");
    assert_eq!(undo["action"], close["action"], "{v}");
    assert_eq!(undo["detail"]["note"], "wrong filter");
    let noted = d.show(&keys[3]);
    assert!(
        noted["history"]
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e["kind"] == "note" && e["actor"] == "bob"),
        "{noted}"
    );
    let text = d.run(&["show", &keys[0]]);
    let id = close["action"].as_str().unwrap();
    assert!(text.contains(&format!("closed [{id}]")), "{text}");
    // taken back once: again, nothing is left to take back
    let (_, again, _) = d.output(&["undo", id]);
    assert!(again.contains("0 of 30 taken back, 30 already"), "{again}");
}

async fn a_bulk_claim_with_one_taken_over_since(db: &TestDb) {
    let sim = Sim::start(&[]);
    let d = drill(db, &sim, false, false, "");
    d.run(&["init"]);
    let keys = unknowns(&d, "claim", 4);
    let mut args = vec!["claim"];
    args.extend(keys.iter().map(String::as_str));
    args.push("--yes");
    d.run(&args);
    let (code, out, err) = as_op(
        &d,
        "bob",
        &[
            "claim",
            &keys[2],
            "--force",
            "--reason",
            "I have the ticket",
        ],
    );
    assert_eq!(code, 0, "{out}{err}");
    let (code, out, _) = d.output(&["undo", "--last"]);
    assert_eq!(code, 3, "one was left as it is: {out}");
    assert!(
        out.contains("3 of 4 taken back") && out.contains(", 1 left as it is"),
        "{out}"
    );
    assert!(
        out.contains(keys[2].as_str()) && out.contains("by bob"),
        "the item and who changed it are named: {out}"
    );
    for (i, key) in keys.iter().enumerate() {
        let claim = &d.show(key)["claimed_by"];
        match i {
            2 => assert_eq!(claim, "bob", "left to its new holder"),
            _ => assert!(claim.is_null(), "{key}: {claim}"),
        }
    }
}

async fn a_reconcile_as_found_taken_back(db: &TestDb) {
    let sim = Sim::start(&[]);
    let d = drill(db, &sim, false, false, "");
    d.run(&["init"]);
    let key = &unknowns(&d, "found", 1)[0];
    let said = d.run(&["reconcile", key, "--found", "T-77"]);
    let id = action_of(&said);
    assert_eq!(d.show(key)["state"], "succeeded");
    let out = d.run(&["undo", &id]);
    assert!(out.contains("1 of 1 taken back"), "{out}");
    let v = d.show(key);
    assert_eq!(v["state"], "unknown", "{v}");
    assert!(v["reference"].is_null(), "no reference: {v}");
    assert!(v["claimed_by"].is_null(), "{v}");
    // what it says to do next is what it said before
    assert!(
        v["next_step"]
            .as_str()
            .unwrap_or_default()
            .contains("reconcile"),
        "{v}"
    );
}

async fn a_retry_once_sent_is_not_taken_back(db: &TestDb) {
    let sim = Sim::start(&[]);
    let d = drill(db, &sim, false, false, "");
    d.run(&["init"]);
    let key = &unknowns(&d, "sent", 1)[0];
    d.run(&["reconcile", key, "--absent"]);
    let id = action_of(&d.run(&["retry", key]));
    d.dispatch_until_settled();
    assert_eq!(d.show(key)["state"], "succeeded");
    let (code, out, _) = d.output(&["undo", &id]);
    assert_eq!(code, 3, "{out}");
    assert!(out.contains("0 of 1 taken back"), "{out}");
    assert!(out.contains("its retry was sent"), "{out}");
    assert_eq!(d.show(key)["state"], "succeeded", "left as it is");
}

async fn last_is_ones_own_and_the_window_closes(db: &TestDb) {
    let sim = Sim::start(&[]);
    let d = common::drill_with(
        &db.url,
        &format!(
            "undo_window = \"2s\"\n[destinations.tasks]\nurl = \"{}/tasks\"\ndedupes = false\n",
            sim.base
        ),
    );
    d.run(&["init"]);
    let keys = unknowns(&d, "own", 2);
    d.run(&["claim", &keys[0]]);
    let (code, ..) = as_op(&d, "bob", &["claim", &keys[1]]);
    assert_eq!(code, 0);
    // alice's last is alice's: bob's claim stays
    let out = d.run(&["undo", "--last"]);
    assert!(out.contains("claimed by alice"), "{out}");
    assert!(d.show(&keys[0])["claimed_by"].is_null());
    assert_eq!(d.show(&keys[1])["claimed_by"], "bob");
    let (code, _, err) = as_op(&d, "carol", &["undo", "--last"]);
    assert_ne!(code, 0);
    assert!(err.contains("carol has taken no action"), "{err}");
    // past the window
    let said = d.run(&["note", &keys[0], "looked at it"]);
    let id = action_of(&said);
    std::thread::sleep(std::time::Duration::from_millis(2300));
    let (code, _, err) = d.output(&["undo", &id]);
    assert_ne!(code, 0);
    assert!(err.contains("can be taken back for 2s"), "{err}");
    assert_eq!(err.trim().lines().count(), 1, "one line: {err}");
    let v: Value = d.show(&keys[0]);
    assert!(
        !v["history"]
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e["kind"] == "undone" && e["detail"]["undid"] == "note"),
        "{v}"
    );
}

async fn a_correction_not_yet_sent_is_withdrawn(db: &TestDb) {
    let sim = Sim::start(&[]);
    let d = drill(db, &sim, false, false, "");
    d.run(&["init"]);
    for key in ["fix-1", "fix-2"] {
        d.record(key);
        d.run(&["start", "--key", key]);
        d.run(&[
            "attempt",
            "--key",
            key,
            "--outcome",
            "rejected",
            "--error",
            "422",
        ]);
    }
    // not sent yet: the original is rejected again, its correction closed withdrawn
    let said = d.run(&[
        "correct",
        "fix-1",
        "--set",
        "title=\"Kickoff\"",
        "--note",
        "typo",
        "--yes",
    ]);
    assert_eq!(d.show("fix-1:c2")["state"], "pending");
    let out = d.run(&["undo", &action_of(&said)]);
    assert!(out.contains("1 of 1 taken back"), "{out}");
    let v = d.show("fix-1");
    assert_eq!(v["state"], "rejected", "{v}");
    assert!(v["superseded_by"].is_null(), "{v}");
    let made = d.show("fix-1:c2");
    assert_eq!(made["state"], "closed", "{made}");
    assert_eq!(made["resolution"], "withdrawn", "{made}");
    // corrected again, it goes under the next key of the chain
    d.run(&[
        "correct",
        "fix-1",
        "--set",
        "title=\"Kickoff meeting\"",
        "--note",
        "again",
        "--yes",
    ]);
    assert_eq!(d.show("fix-1:c3")["state"], "pending");
    // sent: the correction is not taken back, nor the original
    let said = d.run(&[
        "correct",
        "fix-2",
        "--set",
        "title=\"Kickoff\"",
        "--note",
        "typo",
        "--yes",
    ]);
    d.dispatch_until_settled();
    assert_eq!(d.show("fix-2:c2")["state"], "succeeded");
    let (code, out, _) = d.output(&["undo", &action_of(&said)]);
    assert_eq!(code, 3, "{out}");
    assert!(out.contains("0 of 1 taken back"), "{out}");
    assert_eq!(d.show("fix-2")["state"], "closed");
    assert_eq!(d.show("fix-2:c2")["state"], "succeeded");
}

async fn a_pause_and_a_resume_taken_back(db: &TestDb) {
    let sim = Sim::start(&[]);
    let d = drill(db, &sim, false, false, "");
    d.run(&["init"]);
    d.record("p-1");
    let said = d.run(&["pause", "onboarding", "--reason", "checking the CRM"]);
    assert!(said.contains("(action a-"), "{said}");
    assert_eq!(d.show("p-1")["workflow_paused"], true);
    let out = d.run(&["undo", "--last"]);
    assert!(out.contains("1 of 1 taken back"), "{out}");
    assert_eq!(
        d.show("p-1")["workflow_paused"],
        false,
        "resumed by the undo"
    );
    // a resume taken back pauses again, with the reason it had
    d.run(&[
        "pause",
        "--destination",
        "tasks",
        "--reason",
        "rate limited",
    ]);
    d.run(&["resume", "--destination", "tasks"]);
    assert_eq!(d.show("p-1")["destination_paused"], false);
    let out = d.run(&["undo", "--last"]);
    assert!(out.contains("destination tasks"), "{out}");
    assert_eq!(d.show("p-1")["destination_paused"], true);
    // paused or resumed since by another: left as it is
    d.run(&["pause", "onboarding", "--reason", "again"]);
    let (code, ..) = as_op(&d, "bob", &["resume", "onboarding"]);
    assert_eq!(code, 0);
    let (code, out, _) = d.output(&["undo", "--last"]);
    assert_eq!(code, 3, "{out}");
    assert!(
        out.contains("workflow onboarding was paused or resumed since"),
        "{out}"
    );
    assert_eq!(
        d.show("p-1")["workflow_paused"],
        false,
        "bob's resume stands"
    );
}

/// An undo is a person's: items it makes exceptions again are not news to their owners (they
/// were told when automation first left them there).
async fn an_undo_tells_the_owners_nothing(db: &TestDb) {
    let config = settle::Config::parse(
        "[teams.payments]\nmembers = [\"alice\"]\nnotify = [\"chat\"]\n\
         [channels.chat]\nkind = \"slack\"\nurl_env = \"SETTLE_SLACK_UNDO\"\n\
         [workflows.onboarding]\nowner = \"payments\"\n",
        "test",
    )
    .unwrap();
    let ledger = settle::Ledger::open(&db.url, config).await.unwrap();
    for key in ["told-1", "told-2"] {
        let intent = settle::Intent {
            key: key.into(),
            workflow: "onboarding".into(),
            step: "s".into(),
            destination: "crm".into(),
            action: "create".into(),
            payload: serde_json::json!({"n": 1}),
            run: None,
        };
        ledger.record(&intent, "bot").await.unwrap();
        ledger.start_attempt(key, "bot").await.unwrap();
        let report = settle::AttemptReport {
            key: key.into(),
            outcome: Some(settle::Outcome::Unknown),
            ..Default::default()
        };
        ledger.report_attempt(&report, "bot").await.unwrap();
    }
    let mut raw = common::Raw::connect(&db.url).await;
    let told = raw.int("SELECT COUNT(*) FROM notify_inbox").await;
    assert_eq!(told, 2, "each exception told once");
    let keys = vec!["told-1".to_string(), "told-2".to_string()];
    let close = settle::StaffAction::Close {
        resolution: settle::Resolution::Abandoned,
        reference: None,
        superseded_by: None,
        note: "oops".into(),
    };
    let stop = std::sync::atomic::AtomicBool::new(false);
    let staff = ledger.staff();
    let done = staff.bulk_apply(&keys, &close, "alice", &stop, None, |_, _| {});
    let batch = done.await.unwrap().batch;
    let back = staff
        .undo(settle::ledger::UndoOf::Id(&batch), "alice", None)
        .await
        .unwrap();
    assert_eq!(back.taken_back.len(), 2);
    assert_eq!(raw.int("SELECT COUNT(*) FROM notify_inbox").await, told);
}

both_backends!(
    an_undo_tells_the_owners_nothing,
    a_pause_and_a_resume_taken_back,
    a_correction_not_yet_sent_is_withdrawn,
    a_bulk_close_taken_back_whole,
    a_bulk_claim_with_one_taken_over_since,
    a_reconcile_as_found_taken_back,
    a_retry_once_sent_is_not_taken_back,
    last_is_ones_own_and_the_window_closes,
);
