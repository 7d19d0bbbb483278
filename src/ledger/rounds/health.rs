//! A round's part in each destination's health (manual: Destinations and the dispatcher): every
//! answer it records tells the destination's breaker and pace, and what it starts is what they
//! let through: nothing at an open breaker, one probe at a time while probing, at most the
//! pace's share when closed. The health lives on the destination's budget row, held by the
//! round from its start, so two dispatchers see one breaker and draw from one pace.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};

use super::Rounds;
use super::types::Finished;
use super::work::RoundWork;
use crate::domain::Op;
use crate::domain::breaker::{Change, Gate, Health, Signal, signal};
use crate::error::Result;
use crate::store::Tx;

/// What a destination lets a round start.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) enum Allowed {
    /// As many as are due (no pace).
    Any,
    /// At most this many.
    Up(usize),
    /// One probe: the safest due operation.
    Probe,
}

impl Rounds<'_> {
    /// Tells `op`'s destination's health what `f`'s answer says; a change people are told of
    /// goes into the round.
    pub(super) async fn observe(
        self,
        conn: &mut Tx,
        w: &mut RoundWork,
        f: &Finished,
        op: &Op,
        now: DateTime<Utc>,
    ) -> Result<()> {
        let Some(outcome) = f.report.outcome else {
            return Ok(());
        };
        let policy = self.0.config.breaker(&op.destination);
        let b = w.budgets.of(conn, &op.destination, now).await?;
        let before = b.health.clone();
        let h = b.health.get_or_insert_with(|| Health::new(now));
        let probe = h.is_probe(&op.key);
        let s = signal(outcome, f.report.http_status);
        let unit = rand::random::<f64>();
        let change = h.observe(s, f.report.retry_after, probe, &policy, now, unit);
        b.changed |= h.worth_keeping(before.as_ref());
        if let Some(change) = change {
            w.round.breakers.push((op.destination.clone(), change));
        }
        Ok(())
    }

    /// What each of `destinations` lets this round start; those that let nothing through are
    /// left out.
    pub(super) async fn allowed(
        self,
        conn: &mut Tx,
        w: &mut RoundWork,
        destinations: &[String],
        now: DateTime<Utc>,
    ) -> Result<BTreeMap<String, Allowed>> {
        let mut allowed = BTreeMap::new();
        for d in destinations {
            let policy = self.0.config.breaker(d);
            let b = w.budgets.of(conn, d, now).await?;
            if b.health.as_ref().is_none_or(|h| h.is_open_road(&policy))
                && policy.pace_max.is_none()
            {
                allowed.insert(d.clone(), Allowed::Any);
                continue;
            }
            let gate = b.health_mut(now).gate(&policy, now);
            match gate {
                Gate::Send(usize::MAX) => allowed.insert(d.clone(), Allowed::Any),
                Gate::Send(n) => allowed.insert(d.clone(), Allowed::Up(n)),
                Gate::Probe => allowed.insert(d.clone(), Allowed::Probe),
                Gate::Held(_) => None,
            };
        }
        Ok(allowed)
    }

    /// The probe among a destination's due operations: the oldest where its unknown outcome
    /// would settle itself (the destination deduplicates, or settle can look it up), else the
    /// oldest first attempt, else the oldest.
    pub(super) fn probe_of(self, destination: &str, due: &[(i64, Op)]) -> Option<usize> {
        let p = self.0.config.destination(destination);
        if p.dedupes || p.can_look_up {
            return (!due.is_empty()).then_some(0);
        }
        due.iter()
            .position(|(_, op)| op.attempts == 0)
            .or((!due.is_empty()).then_some(0))
    }

    /// Takes what a destination let through: `started` attempts, or the probe `key`.
    pub(super) fn took(
        self,
        w: &mut RoundWork,
        destination: &str,
        started: usize,
        probe: Option<&str>,
        now: DateTime<Utc>,
    ) {
        let Some(b) = w.budgets.loaded(destination) else {
            return;
        };
        let Some(h) = b.health.as_mut() else {
            return;
        };
        b.changed = true;
        match probe {
            Some(key) => h.probing(key, now),
            None => h.took(started),
        }
    }

    /// Takes in the answer of a `GET probe_url` this round's dispatcher was granted (see
    /// [`super::Round::probes`]): healthy closes the breaker, failing opens it again. An answer
    /// whose place was given up meanwhile (a person, or another process after the lease) changes
    /// nothing.
    pub async fn probed(self, destination: &str, signal: Signal) -> Result<Option<Change>> {
        let policy = self.0.config.breaker(destination);
        let actor = crate::ledger::SYSTEM_ACTOR;
        crate::ledger::health::change_health_now(self.0, destination, actor, |h, now| {
            if !h.is_probe(BY_URL) {
                return None;
            }
            h.observe(signal, None, true, &policy, now, rand::random::<f64>())
        })
        .await
    }

    /// Starts up to `limit` due operations of the `open` destinations as their breakers and
    /// paces let through (`starved`, `full`: see [`crate::store::Tx::due_ops`]): the paced and the
    /// probing are asked for their share alone, the rest together.
    #[allow(clippy::too_many_arguments)]
    pub(super) async fn start_allowed(
        self,
        conn: &mut Tx,
        w: &mut RoundWork,
        open: &[String],
        (starved, full): (&[String], &[String]),
        limit: usize,
        actor: &str,
        now: DateTime<Utc>,
    ) -> Result<()> {
        let allowed = self.allowed(conn, w, open, now).await?;
        let free: Vec<String> = allowed
            .iter()
            .filter(|(_, a)| **a == Allowed::Any)
            .map(|(d, _)| d.clone())
            .collect();
        let mut left = limit;
        for (d, a) in allowed.iter().filter(|(_, a)| **a != Allowed::Any) {
            let share = match a {
                Allowed::Up(n) => (*n).min(left),
                _ => PROBE_CHOICE,
            };
            if left == 0 || share == 0 {
                continue;
            }
            if *a == Allowed::Probe && self.0.config.breaker(d).by_url {
                // its probe asks the destination's health, not a real attempt
                self.took(w, d, 0, Some(BY_URL), now);
                w.round.probes.push(d.clone());
                continue;
            }
            let mut due = conn
                .due_ops(std::slice::from_ref(d), starved, full, now, share)
                .await?;
            if *a == Allowed::Probe {
                let Some(at) = self.probe_of(d, &due) else {
                    continue;
                };
                due = vec![due.swap_remove(at)];
            }
            let before = w.round.started.len();
            for (id, op) in due {
                self.start_if_room(conn, w, id, op, actor, now).await?;
            }
            let started = w.round.started.len() - before;
            let probe = (*a == Allowed::Probe)
                .then(|| w.round.started.last().map(|s| s.key.clone()))
                .flatten()
                .filter(|_| started == 1);
            self.took(w, d, started, probe.as_deref(), now);
            left -= started.min(left);
        }
        for (id, op) in conn.due_ops(&free, starved, full, now, left).await? {
            self.start_if_room(conn, w, id, op, actor, now).await?;
        }
        Ok(())
    }

    /// [`Self::start_one`], unless the operation's workflow has no room for another attempt.
    async fn start_if_room(
        self,
        conn: &mut Tx,
        w: &mut RoundWork,
        id: i64,
        op: Op,
        actor: &str,
        now: DateTime<Utc>,
    ) -> Result<()> {
        if w.guards
            .get(&op.workflow)
            .is_some_and(|g| g.paused_now.is_some() || g.room() <= 0)
        {
            return Ok(());
        }
        self.start_one(conn, w, id, op, actor, now).await
    }
}

/// The probe's place held for a `GET probe_url` (no operation has an empty key).
pub(crate) const BY_URL: &str = "";

/// How many due operations of a probing destination are weighed for its probe.
const PROBE_CHOICE: usize = 50;
