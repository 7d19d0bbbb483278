//! One operation as a reader sees it: its row in a list (with its safe next step and what the
//! viewer may do), and in full (payload, attempts, history). All redacted, its texts scrubbed of
//! its own sensitive values by a scrubber kept per payload.

use chrono::{DateTime, Utc};
use serde_json::Value;

use super::Reader;
use crate::domain::next_step::Paused;
use crate::domain::{Op, Resolution, State, safe_next_step};
use crate::error::{Error, Result};
use crate::ledger::views::{AttemptView, ChainEnd, EventView, OperationDetail, OperationView};
use crate::store::{Cursor, EventRow, Pausable, ms};

pub(super) fn event_view(
    e: EventRow,
    redact: &dyn Fn(&Value) -> Value,
    subject: Option<String>,
) -> EventView {
    let detail: Value = serde_json::from_str(&e.detail).unwrap_or(Value::Null);
    EventView {
        id: e.id,
        at: e.at,
        actor: e.actor,
        kind: e.kind,
        from_state: e.from_state,
        to_state: e.to_state,
        subject: subject.or(e.workflow).or_else(|| {
            // a destination's pause or resume
            let d = detail.get("destination")?.as_str()?;
            Some(format!("dest:{d}"))
        }),
        detail: redact(&detail),
        action: e.action,
        op_key: None,
    }
}

/// The console: a next step that asks a person to look at the destination gives them something to
/// search by: when it was sent, the reference if any, and the payload's redaction hints (manual: Redaction:
/// `email [redacted a…@example.com]`), never a value.
fn search_by(d: &mut OperationDetail) {
    use crate::domain::next_step::StepKind;
    if d.op.next_step_kind != StepKind::CheckDestination {
        return;
    }
    let mut by = Vec::new();
    if let Some(first) = d.attempt_log.first() {
        by.push(format!(
            "sent {}",
            first.started_at.format("%Y-%m-%d %H:%M:%S UTC")
        ));
    }
    if let Some(r) = &d.op.reference {
        by.push(format!("reference {r}"));
    }
    // the fields whose marker keeps a hint (`[redacted …0123]`, not a bare `[redacted]`)
    by.extend(
        crate::ledger::staff::reveal::redacted_fields(&d.payload)
            .into_iter()
            .filter(|(_, marker)| marker.starts_with("[redacted "))
            .map(|(path, marker)| format!("{path} {marker}")),
    );
    if !by.is_empty() {
        d.op.next_step = format!("{}. Search by: {}", d.op.next_step, by.join(", "));
    }
}

