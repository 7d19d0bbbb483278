//! The manual (docs/) and the README hold to the product: every link resolves, every key the
//! config loader takes is in the configuration reference with its default, the command line's
//! reference is its help and the console's keys are its keymap, every alert has its runbook, no
//! text cites a document the user does not have, and the shell blocks marked runnable run as
//! written. `SETTLE_BLESS=1 cargo test --test manual` rewrites the generated parts of the manual.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn read(rel: &str) -> String {
    std::fs::read_to_string(root().join(rel)).unwrap_or_else(|e| panic!("{rel}: {e}"))
}

/// The README and every page of the manual, by their path from the repository's root.
fn pages() -> Vec<String> {
    let mut pages = vec!["README.md".to_string(), "ARCHITECTURE.md".to_string()];
    let mut docs: Vec<String> = std::fs::read_dir(root().join("docs"))
        .expect("docs/")
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".md"))
        .map(|n| format!("docs/{n}"))
        .collect();
    docs.sort();
    pages.extend(docs);
    pages
}

/// The lines of a Markdown text outside fenced code blocks.
fn prose(md: &str) -> Vec<&str> {
    let mut fenced = false;
    md.lines()
        .filter(|l| {
            if l.trim_start().starts_with("```") {
                fenced = !fenced;
                return false;
            }
            !fenced
        })
        .collect()
}

/// GitHub's anchor for a heading: lower case, punctuation dropped, spaces to `-`.
fn slug(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
            _ => None,
        })
        .collect()
}

fn headings(md: &str) -> Vec<String> {
    prose(md)
        .into_iter()
        .filter(|l| l.starts_with('#'))
        .map(|l| l.trim_start_matches('#').trim().replace('`', ""))
        .collect()
}

/// The anchors of a page, numbered as GitHub numbers repeated headings.
fn anchors(md: &str) -> BTreeSet<String> {
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    let mut out = BTreeSet::new();
    for h in headings(md) {
        let s = slug(&h);
        let n = seen.entry(s.clone()).or_insert(0);
        out.insert(if *n == 0 {
            s.clone()
        } else {
            format!("{s}-{n}")
        });
        *n += 1;
    }
    out
}

/// The targets of `[text](target)` links in a page's prose, inline code left out.
fn links(md: &str) -> Vec<String> {
    let mut out = Vec::new();
    for line in prose(md) {
        let mut code = false;
        let bytes: Vec<char> = line.chars().collect();
        let mut i = 0;
        while i < bytes.len() {
            match bytes[i] {
                '`' => code = !code,
                ']' if !code && bytes.get(i + 1) == Some(&'(') => {
                    let rest: String = bytes[i + 2..].iter().collect();
                    if let Some(end) = rest.find(')') {
                        out.push(rest[..end].to_string());
                    }
                }
                _ => {}
            }
            i += 1;
        }
    }
    out
}

/// Resolves a link relative to the page it is on: the file exists, and the anchor is a heading
/// of it. `None` when it resolves, else why not.
fn broken(page: &str, target: &str) -> Option<String> {
    if target.starts_with("http://")
        || target.starts_with("https://")
        || target.starts_with("mailto:")
    {
        return None;
    }
    let (path, anchor) = match target.split_once('#') {
        Some((p, a)) => (p, Some(a)),
        None => (target, None),
    };
    let base = Path::new(page).parent().unwrap();
    let file = if path.is_empty() {
        root().join(page)
    } else {
        root().join(base).join(path)
    };
    if !file.exists() {
        return Some(format!("{page}: {target}: no such file"));
    }
    let anchor = anchor?;
    let text = std::fs::read_to_string(&file).ok()?;
    (!anchors(&text).contains(anchor)).then(|| format!("{page}: {target}: no such heading"))
}

