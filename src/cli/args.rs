//! The command line's words (SPEC 12): every command and option, each with its help line, as
//! clap reads them. The global options (`--db`, `--config`, `--as`) are shown under their own
//! heading and taken only by the commands they mean something to ([`command`] adds them).

use std::path::PathBuf;

use clap::{Args, CommandFactory, Parser, Subcommand};

#[derive(Debug, Parser)]
#[command(
    name = "settle",
    version,
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
}

/// The global options, by id.
const DB: &str = "db";
const CONFIG: &str = "config";
const OPERATOR: &str = "operator";

/// Which global options each command takes: the database and config wherever the ledger is
/// opened, the operator where someone acts or reads as themselves (their claims, "Mine").
pub const TAKES: &[(&str, &[&str])] = &[
    ("demo", &[DB, CONFIG, OPERATOR]),
    ("sim", &[]),
    ("dispatch", &[DB, CONFIG]),
    ("init", &[DB, CONFIG]),
    ("record", &[DB, CONFIG, OPERATOR]),
    ("start", &[DB, CONFIG, OPERATOR]),
    ("attempt", &[DB, CONFIG, OPERATOR]),
    ("ingest", &[DB, CONFIG, OPERATOR]),
    ("list", &[DB, CONFIG, OPERATOR]),
    ("show", &[DB, CONFIG, OPERATOR]),
    ("claim", &[DB, CONFIG, OPERATOR]),
    ("release", &[DB, CONFIG, OPERATOR]),
    ("reconcile", &[DB, CONFIG, OPERATOR]),
    ("retry", &[DB, CONFIG, OPERATOR]),
    ("close", &[DB, CONFIG, OPERATOR]),
    ("note", &[DB, CONFIG, OPERATOR]),
    ("pause", &[DB, CONFIG, OPERATOR]),
    ("resume", &[DB, CONFIG, OPERATOR]),
    ("lookup", &[DB, CONFIG, OPERATOR]),
    ("sweep", &[DB, CONFIG]),
    ("stats", &[DB, CONFIG]),
    ("report", &[DB, CONFIG]),
    ("serve", &[DB, CONFIG]),
    ("completions", &[]),
    ("man", &[]),
];

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
    }
    Ok(cli)
}

/// The shells `settle completions` writes for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Shell {
    Bash,
    Zsh,
    Fish,
}

