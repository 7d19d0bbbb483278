//! The rules of the ledger as plain functions over plain data: no IO, no async.
//!
//! Everything here is tested without a database or a terminal; the `Ledger` applies these rules and
//! the store only persists what they decide.

pub mod activity_filter;
mod collect;
pub mod edit;
pub mod escapes;
mod field_path;
pub mod filter;
pub mod fingerprint;
pub mod form;
pub mod key;
pub mod lookup;
pub mod mask;
pub mod names;
pub mod next_step;
pub mod patterns;
pub mod payload;
pub mod policy;
pub mod redact;
pub mod role;
pub mod run;
pub mod run_action;
pub mod run_filter;
pub mod safe_json;
pub mod state;
pub mod time;
pub mod transition;
pub mod url;

pub use fingerprint::fingerprint;
pub use key::{validate_key, validate_run};
pub use lookup::LookupAnswer;
pub use names::{validate_name, validate_op_name, validate_operator};
pub use next_step::{NextStep, safe_next_step};
pub use policy::{DestinationPolicy, RetryPolicy};
pub use redact::{Redactor, escape_text};
pub use role::{Identity, Role};
pub use state::{Outcome, Resolution, State};
pub use time::{format_age, parse_duration};
pub use transition::{
    AttemptEffect, Claim, Command, Ctx, Offer, Offers, Op, Refusal, StaffAction, Transition, Why,
    apply, offered, staff_check,
};
