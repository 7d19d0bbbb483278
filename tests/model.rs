//! The model-based test of the manual's Proof under faults: a plain reference model of the states, safe next steps, staff actions, retries and threshold beside the
//! real ledger, on both backends.
//!
//! Random sequences of record (the same or changed contents), start, attempt outcomes (accepted,
//! rejected, transient, unknown), claim, take-over, release, reconcile found/absent, retry,
//! close, note, pause/resume, a lead's breaker held open or closed (while open no start goes;
//! after a close, starts go at the starting pace), sweep and clock advances, over three keys (one per destination
//! kind: `projects` deduplicates for 24 h and has a lookup, `crm` has a lookup, `sms` neither and
//! allows 3 attempts) and two operators, are applied to the ledger and to the model. After every
//! step the answer (done or refused) and, per key, the state, version, attempt count, live claim
//! and the kind of the safe next step must agree. A failing sequence is shrunk (chunks, then
//! single steps, removed while it still fails) and printed with its seed and its path.
//!
//! The sequences take the ledger's three ways in, in turn: every command as its own call; the
//! automation's commands through the HTTP API's group writer and a person's as bulk actions of
//! one; records and starts as JSON lines through ingest (reports through the group writer) and a
//! person's as bulk actions. Each must answer as the model does.
//!
//! `SETTLE_MODEL_SEQUENCES` (default 300) and `SETTLE_MODEL_SEED` (default 1) choose the run; the
//! long run is `SETTLE_MODEL_SEQUENCES=10000 cargo test --release --test model` (docs/development.md).
//!
//! The model leaves out what other tests cover and a sequence of a few dozen steps cannot reach:
//! the retry budget (500 tokens, refilled 5 a second: every sequence starts two days after the
//! last, full), the stopping threshold (its own conformance test), runs and roles. The backoff's
//! jitter is the one thing the model does not choose: it takes the drawn time from the ledger once
//! a retry is scheduled, after checking it lies within the full-jitter window (manual: Automatic retries: from the
//! outcome to at most `min(cap, base * 2^n)` later). The clock moves by 1 min, 10 min or 20 h,
//! more than any window here (32 s), so the draw matters only to a start at the same instant.

mod common;

use std::fmt;
use std::sync::{Arc, Mutex};

use chrono::{DateTime, TimeDelta, Utc};
use common::{Raw, TestDb};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::json;
use settle::domain::next_step::StepKind;
use settle::{AttemptReport, Error, Intent, Ledger, Outcome, Resolution, StaffAction, State};

/// The keys' destinations: (name, deduplicates, lookup, max attempts), as `common::config()`.
const DESTS: [(&str, bool, bool, u32); 3] = [
    ("projects", true, true, 6),
    ("crm", false, true, 6),
    ("sms", false, false, 3),
];
const WHO: [&str; 2] = ["alice", "bob"];
const LEASE: i64 = 30; // minutes
const ATTEMPT_TIMEOUT: i64 = 5; // minutes
const HORIZON_MIN: i64 = 24 * 60 * 8 / 10; // 80% of 24 h

#[derive(Clone, Copy, Debug)]
enum Cmd {
    Record {
        k: usize,
        changed: bool,
    },
    Start {
        k: usize,
    },
    Report {
        k: usize,
        outcome: Outcome,
    },
    Claim {
        k: usize,
        who: usize,
        force: bool,
    },
    Release {
        k: usize,
        who: usize,
    },
    Found {
        k: usize,
        who: usize,
    },
    Absent {
        k: usize,
        who: usize,
    },
    Retry {
        k: usize,
        who: usize,
    },
    Close {
        k: usize,
        who: usize,
    },
    /// A correction (manual: Correcting a request): the original closed, a new key made.
    Correct {
        k: usize,
        who: usize,
    },
    Note {
        k: usize,
        who: usize,
    },
    Pause,
    Resume,
    /// A lead holds destination `d`'s breaker open, or closes it
    /// (manual: Recovery that follows the destination): while open no start goes; after a close, starts go at its starting pace.
    Breaker {
        d: usize,
        open: bool,
    },
    Sweep,
    Tick {
        minutes: i64,
    },
    /// `who` takes back their newest action (manual: Taking an action back): restored exactly
    /// when nothing but notes touched the item since, within the window; else nothing changes.
    Undo {
        who: usize,
    },
}

