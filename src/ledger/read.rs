//! Reading the ledger: keyset-paginated lists, one operation in full, totals. All redacted.

use std::borrow::Cow;
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use serde_json::Value;

use super::Ledger;
use super::views::{AttemptView, EventView, OperationDetail, OperationView, PausedWorkflow, Stats};
use crate::domain::next_step::Paused;
use crate::domain::redact::OperationRedaction;
use crate::domain::{Op, Redactor, State, safe_next_step};
use crate::error::{Error, Result};
use crate::store::{Cursor, EventRow, ListQuery, Order, Pausable, ms};

/// Which part of the ledger a list shows.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Scope {
    /// The exception queue, oldest exception first.
    #[default]
    Exceptions,
    /// Everything, oldest first.
    All,
    /// `pending`, `in_flight` and `retry_wait`.
    InProgress,
    /// `succeeded` and `closed`.
    Closed,
    /// Live claims held by the viewer.
    Mine,
}

/// The order of a list. Every order ends with the time (oldest first) and the id.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Sort {
    #[default]
    Age,
    State,
    Workflow,
    Destination,
}

impl Sort {
    pub const ALL: [Sort; 4] = [Sort::Age, Sort::State, Sort::Workflow, Sort::Destination];

    /// The next order in the cycle of the console's `s` key.
    pub fn next(self) -> Sort {
        let i = Sort::ALL.iter().position(|s| *s == self).unwrap_or(0);
        Sort::ALL[(i + 1) % Sort::ALL.len()]
    }

    pub fn label(self) -> &'static str {
        match self {
            Sort::Age => "age",
            Sort::State => "state",
            Sort::Workflow => "workflow",
            Sort::Destination => "destination",
        }
    }

    fn order(self) -> Order {
        match self {
            Sort::Age => Order::Time,
            Sort::State => Order::State,
            Sort::Workflow => Order::Workflow,
            Sort::Destination => Order::Destination,
        }
    }
}

#[derive(Clone, Debug, Default, PartialEq)]
pub struct ListFilter {
    pub scope: Scope,
    /// Only this state (the scope's own restriction still applies).
    pub state: Option<State>,
    pub workflow: Option<String>,
    /// Only items whose age is at least this.
    pub older_than: Option<Duration>,
    /// The terms of SPEC 12's filter (`list --where`, the console's `/`), all of which hold.
    pub query: crate::domain::filter::Filter,
    pub sort: Sort,
    /// The sort's order reversed (newest or last first).
    pub reverse: bool,
}

/// Where a page starts.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Position {
    First,
    /// This row and those after it.
    From(Cursor),
    After(Cursor),
    /// This row and those before it (a reversed list's refresh in place).
    UpTo(Cursor),
    Before(Cursor),
    Last,
}

/// One page of a list, in order, and whether there is more on either side.
#[derive(Clone, Debug, Default)]
pub struct Page {
    pub items: Vec<OperationView>,
    pub more_before: bool,
    pub more_after: bool,
    /// Where the next page starts (none at the end).
    pub next: Option<Cursor>,
}

/// The states and the time limit a list's scope and options ask for; `None` when they exclude
/// each other (a state outside the scope).
fn scope_of(
    filter: &ListFilter,
    now: DateTime<Utc>,
) -> Option<(Vec<State>, Option<DateTime<Utc>>)> {
    let cutoff = |d: Duration| crate::domain::time::before(now, d);
    let mut states: Vec<State> = match filter.scope {
        Scope::InProgress => IN_PROGRESS.to_vec(),
        Scope::Closed => CLOSED.to_vec(),
        _ => Vec::new(),
    };
    if let Some(s) = filter.state {
        if !states.is_empty() && !states.contains(&s) {
            return None;
        }
        states = vec![s];
    }
    let not_after = match (filter.scope == Scope::Exceptions, filter.older_than) {
        (true, d) => Some(cutoff(d.unwrap_or_default())),
        (false, Some(d)) => Some(cutoff(d)),
        (false, None) => None,
    };
    Some((states, not_after))
}

