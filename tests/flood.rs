//! `settle serve` against what a stranger on the network can do (manual: Limits): a flood of
//! connections that never log in nor finish a request, under the handle limit systemd gives by
//! default, leaves the real binary up and answering; a connection that does nothing is closed
//! within its deadline; one viewer's sessions cannot lock a lead out.

mod common;

use std::io::BufRead;
use std::net::{Ipv4Addr, SocketAddr};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::ssh::{Keys, ssh_options};
use common::{parse_prometheus, wait_until};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpSocket, TcpStream};

const BIN: &str = env!("CARGO_BIN_EXE_settle");

/// `settle serve` with the console over SSH, the HTTP API and the metrics, its open handles
/// limited to `handles` (`ulimit -n`, as systemd's default is 1,024); killed when dropped.
struct Served {
    child: Child,
    ssh: u16,
    http: SocketAddr,
    metrics: SocketAddr,
    keys: std::path::PathBuf,
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Served {
    fn start(db: &str, keys: &Keys, handles: u32, extra: &[&str]) -> Served {
        let mut child = Command::new("bash")
            .arg("-c")
            .arg(format!("ulimit -n {handles} && exec \"$0\" \"$@\""))
            .arg(BIN)
            .args(["serve", "--db", db, "--listen", "127.0.0.1:0"])
            .args(["--http", "127.0.0.1:0", "--metrics", "127.0.0.1:0"])
            .arg("--config")
            .arg(keys.config())
            .arg("--host-key")
            .arg(keys.path("host_key"))
            .args(extra)
            .env("SETTLE_LOG_FILE", keys.path("serve.log"))
            .env_remove("SETTLE_DATABASE_URL")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("settle serve");
        let mut lines = std::io::BufReader::new(child.stdout.take().unwrap()).lines();
        let (mut ssh, mut http, mut metrics) = (None, None, None);
        while ssh.is_none() || http.is_none() || metrics.is_none() {
            let line = lines
                .next()
                .expect("settle serve said where it listens")
                .unwrap();
            if let Some(a) = line.strip_prefix("settle serve: listening on ") {
                ssh = Some(a.rsplit_once(':').unwrap().1.parse().unwrap());
            }
            if let Some(a) = line.strip_prefix("settle serve: HTTP API on http://") {
                http = Some(a.split('/').next().unwrap().parse().unwrap());
            }
            if let Some(a) = line.strip_prefix("settle serve: metrics on http://") {
                metrics = Some(a.split('/').next().unwrap().parse().unwrap());
            }
        }
        std::thread::spawn(move || for _ in lines {});
        Served {
            child,
            ssh: ssh.unwrap(),
            http: http.unwrap(),
            metrics: metrics.unwrap(),
            keys: keys.dir.path().to_path_buf(),
        }
    }

    fn running(&mut self) -> bool {
        self.child.try_wait().unwrap().is_none()
    }

    /// `ssh -i KEY 127.0.0.1 ARGS`: (exit status, stdout, stderr).
    fn exec(&self, key: &str, args: &[&str]) -> (i32, String, String) {
        let out = Command::new("ssh")
            .args(ssh_options(self.ssh))
            .arg("-i")
            .arg(self.keys.join(key))
            .arg("127.0.0.1")
            .args(args)
            .stdin(Stdio::null())
            .output()
            .unwrap();
        (
            out.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&out.stdout).into(),
            String::from_utf8_lossy(&out.stderr).into(),
        )
    }

    /// A console held open by `key` (`ssh -tt`, its input never closed), ended when dropped.
    fn console(&self, key: &str) -> Held {
        let child = Command::new("ssh")
            .arg("-tt")
            .args(ssh_options(self.ssh))
            .arg("-i")
            .arg(self.keys.join(key))
            .arg("127.0.0.1")
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        Held(child)
    }
}

/// An `ssh` process, killed when dropped.
struct Held(Child);

