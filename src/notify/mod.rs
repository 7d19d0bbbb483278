//! Telling people (manual: Owners and notifications): the channels' formats and their sends
//! (`channels.rs`), and the sender every `dispatch` and `serve` runs (`sender.rs`). What to tell
//! and when is the ledger's (`Ledger::notices`).

mod channels;
mod sender;

pub use channels::{give_variable, send};
pub use sender::{Sending, missing_variables, start, turn};
