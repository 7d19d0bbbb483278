//! Owners (manual: Owners and notifications) on both backends: a workflow's team from its
//! `owner`, else `[defaults] owner`, else nobody; shown on every item; `owner:TEAM|mine|none` in
//! the filter, negated too; `stats` counting the exceptions nobody owns; and a config whose
//! teams and channels do not hold together refused in one line naming the key.

mod common;

use common::TestDb;
use serde_json::json;
use settle::{AttemptReport, Config, Intent, Ledger, Outcome, Scope};

const TEAMS: &str = r#"
[teams.payments]
members = ["alice", "bob"]
notify = ["payments-chat"]
[teams.support]
members = ["carol"]
[channels.payments-chat]
kind = "slack"
url_env = "SETTLE_SLACK_PAYMENTS"
[workflows.onboarding]
owner = "payments"
[workflows.billing]
"#;

fn intent(key: &str, workflow: &str) -> Intent {
    Intent {
        key: key.into(),
        workflow: workflow.into(),
        step: "s".into(),
        destination: "crm".into(),
        action: "create".into(),
        payload: json!({"n": 1}),
        run: None,
    }
}

/// A ledger with two unknowns in each of onboarding (payments), billing and misc (no owner).
async fn ledger(db: &TestDb, defaults: &str) -> Ledger {
    let config = Config::parse(&format!("{defaults}\n{TEAMS}"), "test").unwrap();
    let l = Ledger::open(&db.url, config).await.unwrap();
    for wf in ["onboarding", "billing", "misc"] {
        for i in 0..2 {
            let key = format!("{wf}-{i}");
            l.record(&intent(&key, wf), "bot").await.unwrap();
            let report = AttemptReport {
                key,
                outcome: Some(Outcome::Unknown),
                ..Default::default()
            };
            l.report_attempt(&report, "bot").await.unwrap();
        }
    }
    l
}

async fn listed(l: &Ledger, filter: &str, viewer: &str) -> Vec<String> {
    common::keys_listed(l, Scope::Exceptions, filter, viewer).await
}

fn keys(workflows: &[&str]) -> Vec<String> {
    let mut k: Vec<String> = workflows
        .iter()
        .flat_map(|w| (0..2).map(move |i| format!("{w}-{i}")))
        .collect();
    k.sort();
    k
}

async fn owners_with_a_default_owner(db: &TestDb) {
    let l = ledger(db, "[defaults]\nowner = \"support\"").await;
    let owner = |key: &'static str| {
        let l = l.clone();
        async move { l.read().show(key, "alice").await.unwrap().op.owner }
    };
    assert_eq!(owner("onboarding-0").await.as_deref(), Some("payments"));
    assert_eq!(owner("billing-0").await.as_deref(), Some("support"));
    assert_eq!(owner("misc-0").await.as_deref(), Some("support"));
    assert_eq!(
        listed(&l, "owner:payments", "x").await,
        keys(&["onboarding"])
    );
    assert_eq!(
        listed(&l, "owner:support", "x").await,
        keys(&["billing", "misc"])
    );
    assert_eq!(
        listed(&l, "owner:mine", "alice").await,
        keys(&["onboarding"])
    );
    assert_eq!(
        listed(&l, "owner:mine", "carol").await,
        keys(&["billing", "misc"])
    );
    assert!(
        listed(&l, "owner:mine", "dave").await.is_empty(),
        "in no team"
    );
    assert!(
        listed(&l, "owner:none", "x").await.is_empty(),
        "every workflow is owned"
    );
    assert!(
        listed(&l, "owner:sales", "x").await.is_empty(),
        "no such team"
    );
    assert_eq!(
        listed(&l, "-owner:payments", "x").await,
        keys(&["billing", "misc"])
    );
    // a count and a bulk action's keys read the same terms
    let filter = settle::ListFilter {
        scope: Scope::Exceptions,
        query: settle::domain::filter::Filter::parse("owner:payments state:unknown").unwrap(),
        ..Default::default()
    };
    assert_eq!(
        l.read().count_matching(&filter, "x").await.unwrap(),
        Some(2)
    );
    let mut marked = l.read().matching_keys(&filter, "x").await.unwrap();
    marked.sort();
    assert_eq!(marked, keys(&["onboarding"]));
    assert_eq!(l.read().stats().await.unwrap().unowned_exceptions, Some(0));
    l.close().await;
}

