//! A running dispatcher between its rounds: what it sent, what came back, when it sweeps.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use crate::dispatch::http::HttpDestination;
use crate::dispatch::send::{
    DISPATCHER, Done, Options, Sent, Totals, kept, kept_answer, log_attempt, send, told_breakers,
};
use crate::domain::LookupAnswer;
use crate::domain::redact::redact_text;
use crate::error::{Error, Result};
use crate::ledger::{Finished, Ledger};

/// A running dispatcher's state between rounds.
pub(super) struct Dispatcher {
    pub(super) ledger: Ledger,
    pub(super) options: Options,
    pub(super) client: reqwest::Client,
    pub(super) destinations: HashMap<String, Arc<HttpDestination>>,
    pub(super) names: Vec<String>,
    /// The destinations whose lookup the dispatcher can run.
    pub(super) lookup_names: Vec<String>,
    /// This dispatcher's name in the heartbeats.
    pub(super) name: String,
    pub(super) concurrency: usize,
    pub(super) sweep_every: Duration,
    pub(super) stop: Arc<tokio::sync::Notify>,
    pub(super) stopping: Arc<AtomicBool>,
    pub(super) done: tokio::sync::mpsc::UnboundedSender<Done>,
    pub(super) answers: tokio::sync::mpsc::UnboundedReceiver<Done>,
    /// Attempts and lookups sent and not yet answered.
    pub(super) in_flight: usize,
    /// Attempts answered, to be recorded by the next round.
    pub(super) answered: Vec<Sent>,
    /// Lookups of interrupted attempts answered, to be recorded.
    pub(super) looked_up: Vec<(String, LookupAnswer)>,
    /// Probes of destinations' health answered, to be recorded.
    pub(super) probed: Vec<(String, crate::domain::breaker::Signal)>,
    /// Keys whose lookup is in flight.
    pub(super) looking: HashSet<String>,
    /// The attempts this dispatcher sent and has not recorded yet, as their rounds left their
    /// rows: its own sweep spares them (they are not interrupted: their answer, or their
    /// request's timeout, will come), and the round that records an answer decides on its row.
    pub(super) sending: crate::ledger::StartedRows,
    /// Keys whose action has no lookup this dispatcher can run (left to a person).
    pub(super) cannot_look_up: HashSet<String>,
    pub(super) totals: Totals,
    pub(super) beat: Option<Instant>,
    /// When it last swept (`None`: sweep now).
    pub(super) swept: Option<Instant>,
    pub(super) outage: Option<Instant>,
    /// Destinations this run paused on an `auth` answer (said once each).
    pub(super) paused_here: HashSet<String>,
    /// Operations that waited for the retry budget at least once.
    pub(super) deferred: HashSet<String>,
}

impl Dispatcher {
    pub(super) fn stopping(&self) -> bool {
        self.stopping.load(Ordering::SeqCst)
    }

    pub(super) fn reachable(&mut self) {
        if let Some(since) = self.outage.take() {
            tracing::info!(
                after_ms = since.elapsed().as_millis() as u64,
                "database reachable again"
            );
            crate::tell!("settle: database reachable again");
        }
    }

    pub(super) async fn unreachable(&mut self, why: &str) {
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
    pub(super) fn take(&mut self, done: Done) {
        self.in_flight -= 1;
        match done {
            Done::Attempt(s) => self.answered.push(s),
            Done::LookedUp { key, answer } => self.looked_up.push((key, answer)),
            Done::Probed {
                destination,
                signal,
            } => self.probed.push((destination, signal)),
        }
    }

    /// Waits up to `wait` for the next answer (or a stop request).
    pub(super) async fn wait_for_answer(&mut self, wait: Duration) {
        let got = tokio::select! {
            got = tokio::time::timeout(wait, self.answers.recv()) => got.ok().flatten(),
            _ = self.stop.notified() => None,
        };
        if let Some(done) = got {
            self.take(done);
        }
    }

    pub(super) async fn run(&mut self) -> Result<()> {
        loop {
            while let Ok(done) = self.answers.try_recv() {
                self.take(done);
            }
            if self.beat.is_none_or(|t| t.elapsed() >= HEARTBEAT) {
                db!(self, self.ledger.rounds().heartbeat(&self.name));
                self.beat = Some(Instant::now());
            }
            if !self.looked_up.is_empty() {
                db!(
                    self,
                    record_lookups(&self.ledger, &mut self.looked_up, &mut self.looking)
                );
            }
            while let Some((destination, signal)) = self.probed.last().cloned() {
                let change = db!(self, self.ledger.rounds().probed(&destination, signal));
                if let Some(change) = change {
                    told_breakers(&[(destination, change)]);
                }
                self.probed.pop();
            }
            let stopping = self.stopping();
            if !stopping
                && self.answered.is_empty()
                && self.swept.is_none_or(|t| t.elapsed() >= self.sweep_every)
            {
                db!(
                    self,
                    self.ledger
                        .rounds()
                        .sweep_sparing(&|k| self.sending.contains_key(k))
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
                db!(self, self.ledger.rounds().next_due(&self.names, HEARTBEAT))
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
                        && db!(self, self.ledger.rounds().unsettled(&self.names)) == 0)
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
    pub(super) async fn round(&mut self, free: usize) -> Result<(usize, usize)> {
        let finished: Vec<Finished> = self.answered.iter().map(|s| s.finished.clone()).collect();
        let round = match self
            .ledger
            .rounds()
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
        told_breakers(&round.breakers);
        // a long-running dispatcher keeps at most this many keys for its closing line
        if self.deferred.len() < 100_000 {
            self.deferred.extend(round.waiting_for_budget);
        }
        let launched = round.started.len() + round.probes.len();
        self.sending.extend(started_rows);
        for destination in round.probes {
            let Some(probe) = (self.destinations.get(&destination)).and_then(|d| d.probe.clone())
            else {
                continue;
            };
            let (client, done) = (self.client.clone(), self.done.clone());
            self.in_flight += 1;
            tokio::spawn(async move {
                let signal = probe.ask(&client).await;
                let _ = done.send(Done::Probed {
                    destination,
                    signal,
                });
            });
        }
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
    /// looked up yet (manual: States), as many as there are free places.
    pub(super) async fn look_up_interrupted(&mut self) -> Result<()> {
        let free = self.concurrency - self.in_flight;
        if self.lookup_names.is_empty() || free == 0 {
            return Ok(());
        }
        let skip = self.looking.len() + self.cannot_look_up.len();
        let ops = self
            .ledger
            .rounds()
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
pub(super) async fn record_lookups(
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
pub(super) async fn one_by_one(
    ledger: &Ledger,
    finished: &[Finished],
    names: &[String],
    why: &str,
) -> Result<crate::ledger::Round> {
    tracing::warn!(error = %why, "a round was refused; recording its answers one by one");
    let mut round = crate::ledger::Round::default();
    for f in finished {
        match ledger
            .rounds()
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
pub(super) const OUTAGE_PAUSE: Duration = Duration::from_secs(1);

/// How often a running dispatcher says it is alive.
pub(super) const HEARTBEAT: Duration = Duration::from_secs(5);

pub(super) async fn idle(stop: &tokio::sync::Notify, pause: Duration) {
    tokio::select! {
        _ = tokio::time::sleep(pause) => {}
        _ = stop.notified() => {}
    }
}
