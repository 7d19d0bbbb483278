//! Retention: the prune of old terminal operations, their archive, and the answers a pruned key
//! still gives.

mod archive;
mod prune;

pub use prune::{AUTO_PRUNE_EVERY, PRUNE_BATCH, PruneOptions, PruneReport, Retention};
