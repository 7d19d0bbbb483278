//! Key handling on the console's app state: no terminal, no database. Each key of the manual section
//! 13, the confirm and cancel paths of every action, and a refused action.

use chrono::Utc;
use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use settle::console::app::{App, Effect, Focus, Mode, Msg, Place, View};
use settle::domain::next_step::StepKind;
use settle::ledger::{Cursor, OperationView, Page, Position, Sort, StaffAction};
use settle::{Resolution, State};

/// What the ledger offers `viewer` on an operation in `state` (claimed by `holder`) at a
/// destination that deduplicates for a day, sent a minute ago: asked of the transition rules,
/// as the ledger asks them for every row it lists.
fn offers(state: State, holder: Option<&str>, viewer: &str) -> settle::domain::Offers {
    use settle::domain::{Claim, Ctx, DestinationPolicy, Op, offered};
    let now = Utc::now();
    let mut op = Op::new(
        "op",
        "onboarding",
        "create-task",
        "projects",
        "create_task",
        "{}".into(),
        "f".into(),
        now - chrono::TimeDelta::minutes(5),
    );
    op.state = state;
    op.attempts = 1;
    op.first_sent_at = Some(now - chrono::TimeDelta::minutes(1));
    op.next_attempt_at = None;
    op.claim = holder.map(|by| Claim {
        by: by.into(),
        since: now,
        expires: now + chrono::TimeDelta::minutes(30),
    });
    let policy = DestinationPolicy {
        dedupes: true,
        key_retention: Some(std::time::Duration::from_secs(86_400)),
        ..Default::default()
    };
    let ctx = Ctx {
        now,
        actor: viewer,
        policy: &policy,
        lease: std::time::Duration::from_secs(1800),
        attempt_timeout: std::time::Duration::from_secs(300),
        paused: false,
        jitter: 0.5,
        role: settle::domain::Role::Lead,
    };
    offered(&op, &ctx)
}

fn row(i: i64, state: State) -> OperationView {
    OperationView {
        key: format!("op-{i}"),
        state,
        workflow: "onboarding".into(),
        step: "create-task".into(),
        destination: "projects".into(),
        action: "create_task".into(),
        created_at: Utc::now(),
        age_seconds: 3600 - i,
        attempts: 1,
        claimed_by: None,
        claim_expires_at: None,
        reference: None,
        next_step: "Check projects for this request".into(),
        next_step_kind: StepKind::CheckDestination,
        exception_since: Some(Utc::now()),
        next_attempt_at: None,
        reason: None,
        last_error: None,
        resolution: None,
        superseded_by: None,
        corrects: None,
        owner: None,
        workflow_paused: false,
        destination_paused: false,
        actions: offers(state, None, "alice"),
        cursor: Cursor {
            group: None,
            at: i,
            id: i,
        },
        run: None,
    }
}

fn key(c: char) -> Msg {
    Msg::Key(KeyEvent::new(KeyCode::Char(c), KeyModifiers::NONE))
}

fn code(c: KeyCode) -> Msg {
    Msg::Key(KeyEvent::new(c, KeyModifiers::NONE))
}

/// An app whose first page (of `n` rows, `more` after) has arrived.
fn loaded(n: i64, more: bool) -> App {
    let mut app = App::new("sqlite://t.db", "alice");
    let fx = app.start();
    let Some(Effect::Page { seq, .. }) = fx.first().cloned() else {
        panic!("first effect loads a page: {fx:?}")
    };
    assert!(fx.contains(&Effect::Header));
    let items = (0..n).map(|i| row(i, State::Unknown)).collect();
    app.update(Msg::Page {
        seq,
        place: Place::Replace { select_last: false },
        page: Ok(Page {
            items,
            more_before: false,
            more_after: more,
            next: None,
        }),
    });
    app
}

fn selected(app: &App) -> String {
    app.selected_row()
        .map(|r| r.key.clone())
        .unwrap_or_default()
}

#[test]
fn movement_keys() {
    let mut app = loaded(20, false);
    app.update(Msg::Resized { rows: 5 });
    app.update(key('j'));
    app.update(code(KeyCode::Down));
    assert_eq!(selected(&app), "op-2");
    app.update(key('k'));
    app.update(code(KeyCode::Up));
    assert_eq!(selected(&app), "op-0");
    app.update(code(KeyCode::PageDown));
    assert_eq!(selected(&app), "op-5");
    app.update(code(KeyCode::PageUp));
    assert_eq!(selected(&app), "op-0");
    app.update(key('G'));
    assert_eq!(selected(&app), "op-19");
    app.update(key('g'));
    assert_eq!(selected(&app), "op-0");
}

