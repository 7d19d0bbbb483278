//! `settle dispatch`: runs due operations of the HTTP destinations in the config.
//!
//! In rounds (see [`Ledger::round`]): record the attempts that finished and start due ones in one
//! transaction; then send each started payload as its destination's settings say (SPEC 11a,
//! [`http`]), the key in the idempotency header, and classify the answer; where the outcome is
//! unknown at a destination with a lookup, look the key up, and the next round settles it
//! (audited as `settle`). An `auth` answer pauses its destination in that round. Claimed items
//! and paused workflows or destinations are never started: the due query leaves them out and
//! the rules check again.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

mod http;
mod lookups;

pub use http::{Answer, Endpoint, HttpDestination, Observed, classify};
pub use lookups::{Looked, Lookups};

use crate::domain::redact::OperationRedaction;
use crate::domain::redact::redact_text;
use crate::domain::{LookupAnswer, Outcome};
use crate::error::{Error, Result};
use crate::ledger::{AttemptReport, Finished, Ledger, StartedOp};

/// The actor named on attempts the dispatcher runs.
pub const DISPATCHER: &str = "dispatcher";

#[derive(Clone, Debug)]
pub struct Options {
    /// Operations sent at once.
    pub concurrency: usize,
    /// Stop when nothing automation may move is left (for drills and scripts).
    pub until_settled: bool,
    /// How long to wait between polls for due work.
    pub idle: Duration,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            concurrency: 16,
            until_settled: false,
            idle: Duration::from_millis(200),
        }
    }
}

/// What a run did, for its closing line.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Totals {
    pub attempts: u64,
    pub retries: u64,
    pub succeeded: u64,
    pub looked_up: u64,
    /// Operations that waited for the retry budget at least once (counted up to about 100,000).
    pub budget_waits: u64,
}

/// An attempt sent and answered, on its way to be recorded.
struct Sent {
    finished: Finished,
    destination: String,
    retry: bool,
}

/// A destination's text as settle keeps it: scrubbed of this operation's sensitive values (an
/// answer may echo the payload) and of the built-in patterns, and with any NUL escaped, since
/// PostgreSQL cannot store one (the same on SQLite, so both backends keep the same text).
fn kept(scrub: &OperationRedaction, text: &str) -> String {
    let text = scrub.text(text);
    if text.contains('\0') {
        text.replace('\0', "\\x00")
    } else {
        text
    }
}

/// A lookup's answer as settle keeps it: its reference scrubbed like any text of the destination.
pub(crate) fn kept_answer(answer: LookupAnswer, keep: &dyn Fn(String) -> String) -> LookupAnswer {
    match answer {
        LookupAnswer::Found {
            reference,
            http_status,
        } => LookupAnswer::Found {
            reference: keep(reference),
            http_status,
        },
        other => other,
    }
}

/// Sends one started attempt and, where the outcome is unknown and the destination has a lookup,
/// asks whether the work exists. What the destination said is kept only scrubbed (of this
/// operation's sensitive values and of the secrets read from the environment).
async fn send(
    client: reqwest::Client,
    dest: Arc<HttpDestination>,
    row: StartedOp,
    scrub: OperationRedaction,
) -> Sent {
    let endpoint = dest.sender(&row.action);
    let mut seen = match endpoint {
        Some(e) => e.send(&client, &row).await,
        None => Observed {
            outcome: Outcome::Rejected,
            http_status: None,
            reference: None,
            error: Some(format!(
                "not sent: destination {} has no url for action {}",
                dest.name, row.action
            )),
            retry_after: None,
            pause: None,
        },
    };
    let keep = |text: String| match endpoint {
        Some(e) => kept(&scrub, &e.scrub_secrets(text)),
        None => kept(&scrub, &text),
    };
    seen.error = seen.error.map(keep);
    seen.reference = seen.reference.map(keep);
    let lookup = match endpoint {
        Some(e) if seen.outcome == Outcome::Unknown && e.has_lookup() => e
            .look_up(&client, &row)
            .await
            .map(|a| kept_answer(a, &keep)),
        _ => None,
    };
    Sent {
        finished: Finished {
            report: AttemptReport {
                key: row.key,
                attempt: None,
                outcome: Some(seen.outcome),
                reference: seen.reference,
                error: seen.error,
                http_status: seen.http_status,
                retry_after: seen.retry_after,
            },
            lookup,
            pause_destination: seen.pause,
        },
        destination: row.destination,
        retry: row.retry,
    }
}

/// What a task spawned by the dispatcher hands back.
enum Done {
    /// An attempt sent and answered.
    Attempt(Sent),
    /// An interrupted attempt looked up at its destination.
    LookedUp { key: String, answer: LookupAnswer },
}

