//! settle: an operations ledger and exception-queue console for automations that may have done
//! something twice, or not at all.
//!
//! Automations record each intended operation under a stable key ([`Ledger::record`]) and each
//! attempt's outcome ([`Ledger::report_attempt`]); staff settle what automatic recovery cannot
//! ([`Ledger::staff`]). Readers only ever get redacted views.
#![forbid(unsafe_code)]

/// `println!` that does not panic when stdout is gone: a reader that went away (`settle list |
/// head`) ends settle quietly, as it would any Unix tool (exit 141, 128 + SIGPIPE).
#[macro_export]
macro_rules! say {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        if let Err(e) = writeln!($crate::out::stdout(), $($arg)*) {
            $crate::stdout_failed(&e);
        }
    }};
}

/// `eprintln!` that never panics (a closed stderr is no reason to crash).
#[macro_export]
macro_rules! tell {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!($crate::out::stderr(), $($arg)*);
    }};
}

/// What a failed write to stdout means: a closed pipe ends the process quietly with 141; any
/// other failure is left to the caller's next write.
pub fn stdout_failed(e: &std::io::Error) {
    if e.kind() == std::io::ErrorKind::BrokenPipe && !out::captured() {
        std::process::exit(141);
    }
}

pub mod api;
pub mod cli;
pub mod config;
pub mod console;
pub mod counters;
pub mod dispatch;
pub mod domain;
pub mod error;
pub mod ledger;
pub mod listener;
pub mod logging;
pub mod metrics;
pub mod notify;
pub mod out;
pub mod outbound;
pub mod serve;
pub mod signals;
pub mod store;
pub mod tools;

pub use config::Config;
pub use domain::{Outcome, Resolution, State};
pub use error::{Error, Result};
pub use ledger::{AttemptReport, Intent, Ledger, ListFilter, Recorded, Scope, StaffAction};
