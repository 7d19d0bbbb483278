//! `settle dispatch`: runs due operations of the HTTP destinations in the config.
//!
//! In rounds (see [`Ledger::round`]): record the attempts that finished and start due ones in one
//! transaction; then send each started payload as its destination's settings say (manual: Destinations and the dispatcher;
//! [`http`]), the key in the idempotency header, and classify the answer; where the outcome is
//! unknown at a destination with a lookup, look the key up, and the next round settles it
//! (audited as `settle`). An `auth` answer pauses its destination in that round. Claimed items
//! and paused workflows or destinations are never started: the due query leaves them out and
//! the rules check again.
//!
//! Rooms: `dispatcher.rs` the rounds of sends, `send.rs` one attempt sent and its answer kept
//! scrubbed, `lookups.rs` a key looked up at its destination, `http/` the HTTP call and what its
//! answer means.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// A database call in the dispatcher's loop. An outage is waited out: the answers in hand are
/// kept and recorded once the database is back (only a stop request gives up on them; the next
/// start's sweep then makes those attempts `unknown`). Any other error ends the run.
macro_rules! db {
    ($d:ident, $call:expr) => {
        match $call.await {
            Ok(v) => {
                $d.reachable();
                v
            }
            Err(Error::Unavailable(why)) if !$d.stopping() => {
                $d.unreachable(&why).await;
                continue;
            }
            Err(e) => return Err(e),
        }
    };
}

mod dispatcher;
mod http;
mod lookups;
mod send;

pub use http::{Answer, Endpoint, HttpDestination, Observed, Raw, classify, is_redirect};
pub use lookups::{Looked, Lookups};
use send::Done;
pub use send::{DISPATCHER, Options, Totals, attempt};

use crate::dispatch::dispatcher::Dispatcher;
use crate::error::{Error, Result};
use crate::ledger::Ledger;

/// Runs until interrupted (SIGINT/SIGTERM: finishes the attempts in flight, starts no more), or
/// with `until_settled` until nothing automation may move is left.
///
/// Up to `concurrency` attempts (and lookups) are in flight. Each round records every attempt
/// that finished since the last one and starts as many new ones as there are free places, in one
/// transaction: under load many operations share a commit, and an idle dispatcher still records
/// at once. Between rounds it waits for an answer, or for the moment the next retry is due (so
/// that retries start at their drawn moments, however short), or for the next sweep: at least
/// every half `attempt_timeout` it sweeps interrupted attempts (manual: States) and looks up those at
/// destinations with a lookup.
pub async fn run(ledger: Ledger, options: Options) -> Result<Totals> {
    // the environment is read once, here: a missing variable stops the run before anything
    let destinations = resolve_destinations(&ledger)?;
    // After a crash nothing stays in flight forever.
    ledger.rounds().sweep().await?;
    // `[retention] auto = true`: pruned beside the rounds, for as long as they run
    let _pruning = ledger.retention().auto_prune();
    let client = crate::outbound::client();
    let stop = Arc::new(tokio::sync::Notify::new());
    let stopping = Arc::new(AtomicBool::new(false));
    {
        let (stop, stopping) = (stop.clone(), stopping.clone());
        tokio::spawn(async move {
            shutdown_signal().await;
            stopping.store(true, Ordering::SeqCst);
            stop.notify_waiters();
        });
    }
    let (done, answers) = tokio::sync::mpsc::unbounded_channel::<Done>();
    let mut d = Dispatcher {
        names: destinations.keys().cloned().collect(),
        lookup_names: destinations
            .iter()
            .filter(|(_, d)| d.has_lookup())
            .map(|(n, _)| n.clone())
            .collect(),
        destinations,
        name: format!("{}-{}", hostname(), std::process::id()),
        concurrency: options.concurrency.max(1),
        sweep_every: (ledger.config().attempt_timeout / 2).max(Duration::from_millis(50)),
        ledger,
        options,
        client,
        stop,
        stopping,
        done,
        answers,
        in_flight: 0,
        answered: Vec::new(),
        looked_up: Vec::new(),
        looking: HashSet::new(),
        probed: Vec::new(),
        sending: crate::ledger::StartedRows::new(),
        cannot_look_up: HashSet::new(),
        totals: Totals::default(),
        beat: None,
        swept: None,
        outage: None,
        paused_here: HashSet::new(),
        deferred: HashSet::new(),
    };
    let ran = d.run().await;
    // a dispatcher that stops says so: no longer listed, its stop pages nobody (one that dies
    // without a word is listed as down until `dispatcher_gone_after`)
    if let Err(e) = d.ledger.rounds().stopped(&d.name).await {
        tracing::warn!(error = %e, "the dispatcher's stop not recorded");
    }
    ran?;
    d.totals.budget_waits = d.deferred.len() as u64;
    Ok(d.totals)
}

/// The HTTP destinations of the config, resolved (their `${NAME}`s read from the environment).
fn resolve_destinations(ledger: &Ledger) -> Result<HashMap<String, Arc<HttpDestination>>> {
    let env = |name: &str| std::env::var(name).ok();
    let destinations: HashMap<String, Arc<HttpDestination>> = ledger
        .config()
        .http_destinations()
        .into_iter()
        .map(|(name, d)| {
            Ok((
                name.to_string(),
                Arc::new(HttpDestination::resolve(name, d, &env)?),
            ))
        })
        .collect::<Result<_>>()?;
    if destinations.is_empty() {
        return Err(Error::Invalid(
            "no destination in the config has a `url`: nothing to dispatch".into(),
        ));
    }
    Ok(destinations)
}

async fn shutdown_signal() {
    let ctrl_c = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        let mut term =
            match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
                Ok(s) => s,
                Err(_) => {
                    let _ = ctrl_c.await;
                    return;
                }
            };
        tokio::select! {
            _ = ctrl_c => {}
            _ = term.recv() => {}
        }
    }
    #[cfg(not(unix))]
    {
        let _ = ctrl_c.await;
    }
}

fn hostname() -> String {
    std::fs::read_to_string("/etc/hostname")
        .map(|h| h.trim().to_string())
        .unwrap_or_else(|_| "dispatcher".into())
}
