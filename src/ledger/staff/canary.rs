//! A person's bulk retry sends one first (manual: Recovery that follows the destination): the
//! canary is retried alone and its next attempt awaited; only when the destination accepted it
//! do the others follow, at the destination's pace. When it fails, or no answer comes in time,
//! nothing else is sent and the report says why (`canary onb-1: HTTP 503; 49 not sent`).

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use super::Staff;
use super::bulk::{BulkReport, Canary};
use crate::State;
use crate::domain::StaffAction;
use crate::error::Result;

/// A dispatcher heard from within this many seconds is running.
const DISPATCHER_ALIVE: i64 = 30;

/// How long a canary's answer is awaited beyond its destination's timeout.
const CANARY_WAIT: Duration = Duration::from_secs(60);

impl Staff<'_> {
    /// [`Staff::bulk_apply_each`], the first item alone first: the rest only once the destination
    /// accepted it. `waiting` is told the canary's key, its destination and how long it is awaited.
    pub async fn bulk_apply_canary_first(
        self,
        items: &[(String, StaffAction)],
        actor: &str,
        stop: &AtomicBool,
        pace: Option<Duration>,
        progress: impl FnMut(usize, usize),
        waiting: impl FnOnce(&str, &str, Duration),
    ) -> Result<BulkReport> {
        let [first, rest @ ..] = items else {
            return self
                .bulk_apply_each(items, actor, stop, pace, progress)
                .await;
        };
        if rest.is_empty() {
            return self
                .bulk_apply_each(items, actor, stop, pace, progress)
                .await;
        }
        // a destination whose breaker is open takes nothing: not even the canary is retried
        // the canary as it stands: its destination, and its attempts before it is retried
        let before = self.0.read().show(&first.0, actor).await?;
        let dest = before.op.destination.clone();
        let breakers = self.0.read().breakers().await?;
        if let Some(b) = breakers
            .iter()
            .find(|b| b.destination == dest && b.is_down())
        {
            let when = b
                .probe_in_seconds
                .map_or(String::new(), |s| format!(", probing in {s}s"));
            return Ok(BulkReport {
                canary: Some(Canary {
                    key: first.0.clone(),
                    went: false,
                    said: Some(format!(
                        "not retried: {dest} is down (its breaker is open{when})"
                    )),
                }),
                not_sent: rest.iter().map(|(k, _)| k.clone()).collect(),
                ..BulkReport::default()
            });
        }
        // a canary is sent by a dispatcher: with none running there is nothing to wait for
        let now = self.0.now();
        let running = (self.0.read().dispatchers().await?)
            .iter()
            .any(|(_, seen)| now - *seen <= chrono::TimeDelta::seconds(DISPATCHER_ALIVE));
        if !running {
            let mut report = (self.bulk_apply_each(items, actor, stop, pace, progress)).await?;
            report.canary_skipped = Some("no dispatcher is running to send one first".into());
            return Ok(report);
        }
        let (sent, said) = self.canary(first, &before, actor, stop, waiting).await?;
        if let Some(said) = said {
            return Ok(BulkReport {
                canary: Some(Canary {
                    key: first.0.clone(),
                    went: false,
                    said: Some(said),
                }),
                not_sent: rest.iter().map(|(k, _)| k.clone()).collect(),
                ..sent
            });
        }
        let mut report = self
            .bulk_apply_each(rest, actor, stop, pace, progress)
            .await?;
        report.canary = Some(Canary {
            key: first.0.clone(),
            went: true,
            said: None,
        });
        report.done.splice(0..0, sent.done);
        Ok(report)
    }

    /// Retries `item` alone and waits for its next attempt's answer: `None` when the destination
    /// accepted it, else what it said (or why no answer came).
    async fn canary(
        self,
        item: &(String, StaffAction),
        before: &crate::ledger::OperationDetail,
        actor: &str,
        stop: &AtomicBool,
        waiting: impl FnOnce(&str, &str, Duration),
    ) -> Result<(BulkReport, Option<String>)> {
        let key = &item.0;
        let sent = self
            .bulk_apply_each(std::slice::from_ref(item), actor, stop, None, |_, _| {})
            .await?;
        if sent.done.is_empty() {
            let why = (sent.changed_meanwhile.keys().next().cloned())
                .unwrap_or_else(|| "not retried".into());
            return Ok((sent, Some(why)));
        }
        let dest = &before.op.destination;
        let wait = self.0.config.destination(dest).timeout + CANARY_WAIT;
        waiting(key, dest, wait);
        let began = Instant::now();
        while began.elapsed() < wait && !stop.load(Ordering::SeqCst) {
            tokio::time::sleep(Duration::from_millis(200)).await;
            let now = self.0.read().show(key, actor).await?;
            if now.op.attempts <= before.op.attempts || now.op.state == State::InFlight {
                continue;
            }
            if now.op.state == State::Succeeded {
                return Ok((sent, None));
            }
            let said = (now.attempt_log.last())
                .map(|a| a.answer_said().trim_start_matches(':').trim().to_string())
                .filter(|s| !s.is_empty())
                .unwrap_or_else(|| format!("ended {}", now.op.state.as_str()));
            return Ok((sent, Some(said)));
        }
        let down = self.0.read().breakers().await?;
        let why = match down.iter().any(|b| &b.destination == dest && b.is_down()) {
            true => format!(
                "not sent within {}s: {dest} is down (its breaker is open)",
                wait.as_secs()
            ),
            false => format!(
                "not answered within {}s (is a dispatcher running?)",
                wait.as_secs()
            ),
        };
        Ok((sent, Some(why)))
    }
}
