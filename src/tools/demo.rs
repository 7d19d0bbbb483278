//! `settle demo`: a realistic week of three automations, written through the `Ledger` API only.
//!
//! Onboarding creates tasks in a project tool (deduplicates, has lookup), CRM sync upserts
//! customers (lookup, no deduplication), notifications send SMS (neither) and email (deduplicates
//! for an hour). The week holds every state, ages from seconds to days, claims by other operators,
//! a content conflict, a paused workflow, and payloads full of names, emails, phones and tokens.

use std::sync::{Arc, Mutex};

use chrono::{DateTime, TimeDelta, Utc};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::{Value, json};

use crate::config::Config;
use crate::error::{Error, Result};
use crate::ledger::{AttemptReport, Intent, Ledger, StaffAction};
use crate::{Outcome, Resolution};

pub const DEMO_DATABASE: &str = "sqlite://settle-demo.db";

const PEOPLE: [(&str, &str, &str); 12] = [
    ("Ada Lovelace", "ada@example.com", "+44 7700 900123"),
    (
        "Grace Hopper",
        "grace.hopper@example.org",
        "+1 202 555 0143",
    ),
    ("Alan Turing", "alan@turing.example", "+44 7700 900456"),
    (
        "Katherine Johnson",
        "kjohnson@example.net",
        "+1 757 555 0199",
    ),
    ("Edsger Dijkstra", "ewd@example.nl", "+31 20 555 0101"),
    ("Barbara Liskov", "liskov@example.edu", "+1 617 555 0177"),
    ("Donald Knuth", "knuth@example.org", "+1 650 555 0110"),
    ("Margaret Hamilton", "mh@example.com", "+1 617 555 0123"),
    ("Radia Perlman", "radia@example.com", "+1 408 555 0188"),
    ("Linus Torvalds", "linus@example.fi", "+358 40 555 0142"),
    ("Frances Allen", "fran.allen@example.com", "+1 914 555 0166"),
    ("John McCarthy", "jmc@example.edu", "+1 650 555 0155"),
];

/// The demo's own destinations and workflows, used when the config names none.
fn demo_config(mut config: Config) -> Config {
    if config.destinations.is_empty()
        && let Ok(example) = Config::parse(
            include_str!("../../assets/settle.toml"),
            "assets/settle.toml",
        )
    {
        config.destinations = example.destinations;
        config.workflows = example.workflows;
        config.redaction = example.redaction;
        // hints on, so that "check sms for this request" has something to search by (SPEC 8)
        config.redaction.hints = true;
    }
    config
}

struct Demo {
    ledger: Ledger,
    clock: Arc<Mutex<DateTime<Utc>>>,
    rng: StdRng,
    real_now: DateTime<Utc>,
}

impl Demo {
    fn at(&self, t: DateTime<Utc>) {
        *self.clock.lock().unwrap_or_else(|p| p.into_inner()) = t;
    }

    async fn record(
        &self,
        key: &str,
        workflow: &str,
        step: &str,
        dest: &str,
        action: &str,
        payload: Value,
    ) -> Result<()> {
        let intent = Intent {
            key: key.into(),
            workflow: workflow.into(),
            step: step.into(),
            destination: dest.into(),
            action: action.into(),
            payload,
        };
        self.ledger.record(&intent, workflow).await.map(|_| ())
    }

    async fn attempt(
        &self,
        key: &str,
        outcome: Outcome,
        reference: Option<String>,
        error: Option<&str>,
        status: Option<u16>,
    ) -> Result<()> {
        let report = AttemptReport {
            key: key.into(),
            outcome: Some(outcome),
            reference,
            error: error.map(Into::into),
            http_status: status,
            ..Default::default()
        };
        self.ledger
            .report_attempt(&report, "automation")
            .await
            .map(|_| ())
    }

