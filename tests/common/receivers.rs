//! Receivers of notifications that the tests start and stop: an HTTP server that checks each
//! body's signature (its own HMAC-SHA256, not settle's) and counts messages by
//! `Settle-Notification-Id`, answering 500 until it is told otherwise; and an SMTP server from
//! PyPI (aiosmtpd) that keeps each mail in a maildir.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use sha2::{Digest, Sha256};

/// One request as the receiver took it.
#[derive(Clone, Debug)]
pub struct Received {
    pub id: Option<String>,
    pub body: String,
    /// The signature checked against the secret: `None` where none was sent.
    pub signed: Option<bool>,
    /// What the receiver answered.
    pub status: u16,
}

#[derive(Default)]
struct State {
    got: Vec<Received>,
    failing_until: Option<Instant>,
    /// A destination that refuses every request, quoting its Authorization header back.
    echoing: bool,
    /// A destination that answers every request with this redirect: status, Location.
    redirect: Option<(u16, String)>,
    /// Every request's headers, lowercased names.
    headers: Vec<BTreeMap<String, String>>,
}

/// An HTTP receiver on a port of its own.
pub struct HttpReceiver {
    pub url: String,
    state: Arc<Mutex<State>>,
}

impl HttpReceiver {
    /// Starts a receiver that checks signatures under `secret` (where given).
    pub fn start(secret: Option<&str>) -> HttpReceiver {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}/hook", listener.local_addr().unwrap());
        let state = Arc::new(Mutex::new(State::default()));
        let s = state.clone();
        let secret = secret.map(str::to_string);
        std::thread::spawn(move || {
            for conn in listener.incoming() {
                let Ok(conn) = conn else { return };
                let s = s.clone();
                let secret = secret.clone();
                std::thread::spawn(move || {
                    let _ = serve(conn, &s, secret.as_deref());
                });
            }
        });
        HttpReceiver { url, state }
    }

    /// A destination for a test: every request refused with 422, its Authorization header
    /// quoted in the answer (as careless APIs do).
    pub fn echoing() -> HttpReceiver {
        let r = HttpReceiver::start(None);
        r.state.lock().unwrap().echoing = true;
        r
    }

    /// A destination (or channel) that answers every request `status` with `Location: to`.
    pub fn redirecting(status: u16, to: &str) -> HttpReceiver {
        let r = HttpReceiver::start(None);
        r.state.lock().unwrap().redirect = Some((status, to.to_string()));
        r
    }

    /// Every request's headers, in order (names lowercased).
    pub fn headers(&self) -> Vec<BTreeMap<String, String>> {
        self.state.lock().unwrap().headers.clone()
    }

    /// Answers 500 to everything for `d` from now.
    pub fn fail_for(&self, d: Duration) {
        self.state.lock().unwrap().failing_until = Some(Instant::now() + d);
    }

    /// Every request taken, in order.
    pub fn received(&self) -> Vec<Received> {
        self.state.lock().unwrap().got.clone()
    }

    /// The requests answered 200, by id: how many times each.
    pub fn delivered(&self) -> BTreeMap<String, usize> {
        let mut by = BTreeMap::new();
        for r in self.received().iter().filter(|r| r.status == 200) {
            *by.entry(r.id.clone().unwrap_or_default()).or_insert(0) += 1;
        }
        by
    }

    /// The bodies answered 200, as JSON.
    pub fn documents(&self) -> Vec<serde_json::Value> {
        self.received()
            .iter()
            .filter(|r| r.status == 200)
            .map(|r| serde_json::from_str(&r.body).unwrap())
            .collect()
    }
}

fn serve(
    conn: std::net::TcpStream,
    state: &Mutex<State>,
    secret: Option<&str>,
) -> std::io::Result<()> {
    let mut reader = BufReader::new(conn.try_clone()?);
    let mut headers = BTreeMap::new();
    let mut line = String::new();
    reader.read_line(&mut line)?;
    loop {
        line.clear();
        reader.read_line(&mut line)?;
        let l = line.trim_end();
        if l.is_empty() {
            break;
        }
        if let Some((k, v)) = l.split_once(':') {
            headers.insert(k.trim().to_ascii_lowercase(), v.trim().to_string());
        }
    }
    let len: usize = headers
        .get("content-length")
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    let mut body = vec![0; len];
    reader.read_exact(&mut body)?;
    let body = String::from_utf8_lossy(&body).into_owned();
    let signed = headers
        .get("settle-signature")
        .map(|sig| secret.is_some_and(|s| check(s, sig, &body)));
    let mut st = state.lock().unwrap();
    let failing = st.failing_until.is_some_and(|t| Instant::now() < t);
    // a body whose signature does not hold is refused, as a careful receiver would
    let status = if failing {
        500
    } else if signed == Some(false) || (secret.is_some() && signed.is_none()) {
        401
    } else {
        200
    };
    let redirect = st.redirect.clone();
    let status = redirect.as_ref().map_or(status, |(s, _)| *s);
    st.got.push(Received {
        id: headers.get("settle-notification-id").cloned(),
        body,
        signed,
        status,
    });
    st.headers.push(headers.clone());
    let echoing = st.echoing;
    drop(st);
    let mut conn = conn;
    if let Some((status, to)) = redirect {
        write!(
            conn,
            "HTTP/1.1 {status} Moved\r\nLocation: {to}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
        )?;
        return conn.flush();
    }
    if echoing {
        let auth = headers.get("authorization").cloned().unwrap_or_default();
        let answer = format!("{{\"error\":\"invalid request (sent with {auth})\"}}");
        write!(
            conn,
            "HTTP/1.1 422 X\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{answer}",
            answer.len()
        )?;
        return conn.flush();
    }
    write!(
        conn,
        "HTTP/1.1 {status} X\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok"
    )?;
    conn.flush()
}

