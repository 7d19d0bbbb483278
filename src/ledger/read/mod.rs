//! The readers: what a person, a report or an automation reads of the ledger (pages of the
//! list, one operation, its runs, the stats, the review), always redacted. A [`Reader`] writes
//! nothing: it is the ledger's handle seen for reading (`Ledger::read`).

mod groups;
mod list;
mod matching;
mod reader;
mod review;
mod run_review;
mod runs;
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
