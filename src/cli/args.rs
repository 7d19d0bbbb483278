//! The command line's words (manual: The command line): every command and option, each with its help line, as
//! clap reads them. The global options (`--db`, `--config`, `--as`) are shown under their own
//! heading and taken only by the commands they mean something to ([`command`] adds them).

use std::path::PathBuf;

use clap::{Args, CommandFactory, Parser};

pub use super::commands::{Cmd, Shell};

/// `settle --version`: the version and the commit it was built from.
const VERSION: &str = concat!(env!("CARGO_PKG_VERSION"), " (", env!("SETTLE_COMMIT"), ")");

#[derive(Debug, Parser)]
#[command(
    name = "settle",
    version = VERSION,
    about = "Operations ledger and exception queue for automations that may have done something twice, or not at all",
    long_about = "Operations ledger and exception queue for automations that may have done something twice, or \
not at all.\n\nWithout a command, opens the console on the database. Exit codes: 0 done, 2 bad usage or a \
malformed value, 3 refused (one line on stderr says why), 4 the database is unreachable.",
    after_help = "Run `settle COMMAND --help` for a command's options; `settle man` prints the manual page."
)]
pub struct Cli {
    #[command(flatten)]
    pub globals: Globals,
    #[command(subcommand)]
    pub command: Option<Cmd>,
}

/// What every command that opens the ledger takes: where the data and settings are, and who acts.
#[derive(Args, Clone, Debug, Default, PartialEq)]
#[command(next_help_heading = "Global options")]
pub struct Globals {
    /// Database URL (sqlite://FILE or postgres://...); else $SETTLE_DATABASE_URL, the config,
    /// sqlite://settle.db
    #[arg(long, value_name = "URL")]
    pub db: Option<String>,
    /// Config file; else $SETTLE_CONFIG, else $XDG_CONFIG_HOME/settle/settle.toml
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Who acts (named in every event); else $SETTLE_OPERATOR, else $USER
    #[arg(long = "as", value_name = "NAME")]
    pub operator: Option<String>,
    /// A PostgreSQL hot standby to read lists, counts, the review and metrics from (writes, and
    /// a person's reads right after their action, go to --db); else $SETTLE_READ_DATABASE_URL,
    /// the config's read_db
    #[arg(long = "read-db", value_name = "URL")]
    pub read_db: Option<String>,
}

/// The global options, by id.
const DB: &str = "db";
const CONFIG: &str = "config";
const OPERATOR: &str = "operator";
const READ_DB: &str = "read_db";

/// Which global options each command takes, after it as before it: every command that opens
/// the ledger takes them all (`--read-db` is read where lists and counts are: the console,
/// `list`, `runs`, `groups`, `stats`, `report`, `serve`; elsewhere the primary serves); the
/// tools around it (a simulator, the shell's completions, the manual page, a new token) none.
pub const TAKES: &[(&str, &[&str])] = &[
    ("demo", ALL),
    ("sim", &[]),
    ("dispatch", ALL),
    ("init", ALL),
    ("record", ALL),
    ("start", ALL),
    ("attempt", ALL),
    ("ingest", ALL),
    ("list", ALL),
    ("show", ALL),
    ("claim", ALL),
    ("release", ALL),
    ("reconcile", ALL),
    ("retry", ALL),
    ("close", ALL),
    ("correct", ALL),
    ("note", ALL),
    ("pause", ALL),
    ("resume", ALL),
    ("lookup", ALL),
    ("sweep", ALL),
    ("prune", ALL),
    ("run", ALL),
    ("runs", ALL),
    ("stats", ALL),
    ("groups", ALL),
    ("notify", ALL),
    ("notifications", ALL),
    ("report", ALL),
    ("serve", ALL),
    ("token", &[]),
    ("completions", &[]),
    ("man", &[]),
];

/// Every global option.
const ALL: &[&str] = &[DB, CONFIG, OPERATOR, READ_DB];

/// The commands that read from `--read-db` when it is given (the others read the primary).
pub const READS_REPLICA: &[&str] = &["list", "runs", "groups", "stats", "report", "serve"];

/// The whole command line as clap knows it: the derived commands, each given the global
/// options it takes (the help, completions and the man page all come from this).
pub fn command() -> clap::Command {
    let globals: Vec<clap::Arg> = Globals::augment_args(clap::Command::new("globals"))
        .get_arguments()
        .cloned()
        .collect();
    let mut cmd = Cli::command();
    for (name, takes) in TAKES {
        cmd = cmd.mut_subcommand(*name, |mut sub| {
            let mine = globals
                .iter()
                .filter(|a| takes.contains(&a.get_id().as_str()));
            for (i, a) in mine.enumerate() {
                // after the command's own options, in the usage line and the manual too
                sub = sub.arg(a.clone().display_order(1000 + i));
            }
            sub
        });
    }
    cmd
}