/// `t=UNIX,v1=HEX` holds for `body` under `secret`.
fn check(secret: &str, sig: &str, body: &str) -> bool {
    let mut t = None;
    let mut v1 = None;
    for part in sig.split(',') {
        match part.split_once('=') {
            Some(("t", v)) => t = Some(v),
            Some(("v1", v)) => v1 = Some(v),
            _ => {}
        }
    }
    let (Some(t), Some(v1)) = (t, v1) else {
        return false;
    };
    let mut k = [0u8; 64];
    k[..secret.len()].copy_from_slice(secret.as_bytes());
    let inner = Sha256::new()
        .chain_update(k.map(|b| b ^ 0x36))
        .chain_update(format!("{t}.{body}"))
        .finalize();
    let mac = Sha256::new()
        .chain_update(k.map(|b| b ^ 0x5c))
        .chain_update(inner)
        .finalize();
    let hex: String = mac.iter().map(|b| format!("{b:02x}")).collect();
    hex == v1
}

/// aiosmtpd on a port of its own, keeping mails in a maildir; stopped on drop.
pub struct SmtpReceiver {
    pub port: u16,
    dir: tempfile::TempDir,
    child: std::process::Child,
}

impl SmtpReceiver {
    pub fn start() -> SmtpReceiver {
        let dir = tempfile::tempdir().unwrap();
        let port = super::free_port();
        let child = std::process::Command::new("python3")
            .args(["-m", "aiosmtpd", "-n", "-l"])
            .arg(format!("127.0.0.1:{port}"))
            .args(["-c", "aiosmtpd.handlers.Mailbox"])
            .arg(dir.path().join("mail"))
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("python3 -m aiosmtpd (pip install aiosmtpd)");
        super::wait_until("aiosmtpd listening", Duration::from_secs(20), || {
            std::net::TcpStream::connect(("127.0.0.1", port)).is_ok()
        });
        SmtpReceiver { port, dir, child }
    }

    /// aiosmtpd that takes `step` to answer each of EHLO, MAIL, RCPT and the end of DATA, as an
    /// overloaded mail server does.
    pub fn slow(step: Duration) -> SmtpReceiver {
        let dir = tempfile::tempdir().unwrap();
        let port = super::free_port();
        let script = dir.path().join("slow_smtp.py");
        std::fs::write(&script, SLOW_SMTP).unwrap();
        let child = std::process::Command::new("python3")
            .arg(&script)
            .arg(dir.path().join("mail"))
            .arg(port.to_string())
            .arg(step.as_secs_f64().to_string())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("python3 with aiosmtpd (pip install aiosmtpd)");
        super::wait_until("slow aiosmtpd listening", Duration::from_secs(20), || {
            std::net::TcpStream::connect(("127.0.0.1", port)).is_ok()
        });
        SmtpReceiver { port, dir, child }
    }

    /// Every mail received, as text.
    pub fn mails(&self) -> Vec<String> {
        let mut out = Vec::new();
        for sub in ["new", "cur"] {
            let Ok(entries) = std::fs::read_dir(self.dir.path().join("mail").join(sub)) else {
                continue;
            };
            for e in entries.flatten() {
                out.push(std::fs::read_to_string(e.path()).unwrap_or_default());
            }
        }
        out
    }
}

/// A mail server that answers each step after a wait (aiosmtpd, a maildir).
const SLOW_SMTP: &str = r#"
import asyncio, sys, time
from aiosmtpd.controller import Controller
from aiosmtpd.handlers import Mailbox

STEP = float(sys.argv[3])

class Slow(Mailbox):
    async def handle_EHLO(self, server, session, envelope, hostname, responses):
        await asyncio.sleep(STEP)
        session.host_name = hostname
        return responses

    async def handle_MAIL(self, server, session, envelope, address, mail_options):
        await asyncio.sleep(STEP)
        envelope.mail_from = address
        envelope.mail_options.extend(mail_options)
        return "250 OK"

    async def handle_RCPT(self, server, session, envelope, address, rcpt_options):
        await asyncio.sleep(STEP)
        envelope.rcpt_tos.append(address)
        envelope.rcpt_options.extend(rcpt_options)
        return "250 OK"

    async def handle_DATA(self, server, session, envelope):
        await asyncio.sleep(STEP)
        return await super().handle_DATA(server, session, envelope)

controller = Controller(Slow(sys.argv[1]), hostname="127.0.0.1", port=int(sys.argv[2]))
controller.start()
while True:
    time.sleep(3600)
"#;

impl Drop for SmtpReceiver {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