#[test]
fn the_readme_is_a_front_door_with_both_set_up_commands() {
    let readme = read("README.md");
    let lines = readme.lines().count();
    assert!(lines <= 400, "README.md has {lines} lines (at most 400)");
    for command in ["cargo run --release -- demo", "cargo test"] {
        assert!(
            readme.lines().any(|l| l.trim_start().starts_with(command)),
            "README.md does not give `{command}` as a command"
        );
    }
}

#[test]
fn every_relative_link_in_the_readme_and_the_manual_resolves() {
    let mut bad = Vec::new();
    let mut count = 0;
    for page in pages() {
        for target in links(&read(&page)) {
            count += 1;
            bad.extend(broken(&page, &target));
        }
    }
    assert!(
        count > 50,
        "only {count} links found: is the reader broken?"
    );
    assert!(
        bad.is_empty(),
        "links that do not resolve:\n{}",
        bad.join("\n")
    );
}

/// A citation of the contract's sections or of the tracker: "SPEC" followed by a number, or
/// "issue" followed by one. Spelled in pieces so that this file does not cite itself.
fn citations(text: &str) -> Vec<String> {
    let spec = ["SP", "EC"].concat();
    let issue = ["iss", "ue"].concat();
    let mut out = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let lower = line.to_lowercase();
        let hit = |at: usize, len: usize| {
            let rest = line[at + len..].trim_start_matches([' ', '#', '§']);
            let boundary = at == 0 || !line.as_bytes()[at - 1].is_ascii_alphanumeric();
            boundary && rest.starts_with(|c: char| c.is_ascii_digit())
        };
        let cites = line.match_indices(&spec).any(|(at, _)| hit(at, spec.len()))
            || lower
                .match_indices(&issue)
                .any(|(at, _)| hit(at, issue.len()));
        if cites {
            out.push(format!("{}: {}", n + 1, line.trim()));
        }
    }
    out
}

fn files_under(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            files_under(&path, out);
        } else if path.extension().is_some_and(|e| {
            matches!(
                e.to_str(),
                Some("rs" | "md" | "toml" | "yml" | "sql" | "py")
            )
        }) {
            out.push(path);
        }
    }
}

#[test]
fn no_source_comment_name_or_message_cites_a_section_number_or_an_issue() {
    assert!(!citations(&["SP", "EC 19"].concat()).is_empty());
    assert!(!citations(&["(iss", "ue 23)"].concat()).is_empty());
    // a word that only contains the tracker's word, before a number, is not a citation
    assert!(citations(&["the spec's example; tiss", "ue 3"].concat()).is_empty());
    let mut files = Vec::new();
    for dir in ["src", "tests", "benches", "docs", "assets"] {
        files_under(&root().join(dir), &mut files);
    }
    files.extend(["README.md", "ARCHITECTURE.md", "build.rs", ".ci/run"].map(|f| root().join(f)));
    let mut found = Vec::new();
    for file in files {
        let text = std::fs::read_to_string(&file).unwrap();
        for hit in citations(&text) {
            found.push(format!(
                "{}:{hit}",
                file.strip_prefix(root()).unwrap().display()
            ));
        }
    }
    assert!(
        found.is_empty(),
        "citations of documents users do not have:\n{}",
        found.join("\n")
    );
}

/// Every section of the manual that a source names as `(manual: A, B)` is a heading of it.
#[test]
fn every_section_of_the_manual_a_source_names_is_there() {
    let known: BTreeSet<String> = pages()
        .iter()
        .flat_map(|p| headings(&read(p)))
        .map(|h| h.to_lowercase())
        .collect();
    let mut files = Vec::new();
    for dir in ["src", "tests", "benches", "assets"] {
        files_under(&root().join(dir), &mut files);
    }
    let mut missing = BTreeSet::new();
    for file in files
        .into_iter()
        .filter(|f| !f.ends_with("tests/manual.rs"))
    {
        let text = std::fs::read_to_string(&file).unwrap();
        for (at, _) in text.match_indices("(manual: ") {
            let rest = &text[at + "(manual: ".len()..];
            let end = rest.find([')', ';', ':', '\n']).unwrap_or(rest.len());
            for name in rest[..end]
                .split(", ")
                .map(str::trim)
                .filter(|n| !n.is_empty())
            {
                if !known.contains(&name.to_lowercase()) {
                    missing.insert(format!(
                        "{}: {name}",
                        file.strip_prefix(root()).unwrap().display()
                    ));
                }
            }
        }
    }
    assert!(
        missing.is_empty(),
        "sections named but not in the manual:\n{}",
        missing.iter().cloned().collect::<Vec<_>>().join("\n")
    );
}

