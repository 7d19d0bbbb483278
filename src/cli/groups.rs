//! `settle groups`: the exceptions by group (manual: Owners and notifications), the largest
//! first: how many, the oldest and newest, the owner, the masked reason and the safe next step.

use super::common::invalid;
use super::output;
use crate::domain::escape_text as esc;
use crate::domain::format_age;
use crate::error::Result;
use crate::ledger::{Ledger, ListFilter, Scope};

/// The arguments of `settle groups`.
#[derive(Debug, clap::Args)]
pub struct GroupsArgs {
    /// Only the exceptions this filter matches, e.g. 'dest:crm owner:mine' (mine: the teams of
    /// whoever --as or $SETTLE_OPERATOR names)
    #[arg(long = "where", value_name = "FILTER")]
    pub filter: Option<String>,
    /// An array of groups as JSON
    #[arg(long)]
    pub json: bool,
}

pub(super) async fn groups(
    ledger: &Ledger,
    args: &GroupsArgs,
    operator: &Option<String>,
) -> Result<i32> {
    let viewer = operator.as_deref().unwrap_or("");
    let query = crate::domain::filter::Filter::parse(args.filter.as_deref().unwrap_or(""))
        .map_err(invalid)?;
    let filter = ListFilter {
        query,
        scope: Scope::Exceptions,
        ..Default::default()
    };
    let groups = ledger.read().groups(&filter, viewer).await?;
    if args.json {
        output::json(&groups);
        return Ok(0);
    }
    if groups.is_empty() {
        crate::say!("no exceptions");
        return Ok(0);
    }
    let age = |s: i64| format_age(chrono::TimeDelta::seconds(s));
    for g in &groups {
        crate::say!(
            "{:>6}  {:<9} {} → {} · {} · oldest {}, newest {}",
            g.count,
            g.state.as_str(),
            esc(&g.workflow),
            esc(&g.destination),
            g.owner.as_deref().map_or("no owner".into(), esc),
            age(g.oldest_seconds),
            age(g.newest_seconds)
        );
        if !g.reason.is_empty() {
            crate::say!("        {}", esc(&g.reason));
        }
        crate::say!("        next: {}", esc(&g.next_step));
    }
    let total: i64 = groups.iter().map(|g| g.count).sum();
    crate::say!("{total} exceptions in {} groups", groups.len());
    Ok(0)
}
