//! The commands that read: list, show, stats, run show, runs and report.
use std::time::Duration;

use super::common::{duration_arg, invalid, looks_past_exceptions, required};
use super::output;
use crate::domain::State;
use crate::error::Result;
use crate::ledger::{Ledger, ListFilter, Scope};

/// `settle list`: the exceptions (or everything), as text, JSON or CSV.
pub(super) async fn list(
    ledger: &Ledger,
    args: &ListArgs,
    operator: &Option<String>,
) -> Result<i32> {
    let viewer = operator.as_deref().unwrap_or("");
    let ListArgs {
        all,
        state,
        workflow,
        older_than,
        filter,
        limit,
        json,
        csv,
    } = args;
    let state = state
        .as_deref()
        .map(State::parse)
        .transpose()
        .map_err(invalid)?;
    let query =
        crate::domain::filter::Filter::parse(filter.as_deref().unwrap_or("")).map_err(invalid)?;
    let past_exceptions = looks_past_exceptions(&query);
    let filter = ListFilter {
        query,
        scope: if *all || state.is_some() || past_exceptions {
            Scope::All
        } else {
            Scope::Exceptions
        },
        state,
        workflow: workflow.clone(),
        older_than: older_than
            .as_deref()
            .map(|t| {
                duration_arg(
                    "--older-than",
                    t,
                    Duration::ZERO,
                    crate::domain::time::MAX_DURATION,
                )
            })
            .transpose()?,
        ..Default::default()
    };
    let format = match (*json, *csv) {
        (true, _) => output::ListFormat::Json,
        (_, true) => output::ListFormat::Csv,
        _ => output::ListFormat::Text,
    };
    output::list(ledger, &filter, viewer, format, *limit).await?;
    Ok(0)
}

/// `settle run VERB RUN`: a run shown, or a person's action on it.
pub(super) async fn run(ledger: &Ledger, args: &RunArgs, operator: &Option<String>) -> Result<i32> {
    let viewer = operator.as_deref().unwrap_or("");
    let RunArgs {
        verb,
        run,
        text,
        resolution,
        note,
        json,
    } = args;
    let view = match run_action(*verb, text, resolution, note)? {
        None => ledger.read().run(run, viewer).await?,
        Some(action) => {
            ledger
                .staff()
                .run_action(run, required(operator)?, action)
                .await?
        }
    };
    if *json {
        output::json(&view);
    } else {
        output::run(&view, ledger.now());
    }
    Ok(0)
}

/// `settle runs`: newest first, or as the filter says.
pub(super) async fn runs(
    ledger: &Ledger,
    args: &RunsArgs,
    operator: &Option<String>,
) -> Result<i32> {
    let viewer = operator.as_deref().unwrap_or("");
    let runs = ledger.read().runs(&args.filter, viewer, args.limit).await?;
    if args.json {
        output::json(&runs);
    } else {
        output::runs(&runs, ledger.now());
    }
    Ok(0)
}

/// `settle show KEY`.
pub(super) async fn show(
    ledger: &Ledger,
    args: &ShowArgs,
    operator: &Option<String>,
) -> Result<i32> {
    let viewer = operator.as_deref().unwrap_or("");
    let detail = ledger.read().show(&args.key, viewer).await?;
    if args.json {
        output::json(&detail);
    } else {
        output::show(&detail, ledger.now());
    }
    Ok(0)
}

/// `settle stats`.
pub(super) async fn stats(ledger: &Ledger, args: &StatsArgs) -> Result<i32> {
    let stats = ledger.read().stats().await?;
    if args.json {
        output::json(&stats);
    } else {
        output::stats(&stats);
    }
    Ok(0)
}

/// What `settle run VERB` asks of the run: nothing (show), or a person's action on it.
fn run_action(
    verb: RunVerb,
    text: &Option<String>,
    resolution: &Option<String>,
    note: &Option<String>,
) -> Result<Option<crate::domain::run_action::RunAction>> {
    use crate::domain::run_action::RunAction;
    let unused = |what: &str, given: bool| {
        if given {
            Err(invalid(format!(
                "{what} is not taken by this verb of settle run"
            )))
        } else {
            Ok(())
        }
    };
    if verb != RunVerb::Note {
        unused("a text", text.is_some())?;
    }
    if verb != RunVerb::Close {
        unused("--resolution", resolution.is_some())?;
        unused("--note", note.is_some())?;
    }
    Ok(match verb {
        RunVerb::Show => None,
        RunVerb::Claim => Some(RunAction::Claim),
        RunVerb::Release => Some(RunAction::Release),
        RunVerb::Note => Some(RunAction::Note {
            text: text.clone().ok_or_else(|| {
                invalid("settle run note RUN TEXT: the note's text is missing".into())
            })?,
        }),
        RunVerb::Close => {
            let resolution = resolution.as_deref().ok_or_else(|| {
                invalid("settle run close needs --resolution abandoned|done_elsewhere".into())
            })?;
            Some(RunAction::Close {
                resolution: crate::domain::Resolution::parse(resolution).map_err(invalid)?,
                note: note
                    .clone()
                    .ok_or_else(|| invalid("settle run close needs --note TEXT".into()))?,
            })
        }
    })
}

