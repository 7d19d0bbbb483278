//! The staff's actions on the command line: claim, release, reconcile, retry, close, note, pause
//! and resume, on one operation or many (manual: Many at once).

use std::path::PathBuf;

use super::bulk::{Confirm, act_on, reconcile_from};
use super::common::{invalid, parse_rate, required};
use super::output;
use super::targets::{Many, PauseTarget};
use crate::domain::Resolution;
use crate::error::Result;
use crate::ledger::{Ledger, StaffAction};

/// `settle claim`: one or many, a lead's take-over with a reason.
pub(super) async fn claim(
    ledger: &Ledger,
    args: &ClaimArgs,
    operator: &Option<String>,
) -> Result<i32> {
    let viewer = operator.as_deref().unwrap_or("");
    let force_reason = if args.force {
        args.reason.clone()
    } else {
        None
    };
    let what = format!("claimed by {}", output::esc(viewer));
    let action = StaffAction::Claim { force_reason };
    let actor = required(operator)?;
    act_on(
        ledger,
        &args.many,
        action,
        actor,
        &what,
        "claim",
        (None, false),
    )
    .await
}

/// `settle release`: one or many.
pub(super) async fn release(
    ledger: &Ledger,
    args: &ReleaseArgs,
    operator: &Option<String>,
) -> Result<i32> {
    let actor = required(operator)?;
    act_on(
        ledger,
        &args.many,
        StaffAction::Release,
        actor,
        "released",
        "release",
        (None, false),
    )
    .await
}

/// `settle reconcile`: one key found or absent, or many from the destination's own records.
pub(super) async fn reconcile(
    ledger: &Ledger,
    args: &ReconcileArgs,
    operator: &Option<String>,
) -> Result<i32> {
    let ReconcileArgs {
        key,
        found,
        absent: _,
        note,
        from,
        dry_run,
        yes,
        json,
    } = args;
    if let Some(file) = from {
        let how = Confirm {
            dry_run: *dry_run,
            yes: *yes,
            json: *json,
            canary: false,
        };
        return reconcile_from(ledger, file, how, required(operator)?).await;
    }
    let key = key.as_deref().unwrap_or_default();
    let action = match found {
        Some(reference) => StaffAction::ReconcileFound {
            reference: reference.clone(),
            note: note.clone(),
        },
        None => StaffAction::ReconcileAbsent { note: note.clone() },
    };
    let a = ledger.staff().act(key, required(operator)?, action).await?;
    output::applied(&a, "reconciled");
    Ok(0)
}

/// `settle retry`: one or many, paced with `--rate`.
pub(super) async fn retry(
    ledger: &Ledger,
    args: &RetryArgs,
    operator: &Option<String>,
) -> Result<i32> {
    let action = StaffAction::Retry {
        note: args.note.clone(),
    };
    let what = "will be retried with the same key";
    let pace = args.rate.as_deref().map(parse_rate).transpose()?;
    let actor = required(operator)?;
    let canary = !args.no_canary;
    act_on(
        ledger,
        &args.many,
        action,
        actor,
        what,
        "retry",
        (pace, canary),
    )
    .await
}

/// `settle close`: one or many, with a resolution and a note.
pub(super) async fn close(
    ledger: &Ledger,
    args: &CloseArgs,
    operator: &Option<String>,
) -> Result<i32> {
    let action = StaffAction::Close {
        resolution: Resolution::parse(&args.resolution).map_err(invalid)?,
        reference: args.reference.clone(),
        superseded_by: args.superseded_by.clone(),
        note: args.note.clone(),
    };
    let actor = required(operator)?;
    act_on(
        ledger,
        &args.many,
        action,
        actor,
        "closed",
        "close",
        (None, false),
    )
    .await
}

/// `settle note KEY TEXT`.
pub(super) async fn note(
    ledger: &Ledger,
    args: &NoteArgs,
    operator: &Option<String>,
) -> Result<i32> {
    let text = StaffAction::Note {
        text: args.text.clone(),
    };
    let a = ledger
        .staff()
        .act(&args.key, required(operator)?, text)
        .await?;
    output::applied(&a, "note added");
    Ok(0)
}

/// `settle pause`: a workflow, or a destination.
pub(super) async fn pause(
    ledger: &Ledger,
    args: &PauseArgs,
    operator: &Option<String>,
) -> Result<i32> {
    let (what, name) = args.what.get();
    let n = output::esc(name);
    let noun = what.noun();
    let actor = required(operator)?;
    if ledger
        .staff()
        .pause_one(what, name, &args.reason, actor)
        .await?
    {
        let id = action_named(ledger, actor).await?;
        say!("{noun} {n} paused: no attempt of it starts until it is resumed{id}");
    } else {
        say!("{noun} {n} was already paused; nothing changed");
    }
    Ok(0)
}

/// ` (action a-...)`: the person's action just taken, to take it back by.
async fn action_named(ledger: &Ledger, actor: &str) -> Result<String> {
    let id = ledger.staff().newest_action(actor).await?;
    Ok(id.map_or(String::new(), |id| {
        format!(" (action {})", output::esc(&id))
    }))
}

/// `settle resume`: a workflow, or a destination.
pub(super) async fn resume(
    ledger: &Ledger,
    args: &ResumeArgs,
    operator: &Option<String>,
) -> Result<i32> {
    let (what, name) = args.what.get();
    let n = output::esc(name);
    let noun = what.noun();
    let actor = required(operator)?;
    if ledger.staff().resume_one(what, name, actor).await? {
        let id = action_named(ledger, actor).await?;
        say!("{noun} {n} resumed{id}");
    } else {
        say!("{noun} {n} was not paused; nothing changed");
    }
    Ok(0)
}

