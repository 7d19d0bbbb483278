//! The commands that read: list, show, stats, run show, runs and report.
use std::time::Duration;

use super::args::Cmd;
use super::common::{duration_arg, invalid, looks_past_exceptions, required};
use super::output;
use crate::domain::State;
use crate::error::Result;
use crate::ledger::{Ledger, ListFilter, Scope};

/// `settle list`, `show` and `stats`.
pub(super) async fn read(ledger: &Ledger, command: &Cmd, operator: &Option<String>) -> Result<i32> {
    let viewer = operator.as_deref().unwrap_or("");
    match command {
        Cmd::List {
            all,
            state,
            workflow,
            older_than,
            filter,
            limit,
            json,
            csv,
        } => {
            let state = state
                .as_deref()
                .map(State::parse)
                .transpose()
                .map_err(invalid)?;
            let query = crate::domain::filter::Filter::parse(filter.as_deref().unwrap_or(""))
                .map_err(invalid)?;
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
        }
        Cmd::Run {
            verb,
            run,
            text,
            resolution,
            note,
            json,
        } => {
            let view = match run_action(*verb, text, resolution, note)? {
                None => ledger.run(run, viewer).await?,
                Some(action) => ledger.run_action(run, required(operator)?, action).await?,
            };
            if *json {
                output::json(&view);
            } else {
                output::run(&view, ledger.now());
            }
        }
        Cmd::Runs {
            filter,
            limit,
            json,
        } => {
            let runs = ledger.runs(filter, viewer, *limit).await?;
            if *json {
                output::json(&runs);
            } else {
                output::runs(&runs, ledger.now());
            }
        }
        Cmd::Show { key, json } => {
            let detail = ledger.show(key, viewer).await?;
            if *json {
                output::json(&detail);
            } else {
                output::show(&detail, ledger.now());
            }
        }
        Cmd::Stats { json } => {
            let stats = ledger.stats().await?;
            if *json {
                output::json(&stats);
            } else {
                output::stats(&stats);
            }
        }
        _ => unreachable!("only its own commands come here"),
    }
    Ok(0)
}

/// What `settle run VERB` asks of the run: nothing (show), or a person's action on it.
fn run_action(
    verb: super::commands::RunVerb,
    text: &Option<String>,
    resolution: &Option<String>,
    note: &Option<String>,
) -> Result<Option<crate::domain::run_action::RunAction>> {
    use super::commands::RunVerb;
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
pub(super) async fn report(
    ledger: &Ledger,
    since: &str,
    workflow: &Option<String>,
    json: bool,
) -> Result<i32> {
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
    let review = ledger.review(window, &scope).await?;
    if json {
        output::json(&review);
    } else {
        output::review(&review, &scope);
    }
    Ok(0)
}
