//! `ssh HOST COMMAND` to `settle serve` (manual: Running settle for a team): the commands a session may run, as its key's
//! operator, on the server's database.

use super::args::{self, Cmd};
use super::common::{clean, split_words, usage_error};
use super::route::route;
use crate::ledger::Ledger;

/// [`remote`] as the server runs an `exec` request.
pub fn exec() -> crate::serve::Exec {
    std::sync::Arc::new(|ledger, who, command| {
        Box::pin(async move { remote(ledger, &who, &command).await })
    })
}

/// A command sent by `ssh HOST COMMAND` to `settle serve` (manual: Running settle for a team): the commands that read,
/// as the key's operator with the key's role. `--db`, `--config` and `--as` are refused: the
/// server's database and the key's name hold. Returns the exit status.
pub async fn remote(ledger: Ledger, who: &crate::domain::Identity, command: &str) -> i32 {
    let words = match split_words(command) {
        Ok(w) => w,
        Err(e) => {
            crate::tell!("settle: {e}");
            return 2;
        }
    };
    // wherever they are written, and whatever the command takes
    let global = |w: &String| {
        ["--db", "--config", "--as"]
            .iter()
            .any(|g| w == g || w.starts_with(&format!("{g}=")))
    };
    if words.iter().any(global) {
        crate::tell!(
            "settle: --db, --config and --as are not taken over SSH: you are {} ({}), on this server's database",
            who.name,
            who.role
        );
        return 2;
    }
    let args = std::iter::once("settle".to_string()).chain(words);
    let cli = match args::parse(args) {
        Ok(cli) => cli,
        Err(e) => {
            use clap::error::ErrorKind;
            if matches!(e.kind(), ErrorKind::DisplayHelp | ErrorKind::DisplayVersion) {
                use std::io::Write as _;
                let _ = write!(crate::out::stdout(), "{e}");
                return 0;
            }
            crate::tell!("settle: {} (see settle --help)", clean(&usage_error(&e)));
            return 2;
        }
    };
    match &cli.command {
        Some(
            Cmd::Stats(_)
            | Cmd::List(_)
            | Cmd::Show(_)
            | Cmd::Groups(_)
            | Cmd::Report(_)
            | Cmd::Runs(_),
        ) => {}
        Some(Cmd::Run(run)) if run.verb == super::reads::RunVerb::Show => {}
        _ => {
            crate::tell!(
                "settle: over SSH this server answers stats, list, show, groups, report, runs and run show; ssh -t opens the console for the rest"
            );
            return 2;
        }
    }
    let command = cli.command.as_ref().expect("matched above");
    match route(&ledger, command, &Some(who.name.clone())).await {
        Ok(code) => code,
        Err(e) => {
            crate::tell!("settle: {}", clean(&e.to_string()));
            e.exit_code()
        }
    }
}