/// A random step; most of a sequence's steps go to its `focus` key, so that one operation goes a
/// long way (attempts spent, retries, claims expiring).
fn random_cmd(rng: &mut StdRng, focus: usize) -> Cmd {
    let k = match rng.random_bool(0.6) {
        true => focus,
        false => rng.random_range(0..DESTS.len()),
    };
    let who = rng.random_range(0..WHO.len());
    match rng.random_range(0..100) {
        0..15 => Cmd::Record {
            k,
            changed: rng.random_bool(0.05),
        },
        15..30 => Cmd::Start { k },
        30..50 => Cmd::Report {
            k,
            outcome: match rng.random_range(0..20) {
                0..3 => Outcome::Accepted,
                3..6 => Outcome::Rejected,
                6..13 => Outcome::Transient,
                _ => Outcome::Unknown,
            },
        },
        50..58 => Cmd::Claim {
            k,
            who,
            force: rng.random_bool(0.3),
        },
        58..63 => Cmd::Release { k, who },
        63..68 => Cmd::Found { k, who },
        68..74 => Cmd::Absent { k, who },
        74..80 => Cmd::Retry { k, who },
        80..82 => Cmd::Close { k, who },
        82..84 => Cmd::Correct { k, who },
        84..85 => Cmd::Note { k, who },
        85..87 => Cmd::Pause,
        87..89 => Cmd::Resume,
        89..94 => Cmd::Sweep,
        _ => Cmd::Tick {
            minutes: [1, 10, 10, 10, 20 * 60][rng.random_range(0..5)],
        },
    }
}

/// One operation as the model keeps it.
#[derive(Clone, Debug, Default)]
struct Op {
    state: Option<State>,
    version: i64,
    attempts: u32,
    /// The attempt count when the policy's attempts were last given afresh (a person's retry).
    budget_start: u32,
    /// Some attempt's outcome was not observed (spent attempts then end `unknown`).
    ambiguous: bool,
    /// The open attempt's start.
    started: Option<DateTime<Utc>>,
    first_sent: Option<DateTime<Utc>>,
    /// When the next automatic attempt was scheduled: due now (a record, a retry), or a retry
    /// drawn from this moment to `window` later.
    scheduled: Option<DateTime<Utc>>,
    window: TimeDelta,
    /// The moment the ledger drew within that window.
    drawn: Option<DateTime<Utc>>,
    claim: Option<(usize, DateTime<Utc>)>,
    /// Recorded with the changed contents first.
    changed: bool,
    interrupted: bool,
    /// Changes to it other than notes, so far: an action is taken back only while none came
    /// after it.
    touches: u64,
}

/// A person's newest action, as taking it back needs it.
#[derive(Clone, Debug)]
struct Taken {
    k: usize,
    /// The operation before it.
    before: Op,
    /// Its changes other than notes, the action's own included.
    touches: u64,
    at: DateTime<Utc>,
    note: bool,
    /// It ended an attempt under way (never taken back).
    ended: bool,
    /// A pause or a resume (alice's, a lead): the flag before it, and the flag's changes so
    /// far, its own included.
    pause: Option<(bool, u64)>,
    undone: bool,
}

/// How long an action can be taken back (the config's default `undo_window`).
const UNDO_WINDOW: i64 = 15; // minutes

/// The whole model: three operations, the workflow's pause, the destinations' breakers, the
/// clock.
#[derive(Clone, Debug)]
struct Model {
    ops: [Op; 3],
    paused: bool,
    /// Each destination's breaker held open by a lead.
    down: [bool; 3],
    /// Each destination's pace once a lead closed its breaker: starts that may go now, and
    /// when they were counted (5 a second, at most 5 at once).
    pace: [Option<(f64, DateTime<Utc>)>; 3],
    now: DateTime<Utc>,
    /// Each person's newest action.
    last: [Option<Taken>; 2],
    /// The pause flag's changes so far.
    pause_changes: u64,
}

/// The pace a breaker closed by hand starts at, a second.
const PACE_START: f64 = 5.0;

/// What the model says of a command: done (whether it changed the operation) or refused.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Said {
    Done,
    Refused,
}

impl Op {
    fn live_claim(&self, now: DateTime<Utc>) -> Option<usize> {
        self.claim.filter(|c| c.1 > now).map(|c| c.0)
    }

    fn stuck(&self, now: DateTime<Utc>) -> bool {
        self.state == Some(State::InFlight)
            && self
                .started
                .is_some_and(|t| t + TimeDelta::minutes(ATTEMPT_TIMEOUT) <= now)
    }

    fn terminal(&self) -> bool {
        matches!(self.state, Some(State::Succeeded | State::Closed))
    }
}

fn dedupes_at(k: usize, first_sent: Option<DateTime<Utc>>, at: DateTime<Utc>) -> bool {
    DESTS[k].1 && first_sent.is_some_and(|f| at < f + TimeDelta::minutes(HORIZON_MIN))
}

impl Model {
    fn new(now: DateTime<Utc>) -> Model {
        Model {
            ops: Default::default(),
            paused: false,
            down: [false; 3],
            pace: [None; 3],
            now,
            last: [None, None],
            pause_changes: 0,
        }
    }

