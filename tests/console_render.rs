//! What the console draws, on ratatui's TestBackend: snapshots of every view, the detail pane and
//! the help at 80x24 and 160x48, drawn from a real ledger (SQLite, with a clock the test sets) so
//! that they show what users see; and, against a real database, that no screen shows a secret
//! and that stored text is shown escaped.

mod common;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::{DateTime, TimeDelta, Utc};
use ratatui::Terminal;
use ratatui::backend::TestBackend;
use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use serde_json::json;
use settle::console::app::{App, Effect, Msg};
use settle::console::theme::Theme;
use settle::console::{run_effect, ui};
use settle::{AttemptReport, Config, Intent, Ledger, Outcome, Resolution, StaffAction};

/// The moment the snapshots are taken.
const NOW: &str = "2026-11-29T10:00:00Z";

fn t(s: &str) -> DateTime<Utc> {
    DateTime::parse_from_rfc3339(s).unwrap().to_utc()
}

/// A ledger on a fresh SQLite file whose clock the fixture moves.
struct Fixture {
    ledger: Ledger,
    clock: Arc<Mutex<DateTime<Utc>>>,
    _db: common::TestDb,
}

impl Fixture {
    async fn new(config: &str) -> Fixture {
        let db = common::sqlite();
        let clock = Arc::new(Mutex::new(t(NOW)));
        let c = clock.clone();
        let ledger = Ledger::open(&db.url, Config::parse(config, "render config").unwrap())
            .await
            .unwrap()
            .with_clock(move || *c.lock().unwrap());
        Fixture {
            ledger,
            clock,
            _db: db,
        }
    }

    /// Sets the clock to `ago` before NOW.
    fn at(&self, ago: TimeDelta) -> &Ledger {
        *self.clock.lock().unwrap() = t(NOW) - ago;
        &self.ledger
    }

    async fn record(
        &self,
        ago: TimeDelta,
        key: &str,
        wf: &str,
        step: &str,
        dest: &str,
        payload: serde_json::Value,
    ) {
        let action = match dest {
            "crm" => "upsert_customer",
            "sms" => "send_sms",
            _ => "create_task",
        };
        self.at(ago)
            .record(
                &Intent {
                    key: key.into(),
                    workflow: wf.into(),
                    step: step.into(),
                    destination: dest.into(),
                    action: action.into(),
                    payload,
                    run: None,
                },
                &format!("{wf}-bot"),
            )
            .await
            .unwrap();
    }

    /// An attempt started at `ago` that took `took` and ended as `report` says.
    async fn attempt(&self, ago: TimeDelta, took: TimeDelta, report: AttemptReport) {
        let actor = "dispatcher";
        self.at(ago)
            .start_attempt(&report.key, actor)
            .await
            .unwrap();
        self.at(ago - took)
            .report_attempt(&report, actor)
            .await
            .unwrap();
    }

    async fn staff(&self, ago: TimeDelta, key: &str, who: &str, action: StaffAction) {
        self.at(ago).staff().act(key, who, action).await.unwrap();
    }
}

fn mins(n: i64) -> TimeDelta {
    TimeDelta::minutes(n)
}

fn secs(n: i64) -> TimeDelta {
    TimeDelta::seconds(n)
}

const CONFIG: &str = r#"
lease = "30m"
attempt_timeout = "5m"
[destinations.projects]
[destinations.crm]
lookup = true
[destinations.sms]
dedupes = true
key_retention = "24h"
[[redaction.rules]]
destination = "crm"
fields = ["customer.name"]
[[redaction.rules]]
destination = "projects"
fields = ["customer.name"]
"#;

fn task(title: &str) -> serde_json::Value {
    json!({"title": title, "due": "2026-12-01", "assignee": {"id": 7, "team": "cs"},
           "customer": {"email": "zoe@example.org", "name": "Zoe Quist"}})
}

fn customer(n: u32) -> serde_json::Value {
    json!({"customer": {"id": n, "name": "Zoe Quist", "email": "zoe@example.org", "plan": "team"}})
}

/// A small incident drawn through the ledger's own API, as automations, a dispatcher and staff
/// would leave it: an unknown outcome at a destination that neither deduplicates nor can be
/// asked, a rejection bob holds, a failure alice holds, a conflict, one waiting for its retry,
/// one succeeded and one closed; the crm-sync workflow paused; a dispatcher alive.
async fn incident() -> Fixture {
    let f = Fixture::new(CONFIG).await;
    let day = TimeDelta::days(1);
    let hour = TimeDelta::hours(1);
    // written in the order it happened, as the ledger's own clock would have it
    // done three days ago
    f.record(
        day * 3,
        "onb-10-task",
        "onboarding",
        "create-task",
        "projects",
        task("Kickoff call"),
    )
    .await;
    f.attempt(
        day * 3 - secs(2),
        secs(1),
        AttemptReport {
            key: "onb-10-task".into(),
            outcome: Some(Outcome::Accepted),
            http_status: Some(201),
            reference: Some("TASK-981".into()),
            ..Default::default()
        },
    )
    .await;
    // the request timed out two days ago; nobody can tell whether the task exists
    f.record(
        day * 2 + hour * 4,
        "onb-42-task",
        "onboarding",
        "create-task",
        "projects",
        task("Welcome call"),
    )
    .await;
    f.attempt(
        day * 2 + hour * 4 - secs(2),
        secs(30),
        AttemptReport {
            key: "onb-42-task".into(),
            outcome: Some(Outcome::Unknown),
            error: Some("read timeout after 30s".into()),
            ..Default::default()
        },
    )
    .await;
    f.staff(
        day * 2 + hour * 2,
        "onb-42-task",
        "bob",
        StaffAction::Note {
            text: "asked the projects team".into(),
        },
    )
    .await;
    // crm rejected a customer a day ago, and again five hours ago with a new key; the first was
    // closed as superseded by the second, which bob now holds
    let rejected = |key: &str| AttemptReport {
        key: key.into(),
        outcome: Some(Outcome::Rejected),
        http_status: Some(422),
        error: Some("HTTP 422: plan 'team' needs a billing contact".into()),
        ..Default::default()
    };
    f.record(
        day + hour,
        "crm-sync-9001",
        "crm-sync",
        "upsert-customer",
        "crm",
        customer(9001),
    )
    .await;
    f.attempt(day + hour - secs(1), secs(1), rejected("crm-sync-9001"))
        .await;
    f.record(
        hour * 5,
        "crm-sync-9005",
        "crm-sync",
        "upsert-customer",
        "crm",
        customer(9005),
    )
    .await;
    f.attempt(hour * 5 - secs(1), secs(1), rejected("crm-sync-9005"))
        .await;
    f.staff(
        hour * 5 - secs(30),
        "crm-sync-9001",
        "alice",
        StaffAction::Claim { force_reason: None },
    )
    .await;
    f.staff(
        hour * 5 - mins(5),
        "crm-sync-9001",
        "alice",
        StaffAction::Close {
            resolution: Resolution::Superseded,
            reference: None,
            superseded_by: Some("crm-sync-9005".into()),
            note: "sent again with a billing contact".into(),
        },
    )
    .await;
    f.at(hour)
        .staff()
        .pause("crm-sync", "crm maintenance until 11:00", "alice")
        .await
        .unwrap();
    // a task that alice found was never made
    f.record(
        mins(50),
        "onb-43-task",
        "onboarding",
        "create-task",
        "projects",
        task("Training"),
    )
    .await;
    f.attempt(
        mins(41),
        secs(30),
        AttemptReport {
            key: "onb-43-task".into(),
            outcome: Some(Outcome::Unknown),
            error: Some("connection reset by peer".into()),
            ..Default::default()
        },
    )
    .await;
    f.staff(
        mins(20),
        "onb-43-task",
        "alice",
        StaffAction::Claim { force_reason: None },
    )
    .await;
    f.staff(
        mins(15),
        "onb-43-task",
        "alice",
        StaffAction::ReconcileAbsent {
            note: Some("not in projects".into()),
        },
    )
    .await;
    f.staff(
        mins(12),
        "crm-sync-9005",
        "bob",
        StaffAction::Claim { force_reason: None },
    )
    .await;
    // a welcome SMS refused with 503 waits out its Retry-After; meanwhile the same crm key came
    // again with new contents
    f.record(
        mins(3),
        "sms-7020",
        "notifications",
        "welcome-sms",
        "sms",
        json!({"to": "+44 7700 900123", "text": "Welcome!"}),
    )
    .await;
    f.record(
        mins(2),
        "crm-sync-9011",
        "crm-sync",
        "upsert-customer",
        "crm",
        customer(9011),
    )
    .await;
    f.attempt(
        secs(91),
        secs(1),
        AttemptReport {
            key: "sms-7020".into(),
            outcome: Some(Outcome::Transient),
            http_status: Some(503),
            error: Some("HTTP 503: not done, try later".into()),
            retry_after: Some(Duration::from_secs(300)),
            ..Default::default()
        },
    )
    .await;
    f.record(secs(45), "crm-sync-9011", "crm-sync", "upsert-customer", "crm",
        json!({"customer": {"id": 9011, "name": "Zoe Quist", "email": "zoe@example.org", "plan": "enterprise"}})).await;
    f.at(secs(2))
        .rounds()
        .heartbeat("dispatcher-1")
        .await
        .unwrap();
    f.at(TimeDelta::zero());
    f
}

