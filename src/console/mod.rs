//! The triage console: `settle` with no subcommand.
//!
//! One event loop over key events, a tick, a poll timer and the results of database work done in
//! spawned tasks. Drawing never awaits the database: the first frame shows the chrome and a
//! spinner, and the last data stays on screen while the next loads.
//!
//! Rooms: `app/` the state and how keys and results change it, `ui/` the drawing, `keymap.rs` the
//! keys in one table (the footer and help are made from it), `effects.rs` the effects run against
//! the ledger in tasks, `theme.rs` colours by meaning.

pub mod app;
mod effects;
pub mod keymap;
pub mod theme;
pub mod ui;

use std::time::Duration;

use ratatui::Terminal;
use ratatui::backend::Backend;
use ratatui::crossterm::event::{self, Event, KeyEvent, KeyEventKind};
use tokio::sync::mpsc::{UnboundedReceiver, UnboundedSender, unbounded_channel};
use tokio::sync::watch;

use crate::error::{Error, Result};
use crate::ledger::Ledger;
use app::{App, Effect, Msg};
pub use effects::run_effect;
use effects::spawn;
use theme::Theme;

/// How often the console asks whether anything changed (the manual: about once a second).
const POLL: Duration = Duration::from_millis(1000);
const TICK: Duration = Duration::from_millis(150);

/// Restores the terminal however the console ends (return, error or panic unwinding).
struct TerminalGuard;

impl Drop for TerminalGuard {
    fn drop(&mut self) {
        ratatui::restore();
    }
}

/// What drives a console: the keys and window sizes of a local terminal or of an SSH channel.
#[derive(Debug)]
pub enum Input {
    Key(KeyEvent),
    Resize {
        width: u16,
        height: u16,
    },
    /// The session must end (its operator was removed); the text says why.
    End(String),
}

/// How a console session ended.
#[derive(Debug, PartialEq, Eq)]
pub enum Ended {
    /// The operator pressed `q`.
    Quit,
    /// The input went away (the terminal or the connection closed).
    Closed,
    /// No key for the idle timeout.
    Idle,
    /// Ended from outside, for this reason.
    Ended(String),
}

/// Runs the console until the operator quits.
pub async fn run(ledger: Ledger, operator: &str) -> Result<()> {
    use std::io::IsTerminal;
    if !std::io::stdout().is_terminal() || !std::io::stdin().is_terminal() {
        return Err(Error::Invalid(
            "the console needs a terminal; use settle list / show / stats in scripts".into(),
        ));
    }
    // The sweep runs at every start of the console; an outage here shows in the header later.
    let _ = ledger.rounds().sweep().await;
    let mut terminal = ratatui::try_init()
        .map_err(|e| Error::Invalid(format!("cannot open the terminal: {e}")))?;
    let _guard = TerminalGuard;
    let (tx, input) = unbounded_channel::<Input>();
    spawn_input(tx);
    let changes = watch_changes(ledger.clone());
    drive(
        ledger,
        operator,
        &mut terminal,
        Theme::from_env(),
        input,
        changes,
        None,
    )
    .await
    .map(|_| ())
}

