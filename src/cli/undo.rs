//! `settle undo`: a person's action taken back (manual: Taking an action back).

use super::common::required;
use super::output;
use crate::error::Result;
use crate::ledger::{Ledger, UndoOf};

/// The arguments of `settle undo`.
#[derive(Debug, clap::Args)]
pub struct UndoArgs {
    /// The action's id, as its answer, `settle show` or the console gave it
    #[arg(required_unless_present = "last", conflicts_with = "last")]
    pub id: Option<String>,
    /// Your own newest action
    #[arg(long)]
    pub last: bool,
    /// Why it is taken back (kept in the history)
    #[arg(long)]
    pub note: Option<String>,
    /// Say what would be taken back and what not, changing nothing
    #[arg(long)]
    pub dry_run: bool,
    /// The answer as one JSON document
    #[arg(long)]
    pub json: bool,
}

/// `settle undo ID|--last`: each item the action changed that nothing has changed since is as
/// it was before it; the rest is listed, each with who or what changed it. Exit 3 when any item
/// was left as it is.
pub(super) async fn undo(
    ledger: &Ledger,
    args: &UndoArgs,
    operator: &Option<String>,
) -> Result<i32> {
    let actor = required(operator)?;
    let which = match &args.id {
        Some(id) => UndoOf::Id(id),
        None => UndoOf::Last,
    };
    let staff = ledger.staff();
    let report = match args.dry_run {
        true => staff.undo_preview(which, actor).await?,
        false => staff.undo(which, actor, args.note.as_deref()).await?,
    };
    if args.json {
        output::json(&report);
    } else {
        say!("{}", output::esc(&report.summary(!args.dry_run)));
        for (_, why) in &report.refused {
            say!("  left as it is: {}", output::esc(why));
        }
    }
    Ok(if report.refused.is_empty() { 0 } else { 3 })
}
