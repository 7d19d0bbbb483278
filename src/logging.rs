//! Logs go to a file, never to the terminal (the console owns it). Everything logged is already
//! redacted; a log that cannot be opened is skipped rather than failing the command.

use std::path::PathBuf;
use std::sync::OnceLock;

use crate::config::Config;

static STARTED: OnceLock<()> = OnceLock::new();

/// `SETTLE_LOG_FILE`, else the config's `log_file`, else `$XDG_STATE_HOME/settle/settle.log`.
pub fn path(config: &Config) -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("SETTLE_LOG_FILE").filter(|p| !p.is_empty()) {
        return Some(PathBuf::from(p));
    }
    if let Some(p) = &config.log_file {
        return Some(p.clone());
    }
    let state = std::env::var_os("XDG_STATE_HOME")
        .filter(|p| !p.is_empty())
        .map(PathBuf::from)
        .or_else(|| {
            std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".local").join("state"))
        })?;
    Some(state.join("settle").join("settle.log"))
}

pub fn init(config: &Config) {
    if STARTED.set(()).is_err() {
        return;
    }
    let Some(path) = path(config) else { return };
    if let Some(dir) = path.parent() {
        let _ = std::fs::create_dir_all(dir);
    }
    let Ok(file) = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&path)
    else {
        return;
    };
    let _ = tracing_subscriber::fmt()
        .with_writer(std::sync::Mutex::new(file))
        .with_ansi(false)
        .with_target(false)
        .try_init();
}