/// What a list's filter asks of the store, from its first row (a page sets where it starts and
/// how many it takes; a count takes the filter alone).
fn list_query<'a>(
    filter: &'a ListFilter,
    viewer: &'a str,
    states: &'a [State],
    not_after: Option<DateTime<Utc>>,
    now: DateTime<Utc>,
) -> ListQuery<'a> {
    ListQuery {
        terms: &filter.query.terms,
        now,
        viewer,
        exceptions_only: filter.scope == Scope::Exceptions,
        states,
        workflow: filter.workflow.as_deref(),
        claimed_by: (filter.scope == Scope::Mine).then_some(viewer),
        not_after,
        order: filter.sort.order(),
        from: None,
        inclusive: false,
        backwards: false,
        limit: 0,
    }
}

const IN_PROGRESS: [State; 3] = [State::Pending, State::InFlight, State::RetryWait];
const CLOSED: [State; 2] = [State::Succeeded, State::Closed];

impl Ledger {
    /// Every key a filter matches now, in the list's order, from the keys alone (one statement);
    /// `None` when the filter holds bare words, which are matched against the redacted rows.
    pub(super) async fn matching_keys_only(
        &self,
        filter: &ListFilter,
        viewer: &str,
    ) -> Result<Option<Vec<String>>> {
        if filter.query.words().next().is_some() || filter.query.negated_words().next().is_some() {
            return Ok(None);
        }
        let now = self.now();
        let Some((states, not_after)) = scope_of(filter, now) else {
            return Ok(Some(Vec::new()));
        };
        let query = ListQuery {
            backwards: filter.reverse,
            ..list_query(filter, viewer, &states, not_after, now)
        };
        self.store.matching_keys(&query).await.map(Some)
    }

    /// One page of operations, `limit` rows after `after` (a cursor from a previous page).
    pub async fn list(
        &self,
        filter: &ListFilter,
        viewer: &str,
        after: Option<Cursor>,
        limit: usize,
    ) -> Result<Page> {
        let from = after.map_or(Position::First, Position::After);
        self.page(filter, viewer, &from, limit).await
    }

    /// One page of operations from `position`, in the filter's order. Only that page is read:
    /// keyset pagination on indexed columns, never the whole queue.
    pub async fn page(
        &self,
        filter: &ListFilter,
        viewer: &str,
        position: &Position,
        limit: usize,
    ) -> Result<Page> {
        let now = self.now();
        let limit = limit.max(1);
        let Some((states, not_after)) = scope_of(filter, now) else {
            return Ok(Page::default());
        };
        let exceptions_only = filter.scope == Scope::Exceptions;
        // A reversed list walks the same keyset the other way: its "after" is the order's
        // "before". `position` from here on is the position in the order's own direction.
        let flipped;
        let position = if filter.reverse {
            flipped = match position {
                Position::First => Position::Last,
                Position::Last => Position::First,
                Position::After(c) => Position::Before(c.clone()),
                Position::Before(c) => Position::After(c.clone()),
                Position::From(c) => Position::UpTo(c.clone()),
                Position::UpTo(c) => Position::From(c.clone()),
            };
            &flipped
        } else {
            position
        };
        let (from, backwards, inclusive) = match position {
            Position::First => (None, false, false),
            Position::From(c) => (Some(c), false, true),
            Position::After(c) => (Some(c), false, false),
            Position::Before(c) => (Some(c), true, false),
            Position::UpTo(c) => (Some(c), true, true),
            Position::Last => (None, true, false),
        };
        let query = ListQuery {
            from,
            inclusive,
            backwards,
            limit: limit as i64,
            ..list_query(filter, viewer, &states, not_after, now)
        };
        let mut rows = self.store.page(&query).await?;
        let full = rows.len() >= limit;
        if backwards {
            rows.reverse();
        }
        let mut items: Vec<OperationView> = rows
            .into_iter()
            .map(|(id, op, paused)| {
                let at = if exceptions_only {
                    op.exception_since.unwrap_or(op.created_at)
                } else {
                    op.created_at
                };
                let group = match filter.sort {
                    Sort::Age => None,
                    Sort::State => Some(op.state.as_str().to_string()),
                    Sort::Workflow => Some(op.workflow.clone()),
                    Sort::Destination => Some(op.destination.clone()),
                };
                self.view(
                    op,
                    Cursor {
                        group,
                        at: ms(at),
                        id,
                    },
                    viewer,
                    paused,
                    now,
                )
            })
            .collect();
        let next = if full || backwards {
            items.last().map(|v| v.cursor.clone())
        } else {
            None
        };
        let (more_before, more_after) = if backwards {
            (
                full,
                matches!(position, Position::Before(_) | Position::UpTo(_)),
            )
        } else {
            (
                matches!(position, Position::After(_) | Position::From(_)),
                full,
            )
        };
        let next = if more_after { next } else { None };
        // reversed: the rows in the reversed order, its "more after" is the order's "before"
        let (next, more_before, more_after) = if filter.reverse {
            items.reverse();
            let next = if more_before {
                items.last().map(|v| v.cursor.clone())
            } else {
                None
            };
            (next, more_after, more_before)
        } else {
            (next, more_before, more_after)
        };
        if filter.scope == Scope::Mine {
            items.retain(|v| v.claimed_by.as_deref() == Some(viewer));
        }
        // The database matched raw text; a match found only inside a redacted value must not
        // show (it would tell the typist the secret is there).
        for t in filter.query.words() {
            items.retain(|v| view_matches(v, t));
        }
        for t in filter.query.negated_words() {
            items.retain(|v| !view_matches(v, t));
        }
        Ok(Page {
            items,
            more_before,
            more_after,
            next,
        })
    }