/// Runs until interrupted (SIGINT/SIGTERM: finishes the attempts in flight, starts no more), or
/// with `until_settled` until nothing automation may move is left.
///
/// Up to `concurrency` attempts (and lookups) are in flight. Each round records every attempt
/// that finished since the last one and starts as many new ones as there are free places, in one
/// transaction: under load many operations share a commit, and an idle dispatcher still records
/// at once. Between rounds it waits for an answer, or for the moment the next retry is due (so
/// that retries start at their drawn moments, however short), or for the next sweep: at least
/// every half `attempt_timeout` it sweeps interrupted attempts (SPEC 3) and looks up those at
/// destinations with a lookup.
pub async fn run(ledger: Ledger, options: Options) -> Result<Totals> {
    // the environment is read once, here: a missing variable stops the run before anything
    let destinations = resolve_destinations(&ledger)?;
    // After a crash nothing stays in flight forever.
    ledger.sweep().await?;
    let client = reqwest::Client::builder()
        .build()
        .map_err(|e| Error::Invalid(format!("cannot build the HTTP client: {e}")))?;
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
        sending: crate::ledger::StartedRows::new(),
        cannot_look_up: HashSet::new(),
        totals: Totals::default(),
        beat: None,
        swept: None,
        outage: None,
        paused_here: HashSet::new(),
        deferred: HashSet::new(),
    };
    d.run().await?;
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

/// A running dispatcher's state between rounds.
struct Dispatcher {
    ledger: Ledger,
    options: Options,
    client: reqwest::Client,
    destinations: HashMap<String, Arc<HttpDestination>>,
    names: Vec<String>,
    /// The destinations whose lookup the dispatcher can run.
    lookup_names: Vec<String>,
    /// This dispatcher's name in the heartbeats.
    name: String,
    concurrency: usize,
    sweep_every: Duration,
    stop: Arc<tokio::sync::Notify>,
    stopping: Arc<AtomicBool>,
    done: tokio::sync::mpsc::UnboundedSender<Done>,
    answers: tokio::sync::mpsc::UnboundedReceiver<Done>,
    /// Attempts and lookups sent and not yet answered.
    in_flight: usize,
    /// Attempts answered, to be recorded by the next round.
    answered: Vec<Sent>,
    /// Lookups of interrupted attempts answered, to be recorded.
    looked_up: Vec<(String, LookupAnswer)>,
    /// Keys whose lookup is in flight.
    looking: HashSet<String>,
    /// The attempts this dispatcher sent and has not recorded yet, as their rounds left their
    /// rows: its own sweep spares them (they are not interrupted: their answer, or their
    /// request's timeout, will come), and the round that records an answer decides on its row.
    sending: crate::ledger::StartedRows,
    /// Keys whose action has no lookup this dispatcher can run (left to a person).
    cannot_look_up: HashSet<String>,
    totals: Totals,
    beat: Option<Instant>,
    /// When it last swept (`None`: sweep now).
    swept: Option<Instant>,
    outage: Option<Instant>,
    /// Destinations this run paused on an `auth` answer (said once each).
    paused_here: HashSet<String>,
    /// Operations that waited for the retry budget at least once.
    deferred: HashSet<String>,
}

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

impl Dispatcher {
    fn stopping(&self) -> bool {
        self.stopping.load(Ordering::SeqCst)
    }

    fn reachable(&mut self) {
        if let Some(since) = self.outage.take() {
            tracing::info!(
                after_ms = since.elapsed().as_millis() as u64,
                "database reachable again"
            );
            crate::tell!("settle: database reachable again");
        }
    }

    async fn unreachable(&mut self, why: &str) {
        if self.outage.is_none() {
            let kept = self.answered.len() + self.looked_up.len();
            tracing::warn!(error = %why, kept, "database unreachable");
            crate::tell!(
                "settle: {}: keeping {kept} answer(s) in hand, retrying",
                crate::domain::escape_text(why)
            );
            self.outage = Some(Instant::now());
        }
        idle(&self.stop, OUTAGE_PAUSE).await;
    }

    /// Takes what finished tasks handed back.
    fn take(&mut self, done: Done) {
        self.in_flight -= 1;
        match done {
            Done::Attempt(s) => self.answered.push(s),
            Done::LookedUp { key, answer } => self.looked_up.push((key, answer)),
        }
    }

    /// Waits up to `wait` for the next answer (or a stop request).
    async fn wait_for_answer(&mut self, wait: Duration) {
        let got = tokio::select! {
            got = tokio::time::timeout(wait, self.answers.recv()) => got.ok().flatten(),
            _ = self.stop.notified() => None,
        };
        if let Some(done) = got {
            self.take(done);
        }
    }

