//! `settle serve` (manual: Running settle for a team): the console over SSH, so staff need no shell account, no database
//! credentials and no copy of the binary.
//!
//! Design:
//! - One russh server; each connection has a [`Conn`] handler. Public-key authentication only:
//!   the offered key is checked against `[operators]` to spare a signature, and the identity is
//!   set in [`Conn::auth_publickey`], which russh calls only after it verified the signature.
//! - A `shell` request with a pty starts a console session: the same [`crate::console::drive`]
//!   loop as the local console, its keys decoded from the channel ([`keys::Decoder`]), its frames
//!   written to the channel through ratatui's crossterm backend ([`ChannelWriter`]), its ledger
//!   a [`Ledger::for_session`] handle, so the role is enforced by the ledger itself.
//! - An `exec` request runs one reading command (`stats`, `list`, `show`) with its output sent to
//!   the channel ([`crate::out::capture`]).
//! - [`Sessions`] knows every open session (the limit, the metrics gauge, and the end of a
//!   session whose operator was removed). [`Operators`] is re-read on SIGHUP and when the file
//!   changes.
//! - A dropped connection drops its handler, whose input senders close: the session's loop ends
//!   at its next turn; an action already sent to the ledger finishes in its own transaction.
//!
//! Rooms: `identity.rs` keys and operators, `sessions.rs` the open sessions and their limits,
//! `shared.rs` what every connection shares, `conn.rs` a connection and its requests, `screen.rs`
//! what a channel runs, `keys.rs` key decoding; the accept loop in `mod.rs`.

mod conn;
mod identity;
pub mod keys;
mod screen;
mod sessions;
mod shared;

pub use conn::{Conn, ConnError};
pub use identity::{Operators, fingerprint, host_key};
pub use sessions::{SessionLimits, Sessions};
pub use shared::Exec;
use shared::Shared;

use std::path::PathBuf;
use std::sync::{Arc, RwLock};
use std::time::Duration;

use russh::{MethodKind, MethodSet};

use crate::config::Config;
use crate::error::{Error, Result};
use crate::ledger::Ledger;

pub struct Options {
    pub listen: String,
    pub host_key: PathBuf,
    pub metrics: Option<String>,
    pub max_sessions: usize,
    pub idle: Duration,
    /// The config file to re-read for `[operators]` (`None`: there is none, nobody can log in
    /// until one is given).
    pub config_path: Option<PathBuf>,
    /// How an `exec` request's command is run.
    pub exec: Exec,
    /// The doors of this process's listeners (manual: Limits).
    pub doors: Arc<crate::listener::Doors>,
}

/// The host key's default place: `$XDG_STATE_HOME/settle/host_key`, else
/// `~/.local/state/settle/host_key`, else `./settle_host_key`.
pub fn default_host_key() -> PathBuf {
    std::env::var_os("XDG_STATE_HOME")
        .filter(|p| !p.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".local/state")))
        .map(|d| d.join("settle").join("host_key"))
        .unwrap_or_else(|| PathBuf::from("settle_host_key"))
}

/// Runs the server until SIGTERM or SIGINT. Prints the address, the host key's fingerprint and
/// the metrics address first (a test or a unit file reads them).
pub async fn run(ledger: Ledger, options: Options) -> Result<()> {
    let key = host_key(&options.host_key)?;
    let host_fingerprint = fingerprint(key.public_key());
    let operators = Operators::from_config(ledger.config())?;
    let socket = tokio::net::TcpListener::bind(&options.listen)
        .await
        .map_err(|e| Error::Invalid(format!("--listen {}: {e}", options.listen)))?;
    let addr = socket
        .local_addr()
        .map_err(|e| Error::Invalid(format!("--listen {}: {e}", options.listen)))?;
    let sessions = Arc::new(Sessions::default());
    let limits = ledger.config().limits.clone();
    let shared = Arc::new(Shared {
        changes: crate::console::watch_changes(ledger.clone()),
        ledger: ledger.clone(),
        operators: RwLock::new(Arc::new(operators)),
        sessions: sessions.clone(),
        limits: SessionLimits {
            max: options.max_sessions,
            per_operator: limits.sessions_per_operator,
        },
        idle: options.idle,
        exec: options.exec.clone(),
    });
    crate::say!("settle serve: listening on {addr}");
    crate::say!("settle serve: host key {host_fingerprint}");
    let _metrics = match &options.metrics {
        Some(m) => Some(
            crate::metrics::serve_at(
                &ledger,
                m,
                Some(sessions.count.clone()),
                "settle serve",
                options.doors.metrics.clone(),
            )
            .await?,
        ),
        None => None,
    };
    crate::say!(
        "settle serve: {} operator key(s) from {}",
        shared.operators().len(),
        options
            .config_path
            .as_deref()
            .map_or("no config file".into(), |p| p.display().to_string())
    );
    tracing::info!(%addr, host_key = %host_fingerprint, "serve: listening");
    if let Some(path) = options.config_path.clone() {
        tokio::spawn(reload_operators(shared.clone(), path));
    }

    let config = russh::server::Config {
        methods: MethodSet::from(&[MethodKind::PublicKey][..]),
        keys: vec![key],
        auth_rejection_time: Duration::from_millis(300),
        auth_rejection_time_initial: Some(Duration::ZERO),
        max_auth_attempts: limits.max_auth_tries,
        // the console has its own idle timeout, with a warning; dead peers are found by
        // keepalive; a connection that has not logged in has `login_grace` (see `accept`)
        inactivity_timeout: None,
        keepalive_interval: Some(Duration::from_secs(30)),
        keepalive_max: 3,
        nodelay: true,
        ..Default::default()
    };
    accept(
        socket,
        Arc::new(config),
        shared,
        &options.doors,
        limits.login_grace,
    )
    .await;
    Ok(())
}