#[test]
fn moving_near_the_end_fetches_the_next_page_by_keyset() {
    let mut app = loaded(10, true);
    let mut asked = Vec::new();
    for _ in 0..6 {
        asked.extend(app.update(key('j')));
    }
    let page = asked.iter().find_map(|e| match e {
        Effect::Page {
            position, place, ..
        } => Some((position.clone(), *place)),
        _ => None,
    });
    assert_eq!(
        page,
        Some((
            Position::After(Cursor {
                group: None,
                at: 9,
                id: 9
            }),
            Place::Append
        ))
    );
    // G with more after asks for the last page instead of walking there
    let fx = app.update(key('G'));
    assert!(
        fx.iter().any(|e| matches!(
            e,
            Effect::Page {
                position: Position::Last,
                ..
            }
        )),
        "{fx:?}"
    );
}

#[test]
fn enter_tab_and_esc_move_focus() {
    let mut app = loaded(3, false);
    app.update(code(KeyCode::Enter));
    assert_eq!(app.focus, Focus::Detail);
    app.update(key('j'));
    assert_eq!(
        (app.detail_scroll, selected(&app).as_str()),
        (1, "op-0"),
        "j scrolls the detail"
    );
    app.update(code(KeyCode::Esc));
    assert_eq!(app.focus, Focus::List);
    app.update(code(KeyCode::Tab));
    assert_eq!(app.focus, Focus::Detail);
}

#[test]
fn number_keys_switch_views() {
    let mut app = loaded(3, false);
    for (c, view) in [
        ('2', View::Mine),
        ('3', View::InProgress),
        ('4', View::Closed),
        ('5', View::Activity),
        ('1', View::Exceptions),
    ] {
        let fx = app.update(key(c));
        assert_eq!(app.view, view);
        assert!(
            fx.iter()
                .any(|e| matches!(e, Effect::Page { .. } | Effect::Activity { .. })),
            "{c}: {fx:?}"
        );
    }
}

/// The filter the console's `/` text stands for (manual: The filter).
fn parsed(text: &str) -> settle::domain::filter::Filter {
    settle::domain::filter::Filter::parse(text).unwrap()
}

#[test]
fn filter_typing_narrows_at_once_enter_keeps_esc_clears() {
    let mut app = loaded(3, false);
    app.update(key('/'));
    assert!(matches!(app.mode, Mode::Filter));
    let fx = app.update(key('c'));
    let Some(Effect::Page {
        filter, position, ..
    }) = fx.first()
    else {
        panic!("typing reloads: {fx:?}")
    };
    assert_eq!((&filter.query, position), (&parsed("c"), &Position::First));
    app.update(key('r'));
    app.update(key('m'));
    app.update(code(KeyCode::Enter));
    assert!(matches!(app.mode, Mode::Normal));
    assert_eq!(app.list_filter().query, parsed("crm"));
    let fx = app.update(code(KeyCode::Esc));
    assert!(app.list_filter().query.is_empty());
    assert!(
        fx.iter().any(
            |e| matches!(e, Effect::Page { filter, position: Position::First, .. }
            if filter.query.is_empty() && filter.scope == app.list_filter().scope)
        ),
        "clearing the filter reloads the whole list from the top: {fx:?}"
    );
    // Esc while typing clears too
    app.update(key('/'));
    app.update(key('x'));
    app.update(code(KeyCode::Esc));
    assert!(app.list_filter().query.is_empty());
}

#[test]
fn s_cycles_the_sort() {
    let mut app = loaded(3, false);
    let mut seen = vec![app.sort];
    for _ in 0..4 {
        let fx = app.update(key('s'));
        assert!(
            fx.iter()
                .any(|e| matches!(e, Effect::Page { filter, .. } if filter.sort == app.sort))
        );
        seen.push(app.sort);
    }
    assert_eq!(
        seen,
        [
            Sort::Age,
            Sort::State,
            Sort::Workflow,
            Sort::Destination,
            Sort::Age
        ]
    );
}

