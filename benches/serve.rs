//! `cargo bench --bench serve`: `settle serve` (manual: Running settle for a team) at SETTLE_BENCH_OPS operations (default
//! 1,000,000; a tenth of them exceptions) on SQLite, or on PostgreSQL with
//! SETTLE_BENCH_DB=postgres://... (a fresh database, dropped afterwards). The real binary and
//! OpenSSH's `ssh` over loopback.
//!
//! Reports:
//!   1. the server's memory per idle console session: its resident set before and after
//!      SETTLE_BENCH_SESSIONS (default 32) consoles are open, over their number;
//!   2. keystroke to frame at the client, with those sessions idle and one typing a filter: the
//!      time from a key written to `ssh`'s stdin to its echo read from `ssh`'s stdout, p50 and
//!      p99 of SETTLE_BENCH_KEYS (default 200) keys (target: p99 <= 50 ms);
//!   3. a metrics scrape (`/metrics`) meanwhile, median and slowest of 20 (target <= 100 ms).

use std::io::{Read, Write};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

#[path = "../tests/common/mod.rs"]
mod common;

use settle::{Config, Ledger};

const BIN: &str = env!("CARGO_BIN_EXE_settle");

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}

fn rss_kib(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap()
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap()
}

/// An HTTP/1.0 GET's status and body.
fn get(addr: &str, path: &str) -> (u16, String) {
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    write!(s, "GET {path} HTTP/1.0\r\nHost: {addr}\r\n\r\n").unwrap();
    let mut text = String::new();
    s.read_to_string(&mut text).unwrap();
    let status = text.split_whitespace().nth(1).unwrap().parse().unwrap();
    (
        status,
        text.split_once("\r\n\r\n").map_or("", |(_, b)| b).into(),
    )
}

fn sessions(metrics: &str) -> f64 {
    let (_, text) = get(metrics, "/metrics");
    common::parse_prometheus(&text)
        .into_iter()
        .find(|(n, _, _)| n == "settle_console_sessions")
        .map(|(_, _, v)| v)
        .unwrap()
}

/// Stops what it holds (the server, the ssh clients) however the bench ends.
struct Kill(Vec<Child>);