impl Reader<'_> {
    pub(crate) fn view(
        self,
        op: Op,
        cursor: Cursor,
        viewer: &str,
        paused: Paused,
        now: DateTime<Utc>,
    ) -> OperationView {
        let red = self.0.scrubbers.of(&self.0.redactor, &op);
        let text = |s: &Option<String>| s.as_deref().map(|s| red.text(s));
        let reason = text(&op.reason);
        // the error usually is the reason: redact it once
        let last_error = if op.last_error == op.reason {
            reason.clone()
        } else {
            text(&op.last_error)
        };
        let reference = text(&op.reference);
        // The safe next step quotes the reason (a rejection's error): built from the redacted
        // one, its text needs no second pass.
        let mut op = op;
        op.reason = reason.clone();
        let policy = self.0.config.destination(&op.destination);
        let step = safe_next_step(
            &op,
            &policy,
            viewer,
            paused,
            self.0.config.attempt_timeout,
            now,
        );
        let next_step = step.text;
        // what this viewer may do now: asked of the transition rules (manual: The console)
        let actions = crate::domain::offered(
            &op,
            &crate::domain::Ctx {
                paused: paused.workflow,
                ..self.0.rules_ctx(viewer, &policy, now)
            },
        );
        let exception = op.is_exception(now);
        let since = if exception {
            op.exception_since.unwrap_or(op.created_at)
        } else {
            op.created_at
        };
        // Moved, not cloned: a list page builds fifty of these.
        let live_claim = op.claim.filter(|c| c.is_live(now));
        let owner = self.0.config.owner_of(&op.workflow).map(str::to_string);
        OperationView {
            key: op.key,
            state: op.state,
            workflow: op.workflow,
            step: op.step,
            destination: op.destination,
            action: op.action,
            created_at: op.created_at,
            age_seconds: (now - since).num_seconds().max(0),
            attempts: op.attempts,
            claim_expires_at: live_claim.as_ref().map(|c| c.expires),
            claimed_by: live_claim.map(|c| c.by),
            reference,
            next_step,
            next_step_kind: step.kind,
            exception_since: op.exception_since.filter(|_| exception),
            next_attempt_at: op.next_attempt_at,
            reason,
            last_error,
            resolution: op.resolution,
            superseded_by: op.superseded_by,
            corrects: op.corrects,
            run: op.run,
            owner,
            workflow_paused: paused.workflow,
            destination_paused: paused.destination,
            actions,
            cursor,
        }
    }

    /// One operation as lists show it, in one statement (what the HTTP API answers a write
    /// with); not found outside the handle's workflows.
    pub async fn operation(self, key: &str, viewer: &str) -> Result<OperationView> {
        use crate::domain::filter::{Filter, Match, Term};
        crate::domain::validate_key(key).map_err(Error::Invalid)?;
        let filter = super::list::ListFilter {
            scope: super::list::Scope::All,
            query: Filter {
                terms: vec![Term {
                    negated: false,
                    matches: Match::Key(key.to_string()),
                }],
            },
            ..Default::default()
        };
        let page = self
            .page(&filter, viewer, &super::list::Position::First, 1)
            .await?;
        match page.items.into_iter().next() {
            Some(v) => Ok(v),
            None => Ok(self.0.retention().pruned_detail(key, viewer).await?.op),
        }
    }

    /// One operation in full: redacted payload, attempts, history.
    pub async fn show(self, key: &str, viewer: &str) -> Result<OperationDetail> {
        crate::domain::validate_key(key).map_err(Error::Invalid)?;
        let now = self.0.now();
        let Some((id, op)) = self.0.store.load_op(key).await? else {
            return self.0.retention().pruned_detail(key, viewer).await;
        };
        // outside an automation's workflows it is not there, as a missing one is not
        self.0
            .check_scope(&op.workflow)
            .map_err(|_| Error::NotFound(format!("no operation with key {key}")))?;
        let paused = Paused {
            workflow: self
                .0
                .store
                .paused_now(Pausable::Workflow, &op.workflow)
                .await?,
            destination: self
                .0
                .store
                .paused_now(Pausable::Destination, &op.destination)
                .await?,
        };
        let attempts = self.0.store.attempts_of(id).await?;
        let events = self.0.store.events_of(id).await?;
        let mut red = self
            .0
            .redactor
            .for_operation(&op.destination, &op.action, &op.payload);
        // a conflict's new contents are redacted alike, and their values scrubbed from every text
        let conflicting = match op.conflicting_payload.as_deref() {
            Some(p) => {
                let other = self
                    .0
                    .redactor
                    .for_operation(&op.destination, &op.action, p);
                let shown = other.payload.clone();
                red = red.with_secrets_of(other);
                Some(shown)
            }
            None => None,
        };
        let text = |s: &Option<String>| s.as_deref().map(|s| red.text(s));
        let mut detail = OperationDetail {
            op: self.view(
                op.clone(),
                Cursor {
                    group: None,
                    at: ms(op.created_at),
                    id,
                },
                viewer,
                paused,
                now,
            ),
            payload: red.payload.clone(),
            fingerprint: op.fingerprint.clone(),
            conflicting_payload: conflicting,
            conflicting_fingerprint: op.conflicting_fingerprint.clone(),
            attempt_log: attempts
                .into_iter()
                .map(|a| AttemptView {
                    n: a.n,
                    actor: a.actor,
                    outcome: a.outcome,
                    http_status: a.http_status,
                    reference: text(&a.reference),
                    error: text(&a.error),
                    started_at: a.started_at,
                    finished_at: a.finished_at,
                })
                .collect(),
            history: events
                .into_iter()
                .map(|e| event_view(e, &|v| red.json(v), None))
                .collect(),
            run_steps: match &op.run {
                Some(r) => self.run_steps(r, &op.workflow).await?,
                None => Vec::new(),
            },
            pruned: false,
            corrected_as: None,
        };
        detail.corrected_as = self.chain_end(&detail.op).await?;
        if let Some(e) = &detail.corrected_as {
            detail.op.next_step = format!(
                "Nothing to do: corrected as {} ({}), which answers for this key",
                e.key, e.state
            );
        }
        search_by(&mut detail);
        Ok(detail)
    }

    /// A page's corrected originals saying, as `show` does, that their correction answers for
    /// them (their correctors read in one statement).
    pub(crate) async fn said_corrected(
        self,
        mut items: Vec<OperationView>,
    ) -> Result<Vec<OperationView>> {
        let by: Vec<&str> = items
            .iter()
            .filter(|v| v.resolution == Some(Resolution::Superseded))
            .filter_map(|v| v.superseded_by.as_deref())
            .collect();
        if by.is_empty() {
            return Ok(items);
        }
        let found = self.0.store.load_ops(&by).await?;
        for v in &mut items {
            let Some((_, o)) = v.superseded_by.as_deref().and_then(|k| found.get(k)) else {
                continue;
            };
            if o.corrects.as_deref() == Some(v.key.as_str()) {
                v.next_step = format!(
                    "Nothing to do: corrected as {} ({}), which answers for this key",
                    o.key, o.state
                );
            }
        }
        Ok(items)
    }

    /// Where a corrected operation's chain ends (KEY -> KEY:c2 -> KEY:c3), that operation's
    /// outcome answering for the key (manual: Correcting a request); `None` for one not closed
    /// as superseded by a correction.
    pub async fn chain_end(self, op: &OperationView) -> Result<Option<ChainEnd>> {
        let mut at = op.key.clone();
        let mut next = match (op.resolution, &op.superseded_by) {
            (Some(Resolution::Superseded), Some(k)) => k.clone(),
            _ => return Ok(None),
        };
        let mut end = None;
        // a chain is short; the bound only keeps a hand-made loop of supersedes finite
        for corrections in 1..=MAX_CHAIN {
            let Some((_, o)) = self.0.store.load_op(&next).await? else {
                break;
            };
            if o.corrects.as_deref() != Some(at.as_str()) {
                break;
            }
            at = std::mem::replace(&mut next, o.superseded_by.clone().unwrap_or_default());
            let more = o.resolution == Some(Resolution::Superseded) && o.superseded_by.is_some();
            end = Some((o, corrections));
            if !more {
                break;
            }
        }
        Ok(end.map(|(o, corrections)| {
            let red = self.0.scrubbers.of(&self.0.redactor, &o);
            ChainEnd {
                done: o.state == State::Succeeded
                    || o.resolution == Some(Resolution::DoneElsewhere),
                reference: o.reference.as_deref().map(|r| red.text(r)),
                key: o.key,
                state: o.state,
                corrections,
            }
        }))
    }
}

/// The longest chain of corrections followed.
const MAX_CHAIN: u32 = 100;
