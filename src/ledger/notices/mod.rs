//! Telling the owners (manual: Owners and notifications): the inbox folded into messages
//! (`fold.rs`), what else arrives to be told, aging and pauses (`arrivals.rs`), what a message
//! says (`message.rs`), and their delivery (`outbox.rs`).

mod arrivals;
mod fold;
mod message;
mod outbox;

pub use message::{Medium, Message, shown_in};
pub use outbox::{Delivery, Notices, Outgoing, Sent};