/// `settle breaker open|close DEST --reason TEXT`.
pub(super) async fn breaker(
    ledger: &Ledger,
    args: &BreakerArgs,
    operator: &Option<String>,
) -> Result<i32> {
    let open = args.verb == BreakerVerb::Open;
    let d = output::esc(&args.destination);
    let changed = (ledger.staff())
        .set_breaker(&args.destination, open, &args.reason, required(operator)?)
        .await?;
    match (changed, open) {
        (true, true) => say!(
            "breaker of {d} opened: nothing is sent there, not even a probe, until `settle breaker close {d}`"
        ),
        (true, false) => say!("breaker of {d} closed: sending resumes at its starting pace"),
        (false, true) => say!("breaker of {d} was already held open; nothing changed"),
        (false, false) => say!("breaker of {d} was already closed; nothing changed"),
    }
    Ok(0)
}

/// The arguments of `settle claim`.
#[derive(Debug, clap::Args)]
pub struct ClaimArgs {
    #[command(flatten)]
    pub many: Many,
    /// Take over another operator's live claim (a lead's; needs --reason)
    #[arg(long, requires = "reason")]
    pub force: bool,
    /// Why you take the claim over (audited)
    #[arg(long, value_name = "TEXT")]
    pub reason: Option<String>,
}

/// The arguments of `settle release`.
#[derive(Debug, clap::Args)]
pub struct ReleaseArgs {
    #[command(flatten)]
    pub many: Many,
}

/// The arguments of `settle reconcile`.
#[derive(Debug, clap::Args)]
pub struct ReconcileArgs {
    /// The operation's key
    #[arg(required_unless_present = "from", conflicts_with = "from")]
    pub key: Option<String>,
    /// It was done: the destination's reference for it
    #[arg(
        long,
        value_name = "REF",
        conflicts_with = "absent",
        required_unless_present_any = ["absent", "from"]
    )]
    pub found: Option<String>,
    /// It was not done (confirmed at the destination)
    #[arg(long)]
    pub absent: bool,
    /// What you saw, for the history
    #[arg(long, value_name = "TEXT")]
    pub note: Option<String>,
    /// Reconcile many from the destination's own records: CSV (key,outcome,reference) or
    /// JSON lines
    #[arg(long, value_name = "FILE", conflicts_with_all = ["found", "absent"])]
    pub from: Option<PathBuf>,
    /// Print what --from would do, line by line, and change nothing
    #[arg(long, requires = "from")]
    pub dry_run: bool,
    /// Go on without asking (needed without a terminal)
    #[arg(long, requires = "from")]
    pub yes: bool,
    /// The preview or the summary as one JSON document
    #[arg(long, requires = "from")]
    pub json: bool,
}

/// The arguments of `settle retry`.
#[derive(Debug, clap::Args)]
pub struct RetryArgs {
    #[command(flatten)]
    pub many: Many,
    /// Why, for the history
    #[arg(long, value_name = "TEXT")]
    pub note: Option<String>,
    /// Space the items' next attempts, e.g. 10/s (a recovering destination is not flooded)
    #[arg(long, value_name = "N/s")]
    pub rate: Option<String>,
    /// Retry them all at once: without it, many are retried one first (the canary), and the
    /// others only once the destination accepted it
    #[arg(long)]
    pub no_canary: bool,
}

/// The arguments of `settle close`.
#[derive(Debug, clap::Args)]
pub struct CloseArgs {
    #[command(flatten)]
    pub many: Many,
    /// How it was resolved
    #[arg(long, value_parser = ["done_elsewhere", "superseded", "abandoned", "duplicate_cleaned_up"])]
    pub resolution: String,
    /// The reference of the work done elsewhere (with done_elsewhere)
    #[arg(long, value_name = "REF")]
    pub reference: Option<String>,
    /// The key of the operation that supersedes it (with superseded; it must exist)
    #[arg(long, value_name = "KEY2")]
    pub superseded_by: Option<String>,
    /// What was done (required)
    #[arg(long, value_name = "TEXT")]
    pub note: String,
}

/// The arguments of `settle note`.
#[derive(Debug, clap::Args)]
pub struct NoteArgs {
    /// The operation's key
    pub key: String,
    /// The note
    pub text: String,
}

/// The arguments of `settle pause`.
#[derive(Debug, clap::Args)]
pub struct PauseArgs {
    #[command(flatten)]
    pub what: PauseTarget,
    /// Why (shown in the console's header and the audit)
    #[arg(long, value_name = "TEXT")]
    pub reason: String,
}

/// Open or close.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum BreakerVerb {
    Open,
    Close,
}

/// The arguments of `settle breaker`.
#[derive(Debug, clap::Args)]
pub struct BreakerArgs {
    /// `open` or `close`
    pub verb: BreakerVerb,
    /// The destination
    pub destination: String,
    /// Why (the audit, and the owners' message)
    #[arg(long, value_name = "TEXT")]
    pub reason: String,
}

/// The arguments of `settle resume`.
#[derive(Debug, clap::Args)]
pub struct ResumeArgs {
    #[command(flatten)]
    pub what: PauseTarget,
}