impl Drop for Held {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A GET over a fresh connection from 127.0.0.1: the status and body, or `None` without an
/// answer within five seconds.
async fn get(at: SocketAddr, path: &str) -> Option<(u16, String)> {
    let ask = async {
        let mut s = TcpStream::connect(at).await.ok()?;
        s.write_all(format!("GET {path} HTTP/1.0\r\nHost: x\r\n\r\n").as_bytes())
            .await
            .ok()?;
        let mut text = String::new();
        s.read_to_string(&mut text).await.ok()?;
        let status = text.split_whitespace().nth(1)?.parse().ok()?;
        let body = text.split_once("\r\n\r\n").map_or("", |(_, b)| b);
        Some((status, body.to_string()))
    };
    tokio::time::timeout(Duration::from_secs(5), ask)
        .await
        .ok()
        .flatten()
}

/// A connection to `to` from the loopback address `from`, which sends `first` and then holds.
async fn hold(to: SocketAddr, from: Ipv4Addr, first: &'static [u8]) -> Option<TcpStream> {
    let socket = TcpSocket::new_v4().ok()?;
    socket.bind(SocketAddr::from((from, 0))).ok()?;
    let mut c = tokio::time::timeout(Duration::from_secs(10), socket.connect(to))
        .await
        .ok()?
        .ok()?;
    c.write_all(first).await.ok()?;
    Some(c)
}

/// `n` connections to `to`, ten from each of as many loopback addresses (so that no limit per
/// address stops them: a flood from many hosts), each sending `first`.
async fn flood(to: SocketAddr, n: usize, first: &'static [u8]) -> Vec<TcpStream> {
    let mut made = tokio::task::JoinSet::new();
    for i in 0..n {
        let from = Ipv4Addr::new(127, 0, 1 + (i / 2500) as u8, 10 + ((i / 10) % 200) as u8);
        made.spawn(hold(to, from, first));
    }
    let mut held = Vec::new();
    while let Some(c) = made.join_next().await {
        if let Ok(Some(c)) = c {
            held.push(c);
        }
    }
    held
}

/// How long until the server closed `c` (it reads end of file or an error), at most `limit`.
async fn closed_within(mut c: TcpStream, limit: Duration) -> Option<Duration> {
    let began = Instant::now();
    let mut buf = [0u8; 512];
    let wait = async {
        loop {
            match c.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(_) => {}
            }
        }
    };
    tokio::time::timeout(limit, wait)
        .await
        .ok()
        .map(|()| began.elapsed())
}

fn refused(text: &str, listener: &str) -> f64 {
    parse_prometheus(text)
        .into_iter()
        .filter(|(n, labels, _)| {
            n == "settle_connections_refused_total"
                && labels.get("listener").map(String::as_str) == Some(listener)
        })
        .map(|(_, _, v)| v)
        .sum()
}

