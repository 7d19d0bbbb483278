//! The demo week's cast and its recorder: the people who work it, and the handle through which
//! the story is written into the ledger at the moments it happens.

use std::sync::{Arc, Mutex};

use chrono::{DateTime, Utc};
use rand::rngs::StdRng;
use serde_json::Value;

use crate::Outcome;
use crate::error::Result;
use crate::ledger::{AttemptReport, Intent, Ledger, StaffAction};

pub(super) const PEOPLE: [(&str, &str, &str); 12] = [
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

pub(super) struct Demo {
    pub(super) ledger: Ledger,
    pub(super) clock: Arc<Mutex<DateTime<Utc>>>,
    pub(super) rng: StdRng,
    pub(super) real_now: DateTime<Utc>,
}

impl Demo {
    pub(super) fn at(&self, t: DateTime<Utc>) {
        *self.clock.lock().unwrap_or_else(|p| p.into_inner()) = t;
    }

    pub(super) async fn record(
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
            run: None,
        };
        self.ledger.record(&intent, workflow).await.map(|_| ())
    }

    pub(super) async fn attempt(
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

    /// `who` claims `key`, then takes `action` on it.
    pub(super) async fn claimed(&self, key: &str, who: &str, action: StaffAction) {
        self.staff(key, who, StaffAction::Claim { force_reason: None })
            .await;
        self.staff(key, who, action).await;
    }

    pub(super) async fn staff(&self, key: &str, who: &str, action: StaffAction) {
        // The demo plays what staff did; a refusal here only means the story took another turn.
        let _ = self.ledger.staff().act(key, who, action).await;
    }
}
