//! The command line (SPEC section 12): clap definitions and one handler per command.

mod args;
mod lookup;
mod output;

pub use args::command;
use args::{Cli, Cmd, Many};

use std::time::Duration;

use tokio::io::AsyncBufRead;

use crate::config::{Config, DEFAULT_DATABASE};
use crate::domain::{Outcome, Resolution, State};
use crate::error::{Error, Result};
use crate::ledger::{AttemptReport, Intent, Ledger, ListFilter, Recorded, Scope, StaffAction};

pub fn print_stats(stats: &crate::ledger::Stats) {
    output::stats(stats);
}

/// A message fit for stderr and the log: no sensitive value (a rejected argument may hold one), no
/// control or escape sequence.
fn clean(text: &str) -> String {
    crate::domain::escape_text(&crate::domain::redact::redact_text(text)).into_owned()
}

/// clap's error as one line: its first paragraph (which names what is missing or wrong), without
/// the usage that follows.
fn usage_error(e: &clap::Error) -> String {
    let text = e.to_string();
    let first: Vec<&str> = text
        .lines()
        .take_while(|l| !l.trim().is_empty())
        .map(str::trim)
        .collect();
    let line = first.join(" ");
    let line = line.trim_start_matches("error: ");
    if line.is_empty() {
        "bad usage".into()
    } else {
        line.to_string()
    }
}

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
            let text = clean(&e.to_string());
            tracing::warn!(error = %text, "command failed");
            crate::tell!("settle: {text}");
            e.exit_code()
        }
    }
}

/// A command sent by `ssh HOST COMMAND` to `settle serve` (SPEC 17): `stats`, `list` and `show`,
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
        Some(Cmd::Stats { .. } | Cmd::List { .. } | Cmd::Show { .. } | Cmd::Report { .. }) => {}
        _ => {
            crate::tell!(
                "settle: over SSH this server answers stats, list, show and report; ssh -t opens the console for the rest"
            );
            return 2;
        }
    }
    let command = cli.command.as_ref().expect("matched above");
    match dispatch(&ledger, command, &Some(who.name.clone())).await {
        Ok(code) => code,
        Err(e) => {
            crate::tell!("settle: {}", clean(&e.to_string()));
            e.exit_code()
        }
    }
}

/// A command line as a POSIX shell splits it: words, 'single' and "double" quotes, backslash.
fn split_words(line: &str) -> Result<Vec<String>> {
    let mut words = Vec::new();
    let mut word: Option<String> = None;
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        match c {
            c if c.is_whitespace() => {
                if let Some(w) = word.take() {
                    words.push(w);
                }
            }
            '\'' => {
                let w = word.get_or_insert_with(String::new);
                loop {
                    match chars.next() {
                        Some('\'') => break,
                        Some(c) => w.push(c),
                        None => return Err(invalid("unmatched ' in the command".into())),
                    }
                }
            }
            '"' => {
                let w = word.get_or_insert_with(String::new);
                loop {
                    match chars.next() {
                        Some('"') => break,
                        Some('\\') => match chars.next() {
                            Some(c @ ('"' | '\\' | '$' | '`')) => w.push(c),
                            Some(c) => {
                                w.push('\\');
                                w.push(c);
                            }
                            None => return Err(invalid("unmatched \" in the command".into())),
                        },
                        Some(c) => w.push(c),
                        None => return Err(invalid("unmatched \" in the command".into())),
                    }
                }
            }
            '\\' => {
                if let Some(c) = chars.next() {
                    word.get_or_insert_with(String::new).push(c);
                }
            }
            c => word.get_or_insert_with(String::new).push(c),
        }
    }
    words.extend(word);
    Ok(words)
}

/// The operator: `--as`, else `SETTLE_OPERATOR`, else `$USER`; checked before anything uses it
/// (the log's first line names it). `None` when none is set.
fn operator(cli: &Cli) -> Result<Option<String>> {
    let env = |name: &str| std::env::var(name).ok().filter(|v| !v.is_empty());
    let (name, from) = match &cli.globals.operator {
        Some(n) => (n.clone(), "--as"),
        None => match env("SETTLE_OPERATOR") {
            Some(n) => (n, "SETTLE_OPERATOR"),
            None => match env("USER") {
                Some(n) => (n, "USER"),
                None => return Ok(None),
            },
        },
    };
    crate::domain::validate_operator(&name).map_err(|e| invalid(format!("{from}: {e}")))?;
    Ok(Some(name))
}

