//! The `Ledger`: every operation a user or automation can ask for, each one atomic and audited.
//!
//! The rules come from `domain`; this module loads what they need inside one transaction, asks
//! them, and writes the result with a compare-and-set on the operation's `version` together with
//! its one audit event. Readers only ever get redacted views.
//!
//! Rooms: `handle.rs` the handle, its clock and who acts; `faces.rs` its faces by who is served;
//! `terms.rs` what the protocol is said in; `engine.rs` and `change.rs` the write engine and its
//! judging; `single.rs` one change by one caller; `record.rs`, `start.rs` an automation's writes;
//! `budgets.rs` the retry budgets, `health.rs` the destinations' breakers outside a round, `guards.rs` a round's stopping thresholds, `workflows.rs`
//! pauses, `run_rows.rs` the runs' rows, `rates.rs` a token's shared rate, `checks.rs` names, roles
//! and scopes, `views.rs` what readers are handed, `scrubbers.rs` an operation's texts scrubbed;
//! the folders `group/`, `ingest/`, `staff/`, `read/`, `rounds/`, `notices/`, `retention/`.

mod budgets;
mod change;
mod checks;
mod engine;
mod faces;
mod group;
mod guards;
mod handle;
mod health;
mod ingest;
mod notices;
mod rates;
mod read;
mod record;
mod retention;
mod rounds;
mod run_rows;
mod scrubbers;
mod single;
mod staff;
mod start;
mod terms;
mod views;
mod workflows;

pub use crate::domain::StaffAction;
pub use crate::store::{Cursor, Pausable};
pub use group::{Answered, GROUP as WRITE_GROUP, Queued, Write, Writer, Written};
pub use handle::Ledger;
pub use health::BreakerView;
pub use ingest::{IngestProblem, IngestReport};
pub use notices::{Delivery, Medium, Message, Notices, Outgoing, Sent, shown_in};
pub use read::{
    AGE_BUCKETS, AgeBucket, ChangeListener, DayCount, Duplicates, ExceptionGroup, GroupReview,
    ListFilter, MAX_REVIEW_WINDOW, Page, Position, Reader, Review, ReviewScope, RunSummary,
    RunView, RunsReview, Scope, Sort, StepTransition,
};
pub use retention::{AUTO_PRUNE_EVERY, PRUNE_BATCH, PruneOptions, PruneReport, Retention};
pub use rounds::{Background, Finished, Round, Rounds, StartedOp, StartedRows};
pub use staff::{
    BulkPreview, BulkReport, Canary, CorrectionLine, CorrectionPreview, FieldChange, Staff, UndoOf,
    UndoReport, redacted_paths,
};
pub(crate) use terms::KnownAttempts;
pub use terms::{AttemptReport, Intent, SYSTEM_ACTOR};
pub use views::{
    Applied, AttemptView, ChainEnd, DispatcherSeen, EventView, OperationDetail, OperationView,
    PausedWorkflow, Recorded, Stats, StepView,
};

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
