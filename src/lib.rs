//! settle: an operations ledger and exception-queue console for automations that may have done
//! something twice, or not at all.
//!
//! Automations record each intended operation under a stable key ([`Ledger::record`]) and each
//! attempt's outcome ([`Ledger::report_attempt`]); staff settle what automatic recovery cannot
//! ([`Ledger::staff`]). Readers only ever get redacted views.
#![forbid(unsafe_code)]

/// `println!` that does not panic when stdout is gone (`settle list | head`).
#[macro_export]
macro_rules! say {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stdout(), $($arg)*);
    }};
}

pub mod cli;
pub mod config;
pub mod console;
pub mod demo;
pub mod dispatch;
pub mod domain;
pub mod error;
pub mod ledger;
pub mod logging;
pub mod sim;
pub mod store;

pub use config::Config;
pub use domain::{Outcome, Resolution, State};
pub use error::{Error, Result};
pub use ledger::{AttemptReport, Intent, Ledger, ListFilter, Recorded, Scope, StaffAction};