/// The console's state after it has loaded, with every effect answered by the ledger.
async fn console(f: &Fixture, operator: &str) -> App {
    // the header shows the database; the fixture's lives in a temporary directory
    let mut app = App::new("sqlite://settle.db", operator);
    app.now = t(NOW);
    app.update(Msg::Resized { rows: 20 });
    let fx = app.start();
    settle_effects(&mut app, &f.ledger, fx, operator).await;
    app
}

/// Presses a key and answers what it asks of the ledger.
async fn press(app: &mut App, f: &Fixture, k: Msg) {
    let fx = app.update(k);
    let operator = app.operator.clone();
    settle_effects(app, &f.ledger, fx, &operator).await;
}

fn render(app: &App, w: u16, h: u16) -> String {
    let mut term = Terminal::new(TestBackend::new(w, h)).unwrap();
    term.draw(|f| ui::draw(f, app, &Theme { color: false }))
        .unwrap();
    let buf = term.backend().buffer().clone();
    let mut out = String::new();
    for y in 0..buf.area.height {
        let line: String = (0..buf.area.width)
            .map(|x| buf[(x, y)].symbol().to_string())
            .collect();
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

fn key(c: char) -> Msg {
    Msg::Key(KeyEvent::new(KeyCode::Char(c), KeyModifiers::NONE))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn snapshots_of_the_exception_view_and_detail() {
    let f = incident().await;
    let app = console(&f, "alice").await;
    assert_eq!(
        app.rows.first().map(|r| r.key.as_str()),
        Some("onb-42-task")
    );
    assert!(app.detail.is_some(), "the first row's detail is loaded");
    insta::assert_snapshot!("exceptions_80x24", render(&app, 80, 24));
    insta::assert_snapshot!("exceptions_160x48", render(&app, 160, 48));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn snapshots_of_the_other_views() {
    let f = incident().await;
    for (c, name) in [
        ('2', "mine"),
        ('3', "in_progress"),
        ('4', "closed"),
        ('5', "activity"),
    ] {
        let mut app = console(&f, "alice").await;
        press(&mut app, &f, key(c)).await;
        assert!(!app.loading, "{name}: loaded");
        insta::assert_snapshot!(format!("{name}_80x24"), render(&app, 80, 24));
        insta::assert_snapshot!(format!("{name}_160x48"), render(&app, 160, 48));
        if c == '4' {
            // the closed one's detail
            press(&mut app, &f, key('j')).await;
            assert_eq!(
                app.detail.as_ref().map(|d| d.op.key.as_str()),
                Some("crm-sync-9001")
            );
            insta::assert_snapshot!("closed_detail_160x48", render(&app, 160, 48));
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn snapshots_of_the_help_and_a_confirmation() {
    let f = incident().await;
    let mut app = console(&f, "alice").await;
    press(&mut app, &f, key('?')).await;
    let help = render(&app, 80, 24);
    for b in settle::console::keymap::KEYMAP
        .iter()
        .filter(|b| app.in_view(b))
    {
        assert!(
            help.contains(b.help),
            "{:?} cut or missing at 80x24:\n{help}",
            b.help
        );
    }
    assert!(help.contains("any key closes this help"), "{help}");
    insta::assert_snapshot!("help_80x24", help);
    insta::assert_snapshot!("help_160x48", render(&app, 160, 48));
    // Activity's help: its own keys, none of the lists' actions
    let mut app = console(&f, "alice").await;
    press(&mut app, &f, key('5')).await;
    press(&mut app, &f, key('?')).await;
    let help = render(&app, 80, 24);
    assert!(help.contains("open the event's operation"), "{help}");
    assert!(!help.contains("release your claim"), "{help}");
    // a viewer's help lists no action key, an operator's no lead's key (manual: Running settle for a team)
    let mut app = console(&f, "alice").await;
    app.role = settle::domain::Role::Viewer;
    press(&mut app, &f, key('?')).await;
    let help = render(&app, 80, 24);
    assert!(
        help.contains("a viewer reads, and acts on nothing"),
        "{help}"
    );
    for gone in ["claim the item", "close:", "Space", "pause", "reveal"] {
        assert!(!help.contains(gone), "{gone} offered to a viewer:\n{help}");
    }
    insta::assert_snapshot!("help_viewer_80x24", help);
    let mut app = console(&f, "alice").await;
    app.role = settle::domain::Role::Operator;
    press(&mut app, &f, key('?')).await;
    let help = render(&app, 80, 24);
    assert!(help.contains("claim the item"), "{help}");
    for gone in ["take over", "pause", "reveal"] {
        assert!(
            !help.contains(gone),
            "{gone} offered to an operator:\n{help}"
        );
    }
    let mut app = console(&f, "alice").await;
    press(&mut app, &f, key('c')).await;
    insta::assert_snapshot!("confirm_claim_80x24", render(&app, 80, 24));
}

const SECRETS: [&str; 6] = [
    "ada@example.com",
    "4111111111111111",
    "abc.def-123",
    "+44 7700 900123",
    "Zebulon Quixote",
    "sk_live_c0ffee",
];

/// Feeds the app what the real ledger answers for each effect (no terminal, real database).
async fn settle_effects(app: &mut App, ledger: &Ledger, mut fx: Vec<Effect>, operator: &str) {
    for _ in 0..20 {
        let mut next = Vec::new();
        for e in fx {
            if let Some(msg) = run_effect(ledger, e, operator).await {
                next.extend(app.update(msg));
            }
        }
        if next.is_empty() {
            return;
        }
        fx = next;
    }
}

/// Characters that must never reach a terminal raw: C0 controls (ESC, BEL), a C1 control (CSI),
/// bidi overrides and isolates, zero-width characters. ratatui itself drops the C0 controls, but
/// not the others: the console must show them all escaped.
const HOSTILE: &str = "\u{1b}]0;owned\u{7}\u{1b}[2J \u{9b}31m \u{202e}evil \u{2066}iso \u{200b}zw";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_screen_shows_a_secret_or_a_raw_escape() {
    let db = common::sqlite();
    let ledger = Ledger::open(&db.url, common::config()).await.unwrap();
    let payload = json!({"customer": {"name": "Zebulon Quixote", "contact": "ada@example.com", "phone": "+44 7700 900123"},
        "memo": "card 4111111111111111", "headers": {"auth": "Bearer abc.def-123"}, "api_key": "sk_live_c0ffee",
        "title": "\u{1b}]0;owned\u{7}\u{1b}[2J"});
    // the configured field (customer.name) is configured for crm: every item goes there
    let (workflow, bob) = ("crm-sync", "bob");
    for i in 0..3 {
        let key = format!("sec-{i}");
        ledger
            .record(
                &Intent {
                    key: key.clone(),
                    workflow: workflow.into(),
                    step: "upsert".into(),
                    destination: "crm".into(),
                    action: "upsert".into(),
                    payload: payload.clone(),
                    run: None,
                },
                "bot",
            )
            .await
            .unwrap();
        let err = format!(
            "502: Zebulon Quixote ada@example.com +44 7700 900123 Bearer abc.def-123 4111111111111111 api_key=sk_live_c0ffee {HOSTILE}"
        );
        ledger
            .report_attempt(
                &AttemptReport {
                    key: key.clone(),
                    outcome: Some(Outcome::Unknown),
                    error: Some(err),
                    ..Default::default()
                },
                "bot",
            )
            .await
            .unwrap();
        ledger
            .staff()
            .act(
                &key,
                bob,
                StaffAction::Note {
                    text: format!("called ada@example.com at +44 7700 900123 {HOSTILE}"),
                },
            )
            .await
            .unwrap();
    }
    ledger
        .staff()
        .act("sec-1", bob, StaffAction::Claim { force_reason: None })
        .await
        .unwrap();
    // settle refuses such names, but automations may write the ledger with plain SQL (manual: the manual),
    // and a database may hold rows from before: the console must still show them escaped
    {
        let mut c = common::Raw::connect(&db.url).await;
        c.execute_with(
            "UPDATE operations SET workflow = $1",
            &["crm-sync\u{202e}x"],
        )
        .await
        .unwrap();
        c.execute_with(
            "UPDATE operations SET claimed_by = $1 WHERE key = 'sec-1'",
            &["bob\u{2066}\u{200b}"],
        )
        .await
        .unwrap();
    }
    let mut app = App::new(ledger.database(), "alice");
    let fx = app.start();
    settle_effects(&mut app, &ledger, fx, "alice").await;
    let mut screens = Vec::new();
    for view in ['1', '2', '3', '4', '5', '1'] {
        let fx = app.update(key(view));
        settle_effects(&mut app, &ledger, fx, "alice").await;
        for _ in 0..3 {
            // every row's detail pane
            for (w, h) in [(80, 24), (160, 48)] {
                screens.push(render(&app, w, h));
            }
            let fx = app.update(key('j'));
            settle_effects(&mut app, &ledger, fx, "alice").await;
        }
    }
    assert!(
        screens.iter().any(|s| s.contains("sec-0")),
        "the items were shown"
    );
    assert!(screens.iter().any(|s| s.contains("[redacted]")));
    // each stored text shows its hostile characters escaped, not dropped: the error text (in the
    // detail's state line and attempts), the note (in the notes line), the workflow (list and
    // detail) and the operator's name (the claim)
    let shown = |what: &str, escaped: &str| {
        assert!(
            screens.iter().any(|s| s.contains(escaped)),
            "{what} shown escaped as {escaped:?}; screens:\n{}",
            screens.join("\n")
        );
    };
    let hostile_escaped =
        "\\x1b]0;owned\\x07\\x1b[2J \\x9b31m \\u{202e}evil \\u{2066}iso \\u{200b}zw";
    shown(
        "the error text",
        "api_key=[redacted] \\x1b]0;owned\\x07\\x1b[2J \\x9b31m \\u{202e}evil",
    );
    // the note, in the detail's notes line (manual: The console: before the attempts and the payload)
    shown(
        "the note",
        &format!("bob: called [redacted] at [redacted] {hostile_escaped}"),
    );
    shown("the workflow", "crm-sync\\u{202e}x/upsert");
    shown("the claim holder", "bob\\u{2066}\\u{200b}");
    for s in &screens {
        for secret in SECRETS {
            assert!(!s.contains(secret), "{secret} on screen:\n{s}");
        }
        for raw in [
            '\u{1b}', '\u{7}', '\u{9b}', '\u{202e}', '\u{2066}', '\u{200b}',
        ] {
            assert!(!s.contains(raw), "{:?} reached the screen raw:\n{s}", raw);
        }
    }
}

/// A paused destination (manual: Destinations and the dispatcher: paused by an `auth` answer, or by hand) shows in the header
/// beside the paused workflows, spelled as the filter spells it, and its pause in Activity.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_paused_destination_shows_in_the_header_and_the_activity() {
    let f = incident().await;
    let paused = f
        .ledger
        .staff()
        .pause_one(
            settle::ledger::Pausable::Destination,
            "crm",
            "token rotation",
            "bob",
        )
        .await
        .unwrap();
    assert!(paused);
    let mut app = console(&f, "alice").await;
    let wide = render(&app, 160, 48);
    let header = wide.lines().next().unwrap();
    assert!(header.contains("PAUSED: crm-sync, dest:crm"), "{header}");
    let narrow = render(&app, 80, 24);
    assert!(
        narrow.lines().next().unwrap().contains("PAUSED"),
        "{narrow}"
    );
    press(&mut app, &f, key('5')).await;
    let activity = render(&app, 160, 48);
    assert!(
        activity
            .lines()
            .any(|l| l.contains("dest:crm") && l.contains("paused")),
        "{activity}"
    );
}

/// A destination whose breaker is open shows in the header
/// (manual: Recovery that follows the destination), at 80 columns as wider; held by a person, it says so rather than a probe.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_destination_down_shows_in_the_header() {
    let f = incident().await;
    (f.ledger.staff())
        .set_breaker("crm", true, "their maintenance", "bob")
        .await
        .unwrap();
    let app = console(&f, "alice").await;
    let header = render(&app, 160, 48).lines().next().unwrap().to_string();
    assert!(header.contains("DOWN: crm, held by hand"), "{header}");
    let narrow = render(&app, 80, 24).lines().next().unwrap().to_string();
    assert!(narrow.contains("DOWN"), "{narrow}");
    assert!(narrow.chars().count() <= 80, "{narrow}");
}

/// Read from a replica that lags more than five seconds, the header says by how much, at 80
/// columns as wider, and keeps the rest; five seconds or less, it says nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lagging_replica_shows_in_the_header() {
    let f = incident().await;
    let mut app = console(&f, "alice").await;
    app.header.replica_lag = Some(5);
    let header = render(&app, 80, 24).lines().next().unwrap().to_string();
    assert!(
        !header.contains("lag") && !header.contains("behind"),
        "{header}"
    );
    app.header.replica_lag = Some(42);
    let header = render(&app, 80, 24).lines().next().unwrap().to_string();
    assert!(header.contains("lag 42s"), "{header}");
    for element in ["exc", "unk", "disp ok"] {
        assert!(header.contains(element), "{element:?} missing: {header}");
    }
    assert!(header.chars().count() <= 80, "{header}");
    let header = render(&app, 160, 48).lines().next().unwrap().to_string();
    assert!(header.contains("replica 42s behind"), "{header}");
}

/// The console: 80x24 is the design size. The header keeps every element (abbreviated, never
/// dropped) and every list row shows age, state, destination and key.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn at_80x24_the_header_and_rows_keep_what_on_call_needs() {
    let f = incident().await;
    f.ledger
        .staff()
        .pause_one(
            settle::ledger::Pausable::Destination,
            "crm",
            "token rotation",
            "bob",
        )
        .await
        .unwrap();
    let app = console(&f, "alice").await;
    let screen = render(&app, 80, 24);
    let header = screen.lines().next().unwrap();
    for element in [
        "4 exc",
        "1 unk",
        "old",
        "2d",
        "PAUSED: crm-sync",
        "dest:crm",
        "disp ok",
    ] {
        assert!(header.contains(element), "{element:?} missing: {header}");
    }
    assert!(header.chars().count() <= 80, "{header}");
    let lines: Vec<&str> = screen.lines().collect();
    let title = lines[2];
    for column in ["AGE", "STATE", "DEST", "KEY", "SAFE NEXT STEP"] {
        assert!(title.contains(column), "{column} missing: {title}");
    }
    let mut checked = 0;
    for (row, v) in lines[3..].iter().zip(&app.rows) {
        if row.starts_with(" ") || row.is_empty() {
            break; // the detail pane's border
        }
        checked += 1;
        for text in [v.state.as_str(), v.destination.as_str()] {
            assert!(row.contains(text), "{text} missing: {row}");
        }
        let key: String = v.key.chars().take(15).collect();
        assert!(row.contains(&key), "{key} missing: {row}");
    }
    assert!(checked >= 3, "rows were drawn: {screen}");
    // a reversed sort keeps its label whole: the tabs shorten their titles instead
    let mut app = app;
    app.reverse = true;
    let tabs = render(&app, 80, 24).lines().nth(1).unwrap().to_string();
    // reversed: the youngest first, ages rising down the list
    assert!(tabs.ends_with("sort: age ↑"), "{tabs}");
    assert!(tabs.contains("[1 Exc "), "{tabs}");
}

/// The console: the detail pane puts first what a person acts on (next step, state, error, claim,
/// notes, resolution), then the attempts, then the payload, then the history; scrolling stops at
/// its end instead of running into a blank pane.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_detail_pane_leads_with_what_to_act_on_and_scrolls_to_its_end() {
    let f = incident().await;
    let mut app = console(&f, "alice").await;
    let wide = render(&app, 160, 48);
    let at = |label: &str| {
        wide.lines()
            .position(|l| l.starts_with(label))
            .unwrap_or_else(|| panic!("{label} missing:\n{wide}"))
    };
    assert!(at("next ") < at("state "));
    assert!(at("state ") < at("attempts "));
    assert!(at("attempts ") < at("payload "));
    assert!(at("payload ") < at("history "));
    app.detail_scroll = 500;
    let scrolled = render(&app, 80, 24);
    let detail: Vec<&str> = scrolled.lines().skip(14).take(7).collect();
    assert!(
        detail.iter().any(|l| !l.trim().is_empty()),
        "scrolled past the end into a blank pane:\n{scrolled}"
    );
}

/// The console: a filter that is on says so in the header, with how many of the view it keeps.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_filter_shows_in_the_header_with_n_of_m() {
    let f = incident().await;
    let mut app = console(&f, "alice").await;
    press(&mut app, &f, key('/')).await;
    for c in "dest:crm".chars() {
        press(&mut app, &f, key(c)).await;
    }
    press(
        &mut app,
        &f,
        Msg::Key(KeyEvent::new(KeyCode::Enter, KeyModifiers::NONE)),
    )
    .await;
    let crm = app.rows.iter().filter(|r| r.destination == "crm").count();
    assert!(crm > 0 && crm == app.rows.len(), "the list holds crm only");
    let total = app.header.stats.as_ref().unwrap().exceptions;
    let wide = render(&app, 160, 48);
    let header = wide.lines().next().unwrap();
    assert!(
        header.contains(&format!("filter: dest:crm {crm} of {total}")),
        "{header}"
    );
    // at 80x24 too, the filter itself stays: the rest abbreviates first
    let narrow = render(&app, 80, 24);
    let header = narrow.lines().next().unwrap();
    assert!(
        header.contains(&format!("/dest:crm {crm} of {total}")),
        "{header}"
    );
    // bare words are not counted (a match inside a redacted value must not count): "shown"
    press(&mut app, &f, key('/')).await;
    press(&mut app, &f, key(' ')).await;
    press(&mut app, &f, key('c')).await;
    press(
        &mut app,
        &f,
        Msg::Key(KeyEvent::new(KeyCode::Enter, KeyModifiers::NONE)),
    )
    .await;
    let header = render(&app, 160, 48).lines().next().unwrap().to_string();
    assert!(header.contains("shown"), "{header}");
}

fn press_code(c: KeyCode) -> Msg {
    Msg::Key(KeyEvent::new(c, KeyModifiers::NONE))
}

async fn type_text(app: &mut App, f: &Fixture, text: &str) {
    for c in text.chars() {
        press(app, f, key(c)).await;
    }
}

/// The console: the detail pane can be shown full-screen, and the filter that is on is drawn.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn snapshots_of_the_full_screen_detail_and_an_active_filter() {
    let f = incident().await;
    let mut app = console(&f, "alice").await;
    press(&mut app, &f, press_code(KeyCode::Enter)).await;
    let split = render(&app, 80, 24);
    press(&mut app, &f, press_code(KeyCode::Enter)).await;
    let full = render(&app, 80, 24);
    assert!(
        full.lines().filter(|l| !l.is_empty()).count()
            > split.lines().filter(|l| !l.is_empty()).count()
            && !full.contains("SAFE NEXT STEP"),
        "full screen hides the list:\n{full}"
    );
    insta::assert_snapshot!("detail_split_80x24", split);
    insta::assert_snapshot!("detail_full_80x24", full);
    press(&mut app, &f, press_code(KeyCode::Esc)).await;
    assert!(
        render(&app, 80, 24).contains("SAFE NEXT STEP"),
        "Esc returns to the list"
    );

    let mut app = console(&f, "alice").await;
    press(&mut app, &f, key('/')).await;
    type_text(&mut app, &f, "state:unknown,failed").await;
    insta::assert_snapshot!("filter_typing_80x24", render(&app, 80, 24));
    press(&mut app, &f, press_code(KeyCode::Enter)).await;
    insta::assert_snapshot!("filter_active_80x24", render(&app, 80, 24));
}

