//! The rules of the ledger as plain functions over plain data: no IO, no async.
//!
//! Everything here is tested without a database or a terminal; the `Ledger` applies these rules and
//! the store only persists what they decide.
//!
//! Rooms: States (`state.rs`) and the transitions (`transition/`); a correction's edits of a
//! payload (`edit.rs`); the safe next step (`next_step.rs`); runs (`run.rs`, `run_action.rs`,
//! `run_filter.rs`); retry policy (`policy.rs`); keys and names (`key.rs`, `names.rs`);
//! fingerprints (`fingerprint.rs`); payloads and their canonical JSON (`payload.rs`,
//! `safe_json.rs`, `form.rs` a form body read); durations and ages (`time.rs`); escapes for the
//! terminal (`escapes.rs`); the filter (`filter.rs`; the Activity view's `activity_filter.rs`); a
//! reason masked (`mask.rs`) and an exception's group (`group.rs`); redaction (`redact.rs`,
//! `patterns.rs`, `field_path.rs`, `collect.rs`) and a URL fit to print (`url.rs`); roles
//! (`role.rs`); a lookup's answer (`lookup.rs`); a destination's breaker and pace (`breaker.rs`,
//! its rules tried in `breaker_tests.rs`) and what an answer says of its health (`signal.rs`).

pub mod activity_filter;
pub mod breaker;
mod collect;
pub mod edit;
pub mod escapes;
mod field_path;
pub mod filter;
pub mod fingerprint;
pub mod form;
pub mod group;
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
pub mod signal;
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
    AttemptEffect, Claim, Command, Ctx, Offer, Offers, Op, Refusal, Restore, StaffAction,
    Transition, Why, apply, offered, staff_check,
};