fn settle() -> Command {
    Command::new(env!("CARGO_BIN_EXE_settle"))
}

/// Every command's help, as `settle COMMAND --help` prints it.
fn every_help() -> Vec<(String, String)> {
    fn walk(cmd: &mut clap::Command, path: &str, out: &mut Vec<(String, String)>) {
        out.push((path.to_string(), cmd.render_long_help().to_string()));
        let mut subs: Vec<&clap::Command> = cmd
            .get_subcommands()
            .filter(|s| s.get_name() != "help")
            .collect();
        subs.sort_by_key(|s| s.get_display_order());
        let names: Vec<String> = subs.iter().map(|s| s.get_name().to_string()).collect();
        for name in names {
            let sub = cmd.find_subcommand_mut(&name).unwrap();
            walk(sub, &format!("{path} {name}"), out);
        }
    }
    let mut cmd = settle::cli::command();
    cmd.build();
    let mut out = Vec::new();
    walk(&mut cmd, "settle", &mut out);
    out
}

#[test]
fn no_help_text_or_manual_page_cites_a_document_the_user_lacks() {
    let spec = ["SP", "EC"].concat();
    let mut texts = every_help();
    assert!(texts.len() > 25, "{} commands", texts.len());
    for args in [&["--help"][..], &["man"][..], &["record", "--help"][..]] {
        let out = settle().args(args).output().unwrap();
        assert!(out.status.success(), "settle {args:?}");
        texts.push((
            format!("settle {args:?}"),
            String::from_utf8(out.stdout).unwrap(),
        ));
    }
    let mut found = Vec::new();
    for (what, text) in &texts {
        found.extend(citations(text).into_iter().map(|c| format!("{what}: {c}")));
        if text.contains(&spec) {
            found.push(format!("{what}: names the contract"));
        }
    }
    assert!(found.is_empty(), "{}", found.join("\n"));
}

/// Writes `generated` to `rel` under `SETTLE_BLESS`, else asserts the file holds it.
fn generated(rel: &str, generated: &str) {
    if std::env::var_os("SETTLE_BLESS").is_some() {
        std::fs::write(root().join(rel), generated).unwrap();
        return;
    }
    let on_disk = read(rel);
    if on_disk != generated {
        let line = on_disk
            .lines()
            .zip(generated.lines())
            .position(|(a, b)| a != b)
            .unwrap_or(on_disk.lines().count().min(generated.lines().count()));
        panic!(
            "{rel} is not what the code gives (first difference at line {}); \
             SETTLE_BLESS=1 cargo test --test manual rewrites it",
            line + 1
        );
    }
}

fn cli_reference() -> String {
    let mut out = String::from(
        "# The command line\n\n\
         Every command and option, exactly as `settle COMMAND --help` prints them: this page is \
         generated from the\ncommand line's own definitions (`SETTLE_BLESS=1 cargo test --test manual` \
         rewrites it, and the test fails when\nit differs). What the states, actions and filter \
         mean is in [Concepts](concepts.md); `settle man` prints the\nsame as a manual page, and \
         `settle completions bash|zsh|fish` the shell's completions.\n\n",
    );
    let helps = every_help();
    out.push_str("| command | what it does |\n| --- | --- |\n");
    let mut cmd = settle::cli::command();
    cmd.build();
    let mut subs: Vec<&clap::Command> = cmd
        .get_subcommands()
        .filter(|s| s.get_name() != "help")
        .collect();
    subs.sort_by_key(|s| s.get_display_order());
    for sub in subs {
        let about = sub.get_about().map(|a| a.to_string()).unwrap_or_default();
        let name = sub.get_name();
        out.push_str(&format!(
            "| [`settle {name}`](#settle-{name}) | {} |\n",
            about.replace('|', "\\|")
        ));
    }
    for (path, help) in helps {
        out.push_str(&format!(
            "\n## {path}\n\n```text\n{}\n```\n",
            help.trim_end()
        ));
    }
    out
}