    /// How many operations of the view the filter matches, for the console's "N of M"; `None`
    /// when the filter holds bare words (negated or not): those are checked against what is shown (a
    /// match inside a redacted value must not count), which a count cannot do.
    pub async fn count_matching(&self, filter: &ListFilter, viewer: &str) -> Result<Option<i64>> {
        let q = &filter.query;
        if q.words().chain(q.negated_words()).next().is_some() {
            return Ok(None);
        }
        let now = self.now();
        let Some((states, not_after)) = scope_of(filter, now) else {
            return Ok(Some(0));
        };
        let query = list_query(filter, viewer, &states, not_after, now);
        self.store.count_matching(&query).await.map(Some)
    }

    pub(crate) fn view(
        &self,
        op: Op,
        cursor: Cursor,
        viewer: &str,
        paused: Paused,
        now: DateTime<Utc>,
    ) -> OperationView {
        let red = self.scrubbers.of(&self.redactor, &op);
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
        let policy = self.config.destination(&op.destination);
        let step = safe_next_step(
            &op,
            &policy,
            viewer,
            paused,
            self.config.attempt_timeout,
            now,
        );
        let next_step = step.text;
        // what this viewer may do now: asked of the transition rules (SPEC 13)
        let actions = crate::domain::offered(
            &op,
            &crate::domain::Ctx {
                paused: paused.workflow,
                ..self.rules_ctx(viewer, &policy, now)
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
            workflow_paused: paused.workflow,
            destination_paused: paused.destination,
            actions,
            cursor,
        }
    }

    /// One operation in full: redacted payload, attempts, history.
    pub async fn show(&self, key: &str, viewer: &str) -> Result<OperationDetail> {
        crate::domain::validate_key(key).map_err(Error::Invalid)?;
        let now = self.now();
        let Some((id, op)) = self.store.load_op(key).await? else {
            return Err(Error::NotFound(format!("no operation with key {key}")));
        };
        let paused = Paused {
            workflow: self
                .store
                .paused_now(Pausable::Workflow, &op.workflow)
                .await?,
            destination: self
                .store
                .paused_now(Pausable::Destination, &op.destination)
                .await?,
        };
        let attempts = self.store.attempts_of(id).await?;
        let events = self.store.events_of(id).await?;
        let mut red = self
            .redactor
            .for_operation(&op.destination, &op.action, &op.payload);
        // a conflict's new contents are redacted alike, and their values scrubbed from every text
        let conflicting = match op.conflicting_payload.as_deref() {
            Some(p) => {
                let other = self.redactor.for_operation(&op.destination, &op.action, p);
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
        };
        search_by(&mut detail);
        Ok(detail)
    }

    /// Totals for `stats` and the console's header.
    pub async fn stats(&self) -> Result<Stats> {
        let now = self.now();
        let mut by_state: BTreeMap<State, i64> = State::ALL.iter().map(|s| (*s, 0)).collect();
        // the counters the store keeps with every change: no count of the operations
        for (s, n) in self.store.count_by_state().await? {
            by_state.insert(s, n);
        }
        // an exception is in an exception state, or an attempt in flight past its timeout
        let (stuck, oldest) = self.store.stuck_and_oldest(now).await?;
        let exceptions = stuck
            + by_state
                .iter()
                .filter(|(s, _)| s.is_exception())
                .map(|(_, n)| n)
                .sum::<i64>();
        let paused = self.store.paused(Pausable::Workflow).await?;
        let destinations = self.store.paused(Pausable::Destination).await?;
        Ok(Stats {
            by_state,
            exceptions,
            oldest_exception_seconds: oldest.map(|t| (now - t).num_seconds().max(0)),
            paused_workflows: paused.into_iter().map(|w| w.name).collect(),
            paused_destinations: destinations.into_iter().map(|d| d.name).collect(),
        })
    }

    /// Workflows paused now, with who paused them and why.
    pub async fn paused_workflows(&self) -> Result<Vec<PausedWorkflow>> {
        self.paused(Pausable::Workflow).await
    }

    /// Workflows or destinations paused now, with who paused them and why.
    pub async fn paused(&self, what: Pausable) -> Result<Vec<PausedWorkflow>> {
        Ok(self
            .store
            .paused(what)
            .await?
            .into_iter()
            .map(|w| PausedWorkflow {
                name: w.name,
                reason: w.paused_reason,
                by: w.paused_by,
                at: w.paused_at,
            })
            .collect())
    }

    /// When the next operation of these destinations is due for an automatic attempt, if one
    /// is within `ahead` (at or before now: due now).
    pub async fn next_due(
        &self,
        destinations: &[String],
        ahead: std::time::Duration,
    ) -> Result<Option<DateTime<Utc>>> {
        let now = self.now();
        let until = crate::domain::time::after(now, ahead);
        self.store.next_due(destinations, now, until).await
    }

    /// Up to `limit` operations of these destinations whose attempt was interrupted and that
    /// nobody has looked up since, as the dispatcher sends a lookup for them (SPEC 3: where the
    /// destination has a lookup, the dispatcher looks it up).
    pub async fn interrupted_to_look_up(
        &self,
        destinations: &[String],
        limit: usize,
    ) -> Result<Vec<super::StartedOp>> {
        let keys = self
            .store
            .interrupted_unknowns(destinations, self.now(), limit)
            .await?;
        self.lookup_requests(&keys).await
    }

    /// What a lookup of these operations is asked with (their destination, action and stored
    /// request, whose values a lookup's placeholders may name), in the order given; keys that
    /// name no operation are left out.
    pub async fn lookup_requests(&self, keys: &[String]) -> Result<Vec<super::StartedOp>> {
        let keys: Vec<&str> = keys
            .iter()
            .map(String::as_str)
            .filter(|k| crate::domain::validate_key(k).is_ok())
            .collect();
        let ops = self.store.load_ops(&keys).await?;
        Ok(keys
            .iter()
            .filter_map(|k| ops.get(*k))
            .map(|(_, op)| super::StartedOp {
                key: op.key.clone(),
                destination: op.destination.clone(),
                action: op.action.clone(),
                attempt: op.attempts,
                retry: false,
                payload: op.payload.clone(),
                row: None,
            })
            .collect())
    }

    /// How many operations of these destinations automation may still move.
    pub async fn unsettled(&self, destinations: &[String]) -> Result<i64> {
        self.store.count_unsettled(destinations, self.now()).await
    }

    /// Records that the dispatcher `name` is alive (not audited: it is not a change of state), and
    /// refreshes stale planner statistics (see `Store::refresh_stale_statistics`).
    pub async fn heartbeat(&self, name: &str) -> Result<()> {
        self.store.heartbeat(name, self.now()).await?;
        // the due query's plan depends on them (a bulk load may have landed since)
        self.store.refresh_stale_statistics().await
    }

    /// The exceptions now by workflow and state, and each workflow's oldest exception's start
    /// (metrics).
    #[allow(clippy::type_complexity)]
    pub async fn exceptions_by_workflow(
        &self,
    ) -> Result<(Vec<(String, State, i64)>, Vec<(String, DateTime<Utc>)>)> {
        self.store.exceptions_by_workflow(self.now()).await
    }

    /// Every dispatcher that ever said it was alive, and when it last did (metrics).
    pub async fn dispatchers(&self) -> Result<Vec<(String, DateTime<Utc>)>> {
        self.store.dispatchers().await
    }

    /// How long ago a dispatcher last said it was alive (`None`: never).
    pub async fn dispatcher_seen(&self) -> Result<Option<i64>> {
        let now = self.now();
        Ok(self
            .store
            .last_heartbeat()
            .await?
            .map(|t| (now - t).num_seconds().max(0)))
    }

    /// How many live claims `who` holds (the console's "Mine" count).
    pub async fn count_mine(&self, who: &str) -> Result<i64> {
        self.store.count_live_claims(who, self.now()).await
    }

    /// The newest audit events across the ledger, newest first, redacted (the activity feed).
    pub async fn activity(
        &self,
        limit: usize,
        filter: &crate::domain::filter::ActivityFilter,
    ) -> Result<Vec<EventView>> {
        // words are matched against what is shown (redacted, in words), so they are looked for
        // among more of the newest events than are kept
        let fetch = if filter.words.is_empty() {
            limit
        } else {
            limit * 10
        };
        let rows = self.store.recent_events(fetch as i64, filter).await?;
        let views = rows.into_iter().map(|(e, op)| match op {
            Some(op) => {
                let mut payloads = vec![op.payload.as_str()];
                payloads.extend(op.conflicting_payload.as_deref());
                let red = self
                    .redactor
                    .scrubber_of(&op.destination, &op.action, &payloads);
                let mut v = event_view(e, &|v| red.json(v), Some(op.key.clone()));
                v.op_key = Some(op.key);
                v
            }
            None => event_view(
                e,
                &|v| {
                    crate::domain::Redactor::default()
                        .scrubber("", "", "null")
                        .json(v)
                },
                None,
            ),
        });
        Ok(views
            .filter(|v| {
                let text = v.searchable();
                filter.words.iter().all(|w| text.contains(w.as_str()))
            })
            .take(limit)
            .collect())
    }

    /// A listener for changes by others (PostgreSQL `LISTEN settle_events`); `None` on SQLite,
    /// which is polled instead, or when the listener cannot connect now.
    pub async fn listen(&self) -> Option<ChangeListener> {
        self.store.listen().await.map(ChangeListener)
    }

    /// The id of the newest audit event: cheap to poll for "has anything changed?".
    pub async fn latest_event_id(&self) -> Result<i64> {
        self.store.latest_event_id().await
    }
}

fn event_view(e: EventRow, redact: &dyn Fn(&Value) -> Value, subject: Option<String>) -> EventView {
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
        op_key: None,
    }
}

/// SPEC 13: a next step that asks a person to look at the destination gives them something to
/// search by: when it was sent, the reference if any, and the payload's redaction hints (SPEC 8:
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
        super::reveal::redacted_fields(&d.payload)
            .into_iter()
            .filter(|(_, marker)| marker.starts_with("[redacted "))
            .map(|(path, marker)| format!("{path} {marker}")),
    );
    if !by.is_empty() {
        d.op.next_step = format!("{}. Search by: {}", d.op.next_step, by.join(", "));
    }
}

