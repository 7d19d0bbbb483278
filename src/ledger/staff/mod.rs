//! A person's actions (manual: Staff actions): on one operation or many at once, on a run as a
//! whole, pausing and resuming, revealing a redacted field. Each is checked here (who acts, their
//! role, their texts) and written through the write engine like every other write.
//!
//! Rooms: `one.rs` the handle and one action, `bulk.rs` many at once with a frozen preview,
//! `canary.rs` a bulk retry's one item first,
//! `correct.rs` what a correction would change, `pauses.rs`, `runs.rs` a run as a whole,
//! `reveal.rs` a lead's audited reveal, `undo.rs` a person's action taken back (`undo_pauses.rs` a pause or a resume, `undo_report.rs` its answer).

mod bulk;
mod canary;
mod correct;
mod one;
mod pauses;
pub(super) mod reveal;
mod runs;
mod undo;
mod undo_pauses;
mod undo_report;

pub use bulk::{BulkPreview, BulkReport, Canary};
pub use correct::{CorrectionLine, CorrectionPreview, FieldChange};
pub use one::Staff;
pub use reveal::redacted_paths;
pub use undo::UndoOf;
pub use undo_report::UndoReport;
