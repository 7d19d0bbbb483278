//! The destinations' health outside a dispatcher's round
//! (manual: Recovery that follows the destination): a `GET probe_url`'s answer taken in, a lead
//! opening or closing a breaker by hand, and what readers see of every breaker. A change people are told of is a notice for the owners
//! (manual: Owners and notifications), written with it.

use chrono::{DateTime, Utc};
use serde::Serialize;

use super::Ledger;
use super::budgets::Budgets;
use crate::domain::breaker::{BreakerState, Change, Health};
use crate::error::Result;
use crate::store::{self, Notice, Tried, Tx};

/// One destination's breaker as readers see it (`settle stats`, the console, metrics).
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct BreakerView {
    pub destination: String,
    /// `closed`, `open` or `probing`.
    pub state: BreakerState,
    pub since: DateTime<Utc>,
    /// Why it last opened (redacted).
    pub why: Option<String>,
    /// When an open breaker probes next (none: a person holds it open, or it is not open),
    /// and in how many seconds from the reading.
    pub probe_at: Option<DateTime<Utc>>,
    pub probe_in_seconds: Option<i64>,
    /// The last probe's answer.
    pub last_probe: Option<String>,
    /// The pace attempts start at, a second (none: no pace).
    pub pace: Option<f64>,
    /// A `Retry-After` holds every attempt there until then.
    pub held_until: Option<DateTime<Utc>>,
    /// Opened or closed by a person, and left so.
    pub by_hand: bool,
}

impl BreakerView {
    pub(super) fn of(destination: String, h: Health, now: DateTime<Utc>) -> BreakerView {
        let probe_at = h
            .probe_at
            .filter(|_| h.state == BreakerState::Open && !h.by_hand);
        BreakerView {
            destination,
            state: h.state,
            since: h.since,
            why: h.why.map(|w| crate::domain::redact::redact_text(&w)),
            probe_at,
            probe_in_seconds: probe_at.map(|t| (t - now).num_seconds().max(0)),
            last_probe: h.last_probe,
            pace: h.rate,
            held_until: h.hold_until.filter(|t| *t > now),
            by_hand: h.by_hand,
        }
    }

    /// Whether nothing is sent there now but probes.
    pub fn is_down(&self) -> bool {
        self.state != BreakerState::Closed
    }

    /// One line for `settle stats`: `crm open since 14:03:10 UTC (5 of 6 attempts failed ...),
    /// probes in 8s`.
    pub fn line(&self) -> String {
        let esc = |t: &str| crate::domain::escape_text(t).into_owned();
        let mut line = format!(
            "{} {} since {}",
            esc(&self.destination),
            self.state.as_str(),
            self.since.format("%H:%M:%S UTC")
        );
        if self.is_down()
            && let Some(why) = &self.why
        {
            line.push_str(&format!(" ({})", esc(why)));
        }
        match (self.state, self.probe_in_seconds) {
            // past its time: the next dispatcher's round probes it
            (_, Some(0)) => line.push_str(", a probe is due"),
            (_, Some(s)) => line.push_str(&format!(", probes in {s}s")),
            (BreakerState::Open, None) => line.push_str(", held open by a person"),
            (BreakerState::Probing, _) => line.push_str(", one probe in flight"),
            _ => {}
        }
        if let Some(p) = &self.last_probe
            && self.is_down()
        {
            line.push_str(&format!(", last probe: {}", esc(p)));
        }
        if let Some(pace) = self.pace.filter(|_| !self.is_down()) {
            line.push_str(&format!(", pace {pace:.0}/s"));
        }
        line
    }
}

/// The notice of a breaker's change, for the destination's owners.
pub(super) fn breaker_notice(
    destination: &str,
    change: &Change,
    actor: &str,
    now: DateTime<Utc>,
) -> Notice {
    let (kind, reason) = match change {
        Change::Opened { why } => ("breaker_open", Some(why.clone())),
        Change::Closed => ("breaker_closed", None),
    };
    Notice {
        at: now,
        kind,
        operation_id: None,
        workflow: None,
        destination: Some(destination.to_string()),
        reason,
        actor: Some(actor.to_string()),
    }
}

/// Whether any team is told of a destination's changes.
pub(super) fn destinations_told(ledger: &Ledger) -> bool {
    ledger.config.teams.values().any(|t| !t.notify.is_empty())
}

/// Changes `destination`'s health by `f` in `tx`, saved with a compare-and-set; a change people
/// are told of becomes a notice, as `actor`.
pub(super) async fn change_health(
    ledger: &Ledger,
    tx: &mut Tx,
    destination: &str,
    actor: &str,
    f: impl FnOnce(&mut Health, DateTime<Utc>) -> Option<Change>,
) -> Result<Tried<Option<Change>>> {
    let now = ledger.now();
    let mut budgets = Budgets::default();
    let b = budgets.of(tx, destination, now).await?;
    let change = f(b.health_mut(now), now);
    if !budgets.save(tx).await? {
        return Ok(Tried::Raced);
    }
    if let Some(c) = &change
        && destinations_told(ledger)
    {
        tx.add_notices(&[breaker_notice(destination, c, actor, now)])
            .await?;
    }
    Ok(Tried::Done(change))
}

/// [`change_health`] in a transaction of its own.
pub(super) async fn change_health_now(
    ledger: &Ledger,
    destination: &str,
    actor: &str,
    f: impl Fn(&mut Health, DateTime<Utc>) -> Option<Change>,
) -> Result<Option<Change>> {
    store::in_tx!(ledger.store, |tx| change_health(
        ledger,
        tx,
        destination,
        actor,
        &f
    )
    .await)
}