/// Whether a (redacted) row contains the filter text, as the console shows it.
fn view_matches(v: &OperationView, text: &str) -> bool {
    let has = |s: &str| s.to_lowercase().contains(text);
    has(&v.key)
        || has(&v.workflow)
        || has(&v.step)
        || has(&v.destination)
        || v.state.as_str().contains(text)
        || v.last_error.as_deref().is_some_and(has)
}

/// Notifications that something changed in the ledger.
pub struct ChangeListener(crate::store::Listener);

impl ChangeListener {
    /// Waits for the next change; `false` when the connection is gone.
    pub async fn next(&mut self) -> bool {
        self.0.next().await
    }
}

/// What scrubs an operation's texts (its reason, error and reference) of its payload's sensitive
/// values, kept by fingerprint for the operations shown lately. A list page builds fifty views and
/// the console builds the same page again on every change; finding the sensitive values parses
/// the payload, so it is done once per payload. The fingerprint covers destination, action and
/// contents, which are all the scrubber depends on; a conflict's second payload is part of the key.
#[derive(Default)]
pub(crate) struct Scrubbers(std::sync::Mutex<HashMap<String, Arc<OperationRedaction>>>);

/// How many payloads' scrubbers are kept; past it the memory starts afresh.
const SCRUBBERS_KEPT: usize = 4096;

