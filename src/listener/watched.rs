//! A connection that its door can end, and that ends by itself when a deadline passes before it
//! is released: how an SSH connection that has not logged in within `login_grace` is closed,
//! whatever it is doing (sending nothing, a banner, a key exchange a byte at a time), and how a
//! door makes room by ending the oldest connection that is of no use yet.

use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::time::Sleep;

/// What ends a [`Watched`] connection from outside: set, and its reader woken.
#[derive(Default)]
pub struct Kill {
    killed: AtomicBool,
    reader: Mutex<Option<Waker>>,
}

impl Kill {
    /// Ends the connection at its next read (now, where it waits to read).
    pub fn kill(&self) {
        self.killed.store(true, Ordering::SeqCst);
        if let Some(w) = self.reader.lock().unwrap_or_else(|e| e.into_inner()).take() {
            w.wake();
        }
    }

    pub fn killed(&self) -> bool {
        self.killed.load(Ordering::SeqCst)
    }
}

/// `T`, whose reads fail once it is killed, or once its deadline passes before it is released.
pub struct Watched<T> {
    inner: T,
    kill: Arc<Kill>,
    deadline: Option<Pin<Box<Sleep>>>,
    released: Arc<AtomicBool>,
}

impl<T> Watched<T> {
    /// `inner`, ended by `kill`, and (with `deadline`) at that time from now unless the
    /// returned flag is set first.
    pub fn new(
        inner: T,
        kill: Arc<Kill>,
        deadline: Option<Duration>,
    ) -> (Watched<T>, Arc<AtomicBool>) {
        let released = Arc::new(AtomicBool::new(false));
        let w = Watched {
            inner,
            kill,
            deadline: deadline.map(|d| Box::pin(tokio::time::sleep(d))),
            released: released.clone(),
        };
        (w, released)
    }

    /// Lifts the deadline (the connection logged in).
    pub fn release(flag: &AtomicBool) {
        flag.store(true, Ordering::SeqCst);
    }
}

fn ended(why: &'static str) -> Poll<std::io::Result<()>> {
    Poll::Ready(Err(std::io::Error::new(std::io::ErrorKind::TimedOut, why)))
}

impl<T: AsyncRead + Unpin> AsyncRead for Watched<T> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        if self.kill.killed() {
            return ended("ended to make room for another connection");
        }
        {
            let mut reader = self.kill.reader.lock().unwrap_or_else(|e| e.into_inner());
            if !reader.as_ref().is_some_and(|w| w.will_wake(cx.waker())) {
                *reader = Some(cx.waker().clone());
            }
        }
        if self.kill.killed() {
            return ended("ended to make room for another connection");
        }
        // the sleep is polled with every read, so the reader wakes when it passes
        let released = self.released.load(Ordering::SeqCst);
        if let Some(sleep) = self.deadline.as_mut()
            && !released
            && sleep.as_mut().poll(cx).is_ready()
        {
            return ended("not logged in within the login grace time");
        }
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for Watched<T> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    #[tokio::test]
    async fn reads_fail_past_the_deadline_unless_released() {
        let (client, server) = tokio::io::duplex(64);
        let (mut held, _) = Watched::new(server, Arc::default(), Some(Duration::from_millis(50)));
        let mut buf = [0u8; 4];
        let e = held.read(&mut buf).await.unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::TimedOut);
        drop(client);

        let (mut client, server) = tokio::io::duplex(64);
        let (mut freed, flag) =
            Watched::new(server, Arc::default(), Some(Duration::from_millis(50)));
        Watched::<()>::release(&flag);
        tokio::time::sleep(Duration::from_millis(80)).await;
        client.write_all(b"ok").await.unwrap();
        let n = freed.read(&mut buf).await.unwrap();
        assert_eq!(&buf[..n], b"ok");
    }

    #[tokio::test]
    async fn a_kill_ends_a_reader_that_waits() {
        let (_client, server) = tokio::io::duplex(64);
        let kill = Arc::new(Kill::default());
        let (mut held, _) = Watched::new(server, kill.clone(), None);
        let reading = tokio::spawn(async move {
            let mut buf = [0u8; 4];
            held.read(&mut buf).await
        });
        tokio::time::sleep(Duration::from_millis(20)).await;
        kill.kill();
        let r = tokio::time::timeout(Duration::from_secs(2), reading).await;
        assert!(matches!(r, Ok(Ok(Err(_)))), "the read ends with an error");
    }
}
