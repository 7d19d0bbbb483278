//! The demo's week: operations, a bad day, a conflict, an incident and staff at work.

use chrono::{DateTime, TimeDelta, Utc};
use rand::Rng;
use serde_json::json;

use crate::config::Config;
use crate::error::{Error, Result};
use crate::ledger::{Ledger, StaffAction};
use crate::tools::demo::week::{Demo, PEOPLE};
use crate::{Outcome, Resolution};

pub(super) async fn fill(demo: &mut Demo, operator: &str) -> Result<()> {
    let now = demo.real_now;
    let start = now - TimeDelta::days(7);
    // ~320 operations over the week, denser on weekdays' working hours
    let mut t = start;
    let mut i = 0;
    while t < now - TimeDelta::minutes(20) {
        let fate = demo.rng.random_range(0..100);
        demo.operation(i, t, fate).await?;
        i += 1;
        t += TimeDelta::seconds(demo.rng.random_range(600..3000));
    }
    let bad_day = (now - TimeDelta::days(4))
        .date_naive()
        .and_hms_opt(10, 0, 0);
    if let Some(at) = bad_day {
        demo.sms_spike(at.and_utc()).await?;
    }
    // the last twenty minutes: work in progress, ages in seconds and minutes
    for k in 0..6 {
        let t = now - TimeDelta::seconds(1100 - k * 180);
        let fate = [0, 75, 99, 93, 72, 81][k as usize];
        demo.operation(i, t, fate).await?;
        i += 1;
    }
    demo.at(now);
    demo.ledger.rounds().sweep().await?;

    conflict_and_live(demo, now).await?;
    incident(demo, now).await?;
    super::runs::onboardings(demo, now).await?;

    staff_at_work(demo, operator, now).await?;
    demo.at(now);
    Ok(())
}

/// A content conflict (the CRM sync sent changed contents under a known key) and an attempt stuck
/// in flight right now.
pub(super) async fn conflict_and_live(demo: &mut Demo, now: DateTime<Utc>) -> Result<()> {
    demo.at(now - TimeDelta::minutes(5));
    demo.record("crm-sync-8999", "crm-sync", "upsert-customer", "crm", "upsert_customer",
        json!({"customer": {"name": "Grace Hopper", "email": "grace.hopper@example.org", "phone": "+1 202 555 0143",
               "company": "US Navy"}, "source": "signup-form"})).await?;
    demo.at(now - TimeDelta::minutes(3));
    demo.attempt(
        "crm-sync-8999",
        Outcome::Unknown,
        None,
        Some("504 Gateway Timeout"),
        Some(504),
    )
    .await?;
    demo.at(now);
    demo.record("crm-sync-8999", "crm-sync", "upsert-customer", "crm", "upsert_customer",
        json!({"customer": {"name": "Grace B. Hopper", "email": "grace@navy.example", "phone": "+1 202 555 0100",
               "company": "US Navy"}, "source": "admin-edit"})).await?;
    // an attempt stuck in flight right now
    demo.record("onb-live-1", "onboarding", "create-task", "projects", "create_task",
        json!({"title": "Kickoff call with Hedy Lamarr", "customer": {"name": "Hedy Lamarr", "email": "hedy@example.com"}})).await?;
    let _ = demo.ledger.start_attempt("onb-live-1", "dispatcher").await;

    Ok(())
}

/// Staff at work: other operators hold claims; some items were settled during the week.
pub(super) async fn staff_at_work(
    demo: &mut Demo,
    operator: &str,
    now: DateTime<Utc>,
) -> Result<()> {
    let page = demo
        .ledger
        .read()
        .list(&crate::ListFilter::default(), operator, None, 200)
        .await?;
    let keys: Vec<String> = page.items.iter().map(|v| v.key.clone()).collect();
    for (n, key) in keys.iter().enumerate() {
        // claims made in the last twenty minutes, in order (Activity reads newest first)
        demo.at(now - TimeDelta::minutes(20) + TimeDelta::seconds(n as i64 * 5));
        match n % 9 {
            1 => {
                demo.staff(key, "bob", StaffAction::Claim { force_reason: None })
                    .await
            }
            4 => {
                demo.staff(key, "carol", StaffAction::Claim { force_reason: None })
                    .await
            }
            6 => {
                demo.staff(key, "dave", StaffAction::Claim { force_reason: None })
                    .await;
                demo.staff(
                    key,
                    "dave",
                    StaffAction::Note {
                        text: "Customer called support; checking with the CRM team".into(),
                    },
                )
                .await;
            }
            7 if n < 40 => {
                demo.staff(key, "erin", StaffAction::Claim { force_reason: None })
                    .await;
                demo.staff(
                    key,
                    "erin",
                    StaffAction::ReconcileAbsent {
                        note: Some("not in the destination".into()),
                    },
                )
                .await;
                demo.staff(
                    key,
                    "erin",
                    StaffAction::Close {
                        resolution: Resolution::Abandoned,
                        reference: None,
                        superseded_by: None,
                        note: "customer cancelled the signup".into(),
                    },
                )
                .await;
                demo.staff(
                    key,
                    "erin",
                    StaffAction::Close {
                        resolution: Resolution::DoneElsewhere,
                        reference: Some("TASK-manual-1".into()),
                        superseded_by: None,
                        note: "created by hand".into(),
                    },
                )
                .await;
            }
            _ => {}
        }
    }
    Ok(())
}

