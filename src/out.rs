//! Where the command line's output goes: the process's stdout and stderr, or, for a command run
//! by `settle serve` for an SSH exec request, that request's channel (a task-local sink set by
//! [`capture`]). `say!`, `tell!` and `settle list`'s stream all write through here, so a command
//! answers the same way in a shell and over SSH.

use std::future::Future;
use std::io::Write;

use tokio::sync::mpsc::UnboundedSender;

/// The two streams of one captured command: chunks of bytes, in order.
#[derive(Clone)]
pub struct Sink {
    pub out: UnboundedSender<Vec<u8>>,
    pub err: UnboundedSender<Vec<u8>>,
}

tokio::task_local! {
    static SINK: Sink;
}

/// Runs `f` with its output sent to `sink` instead of the process's streams.
pub async fn capture<F: Future>(sink: Sink, f: F) -> F::Output {
    SINK.scope(sink, f).await
}

/// Whether output goes to a captured sink (then a closed reader never ends the process).
pub fn captured() -> bool {
    SINK.try_with(|_| ()).is_ok()
}

pub enum Stream {
    Stdout(std::io::Stdout),
    Stderr(std::io::Stderr),
    /// A captured stream; `true` for stderr. A reader that went away swallows the rest.
    Sink(bool),
}

pub fn stdout() -> Stream {
    if captured() {
        Stream::Sink(false)
    } else {
        Stream::Stdout(std::io::stdout())
    }
}

pub fn stderr() -> Stream {
    if captured() {
        Stream::Sink(true)
    } else {
        Stream::Stderr(std::io::stderr())
    }
}

impl Write for Stream {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        match self {
            Stream::Stdout(s) => s.write(buf),
            Stream::Stderr(s) => s.write(buf),
            Stream::Sink(err) => {
                let _ = SINK.try_with(|s| {
                    let to = if *err { &s.err } else { &s.out };
                    to.send(buf.to_vec())
                });
                Ok(buf.len())
            }
        }
    }

    fn flush(&mut self) -> std::io::Result<()> {
        match self {
            Stream::Stdout(s) => s.flush(),
            Stream::Stderr(s) => s.flush(),
            Stream::Sink(_) => Ok(()),
        }
    }
}
