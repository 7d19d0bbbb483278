//! What a channel runs: the console (frames to the channel, keys from it) or one command.

use std::sync::Arc;

use russh::ChannelId;
use russh::server::Handle;
use tokio::sync::mpsc::{UnboundedSender, unbounded_channel};

use crate::console::{Ended, Input};
use crate::domain::Identity;
use crate::error::Error;
use crate::ledger::Ledger;
use crate::serve::sessions::SessionGuard;
use crate::serve::shared::{Exec, Shared};

/// A window size from the client: zero means it did not say (`ssh -tt` without a local
/// terminal; RFC 4254 lets it), and the console then draws 80x24, its design size.
pub(super) fn size(width: u32, height: u32) -> (u16, u16) {
    let pick = |n: u32, default: u16| if n == 0 { default } else { n.min(1000) as u16 };
    (pick(width, 80), pick(height, 24))
}

pub(super) fn too_many(full: &crate::serve::sessions::Full) -> String {
    use crate::serve::sessions::Full;
    match full {
        Full::Server(limit) => format!(
            "settle: {limit} sessions are open, the most this server takes; try again later (a lead can still log in)\r\n"
        ),
        Full::Operator(name, n) => format!(
            "settle: {name} has {n} sessions open, the most one operator may; close one first\r\n"
        ),
    }
}

/// Tells `text` on stderr, then ends the channel with `status`.
pub(super) async fn finish(handle: Handle, channel: ChannelId, text: String, status: u32) {
    let _ = handle.extended_data(channel, 1, text.into_bytes()).await;
    end(&handle, channel, status).await;
}

pub(super) async fn end(handle: &Handle, channel: ChannelId, status: u32) {
    let _ = handle.exit_status_request(channel, status).await;
    let _ = handle.eof(channel).await;
    let _ = handle.close(channel).await;
}

pub(super) struct Screen {
    pub(super) width: u16,
    pub(super) height: u16,
    pub(super) no_color: bool,
}

/// ratatui's output into the channel: a frame's bytes are collected and sent at the flush that
/// ends it, in order, by one task per session.
pub(super) struct ChannelWriter {
    pub(super) tx: UnboundedSender<Vec<u8>>,
    pub(super) buf: Vec<u8>,
    /// The last frame sent left the cursor hidden (so an idle frame would change nothing).
    pub(super) hidden: bool,
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
pub(super) const IDLE_FRAME: &[u8] = b"\x1b[39m\x1b[49m\x1b[59m\x1b[0m\x1b[?25l";

pub(super) fn idle_frame(buf: &[u8]) -> bool {
    buf.chunks(IDLE_FRAME.len()).all(|c| c == IDLE_FRAME)
}

/// One console session over a channel, from its first frame to its exit status.
pub(super) async fn console(
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
pub(super) async fn exec(
    run: Exec,
    ledger: Ledger,
    who: Identity,
    command: String,
    handle: Handle,
    channel: ChannelId,
) {
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
    let code = crate::out::capture(sink, run(ledger, who, command)).await;
    let _ = sender.await;
    end(&handle, channel, code as u32).await;
}