#[derive(Debug, Subcommand)]
pub enum Cmd {
    /// Fill a database with a realistic week of demo data (default sqlite://settle-demo.db), then
    /// open the console on it
    Demo {
        /// Start from an empty demo database (SQLite only)
        #[arg(long)]
        reset: bool,
        /// Also run two simulated destinations and a dispatcher, with new work every 2 seconds
        #[arg(long)]
        live: bool,
    },
    /// A task system that misbehaves on purpose, for recovery drills (needs no database)
    Sim {
        /// Address to listen on (port 0 picks a free one; the first line printed says which)
        #[arg(long, default_value = "127.0.0.1:8787", value_name = "ADDR")]
        listen: String,
        /// Keep the created tasks in this file, across restarts
        #[arg(long, value_name = "FILE")]
        state: Option<PathBuf>,
        /// Do not honour Idempotency-Key (every request creates a task)
        #[arg(long)]
        no_dedupe: bool,
        /// How long a key is remembered, e.g. 24h
        #[arg(long, default_value = "24h", value_name = "DUR")]
        key_retention: String,
        /// A fault for every create: reject, drop, late, unavailable, error, reject-nul or echo
        #[arg(long, value_name = "FAULT")]
        fault: Option<String>,
        /// Chance of a random fault per create (0 to 1), from a schedule seeded by --seed
        #[arg(long, default_value_t = 0.0, value_name = "P")]
        fault_rate: f64,
        /// The seed of the random fault schedule (the same seed, the same faults)
        #[arg(long, default_value_t = 1, value_name = "N")]
        seed: u64,
        /// How long a `late` answer waits
        #[arg(long, default_value = "10s", value_name = "DUR")]
        late: String,
        /// Apply the fault only to the first request of each key
        #[arg(long)]
        fault_first_only: bool,
        /// How long every create takes, e.g. 20ms
        #[arg(long, default_value = "0s", value_name = "DUR")]
        latency: String,
        /// Answer 401 to any request without this header, e.g. 'Authorization: Bearer X'
        #[arg(long, value_name = "'NAME: VALUE'")]
        require_header: Option<String>,
        /// The status of a successful create: 201, 200 or 204 (no body)
        #[arg(long, default_value_t = 201, value_name = "STATUS")]
        answer: u16,
        /// A repeated key answers 409 "already exists" (as HubSpot does) instead of the task
        #[arg(long)]
        exists_409: bool,
    },
    /// Run due operations of the HTTP destinations in the config (Ctrl-C stops cleanly)
    Dispatch {
        /// Requests in flight at once
        #[arg(long, default_value_t = 16, value_name = "N")]
        concurrency: usize,
        /// Stop when nothing automation may move is left
        #[arg(long)]
        until_settled: bool,
    },
    /// Create or migrate the database
    Init,
    /// Record an intended operation, before anything is sent (exit 3: do not send)
    Record {
        /// The operation's stable key, sent as its idempotency key (1-128 of A-Z a-z 0-9 . _ : -)
        #[arg(long)]
        key: String,
        /// The automation it belongs to (pauses and thresholds are per workflow)
        #[arg(long, value_name = "NAME")]
        workflow: String,
        /// The step of the workflow, e.g. create-task
        #[arg(long, default_value = "", value_name = "NAME")]
        step: String,
        /// The receiving system, as the config names it
        #[arg(long, value_name = "NAME")]
        destination: String,
        /// What is asked of it, e.g. create_task
        #[arg(long, value_name = "NAME")]
        action: String,
        /// The request's contents: JSON, or @FILE to read it from a file, or - from stdin (a
        /// payload on the command line is visible to other users in `ps`)
        #[arg(long, value_name = "JSON|@FILE|-")]
        payload: String,
        /// Answer as one JSON document: key, state, attempt, send, next_step
        #[arg(long)]
        json: bool,
    },
    /// Start the next attempt of an operation you send yourself: prints its number when you may
    /// send now, exits 3 with why when you may not
    Start {
        /// The operation's key
        #[arg(long)]
        key: String,
        /// Answer as one JSON document: key, state, attempt, send, next_step
        #[arg(long)]
        json: bool,
    },
    /// Record an attempt's outcome
    Attempt {
        /// The operation's key
        #[arg(long)]
        key: String,
        /// What happened: accepted (done), rejected (a business error), transient (provably not
        /// done), unknown (could not observe)
        #[arg(long, value_parser = ["accepted", "rejected", "transient", "unknown"])]
        outcome: String,
        /// The attempt's number (default: the open attempt, else the next)
        #[arg(long, value_name = "N")]
        attempt: Option<u32>,
        /// The destination's reference for the work (with accepted)
        #[arg(long, value_name = "REF")]
        reference: Option<String>,
        /// What went wrong, as the destination or the client said it (kept redacted)
        #[arg(long, value_name = "TEXT")]
        error: Option<String>,
        /// The HTTP status of the answer, if there was one
        #[arg(long, value_name = "STATUS")]
        http_status: Option<u16>,
        /// The destination's Retry-After, e.g. 30s
        #[arg(long, value_name = "DUR")]
        retry_after: Option<String>,
        /// Answer as one JSON document: key, state, attempt, send, next_step
        #[arg(long)]
        json: bool,
    },
    /// Record intents and attempts from JSON lines (a file, or - for stdin)
    Ingest {
        /// The JSON lines file, or - for stdin
        file: String,
    },
    /// List exceptions, oldest first (or everything with --all)
    List {
        /// Every operation, not only the exceptions
        #[arg(long)]
        all: bool,
        /// Only this state (--where takes several: state:unknown,failed)
        #[arg(long, value_name = "STATE")]
        state: Option<String>,
        /// Only this workflow
        #[arg(long, value_name = "NAME")]
        workflow: Option<String>,
        /// Only items at least this old, e.g. 2h
        #[arg(long, value_name = "DUR")]
        older_than: Option<String>,
        /// SPEC 12's filter, e.g. 'dest:sms state:unknown age>2h -claimed:any'
        #[arg(long = "where", value_name = "FILTER")]
        filter: Option<String>,
        /// At most this many rows (the oldest first)
        #[arg(long, value_name = "N")]
        limit: Option<usize>,
        /// An array of operations as JSON
        #[arg(long, conflicts_with = "csv")]
        json: bool,
        /// One CSV row per operation, with a header line
        #[arg(long)]
        csv: bool,
    },
    /// Show one operation: payload (redacted), attempts, history, safe next step
    Show {
        /// The operation's key
        key: String,
        /// As one JSON document (with attempt_log and history)
        #[arg(long)]
        json: bool,
    },
    /// Claim operations to work them (KEY... or --where FILTER)
    Claim {
        #[command(flatten)]
        many: Many,
        /// Take over another operator's live claim (a lead's; needs --reason)
        #[arg(long, requires = "reason")]
        force: bool,
        /// Why you take the claim over (audited)
        #[arg(long, value_name = "TEXT")]
        reason: Option<String>,
    },
    /// Release your claims (KEY... or --where FILTER)
    Release {
        #[command(flatten)]
        many: Many,
    },
    /// Settle an unknown outcome: found at the destination (with its reference) or absent
    Reconcile {
        /// The operation's key
        #[arg(required_unless_present = "from", conflicts_with = "from")]
        key: Option<String>,
        /// It was done: the destination's reference for it
        #[arg(
            long,
            value_name = "REF",
            conflicts_with = "absent",
            required_unless_present_any = ["absent", "from"]
        )]
        found: Option<String>,
        /// It was not done (confirmed at the destination)
        #[arg(long)]
        absent: bool,
        /// What you saw, for the history
        #[arg(long, value_name = "TEXT")]
        note: Option<String>,
        /// Reconcile many from the destination's own records: CSV (key,outcome,reference) or
        /// JSON lines
        #[arg(long, value_name = "FILE", conflicts_with_all = ["found", "absent"])]
        from: Option<PathBuf>,
        /// Print what --from would do, line by line, and change nothing
        #[arg(long, requires = "from")]
        dry_run: bool,
        /// Go on without asking (needed without a terminal)
        #[arg(long, requires = "from")]
        yes: bool,
        /// The preview or the summary as one JSON document
        #[arg(long, requires = "from")]
        json: bool,
    },
    /// Send again with the same key and a fresh attempt budget (KEY... or --where FILTER)
    Retry {
        #[command(flatten)]
        many: Many,
        /// Why, for the history
        #[arg(long, value_name = "TEXT")]
        note: Option<String>,
        /// Space the items' next attempts, e.g. 10/s (a recovering destination is not flooded)
        #[arg(long, value_name = "N/s")]
        rate: Option<String>,
    },
    /// Close with a resolution and a note (KEY... or --where FILTER)
    Close {
        #[command(flatten)]
        many: Many,
        /// How it was resolved
        #[arg(long, value_parser = ["done_elsewhere", "superseded", "abandoned", "duplicate_cleaned_up"])]
        resolution: String,
        /// The reference of the work done elsewhere (with done_elsewhere)
        #[arg(long, value_name = "REF")]
        reference: Option<String>,
        /// The key of the operation that supersedes it (with superseded; it must exist)
        #[arg(long, value_name = "KEY2")]
        superseded_by: Option<String>,
        /// What was done (required)
        #[arg(long, value_name = "TEXT")]
        note: String,
    },
    /// Add a note to an operation's history
    Note {
        /// The operation's key
        key: String,
        /// The note
        text: String,
    },
    /// Pause a workflow (or with --destination a destination): no attempt of it starts
    Pause {
        #[command(flatten)]
        what: PauseTarget,
        /// Why (shown in the console's header and the audit)
        #[arg(long, value_name = "TEXT")]
        reason: String,
    },
    /// Resume a paused workflow (or with --destination a destination)
    Resume {
        #[command(flatten)]
        what: PauseTarget,
    },
    /// Look operations up at their destination now (KEY... or --where FILTER), then with your
    /// confirmation reconcile each found or absent one by what it answered
    Lookup {
        #[command(flatten)]
        many: Many,
        /// Space the lookups, e.g. 10/s (an incident's 400 lookups do not flood the destination)
        #[arg(long, value_name = "N/s")]
        rate: Option<String>,
    },
    /// Sweep attempts that outlived their timeout (retried where the destination deduplicates,
    /// else unknown)
    Sweep,
    /// Totals by state, exceptions, oldest exception, paused workflows
    Stats {
        /// As one JSON document
        #[arg(long)]
        json: bool,
    },
    /// The review after a release: exception age, opened and resolved per day, time to resolve, duplicates (SPEC 18)
    Report {
        /// The window, ending now: e.g. 1d, 7d, 30d
        #[arg(long, default_value = "7d", value_name = "DUR")]
        since: String,
        /// One workflow only
        #[arg(long, value_name = "NAME")]
        workflow: Option<String>,
        /// As one JSON document
        #[arg(long)]
        json: bool,
    },
    /// The console over SSH for a team: operators log in with their keys (SPEC 17)
    Serve {
        /// Address for SSH (port 0 picks a free one; the first line printed says which)
        #[arg(long, default_value = "0.0.0.0:2222", value_name = "ADDR")]
        listen: String,
        /// The server's host key (made on first start); else $XDG_STATE_HOME/settle/host_key
        #[arg(long, value_name = "FILE")]
        host_key: Option<PathBuf>,
        /// Also serve Prometheus metrics at http://ADDR/metrics and /healthz
        #[arg(long, value_name = "ADDR")]
        metrics: Option<String>,
        /// The most sessions open at once
        #[arg(long, default_value_t = 32, value_name = "N")]
        max_sessions: usize,
        /// A console without a key for this long ends (warned a minute before), e.g. 30m
        #[arg(long, default_value = "30m", value_name = "DUR")]
        idle_timeout: String,
    },
    /// Print a shell's completions for settle, e.g. settle completions bash > /etc/bash_completion.d/settle
    Completions {
        /// The shell
        shell: Shell,
    },
    /// Print settle's manual page (roff), e.g. settle man > ~/.local/share/man/man1/settle.1
    Man {
        /// Write a page per command into this folder instead (settle.1, settle-record.1, ...)
        #[arg(long, value_name = "DIR")]
        dir: Option<PathBuf>,
    },
}

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

/// The operations a staff action is for: keys, or every operation a filter matches (SPEC 16).
#[derive(Args, Debug)]
pub struct Many {
    /// The operations' keys
    #[arg(
        required_unless_present = "filter",
        conflicts_with = "filter",
        value_name = "KEY"
    )]
    pub keys: Vec<String>,
    /// Every operation SPEC 12's filter matches, e.g. 'dest:sms state:unknown'
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Every option of every command has a help line (issue 23: the help is a reference).
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
        for line in [
            "settle sim --db sqlite://a.db",
            "settle stats --as bob",
            "settle man --config x",
        ] {
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
