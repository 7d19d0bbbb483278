//! `settle demo`: a realistic week of three automations, written through the `Ledger` API only.
//!
//! Onboarding creates tasks in a project tool (deduplicates, has lookup), CRM sync upserts
//! customers (lookup, no deduplication), notifications send SMS (neither) and email (deduplicates
//! for an hour). The week holds every state, ages from seconds to days, claims by other operators,
//! a content conflict, a paused workflow, and payloads full of names, emails, phones and tokens.
//!
//! Rooms: `week.rs` its cast and recorder, `fill.rs` the week recorded, `life.rs` what happened in
//! it, `runs.rs` its onboardings, `inbox.rs` the receiver its channel is told through.

use std::sync::{Arc, Mutex};

use chrono::Utc;
use rand::SeedableRng;
use rand::rngs::StdRng;
use serde_json::json;

use crate::config::Config;
use crate::error::{Error, Result};
use crate::ledger::{Intent, Ledger};

mod fill;
mod inbox;
mod life;
mod runs;
mod week;

use fill::{fill, with_lookups_to_ask};
use week::{Demo, PEOPLE};

pub const DEMO_DATABASE: &str = "sqlite://settle-demo.db";

/// The demo's own destinations and workflows, used when the config names none.
fn demo_config(mut config: Config) -> Config {
    if config.destinations.is_empty()
        && let Ok(example) = Config::parse(
            include_str!("../../../assets/settle.toml"),
            "assets/settle.toml",
        )
    {
        config.destinations = example.destinations;
        config.workflows = example.workflows;
        config.redaction = example.redaction;
        config.teams = example.teams;
        config.channels = example.channels;
        config.defaults = example.defaults;
        // hints on, so that "check sms for this request" has something to search by (manual: Redaction)
        config.redaction.hints = true;
    }
    config
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
        let _telling = tell_the_teams(&ledger).await?;
        let result = crate::console::run(ledger.clone(), operator).await;
        ledger.close().await;
        return result.map(|()| 0);
    }
    // Not a terminal (a script, CI): the totals instead of the console.
    let stats = ledger.read().stats().await?;
    say!("{stats}");
    say!(
        "\nOpen the console on it: settle --db {}",
        ledger.database()
    );
    ledger.close().await;
    Ok(0)
}

/// The demo's teams are told through its channel: to a receiver of its own where the channel's
/// variable is not set (`settle notifications` lists what was sent).
async fn tell_the_teams(ledger: &Ledger) -> Result<Option<crate::notify::Sending>> {
    for c in ledger.config().channels.values() {
        if let Some(var) = &c.url_env
            && std::env::var_os(var).is_none()
        {
            crate::notify::give_variable(var, inbox::start().await?);
        }
    }
    Ok(crate::notify::start(
        ledger,
        "settle demo".into(),
        std::time::Duration::from_secs(1),
    ))
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
                run: None,
            };
            if ledger.record(&intent, workflow).await.is_err() {
                return;
            }
        }
    });
    Ok(())
}