async fn owners_without_a_default_owner(db: &TestDb) {
    let l = ledger(db, "").await;
    let shown = l.read().show("misc-0", "alice").await.unwrap();
    assert_eq!(shown.op.owner, None);
    assert_eq!(
        listed(&l, "owner:none", "x").await,
        keys(&["billing", "misc"])
    );
    assert_eq!(
        listed(&l, "owner:support", "x").await,
        Vec::<String>::new(),
        "support owns nothing without the default"
    );
    let stats = l.read().stats().await.unwrap();
    assert_eq!(stats.unowned_exceptions, Some(4));
    assert!(
        stats.to_string().contains("no owner    4 exceptions"),
        "{stats}"
    );
    l.close().await;
}

/// View 2 (Mine): what I hold, and what my teams own that nobody holds; never what a teammate
/// holds, nor another team's. Its count and `A` (every key it matches) agree with its page.
async fn mine_holds_my_claims_and_my_teams_unheld_work(db: &TestDb) {
    let l = ledger(db, "").await;
    let claim = |key: &'static str, who: &'static str| {
        let l = l.clone();
        async move {
            l.staff()
                .act(key, who, settle::StaffAction::Claim { force_reason: None })
                .await
                .unwrap();
        }
    };
    claim("onboarding-0", "bob").await;
    claim("billing-0", "alice").await;
    let mine = |who: &'static str| {
        let l = l.clone();
        async move { common::keys_listed(&l, Scope::Mine, "", who).await }
    };
    // alice (payments, which owns onboarding): her claim, and onboarding's unheld unknown
    assert_eq!(mine("alice").await, vec!["billing-0", "onboarding-1"]);
    // bob: his claim, and the same unheld one
    assert_eq!(mine("bob").await, vec!["onboarding-0", "onboarding-1"]);
    // carol (support owns nothing): nothing of anyone's
    assert!(mine("carol").await.is_empty());
    // dave (no team): only his claims, as before teams
    claim("misc-0", "dave").await;
    assert_eq!(mine("dave").await, vec!["misc-0"]);
    let filter = settle::ListFilter {
        scope: Scope::Mine,
        ..Default::default()
    };
    assert_eq!(
        l.read().count_matching(&filter, "alice").await.unwrap(),
        Some(2)
    );
    // the tab's count is what the view lists
    assert_eq!(l.read().count_mine("alice").await.unwrap(), 2);
    assert_eq!(l.read().count_mine("dave").await.unwrap(), 1);
    let mut marked = l.read().matching_keys(&filter, "alice").await.unwrap();
    marked.sort();
    assert_eq!(marked, vec!["billing-0", "onboarding-1"]);
    l.close().await;
}

both_backends!(
    owners_with_a_default_owner,
    owners_without_a_default_owner,
    the_exceptions_by_group,
    mine_holds_my_claims_and_my_teams_unheld_work
);

/// Teams, channels and owners that do not hold together: one line naming the key.
#[test]
fn a_config_whose_owners_do_not_hold_together_is_refused() {
    for (text, names) in [
        (
            "[workflows.w]\nowner = \"nobody-here\"\n",
            "workflows.w.owner",
        ),
        ("[defaults]\nowner = \"ghosts\"\n", "defaults.owner"),
        ("[teams.t]\nnotify = [\"missing\"]\n", "teams.t.notify"),
        (
            "[teams.t]\nmembers = [\"bad\\u0001name\"]\n",
            "teams.t.members",
        ),
        ("[channels.c]\nkind = \"slack\"\n", "channels.c.url_env"),
        (
            "[channels.c]\nkind = \"webhook\"\nurl_env = \"https://hooks.example/x\"\n",
            "channels.c.url_env",
        ),
        (
            "[channels.c]\nkind = \"email\"\nsmtp = \"smtp://m:25\"\n",
            "channels.c",
        ),
        ("[channels.c]\nkind = \"pager\"\nurl_env = \"X\"\n", "kind"),
    ] {
        let e = Config::parse(text, "settle.toml").unwrap_err().to_string();
        assert!(e.contains(names), "{text}: {e}");
        assert!(!e.contains('\n'), "one line: {e}");
        assert!(!e.contains("hooks.example"), "never the value: {e}");
    }
    let ok = Config::parse(
        &format!("{TEAMS}\n[channels.mail]\nkind = \"email\"\nsmtp = \"smtp://mail.internal:587\"\nfrom = \"settle@example.com\"\nto = [\"ops@example.com\"]\n"),
        "settle.toml",
    )
    .unwrap();
    assert_eq!(ok.owner_of("onboarding"), Some("payments"));
    assert_eq!(ok.owner_of("billing"), None);
    assert_eq!(ok.teams_of("bob"), ["payments"]);
}

