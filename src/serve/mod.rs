//! `settle serve` (SPEC 17): the console over SSH, so staff need no shell account, no database
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

pub mod keys;

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use russh::keys::PrivateKey;
use russh::keys::ssh_key::{HashAlg, LineEnding, PublicKey};
use russh::server::{Auth, Handle, Msg, PublicKeyOffer, Session, VerifiedPublicKey};
use russh::{Channel, ChannelId, MethodKind, MethodSet};
use tokio::sync::mpsc::{UnboundedSender, WeakUnboundedSender, unbounded_channel};
use tokio::sync::watch;

use crate::config::Config;
use crate::console::{Ended, Input};
use crate::domain::{Identity, Role};
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

/// The host key at `path`, made (ed25519, mode 0600) when there is none.
pub fn host_key(path: &Path) -> Result<PrivateKey> {
    let bad =
        |e: &dyn std::fmt::Display| Error::Invalid(format!("--host-key {}: {e}", path.display()));
    match std::fs::read_to_string(path) {
        Ok(text) => PrivateKey::from_openssh(text.trim_end()).map_err(|e| bad(&e)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            let mut seed = [0u8; 32];
            rand::Rng::fill(&mut rand::rng(), &mut seed);
            let pair = russh::keys::ssh_key::private::Ed25519Keypair::from_seed(&seed);
            let key = PrivateKey::from(pair);
            let text = key.to_openssh(LineEnding::LF).map_err(|e| bad(&e))?;
            if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
                std::fs::create_dir_all(dir).map_err(|e| bad(&e))?;
            }
            write_private(path, text.as_bytes()).map_err(|e| bad(&e))?;
            Ok(key)
        }
        Err(e) => Err(bad(&e)),
    }
}

/// Writes a new file only its owner can read, all or nothing (a temporary file renamed).
fn write_private(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let tmp = path.with_extension("tmp");
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&tmp)?;
    f.write_all(bytes)?;
    f.sync_all()?;
    std::fs::rename(&tmp, path)
}

pub fn fingerprint(key: &PublicKey) -> String {
    key.fingerprint(HashAlg::Sha256).to_string()
}

/// `[operators]` as the server reads it: a key's fingerprint to its operator and role.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Operators(HashMap<String, (String, Role)>);

impl Operators {
    pub fn from_config(config: &Config) -> Result<Operators> {
        let mut map = HashMap::new();
        for (name, o) in &config.operators {
            for line in &o.keys {
                let key = PublicKey::from_openssh(line.trim()).map_err(|e| {
                    Error::Invalid(format!("operators.{name}.keys: not a public key: {e}"))
                })?;
                if let Some((other, _)) = map.insert(fingerprint(&key), (name.clone(), o.role))
                    && other != *name
                {
                    return Err(Error::Invalid(format!(
                        "operators.{name}.keys: the same key is also {other}'s"
                    )));
                }
            }
        }
        Ok(Operators(map))
    }

