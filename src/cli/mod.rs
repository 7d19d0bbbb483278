//! The command line (manual: The command line): clap definitions and one handler per command.
//!
//! Rooms: `args.rs` the global options and which command takes them, `commands.rs` the commands,
//! `targets.rs` one key or many, `common.rs` what handlers share, `route.rs` a thin router from
//! command to handler; the handlers by group: `writes.rs` the protocol, `staff.rs`, `bulk.rs` many
//! operations, `correct.rs`, `undo.rs` an action taken back, `reads.rs`, `groups.rs`, `notices.rs` (`notify test`,
//! `notifications`), `upkeep.rs` (init, dispatch, sweep, prune), `lookup.rs`, `serving.rs`
//! (`serve`, `token`), `tools.rs` sim's options, `docs.rs` completions and the man page;
//! `remote.rs` the entry over SSH; `output/` what is printed.

//!
//! `mod.rs` is the entry (`settle ...` on a shell): it opens the config and the database and
//! hands the command to [`dispatch`], or starts the long-running faces (the console, `serve`,
//! and the tools: `demo`, `sim`). [`remote`] is the entry over SSH; it shares `dispatch`.

mod args;
mod bulk;
mod commands;
mod common;
mod correct;
mod docs;
mod groups;
mod lookup;
mod notices;
pub(crate) mod output;
mod reads;
pub mod remote;
mod route;
mod serving;
mod staff;
mod targets;
mod tools;
mod undo;
mod upkeep;
mod writes;

pub use args::command;
use args::{Cli, Cmd};
use common::{clean, invalid, required, usage_error};
use route::route;

use crate::config::{Config, DEFAULT_DATABASE};
use crate::error::Result;
use crate::ledger::Ledger;

/// Parses the arguments and runs the command; returns the process exit code.
pub async fn run(args: Vec<String>) -> i32 {
    let cli = match args::parse(args) {
        Ok(cli) => cli,
        Err(e) => {
            use clap::error::ErrorKind;
            if matches!(e.kind(), ErrorKind::DisplayHelp | ErrorKind::DisplayVersion) {
                // help read by `head` that stopped early is still help given
                use std::io::Write as _;
                let _ = write!(std::io::stdout(), "{e}");
                return 0;
            }
            crate::tell!("settle: {} (see settle --help)", clean(&usage_error(&e)));
            return 2;
        }
    };
    match execute(cli).await {
        Ok(code) => code,
        Err(e) => {
            let text = command_to_run(&clean(&e.to_string()));
            tracing::warn!(error = %text, "command failed");
            crate::tell!("settle: {text}");
            e.exit_code()
        }
    }
}

/// A refusal as the command line says it: the command to run where the rules say what to do
/// (`KEY is claimed by bob until ...: take it over first` names `settle claim KEY --force`).
fn command_to_run(text: &str) -> String {
    match (
        text.split_once(" is claimed by "),
        text.ends_with("take it over first"),
    ) {
        (Some((key, _)), true) => format!("{text}: settle claim {key} --force --reason TEXT"),
        _ => text.to_string(),
    }
}

/// The operator: `--as`, else `SETTLE_OPERATOR`, else `$USER` (but settle's own names, which a
/// service's user may have); checked before anything uses it (the log's first line names it).
/// `None` when none is set.
fn operator(cli: &Cli) -> Result<Option<String>> {
    let env = |name: &str| std::env::var(name).ok().filter(|v| !v.is_empty());
    let (name, from) = match &cli.globals.operator {
        Some(n) => (n.clone(), "--as"),
        None => match env("SETTLE_OPERATOR") {
            Some(n) => (n, "SETTLE_OPERATOR"),
            // a service's own user (the package's `settle`) is nobody's name: as if unset
            None => match env("USER") {
                Some(n) if !crate::domain::names::SYSTEM_NAMES.contains(&n.as_str()) => (n, "USER"),
                _ => return Ok(None),
            },
        },
    };
    crate::domain::validate_operator(&name).map_err(|e| invalid(format!("{from}: {e}")))?;
    Ok(Some(name))
}

