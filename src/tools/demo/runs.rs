//! The demo's runs (manual: Runs): customer onboardings of three steps (the customer in the CRM, the
//! kickoff task with the customer's reference, the welcome SMS with the task's), most of them
//! done, a few stalled between two steps, one blocked on the unknown outcome of its SMS.

use chrono::{DateTime, TimeDelta, Utc};
use rand::Rng;
use serde_json::{Value, json};

use crate::Outcome;
use crate::error::Result;
use crate::ledger::Intent;
use crate::tools::demo::week::{Demo, PEOPLE};

/// How a demo run ends.
#[derive(Clone, Copy, PartialEq)]
enum Fate {
    Done,
    /// Stopped after this many steps (the automation crashed and nobody reran it).
    StalledAfter(usize),
    /// The SMS's outcome is unknown (sms neither deduplicates nor can be looked up): the run
    /// waits on a person.
    Blocked,
}

const RUNS: usize = 42;

pub(super) async fn onboardings(demo: &mut Demo, now: DateTime<Utc>) -> Result<()> {
    let first = now - TimeDelta::days(7);
    for n in 0..RUNS {
        // spread over the week; the last ones in the last hours, so stalls of every age show
        let t0 = match n {
            39 => now - TimeDelta::minutes(52),
            40 => now - TimeDelta::hours(3),
            41 => now - TimeDelta::minutes(35),
            _ => first + TimeDelta::minutes(n as i64 * 230 + demo.rng.random_range(0..60)),
        };
        let fate = match n {
            9 | 40 => Fate::StalledAfter(1),
            26 | 39 => Fate::StalledAfter(2),
            41 => Fate::Blocked,
            _ => Fate::Done,
        };
        run(demo, 4100 + n, t0, fate).await?;
    }
    Ok(())
}

async fn run(demo: &mut Demo, n: usize, t0: DateTime<Utc>, fate: Fate) -> Result<()> {
    let run = format!("cust-{n}");
    let (name, email, phone) = PEOPLE[n % PEOPLE.len()];
    let mut t = t0;
    let customer =
        json!({"customer": {"name": name, "email": email, "phone": phone}, "plan": "team"});
    let customer_ref = format!("CUST-{}", 77_000 + n);
    step(
        demo,
        &run,
        "create-customer",
        "crm",
        "upsert_customer",
        customer,
        t,
    )
    .await?;
    t += TimeDelta::seconds(demo.rng.random_range(1..4));
    settle(demo, &run, "create-customer", t, Ok(customer_ref.clone())).await?;
    if fate == Fate::StalledAfter(1) {
        return Ok(());
    }
    t += TimeDelta::seconds(demo.rng.random_range(2..240));
    let task = json!({"title": format!("Kickoff call with {name}"), "customer": customer_ref});
    step(
        demo,
        &run,
        "create-task",
        "projects",
        "create_task",
        task,
        t,
    )
    .await?;
    t += TimeDelta::seconds(demo.rng.random_range(1..4));
    let task_ref = format!("T-{}", 9_000 + n);
    settle(demo, &run, "create-task", t, Ok(task_ref.clone())).await?;
    if fate == Fate::StalledAfter(2) {
        return Ok(());
    }
    t += TimeDelta::seconds(demo.rng.random_range(2..90));
    let sms = json!({"to": phone, "text": format!("Welcome, {name}! Your kickoff is {task_ref}.")});
    step(demo, &run, "welcome-sms", "sms", "send_sms", sms, t).await?;
    t += TimeDelta::seconds(demo.rng.random_range(1..3));
    let answer = match fate {
        Fate::Blocked => Err("read timeout after 30s"),
        _ => Ok(format!("SM{}", 5_550_000 + n)),
    };
    settle(demo, &run, "welcome-sms", t, answer).await
}

async fn step(
    demo: &mut Demo,
    run: &str,
    step: &str,
    destination: &str,
    action: &str,
    payload: Value,
    at: DateTime<Utc>,
) -> Result<()> {
    demo.at(at);
    let intent = Intent {
        key: format!("{run}:{step}"),
        workflow: "onboarding".into(),
        step: step.into(),
        destination: destination.into(),
        action: action.into(),
        payload,
        run: Some(run.into()),
    };
    demo.ledger
        .record(&intent, "onboarding-bot")
        .await
        .map(|_| ())
}

/// The step's attempt, answered: its reference, or an outcome nobody observed.
async fn settle(
    demo: &mut Demo,
    run: &str,
    step: &str,
    at: DateTime<Utc>,
    answer: std::result::Result<String, &str>,
) -> Result<()> {
    demo.at(at);
    let key = format!("{run}:{step}");
    match answer {
        Ok(reference) => {
            demo.attempt(&key, Outcome::Accepted, Some(reference), None, Some(201))
                .await
        }
        Err(error) => {
            demo.attempt(&key, Outcome::Unknown, None, Some(error), None)
                .await
        }
    }
}
