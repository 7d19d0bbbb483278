//! Logs go to a file, never to the terminal (the console owns it). Everything logged is already
//! redacted, and written one event per line with control characters escaped; a log that cannot
//! be opened is skipped rather than failing the command.

use std::io::Write;
use std::path::PathBuf;
use std::sync::OnceLock;

use crate::config::Config;
use crate::domain::escape_text;

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
    let mut options = std::fs::OpenOptions::new();
    options.create(true).append(true);
    // the log names operators and keys: for its owner only
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    let Ok(file) = options.open(&path) else {
        return;
    };
    let _ = tracing_subscriber::fmt()
        .with_writer(std::sync::Mutex::new(OneLine(file)))
        .with_ansi(false)
        .with_target(false)
        .try_init();
}

/// Writes each log event as exactly one line: any control character, escape sequence or
/// line separator inside it (an operator's name, a destination's answer, a bad argument) is
/// written escaped, so no value can forge a line or drive the terminal of whoever reads the log.
/// The formatter hands over one whole event per write.
struct OneLine<W>(W);

impl<W: Write> Write for OneLine<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let text = String::from_utf8_lossy(buf);
        let (body, end) = match text.strip_suffix('\n') {
            Some(body) => (body, "\n"),
            None => (&*text, ""),
        };
        let line = format!("{}{end}", escape_text(body));
        self.0.write_all(line.as_bytes())?;
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.0.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_event_is_one_line_whatever_it_holds() {
        let mut out = OneLine(Vec::new());
        out.write_all(b"INFO start operator=bob\n2026-01-01T00:00:00Z INFO FORGED \x1b]0;T\x07\n")
            .unwrap();
        let text = String::from_utf8(out.0).unwrap();
        assert_eq!(
            text,
            "INFO start operator=bob\\x0a2026-01-01T00:00:00Z INFO FORGED \\x1b]0;T\\x07\n"
        );
    }
}