/// The global options a command line gave, before or after its command (after wins). After the
/// command, only those it takes are known to it (its help lists no others); before it they are
/// the context of every command (`alias s='settle --as alice'`), ignored where they mean nothing.
pub fn parse(args: impl IntoIterator<Item = String>) -> Result<Cli, clap::Error> {
    use clap::FromArgMatches;
    let matches = command().try_get_matches_from(args)?;
    let mut cli = Cli::from_arg_matches(&matches)?;
    if let Some((_, sub)) = matches.subcommand() {
        if let Ok(Some(db)) = sub.try_get_one::<String>(DB) {
            cli.globals.db = Some(db.clone());
        }
        if let Ok(Some(config)) = sub.try_get_one::<PathBuf>(CONFIG) {
            cli.globals.config = Some(config.clone());
        }
        if let Ok(Some(who)) = sub.try_get_one::<String>(OPERATOR) {
            cli.globals.operator = Some(who.clone());
        }
        if let Ok(Some(url)) = sub.try_get_one::<String>(READ_DB) {
            cli.globals.read_db = Some(url.clone());
        }
    }
    Ok(cli)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every option of every command has a help line.
    #[test]
    fn every_option_of_every_command_has_a_help_line() {
        fn walk(cmd: &clap::Command, path: &str, missing: &mut Vec<String>) {
            for a in cmd.get_arguments() {
                let id = a.get_id().as_str();
                if matches!(id, "help" | "version") {
                    continue;
                }
                if a.get_help().is_none_or(|h| h.to_string().trim().is_empty()) {
                    missing.push(format!("{path} {id}"));
                }
            }
            for sub in cmd.get_subcommands() {
                if sub.get_about().is_none() {
                    missing.push(format!("{path} {} (the command)", sub.get_name()));
                }
                walk(sub, &format!("{path} {}", sub.get_name()), missing);
            }
        }
        let mut missing = Vec::new();
        let mut cmd = command();
        cmd.build();
        walk(&cmd, "settle", &mut missing);
        assert!(missing.is_empty(), "without a help line: {missing:?}");
    }

    /// Each command takes the global options it means something to, under their own heading,
    /// and refuses the others wherever they are written.
    #[test]
    fn global_options_only_where_they_mean_something() {
        let mut cmd = command();
        cmd.build();
        let sim = cmd.find_subcommand("sim").unwrap();
        assert!(
            sim.get_arguments()
                .all(|a| !matches!(a.get_id().as_str(), "db" | "operator"))
        );
        let record = cmd.find_subcommand("record").unwrap();
        let db = record.get_arguments().find(|a| a.get_id() == "db").unwrap();
        assert_eq!(db.get_help_heading(), Some("Global options"));
        let args = |line: &str| {
            line.split_whitespace()
                .map(String::from)
                .collect::<Vec<_>>()
        };
        // before the command or after it, after wins
        let cli = parse(args("settle --db sqlite://a.db record --key k --workflow w --destination d --action a --payload {} --as bob")).unwrap();
        assert_eq!(
            (cli.globals.db.as_deref(), cli.globals.operator.as_deref()),
            (Some("sqlite://a.db"), Some("bob"))
        );
        let cli = parse(args("settle --db sqlite://a.db stats --db sqlite://b.db")).unwrap();
        assert_eq!(cli.globals.db.as_deref(), Some("sqlite://b.db"));
        // a command of the ledger takes all three after it; one that opens no ledger, none
        let cli = parse(args("settle stats --as bob")).unwrap();
        assert_eq!(cli.globals.operator.as_deref(), Some("bob"));
        for line in ["settle sim --db sqlite://a.db", "settle man --config x"] {
            let e = parse(args(line)).unwrap_err().to_string();
            assert!(e.contains("unexpected argument"), "{line}: {e}");
        }
        // before the command, the context of any (an alias's)
        assert!(parse(args("settle --as bob stats")).is_ok());
        // the console (no command) takes all three
        let cli = parse(args("settle --db sqlite://a.db --as bob")).unwrap();
        assert!(cli.command.is_none() && cli.globals.operator.is_some());
    }
}