impl Drop for Kill {
    fn drop(&mut self) {
        for c in &mut self.0 {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

fn ssh(port: u16, key: &std::path::Path) -> Child {
    Command::new("ssh")
        .args([
            "-tt",
            "-o",
            "BatchMode=yes",
            "-o",
            "StrictHostKeyChecking=no",
        ])
        .args([
            "-o",
            "UserKnownHostsFile=/dev/null",
            "-o",
            "IdentitiesOnly=yes",
        ])
        .args(["-o", "LogLevel=ERROR", "-p", &port.to_string(), "-i"])
        .arg(key)
        .arg("127.0.0.1")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("ssh")
}

#[tokio::main]
async fn main() {
    let n = common::env_count("SETTLE_BENCH_OPS", 1_000_000);
    let idle = common::env_count("SETTLE_BENCH_SESSIONS", 32);
    let keys_typed = common::env_count("SETTLE_BENCH_KEYS", 200);
    let dir = tempfile::tempdir().unwrap();
    let server = common::bench_server();
    let pg = match &server {
        Some(u) => Some(common::postgres_on(u).await),
        None => None,
    };
    let url = match &pg {
        Some(db) => db.url.clone(),
        None => format!("sqlite://{}", dir.path().join("serve.db").display()),
    };
    let backend = if pg.is_some() { "PostgreSQL" } else { "SQLite" };
    let t = Instant::now();
    {
        let ledger = Ledger::open(&url, Config::default()).await.unwrap();
        ledger
            .ingest(common::seed_lines(n).as_bytes(), "bench")
            .await
            .unwrap();
        ledger.close().await;
    }
    println!(
        "settle serve on {backend}: {n} operations, {} exceptions (seeded in {:.1} s)",
        n / 10,
        t.elapsed().as_secs_f64()
    );

    // a team: one operator holds at most 8 sessions (sessions_per_operator), so the sessions
    // are spread over as many operators as that takes, each with a key
    let people = (idle + 1).div_ceil(8);
    let mut text = String::from("log_file = \"/dev/null\"\n");
    let mut keys = Vec::new();
    for i in 0..people {
        let key = dir.path().join(format!("op{i}"));
        let ok = Command::new("ssh-keygen")
            .args(["-q", "-t", "ed25519", "-N", "", "-f"])
            .arg(&key)
            .status()
            .unwrap()
            .success();
        assert!(ok);
        let public = std::fs::read_to_string(key.with_extension("pub")).unwrap();
        text.push_str(&format!(
            "[operators.olga{i}]\nrole = \"operator\"\nkeys = [\"{}\"]\n",
            public.trim()
        ));
        keys.push(key);
    }
    let key = keys[0].clone();
    let config = dir.path().join("settle.toml");
    std::fs::write(&config, text).unwrap();
    let mut serve = Command::new(BIN)
        .args([
            "serve",
            "--db",
            &url,
            "--listen",
            "127.0.0.1:0",
            "--metrics",
            "127.0.0.1:0",
        ])
        .arg("--config")
        .arg(&config)
        .arg("--host-key")
        .arg(dir.path().join("host_key"))
        .args(["--max-sessions", &(idle + 1).to_string()])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let pid = serve.id();
    let mut out = String::new();
    let mut stdout = serve.stdout.take().unwrap();
    let mut buf = [0u8; 512];
    while !out.contains("/metrics") {
        let k = stdout.read(&mut buf).unwrap();
        assert!(k > 0, "settle serve ended: {out}");
        out.push_str(&String::from_utf8_lossy(&buf[..k]));
    }
    std::thread::spawn(move || while stdout.read(&mut buf).is_ok_and(|k| k > 0) {});
    let port: u16 = out
        .lines()
        .find_map(|l| l.strip_prefix("settle serve: listening on "))
        .and_then(|a| a.rsplit_once(':'))
        .and_then(|(_, p)| p.parse().ok())
        .unwrap();
    let metrics = out
        .lines()
        .find_map(|l| l.strip_prefix("settle serve: metrics on http://"))
        .unwrap()
        .trim_end_matches("/metrics")
        .to_string();
    let mut held = Kill(vec![serve]);

    // 1. memory per idle session (the server warmed by one session first)
    let mut warm = ssh(port, &key);
    let mut warm_out = warm.stdout.take().unwrap();
    std::thread::spawn(move || while warm_out.read(&mut [0u8; 4096]).is_ok_and(|k| k > 0) {});
    let deadline = Instant::now() + Duration::from_secs(60);
    while sessions(&metrics) < 1.0 {
        assert!(Instant::now() < deadline, "the first session");
        std::thread::sleep(Duration::from_millis(50));
    }
    std::thread::sleep(Duration::from_secs(3));
    let _ = warm.stdin.as_mut().unwrap().write_all(b"q");
    let _ = warm.wait();
    std::thread::sleep(Duration::from_secs(1));
    let before = rss_kib(pid);
    for i in 0..idle {
        // a few at a time: more than ten logging in at once from one address wait their turn
        if i % 5 == 4 {
            std::thread::sleep(Duration::from_millis(700));
        }
        let mut c = ssh(port, &keys[(i + 1) % people]);
        let mut o = c.stdout.take().unwrap();
        std::thread::spawn(move || while o.read(&mut [0u8; 4096]).is_ok_and(|k| k > 0) {});
        held.0.push(c);
    }
    let deadline = Instant::now() + Duration::from_secs(120);
    while sessions(&metrics) < idle as f64 {
        assert!(Instant::now() < deadline, "{idle} sessions");
        std::thread::sleep(Duration::from_millis(100));
    }
    // every console has drawn its first page and header
    std::thread::sleep(Duration::from_secs(5));
    let after = rss_kib(pid);
    println!(
        "\n1. server memory: {before} KiB, with {idle} idle consoles {after} KiB: {:.0} KiB per idle session",
        (after.saturating_sub(before)) as f64 / idle as f64
    );

    // 2. one typing, the others idle: `/key:`, then `z` and Backspace in turn; each `z`'s echo
    let mut typist = ssh(port, &key);
    let mut tout = typist.stdout.take().unwrap();
    let (tx, rx) = mpsc::channel::<(Instant, Vec<u8>)>();
    std::thread::spawn(move || {
        let mut b = [0u8; 65536];
        while let Ok(k) = tout.read(&mut b) {
            if k == 0 || tx.send((Instant::now(), b[..k].to_vec())).is_err() {
                return;
            }
        }
    });
    let deadline = Instant::now() + Duration::from_secs(60);
    while sessions(&metrics) < (idle + 1) as f64 {
        assert!(Instant::now() < deadline, "the typing session");
        std::thread::sleep(Duration::from_millis(50));
    }
    std::thread::sleep(Duration::from_secs(3));
    let input = typist.stdin.as_mut().unwrap();
    input.write_all(b"/key:").unwrap();
    input.flush().unwrap();
    std::thread::sleep(Duration::from_millis(500));
    while rx.try_recv().is_ok() {}
    let mut latencies = Vec::new();
    let scrapes = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let scraper = {
        let scrapes = scrapes.clone();
        let metrics = metrics.clone();
        std::thread::spawn(move || {
            for _ in 0..20 {
                let t = Instant::now();
                let (status, _) = get(&metrics, "/metrics");
                assert_eq!(status, 200);
                scrapes.lock().unwrap().push(t.elapsed());
                std::thread::sleep(Duration::from_millis(500));
            }
        })
    };
    for i in 0..keys_typed * 2 {
        let z = i % 2 == 0;
        let sent = Instant::now();
        input.write_all(if z { b"z" } else { b"\x7f" }).unwrap();
        input.flush().unwrap();
        if z {
            let deadline = sent + Duration::from_secs(5);
            loop {
                let left = deadline.saturating_duration_since(Instant::now());
                let (at, bytes) = rx.recv_timeout(left).expect("the echo of z within 5 s");
                if bytes.contains(&b'z') {
                    latencies.push(at - sent);
                    break;
                }
            }
        }
        // a person types a few keys a second; what the key set off lands meanwhile
        std::thread::sleep(Duration::from_millis(120));
        while rx.try_recv().is_ok() {}
    }
    let _ = scraper.join();
    latencies.sort();
    println!(
        "\n2. keystroke to frame, {} keys, {idle} sessions idle: p50 {:.1} ms, p99 {:.1} ms, max {:.1} ms (target p99 <= 50 ms)",
        latencies.len(),
        ms(percentile(&latencies, 0.5)),
        ms(percentile(&latencies, 0.99)),
        ms(*latencies.last().unwrap())
    );
    let mut s = scrapes.lock().unwrap().clone();
    s.sort();
    println!(
        "\n3. metrics scrape meanwhile: median {:.1} ms, slowest {:.1} ms of {} (target <= 100 ms)",
        ms(percentile(&s, 0.5)),
        ms(*s.last().unwrap()),
        s.len()
    );
    let _ = input.write_all(b"\x1bq");
    held.0.push(typist);
    drop(held);
}