    /// One operation's life, starting at `t`; `fate` picks how it ends.
    async fn operation(&mut self, i: usize, t: DateTime<Utc>, fate: u32) -> Result<()> {
        let (name, email, phone) = PEOPLE[i % PEOPLE.len()];
        let kind = i % 4;
        let (key, workflow, step, dest, action, payload) = match kind {
            0 => (
                format!("onb-{}-task", 4000 + i),
                "onboarding",
                "create-task",
                "projects",
                "create_task",
                json!({"title": format!("Kickoff call with {name}"), "due": (t + TimeDelta::days(3)).format("%Y-%m-%d").to_string(),
                       "assignee": {"team": "cs", "id": 7 + i % 5}, "customer": {"name": name, "email": email},
                       "notes": format!("Prefers mornings; call {phone}")}),
            ),
            1 => (
                format!("crm-sync-{}", 9000 + i),
                "crm-sync",
                "upsert-customer",
                "crm",
                "upsert_customer",
                json!({"customer": {"name": name, "email": email, "phone": phone, "company": "Analytical Engines Ltd",
                       "billing_address": "12 St James's Square, London"}, "source": "signup-form",
                       "auth": {"api_key": format!("sk_live_{:x}", 0xdead_beef_u64 + i as u64)}}),
            ),
            2 => (
                format!("notify-sms-{}", 7000 + i),
                "notifications",
                "welcome-sms",
                "sms",
                "send_sms",
                json!({"recipient": {"name": name, "phone": phone}, "template": "welcome", "locale": "en-GB"}),
            ),
            _ => (
                format!("notify-mail-{}", 5000 + i),
                "notifications",
                "welcome-email",
                "email",
                "send_email",
                json!({"to": email, "template": "welcome", "headers": {"Authorization": "Bearer eyJhbGciOiJIUzI1NiJ9.demo.sig"}}),
            ),
        };
        self.at(t);
        self.record(&key, workflow, step, dest, action, payload)
            .await?;
        let reference = || Some(format!("{}-{}", &dest[..3].to_uppercase(), 100_000 + i));
        let later = |s: i64| t + TimeDelta::seconds(s);
        match fate {
            // most work just succeeds, some after a transient hiccup
            0..=59 => {
                self.at(later(2));
                self.attempt(&key, Outcome::Accepted, reference(), None, Some(201))
                    .await?;
            }
            60..=69 => {
                self.at(later(2));
                self.attempt(
                    &key,
                    Outcome::Transient,
                    None,
                    Some("503 Service Unavailable (Retry-After: 5)"),
                    Some(503),
                )
                .await?;
                self.at(later(9));
                self.attempt(&key, Outcome::Accepted, reference(), None, Some(201))
                    .await?;
            }
            // the outcome could not be observed
            70..=79 => {
                self.at(later(2));
                let err = match dest {
                    "crm" => format!("read timeout after 30s (upsert of {email})"),
                    "sms" => format!("connection reset after sending to {phone}"),
                    _ => "read timeout after 30s".to_string(),
                };
                self.attempt(&key, Outcome::Unknown, None, Some(&err), None)
                    .await?;
            }
            // a confirmed rejection
            80..=85 => {
                self.at(later(2));
                let err = match dest {
                    "crm" => format!(
                        "422 Unprocessable Entity: email {email} already belongs to another customer"
                    ),
                    "projects" => "422 Unprocessable Entity: due date is in the past".to_string(),
                    "sms" => format!("400 Bad Request: number {phone} is not reachable"),
                    _ => format!("550 mailbox unavailable: {email}"),
                };
                self.attempt(&key, Outcome::Rejected, None, Some(&err), Some(422))
                    .await?;
            }
            // retried until the policy was spent
            86..=91 => {
                for k in 0..6 {
                    self.at(later(2 + k * 30));
                    let r = self
                        .attempt(
                            &key,
                            Outcome::Transient,
                            None,
                            Some("connect error: connection refused"),
                            None,
                        )
                        .await;
                    if r.is_err() {
                        break;
                    }
                }
            }
            // an attempt that started and never reported back (the sweep finds it)
            92..=94 => {
                self.at(later(1));
                // refused when the workflow was paused by its stopping threshold meanwhile
                let _ = self.ledger.start_attempt(&key, "dispatcher").await;
            }
            // recorded, not yet attempted
            _ => {}
        }
        // the week's staff work (SPEC 18's review): most exceptions older than a day and a half
        // were settled; onboarding's wait on the projects team, days; the others', hours
        if (70..=85).contains(&fate) && t < self.real_now - TimeDelta::hours(36) && i % 10 < 7 {
            let after = if workflow == "onboarding" {
                TimeDelta::hours(30 + (i % 40) as i64)
            } else {
                TimeDelta::minutes(40 + (i % 9) as i64 * 35)
            };
            self.at(t + after);
            let unknown = fate < 80;
            match (unknown, dest) {
                // found by the dispatcher's lookup: a blind retry would have sent it twice
                (true, "crm") => {
                    let answer = crate::domain::LookupAnswer::Found {
                        reference: reference().unwrap_or_default(),
                        http_status: 200,
                    };
                    let _ = self.ledger.lookup(&key, answer).await;
                }
                (true, _) => {
                    self.claimed(
                        &key,
                        "erin",
                        StaffAction::ReconcileFound {
                            reference: reference().unwrap_or_default(),
                            note: Some("found in the provider's log".into()),
                        },
                    )
                    .await;
                }
                // the customer already existed: the duplicate record was merged away
                (false, "crm") => {
                    self.claimed(
                        &key,
                        "bob",
                        StaffAction::Close {
                            resolution: Resolution::DuplicateCleanedUp,
                            reference: None,
                            superseded_by: None,
                            note: "merged the duplicate customer record".into(),
                        },
                    )
                    .await;
                }
                (false, _) => {
                    self.claimed(
                        &key,
                        "carol",
                        StaffAction::Close {
                            resolution: Resolution::DoneElsewhere,
                            reference: Some(format!("MANUAL-{i}")),
                            superseded_by: None,
                            note: "done by hand after correcting the source".into(),
                        },
                    )
                    .await;
                }
            }
        }
        Ok(())
    }