    async fn run(&mut self) -> Result<()> {
        loop {
            while let Ok(done) = self.answers.try_recv() {
                self.take(done);
            }
            if self.beat.is_none_or(|t| t.elapsed() >= HEARTBEAT) {
                db!(self, self.ledger.heartbeat(&self.name));
                self.beat = Some(Instant::now());
            }
            if !self.looked_up.is_empty() {
                db!(
                    self,
                    record_lookups(&self.ledger, &mut self.looked_up, &mut self.looking)
                );
            }
            let stopping = self.stopping();
            if !stopping
                && self.answered.is_empty()
                && self.swept.is_none_or(|t| t.elapsed() >= self.sweep_every)
            {
                db!(
                    self,
                    self.ledger.sweep_sparing(&|k| self.sending.contains_key(k))
                );
                self.swept = Some(Instant::now());
                db!(self, self.look_up_interrupted());
            }
            let free = if stopping {
                0
            } else {
                self.concurrency - self.in_flight
            };
            // with answers in hand a round runs anyway (and starts what is due): no need to ask
            let due = if free > 0 && self.answered.is_empty() {
                db!(self, self.ledger.next_due(&self.names, HEARTBEAT))
            } else {
                None
            };
            let now = self.ledger.now();
            let until_due = due.map(|t| (t - now).to_std().unwrap_or_default());
            let due_now = until_due.is_some_and(|d| d.is_zero());
            if self.answered.is_empty() && !due_now {
                let until_sweep = self.swept.map_or(Duration::ZERO, |t| {
                    self.sweep_every.saturating_sub(t.elapsed())
                });
                if self.in_flight > 0 {
                    let wait = HEARTBEAT
                        .min(until_sweep)
                        .min(until_due.unwrap_or(HEARTBEAT));
                    self.wait_for_answer(wait).await;
                    continue;
                }
                if stopping
                    || (self.options.until_settled
                        && self.looked_up.is_empty()
                        && db!(self, self.ledger.unsettled(&self.names)) == 0)
                {
                    return Ok(());
                }
                let wait = self
                    .options
                    .idle
                    .min(until_due.unwrap_or(self.options.idle));
                idle(&self.stop, wait).await;
                if until_due.is_none() {
                    // nothing due soon: sweep after a whole idle wait, as at a start
                    self.swept = None;
                }
                continue;
            }
            let (launched, recorded) = db!(self, self.round(free));
            if launched == 0 && recorded == 0 {
                // everything due waits for the retry budget, or another dispatcher took it
                if self.in_flight > 0 {
                    self.wait_for_answer(self.options.idle).await;
                } else {
                    idle(&self.stop, self.options.idle).await;
                }
            }
        }
    }

    /// One round: records the answers in hand and starts up to `free` due attempts. Returns how
    /// many it started and recorded.
    async fn round(&mut self, free: usize) -> Result<(usize, usize)> {
        let finished: Vec<Finished> = self.answered.iter().map(|s| s.finished.clone()).collect();
        let round = match self
            .ledger
            .round_knowing(&finished, &self.sending, &self.names, free, DISPATCHER)
            .await
        {
            // an answer the database would not store must not hold back the others
            Err(Error::Unstorable(why)) if !finished.is_empty() => {
                one_by_one(&self.ledger, &finished, &self.names, &why).await?
            }
            other => other?,
        };
        let recorded = self.answered.len();
        let started_rows = round.started_rows();
        for (sent, applied) in self.answered.drain(..).zip(round.finished) {
            log_attempt(&sent, &applied);
            self.sending.remove(&sent.finished.report.key);
            if let Some(reason) = &sent.finished.pause_destination
                && self.paused_here.insert(sent.destination.clone())
            {
                let d = crate::domain::escape_text(&sent.destination);
                tracing::warn!(destination = %sent.destination, reason = %reason, "destination paused");
                crate::tell!(
                    "settle: destination {d} paused: {}; `settle resume --destination {d}` lifts it",
                    crate::domain::escape_text(reason)
                );
            }
            self.totals.attempts += 1;
            self.totals.retries += u64::from(sent.retry);
            self.totals.succeeded +=
                u64::from(applied.is_ok_and(|a| a.to == crate::State::Succeeded));
        }
        self.totals.looked_up += round.looked_up as u64;
        // a long-running dispatcher keeps at most this many keys for its closing line
        if self.deferred.len() < 100_000 {
            self.deferred.extend(round.waiting_for_budget);
        }
        let launched = round.started.len();
        self.sending.extend(started_rows);
        for op in round.started {
            let Some(dest) = self.destinations.get(&op.destination).cloned() else {
                continue;
            };
            let (client, done) = (self.client.clone(), self.done.clone());
            let scrub = self.ledger.answer_scrubber(&op);
            self.in_flight += 1;
            tokio::spawn(async move {
                let _ = done.send(Done::Attempt(send(client, dest, op, scrub).await));
            });
        }
        Ok((launched, recorded))
    }

