//! The readers: what a person, a report or an automation reads of the ledger (pages of the
//! list, one operation, its runs, the stats, the review), always redacted. A [`Reader`] writes
//! nothing: it is the ledger's handle seen for reading (`Ledger::read`).
//!
//! Rooms: `reader.rs` the handle, `list.rs` pages of the list, `groups.rs` the exceptions by group,
//! `matching.rs` the keys a filter matches and how many, `view.rs` one operation redacted,
//! `watch.rs` the stats and what changed, `review.rs`, `runs.rs` and `run_review.rs` runs,
//! `stalled.rs` view 1's stalled runs.

mod groups;
mod list;
mod matching;
mod reader;
mod review;
mod run_review;
mod runs;
mod stalled;
mod view;
mod watch;

pub use groups::ExceptionGroup;
pub use list::{ListFilter, Page, Position, Scope, Sort};
pub use reader::Reader;
pub use review::{
    AGE_BUCKETS, AgeBucket, DayCount, Duplicates, GroupReview, MAX_WINDOW as MAX_REVIEW_WINDOW,
    Review, ReviewScope,
};
pub use run_review::{RunsReview, StepTransition};
pub use runs::{RunSummary, RunView};
pub use watch::ChangeListener;