    /// Applies `cmd`, keeping what taking it back needs: each operation's changes other than
    /// notes, and each person's newest action.
    fn apply(&mut self, cmd: Cmd) -> Said {
        let before = self.ops.clone();
        let was_paused = self.paused;
        let said = match cmd {
            Cmd::Undo { who } => self.undo(who),
            _ => self.apply_one(cmd),
        };
        let noted = match cmd {
            Cmd::Note { k, .. } => Some(k),
            _ => None,
        };
        for (k, (op, was)) in self.ops.iter_mut().zip(&before).enumerate() {
            if op.version != was.version && noted != Some(k) {
                op.touches += 1;
            }
        }
        if self.paused != was_paused {
            self.pause_changes += 1;
            // alice pauses and resumes (a lead): her newest action
            if matches!(cmd, Cmd::Pause | Cmd::Resume) {
                self.last[0] = Some(Taken {
                    k: 0,
                    before: Op::default(),
                    touches: 0,
                    at: self.now,
                    note: false,
                    ended: false,
                    pause: Some((was_paused, self.pause_changes)),
                    undone: false,
                });
            }
        }
        if let (Said::Done, Some((k, who))) = (said, staff_of(cmd)) {
            let was = &before[k];
            self.last[who] = Some(Taken {
                k,
                before: was.clone(),
                touches: self.ops[k].touches,
                at: self.now,
                note: noted.is_some(),
                ended: was.started.is_some() && self.ops[k].started.is_none(),
                pause: None,
                undone: false,
            });
        }
        said
    }

    /// `who`'s newest action taken back: the operation as it was before it, where nothing but
    /// notes came since; a note withdrawn whatever came since.
    fn undo(&mut self, who: usize) -> Said {
        let now = self.now;
        let Some(t) = self.last[who].as_mut() else {
            return Said::Refused;
        };
        // a correction's new operation is never sent here: it is withdrawn with it
        if t.undone || now - t.at > TimeDelta::minutes(UNDO_WINDOW) {
            return Said::Refused;
        }
        if let Some((was, changes)) = t.pause {
            if self.pause_changes != changes {
                return Said::Refused;
            }
            t.undone = true;
            self.paused = was;
            return Said::Done;
        }
        let op = &mut self.ops[t.k];
        if t.note {
            op.version += 1;
        } else if t.ended || op.touches != t.touches {
            return Said::Refused;
        } else {
            *op = Op {
                version: op.version + 1,
                touches: op.touches,
                ..t.before.clone()
            };
        }
        t.undone = true;
        Said::Done
    }

    /// Applies `cmd` to the model (manual: States, The stopping threshold): what it says of it.
    fn apply_one(&mut self, cmd: Cmd) -> Said {
        let now = self.now;
        match cmd {
            Cmd::Pause => {
                self.paused = true;
                Said::Done
            }
            Cmd::Resume => {
                self.paused = false;
                Said::Done
            }
            Cmd::Breaker { d, open } => {
                if !open && self.down[d] {
                    self.pace[d] = Some((1.0, now));
                }
                self.down[d] = open;
                Said::Done
            }
            Cmd::Tick { minutes } => {
                self.now += TimeDelta::minutes(minutes);
                Said::Done
            }
            Cmd::Sweep => {
                for k in 0..3 {
                    let op = &self.ops[k];
                    if op.stuck(now) && op.live_claim(now).is_none() {
                        let mut op = self.ops[k].clone();
                        op.started = None;
                        finish(&mut op, k, Outcome::Unknown, now);
                        op.interrupted = op.state == Some(State::Unknown);
                        op.version += 1;
                        self.ops[k] = op;
                    }
                }
                Said::Done
            }
            Cmd::Record { k, changed } => self.record(k, changed),
            Cmd::Start { k } => self.start(k),
            Cmd::Report { k, outcome } => self.report(k, outcome),
            _ => self.staff(cmd),
        }
    }

    fn record(&mut self, k: usize, changed: bool) -> Said {
        let op = &mut self.ops[k];
        let Some(state) = op.state else {
            *op = Op {
                state: Some(State::Pending),
                scheduled: Some(self.now),
                drawn: Some(self.now),
                changed,
                ..Op::default()
            };
            return Said::Done;
        };
        // two contents only: the first, and the other (the conflict's, once recorded)
        if changed == op.changed || state == State::Conflict {
            return Said::Done;
        }
        if op.terminal() {
            return Said::Refused;
        }
        op.state = Some(State::Conflict);
        op.scheduled = None;
        op.version += 1;
        Said::Done
    }

    fn start(&mut self, k: usize) -> Said {
        let (now, paused) = (self.now, self.paused);
        let op = &mut self.ops[k];
        let ok = matches!(op.state, Some(State::Pending | State::RetryWait))
            && op.live_claim(now).is_none()
            && !paused
            && op.drawn.or(op.scheduled).is_some_and(|t| t <= now);
        if !ok || self.down[k] {
            return Said::Refused;
        }
        if let Some((tokens, counted)) = &mut self.pace[k] {
            let elapsed = (now - *counted).num_milliseconds().max(0) as f64 / 1000.0;
            *tokens = (*tokens + elapsed * PACE_START).min(PACE_START);
            *counted = now;
            if *tokens < 1.0 {
                return Said::Refused;
            }
            *tokens -= 1.0;
        }
        op.attempts += 1;
        op.state = Some(State::InFlight);
        op.started = Some(now);
        op.first_sent = op.first_sent.or(Some(now));
        op.scheduled = None;
        op.version += 1;
        Said::Done
    }