    /// Sends a lookup for each interrupted attempt at a destination with a lookup that nobody has
    /// looked up yet (SPEC 3), as many as there are free places.
    async fn look_up_interrupted(&mut self) -> Result<()> {
        let free = self.concurrency - self.in_flight;
        if self.lookup_names.is_empty() || free == 0 {
            return Ok(());
        }
        let skip = self.looking.len() + self.cannot_look_up.len();
        let ops = self
            .ledger
            .interrupted_to_look_up(&self.lookup_names, free + skip)
            .await?;
        for op in ops {
            if self.in_flight >= self.concurrency
                || self.looking.contains(&op.key)
                || self.cannot_look_up.contains(&op.key)
            {
                continue;
            }
            let endpoint = self
                .destinations
                .get(&op.destination)
                .and_then(|d| d.endpoint(&op.action))
                .filter(|e| e.has_lookup())
                .cloned();
            let Some(endpoint) = endpoint else {
                self.cannot_look_up.insert(op.key.clone());
                continue;
            };
            let (client, done) = (self.client.clone(), self.done.clone());
            let scrub = self.ledger.answer_scrubber(&op);
            self.looking.insert(op.key.clone());
            self.in_flight += 1;
            tokio::spawn(async move {
                let keep = |text: String| kept(&scrub, &endpoint.scrub_secrets(text));
                let answer = match endpoint.look_up(&client, &op).await {
                    Some(a) => kept_answer(a, &keep),
                    None => LookupAnswer::NoAnswer {
                        why: "no lookup configured".into(),
                    },
                };
                let _ = done.send(Done::LookedUp {
                    key: op.key,
                    answer,
                });
            });
        }
        Ok(())
    }
}

/// Records the lookups of interrupted attempts (each its own change, as `settle`). One that
/// another writer settled meanwhile is left as it is; an outage keeps the rest in hand.
async fn record_lookups(
    ledger: &Ledger,
    looked_up: &mut Vec<(String, LookupAnswer)>,
    looking: &mut HashSet<String>,
) -> Result<()> {
    while let Some((key, answer)) = looked_up.last() {
        match ledger.lookup(key, answer.clone()).await {
            Ok(a) => {
                tracing::info!(key = %key, answer = answer.as_str(), state = a.to.as_str(), "looked up")
            }
            Err(e @ Error::Unavailable(_)) => return Err(e),
            Err(e) => {
                tracing::info!(key = %key, refused = %redact_text(&e.to_string()), "lookup not recorded")
            }
        }
        looking.remove(key.as_str());
        looked_up.pop();
    }
    Ok(())
}

/// Records finished attempts a round each, starting nothing: after the database refused a round
/// whole for a value it cannot store, so that one such answer does not hold back the rest. The
/// one it refuses stays unrecorded (said in the log); its attempt is swept to `unknown` later.
async fn one_by_one(
    ledger: &Ledger,
    finished: &[Finished],
    names: &[String],
    why: &str,
) -> Result<crate::ledger::Round> {
    tracing::warn!(error = %why, "a round was refused; recording its answers one by one");
    let mut round = crate::ledger::Round::default();
    for f in finished {
        match ledger
            .round(std::slice::from_ref(f), names, 0, DISPATCHER)
            .await
        {
            Ok(r) => {
                round.looked_up += r.looked_up;
                round.finished.extend(r.finished);
            }
            Err(e @ Error::Unstorable(_)) => round.finished.push(Err(e)),
            Err(e) => return Err(e),
        }
    }
    Ok(round)
}

/// How long to wait before trying an unreachable database again.
const OUTAGE_PAUSE: Duration = Duration::from_secs(1);

/// How often a running dispatcher says it is alive.
const HEARTBEAT: Duration = Duration::from_secs(5);

async fn idle(stop: &tokio::sync::Notify, pause: Duration) {
    tokio::select! {
        _ = tokio::time::sleep(pause) => {}
        _ = stop.notified() => {}
    }
}

/// One concise line per attempt. The error is the destination's answer as it was kept (scrubbed
/// of this operation's values when it arrived); the log file escapes what is left.
fn log_attempt(sent: &Sent, applied: &Result<crate::ledger::Applied>) {
    let r = &sent.finished.report;
    let error = r.error.as_deref().unwrap_or_default();
    match applied {
        Ok(a) => tracing::info!(
            key = %r.key,
            destination = %sent.destination,
            outcome = r.outcome.map_or("unknown", |o| o.as_str()),
            http = r.http_status,
            state = a.to.as_str(),
            error,
            "attempt"
        ),
        Err(e) => tracing::warn!(
            key = %r.key,
            destination = %sent.destination,
            outcome = r.outcome.map_or("unknown", |o| o.as_str()),
            http = r.http_status,
            error,
            refused = %redact_text(&e.to_string()),
            "attempt not recorded"
        ),
    }
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
