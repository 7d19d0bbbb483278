//! Telling the owners (manual: Owners and notifications), on both backends, against real
//! receivers: an HTTP server that checks each body's signature and counts by
//! `Settle-Notification-Id`, and aiosmtpd from PyPI. The ledger's clock is moved by hand and the
//! sender turned by hand, so that windows of a minute and aging of hours take no time.

mod common;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::{DateTime, Utc};
use common::TestDb;
use common::receivers::{HttpReceiver, SmtpReceiver};
use serde_json::{Value, json};
use settle::{AttemptReport, Config, Intent, Ledger, Outcome};

const PLANTED_VALUE: &str = "PLANTED-PAYLOAD-7731";
const SECRET: &str = "receiver-secret-5521";
const DEST_SECRET: &str = "PLANTED-DEST-SECRET-8812";

/// Environment variables of this test's own (the tests of a file share one process).
fn var(name: &str) -> String {
    format!("SETTLE_T_{name}_{:08x}", rand::random::<u32>())
}

struct World {
    ledger: Ledger,
    clock: Arc<Mutex<DateTime<Utc>>>,
    hook: HttpReceiver,
    pager: HttpReceiver,
    smtp: SmtpReceiver,
    http: reqwest::Client,
}

impl World {
    async fn start(db: &TestDb) -> World {
        let hook = HttpReceiver::start(Some(SECRET));
        let pager = HttpReceiver::start(None);
        let smtp = SmtpReceiver::start();
        let (hook_var, secret_var, pager_var) = (var("HOOK"), var("SECRET"), var("PAGER"));
        // SAFETY: each name is this test's own; nothing else reads them
        unsafe {
            std::env::set_var(&hook_var, &hook.url);
            std::env::set_var(&secret_var, SECRET);
            std::env::set_var(&pager_var, &pager.url);
        }
        let config = Config::parse(
            &format!(
                r#"
warn_after = "1h"
critical_after = "4h"
[destinations.crm]
[destinations.erp]
[teams.growth]
members = ["alice"]
notify = ["hook", "mail"]
escalate = ["pager"]
[teams.revops]
members = ["carol"]
notify = ["hook"]
[channels.hook]
kind = "webhook"
url_env = "{hook_var}"
secret_env = "{secret_var}"
[channels.mail]
kind = "email"
smtp = "smtp://127.0.0.1:{}"
from = "settle@example.com"
to = ["ops@example.com"]
[channels.pager]
kind = "webhook"
url_env = "{pager_var}"
[workflows.onboarding]
owner = "growth"
[workflows.billing]
owner = "revops"
[workflows.guarded]
owner = "revops"
pause_when = {{ unresolved = 3 }}
[notify]
group_window = "60s"
repeat = "15m"
"#,
                smtp.port
            ),
            "test",
        )
        .unwrap();
        let clock = Arc::new(Mutex::new(Utc::now()));
        let c = clock.clone();
        let ledger = Ledger::open(&db.url, config)
            .await
            .unwrap()
            .with_clock(move || *c.lock().unwrap());
        World {
            ledger,
            clock,
            hook,
            pager,
            smtp,
            http: reqwest::Client::new(),
        }
    }

    fn later(&self, secs: i64) {
        *self.clock.lock().unwrap() += chrono::Duration::seconds(secs);
    }

    async fn turn(&self) {
        settle::notify::turn(&self.ledger, "test", &self.http)
            .await
            .unwrap();
    }

    /// `n` operations of `workflow` whose attempt ended with `outcome`, keys `PREFIX-i`.
    async fn exceptions(&self, prefix: &str, workflow: &str, n: usize, outcome: Outcome) {
        for i in 0..n {
            let key = format!("{prefix}-{i}");
            let intent = Intent {
                key: key.clone(),
                workflow: workflow.into(),
                step: "create".into(),
                destination: if workflow == "onboarding" {
                    "crm"
                } else {
                    "erp"
                }
                .into(),
                action: "create".into(),
                payload: json!({"email": "a@b.example", "api_token": PLANTED_VALUE}),
                run: None,
            };
            self.ledger.record(&intent, "bot").await.unwrap();
            let report = AttemptReport {
                key,
                outcome: Some(outcome),
                http_status: (outcome == Outcome::Rejected).then_some(422),
                error: Some(format!(
                    "read timeout after {}s; token {PLANTED_VALUE}",
                    30 + i % 7
                )),
                ..Default::default()
            };
            self.ledger.report_attempt(&report, "bot").await.unwrap();
        }
    }

    /// The webhook documents delivered to the hook of `kind`.
    fn hook_docs(&self, kind: &str) -> Vec<Value> {
        self.hook
            .documents()
            .into_iter()
            .filter(|d| d["kind"] == kind)
            .collect()
    }
}

