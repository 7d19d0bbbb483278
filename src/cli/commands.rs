//! Every command of the command line (manual: The command line), with its options and their help lines.

use std::path::PathBuf;

use clap::Subcommand;

use super::targets::{Many, PauseTarget};

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
        /// A fault for every create: reject, drop, late, unavailable, error, reject-nul, echo or lost
        #[arg(long, value_name = "FAULT")]
        fault: Option<String>,
        /// Chance of a random fault per create (0 to 1), from a schedule seeded by --seed
        #[arg(long, default_value_t = 0.0, value_name = "P")]
        fault_rate: f64,
        /// The faults the random schedule draws from, e.g. drop,late,error [default: reject,
        /// drop, late, unavailable, error]
        #[arg(long, value_name = "LIST", value_delimiter = ',')]
        fault_kinds: Vec<String>,
        /// The seed of the random fault schedule (the same seed, the same faults)
        #[arg(long, default_value_t = 1, value_name = "N")]
        seed: u64,
        /// How long a `late` answer waits
        #[arg(long, default_value = "10s", value_name = "DUR")]
        late: String,
        /// Apply the fault only to the first request of each key
        #[arg(long)]
        fault_first_only: bool,
        /// How long every create takes, e.g. 20ms, or a range drawn from per request, e.g.
        /// 5ms..50ms
        #[arg(long, default_value = "0s", value_name = "DUR[..DUR]")]
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
        /// The run this step belongs to: one execution of the workflow for one case, e.g.
        /// onb-42 (given when the step is first recorded)
        #[arg(long, value_name = "ID")]
        run: Option<String>,
        /// Answer as one JSON document: key, state, attempt, send, done, reference, run, next_step
        #[arg(long)]
        json: bool,
    },
    /// Start the next attempt of an operation you send yourself: prints its number when you may
    /// send now, exits 3 with why when you may not
    Start {
        /// The operation's key
        #[arg(long)]
        key: String,
        /// Answer as one JSON document: key, state, attempt, send, done, reference, run, next_step
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
        /// Answer as one JSON document: key, state, attempt, send, done, reference, run, next_step
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
        /// The filter, e.g. 'dest:sms state:unknown age>2h -claimed:any'
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
    /// Remove terminal operations past [retention]; their keys answer until key_horizon
    Prune {
        /// Count what would be removed; remove nothing
        #[arg(long)]
        dry_run: bool,
        /// First append every removed operation here, a `show --json` document a line
        #[arg(long, value_name = "FILE")]
        archive: Option<PathBuf>,
        /// Answer as one JSON document: the cutoffs, the counts pruned, archived and freed
        #[arg(long)]
        json: bool,
    },
    /// A run of a workflow: `run show RUN` gives its state, its safe next step and
    /// its steps in order; `run claim|release RUN`, `run note RUN TEXT` and
    /// `run close RUN --resolution R --note TEXT` act on the run as a whole
    Run {
        /// What to do with the run
        #[arg(value_enum)]
        verb: RunVerb,
        /// The run's id, as the automation named it (record --run)
        run: String,
        /// The note's text (run note)
        text: Option<String>,
        /// How it ended (run close): abandoned or done_elsewhere
        #[arg(long, value_name = "R")]
        resolution: Option<String>,
        /// What was done (run close)
        #[arg(long, value_name = "TEXT")]
        note: Option<String>,
        /// As one JSON document: run, workflow, state, since, next_step, claimed_by, steps
        #[arg(long)]
        json: bool,
    },
    /// The runs, newest first: run, workflow, state, steps, done, current step, since,
    /// next step; `--where state:stalled` the failures between steps, oldest first
    Runs {
        /// Only the runs this holds: state:running|blocked|stalled|done|closed, workflow:W, run:ID
        #[arg(long = "where", value_name = "FILTER", default_value = "")]
        filter: String,
        /// At most this many
        #[arg(long, default_value_t = 100, value_name = "N")]
        limit: usize,
        /// As one JSON array
        #[arg(long)]
        json: bool,
    },
    /// Totals by state, exceptions, oldest exception, paused workflows
    Stats {
        /// As one JSON document
        #[arg(long)]
        json: bool,
    },
    /// The review after a release: exception age, opened and resolved per day, time to resolve, duplicates
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

/// The shells `settle completions` writes for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Shell {
    Bash,
    Zsh,
    Fish,
}
