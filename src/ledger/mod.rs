//! The `Ledger`: every operation a user or automation can ask for, each one atomic and audited.
//!
//! The rules come from `domain`; this module loads what they need inside one transaction, asks
//! them, and writes the result with a compare-and-set on the operation's `version` together with
//! its one audit event. Readers only ever get redacted views.

mod archive;
mod budgets;
mod bulk;
mod change;
mod checks;
mod dispatcher;
mod engine;
pub use dispatcher::Background;
mod group;
mod group_lane;
mod group_writes;
mod guards;
mod ingest;
mod list;
mod prune;
mod record;
mod reveal;
mod review;
mod round_steps;
mod round_types;
mod rounds;
mod run_actions;
mod run_review;
mod run_rows;
mod runs;
mod start;
mod view;
mod views;
mod watch;
mod workflows;

use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use serde_json::Value;

use crate::config::Config;
use crate::domain::{Command, Outcome, Redactor, validate_key};
use crate::error::{Error, Result};
use crate::store::{self, Store, Tried, Tx};
use change::{Ask, Decided};
use checks::{check_name, check_report, check_text};
use engine::Batch;
use record::recorded_event;

pub use crate::domain::StaffAction;
pub use crate::store::{Cursor, Pausable};
pub use bulk::{BulkPreview, BulkReport};
pub use group::{GROUP as WRITE_GROUP, Queued, Writer};
pub use group_writes::{Answered, Write, Written};
pub use ingest::{IngestProblem, IngestReport};
pub use list::{ListFilter, Page, Position, Scope, Sort};
pub use prune::{AUTO_PRUNE_EVERY, PRUNE_BATCH, PruneOptions, PruneReport};
pub use reveal::redacted_paths;
pub use review::{
    AGE_BUCKETS, AgeBucket, DayCount, Duplicates, GroupReview, MAX_WINDOW as MAX_REVIEW_WINDOW,
    Review, ReviewScope,
};
pub use round_types::{Finished, Round, StartedOp, StartedRows};
pub use run_review::{RunsReview, StepTransition};
pub use runs::{RunSummary, RunView};
pub use views::{
    Applied, AttemptView, EventView, OperationDetail, OperationView, PausedWorkflow, Recorded,
    Stats, StepView,
};
pub use watch::ChangeListener;

/// The actor name of settle's own automatic actions (sweep, auto-pause).
pub const SYSTEM_ACTOR: &str = "settle";

type Clock = Arc<dyn Fn() -> DateTime<Utc> + Send + Sync>;

/// The attempts already stored of the operations a batch touches, `(operation id, number)` to
/// outcome (`None`: still open), so that judging a repeated attempt costs no query.
pub(crate) type KnownAttempts = std::collections::HashMap<(i64, u32), Option<Outcome>>;

/// An intended operation, as an automation records it.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Intent {
    pub key: String,
    pub workflow: String,
    pub step: String,
    pub destination: String,
    pub action: String,
    pub payload: Value,
    /// The run this step belongs to (manual: Runs): one execution of the workflow for one case.
    pub run: Option<String>,
}

/// An attempt's outcome, as an automation reports it.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct AttemptReport {
    pub key: String,
    /// The attempt's number; by default the open attempt, else the next one.
    pub attempt: Option<u32>,
    pub outcome: Option<Outcome>,
    pub reference: Option<String>,
    pub error: Option<String>,
    pub http_status: Option<u16>,
    pub retry_after: Option<Duration>,
}

#[derive(Clone)]
pub struct Ledger {
    store: Store,
    config: Arc<Config>,
    redactor: Arc<Redactor>,
    /// What scrubs the texts of operations already shown, by fingerprint (see `read.rs`).
    scrubbers: Arc<view::Scrubbers>,
    clock: Clock,
    /// Who acts through this handle when it is a session of `settle serve` (manual: Running settle for a team): their role
    /// is enforced by the rules, and every event names them and their key. `None`: the local
    /// CLI, console or an automation, acting as `lead` under the name it gives.
    session: Option<Arc<crate::domain::Identity>>,
    /// The workflows an automation's handle may write and read (manual: The HTTP API); `None`: all.
    scope: Option<Arc<[String]>>,
}

impl std::fmt::Debug for Ledger {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ledger")
            .field("db", &self.store.shown_url())
            .finish()
    }
}

impl Ledger {
    /// Opens (and migrates) the database at `url`.
    pub async fn open(url: &str, config: Config) -> Result<Ledger> {
        Ledger::open_with(url, config, store::Profile::Batch).await
    }

    /// This handle on another store of the same database (a writer's own connection).
    pub(crate) fn on_store(&self, store: Store) -> Ledger {
        Ledger {
            store,
            ..self.clone()
        }
    }

    /// Opens the ledger for the console: a long-running reader whose memory stays flat.
    pub async fn open_console(url: &str, config: Config) -> Result<Ledger> {
        Ledger::open_with(url, config, store::Profile::Console).await
    }

    /// Opens the ledger for `settle serve`: many consoles on one pool.
    pub async fn open_server(url: &str, config: Config) -> Result<Ledger> {
        Ledger::open_with(url, config, store::Profile::Server).await
    }

    async fn open_with(url: &str, config: Config, profile: store::Profile) -> Result<Ledger> {
        let store = Store::open_with(url, profile).await?;
        Ok(Ledger {
            store,
            redactor: Arc::new(config.redactor()),
            scrubbers: Arc::default(),
            config: Arc::new(config),
            clock: Arc::new(Utc::now),
            session: None,
            scope: None,
        })
    }

