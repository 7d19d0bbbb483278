//! What readers get: redacted, escaped-ready views of operations, attempts, history and totals.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use serde::Serialize;
use serde_json::Value;

use crate::domain::next_step::StepKind;
use crate::domain::{Outcome, Resolution, State};

/// One operation as lists show it. Every text is redacted.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct OperationView {
    pub key: String,
    pub state: State,
    pub workflow: String,
    pub step: String,
    pub destination: String,
    pub action: String,
    pub created_at: DateTime<Utc>,
    /// Since it became an exception (for exceptions), else since it was created.
    pub age_seconds: i64,
    pub attempts: u32,
    /// The holder of a live claim.
    pub claimed_by: Option<String>,
    pub claim_expires_at: Option<DateTime<Utc>>,
    pub reference: Option<String>,
    pub next_step: String,
    pub next_step_kind: StepKind,
    pub exception_since: Option<DateTime<Utc>>,
    pub next_attempt_at: Option<DateTime<Utc>>,
    pub reason: Option<String>,
    pub last_error: Option<String>,
    pub resolution: Option<Resolution>,
    pub superseded_by: Option<String>,
    /// The key of the operation this one corrects (manual: Correcting a request).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub corrects: Option<String>,
    /// The run it belongs to (manual: Runs).
    pub run: Option<String>,
    /// The team that owns its workflow (manual: Owners and notifications); none: nobody.
    pub owner: Option<String>,
    pub workflow_paused: bool,
    pub destination_paused: bool,
    /// The staff actions the viewer may take on it now (manual: The console: what the console offers).
    pub actions: crate::domain::Offers,
    /// Where the next page starts after this row.
    #[serde(skip)]
    pub cursor: crate::store::Cursor,
}

impl OperationView {
    /// Done, as a run and a rerun count it (manual: Runs): succeeded, or closed as done elsewhere.
    pub fn is_done(&self) -> bool {
        self.state == State::Succeeded || self.resolution == Some(Resolution::DoneElsewhere)
    }

    /// What a caller following the protocol reads after record, start or attempt (manual: The protocol:
    /// `--json`, and the HTTP API's answers): whether it may send now, and the attempt to report.
    pub fn step(&self, attempt: Option<u32>, send: bool) -> StepView<'_> {
        StepView {
            key: &self.key,
            state: self.state.as_str(),
            attempt,
            send,
            done: self.is_done(),
            reference: self.reference.as_deref(),
            run: self.run.as_deref(),
            next_step: &self.next_step,
            corrected_as: None,
        }
    }
}

/// See [`OperationView::step`].
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct StepView<'a> {
    pub key: &'a str,
    pub state: &'a str,
    pub attempt: Option<u32>,
    pub send: bool,
    /// Succeeded, or closed as done elsewhere: a rerun goes on to the next step (manual: Runs).
    pub done: bool,
    pub reference: Option<&'a str>,
    pub run: Option<&'a str>,
    pub next_step: &'a str,
    /// Corrected (manual: Correcting a request): the end of its chain, whose outcome answers
    /// for this key (`done` and `reference` are that operation's).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub corrected_as: Option<&'a str>,
}

impl<'a> StepView<'a> {
    /// The answer of a corrected key: its chain's end's (never a send).
    pub fn corrected(self, end: Option<&'a ChainEnd>) -> StepView<'a> {
        match end {
            Some(end) => StepView {
                send: false,
                done: end.done,
                reference: end.reference.as_deref(),
                corrected_as: Some(&end.key),
                ..self
            },
            None => self,
        }
    }
}

#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct AttemptView {
    pub n: u32,
    pub actor: String,
    /// `null` while the attempt is open.
    pub outcome: Option<Outcome>,
    pub http_status: Option<u16>,
    pub reference: Option<String>,
    pub error: Option<String>,
    pub started_at: DateTime<Utc>,
    pub finished_at: Option<DateTime<Utc>>,
}

