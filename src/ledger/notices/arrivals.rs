//! What arrives to be told besides the inbox's exceptions (manual: Owners and notifications):
//! the exceptions that passed `warn_after` or `critical_after` since the last fold, which join
//! their groups as any arrival does, and a pause or a resume, told to the teams it concerns and
//! naming who paused.

use std::collections::BTreeMap;

use chrono::{DateTime, Duration, Utc};

use super::fold::{Arrivals, CRITICAL, FOLD_BATCH, GroupKey, WARNING, empty};
use super::message::Message;
use super::outbox::Notices;
use crate::domain::mask::told_reason;
use crate::domain::patterns::redact_text;
use crate::error::Result;
use crate::store::{TakenNotice, Tx};

impl Notices<'_> {
    /// Adds to `arrived` the exceptions that passed each aging level since the last fold, as
    /// arrivals of that level's group (arrived now: they are told after `group_window`, with
    /// whatever else passes it meanwhile).
    pub(super) async fn aged(
        &self,
        tx: &mut Tx,
        now: DateTime<Utc>,
        arrived: &mut BTreeMap<GroupKey, Arrivals>,
    ) -> Result<()> {
        let c = &self.0.config;
        let limits = [(WARNING, c.warn_after), (CRITICAL, c.critical_after)];
        let (warn_mark, critical_mark) = tx.told().aging_marks().await?;
        let mut marks = [warn_mark, critical_mark];
        for (i, (kind, after)) in limits.into_iter().enumerate() {
            let until = now - Duration::from_std(after).unwrap_or_default();
            // a ledger told for the first time: only what passes the level from now on
            let from = marks[i].unwrap_or(until);
            let aged = if from < until {
                tx.exceptions_entered(from, until, FOLD_BATCH).await?
            } else {
                Vec::new()
            };
            marks[i] = Some(match aged.last() {
                Some((_, op)) if aged.len() as i64 == FOLD_BATCH => {
                    op.exception_since.unwrap_or(until)
                }
                _ => until.max(from),
            });
            for (_, op) in &aged {
                if let Some(key) = self.group_of(op, kind) {
                    let a = arrived.entry(key).or_insert_with(|| empty(now));
                    a.add(op, op.exception_since.unwrap_or(now));
                    a.first = now;
                }
            }
        }
        if let [Some(w), Some(c)] = marks {
            tx.told().set_aging_marks(w, c).await?;
        }
        Ok(())
    }

    /// A pause or a resume, to the teams told of the workflow; a destination's (or its breaker
    /// opening or closing), to the teams whose workflows have work not yet settled there.
    pub(super) async fn pause_messages(
        &self,
        tx: &mut Tx,
        n: &TakenNotice,
        now: DateTime<Utc>,
    ) -> Result<Vec<Message>> {
        let c = &self.0.config;
        let mut teams: Vec<String> = match (&n.workflow, &n.destination) {
            (Some(w), _) => c.told_of(w).map(str::to_string).into_iter().collect(),
            (None, Some(d)) => tx
                .told()
                .workflows_at(d)
                .await?
                .iter()
                .filter_map(|w| c.told_of(w).map(str::to_string))
                .collect(),
            _ => Vec::new(),
        };
        teams.sort();
        teams.dedup();
        let paused = matches!(n.kind.as_str(), "paused" | "breaker_open");
        let reason = n
            .reason
            .as_deref()
            .map(|r| told_reason(&redact_text(r), None));
        let next_step = if n.kind == "breaker_open" {
            "Nothing to do: settle sends nothing there but probes, and resumes at a slow pace when one is answered".to_string()
        } else if n.kind == "breaker_closed" {
            "Nothing to do: sends resume at the destination's pace".to_string()
        } else if paused {
            match (&n.workflow, &n.destination) {
                (Some(w), _) => format!("Find why, then: settle resume {w}"),
                (_, Some(d)) => format!("Find why, then: settle resume --destination {d}"),
                _ => String::new(),
            }
        } else {
            "Nothing to do: sends go on".to_string()
        };
        Ok(teams
            .into_iter()
            .map(|team| Message {
                kind: n.kind.clone(),
                level: if paused { "warning" } else { "info" }.into(),
                team: Some(team),
                workflow: n.workflow.clone(),
                destination: n.destination.clone(),
                reason: reason.clone().filter(|r| !r.is_empty()),
                by: n.actor.clone(),
                oldest_seconds: (now - n.at).num_seconds().max(0),
                next_step: Some(next_step.clone()).filter(|s| !s.is_empty()),
                created_at: now,
                ..Message::default()
            })
            .collect())
    }
}