#[test]
fn help_opens_and_any_key_closes() {
    let mut app = loaded(3, false);
    app.update(key('?'));
    assert!(matches!(app.mode, Mode::Help));
    let fx = app.update(key('c'));
    assert!(
        fx.is_empty() && matches!(app.mode, Mode::Normal),
        "the key only closes the help"
    );
}

fn staff(fx: &[Effect]) -> Option<(String, StaffAction)> {
    fx.iter().find_map(|e| match e {
        Effect::Staff { key, action } => Some((key.clone(), action.clone())),
        _ => None,
    })
}

#[test]
fn every_action_confirms_or_cancels() {
    // (keys typed after the action key, expected action)
    let cases: Vec<(char, Vec<Msg>, StaffAction)> = vec![
        (
            'c',
            vec![key('y')],
            StaffAction::Claim { force_reason: None },
        ),
        ('u', vec![code(KeyCode::Enter)], StaffAction::Release),
        ('R', vec![key('y')], StaffAction::Retry { note: None }),
        (
            'r',
            vec![key('a'), key('y')],
            StaffAction::ReconcileAbsent { note: None },
        ),
        (
            'r',
            vec![
                key('f'),
                key('T'),
                key('-'),
                key('9'),
                code(KeyCode::Enter),
                key('y'),
            ],
            StaffAction::ReconcileFound {
                reference: "T-9".into(),
                note: None,
            },
        ),
        (
            'n',
            vec![key('h'), key('i'), code(KeyCode::Enter), key('y')],
            StaffAction::Note { text: "hi".into() },
        ),
        (
            'x',
            vec![key('3'), key('o'), key('k'), code(KeyCode::Enter), key('y')],
            StaffAction::Close {
                resolution: Resolution::Abandoned,
                reference: None,
                superseded_by: None,
                note: "ok".into(),
            },
        ),
        (
            'x',
            vec![
                key('1'),
                key('R'),
                key('1'),
                code(KeyCode::Enter),
                key('d'),
                code(KeyCode::Enter),
                code(KeyCode::Enter),
            ],
            StaffAction::Close {
                resolution: Resolution::DoneElsewhere,
                reference: Some("R1".into()),
                superseded_by: None,
                note: "d".into(),
            },
        ),
        (
            'x',
            vec![
                key('2'),
                key('k'),
                key('2'),
                code(KeyCode::Enter),
                key('d'),
                code(KeyCode::Enter),
                key('y'),
            ],
            StaffAction::Close {
                resolution: Resolution::Superseded,
                reference: None,
                superseded_by: Some("k2".into()),
                note: "d".into(),
            },
        ),
    ];
    // release is offered only to the holder: those cases run on a row alice holds
    let held = |app: &mut App, c: char| {
        if c == 'u' {
            app.rows[0].claimed_by = Some("alice".into());
            app.rows[0].actions = offers(State::Unknown, Some("alice"), "alice");
        }
    };
    for (c, keys, want) in cases {
        // confirm path
        let mut app = loaded(3, false);
        held(&mut app, c);
        assert!(
            app.update(key(c)).is_empty(),
            "{c}: nothing is written before confirming"
        );
        let mut fx = Vec::new();
        for k in keys {
            assert!(staff(&fx).is_none(), "{c}: wrote before the confirmation");
            fx = app.update(k);
        }
        assert_eq!(staff(&fx), Some(("op-0".into(), want.clone())), "{c}");
        // cancel path: Esc at the first step, and n at the confirmation
        let mut app = loaded(3, false);
        held(&mut app, c);
        app.update(key(c));
        let fx = app.update(code(KeyCode::Esc));
        assert!(
            staff(&fx).is_none() && matches!(app.mode, Mode::Normal),
            "{c}: Esc cancels"
        );
        assert!(app.status.line.as_ref().unwrap().0.contains("cancelled"));
    }
    let mut app = loaded(3, false);
    app.update(key('c'));
    let fx = app.update(key('n'));
    assert!(
        staff(&fx).is_none() && matches!(app.mode, Mode::Normal),
        "n cancels the confirmation"
    );
}

#[test]
fn a_required_text_cannot_be_empty() {
    let mut app = loaded(3, false);
    app.update(key('n'));
    let fx = app.update(code(KeyCode::Enter));
    assert!(fx.is_empty());
    let Mode::Form(form) = &app.mode else {
        panic!("still asking")
    };
    assert!(form.hint.as_deref().unwrap().contains("required"));
}

