//! Retention: the prune of old terminal operations, their archive, and the answers a pruned key
//! still gives.
//!
//! Rooms: `prune.rs` the handle, the prune and a pruned key's answers, `archive.rs` the archive
//! (JSON lines or zstd frames, its torn tail cut).

mod archive;
mod prune;

pub use prune::{AUTO_PRUNE_EVERY, PRUNE_BATCH, PruneOptions, PruneReport, Retention};