/// A staff action on one operation (`what` says what it did), or on many (SPEC 16): the set is
/// chosen, frozen at a preview grouped by reason, confirmed (`--yes`, or `y` on a terminal), then
/// acted on item by item with one batch id; Ctrl-C stops between items. Exit 3 when any chosen
/// item was left alone.
async fn act_on(
    ledger: &Ledger,
    many: &Many,
    action: StaffAction,
    actor: &str,
    what: &str,
    verb: &str,
    pace: Option<Duration>,
) -> Result<i32> {
    if let Some(key) = many.single() {
        let a = ledger.staff(key, actor, action).await?;
        output::applied(&a, what);
        return Ok(0);
    }
    let keys = chosen_keys(ledger, many, actor).await?;
    let preview = ledger.bulk_preview(&keys, &action, actor).await?;
    if many.dry_run || !many.json {
        output::bulk_preview(verb, &preview, many.json && many.dry_run);
    }
    let items: Vec<(String, StaffAction)> = preview
        .eligible
        .iter()
        .map(|k| (k.clone(), action.clone()))
        .collect();
    let how = Confirm {
        dry_run: many.dry_run,
        yes: many.yes,
        json: many.json,
    };
    confirm_and_apply(ledger, &preview, &items, actor, verb, how, pace).await
}

/// The keys a staff action is for: those given, or every operation the filter matches now (the
/// exceptions, or every state when the filter names states).
async fn chosen_keys(ledger: &Ledger, many: &Many, actor: &str) -> Result<Vec<String>> {
    Ok(match &many.filter {
        Some(text) => {
            let query = crate::domain::filter::Filter::parse(text).map_err(invalid)?;
            let scope = if names_states(&query) {
                Scope::All
            } else {
                Scope::Exceptions
            };
            let filter = ListFilter {
                query,
                scope,
                ..Default::default()
            };
            ledger.matching_keys(&filter, actor).await?
        }
        None => many.keys.clone(),
    })
}

/// How a bulk action goes on after its preview.
#[derive(Clone, Copy)]
struct Confirm {
    dry_run: bool,
    yes: bool,
    json: bool,
}

/// After a preview: stop there (`--dry-run`), or ask (on a terminal; `--yes` otherwise), then
/// act item by item with progress on a terminal and Ctrl-C stopping between items, and print
/// the summary. Exit 3 when anything chosen was left alone.
async fn confirm_and_apply(
    ledger: &Ledger,
    preview: &crate::ledger::BulkPreview,
    items: &[(String, StaffAction)],
    actor: &str,
    verb: &str,
    how: Confirm,
    pace: Option<Duration>,
) -> Result<i32> {
    use std::io::IsTerminal;
    let left_alone = preview.matched - preview.eligible.len();
    if how.dry_run || items.is_empty() {
        return Ok(if left_alone > 0 && !how.dry_run { 3 } else { 0 });
    }
    if !how.yes {
        if !std::io::stdin().is_terminal() {
            return Err(invalid(
                "a bulk action without a terminal needs --yes (--dry-run shows what it would do)"
                    .into(),
            ));
        }
        crate::tell!("go on with {} item(s)? [y/N]", items.len());
        let mut answer = String::new();
        let _ = std::io::stdin().read_line(&mut answer);
        if !answer.trim().eq_ignore_ascii_case("y") {
            say!("nothing changed");
            return Ok(0);
        }
    }
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    {
        let stop = stop.clone();
        tokio::spawn(async move {
            if tokio::signal::ctrl_c().await.is_ok() {
                stop.store(true, std::sync::atomic::Ordering::SeqCst);
            }
        });
    }
    let tty = std::io::stderr().is_terminal();
    let report = ledger
        .bulk_apply_each(items, actor, &stop, pace, |i, n| {
            if tty {
                eprint!("\r{verb} {i}/{n}");
            }
        })
        .await?;
    if tty {
        eprintln!();
    }
    output::bulk_report(verb, &report, how.json);
    let all = report.changed_meanwhile.is_empty() && report.not_reached.is_empty();
    Ok(if all && left_alone == 0 { 0 } else { 3 })
}