#[test]
fn pause_and_resume_the_selected_workflow_or_destination() {
    use settle::ledger::Pausable;
    let mut app = loaded(3, false);
    app.update(key('P'));
    app.update(key('w'));
    for c in "maint".chars() {
        app.update(key(c));
    }
    app.update(code(KeyCode::Enter));
    let fx = app.update(key('y'));
    assert_eq!(
        fx,
        vec![Effect::Pause {
            what: Pausable::Workflow,
            name: "onboarding".into(),
            reason: "maint".into()
        }]
    );
    let mut app = loaded(3, false);
    app.rows[0].workflow_paused = true;
    app.update(key('P'));
    app.update(key('w'));
    let fx = app.update(key('y'));
    assert_eq!(
        fx,
        vec![Effect::Resume {
            what: Pausable::Workflow,
            name: "onboarding".into()
        }]
    );
    // d: the item's destination, paused with a reason, and resumed when paused
    let mut app = loaded(3, false);
    let dest = app.rows[0].destination.clone();
    app.update(key('P'));
    app.update(key('d'));
    for c in "outage".chars() {
        app.update(key(c));
    }
    app.update(code(KeyCode::Enter));
    let fx = app.update(key('y'));
    assert_eq!(
        fx,
        vec![Effect::Pause {
            what: Pausable::Destination,
            name: dest.clone(),
            reason: "outage".into()
        }]
    );
    let mut app = loaded(3, false);
    app.rows[0].destination_paused = true;
    app.update(key('P'));
    app.update(key('d'));
    let fx = app.update(key('y'));
    assert_eq!(
        fx,
        vec![Effect::Resume {
            what: Pausable::Destination,
            name: dest
        }]
    );
}

#[test]
fn a_refused_action_shows_the_refusal_and_refreshes() {
    let mut app = loaded(3, false);
    app.update(key('c'));
    app.update(key('y'));
    let fx = app.update(Msg::Acted(Err(
        "refused: op-0 is claimed by bob until 10:32 UTC".into(),
    )));
    let (text, error) = app.status.line.clone().unwrap();
    assert!(error && text.contains("claimed by bob"));
    assert!(
        fx.iter().any(|e| matches!(e, Effect::Page { .. })),
        "the list is reloaded as it is"
    );
}

#[test]
fn actions_are_off_while_the_database_is_unreachable() {
    let mut app = loaded(3, false);
    app.update(Msg::Polled(Err("connection refused".into())));
    assert!(!app.online);
    let fx = app.update(key('c'));
    assert!(fx.is_empty() && matches!(app.mode, Mode::Normal));
    assert!(
        app.status
            .line
            .as_ref()
            .unwrap()
            .0
            .contains("actions are off")
    );
    // back: refresh by itself
    let fx = app.update(Msg::Polled(Ok(7)));
    assert!(app.online && fx.iter().any(|e| matches!(e, Effect::Page { .. })));
}

#[test]
fn live_changes_refresh_without_moving_the_selection() {
    let mut app = loaded(5, false);
    app.update(Msg::Polled(Ok(10)));
    app.update(key('j'));
    app.update(key('j'));
    assert_eq!(selected(&app), "op-2");
    let fx = app.update(Msg::Polled(Ok(11)));
    let Some(Effect::Page { seq, .. }) = fx
        .iter()
        .find(|e| matches!(e, Effect::Page { .. }))
        .cloned()
    else {
        panic!("{fx:?}")
    };
    // the refreshed page has a new row at the top: the selection follows op-2
    let mut items: Vec<_> = (0..5).map(|i| row(i, State::Unknown)).collect();
    items.insert(0, row(99, State::Failed));
    app.update(Msg::Page {
        seq,
        place: Place::Replace { select_last: false },
        page: Ok(Page {
            items,
            ..Default::default()
        }),
    });
    assert_eq!(selected(&app), "op-2");
    // an unchanged poll does nothing
    assert!(app.update(Msg::Polled(Ok(11))).is_empty());
}

#[test]
fn q_and_ctrl_c_quit() {
    let mut app = loaded(1, false);
    assert_eq!(app.update(key('q')), vec![Effect::Quit]);
    let mut app = loaded(1, false);
    let fx = app.update(Msg::Key(KeyEvent::new(
        KeyCode::Char('c'),
        KeyModifiers::CONTROL,
    )));
    assert_eq!(fx, vec![Effect::Quit]);
}