/// The accept loop, until SIGTERM or SIGINT: each connection let in by the SSH door and the
/// door of those not yet logged in, with `grace` to log in (then closed, whatever it is
/// doing), run by russh in a task of its own; at the stop, every session is told and ended.
async fn accept(
    socket: tokio::net::TcpListener,
    config: Arc<russh::server::Config>,
    shared: Arc<Shared>,
    doors: &crate::listener::Doors,
    grace: Duration,
) {
    let (stop, _) = tokio::sync::broadcast::channel::<()>(1);
    let terminated = crate::signals::terminated();
    tokio::pin!(terminated);
    loop {
        let (tcp, peer, pass) = tokio::select! {
            accepted = doors.ssh.accept(&socket) => accepted,
            () = &mut terminated => break,
        };
        let startup = match doors.startups.admit(peer.ip()) {
            Ok(p) => p,
            Err(_) => {
                doors.startups.refused(peer, "startups");
                continue;
            }
        };
        let _ = tcp.set_nodelay(true);
        // ended at its login grace, or by the door to make room while not logged in
        let (stream, released) = crate::listener::Watched::new(tcp, startup.kill(), Some(grace));
        let handler = Conn::new(shared.clone(), peer, startup, released.clone());
        let (config, mut stopped) = (config.clone(), stop.subscribe());
        let door = doors.startups.clone();
        tokio::spawn(async move {
            let _pass = pass;
            let began = std::time::Instant::now();
            if let Ok(session) = russh::server::run_stream(config, stream, handler).await {
                let handle = session.handle();
                tokio::select! {
                    _ = session => {}
                    _ = stopped.recv() => {
                        let _ = handle
                            .disconnect(russh::Disconnect::ByApplication, "settle serve is stopping".into(), "".into())
                            .await;
                    }
                }
            }
            let logged_in = released.load(std::sync::atomic::Ordering::SeqCst);
            if !logged_in && began.elapsed() >= grace {
                door.refused(peer, "login_grace");
            }
        });
    }
    tracing::info!("serve: stopping");
    let _ = stop.send(());
    // the sessions' disconnects go out before the process ends
    tokio::time::sleep(Duration::from_millis(100)).await;
}