    fn report(&mut self, k: usize, outcome: Outcome) -> Said {
        let now = self.now;
        let op = &mut self.ops[k];
        if op.state.is_none() || op.terminal() {
            return Said::Refused;
        }
        let open = op.started.is_some();
        if op.live_claim(now).is_some() && !open {
            return Said::Refused;
        }
        if !open {
            if !matches!(op.state, Some(State::Pending | State::RetryWait)) {
                return Said::Refused;
            }
            op.attempts += 1;
            op.first_sent = op.first_sent.or(Some(now));
        }
        op.started = None;
        op.version += 1;
        if op.state != Some(State::Conflict) {
            finish(op, k, outcome, now);
        }
        Said::Done
    }

    fn staff(&mut self, cmd: Cmd) -> Said {
        let now = self.now;
        let Some((k, who)) = staff_of(cmd) else {
            unreachable!("staff actions only")
        };
        let op = &mut self.ops[k];
        let Some(state) = op.state else {
            return Said::Refused;
        };
        let lease = (who, now + TimeDelta::minutes(LEASE));
        let renewed = |op: &Op| match op.claim {
            Some((by, until)) if by == who && until > now => Some(lease),
            c => c,
        };
        if let Cmd::Note { .. } = cmd {
            op.claim = renewed(op);
            op.version += 1;
            return Said::Done;
        }
        if op.terminal() {
            return Said::Refused;
        }
        let other = op.live_claim(now).filter(|&by| by != who);
        // the action claims the item for `who` when nobody holds a live claim
        let claims = op.live_claim(now).is_none();
        let stuck = op.stuck(now);
        match cmd {
            Cmd::Claim { force, .. } => {
                if other.is_some() && !force {
                    return Said::Refused;
                }
                op.claim = Some(lease);
            }
            Cmd::Release { .. } => {
                if op.claim.is_none_or(|c| c.0 != who) {
                    return Said::Refused;
                }
                op.claim = None;
            }
            _ if other.is_some() => return Said::Refused,
            Cmd::Found { .. } => {
                if !(matches!(state, State::Unknown | State::Failed | State::Conflict) || stuck) {
                    return Said::Refused;
                }
                op.state = Some(State::Succeeded);
                op.started = None;
                op.claim = None;
            }
            Cmd::Absent { .. } => {
                if !(state == State::Unknown || stuck) {
                    return Said::Refused;
                }
                op.state = Some(State::Failed);
                op.ambiguous = false;
                op.interrupted = false;
                op.started = None;
                op.claim = if claims { Some(lease) } else { renewed(op) };
            }
            Cmd::Retry { .. } => {
                let ok = match state {
                    State::Failed | State::Rejected => true,
                    State::Unknown => dedupes_at(k, op.first_sent, now),
                    _ => false,
                };
                if !ok {
                    return Said::Refused;
                }
                op.state = Some(State::Pending);
                op.scheduled = Some(now);
                op.drawn = Some(now);
                op.budget_start = op.attempts;
                op.ambiguous = state == State::Unknown;
                op.interrupted = false;
                op.claim = None;
            }
            Cmd::Close { .. } => {
                if state == State::InFlight && !stuck {
                    return Said::Refused;
                }
                op.state = Some(State::Closed);
                op.started = None;
                op.claim = None;
            }
            // only what is confirmed not done: never what may have been done or may be sent
            Cmd::Correct { .. } => {
                if !matches!(state, State::Rejected | State::Failed) {
                    return Said::Refused;
                }
                op.state = Some(State::Closed);
                op.claim = None;
            }
            _ => unreachable!("every staff action is matched"),
        }
        op.version += 1;
        Said::Done
    }

    /// The safe next step's kind as the manual's safe next step gives it, for a viewer who holds no claim.
    fn next_step(&self, k: usize) -> Option<StepKind> {
        let (op, now) = (&self.ops[k], self.now);
        let (_, _, lookup, _) = DESTS[k];
        let state = op.state?;
        Some(match state {
            _ if op.terminal() => StepKind::Nothing,
            _ if op.live_claim(now).is_some() => StepKind::LeaveToHolder,
            State::InFlight if !op.stuck(now) => StepKind::Wait,
            State::InFlight if dedupes_at(k, op.first_sent, now) => StepKind::Wait,
            State::InFlight if lookup => StepKind::LookUp,
            State::InFlight => StepKind::ReconcileInterrupted,
            State::Unknown if dedupes_at(k, op.first_sent, now) => StepKind::RetrySameKey,
            State::Unknown if lookup => StepKind::LookUp,
            State::Unknown if op.interrupted => StepKind::ReconcileInterrupted,
            State::Unknown => StepKind::CheckDestination,
            State::Failed => StepKind::RetryOrAbandon,
            State::Rejected => StepKind::CorrectAtSource,
            State::Conflict => StepKind::DecideContents,
            _ if self.paused => StepKind::Paused,
            _ => StepKind::Automatic,
        })
    }
}

/// The operation and the person of a person's action on one operation.
fn staff_of(cmd: Cmd) -> Option<(usize, usize)> {
    match cmd {
        Cmd::Claim { k, who, .. }
        | Cmd::Release { k, who }
        | Cmd::Found { k, who }
        | Cmd::Absent { k, who }
        | Cmd::Retry { k, who }
        | Cmd::Close { k, who }
        | Cmd::Correct { k, who }
        | Cmd::Note { k, who } => Some((k, who)),
        _ => None,
    }
}

