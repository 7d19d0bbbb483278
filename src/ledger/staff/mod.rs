//! A person's actions (manual: Staff actions): on one operation or many at once, on a run as a
//! whole, pausing and resuming, revealing a redacted field. Each is checked here (who acts, their
//! role, their texts) and written through the write engine like every other write.

mod bulk;
mod correct;
mod one;
mod pauses;
pub(super) mod reveal;
mod runs;

pub use bulk::{BulkPreview, BulkReport};
pub use correct::{CorrectionLine, CorrectionPreview, FieldChange};
pub use one::Staff;
pub use reveal::redacted_paths;