#[test]
fn the_command_line_reference_is_the_help_of_every_command() {
    generated("docs/cli.md", &cli_reference());
}

fn when(w: settle::console::keymap::When) -> &'static str {
    use settle::console::keymap::When;
    match w {
        When::Always => "always",
        When::Row => "an operation selected",
        When::Offered => "the ledger offers it on the selected item",
        When::Marks => "a list view",
        When::Activity => "the Activity view (5)",
        When::Review => "the Review view (6)",
        When::Lead => "an operation selected, for a lead",
        When::Reveal => "the detail pane on a redacted field, for a lead",
        When::Run => "a stalled run selected (view 1)",
        When::Groups => "view 1 (Exceptions)",
        When::Acts => "always, for a person who acts (not a viewer)",
    }
}

fn console_keys(page: &str) -> String {
    const OPEN: &str = "<!-- keys: generated from the keymap; SETTLE_BLESS=1 cargo test --test manual rewrites it -->\n";
    const CLOSE: &str = "<!-- end keys -->";
    let start = page
        .find(OPEN)
        .expect("the keys' opening marker in docs/console.md")
        + OPEN.len();
    let end = page
        .find(CLOSE)
        .expect("the keys' closing marker in docs/console.md");
    let mut table = String::from("| keys | what they do | when |\n| --- | --- | --- |\n");
    for b in settle::console::keymap::KEYMAP {
        let (bulk, marked) = match (b.bulk, b.when) {
            (true, _) => (
                "; with items marked, on all of them",
                " (or on a marked one)",
            ),
            (false, settle::console::keymap::When::Offered) => ("", ", nothing marked"),
            _ => ("", ""),
        };
        table.push_str(&format!(
            "| `{}` | {}{bulk} | {}{marked} |\n",
            b.keys.replace('|', "\\|"),
            b.help.replace('|', "\\|"),
            when(b.when)
        ));
    }
    format!("{}{table}{}", &page[..start], &page[end..])
}

#[test]
fn the_console_keys_in_the_manual_are_the_keymap() {
    let page = read("docs/console.md");
    let expected = console_keys(&page);
    generated("docs/console.md", &expected);
    for b in settle::console::keymap::KEYMAP {
        assert!(
            expected.contains(&format!("| `{}` |", b.keys.replace('|', "\\|"))),
            "{}",
            b.keys
        );
    }
}

/// The tables of the config, each as its heading in the reference and the TOML that opens it
/// (with the keys it requires), so that a key can be probed or set inside it.
const TABLES: &[(&str, &str)] = &[
    ("Top level", ""),
    ("[destinations.NAME]", "[destinations.d]\n"),
    (
        "[destinations.NAME.actions.ACTION]",
        "[destinations.d.actions.a]\n",
    ),
    ("[workflows.NAME]", "[workflows.w]\n"),
    ("[workflows.NAME.pause_when]", "[workflows.w.pause_when]\n"),
    ("[redaction]", "[redaction]\n"),
    (
        "[[redaction.rules]]",
        "[[redaction.rules]]\nfields = [\"a\"]\n",
    ),
    ("[operators.NAME]", "[operators.o]\nrole = \"viewer\"\n"),
    (
        "[automations.NAME]",
        "[automations.a]\ntoken_sha256 = \"9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08\"\nworkflows = [\"*\"]\n",
    ),
    ("[retention]", "[retention]\n"),
    ("[teams.NAME]", "[teams.t]\n"),
    (
        "[channels.NAME]",
        "[channels.c]\nkind = \"webhook\"\nurl_env = \"U\"\n",
    ),
    ("[notify]", "[notify]\n"),
    ("[defaults]", "[defaults]\n"),
    ("[limits]", "[limits]\n"),
];