/// Read from a replica (manual: A replica for the console and reports), a change told of at once
/// may show there only later: a tick five seconds after the last header reads the page and the
/// header again, once; without a replica a tick reads nothing.
#[test]
fn a_replica_is_read_again_every_few_seconds() {
    let mut app = loaded(3, false);
    let long_ago = chrono::Utc::now() - chrono::TimeDelta::seconds(6);
    app.header.at = Some(long_ago);
    assert_eq!(app.update(Msg::Tick), vec![], "no replica: nothing read");
    app.header.replica_lag = Some(0);
    let fx = app.update(Msg::Tick);
    assert!(fx.contains(&Effect::Header), "{fx:?}");
    assert!(
        fx.iter().any(|e| matches!(e, Effect::Page { .. })),
        "{fx:?}"
    );
    assert_eq!(app.update(Msg::Tick), vec![], "once, not at every tick");
}

/// The console: the tab counts are never more than a few seconds old: every refresh after a change
/// asks for every count (the store keeps them as counters), and the answer replaces them all.
#[test]
fn every_refresh_recounts_the_tabs() {
    use settle::console::app::Header;
    use settle::ledger::Stats;
    let mut app = loaded(3, false);
    let stats = |pairs: &[(State, i64)], exceptions| Stats {
        by_state: pairs.iter().cloned().collect(),
        exceptions,
        stalled_runs: 0,
        oldest_exception_seconds: Some(60),
        paused_workflows: vec![],
        paused_destinations: vec![],
        pauses: vec![],
        due: 0,
        dispatchers: vec![],
        unowned_exceptions: None,
        notify_failing: vec![],
        breakers: vec![],
    };
    app.update(Msg::Header(Ok(Header {
        stats: Some(stats(&[(State::Closed, 180), (State::Unknown, 7)], 23)),
        mine: 1,
        dispatcher_seen: None,
        replica_lag: None,
        at: None,
    })));
    app.update(Msg::Polled(Ok(1)));
    let fx = app.update(Msg::Polled(Ok(2)));
    assert!(fx.contains(&Effect::Header), "a change recounts: {fx:?}");
    app.update(Msg::Header(Ok(Header {
        stats: Some(stats(&[(State::Closed, 181), (State::Unknown, 6)], 22)),
        mine: 2,
        dispatcher_seen: None,
        replica_lag: None,
        at: None,
    })));
    let s = app.header.stats.as_ref().unwrap();
    assert_eq!(
        (
            s.exceptions,
            s.by_state[&State::Unknown],
            s.by_state[&State::Closed],
            app.header.mine
        ),
        (22, 6, 181, 2)
    );
}

/// The console: the console only offers what would succeed. On an item bob holds, alice's footer
/// offers no claim, retry or close; pressing `R` asks nothing and says why and which key helps;
/// `C` takes the claim over with a reason.
#[test]
fn keys_offer_only_what_the_ledger_accepts_and_c_takes_over() {
    use settle::console::keymap::{KEYMAP, action};
    let mut app = loaded(3, false);
    app.rows[0].claimed_by = Some("bob".into());
    app.rows[0].actions = offers(State::Unknown, Some("bob"), "alice");
    let shown: Vec<&str> = KEYMAP
        .iter()
        .filter(|b| !b.offers.is_empty() && app.applies(b))
        .map(|b| b.keys)
        .collect();
    assert_eq!(shown, vec!["C", "n"], "take over and note only");
    assert!(!app.applies(action('R').unwrap()));
    let fx = app.update(key('R'));
    assert!(
        fx.is_empty() && matches!(app.mode, Mode::Normal),
        "no form opens"
    );
    let (text, error) = app.status.line.clone().unwrap();
    assert!(error, "{text}");
    assert!(
        text.contains("retry is not possible on op-0") && text.contains("C takes it over"),
        "{text}"
    );
    // C: a reason, then the confirmation, then the take-over
    app.update(key('C'));
    for c in "bob is off shift".chars() {
        app.update(key(c));
    }
    app.update(code(KeyCode::Enter));
    let fx = app.update(key('y'));
    assert_eq!(
        staff(&fx),
        Some((
            "op-0".into(),
            StaffAction::Claim {
                force_reason: Some("bob is off shift".into())
            }
        ))
    );
    // an unclaimed item: acting on it claims it (manual: Staff actions), so R is offered without a claim first
    let app = loaded(3, false);
    assert!(app.applies(action('R').unwrap()));
    assert!(!app.applies(action('u').unwrap()), "nothing to release");
}

