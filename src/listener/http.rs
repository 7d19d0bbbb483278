//! An axum router served through a [`Door`](super::Door): HTTP/1.1 (hyper), over TLS where an
//! acceptor is given, with every deadline a server exposed to a company network needs: the
//! TLS handshake, the request's headers (which also bound how long an idle connection waits
//! for its next request), and the request's body.

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::Body;
use axum::extract::Request;
use http_body::Frame;
use hyper_util::rt::{TokioIo, TokioTimer};

use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpListener;
use tokio::sync::{mpsc, watch};
use tokio::time::Sleep;

use super::{Door, Pass};

/// How long a TLS handshake may take.
pub const HANDSHAKE: Duration = Duration::from_secs(10);

/// How long a stop waits for the requests under way to be answered.
const DRAIN: Duration = Duration::from_secs(30);

/// The deadlines of one HTTP listener.
#[derive(Clone, Copy, Debug)]
pub struct Deadlines {
    pub headers: Duration,
    pub body: Duration,
}

/// Serves `app` on `socket` through `door` until `stop` ends, then lets the requests under way
/// finish (at most 30 s).
pub async fn serve(
    socket: TcpListener,
    door: Arc<Door>,
    tls: Option<tokio_rustls::TlsAcceptor>,
    app: axum::Router,
    deadlines: Deadlines,
    stop: impl std::future::Future<Output = ()>,
) {
    let (stopping, stopped) = watch::channel(false);
    // every connection holds a sender: when all are gone, every connection has ended
    let (alive, mut all_ended) = mpsc::channel::<()>(1);
    tokio::pin!(stop);
    loop {
        let (tcp, peer, pass) = tokio::select! {
            accepted = door.accept(&socket) => accepted,
            () = &mut stop => break,
        };
        let _ = tcp.set_nodelay(true);
        let (app, tls, stopped, alive) = (app.clone(), tls.clone(), stopped.clone(), alive.clone());
        let door = door.clone();
        tokio::spawn(async move {
            let _alive = alive;
            match tls {
                Some(acceptor) => match tokio::time::timeout(HANDSHAKE, acceptor.accept(tcp)).await
                {
                    Ok(Ok(stream)) => one(stream, pass, app, deadlines, stopped).await,
                    Ok(Err(e)) => tracing::info!(%peer, error = %e, "http: TLS handshake failed"),
                    Err(_) => door.refused(peer, "handshake"),
                },
                None => one(tcp, pass, app, deadlines, stopped).await,
            }
        });
    }
    let _ = stopping.send(true);
    drop(alive);
    let _ = tokio::time::timeout(DRAIN, all_ended.recv()).await;
}

/// One connection, its requests one after another, until it ends, its door ends it to make
/// room (between requests only), or the server stops.
async fn one<I>(
    io: I,
    pass: Pass,
    app: axum::Router,
    deadlines: Deadlines,
    mut stopped: watch::Receiver<bool>,
) where
    I: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let (io, _) = super::watched::Watched::new(io, pass.kill(), None);
    let service = Marked {
        app,
        busy: pass.busy_counter(),
        body: deadlines.body,
    };
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(deadlines.headers)
        .keep_alive(true);
    let conn = builder.serve_connection(TokioIo::new(io), service);
    tokio::pin!(conn);
    tokio::select! {
        _ = conn.as_mut() => return,
        _ = stopped.wait_for(|s| *s) => conn.as_mut().graceful_shutdown(),
    }
    let _ = conn.await;
}

/// The router, the connection marked busy while a request is under way (its door then never
/// ends it to make room), each request's body held to its deadline.
struct Marked {
    app: axum::Router,
    busy: Arc<std::sync::atomic::AtomicUsize>,
    body: Duration,
}

impl hyper::service::Service<Request<hyper::body::Incoming>> for Marked {
    type Response = axum::response::Response;
    type Error = std::convert::Infallible;
    type Future =
        Pin<Box<dyn std::future::Future<Output = Result<Self::Response, Self::Error>> + Send>>;

    fn call(&self, req: Request<hyper::body::Incoming>) -> Self::Future {
        let busy = super::Busy::on(&self.busy);
        let mut app = self.app.clone();
        let req = req.map(|b| Body::new(TimedBody::new(b, self.body)));
        Box::pin(async move {
            let answer = tower_service::Service::call(&mut app, req).await;
            drop(busy);
            answer
        })
    }
}

/// What a request body that did not arrive in time fails with; the API answers it 408.
#[derive(Debug)]
pub struct BodyTooSlow(pub Duration);

impl std::fmt::Display for BodyTooSlow {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "the request body did not arrive within {} s (body_timeout)",
            self.0.as_secs()
        )
    }
}

impl std::error::Error for BodyTooSlow {}

/// A request body that fails once its deadline passes, however slowly it trickles. The clock
/// starts with the request; its timer is made only when the body has to be waited for (most
/// arrive with their headers, and cost no timer).
struct TimedBody<B> {
    inner: B,
    began: tokio::time::Instant,
    sleep: Option<Pin<Box<Sleep>>>,
    after: Duration,
}

impl<B> TimedBody<B> {
    fn new(inner: B, after: Duration) -> TimedBody<B> {
        TimedBody {
            inner,
            began: tokio::time::Instant::now(),
            sleep: None,
            after,
        }
    }
}

impl<B> http_body::Body for TimedBody<B>
where
    B: http_body::Body + Unpin,
    B::Error: Into<axum::BoxError>,
{
    type Data = B::Data;
    type Error = axum::BoxError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Self::Data>, Self::Error>>> {
        if let Poll::Ready(frame) = Pin::new(&mut self.inner).poll_frame(cx) {
            return Poll::Ready(frame.map(|f| f.map_err(Into::into)));
        }
        let deadline = self.began + self.after;
        let sleep = self
            .sleep
            .get_or_insert_with(|| Box::pin(tokio::time::sleep_until(deadline)));
        if sleep.as_mut().poll(cx).is_ready() {
            return Poll::Ready(Some(Err(Box::new(BodyTooSlow(self.after)))));
        }
        Poll::Pending
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.inner.size_hint()
    }
}
