//! What a staff command acts on: one key, many keys, or a filter (manual: Many at once); what a pause names.

use clap::Args;

/// What `pause`/`resume` act on: a workflow, or with `--destination` a destination.
#[derive(Args, Debug)]
pub struct PauseTarget {
    /// The workflow
    #[arg(
        required_unless_present = "destination",
        conflicts_with = "destination"
    )]
    pub workflow: Option<String>,
    /// A destination instead of a workflow
    #[arg(long, value_name = "D")]
    pub destination: Option<String>,
}

impl PauseTarget {
    pub fn get(&self) -> (crate::ledger::Pausable, &str) {
        match (&self.workflow, &self.destination) {
            (_, Some(d)) => (crate::ledger::Pausable::Destination, d),
            (Some(w), None) => (crate::ledger::Pausable::Workflow, w),
            // clap requires one of them
            (None, None) => (crate::ledger::Pausable::Workflow, ""),
        }
    }
}

/// The operations a staff action is for: keys, or every operation a filter matches.
#[derive(Args, Debug)]
pub struct Many {
    /// The operations' keys
    #[arg(
        required_unless_present = "filter",
        conflicts_with = "filter",
        value_name = "KEY"
    )]
    pub keys: Vec<String>,
    /// Every operation the filter matches, e.g. 'dest:sms state:unknown'
    #[arg(long = "where", value_name = "FILTER")]
    pub filter: Option<String>,
    /// Print what it would do (grouped by reason) and change nothing
    #[arg(long)]
    pub dry_run: bool,
    /// Go on without asking (needed without a terminal)
    #[arg(long)]
    pub yes: bool,
    /// The preview or the summary as one JSON document
    #[arg(long)]
    pub json: bool,
}

impl Many {
    /// One key, asked plainly: the single action's path and output.
    pub fn single(&self) -> Option<&str> {
        match (
            &self.filter,
            self.keys.as_slice(),
            self.dry_run || self.json,
        ) {
            (None, [key], false) => Some(key),
            _ => None,
        }
    }
}