impl AttemptView {
    /// What the destination answered, as a line says it after the outcome: ` HTTP 422: why`,
    /// ` HTTP 201 ref T-1`, `: read timeout` (the status once, where the error begins with it).
    /// Not escaped: the face escapes it for where it lands.
    pub fn answer_said(&self) -> String {
        let mut out = String::new();
        let said_in_error = |s: u16| {
            self.error
                .as_deref()
                .is_some_and(|e| e.starts_with(&format!("HTTP {s}")))
        };
        if let Some(s) = self.http_status.filter(|s| !said_in_error(*s)) {
            out.push_str(&format!(" HTTP {s}"));
        }
        if let Some(r) = &self.reference {
            out.push_str(&format!(" ref {r}"));
        }
        match &self.error {
            Some(e) if self.http_status.is_some_and(said_in_error) => {
                out.push_str(&format!(" {e}"))
            }
            Some(e) => out.push_str(&format!(": {e}")),
            None => {}
        }
        out
    }
}

#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct EventView {
    pub id: i64,
    pub at: DateTime<Utc>,
    pub actor: String,
    pub kind: String,
    pub from_state: Option<String>,
    pub to_state: Option<String>,
    pub detail: Value,
    /// The id of the person's action it was, or that this undo took back
    /// (manual: Taking an action back).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub action: Option<String>,
    /// The operation's key (activity feed), or the workflow for pause/resume.
    pub subject: Option<String>,
    /// The operation's key, when the event is an operation's (Activity's `Enter` opens it).
    #[serde(skip)]
    pub op_key: Option<String>,
}

impl EventView {
    /// Whether automation wrote it (the dispatcher, a workflow recording, the sweep).
    pub fn is_automation(&self) -> bool {
        crate::domain::activity_filter::is_automation(&self.actor, &self.kind)
    }

    /// The detail as words, not JSON: `claimed · note "asked the team" · batch b-...`.
    pub fn detail_words(&self) -> String {
        let Value::Object(m) = &self.detail else {
            return String::new();
        };
        m.iter()
            .filter_map(|(k, v)| {
                let k = k.replace('_', " ");
                Some(match v {
                    Value::Null | Value::Bool(false) => return None,
                    Value::Bool(true) => k,
                    // a note's text speaks for itself
                    Value::String(s) if k == "text" => format!("\"{s}\""),
                    Value::String(s) if s.contains(' ') => format!("{k} \"{s}\""),
                    Value::String(s) => format!("{k} {s}"),
                    Value::Number(n) => format!("{k} {n}"),
                    other => format!("{k} {other}"),
                })
            })
            .collect::<Vec<_>>()
            .join(" · ")
    }

    /// The lower-case text a word of Activity's filter is looked for in: what is shown.
    pub(crate) fn searchable(&self) -> String {
        format!(
            "{} {} {} {}",
            self.actor,
            self.kind,
            self.subject.as_deref().unwrap_or(""),
            self.detail_words()
        )
        .to_lowercase()
    }
}

/// One operation with everything `show` prints.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct OperationDetail {
    #[serde(flatten)]
    pub op: OperationView,
    pub payload: Value,
    pub fingerprint: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub conflicting_payload: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub conflicting_fingerprint: Option<String>,
    pub attempt_log: Vec<AttemptView>,
    pub history: Vec<EventView>,
    /// The steps of the run it belongs to, in order (manual: Runs; none without a run).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub run_steps: Vec<crate::domain::run::RunStep>,
    /// Pruned (manual: Retention and the archive): only its key answers, until its horizon; payload, attempts and history
    /// are in the prune's archive.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub pruned: bool,
    /// Corrected (manual: Correcting a request): the end of its chain of corrections, which
    /// answers for this key.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub corrected_as: Option<ChainEnd>,
}

/// The end of a chain of corrections (KEY -> KEY:c2 -> KEY:c3): the operation that answers for
/// every key before it.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct ChainEnd {
    pub key: String,
    pub state: State,
    /// Succeeded, or closed as done elsewhere.
    pub done: bool,
    pub reference: Option<String>,
    /// How many corrections lead to it.
    pub corrections: u32,
}

/// A workflow or a destination paused now, and why: its threshold's numbers or the answer that
/// paused it (by `settle`), or who paused it, when, and their note.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct PausedWorkflow {
    /// `workflow` or `destination`.
    pub what: &'static str,
    pub name: String,
    pub reason: Option<String>,
    pub by: Option<String>,
    pub at: Option<DateTime<Utc>>,
}