/// `reconcile --from FILE` (SPEC 16): what the destination's own records say, as CSV
/// (`key,outcome,reference` with a header) or JSON lines (`{"key":..,"outcome":"found"|"absent",
/// "reference":..}`). A malformed line is reported and left out; the preview says per line what
/// will happen (an unknown key or an item in the wrong state is reported, not applied).
async fn reconcile_from(
    ledger: &Ledger,
    file: &std::path::Path,
    how: Confirm,
    actor: &str,
) -> Result<i32> {
    let text = std::fs::read_to_string(file)
        .map_err(|e| invalid(format!("cannot read {}: {e}", file.display())))?;
    let (lines, problems) = reconcile_lines(&text);
    for (n, why) in &problems {
        crate::tell!("line {n}: {}", output::esc(why));
    }
    let items: Vec<(String, StaffAction)> = lines
        .iter()
        .map(|(_, k, a)| (k.clone(), a.clone()))
        .collect();
    let preview = ledger.bulk_preview_each(&items, actor).await?;
    if how.json && how.dry_run {
        output::json(&preview);
    } else {
        let why_of = |key: &str| {
            preview
                .refused
                .iter()
                .find(|(_, keys)| keys.iter().any(|k| k == key))
                .map(|(why, _)| why.clone())
        };
        for (n, key, action) in &lines {
            let what = match action {
                StaffAction::ReconcileFound { reference, .. } => format!("found {reference}"),
                _ => "absent".to_string(),
            };
            let verdict =
                why_of(key).map_or("will be reconciled".into(), |w| format!("left alone: {w}"));
            say!(
                "line {n}: {}: {}: {verdict}",
                output::esc(key),
                output::esc(&what)
            );
        }
        output::bulk_preview("reconcile", &preview, false);
    }
    let eligible: Vec<(String, StaffAction)> = items
        .into_iter()
        .filter(|(k, _)| preview.eligible.contains(k))
        .collect();
    let code =
        confirm_and_apply(ledger, &preview, &eligible, actor, "reconcile", how, None).await?;
    Ok(if problems.is_empty() { code } else { 2 })
}

/// The lines of a reconcile file: (line number, key, action), and the malformed ones with why.
#[allow(clippy::type_complexity)]
fn reconcile_lines(text: &str) -> (Vec<(usize, String, StaffAction)>, Vec<(usize, String)>) {
    let mut lines = Vec::new();
    let mut problems = Vec::new();
    let mut rows = text
        .lines()
        .enumerate()
        .map(|(i, l)| (i + 1, l.trim()))
        .filter(|(_, l)| !l.is_empty());
    let Some((first_n, first)) = rows.next() else {
        return (lines, problems);
    };
    let json = first.starts_with('{');
    let note = || Some("reconciled from the destination's records".to_string());
    let take = |n: usize, key: &str, outcome: &str, reference: Option<&str>| {
        let action = match (outcome, reference.filter(|r| !r.is_empty())) {
            ("found", Some(r)) => StaffAction::ReconcileFound {
                reference: r.to_string(),
                note: note(),
            },
            ("found", None) => return Err((n, "found needs a reference".to_string())),
            ("absent", _) => StaffAction::ReconcileAbsent { note: note() },
            (other, _) => {
                let other = crate::domain::escape_text(other);
                return Err((n, format!("outcome '{other}': use found or absent")));
            }
        };
        crate::domain::validate_key(key).map_err(|e| (n, e))?;
        Ok((n, key.to_string(), action))
    };
    let mut keep = |r: std::result::Result<(usize, String, StaffAction), (usize, String)>| match r {
        Ok(line) => lines.push(line),
        Err(p) => problems.push(p),
    };
    if json {
        for (n, l) in std::iter::once((first_n, first)).chain(rows) {
            match serde_json::from_str::<serde_json::Value>(l) {
                Ok(v) => match (v["key"].as_str(), v["outcome"].as_str()) {
                    (Some(k), Some(o)) => keep(take(n, k, o, v["reference"].as_str())),
                    _ => keep(Err((n, "a line needs key and outcome".into()))),
                },
                Err(e) => keep(Err((n, format!("not JSON: {e}")))),
            }
        }
    } else {
        let header: Vec<String> = first.split(',').map(|c| c.trim().to_lowercase()).collect();
        if header != ["key", "outcome", "reference"] {
            keep(Err((
                first_n,
                "the header must be key,outcome,reference".into(),
            )));
            return (lines, problems);
        }
        for (n, l) in rows {
            let cells: Vec<&str> = l.split(',').map(|c| c.trim().trim_matches('"')).collect();
            match cells.as_slice() {
                [k, o] => keep(take(n, k, o, None)),
                [k, o, r] => keep(take(n, k, o, Some(r))),
                _ => keep(Err((n, "a row is key,outcome,reference".into()))),
            }
        }
    }
    (lines, problems)
}