/// 1,100 connections that send an SSH banner and stop, and 1,100 whose HTTP headers trickle in
/// a byte every two seconds, from a hundred addresses, under `ulimit -n 1024`: the server stays
/// up, answers /healthz on the API and the metrics, lets an operator log in, counts what it
/// refused; every held connection is closed within 60 s, the silent and the trickling alike.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flood_under_the_default_handle_limit_leaves_serve_answering() {
    let db = common::sqlite();
    let keys = Keys::new();
    let mut s = Served::start(&db.url, &keys, 1024, &[]);
    let ssh_at = SocketAddr::from(([127, 0, 0, 1], s.ssh));
    let ssh_flood = flood(ssh_at, 1100, b"SSH-2.0-flood\r\n").await;
    let http_flood = flood(
        s.http,
        1100,
        b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Slow: ",
    )
    .await;
    let silent = hold(ssh_at, Ipv4Addr::new(127, 0, 3, 1), b"").await;
    let silent_http = hold(s.http, Ipv4Addr::new(127, 0, 3, 2), b"").await;
    let began = Instant::now();
    // the HTTP ones go on trickling, a byte every two seconds
    let held_http = http_flood.len();
    let trickle = tokio::spawn(async move {
        let mut held = http_flood;
        for _ in 0..15 {
            for c in held.iter_mut() {
                let _ = c.write_all(b"x").await;
            }
            tokio::time::sleep(Duration::from_secs(2)).await;
        }
        held
    });
    assert!(s.running(), "settle serve is up");
    for at in [s.http, s.metrics] {
        let answer = get(at, "/healthz").await;
        assert_eq!(answer.map(|a| a.0), Some(200), "/healthz on {at} answers");
    }
    let s2 = std::thread::spawn({
        let keys = keys.dir.path().to_path_buf();
        let port = s.ssh;
        move || {
            Command::new("ssh")
                .args(ssh_options(port))
                .arg("-i")
                .arg(keys.join("oper"))
                .args(["127.0.0.1", "stats"])
                .stdin(Stdio::null())
                .output()
                .unwrap()
        }
    });
    let out = tokio::task::spawn_blocking(move || s2.join().unwrap())
        .await
        .unwrap();
    assert!(
        out.status.success(),
        "an operator logs in during the flood: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let (_, metrics) = get(s.metrics, "/metrics")
        .await
        .expect("the metrics answer");
    assert!(refused(&metrics, "ssh") > 0.0, "the SSH flood is counted");
    assert!(refused(&metrics, "http") > 0.0, "the HTTP flood is counted");
    // every connection held is closed by the server within a minute of its opening
    let limit = Duration::from_secs(60).saturating_sub(began.elapsed());
    let mut waits = tokio::task::JoinSet::new();
    for c in ssh_flood.into_iter().chain(silent).chain(silent_http) {
        waits.spawn(closed_within(c, limit));
    }
    let mut slowest = Duration::ZERO;
    while let Some(w) = waits.join_next().await {
        let took = w
            .unwrap()
            .expect("a held connection was still open after 60 s");
        slowest = slowest.max(took);
    }
    let trickled = trickle.await.unwrap();
    assert_eq!(trickled.len(), held_http);
    for c in trickled {
        let took = closed_within(c, Duration::from_secs(1)).await;
        assert!(
            took.is_some(),
            "a trickling request was still open after 30 s"
        );
    }
    assert!(s.running(), "settle serve is still up after the flood");
    assert_eq!(get(s.http, "/healthz").await.map(|a| a.0), Some(200));
    eprintln!(
        "held: {held_http} HTTP; the last SSH connection closed {:.1} s after opening",
        slowest.as_secs_f64()
    );
}

