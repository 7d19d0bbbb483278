//! The real `settle serve --http` for the tests and benches of the HTTP API (manual: The HTTP API): started on
//! a free port with a config of known tokens, its log in a file of its own, killed on `Drop`.

use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use sha2::{Digest, Sha256};

use super::Killed;

/// The token of `bot` (workflows onboarding and billing-sync) in the tests' config.
pub const BOT: &str = "settle_0f3c9a1b2d4e5f60718293a4b5c6d7e8f9012345678abcdef0123456789abcdef";
/// The token of `slow`, whose rate is one request a minute after a burst of two.
pub const SLOW: &str = "settle_5555555555555555555555555555555555555555555555555555555555555555";
/// The token of `all`, for every workflow.
pub const ALL: &str = "settle_a11a11a11a11a11a11a11a11a11a11a11a11a11a11a11a11a11a11a11a11a1";

/// The token of `tool` in [`tool_automation`], whose only workflow is onboarding.
pub const TOOL: &str = "settle_7007700770077007700770077007700770077007700770077007700770077007";

/// `[automations.tool]`: [`TOOL`], the one workflow onboarding, no rate to speak of.
pub fn tool_automation() -> String {
    format!(
        "[automations.tool]\ntoken_sha256 = \"{}\"\nworkflows = [\"onboarding\"]\nrate = \"100000/s\"\nburst = 100000\n",
        sha256(TOOL)
    )
}

pub fn sha256(token: &str) -> String {
    Sha256::digest(token.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// The tests' config: `crm` redacts `customer.name`, three automations, and `extra` after.
pub fn config_text(extra: &str) -> String {
    format!(
        r#"attempt_timeout = "5m"
max_body = "8KiB"
max_payload = "2KiB"
[destinations.crm]
lookup = true
[[redaction.rules]]
destination = "crm"
fields = ["customer.name"]
[automations.bot]
token_sha256 = "{}"
workflows = ["onboarding", "billing-sync"]
rate = "100000/s"
burst = 100000
[automations.slow]
token_sha256 = "{}"
workflows = ["*"]
rate = "1/m"
burst = 2
[automations.all]
token_sha256 = "{}"
workflows = ["*"]
rate = "100000/s"
burst = 100000
{extra}
"#,
        sha256(BOT),
        sha256(SLOW),
        sha256(ALL)
    )
}

/// A running server, its config and its log.
pub struct ApiServer {
    pub base: String,
    /// With `--metrics`: where they are served (`http://ADDR`).
    pub metrics: Option<String>,
    pub dir: tempfile::TempDir,
    pub db: String,
    args: Vec<String>,
    /// Variables set in its environment (a destination's `${NAME}`s).
    env: Vec<(String, String)>,
    child: Option<Killed>,
}

impl ApiServer {
    /// Serves `db` with the tests' config (and `extra`), HTTP on a free port.
    pub fn start(db: &str, extra: &str) -> ApiServer {
        ApiServer::start_with(db, &config_text(extra), &[])
    }

    pub fn start_with(db: &str, config: &str, args: &[&str]) -> ApiServer {
        ApiServer::start_env(db, config, args, &[])
    }

    /// [`ApiServer::start_with`], with these variables in its environment.
    pub fn start_env(db: &str, config: &str, args: &[&str], env: &[(&str, &str)]) -> ApiServer {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("settle.toml"), config).unwrap();
        let mut s = ApiServer {
            base: String::new(),
            metrics: None,
            dir,
            db: db.to_string(),
            args: args.iter().map(|a| a.to_string()).collect(),
            env: env
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            child: None,
        };
        s.restart();
        s
    }

    pub fn config_path(&self) -> PathBuf {
        self.dir.path().join("settle.toml")
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("settle.log")).unwrap_or_default()
    }

    pub fn stderr(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("stderr")).unwrap_or_default()
    }

    pub fn pid(&self) -> u32 {
        self.child.as_ref().expect("running").pid()
    }

    /// `kill -TERM` (the graceful stop), and its exit status once it ended.
    pub fn terminate(&mut self) -> std::process::ExitStatus {
        let mut c = self.child.take().expect("running");
        let _ = Command::new("kill").arg(c.pid().to_string()).status();
        c.0.wait().expect("it ends")
    }

    /// `kill -9` now.
    pub fn kill_9(&mut self) {
        if let Some(mut c) = self.child.take() {
            c.kill_9();
        }
    }

    /// `settle ARGS` on the server's database and config, as operator alice: its stdout. A
    /// command that fails fails the test, with what it said.
    /// Every operation (or only the exceptions) as `settle list --json` gives it: by key, its
    /// state and reference.
    pub fn operations(
        &self,
        only_exceptions: bool,
    ) -> std::collections::BTreeMap<String, (String, Option<String>)> {
        let mut args = vec!["list", "--json", "--limit", "100000"];
        if !only_exceptions {
            args.push("--all");
        }
        let v: serde_json::Value = serde_json::from_str(&self.settle(&args)).unwrap();
        v.as_array()
            .unwrap()
            .iter()
            .map(|o| {
                (
                    o["key"].as_str().unwrap().to_string(),
                    (
                        o["state"].as_str().unwrap().to_string(),
                        o["reference"].as_str().map(str::to_string),
                    ),
                )
            })
            .collect()
    }

    pub fn settle(&self, args: &[&str]) -> String {
        let out = Command::new(env!("CARGO_BIN_EXE_settle"))
            .arg("--db")
            .arg(&self.db)
            .arg("--config")
            .arg(self.config_path())
            .args(args)
            .env("SETTLE_OPERATOR", "alice")
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        assert!(
            out.status.success(),
            "settle {args:?}: {text}{}",
            String::from_utf8_lossy(&out.stderr)
        );
        text
    }

    /// The server's own time for each request it logged after the first `skip` lines.
    pub fn times_logged(&self, skip: usize) -> Vec<std::time::Duration> {
        self.log()
            .lines()
            .skip(skip)
            .filter_map(|l| l.split("ms=").nth(1)?.trim().parse::<f64>().ok())
            .map(|ms| std::time::Duration::from_secs_f64(ms / 1e3))
            .collect()
    }

    /// Starts (again) on the same database and config, on a new free port.
    pub fn restart(&mut self) {
        self.kill_9();
        let (child, base, metrics) = spawn(&self.db, self.dir.path(), &self.args, &self.env);
        self.child = Some(child);
        self.base = base;
        self.metrics = metrics;
    }
}