    /// A bad day (SPEC 18's review shows it): the SMS provider reset connections after sending
    /// for two hours four days ago; the next morning erin found most of them sent in its log.
    async fn sms_spike(&mut self, at: DateTime<Utc>) -> Result<()> {
        for n in 0..40usize {
            let (name, _, phone) = PEOPLE[n % PEOPLE.len()];
            let key = format!("notify-sms-spike-{n}");
            let t = at + TimeDelta::seconds(n as i64 * 180);
            self.at(t);
            self.record(
                &key,
                "notifications",
                "welcome-sms",
                "sms",
                "send_sms",
                json!({"recipient": {"name": name, "phone": phone}, "template": "welcome", "locale": "en-GB"}),
            )
            .await?;
            self.at(t + TimeDelta::seconds(2));
            self.attempt(
                &key,
                Outcome::Unknown,
                None,
                Some(&format!("connection reset after sending to {phone}")),
                None,
            )
            .await?;
        }
        for n in 0..32usize {
            let key = format!("notify-sms-spike-{n}");
            self.at(at + TimeDelta::hours(22) + TimeDelta::seconds(n as i64 * 60));
            self.claimed(
                &key,
                "erin",
                StaffAction::ReconcileFound {
                    reference: format!("SMS-spike-{n}"),
                    note: Some("in the provider's delivery log".into()),
                },
            )
            .await;
        }
        Ok(())
    }

    /// `who` claims `key`, then takes `action` on it.
    async fn claimed(&self, key: &str, who: &str, action: StaffAction) {
        self.staff(key, who, StaffAction::Claim { force_reason: None })
            .await;
        self.staff(key, who, action).await;
    }

    async fn staff(&self, key: &str, who: &str, action: StaffAction) {
        // The demo plays what staff did; a refusal here only means the story took another turn.
        let _ = self.ledger.staff(key, who, action).await;
    }
}

/// Fills the database at `url` with the demo week and prints its totals.
pub async fn run(
    url: &str,
    config: Config,
    reset: bool,
    live: bool,
    operator: &str,
) -> Result<i32> {
    let config = demo_config(config);
    if reset {
        let Some(path) = url
            .strip_prefix("sqlite://")
            .or_else(|| url.strip_prefix("sqlite:"))
        else {
            return Err(Error::Refused(
                "--reset only removes SQLite demo files; the audit is append-only, so use a fresh PostgreSQL database".into(),
            ));
        };
        let path = path.split('?').next().unwrap_or(path);
        for suffix in ["", "-wal", "-shm"] {
            let _ = std::fs::remove_file(format!("{path}{suffix}"));
        }
    }
    let clock = Arc::new(Mutex::new(Utc::now()));
    let live_config = config.clone();
    let dispatch_config = config.clone();
    let ledger = {
        let c = clock.clone();
        Ledger::open(url, config)
            .await?
            .with_clock(move || *c.lock().unwrap_or_else(|p| p.into_inner()))
    };
    let (ops, _, _) = ledger.counts().await?;
    if ops == 0 {
        let mut demo = Demo {
            ledger: ledger.clone(),
            clock,
            rng: StdRng::seed_from_u64(42),
            real_now: Utc::now(),
        };
        fill(&mut demo, operator).await?;
        say!("demo week written to {}", ledger.database());
    } else {
        say!(
            "{} already holds {ops} operations (settle demo --reset starts afresh)",
            ledger.database()
        );
    }
    // From here on the real clock: the week is written, the console shows it live.
    let live_config = with_lookups_to_ask(&ledger, live_config, operator).await?;
    ledger.close().await;
    let ledger = Ledger::open_console(url, live_config).await?;
    if live {
        start_live(url, dispatch_config).await?;
    }
    use std::io::IsTerminal;
    if std::io::stdout().is_terminal() && std::io::stdin().is_terminal() {
        let result = crate::console::run(ledger.clone(), operator).await;
        ledger.close().await;
        return result.map(|()| 0);
    }
    // Not a terminal (a script, CI): the totals instead of the console.
    let stats = Ledger::stats(&ledger).await?;
    crate::cli::output::stats(&stats);
    say!(
        "\nOpen the console on it: settle --db {}",
        ledger.database()
    );
    ledger.close().await;
    Ok(0)
}