/// States, Automatic retries: an attempt's outcome, by the destination's capabilities and the policy.
fn finish(op: &mut Op, k: usize, outcome: Outcome, now: DateTime<Utc>) {
    let (_, _, _, max) = DESTS[k];
    let spent = op.attempts - op.budget_start >= max;
    op.interrupted = false;
    op.state = Some(match outcome {
        Outcome::Accepted => {
            op.claim = None;
            State::Succeeded
        }
        Outcome::Rejected => State::Rejected,
        Outcome::Transient if spent && op.ambiguous => State::Unknown,
        Outcome::Transient if spent => State::Failed,
        Outcome::Transient => State::RetryWait,
        Outcome::Unknown => {
            op.ambiguous = true;
            // the retry would come within 16 s; the clock moves by whole minutes
            match !spent && dedupes_at(k, op.first_sent, now) {
                true => State::RetryWait,
                false => State::Unknown,
            }
        }
    });
    op.scheduled = (op.state == Some(State::RetryWait)).then_some(now);
    // full jitter: random(0, min(cap, base * 2^n)), n counting from 0 for the first retry
    let n = (op.attempts - op.budget_start).saturating_sub(1).min(20);
    op.window = TimeDelta::seconds(1 << n).min(TimeDelta::minutes(5));
    op.drawn = None;
}

/// What the ledger shows of one key, in the model's terms.
#[derive(Debug, PartialEq)]
struct Seen {
    state: Option<State>,
    version: i64,
    attempts: u32,
    claim: Option<String>,
    next_step: Option<StepKind>,
}

impl fmt::Display for Seen {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{:?} v{} attempts {} claim {:?} next {:?}",
            self.state, self.version, self.attempts, self.claim, self.next_step
        )
    }
}

/// The ledger and the clock it reads, with the keys of one sequence.
/// How the real ledger is asked: each command as its own call, or through the paths that
/// write many at once (the HTTP API's group writer and ingest for the automation's commands, a
/// bulk action of one for a person's), which must answer as the single call does.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Path {
    Single,
    /// Records, starts and reports through the group writer; staff actions as bulk actions.
    Writer,
    /// Records and starts as JSON lines through ingest, reports through the group writer;
    /// staff actions as bulk actions.
    Ingest,
}

const PATHS: [Path; 3] = [Path::Single, Path::Writer, Path::Ingest];

struct Real {
    ledger: Ledger,
    writer: settle::ledger::Writer,
    path: Path,
    clock: Arc<Mutex<DateTime<Utc>>>,
    raw: Raw,
    keys: [String; 3],
    /// What the sequences reached: each command's answers, each destination's states.
    coverage: std::collections::BTreeMap<String, usize>,
}

fn payload(k: usize, changed: bool) -> serde_json::Value {
    json!({ "title": format!("task {k}"), "changed": changed })
}

