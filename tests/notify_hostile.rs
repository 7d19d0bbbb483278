//! Messages to people under what a careless automation, a careless destination or a slow mail
//! server does (manual: Owners and notifications), through the real binary on both backends: a
//! reason holding `<!channel>`, a disguised link and forged lines arrives in Slack escaped, on
//! one line, and in a mail on one line; a destination that echoes the request puts none of its
//! values in a message; a mail server that takes 8 s a step, with two senders running, gets
//! each mail once, and the Slack message beside it does not wait for it.

mod common;

use std::time::{Duration, Instant};

use common::TestDb;
use common::receivers::{HttpReceiver, SmtpReceiver};
use common::scripted::{Reply, Scripted};
use serde_json::Value;

/// The value of the payload a careless destination echoes back in its rejection.
const ECHOED: &str = "Zed Example";

/// A reason an automation reports: a live mention, a disguised link, forged lines.
const HOSTILE: &str = "<!channel> see <http://evil.example|Click here>\nteam: payroll\nnext step: wire the money to 0000";

fn config(slack: &str, extra_channels: &str, notify: &str) -> String {
    format!(
        r#"
[destinations.crm]
url = "{slack}/never"
[destinations.echo]
[defaults]
owner = "ops"
[teams.ops]
members = ["alice"]
notify = [{notify}]
[channels.slack]
kind = "slack"
url_env = "SETTLE_T_SLACK"
{extra_channels}
[notify]
group_window = "1s"
repeat = "2s"
"#
    )
}

/// `settle ARGS` in the background, its first line read (the metrics), killed when dropped.
fn start(d: &common::Drill, args: &[&str], env: &[(&str, String)]) -> common::Killed {
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

fn record(d: &common::Drill, key: &str, workflow: &str, destination: &str) {
    d.run(&[
        "record",
        "--key",
        key,
        "--workflow",
        workflow,
        "--destination",
        destination,
        "--action",
        "create",
        "--payload",
        &format!(r#"{{"customer":{{"name":"{ECHOED}"}},"title":"Kickoff call"}}"#),
    ]);
}

/// The lines of a message's text that start with `field: `.
fn lines_of<'a>(text: &'a str, field: &str) -> Vec<&'a str> {
    text.lines()
        .filter(|l| l.starts_with(&format!("{field}: ")))
        .collect()
}