/// `--rate N/s` (or `N`): the time between two items, for N from 0.001 to 10,000 a second.
fn parse_rate(text: &str) -> Result<Duration> {
    let n = text.strip_suffix("/s").unwrap_or(text).trim();
    match n.parse::<f64>() {
        Ok(r) if (0.001..=10_000.0).contains(&r) => Ok(Duration::from_secs_f64(1.0 / r)),
        _ => Err(invalid(format!(
            "--rate '{}': write items a second, e.g. 10/s (from 0.001 to 10000)",
            crate::domain::escape_text(text)
        ))),
    }
}

/// `--payload`'s text: as given, or read from `@FILE` or `-` (stdin). A file or input much larger
/// than any payload within `limit` could be is refused before it is read whole.
fn payload_text(arg: &str, limit: usize) -> Result<std::borrow::Cow<'_, str>> {
    use std::io::Read as _;
    // whitespace and escapes may make the text larger than the payload it holds
    let most = limit.saturating_mul(4) + 64 * 1024;
    let too_big = |bytes: usize| {
        invalid(format!(
            "--payload: the input is {}; a payload may be at most {} (max_payload)",
            crate::domain::payload::size_text(bytes),
            crate::domain::payload::size_text(limit)
        ))
    };
    let (reader, what): (Box<dyn std::io::Read>, String) = if arg == "-" {
        (Box::new(std::io::stdin()), "stdin".into())
    } else if let Some(path) = arg.strip_prefix('@') {
        let file = std::fs::File::open(path)
            .map_err(|e| invalid(format!("--payload: cannot read {path}: {e}")))?;
        (Box::new(file), path.to_string())
    } else {
        return Ok(std::borrow::Cow::Borrowed(arg));
    };
    let mut bytes = Vec::new();
    reader
        .take(most as u64 + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| invalid(format!("--payload: cannot read {what}: {e}")))?;
    if bytes.len() > most {
        return Err(too_big(bytes.len()));
    }
    String::from_utf8(bytes)
        .map(std::borrow::Cow::Owned)
        .map_err(|_| invalid(format!("--payload: {what} is not UTF-8")))
}

/// `settle completions SHELL`: the shell's completion script, from the same command line as
/// the help.
fn completions(shell: args::Shell) -> Result<i32> {
    use clap_complete::Shell as S;
    let shell = match shell {
        args::Shell::Bash => S::Bash,
        args::Shell::Zsh => S::Zsh,
        args::Shell::Fish => S::Fish,
    };
    let mut out = Vec::new();
    clap_complete::generate(shell, &mut command(), "settle", &mut out);
    write_stdout(&out)
}