    /// This ledger as a session of `settle serve` acting for `who` (manual: Running settle for a team): the rules enforce
    /// their role, actions must name them, and every event of theirs holds their key's
    /// fingerprint.
    pub fn for_session(&self, who: crate::domain::Identity) -> Ledger {
        Ledger {
            session: Some(Arc::new(who)),
            ..self.clone()
        }
    }

    /// What the actor of this handle may do: a session's role, else `lead` (manual: Running settle for a team: whoever
    /// holds the database credentials).
    pub fn role(&self) -> crate::domain::Role {
        self.session
            .as_ref()
            .map_or(crate::domain::Role::Lead, |s| s.role)
    }

    /// Replaces the clock (the demo builds a week of history; tests move time).
    pub fn with_clock(
        mut self,
        clock: impl Fn() -> DateTime<Utc> + Send + Sync + 'static,
    ) -> Ledger {
        self.clock = Arc::new(clock);
        self
    }

    pub fn now(&self) -> DateTime<Utc> {
        (self.clock)()
    }

    pub fn config(&self) -> &Config {
        &self.config
    }

    /// The database URL with any password masked.
    pub fn database(&self) -> &str {
        self.store.shown_url()
    }

    pub fn backend(&self) -> store::Backend {
        self.store.backend()
    }

    pub async fn close(&self) {
        self.store.close().await;
    }

    /// Records an attempt's outcome (`settle attempt`, a JSON line, or the dispatcher).
    pub async fn report_attempt(&self, report: &AttemptReport, actor: &str) -> Result<Applied> {
        check_report(report)?;
        check_name("actor", actor, false)?;
        self.act(&report.key, actor, Ask::Attempt(report)).await
    }

    /// Settles an unknown outcome by what the destination's lookup said (actor `settle`): found
    /// or absent; no answer leaves it unknown, with the reason said.
    pub async fn lookup(&self, key: &str, answer: crate::domain::LookupAnswer) -> Result<Applied> {
        validate_key(key).map_err(Error::Invalid)?;
        self.act(key, SYSTEM_ACTOR, Ask::Cmd(Command::Lookup { answer }))
            .await
    }

    /// A staff action by `actor`: claim, release, reconcile, retry, close or note.
    pub async fn staff(&self, key: &str, actor: &str, action: StaffAction) -> Result<Applied> {
        validate_key(key).map_err(Error::Invalid)?;
        self.check_staff_action(key, actor, &action).await?;
        let cmd = Command::Staff(action);
        self.act(key, actor, Ask::Cmd(cmd)).await
    }

    async fn act(&self, key: &str, actor: &str, ask: Ask<'_>) -> Result<Applied> {
        let applied = store::in_tx!(self.store, |tx| self.act_in(tx, key, actor, &ask).await)?;
        if applied.to != applied.from && applied.to.is_exception() {
            self.check_threshold(&applied.workflow).await?;
        }
        Ok(applied)
    }

    /// One change inside a transaction: a batch of one (hold, judge, compare-and-set, audit).
    async fn act_in(
        &self,
        tx: &mut Tx,
        key: &str,
        actor: &str,
        ask: &Ask<'_>,
    ) -> Result<Tried<Applied>> {
        let mut batch = Batch::hold(tx, &[key]).await?;
        match batch.judge(self, tx, key, actor, ask, None).await? {
            Decided::Unchanged(a) => Ok(Tried::Done(a)),
            Decided::Change(c) => {
                let applied = c.applied.clone();
                batch.take(c);
                Ok(match batch.write(self, tx, actor).await? {
                    Some(_) => Tried::Done(applied),
                    None => Tried::Raced,
                })
            }
        }
    }

    /// Sweeps attempts that outlived their timeout to `unknown` and applies the stopping thresholds.
    /// Returns how many attempts were swept.
    pub async fn sweep(&self) -> Result<usize> {
        self.sweep_sparing(&|_| false).await
    }

    /// [`Ledger::sweep`], leaving alone the operations `spare` names: a running dispatcher's own
    /// attempts, whose answers it is waiting for or holds.
    pub async fn sweep_sparing(&self, spare: &(dyn Fn(&str) -> bool + Sync)) -> Result<usize> {
        let keys = self.store.stuck_keys(self.now(), 100_000).await?;
        let mut swept = 0;
        for key in keys.into_iter().filter(|k| !spare(k)) {
            match self.act(&key, SYSTEM_ACTOR, Ask::Cmd(Command::Sweep)).await {
                Ok(a) if a.kind.is_some() => swept += 1,
                Ok(_) | Err(Error::Refused(_)) | Err(Error::NotFound(_)) => {}
                Err(e) => return Err(e),
            }
        }
        let workflows: Vec<String> = self.config.workflows.keys().cloned().collect();
        for w in workflows {
            self.check_threshold(&w).await?;
        }
        Ok(swept)
    }

    /// Raw row counts, for tests and the benchmark: (operations, attempts, events).
    pub async fn counts(&self) -> Result<(i64, i64, i64)> {
        self.store.count_rows().await
    }
}

/// Runs `body` with a ledger on a fresh SQLite file, on a runtime of its own: the unit tests'
/// scratch ledger.
#[cfg(test)]
pub(crate) fn with_scratch_ledger<F: std::future::Future<Output = ()>>(
    body: impl FnOnce(Ledger) -> F,
) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let dir = tempfile::tempdir().unwrap();
        let url = format!("sqlite://{}", dir.path().join("t.db").display());
        body(Ledger::open(&url, crate::Config::default()).await.unwrap()).await;
    });
}