/// The keys the loader takes in a table: it refuses an unknown one by naming all it expects.
fn accepted(opening: &str) -> Vec<String> {
    let probe = format!("{opening}zz_no_such_key = 1\n");
    let err = settle::Config::parse(&probe, "probe.toml")
        .unwrap_err()
        .to_string();
    let list = err
        .split_once("expected one of ")
        .or_else(|| err.split_once("expected "))
        .unwrap_or_else(|| panic!("{opening}: {err}"))
        .1;
    list.split(", ")
        .flat_map(|k| k.split(" or "))
        .map(|k| k.trim().trim_matches('`').to_string())
        .filter(|k| !k.is_empty())
        .collect()
}

/// The reference's rows under each table's heading: key, default.
fn reference_rows(page: &str) -> BTreeMap<String, Vec<(String, String)>> {
    let mut out: BTreeMap<String, Vec<(String, String)>> = BTreeMap::new();
    let mut table = None;
    for line in prose(page) {
        if let Some(h) = line.strip_prefix("## ") {
            table = Some(h.replace('`', ""));
            continue;
        }
        let cells: Vec<&str> = line.split(" | ").map(str::trim).collect();
        if let (Some(t), true) = (&table, line.starts_with("| `") && cells.len() >= 3) {
            let key = cells[0]
                .trim_start_matches("| ")
                .trim_matches('`')
                .to_string();
            out.entry(t.clone())
                .or_default()
                .push((key, cells[1].to_string()));
        }
    }
    out
}