/// The manual's Many at once in the console: `A` marks the whole matching set, an action key freezes it and shows
/// the ledger's preview grouped by reason; `y` acts on each eligible item (one event each, one
/// batch id), a progress bar counts, and what another holds is left alone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn marks_a_bulk_preview_and_its_progress() {
    let f = incident().await;
    let mut app = console(&f, "alice").await;
    let exceptions = app.rows.len();
    let held_by_bob: Vec<String> = app
        .rows
        .iter()
        .filter(|r| r.claimed_by.as_deref().is_some_and(|b| b != "alice"))
        .map(|r| r.key.clone())
        .collect();
    assert!(
        !held_by_bob.is_empty(),
        "the fixture has items another holds"
    );
    // Space marks one and moves on; A marks the whole view; A again unmarks all
    press(&mut app, &f, key(' ')).await;
    assert_eq!((app.marks.len(), app.selected), (1, 1));
    press(&mut app, &f, key('A')).await;
    assert!(app.marks.is_empty(), "A with marks unmarks them");
    press(&mut app, &f, key('A')).await;
    assert_eq!(app.marks.len(), exceptions);
    let screen = render(&app, 80, 24);
    assert!(
        screen
            .lines()
            .next()
            .unwrap()
            .contains(&format!("{exceptions} marked")),
        "{screen}"
    );
    assert!(screen.lines().nth(3).unwrap().contains('✓'), "{screen}");
    insta::assert_snapshot!("marked_80x24", screen);
    // close them all as abandoned: no "done elsewhere" in bulk (it needs a reference each)
    press(&mut app, &f, key('x')).await;
    let choose = render(&app, 80, 24);
    assert!(!choose.contains("done elsewhere"), "{choose}");
    press(&mut app, &f, key('3')).await;
    type_text(&mut app, &f, "outage cleanup").await;
    press(&mut app, &f, press_code(KeyCode::Enter)).await;
    let preview = render(&app, 80, 24);
    assert!(
        preview.contains(&format!(
            "close {exceptions}: {} will be done",
            exceptions - held_by_bob.len()
        )),
        "{preview}"
    );
    assert!(preview.contains("claimed by another"), "{preview}");
    insta::assert_snapshot!("bulk_preview_80x24", preview);
    // confirm; the progress bar as the first progress arrives
    let fx = app.update(key('y'));
    let Some(settle::console::app::Effect::BulkApply { keys, .. }) = fx.first().cloned() else {
        panic!("y starts the bulk action: {fx:?}");
    };
    assert_eq!(keys.len(), exceptions - held_by_bob.len());
    app.update(Msg::BulkProgress {
        done: 1,
        total: keys.len(),
    });
    let progress = render(&app, 80, 24);
    assert!(
        progress.contains(&format!("1 of {} · close · Esc stops", keys.len())),
        "{progress}"
    );
    insta::assert_snapshot!("bulk_progress_80x24", progress);
    settle_effects(&mut app, &f.ledger, fx, "alice").await;
    assert!(app.bulk.is_none(), "done");
    let (status, _) = app.status.line.clone().unwrap();
    assert!(
        status.starts_with(&format!("close: {} done (batch b-", keys.len())),
        "{status}"
    );
    assert_eq!(
        app.marks.len(),
        held_by_bob.len(),
        "what was left alone stays marked"
    );
    // every acted item holds exactly one close event, all with the same batch id
    let mut batches = std::collections::BTreeSet::new();
    for k in &keys {
        let d = f.ledger.read().show(k, "alice").await.unwrap();
        let closes: Vec<_> = d.history.iter().filter(|e| e.kind == "closed").collect();
        assert_eq!(closes.len(), 1, "{k}: {closes:?}");
        batches.insert(closes[0].detail["batch"].as_str().unwrap().to_string());
    }
    assert_eq!(batches.len(), 1, "{batches:?}");
    for k in &held_by_bob {
        let d = f.ledger.read().show(k, "alice").await.unwrap();
        assert!(d.op.state.is_exception(), "{k} left alone");
    }
}