/// One viewer's 33 consoles fill only their own share (8 by default): the lead still logs in,
/// and so does another operator; with the server full (`--max-sessions 8` held by one viewer)
/// an operator is told why, and a lead still gets in.
#[test]
fn one_viewer_cannot_lock_a_lead_out() {
    let db = common::sqlite();
    let keys = Keys::new();
    let s = Served::start(&db.url, &keys, 4096, &[]);
    // a few at a time: more than ten logging in at once from one address wait their turn
    let mut consoles = Vec::new();
    for _ in 0..11 {
        consoles.extend((0..3).map(|_| s.console("viewer")));
        std::thread::sleep(Duration::from_millis(700));
    }
    wait_until(
        "the viewer's share is taken",
        Duration::from_secs(60),
        || {
            let (_, text) = common::on_a_thread(get(s.metrics, "/metrics")).unwrap();
            parse_prometheus(&text)
                .iter()
                .any(|(n, _, v)| n == "settle_console_sessions" && *v == 8.0)
        },
    );
    let (code, out, err) = s.exec("lead", &["stats"]);
    assert_eq!(code, 0, "the lead logs in: {err}");
    assert!(out.contains("exceptions"), "{out}");
    let (code, _, err) = s.exec("oper", &["stats"]);
    assert_eq!(code, 0, "another operator too: {err}");
    // the 25 refused were told why, and ended
    let mut told = 0;
    for c in consoles.iter_mut() {
        if let Ok(Some(_)) = c.0.try_wait() {
            let mut err = String::new();
            use std::io::Read;
            c.0.stderr.take().unwrap().read_to_string(&mut err).unwrap();
            assert!(err.contains("vera has 8 sessions open"), "{err}");
            told += 1;
        }
    }
    assert_eq!(told, 25);
    drop(consoles);
    drop(s);

    let s = Served::start(&db.url, &keys, 4096, &["--max-sessions", "8"]);
    let _consoles: Vec<Held> = (0..8).map(|_| s.console("viewer")).collect();
    wait_until("the server is full", Duration::from_secs(60), || {
        let (_, text) = common::on_a_thread(get(s.metrics, "/metrics")).unwrap();
        parse_prometheus(&text)
            .iter()
            .any(|(n, _, v)| n == "settle_console_sessions" && *v == 8.0)
    });
    let (code, _, err) = s.exec("oper", &["stats"]);
    assert_ne!(code, 0);
    assert!(err.contains("8 sessions are open"), "{err}");
    let (code, _, err) = s.exec("lead", &["stats"]);
    assert_eq!(code, 0, "a lead gets in whoever fills the server: {err}");
}

/// A request whose headers or body trickle in is cut off at its deadline (`header_timeout`,
/// `body_timeout`, here 2 s each): the body with 408 and the connection closed, the headers
/// with the connection closed; a whole request on the same server is answered meanwhile.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_trickling_request_is_cut_off_at_its_deadline() {
    let db = common::sqlite();
    let s = common::api::ApiServer::start(
        &db.url,
        "[limits]\nheader_timeout = \"2s\"\nbody_timeout = \"2s\"\n",
    );
    let at: SocketAddr = s.base.trim_start_matches("http://").parse().unwrap();
    let trickle = |first: String| async move {
        let mut c = TcpStream::connect(at).await.unwrap();
        c.write_all(first.as_bytes()).await.unwrap();
        let began = Instant::now();
        let mut answer = Vec::new();
        let mut buf = [0u8; 1024];
        loop {
            tokio::select! {
                read = c.read(&mut buf) => match read {
                    Ok(0) | Err(_) => break,
                    Ok(n) => answer.extend_from_slice(&buf[..n]),
                },
                () = tokio::time::sleep(Duration::from_millis(300)) => {
                    assert!(began.elapsed() < Duration::from_secs(15), "still open");
                    let _ = c.write_all(b"x").await;
                }
            }
        }
        (
            began.elapsed(),
            String::from_utf8_lossy(&answer).into_owned(),
        )
    };
    let body = format!(
        "POST /v1/operations HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {}\r\nContent-Type: application/json\r\nContent-Length: 500\r\n\r\n{{\"key\":",
        common::api::BOT
    );
    let (slow_body, slow_headers, whole) = tokio::join!(
        trickle(body),
        trickle("GET /healthz HTTP/1.1\r\nHost: x\r\nX-Slow: ".into()),
        async {
            tokio::time::sleep(Duration::from_millis(500)).await;
            get(at, "/healthz").await
        }
    );
    assert!(slow_body.1.starts_with("HTTP/1.1 408"), "{}", slow_body.1);
    assert!(
        slow_body.1.contains("did not arrive within 2 s"),
        "{}",
        slow_body.1
    );
    assert!(slow_body.0 < Duration::from_secs(6), "{:?}", slow_body.0);
    assert!(!slow_headers.1.contains("200 OK"), "{}", slow_headers.1);
    assert!(
        slow_headers.0 < Duration::from_secs(6),
        "{:?}",
        slow_headers.0
    );
    assert_eq!(whole.map(|w| w.0), Some(200));
}