impl Scrubbers {
    pub(crate) fn of(&self, redactor: &Redactor, op: &Op) -> Arc<OperationRedaction> {
        let key = match &op.conflicting_fingerprint {
            None => Cow::Borrowed(op.fingerprint.as_str()),
            Some(other) => Cow::Owned(format!("{} {other}", op.fingerprint)),
        };
        if let Some(found) = self.lock().get(key.as_ref()) {
            return found.clone();
        }
        let made = Arc::new(match &op.conflicting_payload {
            None => redactor.scrubber(&op.destination, &op.action, &op.payload),
            Some(other) => redactor.scrubber_of(&op.destination, &op.action, &[&op.payload, other]),
        });
        let mut kept = self.lock();
        if kept.len() >= SCRUBBERS_KEPT {
            kept.clear();
        }
        kept.insert(key.into_owned(), made.clone());
        made
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Arc<OperationRedaction>>> {
        // a panic elsewhere while holding it leaves nothing half-written: the map stays usable
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn op(payload: &str, fingerprint: &str) -> Op {
        Op::new(
            "k-1",
            "w",
            "s",
            "crm",
            "upsert",
            payload.into(),
            fingerprint.into(),
            chrono::Utc::now(),
        )
    }

    #[test]
    fn a_kept_scrubber_is_the_one_of_these_contents() {
        let redactor = Redactor::default();
        let kept = Scrubbers::default();
        let a = op(r#"{"password":"hunter2-a"}"#, "fa");
        let b = op(r#"{"password":"hunter2-b"}"#, "fb");
        for _ in 0..2 {
            assert_eq!(kept.of(&redactor, &a).text("x hunter2-a"), "x [redacted]");
            assert_eq!(kept.of(&redactor, &b).text("x hunter2-b"), "x [redacted]");
            assert_eq!(kept.of(&redactor, &a).text("x hunter2-b"), "x hunter2-b");
        }
        // the same contents with a conflict beside them: the conflict's values are scrubbed too
        let mut c = a.clone();
        c.conflicting_payload = Some(r#"{"password":"hunter2-c"}"#.into());
        c.conflicting_fingerprint = Some("fc".into());
        assert_eq!(
            kept.of(&redactor, &c).text("hunter2-a hunter2-c"),
            "[redacted] [redacted]"
        );
        assert_eq!(kept.of(&redactor, &a).text("hunter2-c"), "hunter2-c");
    }
}
