//! JSON out: escapes in stored text stay escaped, and the one-line answers of `--json` steps.

use serde::Serialize;

pub use crate::domain::safe_json::to_json;
use crate::ledger::OperationDetail;

pub fn json<T: Serialize>(value: &T) {
    match to_json(value, true) {
        Ok(text) => say!("{text}"),
        Err(e) => crate::tell!("settle: cannot encode JSON: {e}"),
    }
}

/// What a script following the protocol (manual: The protocol) reads after `record`, `start` or `attempt`
/// with `--json`: whether it may send now, and the attempt to report.
pub fn step(detail: &OperationDetail, attempt: Option<u32>, send: bool) {
    json(
        &detail
            .op
            .step(attempt, send)
            .corrected(detail.corrected_as.as_ref()),
    );
}