/// The console: close's resolutions are shown in words, and each key still picks its resolution.
#[test]
fn close_offers_its_resolutions_in_words() {
    use settle::console::app::FormStep;
    let mut app = loaded(3, false);
    app.update(key('x'));
    let Mode::Form(form) = &app.mode else {
        panic!("x asks")
    };
    let FormStep::Choose(options) = &form.step else {
        panic!("a choice first")
    };
    let words: Vec<&str> = options.iter().map(|(_, w)| w.as_str()).collect();
    assert!(words.iter().all(|w| !w.contains('_')), "{words:?}");
    assert!(
        words[1].starts_with("superseded by another operation"),
        "{words:?}"
    );
}

/// `S` reverses the sort and reloads from the top; again puts it back.
#[test]
fn capital_s_reverses_the_sort() {
    let mut app = loaded(3, false);
    let fx = app.update(key('S'));
    assert!(app.reverse);
    assert!(
        fx.iter().any(|e| matches!(e, Effect::Page { filter, position: Position::First, .. } if filter.reverse)),
        "{fx:?}"
    );
    app.update(key('S'));
    assert!(!app.reverse && !app.list_filter().reverse);
}

/// The console: a status line clears after a while (a result after 8 s, a refusal after 20 s),
/// so it never goes stale.
#[test]
fn status_lines_expire() {
    let mut app = loaded(3, false);
    app.now = Utc::now() - chrono::TimeDelta::minutes(1);
    app.update(key('s'));
    assert!(
        app.status
            .line
            .as_ref()
            .is_some_and(|(t, _)| t.contains("sorted by"))
    );
    app.update(Msg::Tick);
    assert!(
        app.status.line.is_none(),
        "a minute later the result is gone"
    );
    // a refusal stays longer: 10 s later it is still there
    app.now = Utc::now() - chrono::TimeDelta::seconds(10);
    app.update(key('u'));
    assert!(app.status.line.as_ref().is_some_and(|(_, error)| *error));
    app.update(Msg::Tick);
    assert!(app.status.line.is_some(), "a refusal is kept for 20 s");
}

/// A new order starts at its top: after `S` the first row of the new page is selected, not the
/// row that was selected in the old order.
#[test]
fn a_new_order_selects_its_first_row() {
    let mut app = loaded(3, false);
    assert_eq!(selected(&app), "op-0");
    let fx = app.update(key('S'));
    let Some(Effect::Page { seq, .. }) = fx.first().cloned() else {
        panic!("S reloads: {fx:?}")
    };
    // the reversed page: op-2 first, op-0 (selected before) last
    let items = (0..3).rev().map(|i| row(i, State::Unknown)).collect();
    app.update(Msg::Page {
        seq,
        place: Place::Replace { select_last: false },
        page: Ok(Page {
            items,
            more_before: false,
            more_after: false,
            next: None,
        }),
    });
    assert_eq!(
        selected(&app),
        "op-2",
        "the top of the new order, not op-0 again"
    );
}

/// `t` in view 1 (manual: Owners and notifications): the groups are asked for and shown instead of
/// the items; j/k move on them; `Enter` filters the items to the group (so that `A` marks it all);
/// `t` or `Esc` goes back; other views have no groups.
#[test]
fn t_switches_view_1_between_its_items_and_their_groups() {
    use settle::ledger::ExceptionGroup;
    let mut app = loaded(3, false);
    let fx = app.update(key('t'));
    let Some(Effect::Groups { seq, .. }) = fx.first().cloned() else {
        panic!("t asks for the groups: {fx:?}")
    };
    assert!(app.groups.shown);
    let group = |wf: &str, n: i64| ExceptionGroup {
        id: Some(format!("{wf}-id")),
        owner: Some("growth".into()),
        workflow: wf.into(),
        destination: "crm".into(),
        state: State::Unknown,
        reason: "read timeout after Ns".into(),
        count: n,
        oldest_seconds: 7200,
        newest_seconds: 60,
        next_step: "Check crm".into(),
        filter: format!("wf:{wf} dest:crm state:unknown group:{wf}-id"),
    };
    app.update(Msg::Groups {
        seq,
        groups: Ok(vec![group("onboarding", 200), group("billing", 3)]),
    });
    assert_eq!(app.groups.groups.len(), 2);
    app.update(key('j'));
    assert_eq!(app.groups.selected, 1);
    // Enter: back to the items, filtered to the group, from the first page
    let fx = app.update(code(KeyCode::Enter));
    assert!(!app.groups.shown);
    assert_eq!(
        app.filter.value(),
        "wf:billing dest:crm state:unknown group:billing-id"
    );
    assert!(
        fx.iter()
            .any(|e| matches!(e, Effect::Page { filter, .. } if !filter.query.is_empty())),
        "{fx:?}"
    );
    // t again, then Esc: back to the items as they were
    app.update(key('t'));
    assert!(app.groups.shown);
    app.update(code(KeyCode::Esc));
    assert!(!app.groups.shown);
    // another view: no groups there
    app.update(key('3'));
    assert!(app.update(key('t')).is_empty());
    assert!(!app.groups.shown);
}