/// The console: Activity is a list like the others: people's actions by default (`a` adds
/// automation's), `/actor:bob` filters, rows are selectable, `Enter` opens the operation, and the
/// detail reads as words, not JSON.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn activity_filters_by_actor_and_opens_the_operation() {
    let f = incident().await;
    let mut app = console(&f, "alice").await;
    press(&mut app, &f, key('5')).await;
    assert!(!app.activity.is_empty());
    assert!(
        app.activity.iter().all(|e| !e.is_automation()),
        "people's actions only by default"
    );
    let people = app.activity.len();
    press(&mut app, &f, key('a')).await;
    assert!(app.activity.len() > people, "a shows automation's too");
    assert!(app.activity.iter().any(|e| e.actor == "dispatcher"));
    press(&mut app, &f, key('a')).await;
    press(&mut app, &f, key('/')).await;
    type_text(&mut app, &f, "actor:bob").await;
    press(&mut app, &f, press_code(KeyCode::Enter)).await;
    assert!(!app.activity.is_empty());
    assert!(
        app.activity.iter().all(|e| e.actor == "bob"),
        "{:?}",
        app.activity
    );
    let screen = render(&app, 80, 24);
    assert!(
        !screen.contains('{'),
        "detail as words, not JSON:\n{screen}"
    );
    insta::assert_snapshot!("activity_bob_80x24", screen);
    // the newest of bob's events that is an operation's: Enter opens it
    while app.opened().is_none() {
        press(&mut app, &f, key('j')).await;
    }
    let key_opened = app.opened().unwrap().to_string();
    press(&mut app, &f, press_code(KeyCode::Enter)).await;
    assert_eq!(
        app.detail.as_ref().map(|d| d.op.key.clone()),
        Some(key_opened.clone())
    );
    let opened = render(&app, 80, 24);
    assert!(opened.contains(&format!(" {key_opened} ")), "{opened}");
    assert!(opened.contains("next "), "{opened}");
    press(&mut app, &f, press_code(KeyCode::Esc)).await;
    assert!(
        render(&app, 80, 24).contains("ACTOR"),
        "Esc returns to Activity"
    );
}

