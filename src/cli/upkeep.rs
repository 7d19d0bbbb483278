//! The commands that keep the ledger and do the dispatcher's work by hand: init, dispatch,
//! lookup, sweep and prune.

use std::path::PathBuf;

use super::common::required;
use super::targets::Many;
use super::{lookup, output};
use crate::error::Result;
use crate::ledger::Ledger;

/// `settle init`: the schema made or migrated (opening the ledger did it), and said.
pub(super) fn init(ledger: &Ledger) -> Result<i32> {
    say!(
        "{} is ready (schema version {})",
        ledger.database(),
        crate::store::SCHEMA_VERSION
    );
    Ok(0)
}

/// `settle dispatch`: due operations sent until Ctrl-C, or until nothing is left to move.
pub(super) async fn dispatch(ledger: &Ledger, args: &DispatchArgs) -> Result<i32> {
    let options = crate::dispatch::Options {
        concurrency: args.concurrency,
        until_settled: args.until_settled,
        ..Default::default()
    };
    let serving = match &args.metrics {
        Some(at) => {
            let door = crate::listener::Doors::for_this_process(&ledger.config().limits).metrics;
            Some(crate::metrics::serve_at(ledger, at, None, "settle dispatch", door).await?)
        }
        None => None,
    };
    let sending = crate::notify::start(
        ledger,
        super::serving::sender_name("dispatch"),
        std::time::Duration::from_secs(1),
    );
    let t = crate::dispatch::run(ledger.clone(), options).await;
    if let Some(s) = sending {
        s.stop().await;
    }
    let t = t?;
    drop(serving);
    say!(
        "dispatched {} attempt(s), {} retries, {} succeeded, {} settled by lookup, {} waited for the retry budget",
        t.attempts,
        t.retries,
        t.succeeded,
        t.looked_up,
        t.budget_waits
    );
    Ok(0)
}

/// `settle lookup`: ask the destinations now, then reconcile by their answers.
pub(super) async fn lookup(
    ledger: &Ledger,
    args: &LookupArgs,
    operator: &Option<String>,
) -> Result<i32> {
    let actor = required(operator)?;
    lookup::run(ledger, &args.many, args.rate.as_deref(), actor).await
}

/// `settle sweep`: attempts past their timeout, settled by the rule of any unknown outcome.
pub(super) async fn sweep(ledger: &Ledger) -> Result<i32> {
    let n = ledger.rounds().sweep().await?;
    say!(
        "swept {n} interrupted attempt(s): to retry_wait where the destination deduplicates, else unknown"
    );
    Ok(0)
}

/// `settle prune`: what `[retention]` lets go, removed (or counted) as the operator.
pub(super) async fn prune(
    ledger: &Ledger,
    args: &PruneArgs,
    operator: &Option<String>,
) -> Result<i32> {
    let options = crate::ledger::PruneOptions {
        dry_run: args.dry_run,
        archive: args.archive.clone(),
    };
    let report = ledger
        .retention()
        .prune(required(operator)?, &options)
        .await?;
    match args.json {
        true => output::json(&report),
        false => output::pruned(&report),
    }
    Ok(0)
}

/// The arguments of `settle dispatch`.
#[derive(Debug, clap::Args)]
pub struct DispatchArgs {
    /// Requests in flight at once
    #[arg(long, default_value_t = 16, value_name = "N")]
    pub concurrency: usize,
    /// Stop when nothing automation may move is left
    #[arg(long)]
    pub until_settled: bool,
    /// Serve Prometheus metrics at http://ADDR/metrics and /healthz while it runs
    #[arg(long, value_name = "ADDR")]
    pub metrics: Option<String>,
}

/// The arguments of `settle lookup`.
#[derive(Debug, clap::Args)]
pub struct LookupArgs {
    #[command(flatten)]
    pub many: Many,
    /// Space the lookups, e.g. 10/s (an incident's 400 lookups do not flood the destination)
    #[arg(long, value_name = "N/s")]
    pub rate: Option<String>,
}

/// The arguments of `settle prune`.
#[derive(Debug, clap::Args)]
pub struct PruneArgs {
    /// Count what would be removed; remove nothing
    #[arg(long)]
    pub dry_run: bool,
    /// First append every removed operation here, a `show --json` document a line
    #[arg(long, value_name = "FILE")]
    pub archive: Option<PathBuf>,
    /// Answer as one JSON document: the cutoffs, the counts pruned, archived and freed
    #[arg(long)]
    pub json: bool,
}
