//! What the console draws, on ratatui's TestBackend: snapshots of every view, the detail pane and
//! the help at 80x24 and 160x48; and, against a real database, that no screen shows a secret.

mod common;

use chrono::{DateTime, Utc};
use ratatui::Terminal;
use ratatui::backend::TestBackend;
use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use serde_json::json;
use settle::console::app::{App, Effect, Header, Msg, Place, View};
use settle::console::theme::Theme;
use settle::console::{run_effect, ui};
use settle::domain::next_step::StepKind;
use settle::ledger::{AttemptView, Cursor, EventView, OperationDetail, OperationView, Page, Stats};
use settle::{AttemptReport, Intent, Ledger, Outcome, State};

fn t(s: &str) -> DateTime<Utc> {
    DateTime::parse_from_rfc3339(s).unwrap().to_utc()
}

fn row(
    i: i64,
    key: &str,
    state: State,
    age: i64,
    claim: Option<&str>,
    next: &str,
) -> OperationView {
    OperationView {
        key: key.into(),
        state,
        workflow: if i % 2 == 0 {
            "onboarding".into()
        } else {
            "crm-sync".into()
        },
        step: if i % 2 == 0 {
            "create-task".into()
        } else {
            "upsert-customer".into()
        },
        destination: if i % 2 == 0 {
            "projects".into()
        } else {
            "crm".into()
        },
        action: "create_task".into(),
        created_at: t("2026-11-27T08:00:00Z"),
        age_seconds: age,
        attempts: 1,
        claimed_by: claim.map(Into::into),
        claim_expires_at: claim.map(|_| t("2026-11-29T10:30:00Z")),
        reference: None,
        next_step: next.into(),
        next_step_kind: StepKind::CheckDestination,
        exception_since: Some(t("2026-11-27T08:00:00Z")),
        next_attempt_at: None,
        reason: Some("read timeout after 30s".into()),
        last_error: Some("read timeout after 30s".into()),
        resolution: None,
        superseded_by: None,
        workflow_paused: i % 2 == 1,
        cursor: Cursor {
            group: None,
            at: i,
            id: i,
        },
    }
}