/// `e` (manual: Correcting a request): offered on a rejected item only; a form of its payload's
/// fields, a redacted one typed unseen; then a note and the confirmation; the correction under the
/// next key of its chain.
#[test]
fn e_corrects_a_rejected_items_fields() {
    use settle::console::app::FormStep;
    use settle::console::keymap::action;
    use settle::domain::edit::Edit;
    use settle::ledger::OperationDetail;
    let mut app = loaded(2, false);
    assert!(
        !app.applies(action('e').unwrap()),
        "an unknown one may have been done"
    );
    app.update(key('e'));
    assert!(matches!(app.mode, Mode::Normal));
    let (text, _) = app.status.line.clone().unwrap();
    assert!(text.contains("correct is not possible on op-0"), "{text}");

    app.rows[0] = row(0, State::Rejected);
    assert!(app.applies(action('e').unwrap()));
    let detail = OperationDetail {
        op: app.rows[0].clone(),
        payload: serde_json::json!({"customer": {"name": "[redacted]"}, "email": "nope"}),
        fingerprint: "f".into(),
        conflicting_payload: None,
        conflicting_fingerprint: None,
        attempt_log: Vec::new(),
        history: Vec::new(),
        run_steps: Vec::new(),
        pruned: false,
        corrected_as: None,
    };
    app.update(Msg::Detail {
        key: "op-0".into(),
        detail: Ok(Box::new(detail)),
    });
    app.update(key('e'));
    let Mode::Form(form) = &app.mode else {
        panic!("a form opens")
    };
    let FormStep::Choose(options) = &form.step else {
        panic!("the fields first: {:?}", form.step)
    };
    let listed: Vec<&str> = options.iter().map(|(_, t)| t.as_str()).collect();
    assert_eq!(
        listed,
        [
            "customer.name = \"[redacted]\"",
            "email = \"nope\"",
            "done: give a note, then confirm"
        ]
    );
    // the redacted field: typed afresh, unseen
    app.update(key('1'));
    let Mode::Form(form) = &app.mode else {
        panic!()
    };
    assert!(form.secret && form.input.value().is_empty());
    for c in "Ada Byron".chars() {
        app.update(key(c));
    }
    app.update(code(KeyCode::Enter));
    // a plain field: its value to edit
    app.update(key('2'));
    let Mode::Form(form) = &app.mode else {
        panic!()
    };
    assert!(!form.secret);
    assert_eq!(form.input.value(), "\"nope\"");
    for _ in 0..6 {
        app.update(code(KeyCode::Backspace));
    }
    for c in "a@b.example".chars() {
        app.update(key(c));
    }
    app.update(code(KeyCode::Enter));
    let Mode::Form(form) = &app.mode else {
        panic!()
    };
    let summary = settle::console::app::correction_summary(form).join("\n");
    assert!(
        summary.contains("customer.name → [redacted]") && !summary.contains("Ada Byron"),
        "{summary}"
    );
    app.update(key('d'));
    for c in "typo".chars() {
        app.update(key(c));
    }
    app.update(code(KeyCode::Enter));
    let fx = app.update(key('y'));
    assert_eq!(
        staff(&fx),
        Some((
            "op-0".into(),
            StaffAction::Correct {
                corrected_as: "op-0:c2".into(),
                edits: vec![
                    Edit::set("customer.name=Ada Byron").unwrap(),
                    Edit::set("email=a@b.example").unwrap()
                ],
                note: "typo".into(),
            }
        ))
    );
}
