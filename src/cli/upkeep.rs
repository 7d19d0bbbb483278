//! The commands that keep the ledger and do the dispatcher's work by hand: init, dispatch,
//! lookup, sweep and prune.

use super::args::Cmd;
use super::common::required;
use super::{lookup, output};
use crate::error::Result;
use crate::ledger::Ledger;

/// `settle init`, `dispatch`, `lookup` and `sweep`.
pub(super) async fn upkeep(
    ledger: &Ledger,
    command: &Cmd,
    operator: &Option<String>,
) -> Result<i32> {
    match command {
        Cmd::Init => {
            say!(
                "{} is ready (schema version {})",
                ledger.database(),
                crate::store::SCHEMA_VERSION
            );
        }
        Cmd::Dispatch {
            concurrency,
            until_settled,
        } => {
            let options = crate::dispatch::Options {
                concurrency: *concurrency,
                until_settled: *until_settled,
                ..Default::default()
            };
            let t = crate::dispatch::run(ledger.clone(), options).await?;
            say!(
                "dispatched {} attempt(s), {} retries, {} succeeded, {} settled by lookup, {} waited for the retry budget",
                t.attempts,
                t.retries,
                t.succeeded,
                t.looked_up,
                t.budget_waits
            );
        }
        Cmd::Lookup { many, rate } => {
            return lookup::run(ledger, many, rate.as_deref(), required(operator)?).await;
        }
        Cmd::Sweep => {
            let n = ledger.sweep().await?;
            say!(
                "swept {n} interrupted attempt(s): to retry_wait where the destination deduplicates, else unknown"
            );
        }
        _ => unreachable!("only its own commands come here"),
    }
    Ok(0)
}

/// `settle prune`: what `[retention]` lets go, removed (or counted) as the operator.
pub(super) async fn prune(
    ledger: &Ledger,
    command: &Cmd,
    operator: &Option<String>,
) -> Result<i32> {
    let Cmd::Prune {
        dry_run,
        archive,
        json,
    } = command
    else {
        unreachable!("only prune comes here")
    };
    let options = crate::ledger::PruneOptions {
        dry_run: *dry_run,
        archive: archive.clone(),
    };
    let report = ledger.prune(required(operator)?, &options).await?;
    match *json {
        true => output::json(&report),
        false => output::pruned(&report),
    }
    Ok(0)
}