/// Re-reads `[operators]` on SIGHUP and when the file changes (checked every 500 ms). A file
/// that does not parse leaves the last good list in force and says why.
async fn reload_operators(shared: Arc<Shared>, path: PathBuf) {
    let mut changes = crate::signals::config_changes(path.clone());
    while let Some(why) = changes.recv().await {
        let loaded = Config::load(&path).and_then(|c| Operators::from_config(&c));
        match loaded {
            Ok(ops) => {
                let changed = *shared.operators() != ops;
                let n = ops.len();
                let ops = Arc::new(ops);
                *shared.operators.write().unwrap_or_else(|e| e.into_inner()) = ops.clone();
                let ended = shared.sessions.end_stale(&ops);
                tracing::info!(why, keys = n, changed, ended, "serve: operators re-read");
                crate::tell!("settle serve: operators re-read ({why}): {n} key(s)");
            }
            Err(e) => {
                let text = crate::domain::escape_text(&e.to_string()).into_owned();
                tracing::warn!(why, error = %text, "serve: operators not re-read");
                crate::tell!("settle serve: {text}; the last good operators stay");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::console::Input;
    use crate::domain::{Identity, Role};
    use crate::serve::screen::{ChannelWriter, IDLE_FRAME, size};
    use std::collections::HashMap;
    use std::sync::atomic::Ordering;
    use tokio::sync::mpsc::unbounded_channel;

    fn alice() -> Identity {
        Identity {
            name: "alice".into(),
            role: Role::Operator,
            fingerprint: "SHA256:a".into(),
        }
    }

    fn two() -> SessionLimits {
        SessionLimits {
            max: 2,
            per_operator: 8,
        }
    }

    #[test]
    fn one_operator_cannot_fill_the_server_and_a_lead_always_gets_in() {
        use crate::serve::sessions::{Full, LEAD_SEATS};
        let sessions = Arc::new(Sessions::default());
        let limits = SessionLimits {
            max: 4,
            per_operator: 2,
        };
        let who = |name: &str, role| Identity {
            name: name.into(),
            role,
            fingerprint: format!("SHA256:{name}"),
        };
        let mut held = Vec::new();
        held.push(
            sessions
                .enter(&who("vera", Role::Viewer), None, limits)
                .unwrap(),
        );
        held.push(
            sessions
                .enter(&who("vera", Role::Viewer), None, limits)
                .unwrap(),
        );
        assert_eq!(
            sessions
                .enter(&who("vera", Role::Viewer), None, limits)
                .err(),
            Some(Full::Operator("vera".into(), 2)),
            "one operator holds their share, no more"
        );
        held.push(
            sessions
                .enter(&who("olga", Role::Operator), None, limits)
                .unwrap(),
        );
        held.push(
            sessions
                .enter(&who("otto", Role::Operator), None, limits)
                .unwrap(),
        );
        assert_eq!(
            sessions
                .enter(&who("oona", Role::Operator), None, limits)
                .err(),
            Some(Full::Server(4))
        );
        // the server is full, and a lead still gets in, up to the seats kept for leads
        for _ in 0..LEAD_SEATS.min(2) {
            held.push(
                sessions
                    .enter(&who("leo", Role::Lead), None, limits)
                    .unwrap(),
            );
        }
        assert_eq!(held.len(), 4 + LEAD_SEATS.min(2));
    }

    #[tokio::test]
    async fn the_list_of_sessions_never_keeps_a_dropped_connections_console_open() {
        let sessions = Arc::new(Sessions::default());
        let (tx, mut rx) = unbounded_channel::<Input>();
        let guard = sessions.enter(&alice(), Some(tx.clone()), two()).unwrap();
        assert_eq!(sessions.count.load(Ordering::SeqCst), 1);
        // the handler's sender is the one that counts: dropped with the connection
        drop(tx);
        let ended = tokio::time::timeout(Duration::from_secs(5), rx.recv()).await;
        assert!(matches!(ended, Ok(None)), "the console's input ends");
        drop(guard);
        assert_eq!(sessions.count.load(Ordering::SeqCst), 0);
    }

    #[tokio::test]
    async fn a_removed_key_ends_its_console_and_the_limit_holds() {
        let sessions = Arc::new(Sessions::default());
        let (tx, mut rx) = unbounded_channel::<Input>();
        let _a = sessions.enter(&alice(), Some(tx.clone()), two()).unwrap();
        let _b = sessions.enter(&alice(), None, two()).unwrap();
        assert!(sessions.enter(&alice(), None, two()).is_err(), "the limit");
        let same = Operators(HashMap::from([(
            "SHA256:a".to_string(),
            ("alice".to_string(), Role::Operator),
        )]));
        assert_eq!(sessions.end_stale(&same), 0);
        let promoted = Operators(HashMap::from([(
            "SHA256:a".to_string(),
            ("alice".to_string(), Role::Lead),
        )]));
        assert_eq!(
            sessions.end_stale(&promoted),
            1,
            "a changed role ends it too"
        );
        assert!(matches!(rx.recv().await, Some(Input::End(_))));
        assert_eq!(sessions.end_stale(&Operators::default()), 1);
    }

    #[test]
    fn an_unknown_size_is_80x24_and_a_huge_one_is_bounded() {
        assert_eq!(size(0, 0), (80, 24));
        assert_eq!(size(120, 0), (120, 24));
        assert_eq!(size(100_000, 40), (1000, 40));
    }

    #[test]
    fn a_frame_that_changes_nothing_is_not_sent() {
        let (tx, mut rx) = unbounded_channel();
        let mut w = ChannelWriter {
            tx,
            buf: Vec::new(),
            hidden: false,
        };
        use std::io::Write;
        // the first hides the cursor: sent
        w.write_all(IDLE_FRAME).unwrap();
        w.flush().unwrap();
        assert_eq!(rx.try_recv().unwrap(), IDLE_FRAME);
        w.write_all(IDLE_FRAME).unwrap();
        w.write_all(IDLE_FRAME).unwrap();
        w.flush().unwrap();
        assert!(rx.try_recv().is_err());
        w.write_all(b"\x1b[2;3Hx").unwrap();
        w.write_all(IDLE_FRAME).unwrap();
        w.flush().unwrap();
        assert_eq!(rx.try_recv().unwrap().len(), 7 + IDLE_FRAME.len());
        // after a frame that showed the cursor, hiding it again is a change
        w.write_all(b"\x1b[?25h").unwrap();
        w.flush().unwrap();
        assert!(rx.try_recv().is_ok());
        w.write_all(IDLE_FRAME).unwrap();
        w.flush().unwrap();
        assert_eq!(rx.try_recv().unwrap(), IDLE_FRAME);
    }
}
