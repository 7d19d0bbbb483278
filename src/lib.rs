//! settle: an operations ledger and exception-queue console for automations that may have done
//! something twice, or not at all.
#![forbid(unsafe_code)]

pub mod domain;