/// `settle man`: the manual page (roff) on stdout; with `--dir DIR`, one page per command there
/// too (settle.1, settle-record.1, ...), as `man settle-record` finds them.
fn man_page(dir: Option<&std::path::Path>) -> Result<i32> {
    let failed = |e: std::io::Error| invalid(format!("cannot write the manual pages: {e}"));
    match dir {
        Some(dir) => {
            clap_mangen::generate_to(command(), dir).map_err(failed)?;
            say!("manual pages written to {}", dir.display());
            Ok(0)
        }
        None => {
            let mut out = Vec::new();
            clap_mangen::Man::new(command())
                .render(&mut out)
                .map_err(failed)?;
            write_stdout(&out)
        }
    }
}

fn write_stdout(bytes: &[u8]) -> Result<i32> {
    use std::io::Write as _;
    let mut stdout = crate::out::stdout();
    if let Err(e) = stdout.write_all(bytes).and_then(|()| stdout.flush()) {
        crate::stdout_failed(&e);
        return Err(Error::Invalid(format!("cannot write to stdout: {e}")));
    }
    Ok(0)
}

/// A filter naming states looks beyond the exceptions.
fn names_states(query: &crate::domain::filter::Filter) -> bool {
    query
        .terms
        .iter()
        .any(|t| !t.negated && matches!(t.matches, crate::domain::filter::Match::States(_)))
}

fn required(operator: &Option<String>) -> Result<&str> {
    operator.as_deref().ok_or_else(|| {
        invalid("this command records who acted: pass --as NAME or set SETTLE_OPERATOR".into())
    })
}