/// Acceptance 1: an incident is a handful of messages, each with the concise record, to the right
/// channels, signed; nothing sensitive in any.
async fn owners_are_told_when_automatic_recovery_stops(db: &TestDb) {
    let w = World::start(db).await;
    w.exceptions("u", "onboarding", 200, Outcome::Unknown).await;
    // inside the window: nothing yet
    w.turn().await;
    assert!(w.hook.received().is_empty(), "{:?}", w.hook.received());
    w.later(61);
    w.turn().await;
    let queue = w.hook_docs("queue");
    assert_eq!(queue.len(), 1, "{queue:#?}");
    let m = &queue[0];
    assert_eq!(m["count"], 200);
    assert_eq!(m["team"], "growth");
    assert_eq!(m["workflow"], "onboarding");
    assert_eq!(m["destination"], "crm");
    assert_eq!(m["state"], "unknown");
    assert_eq!(m["step"], "create");
    assert_eq!(m["keys"].as_array().unwrap().len(), 5);
    assert!(m["reason"].as_str().unwrap().contains("read timeout after"));
    assert!(
        m["open"]
            .as_str()
            .unwrap()
            .starts_with("settle list --where 'wf:onboarding"),
        "{m}"
    );
    assert!(!m["next_step"].as_str().unwrap().is_empty());
    assert!(w.hook.received().iter().all(|r| r.signed == Some(true)));
    assert_eq!(w.smtp.mails().len(), 1, "one mail for the 200");
    assert!(
        w.pager.received().is_empty(),
        "the pager hears of critical only"
    );

    // a later wave of 50 in the same group, arriving over five turns of the sender: told once
    // more, after `repeat`, all 50 counted (though a message names only five of them)
    w.later(60);
    for wave in 0..5 {
        w.exceptions(&format!("v{wave}"), "onboarding", 10, Outcome::Unknown)
            .await;
        w.turn().await;
    }
    w.later(120);
    w.turn().await;
    assert_eq!(w.hook_docs("queue").len(), 1, "not before repeat");
    w.later(15 * 60);
    w.turn().await;
    let queue = w.hook_docs("queue");
    assert_eq!(queue.len(), 2, "{queue:#?}");
    assert_eq!(queue[1]["count"], 50);
    assert_eq!(w.smtp.mails().len(), 2);

    // a single rejection elsewhere: one message naming its key and its safe next step
    w.exceptions("r", "billing", 1, Outcome::Rejected).await;
    w.later(61);
    w.turn().await;
    let rejected: Vec<Value> = w
        .hook_docs("queue")
        .into_iter()
        .filter(|d| d["team"] == "revops")
        .collect();
    assert_eq!(rejected.len(), 1, "{rejected:#?}");
    assert_eq!(rejected[0]["keys"], json!(["r-0"]));
    assert_eq!(rejected[0]["state"], "rejected");
    assert!(!rejected[0]["next_step"].as_str().unwrap().is_empty());
    assert_eq!(w.smtp.mails().len(), 2, "revops is told by its hook only");

    // a workflow paused by its threshold: one message; resumed: another
    w.exceptions("g", "guarded", 3, Outcome::Unknown).await;
    w.turn().await;
    assert_eq!(w.hook_docs("paused").len(), 1, "{:#?}", w.hook.documents());
    assert_eq!(w.hook_docs("paused")[0]["workflow"], "guarded");
    w.ledger.staff().resume("guarded", "carol").await.unwrap();
    w.turn().await;
    assert_eq!(w.hook_docs("resumed").len(), 1);

    // aging: the warning and the critical level passed in one window: told once, at the higher
    // (and to the pager), whatever the number of turns
    w.later(5 * 3600);
    w.turn().await;
    w.later(3600);
    w.turn().await;
    let aging = w.hook_docs("aging");
    let level = |l: &str, team: &str| {
        aging
            .iter()
            .filter(|d| d["level"] == l && d["team"] == team && d["workflow"] == "onboarding")
            .map(|d| d["count"].as_i64().unwrap())
            .collect::<Vec<_>>()
    };
    assert_eq!(level("warning", "growth"), Vec::<i64>::new(), "{aging:#?}");
    assert_eq!(level("critical", "growth"), vec![250], "{aging:#?}");
    let paged: Vec<Value> = w.pager.documents();
    assert!(
        !paged.is_empty() && paged.iter().all(|d| d["level"] == "critical"),
        "{paged:#?}"
    );
    assert!(paged.iter().any(|d| d["workflow"] == "onboarding"));

    // every message delivered once, each id its own; nothing sensitive anywhere
    assert!(w.hook.delivered().values().all(|n| *n == 1));
    let mut everything: Vec<String> = w.hook.received().into_iter().map(|r| r.body).collect();
    everything.extend(w.pager.received().into_iter().map(|r| r.body));
    everything.extend(w.smtp.mails());
    for text in &everything {
        assert!(!text.contains(PLANTED_VALUE), "{text}");
        assert!(!text.contains(SECRET), "{text}");
    }
    // the person's own actions (the resume aside, which is told) notify nobody: a claim, a close
    let before = w.hook.received().len();
    let staff = w.ledger.staff();
    staff
        .act(
            "u-0",
            "alice",
            settle::StaffAction::Claim { force_reason: None },
        )
        .await
        .unwrap();
    w.later(120);
    w.turn().await;
    assert_eq!(w.hook.received().len(), before);
    // the mails carry the record too, and a Message-ID made from the id
    let mail = &w.smtp.mails()[0];
    assert!(mail.contains("Message-ID: <"), "{mail}");
    assert!(mail.contains("onboarding"), "{mail}");
    let listed = w.ledger.notices().recent(100).await.unwrap();
    assert!(listed.iter().all(|d| d.status == "sent"), "{listed:#?}");
}