#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct Stats {
    pub by_state: BTreeMap<State, i64>,
    /// Operations that are exceptions, and stalled runs (manual: Runs: each an exception).
    pub exceptions: i64,
    /// Runs stalled between steps now.
    pub stalled_runs: i64,
    pub oldest_exception_seconds: Option<i64>,
    pub paused_workflows: Vec<String>,
    pub paused_destinations: Vec<String>,
    /// Why each pause holds, workflows first.
    pub pauses: Vec<PausedWorkflow>,
    /// Operations of the config's HTTP destinations due now, waiting for a dispatcher (counted
    /// up to 1,000: the states' counters say how many wait in all).
    pub due: i64,
    /// The dispatchers heard from within `dispatcher_gone_after` (one that stopped cleanly is
    /// not listed), by name.
    pub dispatchers: Vec<DispatcherSeen>,
    /// Exceptions of workflows no team owns, where the config has teams (nobody is told of
    /// them); `None` without teams.
    pub unowned_exceptions: Option<i64>,
    /// The channels whose last try failed while messages wait for them
    /// (manual: Owners and notifications).
    pub notify_failing: Vec<String>,
    /// The destinations' breakers ever troubled (manual: Recovery that follows the destination).
    pub breakers: Vec<super::BreakerView>,
}

/// A dispatcher and how long since it last said it was alive.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct DispatcherSeen {
    pub name: String,
    pub seen_seconds: i64,
}

/// The totals as `settle stats` prints them: one line each, names escaped.
impl std::fmt::Display for Stats {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for (state, n) in &self.by_state {
            writeln!(f, "{:<11} {n}", state.as_str())?;
        }
        writeln!(f, "exceptions  {}", self.exceptions)?;
        writeln!(f, "stalled     {} runs", self.stalled_runs)?;
        let oldest = self
            .oldest_exception_seconds
            .map_or("-".to_string(), |secs| {
                crate::domain::format_age(chrono::TimeDelta::seconds(secs))
            });
        writeln!(f, "oldest      {oldest}")?;
        let listed = |names: &[String]| {
            if names.is_empty() {
                "-".to_string()
            } else {
                crate::domain::escape_text(&names.join(", ")).into_owned()
            }
        };
        if let Some(n) = self.unowned_exceptions {
            writeln!(f, "no owner    {n} exceptions")?;
        }
        if !self.notify_failing.is_empty() {
            writeln!(f, "notify      FAILING: {}", listed(&self.notify_failing))?;
        }
        writeln!(f, "due         {}", self.due)?;
        // a destination sent to again at its own pace, or not at all
        for b in (self.breakers.iter()).filter(|b| b.is_down() || b.pace.is_some()) {
            writeln!(f, "breaker     {}", b.line())?;
        }
        let heard: Vec<String> = self
            .dispatchers
            .iter()
            .map(|d| {
                let ago = crate::domain::format_age(chrono::TimeDelta::seconds(d.seen_seconds));
                format!("{} ({ago} ago)", d.name)
            })
            .collect();
        writeln!(f, "dispatchers {}", listed(&heard))?;
        writeln!(f, "paused      {}", listed(&self.paused_workflows))?;
        write!(f, "paused dest {}", listed(&self.paused_destinations))?;
        for p in &self.pauses {
            let esc = |t: &str| crate::domain::escape_text(t).into_owned();
            let reason = p.reason.as_deref().map_or("no reason given".into(), esc);
            let by = p.by.as_deref().map_or("-".into(), esc);
            let at =
                p.at.map_or("-".into(), |t| t.format("%Y-%m-%d %H:%M UTC").to_string());
            write!(
                f,
                "\n  {} {}: {reason} (by {by}, {at})",
                p.what,
                esc(&p.name)
            )?;
        }
        Ok(())
    }
}

/// The result of a change asked of the ledger.
#[derive(Clone, Debug, PartialEq)]
pub struct Applied {
    pub key: String,
    pub workflow: String,
    pub from: State,
    pub to: State,
    /// The audit event's kind; `None` when nothing needed to change.
    pub kind: Option<&'static str>,
    pub warning: Option<String>,
    /// The id of the person's action it was (manual: Taking an action back), to take it back by.
    pub action: Option<String>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Recorded {
    Created,
    /// The same key and contents were already recorded: nothing changed.
    Unchanged,
    /// The key came again with different contents; both are kept.
    Conflict,
}