/// The console's loop over one terminal (local, or an SSH channel's): keys and sizes from
/// `input`, other writers' changes from `changes`, frames to `terminal`. With `idle`, a session
/// without a key for that long ends, warned a minute before.
pub async fn drive<B: Backend>(
    ledger: Ledger,
    operator: &str,
    terminal: &mut Terminal<B>,
    theme: Theme,
    mut input: UnboundedReceiver<Input>,
    mut changes: watch::Receiver<u64>,
    idle: Option<Duration>,
) -> Result<Ended> {
    let (tx, mut rx) = unbounded_channel::<Msg>();
    let mut app = App::new(ledger.database(), operator);
    app.role = ledger.role();
    let c = ledger.config();
    app.age_thresholds = (
        c.warn_after.as_secs() as i64,
        c.critical_after.as_secs() as i64,
    );
    app.undo_window = c.undo_window;
    let size = terminal.size().map_err(|e| Error::Invalid(e.to_string()))?;
    app.update(Msg::Resized {
        rows: list_rows(size.height),
    });
    let first = app.start();
    let mut poll = tokio::time::interval(POLL);
    let mut tick = tokio::time::interval(TICK);
    let mut last_key = tokio::time::Instant::now();
    let mut warned = false;
    draw(terminal, &app, &theme)?;
    for fx in first {
        spawn(&ledger, fx, operator, &tx);
    }
    loop {
        let msg = tokio::select! {
            Some(m) = rx.recv() => m,
            i = input.recv() => match i {
                Some(Input::Key(k)) => {
                    last_key = tokio::time::Instant::now();
                    if warned {
                        warned = false;
                        app.status.line = None;
                    }
                    Msg::Key(k)
                }
                Some(Input::Resize { width, height }) => {
                    let area = ratatui::layout::Rect::new(0, 0, width, height);
                    terminal.resize(area).map_err(|e| Error::Invalid(e.to_string()))?;
                    Msg::Resized { rows: list_rows(height) }
                }
                Some(Input::End(why)) => return Ok(Ended::Ended(why)),
                None => return Ok(Ended::Closed),
            },
            Ok(()) = changes.changed() => Msg::Changed,
            _ = tick.tick() => {
                if let Some(limit) = idle {
                    let quiet = last_key.elapsed();
                    if quiet >= limit {
                        return Ok(Ended::Idle);
                    }
                    let left = limit - quiet;
                    if left <= IDLE_WARNING {
                        warned = true;
                        app.status.set(
                            format!("idle: this session ends in {} s unless a key is pressed", left.as_secs() + 1),
                            true, app.now,
                        );
                    }
                }
                Msg::Tick
            }
            _ = poll.tick() => {
                spawn(&ledger, Effect::Poll, operator, &tx);
                continue;
            }
        };
        for fx in app.update(msg) {
            if fx == Effect::Quit {
                return Ok(Ended::Quit);
            }
            spawn(&ledger, fx, operator, &tx);
        }
        if app.quit {
            return Ok(Ended::Quit);
        }
        draw(terminal, &app, &theme)?;
    }
}

/// How long before the idle timeout a session is warned.
const IDLE_WARNING: Duration = Duration::from_secs(60);

fn draw<B: Backend>(terminal: &mut Terminal<B>, app: &App, theme: &Theme) -> Result<()> {
    terminal
        .draw(|f| ui::draw(f, app, theme))
        .map(|_| ())
        .map_err(|e| Error::Invalid(format!("cannot draw: {e}")))
}

/// The rows of the list that fit on a screen this high (for PgUp/PgDn).
fn list_rows(height: u16) -> u16 {
    (height.saturating_sub(6) / 2).saturating_sub(1).max(1)
}

/// Keys come from a thread of their own: crossterm's `read` blocks.
fn spawn_input(tx: UnboundedSender<Input>) {
    std::thread::spawn(move || {
        loop {
            let input = match event::read() {
                Ok(Event::Key(k)) if k.kind != KeyEventKind::Release => Input::Key(k),
                Ok(Event::Resize(width, height)) => Input::Resize { width, height },
                Ok(_) => continue,
                Err(_) => return,
            };
            if tx.send(input).is_err() {
                return;
            }
        }
    });
}

/// Other writers' changes, as a counter that moves. On PostgreSQL they arrive as notifications at
/// once (one listening connection, however many consoles watch; the poll stays as the fallback
/// and the outage detector); SQLite is polled, and the counter never moves.
pub fn watch_changes(ledger: Ledger) -> watch::Receiver<u64> {
    let (tx, rx) = watch::channel(0u64);
    if ledger.backend() != crate::store::Backend::Postgres {
        // keep the sender: a closed channel would end every `changed()` at once
        tokio::spawn(async move { tx.closed().await });
        return rx;
    }
    tokio::spawn(async move {
        loop {
            if let Some(mut l) = ledger.read().listen().await {
                while l.next().await {
                    tx.send_modify(|n| *n += 1);
                    if tx.is_closed() {
                        return;
                    }
                }
            }
            if tx.is_closed() {
                return;
            }
            tokio::time::sleep(POLL).await;
        }
    });
    rx
}