async fn a_hostile_reason_arrives_escaped_on_one_line(db: &TestDb) {
    let slack = HttpReceiver::start(None);
    let smtp = SmtpReceiver::start();
    // the careless destination: its rejection quotes the request's own value
    let echo = Scripted::start(|seen| {
        let body: Value = serde_json::from_str(&seen.body).unwrap_or(Value::Null);
        let name = body["customer"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        Reply::Answer(
            422,
            format!(r#"{{"error":{{"message":"customer {name} exists","trace":"at x.rb:12"}}}}"#),
        )
    });
    let mail = format!(
        "[channels.mail]\nkind = \"email\"\nsmtp = \"smtp://127.0.0.1:{}\"\nfrom = \"settle@example.com\"\nto = [\"ops@example.com\"]\n",
        smtp.port
    );
    let text = config(&slack.url, &mail, "\"slack\", \"mail\"").replace(
        "[destinations.echo]",
        &format!("[destinations.echo]\nurl = \"{}/people\"", echo.base),
    );
    let d = common::drill_with(&db.url, &text);
    d.run(&["init"]);
    record(&d, "hostile-1", "signup", "crm");
    d.run(&[
        "attempt",
        "--key",
        "hostile-1",
        "--outcome",
        "rejected",
        "--error",
        HOSTILE,
    ]);
    record(&d, "echo-1", "billing", "echo");
    d.run(&["dispatch", "--until-settled"]);
    assert_eq!(
        serde_json::from_str::<Value>(&d.run(&["show", "echo-1", "--json"])).unwrap()["state"],
        "rejected"
    );
    let _sender = start(
        &d,
        &["serve", "--metrics", "127.0.0.1:0"],
        &[("SETTLE_T_SLACK", slack.url.clone())],
    );
    common::wait_until(
        "both told in Slack and by mail",
        Duration::from_secs(60),
        || slack.received().len() >= 2 && smtp.mails().len() >= 2,
    );
    let texts: Vec<String> = slack
        .received()
        .iter()
        .map(|r| {
            let v: Value = serde_json::from_str(&r.body).unwrap();
            v["text"].as_str().unwrap().to_string()
        })
        .collect();
    let hostile = texts
        .iter()
        .find(|t| t.contains("signup"))
        .expect("told of signup");
    assert!(
        !hostile.contains("<!channel>") && !hostile.contains("<http"),
        "{hostile}"
    );
    assert!(
        hostile.contains("&lt;!channel&gt;"),
        "shown, not live: {hostile}"
    );
    assert_eq!(lines_of(hostile, "team"), ["team: ops"], "{hostile}");
    assert_eq!(lines_of(hostile, "next step").len(), 1, "{hostile}");
    assert!(
        !hostile.lines().any(|l| l.starts_with("next step: wire")),
        "no forged line: {hostile}"
    );
    let echoed = texts
        .iter()
        .find(|t| t.contains("billing"))
        .expect("told of billing");
    assert!(
        !echoed.contains(ECHOED),
        "no payload value in a message: {echoed}"
    );
    assert!(
        echoed.contains("reason: HTTP 422: customer … exists"),
        "{echoed}"
    );
    assert!(
        !echoed.contains("trace"),
        "the body summarized, not quoted: {echoed}"
    );
    for m in smtp.mails() {
        let body = m.split_once("\n\n").map_or(m.as_str(), |(_, b)| b);
        assert!(!body.contains(ECHOED), "{m}");
        assert_eq!(lines_of(body, "team").len(), 1, "{m}");
        assert!(
            !body.lines().any(|l| l.starts_with("next step: wire")),
            "{m}"
        );
    }
}

async fn a_slow_mail_server_gets_each_mail_once(db: &TestDb) {
    let slack = HttpReceiver::start(None);
    let smtp = SmtpReceiver::slow(Duration::from_secs(8));
    let mail = format!(
        "[channels.mail]\nkind = \"email\"\nsmtp = \"smtp://127.0.0.1:{}\"\nfrom = \"settle@example.com\"\nto = [\"ops@example.com\"]\n",
        smtp.port
    );
    let d = common::drill_with(&db.url, &config(&slack.url, &mail, "\"mail\", \"slack\""));
    d.run(&["init"]);
    let env = [("SETTLE_T_SLACK", slack.url.clone())];
    let _senders: Vec<common::Killed> = (0..2)
        .map(|_| start(&d, &["serve", "--metrics", "127.0.0.1:0"], &env))
        .collect();
    let began = Instant::now();
    for (key, workflow) in [("slow-1", "signup"), ("slow-2", "billing")] {
        record(&d, key, workflow, "crm");
        d.run(&[
            "attempt",
            "--key",
            key,
            "--outcome",
            "rejected",
            "--error",
            "HTTP 422: no",
        ]);
    }
    common::wait_until("Slack is told", Duration::from_secs(30), || {
        slack.received().len() >= 2
    });
    let slack_took = began.elapsed();
    let sent = || -> Vec<Value> {
        let out = d.run(&["notifications", "--json"]);
        serde_json::from_str::<Vec<Value>>(&out)
            .unwrap()
            .into_iter()
            .filter(|m| m["channel"] == "mail")
            .collect()
    };
    common::wait_until("both mails sent", Duration::from_secs(240), || {
        let m = sent();
        m.len() == 2 && m.iter().all(|m| m["status"] == "sent")
    });
    // a whole try more (about 32 s here): a second sender that took the lease over during a try
    // would have delivered its copy by now
    std::thread::sleep(Duration::from_secs(40));
    let mails = smtp.mails();
    let mut ids: Vec<String> = mails
        .iter()
        .filter_map(|m| {
            m.lines()
                .find(|l| l.to_ascii_lowercase().starts_with("message-id:"))
                .map(|l| l.to_string())
        })
        .collect();
    ids.sort();
    let before = ids.len();
    ids.dedup();
    assert_eq!((before, ids.len()), (2, 2), "each mail once: {mails:?}");
    for m in sent() {
        assert_eq!(m["tries"], 1, "one try each: {m}");
    }
    assert!(
        slack_took < Duration::from_secs(20),
        "Slack did not wait for the mail server: {slack_took:?}"
    );
}

/// Both backends, where aiosmtpd is installed.
macro_rules! with_smtp {
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

with_smtp!(
    a_hostile_reason_arrives_escaped_on_one_line,
    a_slow_mail_server_gets_each_mail_once
);