#[test]
fn the_configuration_reference_names_every_key_with_its_default() {
    let rows = reference_rows(&read("docs/configuration.md"));
    let mut problems = Vec::new();
    for (heading, opening) in TABLES {
        let keys = accepted(opening);
        assert!(!keys.is_empty(), "{heading}");
        let documented: BTreeMap<&str, &str> = rows
            .get(*heading)
            .unwrap_or_else(|| panic!("docs/configuration.md has no section {heading}"))
            .iter()
            .map(|(k, d)| (k.as_str(), d.as_str()))
            .collect();
        for key in &keys {
            match documented.get(key.as_str()) {
                None => problems.push(format!("{heading}: `{key}` is not in the reference")),
                Some(&"") => problems.push(format!("{heading}: `{key}` has no default")),
                _ => {}
            }
        }
        for key in documented.keys() {
            if !keys.iter().any(|k| k == key) {
                problems.push(format!(
                    "{heading}: `{key}` is documented but the loader refuses it"
                ));
            }
        }
        // a default written as a TOML value loads as the loader's own default
        let without = settle::Config::parse(opening, "t.toml").map(|c| format!("{c:?}"));
        for (key, default) in &documented {
            let Some(value) = default.strip_prefix('`').and_then(|d| d.strip_suffix('`')) else {
                continue;
            };
            let with = settle::Config::parse(&format!("{opening}{key} = {value}\n"), "t.toml")
                .map(|c| format!("{c:?}"));
            match (&without, with) {
                (Ok(a), Ok(b)) if *a == b => {}
                (_, Err(e)) => {
                    problems.push(format!("{heading}: `{key} = {value}` does not load: {e}"))
                }
                _ => problems.push(format!("{heading}: `{key} = {value}` is not the default")),
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
    // the shipped example loads
    let shipped = read("assets/settle.toml");
    settle::Config::parse(&shipped, "assets/settle.toml").expect("assets/settle.toml loads");
}

#[test]
fn every_alert_has_a_runbook_url_that_resolves_to_its_section() {
    let rules = read("assets/alerts.yml");
    let runbook = anchors(&read("docs/runbook.md"));
    let mut alerts: Vec<(String, Option<String>)> = Vec::new();
    for line in rules.lines() {
        let line = line.trim();
        if let Some(name) = line.strip_prefix("- alert: ") {
            alerts.push((name.trim().to_string(), None));
        } else if let Some(url) = line.strip_prefix("runbook_url: ") {
            alerts.last_mut().expect("a runbook_url before any alert").1 =
                Some(url.trim().trim_matches('"').to_string());
        }
    }
    assert!(alerts.len() >= 6, "{alerts:?}");
    for (name, url) in alerts {
        let url = url.unwrap_or_else(|| panic!("{name} has no runbook_url"));
        let (file, anchor) = url
            .split_once('#')
            .unwrap_or_else(|| panic!("{name}: {url} names no section"));
        assert_eq!(file, "docs/runbook.md", "{name}");
        assert_eq!(anchor, slug(&name), "{name}: its section is its own");
        assert!(
            runbook.contains(anchor),
            "{name}: docs/runbook.md has no section {anchor}"
        );
    }
}

/// The shell blocks of a page marked `<!-- runnable -->`, in order.
fn runnable_blocks(page: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut lines = page.lines();
    while let Some(line) = lines.next() {
        if line.trim() != "<!-- runnable -->" {
            continue;
        }
        let fence = lines.next().unwrap_or_default();
        assert_eq!(fence.trim(), "```sh", "a runnable block is a ```sh block");
        let body: Vec<&str> = lines.by_ref().take_while(|l| l.trim() != "```").collect();
        out.push(body.join("\n"));
    }
    out
}

/// Runs each page's runnable blocks in turn in a directory of the page's own, with this build's
/// settle first on the PATH and nothing of the machine's settle environment; each must exit 0.
#[test]
fn the_runnable_shell_blocks_run_as_written() {
    use std::os::unix::process::CommandExt as _;
    let bin = PathBuf::from(env!("CARGO_BIN_EXE_settle"));
    let path = format!(
        "{}:{}",
        bin.parent().unwrap().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let mut ran = 0;
    for page in pages() {
        for (n, block) in runnable_blocks(&read(&page)).into_iter().enumerate() {
            let dir = tempfile::tempdir().unwrap();
            let mut child = Command::new("bash")
                .args(["-e", "-o", "pipefail", "-c", &block])
                .current_dir(dir.path())
                .env("PATH", &path)
                .env("HOME", dir.path())
                .env("XDG_CONFIG_HOME", dir.path().join("config"))
                .env("XDG_STATE_HOME", dir.path().join("state"))
                .env_remove("SETTLE_DATABASE_URL")
                .env_remove("SETTLE_CONFIG")
                .env_remove("SETTLE_OPERATOR")
                .env_remove("SETTLE_LOG_FILE")
                .stdin(std::process::Stdio::null())
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .process_group(0)
                .spawn()
                .unwrap();
            let pgid = child.id();
            let deadline = Instant::now() + Duration::from_secs(300);
            let status = loop {
                if let Some(status) = child.try_wait().unwrap() {
                    break Some(status);
                }
                if Instant::now() > deadline {
                    break None;
                }
                std::thread::sleep(Duration::from_millis(50));
            };
            // whatever the block left running (a server it started) stops with it
            let _ = Command::new("kill")
                .args(["-KILL", "--", &format!("-{pgid}")])
                .status();
            let out = child.wait_with_output().unwrap();
            let said = format!(
                "{}\n{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
            match status {
                Some(s) if s.success() => ran += 1,
                Some(s) => panic!(
                    "{page}, runnable block {}: {s}\n{block}\n---\n{said}",
                    n + 1
                ),
                None => panic!(
                    "{page}, runnable block {}: still running after 300 s\n{said}",
                    n + 1
                ),
            }
        }
    }
    assert!(ran >= 2, "only {ran} runnable blocks");
}
