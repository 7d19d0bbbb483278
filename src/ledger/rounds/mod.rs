//! The dispatcher's rounds: the outcomes of finished attempts and the starts of new ones, many
//! operations in one transaction (group commit), each still its own compare-and-set with its own
//! audit event. The destinations' retry budgets (manual: Automatic retries) live in the database, so every
//! dispatcher draws on the same ones.
//!
//! Rooms: `round.rs` the handle and a round, `steps.rs` its steps, `health.rs` what the
//! destinations' breakers and paces let it start and what its answers tell them, `work.rs` what it
//! decided so far, `types.rs` what it hands back, `dispatcher.rs` what a dispatcher asks between
//! rounds.

mod dispatcher;
mod health;
mod round;
mod steps;
mod types;
mod work;

pub use dispatcher::Background;
pub use round::Rounds;
pub use types::{Finished, Round, StartedOp, StartedRows};