/// The console: a change by another writer shows within the poll, without moving the selection, and
/// the changed row is highlighted briefly.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_change_by_another_writer_is_highlighted() {
    let f = incident().await;
    let mut app = console(&f, "alice").await;
    press(&mut app, &f, Msg::Polled(Ok(1))).await;
    let selected = app.selected_row().unwrap().key.clone();
    let other = app
        .rows
        .iter()
        .find(|r| r.key != selected && r.claimed_by.is_none())
        .unwrap()
        .key
        .clone();
    assert!(app.changed.is_empty());
    f.at(TimeDelta::zero())
        .staff()
        .act(&other, "carol", StaffAction::Claim { force_reason: None })
        .await
        .unwrap();
    let latest = f.ledger.read().latest_event_id().await.unwrap();
    press(&mut app, &f, Msg::Polled(Ok(latest))).await;
    assert_eq!(
        app.selected_row().unwrap().key,
        selected,
        "the selection stays"
    );
    assert_eq!(app.changed.keys().collect::<Vec<_>>(), [&other]);
    assert!(
        app.rows
            .iter()
            .any(|r| r.key == other && r.claimed_by.as_deref() == Some("carol"))
    );
}

/// Incidents: `Esc` stops a bulk action between two items: what is done stays done, the rest is
/// untouched, and the summary says which.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn esc_stops_a_bulk_action_between_items() {
    let f = incident().await;
    let mut app = console(&f, "alice").await;
    press(&mut app, &f, key('A')).await;
    let marked = app.marks.len();
    press(&mut app, &f, key('n')).await;
    type_text(&mut app, &f, "outage").await;
    press(&mut app, &f, press_code(KeyCode::Enter)).await;
    let fx = app.update(key('y'));
    let Some(Effect::BulkApply { keys, stop, .. }) = fx.first().cloned() else {
        panic!("y starts the bulk action: {fx:?}");
    };
    assert!(keys.len() > 1);
    // Esc before the first item is reached: the flag the effect checks between items
    app.update(press_code(KeyCode::Esc));
    assert!(
        stop.0.load(std::sync::atomic::Ordering::SeqCst),
        "Esc stops it"
    );
    assert!(
        app.bulk.is_some(),
        "still under way until the effect answers"
    );
    let before: Vec<usize> = {
        let mut n = Vec::new();
        for k in &keys {
            n.push(
                f.ledger
                    .read()
                    .show(k, "alice")
                    .await
                    .unwrap()
                    .history
                    .len(),
            );
        }
        n
    };
    settle_effects(&mut app, &f.ledger, fx, "alice").await;
    let (status, error) = app.status.line.clone().unwrap();
    assert!(
        status.contains(&format!("stopped: {} not reached, untouched", keys.len())),
        "{status}"
    );
    assert!(error, "a stopped action is said as such");
    for (k, n) in keys.iter().zip(before) {
        let d = f.ledger.read().show(k, "alice").await.unwrap();
        assert_eq!(d.history.len(), n, "{k} untouched");
    }
    assert_eq!(app.marks.len(), marked, "what was not reached stays marked");
}