/// Acceptance 2 (one process) and 3: a channel answering 500 holds its messages, shows as
/// failing in the stats, and never notifies about itself; once it answers, every message arrives.
async fn a_failing_channel_loses_nothing(db: &TestDb) {
    let w = World::start(db).await;
    w.hook.fail_for(Duration::from_secs(3600));
    w.exceptions("u", "onboarding", 10, Outcome::Unknown).await;
    w.exceptions("r", "billing", 2, Outcome::Rejected).await;
    w.later(61);
    w.turn().await;
    assert!(w.hook.delivered().is_empty());
    let stats = w.ledger.read().stats().await.unwrap();
    assert_eq!(stats.notify_failing, vec!["hook".to_string()]);
    assert!(stats.to_string().contains("FAILING: hook"), "{stats}");
    // tried again with backoff for a while: no message about the failing channel itself
    for _ in 0..4 {
        w.later(650);
        w.turn().await;
    }
    let tries = w.hook.received().len();
    assert!(tries >= 4, "tried again: {tries}");
    // a channel receives its messages in order: the first is tried again, the second waits
    let ids: std::collections::BTreeSet<_> = w.hook.received().into_iter().map(|r| r.id).collect();
    assert_eq!(
        ids.len(),
        1,
        "the first message, tried again under its own id"
    );
    w.hook.fail_for(Duration::ZERO);
    w.later(650);
    w.turn().await;
    let delivered = w.hook.delivered();
    assert_eq!(delivered.len(), 2, "{delivered:?}");
    let seqs: Vec<i64> = w
        .hook
        .documents()
        .iter()
        .map(|d| d["seq"].as_i64().unwrap())
        .collect();
    assert!(seqs.windows(2).all(|p| p[0] < p[1]), "in order: {seqs:?}");
    assert!(
        w.ledger
            .read()
            .stats()
            .await
            .unwrap()
            .notify_failing
            .is_empty()
    );
}

/// Starts `settle ARGS` in the background with `env`, waiting for its first line (its metrics).
fn start(d: &common::Drill, args: &[&str], env: &[(String, String)]) -> common::Killed {
    use std::io::BufRead;
    let mut cmd = d.cmd(args);
    for (k, v) in env {
        cmd.env(k, v);
    }
    let mut child = cmd
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut out = std::io::BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    out.read_line(&mut line).unwrap();
    assert!(line.contains("metrics on"), "{line:?}");
    std::thread::spawn(move || std::io::copy(&mut out, &mut std::io::sink()));
    common::Killed(child)
}