/// `settle groups` on a ledger of known contents: what varies between items of one incident
/// (a number, an id, a quoted value) makes no group of its own; a redacted value never shows;
/// `owner:` narrows them; the largest first, then the oldest, then by owner and workflow.
async fn the_exceptions_by_group(db: &TestDb) {
    let config =
        Config::parse(&format!("[defaults]\nowner = \"support\"\n{TEAMS}"), "test").unwrap();
    let l = Ledger::open(&db.url, config).await.unwrap();
    let mut n = 0;
    let mut put = async |workflow: &str, outcome: Outcome, error: &str| {
        n += 1;
        let key = format!("g-{n}");
        l.record(&intent(&key, workflow), "bot").await.unwrap();
        let report = AttemptReport {
            key,
            outcome: Some(outcome),
            error: Some(error.into()),
            ..Default::default()
        };
        l.report_attempt(&report, "bot").await.unwrap();
    };
    for secs in [30, 30, 31, 29, 45] {
        put(
            "onboarding",
            Outcome::Unknown,
            &format!("read timeout after {secs}s"),
        )
        .await;
    }
    put(
        "onboarding",
        Outcome::Rejected,
        "HTTP 422: field 'email' invalid",
    )
    .await;
    put(
        "onboarding",
        Outcome::Rejected,
        "HTTP 422: field 'phone' invalid",
    )
    .await;
    put(
        "onboarding",
        Outcome::Rejected,
        "HTTP 422: no account for c1@example.com",
    )
    .await;
    put("billing", Outcome::Unknown, "read timeout after 12s").await;
    let filter = |text: &str| settle::ListFilter {
        scope: Scope::Exceptions,
        query: settle::domain::filter::Filter::parse(text).unwrap(),
        ..Default::default()
    };
    let groups = l.read().groups(&filter(""), "alice").await.unwrap();
    let seen: Vec<(&str, &str, &str, i64)> = groups
        .iter()
        .map(|g| {
            (
                g.workflow.as_str(),
                g.state.as_str(),
                g.reason.as_str(),
                g.count,
            )
        })
        .collect();
    assert_eq!(
        seen,
        [
            ("onboarding", "unknown", "read timeout after Ns", 5),
            ("onboarding", "rejected", "HTTP 422: field \"…\" invalid", 2),
            (
                "onboarding",
                "rejected",
                "HTTP 422: no account for [redacted]",
                1
            ),
            ("billing", "unknown", "read timeout after Ns", 1),
        ],
        "{groups:#?}"
    );
    assert_eq!(groups[0].owner.as_deref(), Some("payments"));
    assert_eq!(groups[3].owner.as_deref(), Some("support"));
    assert!(!groups[0].next_step.is_empty());
    // each group's filter names its id: it lists that group alone
    let id = groups[0]
        .id
        .clone()
        .expect("a group of exceptions has an id");
    assert_eq!(
        groups[0].filter,
        format!("wf:onboarding dest:crm state:unknown group:{id}")
    );
    let text = format!("{groups:?}");
    assert!(!text.contains("c1@example.com"), "{text}");
    let payments = l
        .read()
        .groups(&filter("owner:payments"), "x")
        .await
        .unwrap();
    assert_eq!(payments.iter().map(|g| g.count).sum::<i64>(), 8);
    let mine = l
        .read()
        .groups(&filter("owner:mine"), "carol")
        .await
        .unwrap();
    assert_eq!(mine.len(), 1);
    assert_eq!(mine[0].workflow, "billing");
    l.close().await;
}
