//! What a long-running server listens for: the end (SIGTERM, SIGINT), and a config file to
//! re-read (SIGHUP, or the file changed).

use std::path::{Path, PathBuf};
use std::time::Duration;

use tokio::sync::mpsc;

/// Returns at SIGTERM or SIGINT.
pub async fn terminated() {
    use tokio::signal::unix::{SignalKind, signal};
    let (Ok(mut term), Ok(mut int)) = (
        signal(SignalKind::terminate()),
        signal(SignalKind::interrupt()),
    ) else {
        return std::future::pending().await;
    };
    tokio::select! {
        _ = term.recv() => {}
        _ = int.recv() => {}
    }
}

/// Why to re-read `path`, each time there is a reason: `"SIGHUP"`, or `"the file changed"`
/// (its modification time, checked every 500 ms).
pub fn config_changes(path: PathBuf) -> mpsc::Receiver<&'static str> {
    use tokio::signal::unix::{SignalKind, signal};
    let (tx, rx) = mpsc::channel(4);
    tokio::spawn(async move {
        let mut hup = signal(SignalKind::hangup()).ok();
        let stamp = |p: &Path| std::fs::metadata(p).and_then(|m| m.modified()).ok();
        let mut seen = stamp(&path);
        let mut every = tokio::time::interval(Duration::from_millis(500));
        loop {
            let hup_now = async {
                match hup.as_mut() {
                    Some(h) => h.recv().await,
                    None => std::future::pending().await,
                }
            };
            let why = tokio::select! {
                _ = hup_now => "SIGHUP",
                _ = every.tick() => {
                    let now = stamp(&path);
                    if now == seen {
                        continue;
                    }
                    "the file changed"
                }
            };
            seen = stamp(&path);
            if tx.send(why).await.is_err() {
                return;
            }
        }
    });
    rx
}