    fn lookup(&self, fingerprint: &str) -> Option<&(String, Role)> {
        self.0.get(fingerprint)
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// The open sessions: consoles (which can be told to end) and exec requests.
#[derive(Default)]
pub struct Sessions {
    open: Mutex<HashMap<u64, SessionEntry>>,
    next: AtomicU64,
    /// The count, for `settle_console_sessions`.
    pub count: Arc<AtomicUsize>,
}

struct SessionEntry {
    fingerprint: String,
    name: String,
    role: Role,
    /// Weak: only the connection's handler keeps a console's input open, so a dropped
    /// connection ends its console at once, whatever this list holds.
    input: Option<WeakUnboundedSender<Input>>,
}

/// A place in [`Sessions`]; dropping it frees the place.
struct SessionGuard {
    sessions: Arc<Sessions>,
    id: u64,
}

impl Drop for SessionGuard {
    fn drop(&mut self) {
        let mut open = self.sessions.open.lock().unwrap_or_else(|e| e.into_inner());
        if open.remove(&self.id).is_some() {
            self.sessions.count.store(open.len(), Ordering::SeqCst);
        }
    }
}

impl Sessions {
    /// A place for a session of `who`, unless `limit` are open.
    fn enter(
        self: &Arc<Self>,
        who: &Identity,
        input: Option<UnboundedSender<Input>>,
        limit: usize,
    ) -> Option<SessionGuard> {
        let mut open = self.open.lock().unwrap_or_else(|e| e.into_inner());
        if open.len() >= limit {
            return None;
        }
        let id = self.next.fetch_add(1, Ordering::SeqCst);
        open.insert(
            id,
            SessionEntry {
                fingerprint: who.fingerprint.clone(),
                name: who.name.clone(),
                role: who.role,
                input: input.map(|tx| tx.downgrade()),
            },
        );
        self.count.store(open.len(), Ordering::SeqCst);
        Some(SessionGuard {
            sessions: self.clone(),
            id,
        })
    }

    /// Ends the consoles whose key no longer names the same operator with the same role.
    fn end_stale(&self, operators: &Operators) -> usize {
        let open = self.open.lock().unwrap_or_else(|e| e.into_inner());
        let mut ended = 0;
        for s in open.values() {
            let same = operators
                .lookup(&s.fingerprint)
                .is_some_and(|(n, r)| *n == s.name && *r == s.role);
            if !same && let Some(tx) = s.input.as_ref().and_then(|w| w.upgrade()) {
                let _ = tx.send(Input::End(format!(
                    "{}'s key or role changed in the configuration; log in again",
                    s.name
                )));
                ended += 1;
            }
        }
        ended
    }
}

/// What every connection shares.
struct Shared {
    ledger: Ledger,
    operators: RwLock<Arc<Operators>>,
    sessions: Arc<Sessions>,
    changes: watch::Receiver<u64>,
    max_sessions: usize,
    idle: Duration,
}

impl Shared {
    fn operators(&self) -> Arc<Operators> {
        self.operators
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }
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
    let metrics = match &options.metrics {
        Some(m) => Some(
            tokio::net::TcpListener::bind(m)
                .await
                .map_err(|e| Error::Invalid(format!("--metrics {m}: {e}")))?,
        ),
        None => None,
    };
    let shared = Arc::new(Shared {
        changes: crate::console::watch_changes(ledger.clone()),
        ledger: ledger.clone(),
        operators: RwLock::new(Arc::new(operators)),
        sessions: sessions.clone(),
        max_sessions: options.max_sessions,
        idle: options.idle,
    });
    crate::say!("settle serve: listening on {addr}");
    crate::say!("settle serve: host key {host_fingerprint}");
    if let Some(m) = &metrics {
        let at = m.local_addr().map_err(|e| Error::Invalid(e.to_string()))?;
        crate::say!("settle serve: metrics on http://{at}/metrics");
        let app = crate::metrics::router(ledger.clone(), sessions.count.clone());
        let m = m.local_addr().ok();
        let listener = metrics.expect("bound above");
        tokio::spawn(async move {
            if let Err(e) = axum::serve(listener, app).await {
                tracing::warn!(error = %e, at = ?m, "metrics server ended");
            }
        });
    }
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
        // the console has its own idle timeout, with a warning; dead peers are found by keepalive
        inactivity_timeout: None,
        keepalive_interval: Some(Duration::from_secs(30)),
        keepalive_max: 3,
        nodelay: true,
        ..Default::default()
    };
    let mut server = Server {
        shared: shared.clone(),
    };
    let running = russh::server::Server::run_on_socket(&mut server, Arc::new(config), &socket);
    let stop = running.handle();
    tokio::select! {
        r = running => r.map_err(|e| Error::Invalid(format!("the SSH server failed: {e}")))?,
        () = terminated() => {
            tracing::info!("serve: stopping");
            stop.shutdown("settle serve is stopping".into());
        }
    }
    Ok(())
}

async fn terminated() {
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

/// Re-reads `[operators]` on SIGHUP and when the file changes (checked every 500 ms). A file
/// that does not parse leaves the last good list in force and says why.
async fn reload_operators(shared: Arc<Shared>, path: PathBuf) {
    use tokio::signal::unix::{SignalKind, signal};
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

struct Server {
    shared: Arc<Shared>,
}

impl russh::server::Server for Server {
    type Handler = Conn;

    fn new_client(&mut self, peer: Option<SocketAddr>) -> Conn {
        Conn {
            shared: self.shared.clone(),
            peer,
            who: None,
            channels: HashMap::new(),
        }
    }
}

/// One connection: who logged in, and its channels.
pub struct Conn {
    shared: Arc<Shared>,
    peer: Option<SocketAddr>,
    who: Option<Identity>,
    channels: HashMap<ChannelId, ChannelState>,
}

#[derive(Default)]
struct ChannelState {
    size: Option<(u16, u16)>,
    no_color: bool,
    decoder: keys::Decoder,
    input: Option<UnboundedSender<Input>>,
    started: bool,
}

impl Conn {
    fn known(&self, key: &PublicKey) -> Option<(String, Role)> {
        self.shared.operators().lookup(&fingerprint(key)).cloned()
    }

    /// A shell or exec request on `channel`: who asks and a handle to answer them, or `None`
    /// (refused: nobody logged in, no such channel, or the channel already runs something).
    fn begin(
        &mut self,
        channel: ChannelId,
        session: &mut Session,
    ) -> std::result::Result<Option<(Identity, Handle)>, ConnError> {
        let (Some(who), Some(c)) = (self.who.clone(), self.channels.get_mut(&channel)) else {
            session.channel_failure(channel)?;
            return Ok(None);
        };
        if std::mem::replace(&mut c.started, true) {
            session.channel_failure(channel)?;
            return Ok(None);
        }
        session.channel_success(channel)?;
        Ok(Some((who, session.handle())))
    }

    /// A place among the sessions, or the channel told why not and ended.
    fn enter(
        &self,
        who: &Identity,
        input: Option<UnboundedSender<Input>>,
        handle: &Handle,
        channel: ChannelId,
    ) -> Option<SessionGuard> {
        let limit = self.shared.max_sessions;
        let guard = self.shared.sessions.enter(who, input, limit);
        if guard.is_none() {
            tokio::spawn(finish(handle.clone(), channel, too_many(limit), 1));
        }
        guard
    }
}

/// The handler's error: russh's own (a session's failures are told on its channel).
pub struct ConnError(#[allow(dead_code)] russh::Error);

impl From<russh::Error> for ConnError {
    fn from(e: russh::Error) -> Self {
        ConnError(e)
    }
}

impl russh::server::Handler for Conn {
    type Error = ConnError;

    async fn auth_publickey_offered(
        &mut self,
        _user: &str,
        offer: PublicKeyOffer<'_>,
    ) -> std::result::Result<Auth, Self::Error> {
        // spares the signature of a key that would be refused anyway; decides nothing
        Ok(if self.known(offer.public_key).is_some() {
            Auth::Accept
        } else {
            Auth::reject()
        })
    }

    async fn auth_publickey(
        &mut self,
        user: &str,
        key: VerifiedPublicKey<'_>,
    ) -> std::result::Result<Auth, Self::Error> {
        // the signature is verified: the identity is the key's, whatever the user name says
        let print = fingerprint(key.public_key);
        match self.known(key.public_key) {
            Some((name, role)) => {
                tracing::info!(operator = %name, %role, key = %print, peer = ?self.peer, "serve: logged in");
                self.who = Some(Identity {
                    name,
                    role,
                    fingerprint: print,
                });
                Ok(Auth::Accept)
            }
            None => {
                let user = crate::domain::escape_text(user).into_owned();
                tracing::warn!(key = %print, %user, peer = ?self.peer, "serve: unknown key refused");
                Ok(Auth::reject())
            }
        }
    }

    async fn channel_open_session(
        &mut self,
        channel: Channel<Msg>,
        reply: russh::server::ChannelOpenHandle,
        _session: &mut Session,
    ) -> std::result::Result<(), Self::Error> {
        // the channel object is dropped: its data comes to `data` below
        self.channels.insert(channel.id(), ChannelState::default());
        reply.accept().await;
        Ok(())
    }

    async fn pty_request(
        &mut self,
        channel: ChannelId,
        _term: &str,
        width: u32,
        height: u32,
        _pix_width: u32,
        _pix_height: u32,
        _modes: &[(russh::Pty, u32)],
        session: &mut Session,
    ) -> std::result::Result<(), Self::Error> {
        if let Some(c) = self.channels.get_mut(&channel) {
            c.size = Some(size(width, height));
        }
        session.channel_success(channel)?;
        Ok(())
    }

    async fn env_request(
        &mut self,
        channel: ChannelId,
        name: &str,
        value: &str,
        session: &mut Session,
    ) -> std::result::Result<(), Self::Error> {
        // NO_COLOR only: the operator comes from the key, never from SETTLE_OPERATOR or the like
        match self.channels.get_mut(&channel) {
            Some(c) if name == "NO_COLOR" => {
                c.no_color = !value.is_empty();
                session.channel_success(channel)?;
            }
            _ => session.channel_failure(channel)?,
        }
        Ok(())
    }

    async fn window_change_request(
        &mut self,
        channel: ChannelId,
        width: u32,
        height: u32,
        _pix_width: u32,
        _pix_height: u32,
        _session: &mut Session,
    ) -> std::result::Result<(), Self::Error> {
        if let Some(c) = self.channels.get_mut(&channel) {
            let (width, height) = size(width, height);
            c.size = Some((width, height));
            if let Some(tx) = &c.input {
                let _ = tx.send(Input::Resize { width, height });
            }
        }
        Ok(())
    }

    async fn data(
        &mut self,
        channel: ChannelId,
        data: &[u8],
        _session: &mut Session,
    ) -> std::result::Result<(), Self::Error> {
        if let Some(c) = self.channels.get_mut(&channel)
            && let Some(tx) = &c.input
        {
            for k in c.decoder.feed(data) {
                let _ = tx.send(Input::Key(k));
            }
        }
        Ok(())
    }

    async fn channel_eof(
        &mut self,
        channel: ChannelId,
        _session: &mut Session,
    ) -> std::result::Result<(), Self::Error> {
        if let Some(c) = self.channels.get_mut(&channel) {
            c.input = None;
        }
        Ok(())
    }

    async fn channel_close(
        &mut self,
        channel: ChannelId,
        _session: &mut Session,
    ) -> std::result::Result<(), Self::Error> {
        self.channels.remove(&channel);
        Ok(())
    }

    async fn shell_request(
        &mut self,
        channel: ChannelId,
        session: &mut Session,
    ) -> std::result::Result<(), Self::Error> {
        let Some((who, handle)) = self.begin(channel, session)? else {
            return Ok(());
        };
        let Some(c) = self.channels.get(&channel) else {
            return Ok(());
        };
        let no_color = c.no_color;
        let Some((width, height)) = c.size else {
            tokio::spawn(finish(
                handle,
                channel,
                "settle: the console needs a terminal: ssh -t (or run a command: stats, list, show)\r\n".into(),
                1,
            ));
            return Ok(());
        };
        let (tx, rx) = unbounded_channel();
        let Some(guard) = self.enter(&who, Some(tx.clone()), &handle, channel) else {
            return Ok(());
        };
        if let Some(c) = self.channels.get_mut(&channel) {
            c.input = Some(tx);
        }
        let screen = Screen {
            width,
            height,
            no_color,
        };
        tokio::spawn(console(
            self.shared.clone(),
            who,
            handle,
            channel,
            screen,
            rx,
            guard,
        ));
        Ok(())
    }

    async fn exec_request(
        &mut self,
        channel: ChannelId,
        data: &[u8],
        session: &mut Session,
    ) -> std::result::Result<(), Self::Error> {
        let Some((who, handle)) = self.begin(channel, session)? else {
            return Ok(());
        };
        let Some(guard) = self.enter(&who, None, &handle, channel) else {
            return Ok(());
        };
        let command = String::from_utf8_lossy(data).into_owned();
        let ledger = self.shared.ledger.for_session(who.clone());
        tokio::spawn(async move {
            let _guard = guard;
            exec(ledger, who, command, handle, channel).await;
        });
        Ok(())
    }
}

/// A window size from the client: zero means it did not say (`ssh -tt` without a local
/// terminal; RFC 4254 lets it), and the console then draws 80x24, its design size.
fn size(width: u32, height: u32) -> (u16, u16) {
    let pick = |n: u32, default: u16| if n == 0 { default } else { n.min(1000) as u16 };
    (pick(width, 80), pick(height, 24))
}

fn too_many(limit: usize) -> String {
    format!("settle: {limit} sessions are open, the most this server takes; try again later\r\n")
}

/// Tells `text` on stderr, then ends the channel with `status`.
async fn finish(handle: Handle, channel: ChannelId, text: String, status: u32) {
    let _ = handle.extended_data(channel, 1, text.into_bytes()).await;
    end(&handle, channel, status).await;
}

async fn end(handle: &Handle, channel: ChannelId, status: u32) {
    let _ = handle.exit_status_request(channel, status).await;
    let _ = handle.eof(channel).await;
    let _ = handle.close(channel).await;
}

struct Screen {
    width: u16,
    height: u16,
    no_color: bool,
}

/// ratatui's output into the channel: a frame's bytes are collected and sent at the flush that
/// ends it, in order, by one task per session.
struct ChannelWriter {
    tx: UnboundedSender<Vec<u8>>,
    buf: Vec<u8>,
    /// The last frame sent left the cursor hidden (so an idle frame would change nothing).
    hidden: bool,
}

impl std::io::Write for ChannelWriter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.buf.extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        // a frame that changed no cell still resets the colours and hides the cursor, which
        // every frame leaves so: sent 7 times a second by the tick, it is noise on a slow link
        if self.buf.is_empty() || (self.hidden && idle_frame(&self.buf)) {
            self.buf.clear();
            return Ok(());
        }
        self.hidden = self.buf.ends_with(b"\x1b[?25l");
        self.tx
            .send(std::mem::take(&mut self.buf))
            .map_err(|_| std::io::Error::from(std::io::ErrorKind::BrokenPipe))
    }
}

/// What ratatui's crossterm backend writes for a frame with no change: the style reset and the
/// hidden cursor, which the previous frame already left.
const IDLE_FRAME: &[u8] = b"\x1b[39m\x1b[49m\x1b[59m\x1b[0m\x1b[?25l";

fn idle_frame(buf: &[u8]) -> bool {
    buf.chunks(IDLE_FRAME.len()).all(|c| c == IDLE_FRAME)
}

/// One console session over a channel, from its first frame to its exit status.
async fn console(
    shared: Arc<Shared>,
    who: Identity,
    handle: Handle,
    channel: ChannelId,
    screen: Screen,
    input: tokio::sync::mpsc::UnboundedReceiver<Input>,
    guard: SessionGuard,
) {
    use ratatui::crossterm::{cursor, execute, terminal};
    let (tx, mut rx) = unbounded_channel::<Vec<u8>>();
    let out = handle.clone();
    let writer = tokio::spawn(async move {
        while let Some(bytes) = rx.recv().await {
            if out.data(channel, bytes).await.is_err() {
                return;
            }
        }
    });
    let mut w = ChannelWriter {
        tx,
        buf: Vec::new(),
        hidden: false,
    };
    let _ = execute!(
        w,
        terminal::EnterAlternateScreen,
        cursor::Hide,
        terminal::Clear(terminal::ClearType::All)
    );
    let area = ratatui::layout::Rect::new(0, 0, screen.width, screen.height);
    let options = ratatui::TerminalOptions {
        viewport: ratatui::Viewport::Fixed(area),
    };
    let backend = ratatui::backend::CrosstermBackend::new(w);
    let ended = match ratatui::Terminal::with_options(backend, options) {
        Ok(mut terminal) => {
            let theme = crate::console::theme::Theme {
                color: !screen.no_color,
            };
            let ledger = shared.ledger.for_session(who.clone());
            tracing::info!(operator = %who.name, role = %who.role, "serve: console opened");
            let ended = crate::console::drive(
                ledger,
                &who.name,
                &mut terminal,
                theme,
                input,
                shared.changes.clone(),
                Some(shared.idle),
            )
            .await;
            let w = terminal.backend_mut();
            let _ = execute!(w, terminal::LeaveAlternateScreen, cursor::Show);
            let note = match &ended {
                Ok(Ended::Idle) => Some("settle: the session ended after being idle\r\n".into()),
                Ok(Ended::Ended(why)) => Some(format!("settle: {why}\r\n")),
                Err(e) => Some(format!(
                    "settle: {}\r\n",
                    crate::domain::escape_text(&e.to_string())
                )),
                _ => None,
            };
            if let Some(n) = note {
                let _ = std::io::Write::write_all(w, n.as_bytes());
                let _ = std::io::Write::flush(w);
            }
            tracing::info!(operator = %who.name, ended = ?ended.as_ref().map_err(|e| e.to_string()), "serve: console closed");
            ended
        }
        Err(e) => Err(Error::Invalid(e.to_string())),
    };
    drop(guard);
    // everything written is sent before the status
    let _ = writer.await;
    let status = match ended {
        Ok(Ended::Quit) => 0,
        _ => 1,
    };
    end(&handle, channel, status).await;
}

/// One exec request: a reading command, its output on the channel, its exit status.
async fn exec(ledger: Ledger, who: Identity, command: String, handle: Handle, channel: ChannelId) {
    let (out_tx, mut out_rx) = unbounded_channel::<Vec<u8>>();
    let (err_tx, mut err_rx) = unbounded_channel::<Vec<u8>>();
    let sink = crate::out::Sink {
        out: out_tx,
        err: err_tx,
    };
    let h = handle.clone();
    let sender = tokio::spawn(async move {
        let (mut out_open, mut err_open) = (true, true);
        while out_open || err_open {
            tokio::select! {
                b = out_rx.recv(), if out_open => match b {
                    Some(b) => { let _ = h.data(channel, b).await; }
                    None => out_open = false,
                },
                b = err_rx.recv(), if err_open => match b {
                    Some(b) => { let _ = h.extended_data(channel, 1, b).await; }
                    None => err_open = false,
                },
            }
        }
    });
    tracing::info!(operator = %who.name, "serve: exec");
    let code = crate::out::capture(sink, crate::cli::remote(ledger, &who, &command)).await;
    let _ = sender.await;
    end(&handle, channel, code as u32).await;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn alice() -> Identity {
        Identity {
            name: "alice".into(),
            role: Role::Operator,
            fingerprint: "SHA256:a".into(),
        }
    }

    #[tokio::test]
    async fn the_list_of_sessions_never_keeps_a_dropped_connections_console_open() {
        let sessions = Arc::new(Sessions::default());
        let (tx, mut rx) = unbounded_channel::<Input>();
        let guard = sessions.enter(&alice(), Some(tx.clone()), 2).unwrap();
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
        let _a = sessions.enter(&alice(), Some(tx.clone()), 2).unwrap();
        let _b = sessions.enter(&alice(), None, 2).unwrap();
        assert!(sessions.enter(&alice(), None, 2).is_none(), "the limit");
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
