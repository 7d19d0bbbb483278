//! The demo's own receiver of notifications (manual: Owners and notifications): a local HTTP
//! endpoint that takes every message and answers 200, so that the demo's channel works without
//! a Slack of its own. `settle notifications` then lists what the demo's teams were told.

use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// Starts the receiver; its URL.
pub(super) async fn start() -> crate::error::Result<String> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .map_err(|e| crate::error::Error::Unavailable(format!("the demo's receiver: {e}")))?;
    let addr = listener
        .local_addr()
        .map_err(|e| crate::error::Error::Unavailable(format!("the demo's receiver: {e}")))?;
    tokio::spawn(async move {
        while let Ok((mut conn, _)) = listener.accept().await {
            tokio::spawn(async move {
                // the whole request: its head, then as many bytes as it says
                let mut got = Vec::new();
                let mut buf = [0u8; 8192];
                loop {
                    let Ok(n) = conn.read(&mut buf).await else {
                        return;
                    };
                    if n == 0 {
                        break;
                    }
                    got.extend_from_slice(&buf[..n]);
                    if complete(&got) {
                        break;
                    }
                }
                let _ = conn
                    .write_all(
                        b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok",
                    )
                    .await;
            });
        }
    });
    Ok(format!("http://{addr}/demo-chat"))
}

/// The request's head and the body its Content-Length announces have arrived.
fn complete(got: &[u8]) -> bool {
    let Some(end) = got.windows(4).position(|w| w == b"\r\n\r\n") else {
        return false;
    };
    let head = String::from_utf8_lossy(&got[..end]).to_ascii_lowercase();
    let len = head
        .lines()
        .find_map(|l| l.strip_prefix("content-length:"))
        .and_then(|v| v.trim().parse::<usize>().ok())
        .unwrap_or(0);
    got.len() >= end + 4 + len
}
