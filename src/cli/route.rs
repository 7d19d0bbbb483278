//! One command, on an open ledger: routed to the handler of its group.

use super::args::Cmd;
use super::common::required;
use super::{correct, groups, notices, reads, staff, undo, upkeep, writes};
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
        | Cmd::Sim(_)
        | Cmd::Serve(_)
        | Cmd::Token { .. }
        | Cmd::Completions { .. }
        | Cmd::Man { .. } => Err(crate::error::Error::Invalid(
            "this command runs without a ledger: it is not run on an open one".into(),
        )),
        Cmd::Record(a) => writes::record(ledger, a, operator).await,
        Cmd::Start(a) => writes::start(ledger, a, operator).await,
        Cmd::Attempt(a) => writes::attempt(ledger, a, operator).await,
        Cmd::Ingest(a) => writes::ingest(ledger, &a.file, required(operator)?).await,
        Cmd::Claim(a) => staff::claim(ledger, a, operator).await,
        Cmd::Release(a) => staff::release(ledger, a, operator).await,
        Cmd::Reconcile(a) => staff::reconcile(ledger, a, operator).await,
        Cmd::Retry(a) => staff::retry(ledger, a, operator).await,
        Cmd::Close(a) => staff::close(ledger, a, operator).await,
        Cmd::Correct(a) => correct::correct(ledger, a, operator).await,
        Cmd::Note(a) => staff::note(ledger, a, operator).await,
        Cmd::Undo(a) => undo::undo(ledger, a, operator).await,
        Cmd::Pause(a) => staff::pause(ledger, a, operator).await,
        Cmd::Resume(a) => staff::resume(ledger, a, operator).await,
        Cmd::Breaker(a) => staff::breaker(ledger, a, operator).await,
        Cmd::List(a) => reads::list(ledger, a, operator).await,
        Cmd::Show(a) => reads::show(ledger, a, operator).await,
        Cmd::Stats(a) => reads::stats(ledger, a).await,
        Cmd::Groups(a) => groups::groups(ledger, a, operator).await,
        Cmd::Notify { what } => notices::notify(ledger, what).await,
        Cmd::Notifications(a) => notices::notifications(ledger, a).await,
        Cmd::Run(a) => reads::run(ledger, a, operator).await,
        Cmd::Runs(a) => reads::runs(ledger, a, operator).await,
        Cmd::Report(a) => reads::report(ledger, a).await,
        Cmd::Init => upkeep::init(ledger),
        Cmd::Dispatch(a) => upkeep::dispatch(ledger, a).await,
        Cmd::Lookup(a) => upkeep::lookup(ledger, a, operator).await,
        Cmd::Sweep => upkeep::sweep(ledger).await,
        Cmd::Prune(a) => upkeep::prune(ledger, a, operator).await,
    }
}