impl Real {
    async fn apply(&mut self, cmd: Cmd) -> Result<Said, String> {
        let l = &self.ledger;
        let who = |w: usize| WHO[w];
        let path = self.path;
        let staff = |k: usize, w: usize, action: StaffAction| {
            let key = self.keys[k].clone();
            async move {
                if path == Path::Single {
                    return l.staff().act(&key, who(w), action).await.map(|_| ());
                }
                // a bulk action of one: its preview, then its apply
                let keys = [key.clone()];
                let preview = l.staff().bulk_preview(&keys, &action, who(w)).await?;
                if !preview.eligible.contains(&key) {
                    return Err(Error::Refused(format!("{:?}", preview.refused)));
                }
                let stop = std::sync::atomic::AtomicBool::new(false);
                let report = l
                    .staff()
                    .bulk_apply(&preview.eligible, &action, who(w), &stop, None, |_, _| {})
                    .await?;
                match report.done.contains(&key) {
                    true => Ok(()),
                    false => Err(Error::Refused(format!("{report:?}"))),
                }
            }
        };
        let writer = &self.writer;
        let write =
            |w: settle::ledger::Write| async move { writer.write(l, "bot", w).await.map(|_| ()) };
        let ingest = |line: serde_json::Value| async move {
            let text = format!("{line}\n");
            let report = l.ingest(text.as_bytes(), "bot").await?;
            match report.problems.first() {
                None => Ok(()),
                Some(p) if p.refused => Err(Error::Refused(p.message.clone())),
                Some(p) => Err(Error::Invalid(p.message.clone())),
            }
        };
        let result: settle::Result<()> = match cmd {
            Cmd::Record { k, changed } => {
                let intent = Intent {
                    key: self.keys[k].clone(),
                    workflow: "onboarding".into(),
                    step: "create-task".into(),
                    destination: DESTS[k].0.into(),
                    action: "create_task".into(),
                    payload: payload(k, changed),
                    run: None,
                };
                match path {
                    Path::Single => l.record(&intent, "bot").await.map(|_| ()),
                    Path::Writer => write(settle::ledger::Write::Record(intent)).await,
                    Path::Ingest => {
                        ingest(json!({
                            "type": "intent", "key": intent.key, "workflow": intent.workflow,
                            "step": intent.step, "destination": intent.destination,
                            "action": intent.action, "payload": intent.payload,
                        }))
                        .await
                    }
                }
            }
            Cmd::Start { k } => match path {
                Path::Single => l.start_attempt(&self.keys[k], "bot").await.map(|_| ()),
                Path::Writer => write(settle::ledger::Write::Start(self.keys[k].clone())).await,
                Path::Ingest => {
                    // a start line names the attempt it starts: the next one
                    let next = l
                        .read()
                        .show(&self.keys[k], "")
                        .await
                        .map(|d| d.op.attempts + 1);
                    match next {
                        Ok(n) => {
                            ingest(json!({"type": "start", "key": self.keys[k], "attempt": n}))
                                .await
                        }
                        Err(e) => Err(e),
                    }
                }
            },
            Cmd::Report { k, outcome } => {
                let report = AttemptReport {
                    key: self.keys[k].clone(),
                    outcome: Some(outcome),
                    reference: (outcome == Outcome::Accepted).then(|| format!("T-{k}")),
                    error: (outcome != Outcome::Accepted).then(|| "from the model".into()),
                    ..Default::default()
                };
                match path {
                    Path::Single => l.report_attempt(&report, "bot").await.map(|_| ()),
                    Path::Writer | Path::Ingest => {
                        write(settle::ledger::Write::Attempt(report)).await
                    }
                }
            }
            Cmd::Claim { k, who, force } => {
                let force_reason = force.then(|| "taking it over".to_string());
                staff(k, who, StaffAction::Claim { force_reason }).await
            }
            Cmd::Release { k, who } => staff(k, who, StaffAction::Release).await,
            Cmd::Found { k, who } => {
                let reference = format!("R-{k}");
                staff(
                    k,
                    who,
                    StaffAction::ReconcileFound {
                        reference,
                        note: None,
                    },
                )
                .await
            }
            Cmd::Absent { k, who } => {
                staff(k, who, StaffAction::ReconcileAbsent { note: None }).await
            }
            Cmd::Retry { k, who } => staff(k, who, StaffAction::Retry { note: None }).await,
            Cmd::Close { k, who } => {
                let close = StaffAction::Close {
                    resolution: Resolution::Abandoned,
                    reference: None,
                    superseded_by: None,
                    note: "given up".into(),
                };
                staff(k, who, close).await
            }
            Cmd::Correct { k, who } => {
                // as the command line asks it: under the chain's first free key (a correction
                // taken back keeps its key: then the next)
                let edits = vec![settle::domain::edit::Edit::set("fixed=true").unwrap()];
                let correct = match l
                    .staff()
                    .correction(&self.keys[k], None, edits, "corrected")
                    .await
                {
                    Ok(c) => c,
                    Err(e) => return Err(format!("{cmd:?}: {e}")),
                };
                let StaffAction::Correct {
                    corrected_as: key, ..
                } = &correct
                else {
                    unreachable!("a correction")
                };
                let key = key.clone();
                let done = staff(k, who, correct).await;
                // made with it: the correction, due at once, naming what it corrects
                if done.is_ok() {
                    let made = l
                        .read()
                        .show(&key, "alice")
                        .await
                        .map_err(|e| e.to_string())?;
                    if made.op.state != State::Pending
                        || made.op.corrects.as_deref() != Some(self.keys[k].as_str())
                    {
                        return Err(format!("{cmd:?}: the correction is {:?}", made.op));
                    }
                }
                done
            }
            Cmd::Note { k, who } => {
                let text = "looked at it".into();
                staff(k, who, StaffAction::Note { text }).await
            }
            Cmd::Pause => l
                .staff()
                .pause("onboarding", "model", "alice")
                .await
                .map(|_| ()),
            Cmd::Resume => l.staff().resume("onboarding", "alice").await.map(|_| ()),
            Cmd::Breaker { d, open } => l
                .staff()
                .set_breaker(DESTS[d].0, open, "model", "alice")
                .await
                .map(|_| ()),
            Cmd::Sweep => l.rounds().sweep().await.map(|_| ()),
            Cmd::Tick { minutes } => {
                *self.clock.lock().unwrap() += TimeDelta::minutes(minutes);
                Ok(())
            }
            Cmd::Undo { who: w } => {
                match l
                    .staff()
                    .undo(settle::ledger::UndoOf::Last, who(w), None)
                    .await
                {
                    Ok(r) if r.taken_back.is_empty() => Err(Error::Refused(format!("{r:?}"))),
                    Ok(_) => Ok(()),
                    Err(e) => Err(e),
                }
            }
        };
        match result {
            Ok(()) => Ok(Said::Done),
            Err(Error::Refused(_) | Error::NotFound(_)) => Ok(Said::Refused),
            Err(e) => Err(format!("{cmd:?}: {e}")),
        }
    }