/// The manual's Running settle for a team in the console: a viewer's footer and help offer no action key and pressing one
/// changes nothing; an operator is offered neither `P` nor `C`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_footer_offers_only_what_the_role_allows() {
    use settle::domain::{Identity, Role};
    let f = incident().await;
    for role in [Role::Viewer, Role::Operator] {
        let ledger = f.ledger.for_session(Identity {
            name: "alice".into(),
            role,
            fingerprint: "SHA256:k".into(),
        });
        let mut app = App::new("sqlite://settle.db", "alice");
        app.role = role;
        app.now = t(NOW);
        app.update(Msg::Resized { rows: 20 });
        let fx = app.start();
        settle_effects(&mut app, &ledger, fx, "alice").await;
        let screen = render(&app, 160, 48);
        let footer = screen.lines().last().unwrap().to_string();
        assert!(
            !footer.contains("P pause") && !footer.contains("C take over"),
            "{role}: {footer}"
        );
        if role == Role::Viewer {
            for action in ["c claim", "R retry", "x close", "n note", "Space mark"] {
                assert!(!footer.contains(action), "{role}: {footer}");
            }
            let before = f
                .ledger
                .read()
                .show(&app.rows[0].key, "alice")
                .await
                .unwrap()
                .history
                .len();
            for k in ['c', 'R', 'x', 'n', 'P', ' ', 'A'] {
                let fx = app.update(key(k));
                settle_effects(&mut app, &ledger, fx, "alice").await;
                assert!(
                    matches!(app.mode, settle::console::app::Mode::Normal),
                    "{k}"
                );
            }
            assert!(app.marks.is_empty());
            let after = f
                .ledger
                .read()
                .show(&app.rows[0].key, "alice")
                .await
                .unwrap()
                .history
                .len();
            assert_eq!(before, after, "nothing written");
        } else {
            assert!(footer.contains("c claim"), "{role}: {footer}");
        }
    }
}

