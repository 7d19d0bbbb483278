//! Every command of the command line (manual: The command line), with its options and their help lines.

use std::path::PathBuf;

use clap::Subcommand;

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
    Sim(super::tools::SimArgs),
    /// Run due operations of the HTTP destinations in the config (Ctrl-C stops cleanly)
    Dispatch(super::upkeep::DispatchArgs),
    /// Create or migrate the database
    Init,
    /// Record an intended operation, before anything is sent (exit 3: do not send)
    Record(super::writes::RecordArgs),
    /// Start the next attempt of an operation you send yourself: prints its number when you may
    /// send now, exits 3 with why when you may not
    Start(super::writes::StartArgs),
    /// Record an attempt's outcome
    Attempt(super::writes::AttemptArgs),
    /// Record intents and attempts from JSON lines (a file, or - for stdin)
    Ingest(super::writes::IngestArgs),
    /// List exceptions, oldest first (or everything with --all)
    List(super::reads::ListArgs),
    /// Show one operation: payload (redacted), attempts, history, safe next step
    Show(super::reads::ShowArgs),
    /// Claim operations to work them (KEY... or --where FILTER)
    Claim(super::staff::ClaimArgs),
    /// Release your claims (KEY... or --where FILTER)
    Release(super::staff::ReleaseArgs),
    /// Settle an unknown outcome: found at the destination (with its reference) or absent
    Reconcile(super::staff::ReconcileArgs),
    /// Send again with the same key and a fresh attempt budget (KEY... or --where FILTER)
    Retry(super::staff::RetryArgs),
    /// Close with a resolution and a note (KEY... or --where FILTER)
    Close(super::staff::CloseArgs),
    /// Correct a rejected or failed request: sent once under a new key, which then answers for
    /// the old one (KEY... or --where FILTER)
    Correct(super::correct::CorrectArgs),
    /// Add a note to an operation's history
    Note(super::staff::NoteArgs),
    /// Take back an action of yours (its id, or --last) within the undo window: each item it
    /// changed that nothing has changed since is as it was before
    Undo(super::undo::UndoArgs),
    /// Pause a workflow (or with --destination a destination): no attempt of it starts
    Pause(super::staff::PauseArgs),
    /// Resume a paused workflow (or with --destination a destination)
    Resume(super::staff::ResumeArgs),
    /// Open a destination's breaker by hand (nothing is sent there, not even a probe, until it
    /// is closed), or close it (sending resumes at its starting pace)
    Breaker(super::staff::BreakerArgs),
    /// Look operations up at their destination now (KEY... or --where FILTER), then with your
    /// confirmation reconcile each found or absent one by what it answered
    Lookup(super::upkeep::LookupArgs),
    /// Sweep attempts that outlived their timeout (retried where the destination deduplicates,
    /// else unknown)
    Sweep,
    /// Remove terminal operations past [retention]; their keys answer until key_horizon
    Prune(super::upkeep::PruneArgs),
    /// A run of a workflow: `run show RUN` gives its state, its safe next step and
    /// its steps in order; `run claim|release RUN`, `run note RUN TEXT` and
    /// `run close RUN --resolution R --note TEXT` act on the run as a whole
    Run(super::reads::RunArgs),
    /// The runs, newest first: run, workflow, state, steps, done, current step, since,
    /// next step; `--where state:stalled` the failures between steps, oldest first
    Runs(super::reads::RunsArgs),
    /// Totals by state, exceptions, the oldest, what is paused and why, work due and the dispatchers heard from
    Stats(super::reads::StatsArgs),
    /// The exceptions by group (workflow, destination, state, the reason with its numbers and
    /// ids masked), the largest first, with each group's id, owner, safe next step and the filter
    /// that lists exactly its items
    Groups(super::groups::GroupsArgs),
    /// Send a test message through a channel and print its answer
    Notify {
        #[command(subcommand)]
        what: super::notices::NotifyCmd,
    },
    /// The latest messages to the teams' channels, newest first, with their delivery
    Notifications(super::notices::NotificationsArgs),
    /// The review after a release: exception age, opened and resolved per day, time to resolve, duplicates
    Report(super::reads::ReportArgs),
    /// The console over SSH for a team: operators log in with their keys
    Serve(super::serving::ServeArgs),
    /// Bearer tokens for automations of the HTTP API
    Token {
        #[command(subcommand)]
        what: super::serving::TokenCmd,
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

/// The shells `settle completions` writes for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Shell {
    Bash,
    Zsh,
    Fish,
}