    /// What the ledger shows of key `k`, and when its next automatic attempt is due.
    async fn seen(&mut self, k: usize) -> (Seen, Option<DateTime<Utc>>) {
        let key = &self.keys[k];
        let shown = match self.ledger.read().show(key, "carol").await {
            Ok(d) => d.op,
            Err(Error::NotFound(_)) => {
                let none = Seen {
                    state: None,
                    version: 0,
                    attempts: 0,
                    claim: None,
                    next_step: None,
                };
                return (none, None);
            }
            Err(e) => panic!("show {key}: {e}"),
        };
        let version = self
            .raw
            .int(&format!(
                "SELECT version FROM operations WHERE key = '{key}'"
            ))
            .await;
        let now = *self.clock.lock().unwrap();
        let seen = Seen {
            state: Some(shown.state),
            version,
            attempts: shown.attempts,
            claim: shown
                .claimed_by
                .filter(|_| shown.claim_expires_at.is_some_and(|t| t > now)),
            next_step: Some(shown.next_step_kind),
        };
        (seen, shown.next_attempt_at)
    }
}

fn expected(model: &Model, k: usize) -> Seen {
    let op = &model.ops[k];
    Seen {
        state: op.state,
        version: op.version,
        attempts: op.attempts,
        claim: op.live_claim(model.now).map(|w| WHO[w].to_string()),
        next_step: model.next_step(k),
    }
}

/// One sequence against a fresh set of keys, from `start`: where ledger and model first differ.
async fn run(
    real: &mut Real,
    start: DateTime<Utc>,
    tag: &str,
    cmds: &[Cmd],
) -> Option<(usize, String)> {
    real.keys = std::array::from_fn(|k| format!("{tag}-{}", DESTS[k].0));
    *real.clock.lock().unwrap() = start;
    // by someone outside the sequence: not an action of alice's to take back
    real.ledger
        .staff()
        .resume("onboarding", "setup")
        .await
        .unwrap();
    let mut model = Model::new(start);
    // a breaker an earlier sequence held open is closed: its pace starts now; one paced since
    // has its whole second's worth after the two days between sequences
    for b in real.ledger.read().breakers().await.unwrap() {
        let Some(d) = DESTS.iter().position(|(name, ..)| *name == b.destination) else {
            continue;
        };
        let tokens = match b.state {
            settle::domain::breaker::BreakerState::Closed => PACE_START,
            _ => 1.0,
        };
        model.pace[d] = b.pace.map(|_| (tokens, start));
        if b.is_down() {
            model.pace[d] = Some((1.0, start));
        }
        (real.ledger.staff())
            .set_breaker(&b.destination, false, "next sequence", "alice")
            .await
            .unwrap();
    }
    for (i, &cmd) in cmds.iter().enumerate() {
        let said = model.apply(cmd);
        let name = format!("{cmd:?}");
        let name = name.split([' ', '{']).next().unwrap_or_default();
        *real.coverage.entry(format!("{name} {said:?}")).or_default() += 1;
        match real.apply(cmd).await {
            Ok(did) if did == said => {}
            Ok(did) => {
                return Some((
                    i,
                    format!("{cmd:?}: the model says {said:?}, the ledger {did:?}"),
                ));
            }
            Err(e) => return Some((i, e)),
        }
        for (k, (dest, ..)) in DESTS.iter().enumerate() {
            let (got, due) = real.seen(k).await;
            let op = &mut model.ops[k];
            if let (Some(State::RetryWait), None, Some(from)) = (op.state, op.drawn, op.scheduled) {
                // the jitter as drawn: within its window (stored to the millisecond)
                let window = from - TimeDelta::milliseconds(1)..=from + op.window;
                match due {
                    Some(t) if window.contains(&t) => op.drawn = Some(t),
                    _ => {
                        let why = format!(
                            "after {cmd:?}, {}: retry due at {due:?}, not within {window:?}",
                            real.keys[k]
                        );
                        return Some((i, why));
                    }
                }
            }
            let want = expected(&model, k);
            if let Some(state) = want.state {
                let reached = format!("{dest} {state}");
                *real.coverage.entry(reached).or_default() += 1;
            }
            if want != got {
                return Some((
                    i,
                    format!(
                        "after {cmd:?}, {}:\n  model  {want}\n  ledger {got}",
                        real.keys[k]
                    ),
                ));
            }
        }
    }
    None
}

/// The shortest sequence that still fails, found by removing chunks, then single steps.
/// Returns it with its failure.
async fn shrink(
    real: &mut Real,
    next_start: &mut DateTime<Utc>,
    mut cmds: Vec<Cmd>,
    mut why: String,
) -> (Vec<Cmd>, String) {
    let mut trial = 0;
    let mut chunk = cmds.len() / 2;
    while chunk >= 1 {
        let mut i = 0;
        while i + chunk <= cmds.len() {
            let mut shorter = cmds.clone();
            shorter.drain(i..i + chunk);
            trial += 1;
            *next_start = (*next_start).max(*real.clock.lock().unwrap()) + TimeDelta::days(2);
            let tag = format!("shrink-{trial}");
            match run(real, *next_start, &tag, &shorter).await {
                Some((at, failed)) => {
                    cmds = shorter[..=at].to_vec();
                    why = failed;
                }
                None => i += 1,
            }
        }
        chunk /= 2;
    }
    (cmds, why)
}