/// A duration argument, within the range its use makes sense of.
fn duration_arg(flag: &str, text: &str, min: Duration, max: Duration) -> Result<Duration> {
    crate::domain::time::parse_duration_within(text, min, max)
        .map_err(|e| invalid(format!("{flag}: {e}")))
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

fn invalid(text: String) -> Error {
    Error::Invalid(text)
}

async fn execute(cli: Cli) -> Result<i32> {
    // what needs no config and no database
    match &cli.command {
        Some(Cmd::Completions { shell }) => return completions(*shell),
        Some(Cmd::Man { dir }) => return man_page(dir.as_deref()),
        _ => {}
    }
    let config = Config::discover(cli.globals.config.as_deref())?;
    crate::logging::init(&config);
    let actor = operator(&cli)?;
    let Some(command) = &cli.command else {
        let who = required(&actor)?.to_string();
        let ledger =
            Ledger::open_console(&database_url(&cli, &config, DEFAULT_DATABASE), config).await?;
        tracing::info!(command = "console", operator = %who, "start");
        let result = crate::console::run(ledger.clone(), &who).await;
        ledger.close().await;
        return result.map(|()| 0);
    };
    if let Cmd::Sim {
        listen,
        state,
        no_dedupe,
        key_retention,
        fault,
        fault_rate,
        seed,
        late,
        fault_first_only,
        latency,
        require_header,
        answer,
        exists_409,
    } = command
    {
        if ![200, 201, 204].contains(answer) {
            return Err(invalid("--answer must be 200, 201 or 204".into()));
        }
        let require_header = match require_header {
            Some(h) => match h.split_once(':') {
                Some((name, value)) if !name.trim().is_empty() => {
                    Some((name.trim().to_ascii_lowercase(), value.trim().to_string()))
                }
                _ => {
                    return Err(invalid(
                        "--require-header reads 'NAME: VALUE', e.g. 'Authorization: Bearer X'"
                            .into(),
                    ));
                }
            },
            None => None,
        };
        if !(0.0..=1.0).contains(fault_rate) {
            return Err(invalid("--fault-rate must be between 0 and 1".into()));
        }
        let profile = crate::sim::Profile {
            dedupe: !no_dedupe,
            key_retention: duration_arg(
                "--key-retention",
                key_retention,
                Duration::from_secs(1),
                Duration::from_secs(3650 * 86_400),
            )?,
            fault: fault
                .as_deref()
                .map(crate::sim::Fault::parse)
                .transpose()
                .map_err(invalid)?,
            fault_rate: *fault_rate,
            seed: *seed,
            late: duration_arg("--late", late, Duration::ZERO, Duration::from_secs(3600))?,
            fault_first_only: *fault_first_only,
            latency: duration_arg(
                "--latency",
                latency,
                Duration::ZERO,
                Duration::from_secs(3600),
            )?,
            require_header,
            answer: *answer,
            exists_409: *exists_409,
        };
        crate::sim::run(listen, state.clone(), profile).await?;
        return Ok(0);
    }
    if let Cmd::Demo { reset, live } = command {
        let url = database_url(&cli, &Config::default(), crate::demo::DEMO_DATABASE);
        // the demo is a sandbox: without an operator it shows the console as alice
        let who = actor.as_deref().unwrap_or("alice");
        return crate::demo::run(&url, config, *reset, *live, who).await;
    }
    if let Cmd::Serve {
        listen,
        host_key,
        metrics,
        max_sessions,
        idle_timeout,
    } = command
    {
        let options = crate::serve::Options {
            listen: listen.clone(),
            host_key: host_key
                .clone()
                .unwrap_or_else(crate::serve::default_host_key),
            metrics: metrics.clone(),
            max_sessions: (*max_sessions).max(1),
            idle: duration_arg(
                "--idle-timeout",
                idle_timeout,
                Duration::from_secs(1),
                Duration::from_secs(7 * 86_400),
            )?,
            config_path: Config::discover_path(cli.globals.config.as_deref()),
        };
        crate::serve::Operators::from_config(&config)?;
        let ledger =
            Ledger::open_server(&database_url(&cli, &config, DEFAULT_DATABASE), config).await?;
        tracing::info!(command = "serve", "start");
        let result = crate::serve::run(ledger.clone(), options).await;
        ledger.close().await;
        return result.map(|()| 0);
    }
    // Validate what can be validated before touching the database.
    let ledger = Ledger::open(&database_url(&cli, &config, DEFAULT_DATABASE), config).await?;
    // the variant's name only: its arguments may hold notes and reasons
    let name = format!("{command:?}");
    let name: String = name
        .chars()
        .take_while(char::is_ascii_alphanumeric)
        .collect::<String>()
        .to_lowercase();
    tracing::info!(command = %name, operator = %actor.as_deref().unwrap_or("-"), "start");
    let code = dispatch(&ledger, command, &actor).await;
    ledger.close().await;
    code
}

async fn dispatch(ledger: &Ledger, command: &Cmd, operator: &Option<String>) -> Result<i32> {
    // readers see claims as this operator's (or nobody's); writers must name one
    let viewer = operator.as_deref().unwrap_or("");
    match command {
        Cmd::Demo { .. }
        | Cmd::Sim { .. }
        | Cmd::Serve { .. }
        | Cmd::Completions { .. }
        | Cmd::Man { .. } => {
            unreachable!("handled before the database is opened")
        }
        Cmd::Dispatch {
            concurrency,
            until_settled,
        } => {
            let options = crate::dispatch::Options {
                concurrency: *concurrency,
                until_settled: *until_settled,
                ..Default::default()
            };
            let t = crate::dispatch::run(ledger.clone(), options).await?;
            say!(
                "dispatched {} attempt(s), {} retries, {} succeeded, {} settled by lookup, {} waited for the retry budget",
                t.attempts,
                t.retries,
                t.succeeded,
                t.looked_up,
                t.budget_waits
            );
        }
        Cmd::Report {
            since,
            workflow,
            json,
        } => {
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
            if *json {
                output::json(&review);
            } else {
                output::review(&review, &scope);
            }
        }
        Cmd::Init => {
            say!(
                "{} is ready (schema version {})",
                ledger.database(),
                crate::store::SCHEMA_VERSION
            );
        }
        Cmd::Record {
            key,
            workflow,
            step,
            destination,
            action,
            payload,
            json,
        } => {
            let text = payload_text(payload, ledger.config().max_payload)?;
            let payload = crate::domain::payload::parse_payload(&text)
                .map_err(|e| invalid(format!("--payload is not valid JSON: {e}")))?;
            let intent = Intent {
                key: key.clone(),
                workflow: workflow.clone(),
                step: step.clone(),
                destination: destination.clone(),
                action: action.clone(),
                payload,
            };
            let r = match ledger.record(&intent, required(operator)?).await {
                Ok(r) => r,
                Err(e @ Error::Refused(_)) => {
                    // new contents under a terminal key: the old record stands, nothing to send
                    if *json && let Ok(detail) = ledger.show(key, viewer).await {
                        output::step(&detail, None, false);
                    }
                    return Err(e);
                }
                Err(e) => return Err(e),
            };
            let detail = ledger.show(key, viewer).await?;
            let state = detail.op.state;
            // a script that checks the exit code goes on to `start` only after exit 0
            let refusal = match r {
                Recorded::Conflict => Some(format!(
                    "conflict: new contents kept beside the old, never sent (settle show {})",
                    output::esc(key)
                )),
                Recorded::Unchanged if state.is_terminal() => Some(format!(
                    "already {state}: nothing to send{}",
                    detail
                        .op
                        .reference
                        .as_deref()
                        .map(|r| format!(" (reference {})", output::esc(r)))
                        .unwrap_or_default()
                )),
                _ => None,
            };
            if *json {
                output::step(&detail, None, refusal.is_none());
            }
            if let Some(why) = refusal {
                crate::tell!("settle: {}: {why}", output::esc(key));
                return Ok(3);
            }
            if !*json {
                let key = output::esc(key);
                match r {
                    Recorded::Created => say!("{key}: recorded ({state})"),
                    _ => say!(
                        "{key}: already recorded with these contents ({state}); nothing changed"
                    ),
                }
            }
        }
        Cmd::Start { key, json } => {
            let started = ledger.start_attempt(key, required(operator)?).await;
            let detail = ledger.show(key, viewer).await?;
            // only a start this call made lets the caller send
            let send = matches!(&started, Ok(a) if a.kind.is_some() && a.to == State::InFlight);
            let attempt = send.then_some(detail.op.attempts);
            if *json {
                output::step(&detail, attempt, send);
            } else if let Some(n) = attempt {
                say!("{n}");
            }
            match started {
                Ok(_) if send => {}
                Ok(a) => {
                    crate::tell!("settle: {}: {}: not started", output::esc(key), a.to);
                    return Ok(3);
                }
                Err(e) => return Err(e),
            }
        }
        Cmd::Attempt {
            key,
            outcome,
            attempt,
            reference,
            error,
            http_status,
            retry_after,
            json,
        } => {
            let report = AttemptReport {
                key: key.clone(),
                attempt: *attempt,
                outcome: Some(Outcome::parse(outcome).map_err(invalid)?),
                reference: reference.clone(),
                error: error.clone(),
                http_status: *http_status,
                retry_after: retry_after
                    .as_deref()
                    .map(|t| {
                        duration_arg(
                            "--retry-after",
                            t,
                            Duration::ZERO,
                            Duration::from_secs(365 * 86_400),
                        )
                    })
                    .transpose()?,
            };
            let a = ledger.report_attempt(&report, required(operator)?).await?;
            if *json {
                let detail = ledger.show(key, viewer).await?;
                let n = attempt.unwrap_or_else(|| {
                    detail
                        .attempt_log
                        .last()
                        .map_or(detail.op.attempts, |l| l.n)
                });
                output::step(&detail, Some(n), false);
            } else {
                output::applied(&a, "attempt recorded");
            }
        }
        Cmd::Ingest { file } => return ingest(ledger, file, required(operator)?).await,
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
            let names_states = names_states(&query);
            let filter = ListFilter {
                query,
                scope: if *all || state.is_some() || names_states {
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
        Cmd::Show { key, json } => {
            let detail = ledger.show(key, viewer).await?;
            if *json {
                output::json(&detail);
            } else {
                output::show(&detail, ledger.now());
            }
        }
        Cmd::Claim {
            many,
            force,
            reason,
        } => {
            let force_reason = if *force { reason.clone() } else { None };
            let what = format!("claimed by {}", output::esc(viewer));
            let action = StaffAction::Claim { force_reason };
            return act_on(
                ledger,
                many,
                action,
                required(operator)?,
                &what,
                "claim",
                None,
            )
            .await;
        }
        Cmd::Release { many } => {
            let action = StaffAction::Release;
            return act_on(
                ledger,
                many,
                action,
                required(operator)?,
                "released",
                "release",
                None,
            )
            .await;
        }
        Cmd::Reconcile {
            key,
            found,
            absent: _,
            note,
            from,
            dry_run,
            yes,
            json,
        } => {
            if let Some(file) = from {
                let how = Confirm {
                    dry_run: *dry_run,
                    yes: *yes,
                    json: *json,
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
            let a = ledger.staff(key, required(operator)?, action).await?;
            output::applied(&a, "reconciled");
        }
        Cmd::Retry { many, note, rate } => {
            let action = StaffAction::Retry { note: note.clone() };
            let what = "will be retried with the same key";
            let pace = rate.as_deref().map(parse_rate).transpose()?;
            return act_on(
                ledger,
                many,
                action,
                required(operator)?,
                what,
                "retry",
                pace,
            )
            .await;
        }
        Cmd::Close {
            many,
            resolution,
            reference,
            superseded_by,
            note,
        } => {
            let action = StaffAction::Close {
                resolution: Resolution::parse(resolution).map_err(invalid)?,
                reference: reference.clone(),
                superseded_by: superseded_by.clone(),
                note: note.clone(),
            };
            return act_on(
                ledger,
                many,
                action,
                required(operator)?,
                "closed",
                "close",
                None,
            )
            .await;
        }
        Cmd::Note { key, text } => {
            let a = ledger
                .staff(
                    key,
                    required(operator)?,
                    StaffAction::Note { text: text.clone() },
                )
                .await?;
            output::applied(&a, "note added");
        }
        Cmd::Pause { what, reason } => {
            let (what, name) = what.get();
            let n = output::esc(name);
            let noun = what.noun();
            if ledger
                .pause_one(what, name, reason, required(operator)?)
                .await?
            {
                say!("{noun} {n} paused: no attempt of it starts until it is resumed");
            } else {
                say!("{noun} {n} was already paused; nothing changed");
            }
        }
        Cmd::Resume { what } => {
            let (what, name) = what.get();
            let n = output::esc(name);
            let noun = what.noun();
            if ledger.resume_one(what, name, required(operator)?).await? {
                say!("{noun} {n} resumed");
            } else {
                say!("{noun} {n} was not paused; nothing changed");
            }
        }
        Cmd::Lookup { many, rate } => {
            return lookup::run(ledger, many, rate.as_deref(), required(operator)?).await;
        }
        Cmd::Sweep => {
            let n = ledger.sweep().await?;
            say!(
                "swept {n} interrupted attempt(s): to retry_wait where the destination deduplicates, else unknown"
            );
        }
        Cmd::Stats { json } => {
            let stats = ledger.stats().await?;
            if *json {
                output::json(&stats);
            } else {
                output::stats(&stats);
            }
        }
    }
    Ok(0)
}

async fn ingest(ledger: &Ledger, file: &str, actor: &str) -> Result<i32> {
    let reader: Box<dyn AsyncBufRead + Unpin + Send> = if file == "-" {
        Box::new(tokio::io::BufReader::new(tokio::io::stdin()))
    } else {
        let f = tokio::fs::File::open(file)
            .await
            .map_err(|e| invalid(format!("cannot read {}: {e}", output::esc(file))))?;
        Box::new(tokio::io::BufReader::with_capacity(1 << 16, f))
    };
    let report = ledger.ingest(reader, actor).await?;
    for p in &report.problems {
        crate::tell!("line {}: {}", p.line, clean(&p.message));
    }
    say!(
        "{} line(s): {} recorded, {} unchanged, {} conflict(s), {} started, {} attempt(s); {} malformed, {} refused",
        report.lines,
        report.created,
        report.unchanged,
        report.conflicts,
        report.started,
        report.attempts,
        report.malformed(),
        report.refused()
    );
    Ok(if report.malformed() > 0 {
        2
    } else if report.refused() > 0 {
        3
    } else {
        0
    })
}