/// The manual's Redaction in the console: a lead focuses the detail pane, `v`, picks a redacted field, gives a
/// reason, confirms: the value shows on that pane only, and goes when the pane closes; an
/// operator is told it is a lead's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lead_reveals_a_field_on_the_detail_pane_only() {
    let f = incident().await;
    let mut app = console(&f, "alice").await;
    let key0 = app.rows[0].key.clone();
    assert!(render(&app, 160, 48).contains("[redacted]"));
    press(&mut app, &f, press_code(KeyCode::Enter)).await;
    assert!(
        render(&app, 80, 24).contains("v reveal"),
        "offered in the detail pane"
    );
    press(&mut app, &f, key('v')).await;
    let choose = render(&app, 80, 24);
    assert!(choose.contains("1 customer.email"), "{choose}");
    press(&mut app, &f, key('1')).await;
    type_text(&mut app, &f, "customer on the phone").await;
    press(&mut app, &f, press_code(KeyCode::Enter)).await;
    press(&mut app, &f, key('y')).await;
    let shown = render(&app, 160, 48);
    let line = shown
        .lines()
        .find(|l| l.starts_with("revealed"))
        .unwrap_or_else(|| panic!("no revealed line:\n{shown}"));
    assert!(
        line.contains("customer.email = ") && !line.contains("[redacted"),
        "{line}"
    );
    let d = f.ledger.read().show(&key0, "alice").await.unwrap();
    assert_eq!(d.history.last().unwrap().kind, "revealed");
    press(&mut app, &f, press_code(KeyCode::Esc)).await;
    assert!(app.revealed.is_none(), "gone when the pane closes");
    assert!(
        !render(&app, 160, 48)
            .lines()
            .any(|l| l.starts_with("revealed"))
    );
    // an operator is told it is a lead's
    app.role = settle::domain::Role::Operator;
    press(&mut app, &f, press_code(KeyCode::Enter)).await;
    press(&mut app, &f, key('v')).await;
    assert!(app.status.line.as_ref().unwrap().0.contains("for a lead"));
}

/// Which cells carry a colour: per row, runs of columns with the same non-default foreground or
/// background (what NO_COLOR takes away).
fn render_colours(app: &App, w: u16, h: u16) -> String {
    let mut term = Terminal::new(TestBackend::new(w, h)).unwrap();
    term.draw(|f| ui::draw(f, app, &Theme { color: true }))
        .unwrap();
    let buf = term.backend().buffer().clone();
    let mut out = String::new();
    for y in 0..buf.area.height {
        let mut runs: Vec<(u16, u16, String)> = Vec::new();
        for x in 0..buf.area.width {
            let c = &buf[(x, y)];
            let style = format!("{:?}/{:?}", c.fg, c.bg);
            if style == "Reset/Reset" {
                continue;
            }
            match runs.last_mut() {
                Some((_, end, s)) if *end + 1 == x && *s == style => *end = x,
                _ => runs.push((x, x, style)),
            }
        }
        if !runs.is_empty() {
            let runs: Vec<String> = runs
                .iter()
                .map(|(a, b, s)| format!("{a}-{b} {s}"))
                .collect();
            out.push_str(&format!("{y}: {}\n", runs.join(", ")));
        }
    }
    out
}

/// the view 6: the review at 80x24 and 160x48, its colours (and
/// the plain text NO_COLOR gives: every `render` here is without colour), the window keys, and
/// the review following a workflow filter.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn snapshots_of_the_review() {
    let f = incident().await;
    let mut app = console(&f, "alice").await;
    press(&mut app, &f, key('6')).await;
    assert!(
        app.review.shown.is_some() && app.review.seq.is_none(),
        "loaded"
    );
    let text = render(&app, 80, 24);
    assert!(
        text.contains("Review · last 7 days · all workflows"),
        "{text}"
    );
    assert!(text.contains("duplicates"), "{text}");
    insta::assert_snapshot!("review_80x24", text);
    insta::assert_snapshot!("review_160x48", render(&app, 160, 48));
    let colours = render_colours(&app, 80, 24);
    assert!(!colours.is_empty(), "the bars and tables have colours");
    insta::assert_snapshot!("review_80x24_colours", colours);
    // j scrolls the tables (manual: The review after a release: they may hold more than 80x24 fits), k back
    press(&mut app, &f, key('j')).await;
    let scrolled = render(&app, 80, 24);
    assert!(scrolled.contains("workflow (↑1)"), "{scrolled}");
    assert!(
        !scrolled.contains("crm-sync   "),
        "the first row scrolled away: {scrolled}"
    );
    press(&mut app, &f, key('k')).await;
    assert_eq!(render(&app, 80, 24), text);
    // ] and [ switch the window
    press(&mut app, &f, key(']')).await;
    assert!(render(&app, 80, 24).contains("last 30 days"));
    press(&mut app, &f, key('[')).await;
    press(&mut app, &f, key('[')).await;
    assert!(render(&app, 80, 24).contains("last 1 day "));
    // a workflow filter set on a list: the review follows it
    let mut app = console(&f, "alice").await;
    press(&mut app, &f, key('/')).await;
    for c in "wf:onboarding".chars() {
        press(&mut app, &f, key(c)).await;
    }
    press(
        &mut app,
        &f,
        Msg::Key(KeyEvent::new(KeyCode::Enter, KeyModifiers::NONE)),
    )
    .await;
    press(&mut app, &f, key('6')).await;
    let review = app.review.shown.as_ref().unwrap();
    assert_eq!(
        review.by_workflow.keys().collect::<Vec<_>>(),
        vec!["onboarding"]
    );
    let text = render(&app, 80, 24);
    assert!(text.contains("workflow onboarding"), "{text}");
    insta::assert_snapshot!("review_onboarding_80x24", text);
}

/// The console: a refusal is shown whole, wrapped: at 80x24 a status too long for its line takes the
/// footer's line too, until it clears.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_refusal_is_shown_whole_at_80x24() {
    let f = incident().await;
    let mut app = console(&f, "alice").await;
    let held = app
        .rows
        .iter()
        .position(|r| r.claimed_by.as_deref().is_some_and(|b| b != "alice"))
        .expect("the fixture has an item another holds");
    for _ in 0..held {
        press(&mut app, &f, key('j')).await;
    }
    let row = app.rows[held].clone();
    press(&mut app, &f, key('x')).await;
    let (text, error) = app.status.line.clone().expect("a refusal");
    assert!(error && text.chars().count() > 80, "{text}");
    let screen = render(&app, 80, 24);
    let bottom: Vec<&str> = screen.lines().skip(22).take(2).collect();
    let joined = bottom
        .iter()
        .map(|l| l.trim())
        .collect::<Vec<_>>()
        .join(" ");
    assert!(
        joined.contains(&row.key) && joined.ends_with(text.split_whitespace().last().unwrap()),
        "the whole refusal on the last two lines:\n{screen}"
    );
    // once it clears, the footer is back
    app.status.line = None;
    let screen = render(&app, 80, 24);
    assert!(
        screen.lines().nth(23).unwrap().contains("q quit"),
        "{screen}"
    );
}