async fn ledger_and_model_agree(db: &TestDb) {
    let sequences = common::env_count("SETTLE_MODEL_SEQUENCES", 300);
    let seed = common::env_count("SETTLE_MODEL_SEED", 1) as u64;
    let clock = Arc::new(Mutex::new(Utc::now()));
    let c = clock.clone();
    let ledger = Ledger::open(&db.url, common::config())
        .await
        .unwrap()
        .with_clock(move || *c.lock().unwrap());
    let writer = settle::ledger::Writer::new(&ledger, 1);
    let mut real = Real {
        writer,
        path: Path::Single,
        ledger,
        clock,
        raw: Raw::connect(&db.url).await,
        keys: Default::default(),
        coverage: Default::default(),
    };
    // whole minutes, so that the clock never lands within a jitter of a horizon
    let mut start = DateTime::from_timestamp(1_790_000_000 / 60 * 60, 0).unwrap();
    let mut steps = 0;
    for n in 0..sequences {
        let mut rng = StdRng::seed_from_u64(seed.wrapping_mul(1_000_003).wrapping_add(n as u64));
        let len = rng.random_range(1..=60);
        let focus = rng.random_range(0..DESTS.len());
        let cmds: Vec<Cmd> = (0..len).map(|_| random_cmd(&mut rng, focus)).collect();
        // a lead's breaker now and then, drawn apart so that the other steps stay as they were
        let mut hands = StdRng::seed_from_u64(seed ^ 0xb4ea_ce4e ^ n as u64);
        let cmds: Vec<Cmd> = cmds
            .into_iter()
            .flat_map(|c| {
                let hand = hands.random_bool(0.015).then(|| Cmd::Breaker {
                    d: hands.random_range(0..DESTS.len()),
                    open: hands.random_bool(0.4),
                });
                hand.into_iter().chain(std::iter::once(c))
            })
            .collect();
        // a person's undo now and then, after their own action or anyone's step, drawn apart too
        let mut undos = StdRng::seed_from_u64(seed ^ 0x0d0b_ac4e ^ n as u64);
        let cmds: Vec<Cmd> = cmds
            .into_iter()
            .flat_map(|c| {
                let who = match staff_of(c) {
                    Some((_, who)) if undos.random_bool(0.15) => Some(who),
                    _ => undos
                        .random_bool(0.02)
                        .then(|| undos.random_range(0..WHO.len())),
                };
                std::iter::once(c).chain(who.map(|who| Cmd::Undo { who }))
            })
            .collect();
        steps += cmds.len();
        // two days after the last sequence's clock, wherever its ticks took it: nothing of it
        // is within any window (a person's last action, a lease) of this one
        start = start.max(*real.clock.lock().unwrap()) + TimeDelta::days(2);
        // each sequence through one path in turn: the single calls, the group writer, ingest
        real.path = PATHS[n % PATHS.len()];
        let Some((at, why)) = run(&mut real, start, &format!("s{n}"), &cmds).await else {
            continue;
        };
        let (short, why) = shrink(&mut real, &mut start, cmds[..=at].to_vec(), why).await;
        start = start.max(*real.clock.lock().unwrap()) + TimeDelta::days(2);
        let again = run(&mut real, start, "shrunk", &short).await.is_some();
        panic!(
            "{}: sequence {n} of seed {seed} (SETTLE_MODEL_SEED={seed}), through {:?}, fails; \
             shrunk to {} steps (failing again when rerun: {again}):\n{}\n{why}",
            db.backend,
            real.path,
            short.len(),
            short
                .iter()
                .map(|c| format!("  {c:?}\n"))
                .collect::<String>()
        );
    }
    println!(
        "{}: {sequences} sequences, {steps} steps: the ledger and the model agree; reached {:?}",
        db.backend, real.coverage
    );
    // the sequences went where the rules are: every state at every destination (but a
    // deduplicating destination's unknown, which needs its horizon passed), each command done
    if sequences >= 300 {
        for (dest, dedupes, _, _) in DESTS {
            for state in [
                "pending",
                "in_flight",
                "retry_wait",
                "succeeded",
                "rejected",
                "failed",
                "conflict",
                "closed",
            ]
            .into_iter()
            .chain((!dedupes).then_some("unknown"))
            {
                assert!(
                    real.coverage.contains_key(&format!("{dest} {state}")),
                    "no sequence reached {state} at {dest}: {:?}",
                    real.coverage
                );
            }
        }
        // the leads' breakers were among the steps, and undos both taken and refused
        for reached in ["Breaker Done", "Undo Done", "Undo Refused"] {
            assert!(
                real.coverage.get(reached).is_some_and(|n| *n > 0),
                "{reached}: {:?}",
                real.coverage
            );
        }
    }
}

both_backends!(ledger_and_model_agree);