/// `settle report`: the review after a release, as text or JSON.
pub(super) async fn report(ledger: &Ledger, args: &ReportArgs) -> Result<i32> {
    let ReportArgs {
        since,
        workflow,
        json,
    } = args;
    let window = duration_arg(
        "--since",
        since,
        Duration::from_secs(1),
        crate::ledger::MAX_REVIEW_WINDOW,
    )?;
    let scope = crate::ledger::ReviewScope {
        workflow: workflow.clone(),
        destination: None,
    };
    let review = ledger.read().review(window, &scope).await?;
    if *json {
        output::json(&review);
    } else {
        output::review(&review, &scope);
    }
    Ok(0)
}

/// What `settle run` does with a run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum RunVerb {
    /// Its state, safe next step and steps
    Show,
    /// Claim it: no one else closes it while you hold it
    Claim,
    /// Release your claim (a lead: anyone's)
    Release,
    /// Add a note to its history
    Note,
    /// Close it (--resolution abandoned|done_elsewhere --note TEXT); its steps stay as they are
    Close,
}

/// The arguments of `settle list`.
#[derive(Debug, clap::Args)]
pub struct ListArgs {
    /// Every operation, not only the exceptions
    #[arg(long)]
    pub all: bool,
    /// Only this state (--where takes several: state:unknown,failed)
    #[arg(long, value_name = "STATE")]
    pub state: Option<String>,
    /// Only this workflow
    #[arg(long, value_name = "NAME")]
    pub workflow: Option<String>,
    /// Only items at least this old, e.g. 2h
    #[arg(long, value_name = "DUR")]
    pub older_than: Option<String>,
    /// The filter, e.g. 'dest:sms state:unknown age>2h -claimed:any'
    #[arg(long = "where", value_name = "FILTER")]
    pub filter: Option<String>,
    /// At most this many rows (the oldest first)
    #[arg(long, value_name = "N")]
    pub limit: Option<usize>,
    /// An array of operations as JSON
    #[arg(long, conflicts_with = "csv")]
    pub json: bool,
    /// One CSV row per operation, with a header line
    #[arg(long)]
    pub csv: bool,
}

/// The arguments of `settle show`.
#[derive(Debug, clap::Args)]
pub struct ShowArgs {
    /// The operation's key
    pub key: String,
    /// As one JSON document (with attempt_log and history)
    #[arg(long)]
    pub json: bool,
}

/// The arguments of `settle run`.
#[derive(Debug, clap::Args)]
pub struct RunArgs {
    /// What to do with the run
    #[arg(value_enum)]
    pub verb: RunVerb,
    /// The run's id, as the automation named it (record --run)
    pub run: String,
    /// The note's text (run note)
    pub text: Option<String>,
    /// How it ended (run close): abandoned or done_elsewhere
    #[arg(long, value_name = "R")]
    pub resolution: Option<String>,
    /// What was done (run close)
    #[arg(long, value_name = "TEXT")]
    pub note: Option<String>,
    /// As one JSON document: run, workflow, state, since, next_step, claimed_by, steps
    #[arg(long)]
    pub json: bool,
}

/// The arguments of `settle runs`.
#[derive(Debug, clap::Args)]
pub struct RunsArgs {
    /// Only the runs this holds: state:running|blocked|stalled|done|closed, workflow:W, run:ID
    #[arg(long = "where", value_name = "FILTER", default_value = "")]
    pub filter: String,
    /// At most this many
    #[arg(long, default_value_t = 100, value_name = "N")]
    pub limit: usize,
    /// As one JSON array
    #[arg(long)]
    pub json: bool,
}

/// The arguments of `settle stats`.
#[derive(Debug, clap::Args)]
pub struct StatsArgs {
    /// As one JSON document
    #[arg(long)]
    pub json: bool,
}

/// The arguments of `settle report`.
#[derive(Debug, clap::Args)]
pub struct ReportArgs {
    /// The window, ending now: e.g. 1d, 7d, 30d
    #[arg(long, default_value = "7d", value_name = "DUR")]
    pub since: String,
    /// One workflow only
    #[arg(long, value_name = "NAME")]
    pub workflow: Option<String>,
    /// As one JSON document
    #[arg(long)]
    pub json: bool,
}