/// Acceptance 2: with two dispatchers and a `serve` running, a receiver answering 500 for a
/// while, then 200: every message arrives, and none is delivered twice (one sender at a time).
async fn many_processes_one_sender(db: &TestDb) {
    let hook = HttpReceiver::start(Some(SECRET));
    hook.fail_for(Duration::from_secs(20));
    // a destination that quotes its credential back in a rejection
    let careless = HttpReceiver::echoing();
    let env = vec![
        ("SETTLE_T_HOOK".to_string(), hook.url.clone()),
        ("SETTLE_T_SECRET".to_string(), SECRET.to_string()),
        ("SETTLE_T_DEST_TOKEN".to_string(), DEST_SECRET.to_string()),
    ];
    let d = common::drill_with(
        &db.url,
        &format!(
            r#"
[destinations.careless]
url = "{}"
headers = {{ Authorization = "Bearer ${{SETTLE_T_DEST_TOKEN}}" }}
[defaults]
owner = "ops"
[teams.ops]
members = ["alice"]
notify = ["hook"]
[channels.hook]
kind = "webhook"
url_env = "SETTLE_T_HOOK"
secret_env = "SETTLE_T_SECRET"
[notify]
group_window = "1s"
repeat = "2s"
"#,
            careless.url
        ),
    );
    d.run(&["init"]);
    let _senders: Vec<common::Killed> = [
        &["dispatch", "--metrics", "127.0.0.1:0"][..],
        &["dispatch", "--metrics", "127.0.0.1:0"][..],
        &["serve", "--metrics", "127.0.0.1:0"][..],
    ]
    .iter()
    .map(|args| start(&d, args, &env))
    .collect();
    // five waves of exceptions in four groups each, a few seconds apart
    let dir = tempfile::tempdir().unwrap();
    for wave in 0..5 {
        let mut lines = String::new();
        for g in 0..4 {
            for i in 0..5 {
                let key = format!("w{wave}-g{g}-{i}");
                lines.push_str(&format!(
                    r#"{{"type":"intent","key":"{key}","workflow":"wf-{g}","step":"s","destination":"dest-{g}","action":"create","payload":{{"n":{i}}}}}"#
                ));
                lines.push('\n');
                lines.push_str(&format!(
                    r#"{{"type":"attempt","key":"{key}","attempt":1,"outcome":"unknown","error":"read timeout after {i}s"}}"#
                ));
                lines.push('\n');
            }
        }
        let file = dir.path().join(format!("wave{wave}.jsonl"));
        std::fs::write(&file, lines).unwrap();
        d.run(&["ingest", file.to_str().unwrap()]);
        std::thread::sleep(Duration::from_secs(3));
    }
    // one more exception, made by the dispatcher: the destination's rejection quotes its secret
    d.run(&[
        "record",
        "--key",
        "careless-1",
        "--workflow",
        "signup",
        "--destination",
        "careless",
        "--action",
        "create",
        "--payload",
        "{\"n\":1}",
    ]);
    let recorded = || -> Vec<Value> {
        let out = d.run(&["notifications", "--limit", "1000", "--json"]);
        serde_json::from_str(&out).unwrap()
    };
    common::wait_until("every message delivered", Duration::from_secs(240), || {
        let r = recorded();
        let told: i64 = r
            .iter()
            .map(|m| m["message"]["count"].as_i64().unwrap())
            .sum();
        told >= 101 && r.iter().all(|m| m["status"] == "sent")
    });
    let r = recorded();
    let ids: std::collections::BTreeSet<String> = r
        .iter()
        .map(|m| m["id"].as_str().unwrap().to_string())
        .collect();
    let delivered = hook.delivered();
    assert_eq!(
        delivered
            .keys()
            .cloned()
            .collect::<std::collections::BTreeSet<_>>(),
        ids,
        "each message recorded arrived"
    );
    assert!(
        delivered.values().all(|n| *n == 1),
        "no message delivered twice: {delivered:?}"
    );
    // the groups: 4 in the first window, then each told again as it grew
    assert!(r.len() >= 4, "{}", r.len());
    let counted: i64 = r
        .iter()
        .map(|m| m["message"]["count"].as_i64().unwrap())
        .sum();
    assert_eq!(counted, 101, "every exception told of once");
    let careless_told = r
        .iter()
        .any(|m| m["message"]["keys"] == serde_json::json!(["careless-1"]));
    assert!(careless_told, "the rejection is told of");
    for got in hook.received() {
        assert!(!got.body.contains(DEST_SECRET), "{}", got.body);
    }
    assert!(
        !careless.received().is_empty(),
        "the destination was sent to"
    );
    assert!(
        hook.received().iter().any(|x| x.status == 500),
        "the receiver failed first"
    );
}

/// Both backends, as `both_backends!` runs them, where aiosmtpd is installed.
macro_rules! with_receivers {
    ($($name:ident),*) => {
        mod on_sqlite {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                #[cfg_attr(not(settle_smtp), ignore = "needs aiosmtpd: pip install aiosmtpd")]
                async fn $name() {
                    super::$name(&crate::common::sqlite()).await;
                }
            )*
        }
        mod on_postgres {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                #[cfg_attr(
                    not(all(settle_pg, settle_smtp)),
                    ignore = "needs SETTLE_TEST_POSTGRES_URL and aiosmtpd"
                )]
                async fn $name() {
                    super::$name(&crate::common::postgres().await).await;
                }
            )*
        }
    };
}

with_receivers!(
    owners_are_told_when_automatic_recovery_stops,
    a_failing_channel_loses_nothing,
    many_processes_one_sender
);