/// An outage an hour ago, what incident mode (manual: Many at once) is for: the SMS provider timed out on 200
/// order alerts (unknown, and SMS neither deduplicates nor can be looked up: each must be
/// checked or reconciled from the provider's export), and the email provider refused
/// connections until 150 receipts spent their retries (failed: confirmed not sent, safe to
/// retry once it is back).
pub(super) async fn incident(demo: &mut Demo, now: DateTime<Utc>) -> Result<()> {
    let outage = now - TimeDelta::minutes(70);
    for n in 0..200 {
        let (name, _, phone) = PEOPLE[n % PEOPLE.len()];
        let key = format!("alert-sms-{}", 51000 + n);
        let t = outage + TimeDelta::seconds(n as i64 * 6);
        demo.at(t);
        demo.record(&key, "order-alerts", "send-sms", "sms", "send_sms",
            json!({"to": {"name": name, "phone": phone}, "body": format!("Your order #{} has shipped", 51000 + n)})).await?;
        demo.at(t + TimeDelta::seconds(30));
        demo.attempt(
            &key,
            Outcome::Unknown,
            None,
            Some("read timeout after 30s"),
            None,
        )
        .await?;
    }
    for n in 0..150 {
        let (name, email, _) = PEOPLE[(n + 5) % PEOPLE.len()];
        let key = format!("receipt-email-{}", 73000 + n);
        let t = outage + TimeDelta::seconds(n as i64 * 8);
        demo.at(t);
        demo.record(&key, "receipts", "send-receipt", "email", "send_email",
            json!({"to": {"name": name, "email": email}, "template": "receipt", "order": 73000 + n})).await?;
        for k in 0..8 {
            demo.at(t + TimeDelta::seconds(20 + k * 90));
            let r = demo
                .attempt(
                    &key,
                    Outcome::Transient,
                    None,
                    Some("connect error: connection refused"),
                    Some(503),
                )
                .await;
            if r.is_err() {
                break;
            }
        }
    }
    Ok(())
}

/// The demo's destinations with a lookup can be asked (`L`, `settle lookup`): a simulated
/// destination in this process holds the records of two in three of their unknown outcomes (their
/// answers were lost; the others never arrived), and the console's config looks keys up there.
pub(super) async fn with_lookups_to_ask(
    ledger: &Ledger,
    mut config: Config,
    operator: &str,
) -> Result<Config> {
    let asked: Vec<String> = config
        .destinations
        .iter()
        .filter(|(_, d)| d.lookup && d.lookup_url.is_none())
        .map(|(name, _)| name.clone())
        .collect();
    if asked.is_empty() {
        return Ok(config);
    }
    let mut held = Vec::new();
    for name in &asked {
        let filter = crate::ledger::ListFilter {
            query: crate::domain::filter::Filter::parse(&format!("dest:{name} state:unknown"))
                .map_err(Error::Invalid)?,
            ..Default::default()
        };
        let unknown = ledger.read().matching_keys(&filter, operator).await?;
        held.extend(
            unknown
                .into_iter()
                .enumerate()
                .filter(|(i, _)| i % 3 != 2)
                .map(|(_, k)| k),
        );
    }
    let profile = crate::tools::sim::Profile {
        dedupe: false,
        ..Default::default()
    };
    let base = crate::tools::sim::spawn_holding(profile, &held).await?;
    for name in asked {
        if let Some(d) = config.destinations.get_mut(&name) {
            d.lookup_url = Some(format!("{base}/tasks?key={{key}}"));
            d.timeout = Some(std::time::Duration::from_secs(2));
        }
    }
    Ok(config)
}