fn fixture() -> App {
    let mut app = App::new("sqlite://settle.db", "alice");
    let fx = app.start();
    let Some(Effect::Page { seq, .. }) = fx.first().cloned() else {
        panic!()
    };
    let rows = vec![
        row(
            0,
            "onb-42-task",
            State::Unknown,
            2 * 86_400 + 4 * 3600,
            None,
            "Check projects for this request (onb-42-task, created 2d 4h ago); reconcile found/absent before any retry",
        ),
        row(
            1,
            "crm-sync-9005",
            State::Rejected,
            5 * 3600,
            Some("bob"),
            "Claimed by bob for 12m: leave it to them",
        ),
        row(
            2,
            "onb-43-task",
            State::Failed,
            40 * 60,
            Some("alice"),
            "Confirmed not done: retry, or close as abandoned",
        ),
        row(
            3,
            "crm-sync-9011",
            State::Conflict,
            45,
            None,
            "Request changed under crm-sync-9011: decide which contents are intended; close or supersede",
        ),
    ];
    app.update(Msg::Page {
        seq,
        place: Place::Replace { select_last: false },
        page: Ok(Page {
            items: rows.clone(),
            ..Default::default()
        }),
    });
    let mut by_state = std::collections::BTreeMap::new();
    for s in State::ALL {
        by_state.insert(s, 0);
    }
    by_state.insert(State::Unknown, 7);
    by_state.insert(State::Rejected, 9);
    by_state.insert(State::Failed, 6);
    by_state.insert(State::Conflict, 1);
    by_state.insert(State::Pending, 30);
    by_state.insert(State::Succeeded, 170);
    by_state.insert(State::Closed, 10);
    app.update(Msg::Header(Ok(Header {
        stats: Some(Stats {
            by_state,
            exceptions: 23,
            oldest_exception_seconds: Some(2 * 86_400 + 4 * 3600),
            paused_workflows: vec!["crm-sync".into()],
        }),
        mine: 2,
        dispatcher_seen: Some(2),
        full: true,
    })));
    let detail = OperationDetail {
        op: rows[0].clone(),
        payload: json!({"title": "Kickoff call", "customer": {"email": "[redacted]", "name": "[redacted]"}, "due": "2026-12-01"}),
        fingerprint: "46e51983cd02c42b4aec38b7d7688c315288f427a09b388db36a1f00bcd84867".into(),
        conflicting_payload: None,
        conflicting_fingerprint: None,
        attempt_log: vec![AttemptView {
            n: 1,
            actor: "onboarding-bot".into(),
            outcome: Some(Outcome::Unknown),
            http_status: None,
            reference: None,
            error: Some("read timeout after 30s".into()),
            started_at: t("2026-11-27T08:00:02Z"),
            finished_at: Some(t("2026-11-27T08:00:32Z")),
        }],
        history: vec![
            EventView {
                id: 1,
                at: t("2026-11-27T08:00:00Z"),
                actor: "onboarding-bot".into(),
                kind: "recorded".into(),
                from_state: None,
                to_state: Some("pending".into()),
                detail: json!({}),
                subject: None,
            },
            EventView {
                id: 2,
                at: t("2026-11-27T08:00:32Z"),
                actor: "onboarding-bot".into(),
                kind: "attempt".into(),
                from_state: Some("pending".into()),
                to_state: Some("unknown".into()),
                detail: json!({}),
                subject: None,
            },
            EventView {
                id: 3,
                at: t("2026-11-27T09:40:00Z"),
                actor: "bob".into(),
                kind: "note".into(),
                from_state: Some("unknown".into()),
                to_state: Some("unknown".into()),
                detail: json!({"text": "asked the projects team"}),
                subject: None,
            },
        ],
    };
    app.update(Msg::Detail {
        key: "onb-42-task".into(),
        detail: Ok(Box::new(detail)),
    });
    app.loading = false;
    app
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

#[test]
fn snapshots_of_the_exception_view_and_detail() {
    let app = fixture();
    insta::assert_snapshot!("exceptions_80x24", render(&app, 80, 24));
    insta::assert_snapshot!("exceptions_160x48", render(&app, 160, 48));
}

#[test]
fn snapshots_of_the_other_views() {
    for (c, name) in [('2', "mine"), ('3', "in_progress"), ('4', "closed")] {
        let mut app = fixture();
        let fx = app.update(key(c));
        let Some(Effect::Page { seq, .. }) = fx.first().cloned() else {
            panic!()
        };
        let items = match c {
            '2' => vec![row(
                2,
                "onb-43-task",
                State::Failed,
                40 * 60,
                Some("alice"),
                "Confirmed not done: retry, or close as abandoned",
            )],
            '3' => vec![row(
                4,
                "onb-50-task",
                State::RetryWait,
                90,
                None,
                "Automatic attempt 2 of 6 at 10:05 UTC",
            )],
            _ => vec![row(
                6,
                "onb-10-task",
                State::Succeeded,
                3 * 86_400,
                None,
                "Nothing to do",
            )],
        };
        app.update(Msg::Page {
            seq,
            place: Place::Replace { select_last: false },
            page: Ok(Page {
                items,
                ..Default::default()
            }),
        });
        app.loading = false;
        insta::assert_snapshot!(format!("{name}_80x24"), render(&app, 80, 24));
        insta::assert_snapshot!(format!("{name}_160x48"), render(&app, 160, 48));
    }
    let mut app = fixture();
    let fx = app.update(key('5'));
    let Some(Effect::Activity { seq }) = fx.first().cloned() else {
        panic!("{fx:?}")
    };
    let events = vec![EventView {
        id: 9,
        at: t("2026-11-29T09:58:00Z"),
        actor: "bob".into(),
        kind: "claimed".into(),
        from_state: Some("rejected".into()),
        to_state: Some("rejected".into()),
        detail: json!({}),
        subject: Some("crm-sync-9005".into()),
    }];
    app.update(Msg::Activity {
        seq,
        events: Ok(events),
    });
    assert_eq!(app.view, View::Activity);
    insta::assert_snapshot!("activity_80x24", render(&app, 80, 24));
    insta::assert_snapshot!("activity_160x48", render(&app, 160, 48));
}

#[test]
fn snapshots_of_the_help_and_a_confirmation() {
    let mut app = fixture();
    app.update(key('?'));
    insta::assert_snapshot!("help_80x24", render(&app, 80, 24));
    insta::assert_snapshot!("help_160x48", render(&app, 160, 48));
    let mut app = fixture();
    app.update(key('c'));
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
async fn settle_effects(app: &mut App, ledger: &Ledger, mut fx: Vec<Effect>) {
    for _ in 0..20 {
        let mut next = Vec::new();
        for e in fx {
            if let Some(msg) = run_effect(ledger, e, "alice").await {
                next.extend(app.update(msg));
            }
        }
        if next.is_empty() {
            return;
        }
        fx = next;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_screen_shows_a_secret_or_a_raw_escape() {
    let db = common::sqlite();
    let ledger = Ledger::open(&db.url, common::config()).await.unwrap();
    let payload = json!({"customer": {"name": "Zebulon Quixote", "contact": "ada@example.com", "phone": "+44 7700 900123"},
        "memo": "card 4111111111111111", "headers": {"auth": "Bearer abc.def-123"}, "api_key": "sk_live_c0ffee",
        "title": "\u{1b}]0;owned\u{7}\u{1b}[2J"});
    // the configured field (customer.name) is configured for crm: every item goes there
    for (i, dest) in ["crm", "crm", "crm"].iter().enumerate() {
        let key = format!("sec-{i}");
        ledger
            .record(
                &Intent {
                    key: key.clone(),
                    workflow: "crm-sync".into(),
                    step: "upsert".into(),
                    destination: dest.to_string(),
                    action: "upsert".into(),
                    payload: payload.clone(),
                },
                "bot",
            )
            .await
            .unwrap();
        let err = "502: Zebulon Quixote ada@example.com +44 7700 900123 Bearer abc.def-123 4111111111111111 api_key=sk_live_c0ffee \u{1b}]0;owned\u{7}";
        ledger
            .report_attempt(
                &AttemptReport {
                    key: key.clone(),
                    outcome: Some(Outcome::Unknown),
                    error: Some(err.into()),
                    ..Default::default()
                },
                "bot",
            )
            .await
            .unwrap();
        ledger
            .staff(
                &key,
                "alice",
                settle::StaffAction::Note {
                    text: "called ada@example.com at +44 7700 900123".into(),
                },
            )
            .await
            .unwrap();
    }
    ledger
        .staff(
            "sec-1",
            "alice",
            settle::StaffAction::Claim { force_reason: None },
        )
        .await
        .unwrap();
    let mut app = App::new(ledger.database(), "alice");
    let fx = app.start();
    settle_effects(&mut app, &ledger, fx).await;
    let mut screens = Vec::new();
    for view in ['1', '2', '3', '4', '5', '1'] {
        let fx = app.update(key(view));
        settle_effects(&mut app, &ledger, fx).await;
        for _ in 0..3 {
            // every row's detail pane
            for (w, h) in [(80, 24), (160, 48)] {
                screens.push(render(&app, w, h));
            }
            let fx = app.update(key('j'));
            settle_effects(&mut app, &ledger, fx).await;
        }
    }
    assert!(
        screens.iter().any(|s| s.contains("sec-0")),
        "the items were shown"
    );
    assert!(screens.iter().any(|s| s.contains("[redacted]")));
    assert!(
        screens
            .iter()
            .any(|s| s.contains("\\x1b]0;owned\\x07") || s.contains("\\u001b]0;owned")),
        "escapes shown escaped"
    );
    for s in &screens {
        for secret in SECRETS {
            assert!(!s.contains(secret), "{secret} on screen:\n{s}");
        }
        assert!(
            !s.contains('\u{1b}') && !s.contains('\u{7}'),
            "a raw escape reached the screen:\n{s}"
        );
    }
}