/// Rows that an older settle recorded with names outside today's alphabet (two columns a
/// character, quotes) and an operator named in two-column characters keep view 1's columns in
/// line at 80 and at 120 columns: every row's key starts in the header's KEY column.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wide_names_keep_the_columns_at_80_and_120() {
    let f = Fixture::new("[destinations.crm]\n").await;
    for (i, key) in ["wide-1", "wide-2", "plain-3"].into_iter().enumerate() {
        f.record(
            mins(30 - i as i64),
            key,
            "onboarding",
            "create-task",
            "crm",
            task("T"),
        )
        .await;
        f.at(mins(29 - i as i64))
            .report_attempt(
                &AttemptReport {
                    key: key.into(),
                    outcome: Some(Outcome::Rejected),
                    error: Some("bad".into()),
                    ..Default::default()
                },
                "bot",
            )
            .await
            .unwrap();
    }
    let mut raw = common::Raw::connect(&f._db.url).await;
    raw.execute("UPDATE operations SET workflow = '数据同步服务', destination = 'ü?\"' WHERE key = 'wide-1'")
        .await
        .unwrap();
    raw.execute("UPDATE operations SET step = '日本語テキスト処理', destination = '数据' WHERE key = 'wide-2'")
        .await
        .unwrap();
    f.at(mins(1))
        .staff()
        .act("wide-2", "李雷", StaffAction::Claim { force_reason: None })
        .await
        .unwrap();
    let app = console(&f, "alice").await;
    for (w, h) in [(80, 24), (120, 30)] {
        let mut term = Terminal::new(TestBackend::new(w, h)).unwrap();
        term.draw(|fr| ui::draw(fr, &app, &Theme { color: false }))
            .unwrap();
        let buf = term.backend().buffer().clone();
        // where `text` starts on row `y`, in cells (a two-column character takes two)
        let at = |y: u16, text: &str| -> Option<u16> {
            let width = buf.area.width;
            (0..width).find(|&x| {
                text.chars().enumerate().all(|(i, c)| {
                    x + (i as u16) < width && buf[(x + i as u16, y)].symbol() == c.to_string()
                })
            })
        };
        let header = (0..h)
            .find(|&y| at(y, "KEY").is_some())
            .expect("the titles");
        let column = at(header, "KEY").unwrap();
        for key in ["wide-1", "wide-2", "plain-3"] {
            let y = (header + 1..h)
                .find(|&y| at(y, key).is_some())
                .unwrap_or_else(|| panic!("{key} is listed at {w}x{h}:\n{}", render(&app, w, h)));
            assert_eq!(
                at(y, key),
                Some(column),
                "{key} at {w}x{h}:\n{}",
                render(&app, w, h)
            );
        }
    }
}

/// A notification channel that cannot be reached shows in the header, abbreviated before it is
/// dropped, at 80x24 as at 160x48 (manual: Owners and notifications).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_channel_shows_in_the_header() {
    let f = incident().await;
    let mut app = console(&f, "alice").await;
    app.header.stats.as_mut().unwrap().notify_failing = vec!["growth-chat".into()];
    let wide = render(&app, 160, 48);
    let top = wide.lines().next().unwrap();
    assert!(top.contains("NOTIFY FAILING: growth-chat"), "{top}");
    let narrow = render(&app, 80, 24);
    let top = narrow.lines().next().unwrap();
    assert!(top.contains("NOTIFY FAILING"), "{top}");
    assert!(top.contains("exc"), "the exception count stays: {top}");
}

/// `e` at 80x24 (manual: Correcting a request): bob's rejected item, its fields with the redacted
/// name shown as `[redacted]`; a new name typed unseen, as dots, and never on the screen; the
/// confirmation names the fields and the correction's key.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_correction_form_at_80x24() {
    let f = incident().await;
    let mut app = console(&f, "bob").await;
    press(&mut app, &f, key('/')).await;
    type_text(&mut app, &f, "key:crm-sync-9005").await;
    press(&mut app, &f, press_code(KeyCode::Enter)).await;
    assert_eq!(
        app.selected_row().map(|r| r.key.as_str()),
        Some("crm-sync-9005")
    );
    press(&mut app, &f, key('e')).await;
    let form = render(&app, 80, 24);
    assert!(form.contains("customer.name = \"[redacted]\""), "{form}");
    assert!(!form.contains("Zoe Quist"), "{form}");
    insta::assert_snapshot!("correct_fields_80x24", form);
    let name = form
        .lines()
        .find(|l| l.contains("customer.name ="))
        .and_then(|l| {
            l.split_whitespace()
                .find(|w| w.len() == 1 && w.chars().all(|c| c.is_ascii_digit()))
        })
        .expect("the name's number")
        .chars()
        .next()
        .unwrap();
    press(&mut app, &f, key(name)).await;
    type_text(&mut app, &f, "Zed Secretname").await;
    let typing = render(&app, 80, 24);
    assert!(typing.contains("••••••••••••••"), "{typing}");
    assert!(!typing.contains("Secretname"), "{typing}");
    press(&mut app, &f, press_code(KeyCode::Enter)).await;
    press(&mut app, &f, key('d')).await;
    type_text(&mut app, &f, "the name was wrong").await;
    press(&mut app, &f, press_code(KeyCode::Enter)).await;
    let confirm = render(&app, 80, 24);
    assert!(confirm.contains("as crm-sync-9005:c2:"), "{confirm}");
    assert!(confirm.contains("customer.name → [redacted]"), "{confirm}");
    assert!(confirm.contains("y/Enter confirms"), "{confirm}");
    assert!(!confirm.contains("Secretname"), "{confirm}");
    insta::assert_snapshot!("correct_confirm_80x24", confirm);
    press(&mut app, &f, key('y')).await;
    let done = render(&app, 80, 24);
    assert!(!done.contains("Secretname"), "{done}");
    let made = f
        .ledger
        .read()
        .show("crm-sync-9005:c2", "bob")
        .await
        .unwrap();
    assert_eq!(made.op.corrects.as_deref(), Some("crm-sync-9005"));
    assert_eq!(made.payload["customer"]["name"], "[redacted]");
    // the lineage in the detail pane: the original, closed, names its correction
    press(&mut app, &f, key('4')).await;
    let closed = render(&app, 80, 24);
    assert!(
        closed.contains("corrected as crm-sync-9005:c2 (pending)"),
        "{closed}"
    );
    assert!(!closed.contains("Secretname"), "{closed}");
}