fn database_url(cli: &Cli, config: &Config, fallback: &str) -> String {
    cli.globals
        .db
        .clone()
        .or_else(|| {
            std::env::var("SETTLE_DATABASE_URL")
                .ok()
                .filter(|s| !s.is_empty())
        })
        .or_else(|| config.database.clone())
        .unwrap_or_else(|| fallback.to_string())
}

/// The replica to read from, for the console and the commands that take `--read-db` (the
/// others read and write the primary only).
fn read_database_url(cli: &Cli, config: &Config) -> Option<String> {
    let takes = match &cli.command {
        None => true,
        Some(command) => args::READS_REPLICA.contains(&command_name(command).as_str()),
    };
    takes.then(|| {
        cli.globals
            .read_db
            .clone()
            .or_else(|| {
                std::env::var("SETTLE_READ_DATABASE_URL")
                    .ok()
                    .filter(|s| !s.is_empty())
            })
            .or_else(|| config.read_db.clone())
    })?
}

/// The commands that only read the ledger: where there is none, they say so and make nothing.
const ONLY_READ: &[&str] = &[
    "list",
    "show",
    "run",
    "runs",
    "stats",
    "groups",
    "report",
    "notifications",
];

/// A command's name as typed, from its variant's name only (its arguments may hold notes).
fn command_name(command: &Cmd) -> String {
    format!("{command:?}")
        .chars()
        .take_while(char::is_ascii_alphanumeric)
        .collect::<String>()
        .to_lowercase()
}

async fn execute(cli: Cli) -> Result<i32> {
    // what needs no config and no database
    match &cli.command {
        Some(Cmd::Completions { shell }) => return docs::completions(*shell),
        Some(Cmd::Man { dir }) => return docs::man_page(dir.as_deref()),
        Some(Cmd::Token { what }) => return serving::token(what),
        _ => {}
    }
    let mut config = Config::discover(cli.globals.config.as_deref())?;
    crate::logging::init(&config);
    config.read_db = read_database_url(&cli, &config);
    let actor = operator(&cli)?;
    let Some(command) = &cli.command else {
        let who = required(&actor)?.to_string();
        let url = database_url(&cli, &config, DEFAULT_DATABASE);
        if let Some(why) = crate::store::missing_ledger(&url) {
            return Err(crate::error::Error::Unavailable(why));
        }
        let ledger = Ledger::open_console(&url, config).await?;
        tracing::info!(command = "console", operator = %who, "start");
        let result = crate::console::run(ledger.clone(), &who).await;
        ledger.close().await;
        return result.map(|()| 0);
    };
    if let Cmd::Sim(args) = command {
        return tools::sim(args).await;
    }
    if let Cmd::Demo { reset, live } = command {
        let url = database_url(&cli, &Config::default(), crate::tools::demo::DEMO_DATABASE);
        // the demo is a sandbox: without an operator it shows the console as alice
        let who = actor.as_deref().unwrap_or("alice");
        return crate::tools::demo::run(&url, config, *reset, *live, who).await;
    }
    if let Cmd::Serve(args) = command {
        let url = database_url(&cli, &config, DEFAULT_DATABASE);
        let config_path = Config::discover_path(cli.globals.config.as_deref());
        return serving::serve(args, &url, config, config_path, remote::exec()).await;
    }
    // the variant's name only: its arguments may hold notes and reasons
    let name = command_name(command);
    let url = database_url(&cli, &config, DEFAULT_DATABASE);
    // a read makes no ledger where there is none: it says so
    if ONLY_READ.contains(&name.as_str())
        && let Some(why) = crate::store::missing_ledger(&url)
    {
        return Err(crate::error::Error::Unavailable(why));
    }
    let ledger = Ledger::open(&url, config).await?;
    tracing::info!(command = %name, operator = %actor.as_deref().unwrap_or("-"), "start");
    let code = route(&ledger, command, &actor).await;
    ledger.close().await;
    code
}