/// The server started: its process, the API's base URL and, with `--metrics`, the metrics'.
type Spawned = (Killed, String, Option<String>);

fn spawn(db: &str, dir: &Path, args: &[String], env: &[(String, String)]) -> Spawned {
    let stderr = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(dir.join("stderr"))
        .unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_settle"))
        .arg("--db")
        .arg(db)
        .arg("--config")
        .arg(dir.join("settle.toml"))
        .args(["serve", "--http", "127.0.0.1:0"])
        .args(args)
        .env("SETTLE_LOG_FILE", dir.join("settle.log"))
        .env_remove("SETTLE_DATABASE_URL")
        .envs(env.iter().map(|(k, v)| (k, v)))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(stderr)
        .spawn()
        .expect("start settle serve --http");
    let mut line = String::new();
    let mut out = std::io::BufReader::new(child.stdout.take().unwrap());
    out.read_line(&mut line).unwrap();
    // with --metrics, the metrics' address comes first
    let metrics = line
        .trim()
        .strip_prefix("settle serve: metrics on ")
        .map(|m| m.trim_end_matches("/metrics").to_string());
    if metrics.is_some() {
        line.clear();
        out.read_line(&mut line).unwrap();
    }
    // the rest of what it prints, read so that it never writes to a closed pipe
    std::thread::spawn(move || std::io::copy(&mut out, &mut std::io::sink()));
    let killed = Killed(child);
    let rest = line
        .trim()
        .strip_prefix("settle serve: HTTP API on ")
        .unwrap_or_else(|| {
            panic!(
                "the first line names the address: {line:?}; stderr: {}",
                std::fs::read_to_string(dir.join("stderr")).unwrap_or_default()
            )
        });
    let base = rest
        .split_whitespace()
        .next()
        .unwrap()
        .trim_end_matches('/')
        .to_string();
    (killed, base, metrics)
}
