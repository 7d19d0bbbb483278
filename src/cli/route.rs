//! One command, on an open ledger: routed to the handler of its group.

use super::args::Cmd;
use super::{reads, staff, upkeep, writes};
use crate::error::Result;
use crate::ledger::Ledger;

/// Runs `command` as `operator` (readers see claims as theirs, or nobody's; writers must name
/// one); the exit code.
pub(crate) async fn route(
    ledger: &Ledger,
    command: &Cmd,
    operator: &Option<String>,
) -> Result<i32> {
    match command {
        Cmd::Demo { .. }
        | Cmd::Sim { .. }
        | Cmd::Serve(_)
        | Cmd::Token { .. }
        | Cmd::Completions { .. }
        | Cmd::Man { .. } => {
            unreachable!("handled before the database is opened")
        }
        Cmd::Record { .. } => writes::record(ledger, command, operator).await,
        Cmd::Start { .. } | Cmd::Attempt { .. } | Cmd::Ingest { .. } => {
            writes::write(ledger, command, operator).await
        }
        Cmd::Claim { .. } | Cmd::Release { .. } | Cmd::Reconcile { .. } | Cmd::Retry { .. } => {
            staff::staff(ledger, command, operator).await
        }
        Cmd::Close { .. } | Cmd::Note { .. } | Cmd::Pause { .. } | Cmd::Resume { .. } => {
            staff::close_or_mark(ledger, command, operator).await
        }
        Cmd::List { .. }
        | Cmd::Show { .. }
        | Cmd::Stats { .. }
        | Cmd::Run { .. }
        | Cmd::Runs { .. } => reads::read(ledger, command, operator).await,
        Cmd::Report {
            since,
            workflow,
            json,
        } => reads::report(ledger, since, workflow, *json).await,
        Cmd::Init | Cmd::Dispatch { .. } | Cmd::Lookup { .. } | Cmd::Sweep => {
            upkeep::upkeep(ledger, command, operator).await
        }
        Cmd::Prune { .. } => upkeep::prune(ledger, command, operator).await,
    }
}