async fn fill(demo: &mut Demo, operator: &str) -> Result<()> {
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
    demo.ledger.sweep().await?;

    // a content conflict: the CRM sync sent changed contents under a known key
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

    incident(demo, now).await?;

    // staff at work: other operators hold claims; some items were settled during the week
    let page = demo
        .ledger
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
    demo.at(now);
    Ok(())
}

/// An outage an hour ago, what incident mode (SPEC 16) is for: the SMS provider timed out on 200
/// order alerts (unknown, and SMS neither deduplicates nor can be looked up: each must be
/// checked or reconciled from the provider's export), and the email provider refused
/// connections until 150 receipts spent their retries (failed: confirmed not sent, safe to
/// retry once it is back).
async fn incident(demo: &mut Demo, now: DateTime<Utc>) -> Result<()> {
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
async fn with_lookups_to_ask(
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
        let unknown = ledger.matching_keys(&filter, operator).await?;
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

/// `settle demo --live`: two simulated destinations (one deduplicating), a dispatcher and a
/// trickle of new work, in this process, so the console shows operations moving and failing.
async fn start_live(url: &str, mut config: Config) -> Result<()> {
    use crate::tools::sim::{self, Profile};
    let profile = |dedupe, seed| Profile {
        dedupe,
        fault_rate: 0.15,
        seed,
        latency: std::time::Duration::from_millis(80),
        late: std::time::Duration::from_secs(3),
        ..Profile::default()
    };
    let dedupes = sim::spawn(profile(true, 7)).await?;
    let plain = sim::spawn(profile(false, 8)).await?;
    for (name, base) in [
        ("projects", &dedupes),
        ("email", &dedupes),
        ("crm", &plain),
        ("sms", &plain),
    ] {
        if let Some(d) = config.destinations.get_mut(name) {
            d.url = Some(format!("{base}/tasks"));
            d.timeout = Some(std::time::Duration::from_secs(2));
            if d.lookup {
                d.lookup_url = Some(format!("{base}/tasks?key={{key}}"));
            }
        }
    }
    let ledger = Ledger::open(url, config).await?;
    let dispatcher = ledger.clone();
    tokio::spawn(async move {
        let options = crate::dispatch::Options {
            concurrency: 4,
            ..Default::default()
        };
        if let Err(e) = crate::dispatch::run(dispatcher, options).await {
            tracing::warn!(error = %e, "demo dispatcher stopped");
        }
    });
    tokio::spawn(async move {
        let kinds = [
            ("onboarding", "create-task", "projects", "create_task"),
            ("notifications", "welcome-sms", "sms", "send_sms"),
            ("notifications", "welcome-email", "email", "send_email"),
        ];
        for n in 0.. {
            tokio::time::sleep(std::time::Duration::from_secs(2)).await;
            let (name, email, phone) = PEOPLE[n % PEOPLE.len()];
            let (workflow, step, destination, action) = kinds[n % kinds.len()];
            let intent = Intent {
                key: format!("live-{n}-{destination}"),
                workflow: workflow.into(),
                step: step.into(),
                destination: destination.into(),
                action: action.into(),
                payload: json!({"customer": {"name": name, "email": email, "phone": phone}, "template": "welcome"}),
            };
            if ledger.record(&intent, workflow).await.is_err() {
                return;
            }
        }
    });
    Ok(())
}
