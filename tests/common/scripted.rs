//! A destination written from the manual rather than by settle's simulator: a plain HTTP/1.1
//! server on a free port whose every answer the test scripts (status, body, a delay, or a
//! connection broken before the answer), so that settle meets the answers real APIs give.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// What the server does with one request.
#[derive(Clone, Debug)]
pub enum Reply {
    /// A status and a body (sent as `application/json` when it parses as JSON).
    Answer(u16, String),
    /// Waits this long, then answers (past the client's timeout: it gave up).
    Late(Duration, u16, String),
    /// Closes the connection without a word.
    Broken,
}

/// A request as it arrived: method, path with query, body.
#[derive(Clone, Debug)]
pub struct Seen {
    pub method: String,
    pub target: String,
    pub body: String,
}

type Script = dyn Fn(&Seen) -> Reply + Send + Sync;

pub struct Scripted {
    pub base: String,
    stop: Arc<AtomicBool>,
    port: u16,
    pub seen: Arc<Mutex<Vec<Seen>>>,
}

impl Scripted {
    /// Serves until dropped; `script` says what to answer each request.
    pub fn start(script: impl Fn(&Seen) -> Reply + Send + Sync + 'static) -> Scripted {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let stop = Arc::new(AtomicBool::new(false));
        let seen = Arc::new(Mutex::new(Vec::new()));
        let script: Arc<Script> = Arc::new(script);
        let (s, log) = (stop.clone(), seen.clone());
        std::thread::spawn(move || {
            for conn in listener.incoming() {
                if s.load(Ordering::SeqCst) {
                    break;
                }
                let Ok(conn) = conn else { continue };
                let (script, log) = (script.clone(), log.clone());
                std::thread::spawn(move || serve(conn, &*script, &log));
            }
        });
        Scripted {
            base: format!("http://127.0.0.1:{port}"),
            stop,
            port,
            seen,
        }
    }

    /// The requests whose target starts with `prefix`.
    pub fn requests(&self, prefix: &str) -> Vec<Seen> {
        let seen = self.seen.lock().unwrap();
        seen.iter()
            .filter(|r| r.target.starts_with(prefix))
            .cloned()
            .collect()
    }
}

impl Drop for Scripted {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        // wake the accept loop so that it sees the stop
        let _ = TcpStream::connect(("127.0.0.1", self.port));
    }
}

fn serve(conn: TcpStream, script: &Script, log: &Mutex<Vec<Seen>>) {
    let _ = conn.set_read_timeout(Some(Duration::from_secs(30)));
    let mut reader = BufReader::new(conn);
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap_or(0) == 0 {
            return;
        }
        let mut parts = line.split_whitespace();
        let (method, target) = (
            parts.next().unwrap_or("").to_string(),
            parts.next().unwrap_or("").to_string(),
        );
        let mut length = 0usize;
        loop {
            let mut header = String::new();
            if reader.read_line(&mut header).unwrap_or(0) == 0 {
                return;
            }
            let header = header.trim_end();
            if header.is_empty() {
                break;
            }
            if let Some((name, value)) = header.split_once(':')
                && name.eq_ignore_ascii_case("content-length")
            {
                length = value.trim().parse().unwrap_or(0);
            }
        }
        let mut body = vec![0; length];
        if reader.read_exact(&mut body).is_err() {
            return;
        }
        let seen = Seen {
            method,
            target,
            body: String::from_utf8_lossy(&body).into_owned(),
        };
        log.lock().unwrap().push(seen.clone());
        let (status, body) = match script(&seen) {
            Reply::Answer(status, body) => (status, body),
            Reply::Late(wait, status, body) => {
                std::thread::sleep(wait);
                (status, body)
            }
            Reply::Broken => return,
        };
        let kind = if serde_json::from_str::<serde_json::Value>(&body).is_ok() {
            "application/json"
        } else {
            "text/plain"
        };
        let answer = format!(
            "HTTP/1.1 {status} Scripted\r\nContent-Type: {kind}\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        );
        if reader.get_mut().write_all(answer.as_bytes()).is_err() {
            return;
        }
    }
}
