//! Test databases: a temporary SQLite file, or a fresh PostgreSQL database dropped afterwards.
#![allow(dead_code)]

use std::sync::atomic::{AtomicU32, Ordering};

pub mod api;
pub mod bouncer;
pub mod chaos;
pub mod checker;
pub mod cluster;
pub mod receivers;
pub mod scripted;
pub mod ssh;
pub mod tmux;

use settle::Config;
use sqlx::Connection;

pub struct TestDb {
    pub url: String,
    pub backend: &'static str,
    _dir: Option<tempfile::TempDir>,
    pg_drop: Option<(String, String)>,
    /// The PgBouncer `url` goes through, stopped after the database is dropped.
    _bouncer: Option<bouncer::Bouncer>,
}

impl Drop for TestDb {
    fn drop(&mut self) {
        if let Some((admin, name)) = self.pg_drop.take() {
            // Drop runs outside any runtime we may borrow: use a small one of our own.
            let _ = std::thread::spawn(move || {
                let rt = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .unwrap();
                rt.block_on(async {
                    if let Ok(mut c) = sqlx::PgConnection::connect(&admin).await {
                        let _ =
                            sqlx::query(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"))
                                .execute(&mut c)
                                .await;
                    }
                });
            })
            .join();
        }
    }
}

pub fn sqlite() -> TestDb {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}", dir.path().join("settle.db").display());
    TestDb {
        url,
        backend: "sqlite",
        _dir: Some(dir),
        pg_drop: None,
        _bouncer: None,
    }
}

static COUNTER: AtomicU32 = AtomicU32::new(0);

/// A fresh PostgreSQL database on the server `SETTLE_TEST_POSTGRES_URL` names, dropped afterwards.
///
/// The PostgreSQL tests are compiled as ignored when that variable is unset at build time (see
/// `build.rs`), so a run without a server shows them as skipped; run anyway (`--include-ignored`)
/// or with the variable gone at run time, they fail here rather than pass having done nothing.
pub async fn postgres() -> TestDb {
    let admin = std::env::var("SETTLE_TEST_POSTGRES_URL")
        .ok()
        .filter(|u| !u.is_empty())
        .expect("SETTLE_TEST_POSTGRES_URL must name a PostgreSQL server for this test");
    postgres_on(&admin).await
}

/// A fresh database on the PostgreSQL server that `admin` reaches, dropped afterwards.
pub async fn postgres_on(admin: &str) -> TestDb {
    let admin = admin.to_string();
    let name = format!(
        "settle_test_{}_{}_{}",
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::SeqCst),
        rand::random::<u32>()
    );
    let mut c = sqlx::PgConnection::connect(&admin)
        .await
        .expect("connect to the PostgreSQL server");
    sqlx::query(&format!("CREATE DATABASE {name}"))
        .execute(&mut c)
        .await
        .expect("create test database");
    let _ = c.close().await;
    let base = admin
        .rsplit_once('/')
        .map(|(b, _)| b.to_string())
        .expect("URL with a database name");
    let url = format!("{base}/{name}");
    TestDb {
        url,
        backend: "postgres",
        _dir: None,
        pg_drop: Some((admin, name)),
        _bouncer: None,
    }
}

/// A fresh PostgreSQL database (as [`postgres`]) that settle reaches through a PgBouncer of its
/// own in transaction pooling mode.
pub async fn pgbouncer() -> TestDb {
    let mut db = postgres().await;
    let bouncer = bouncer::Bouncer::start(&db.url);
    db.url = bouncer.url_for(&db.url);
    db.backend = "pgbouncer";
    db._bouncer = Some(bouncer);
    db
}

/// The URL of the database itself, for the tests' back door ([`Raw`]): a URL through PgBouncer
/// (`pgbouncer=true`) goes to the server behind it instead.
pub fn direct(url: &str) -> String {
    if !url.contains("pgbouncer=true") {
        return url.to_string();
    }
    let server = std::env::var("SETTLE_TEST_POSTGRES_URL").unwrap();
    let base = server.rsplit_once('/').unwrap().0;
    let db = url.rsplit_once('/').unwrap().1.split('?').next().unwrap();
    format!("{base}/{db}")
}

/// Plain SQL on a test database, as an automation, an operator or an older settle might run it
/// (the tests' own back door; settle itself goes through its store).
pub enum Raw {
    Sqlite(rusqlite::Connection),
    Postgres(sqlx::PgConnection),
}

impl Raw {
    pub async fn connect(url: &str) -> Raw {
        match url.strip_prefix("sqlite://") {
            Some(path) => Raw::Sqlite(rusqlite::Connection::open(path).unwrap()),
            None => Raw::Postgres(sqlx::PgConnection::connect(&direct(url)).await.unwrap()),
        }
    }

    /// Runs a statement; its error as text when the database refuses it.
    pub async fn execute(&mut self, sql: &str) -> Result<u64, String> {
        match self {
            Raw::Sqlite(c) => c
                .execute(sql, [])
                .map(|n| n as u64)
                .map_err(|e| e.to_string()),
            Raw::Postgres(c) => sqlx::query(sql)
                .execute(c)
                .await
                .map(|r| r.rows_affected())
                .map_err(|e| e.to_string()),
        }
    }

    /// Runs a statement with text parameters (`?1`, `?2` on SQLite, `$1`, `$2` on PostgreSQL).
    pub async fn execute_with(&mut self, sql: &str, params: &[&str]) -> Result<u64, String> {
        match self {
            Raw::Sqlite(c) => c
                .execute(&sql.replace('$', "?"), rusqlite::params_from_iter(params))
                .map(|n| n as u64)
                .map_err(|e| e.to_string()),
            Raw::Postgres(c) => {
                let mut q = sqlx::query(sql);
                for p in params {
                    q = q.bind(*p);
                }
                q.execute(c)
                    .await
                    .map(|r| r.rows_affected())
                    .map_err(|e| e.to_string())
            }
        }
    }

    /// The first column of every row, as text.
    pub async fn texts(&mut self, sql: &str) -> Vec<String> {
        match self {
            Raw::Sqlite(c) => {
                let mut st = c.prepare(sql).unwrap();
                st.query_map([], |r| r.get::<_, Option<String>>(0))
                    .unwrap()
                    .filter_map(|v| v.unwrap())
                    .collect()
            }
            Raw::Postgres(c) => {
                use sqlx::Row;
                sqlx::query(sql)
                    .fetch_all(c)
                    .await
                    .unwrap()
                    .iter()
                    .filter_map(|r| r.try_get::<Option<String>, _>(0).ok().flatten())
                    .collect()
            }
        }
    }

    /// The one integer a statement answers.
    pub async fn int(&mut self, sql: &str) -> i64 {
        match self {
            Raw::Sqlite(c) => c.query_row(sql, [], |r| r.get(0)).unwrap(),
            Raw::Postgres(c) => sqlx::query_scalar(sql).fetch_one(c).await.unwrap(),
        }
    }
}

/// Runs `future` to its end on a thread and a runtime of its own, for blocking code that may
/// itself be inside a runtime already (a drill that runs processes, a helper of either kind).
pub fn on_a_thread<F: std::future::Future + Send>(future: F) -> F::Output
where
    F::Output: Send,
{
    std::thread::scope(|s| {
        s.spawn(|| {
            tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap()
                .block_on(future)
        })
        .join()
        .unwrap()
    })
}

/// Polls `ok` until it holds. Gives up (failing the test) after `limit`: a bound for a condition
/// that never comes, never a measure of how fast it came.
pub fn wait_until(what: &str, limit: std::time::Duration, mut ok: impl FnMut() -> bool) {
    let deadline = std::time::Instant::now() + limit;
    while !ok() {
        if std::time::Instant::now() > deadline {
            panic!("gave up waiting for {what} after {limit:?}");
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

/// The destinations and workflows the tests lean on.
pub fn config() -> Config {
    Config::parse(CONFIG, "test config").unwrap()
}

/// The text of [`config`].
pub const CONFIG: &str = r#"
lease = "30m"
attempt_timeout = "5m"
[destinations.projects]
dedupes = true
key_retention = "24h"
lookup = true
[destinations.crm]
lookup = true
[destinations.sms]
max_attempts = 3
[workflows.guarded]
pause_when = { unresolved = 3 }
[[redaction.rules]]
destination = "crm"
fields = ["customer.name"]
"#;

/// Runs a test body against SQLite, and against PostgreSQL (ignored when no server is configured);
/// after `pgbouncer:`, against PostgreSQL through PgBouncer in transaction mode as well.
#[macro_export]
macro_rules! both_backends {
    (pgbouncer: $($name:ident),* $(,)?) => {
        $crate::both_backends!($($name),*);
        mod through_pgbouncer {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                #[cfg_attr(
                    not(all(settle_pg, settle_pgbouncer)),
                    ignore = "needs SETTLE_TEST_POSTGRES_URL and pgbouncer"
                )]
                async fn $name() {
                    let db = $crate::common::pgbouncer().await;
                    super::$name(&db).await;
                }
            )*
        }
    };
    ($($name:ident),* $(,)?) => {
        mod on_sqlite {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() {
                    let db = $crate::common::sqlite();
                    super::$name(&db).await;
                }
            )*
        }
        mod on_postgres {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                #[cfg_attr(not(settle_pg), ignore = "needs SETTLE_TEST_POSTGRES_URL")]
                async fn $name() {
                    let db = $crate::common::postgres().await;
                    super::$name(&db).await;
                }
            )*
        }
    };
}

/// A drill: the real binary against a database and a config whose destination `tasks` is a
/// simulator.
pub struct Drill {
    pub db: String,
    pub config: std::path::PathBuf,
    _dir: tempfile::TempDir,
}

/// A config whose destination `tasks` is the simulator, with fast retries.
pub fn drill(db: &TestDb, sim: &Sim, dedupes: bool, lookup: bool, extra: &str) -> Drill {
    drill_on(&db.url, sim, dedupes, lookup, extra)
}

/// [`drill`] on a database given by its URL.
pub fn drill_on(url: &str, sim: &Sim, dedupes: bool, lookup: bool, extra: &str) -> Drill {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("settle.toml");
    let lookup_url = if lookup {
        format!("lookup_url = \"{}/tasks?key={{key}}\"\n", sim.base)
    } else {
        String::new()
    };
    std::fs::write(
        &config,
        format!(
            "attempt_timeout = \"2s\"\n[destinations.tasks]\nurl = \"{}/tasks\"\n{lookup_url}dedupes = {dedupes}\nkey_retention = \"1h\"\n\
             lookup = {lookup}\nmax_attempts = 4\nbase = \"10ms\"\ncap = \"50ms\"\ntimeout = \"1s\"\n{extra}",
            sim.base
        ),
    )
    .unwrap();
    Drill {
        db: url.to_string(),
        config,
        _dir: dir,
    }
}

/// A drill with a config of the test's own text.
pub fn drill_with(url: &str, config_text: &str) -> Drill {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("settle.toml");
    std::fs::write(&config, config_text).unwrap();
    Drill {
        db: url.to_string(),
        config,
        _dir: dir,
    }
}

impl Drill {
    pub fn cmd(&self, args: &[&str]) -> std::process::Command {
        let mut c = std::process::Command::new(env!("CARGO_BIN_EXE_settle"));
        c.arg("--db")
            .arg(&self.db)
            .arg("--config")
            .arg(&self.config)
            .args(args);
        c.env("SETTLE_OPERATOR", "alice")
            .env("SETTLE_LOG_FILE", self.config.with_extension("log"));
        c
    }

    pub fn run(&self, args: &[&str]) -> String {
        let out = self.cmd(args).output().unwrap();
        assert!(
            out.status.success(),
            "settle {args:?}: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into()
    }

    /// Records `key` in `workflow` for the destination `tasks` with this payload's JSON text.
    pub fn record_as(&self, key: &str, workflow: &str, payload: &str) {
        self.run(&[
            "record",
            "--key",
            key,
            "--workflow",
            workflow,
            "--destination",
            "tasks",
            "--action",
            "create_task",
            "--payload",
            payload,
        ]);
    }

    /// `settle` with these arguments: its exit code, stdout and stderr. A panic fails the test.
    pub fn output(&self, args: &[&str]) -> (i32, String, String) {
        let out = self.cmd(args).env("RUST_BACKTRACE", "1").output().unwrap();
        let (stdout, stderr) = (
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        );
        let code = out.status.code().unwrap_or(-1);
        assert!(
            code != 101 && !stderr.contains("panicked"),
            "settle {args:?} panicked: {stderr}"
        );
        (code, stdout, stderr)
    }

    /// Records `key` (the onboarding kickoff task); what `record` printed.
    pub fn record(&self, key: &str) -> String {
        self.run(&[
            "record",
            "--key",
            key,
            "--workflow",
            "onboarding",
            "--destination",
            "tasks",
            "--action",
            "create_task",
            "--payload",
            "{\"title\":\"Kickoff call\"}",
        ])
    }

    pub fn show(&self, key: &str) -> serde_json::Value {
        serde_json::from_str(&self.run(&["show", key, "--json"])).unwrap()
    }

    pub fn dispatch_until_settled(&self) -> String {
        self.run(&["dispatch", "--until-settled"])
    }
}

/// `settle sim` running in the background on a free port.
pub struct Sim {
    child: std::process::Child,
    pub base: String,
}

impl Sim {
    pub fn start(args: &[&str]) -> Sim {
        use std::io::BufRead;
        let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_settle"))
            .args(["sim", "--listen", "127.0.0.1:0"])
            .args(args)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("start settle sim");
        let mut line = String::new();
        std::io::BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let base = line
            .trim()
            .strip_prefix("listening on ")
            .expect("first line names the address")
            .to_string();
        Sim { child, base }
    }

    /// The simulator's `/stats`: its tasks (`tasks`, `by_key`, `ids_by_key`) and `requests`.
    pub fn stats(&self) -> serde_json::Value {
        let url = format!("{}/stats", self.base);
        on_a_thread(async { reqwest::get(url).await.unwrap().json().await.unwrap() })
    }

    /// The ids of the tasks the simulator really created, per key ("the destination's
    /// own records", manual: Proof under faults).
    pub fn ids_by_key(&self) -> std::collections::BTreeMap<String, Vec<String>> {
        let v = self.stats();
        serde_json::from_value(v["ids_by_key"].clone())
            .unwrap_or_else(|e| panic!("/stats has no ids_by_key: {e}: {v}"))
    }

    /// Tasks the simulator really created, per key. An answer of another shape fails the test:
    /// a count read as 0 would pass every "nothing was created" check.
    pub fn tasks(&self) -> (u64, std::collections::BTreeMap<String, u64>) {
        let v = self.stats();
        let by_key: std::collections::BTreeMap<String, u64> = v["by_key"]
            .as_object()
            .unwrap_or_else(|| panic!("/stats has no by_key object: {v}"))
            .iter()
            .map(|(k, n)| {
                let n = n
                    .as_u64()
                    .unwrap_or_else(|| panic!("/stats by_key.{k} is not a count: {v}"));
                (k.clone(), n)
            })
            .collect();
        let total = v["tasks"]
            .as_u64()
            .unwrap_or_else(|| panic!("/stats has no tasks count: {v}"));
        assert_eq!(
            by_key.values().sum::<u64>(),
            total,
            "/stats: the per-key counts add up to the total"
        );
        (total, by_key)
    }
}

/// A child process killed (SIGKILL) and reaped when the guard goes, whatever the test did.
pub struct Killed(pub std::process::Child);

impl Killed {
    pub fn pid(&self) -> u32 {
        self.0.id()
    }

    /// `kill -9` now, and wait for it.
    pub fn kill_9(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

impl Drop for Killed {
    fn drop(&mut self) {
        self.kill_9();
    }
}

impl Drop for Sim {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A TCP proxy in front of PostgreSQL that the test can cut and restore: a real outage as a
/// client sees it, without stopping the server the other tests share.
pub struct Proxy {
    pub port: u16,
    upstream: String,
    tasks: std::sync::Arc<std::sync::Mutex<Vec<tokio::task::JoinHandle<()>>>>,
}

impl Proxy {
    /// A proxy in front of the test database, and the URL that goes through it.
    pub async fn before(db: &TestDb) -> (Proxy, String) {
        let after_at = db.url.split_once('@').unwrap().1;
        let (host_port, rest) = after_at.split_once('/').unwrap();
        let proxy = Proxy::start(0, host_port).await;
        let url = format!("postgres://postgres@127.0.0.1:{}/{rest}", proxy.port);
        (proxy, url)
    }

    /// The proxy back on the same port after a cut.
    pub async fn restore(&self) -> Proxy {
        Proxy::start(self.port, &self.upstream).await
    }

    async fn start(port: u16, upstream: &str) -> Proxy {
        let listener = tokio::net::TcpListener::bind(("127.0.0.1", port))
            .await
            .unwrap();
        let port = listener.local_addr().unwrap().port();
        let tasks = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let (t, up) = (tasks.clone(), upstream.to_string());
        let accept = tokio::spawn(async move {
            while let Ok((mut inbound, _)) = listener.accept().await {
                let up = up.clone();
                let conn = tokio::spawn(async move {
                    if let Ok(mut outbound) = tokio::net::TcpStream::connect(up).await {
                        let _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await;
                    }
                });
                t.lock().unwrap().push(conn);
            }
        });
        tasks.lock().unwrap().push(accept);
        Proxy {
            port,
            upstream: upstream.to_string(),
            tasks,
        }
    }

    pub fn cut(&self) {
        for t in self.tasks.lock().unwrap().drain(..) {
            t.abort();
        }
    }
}

/// What one run of the real binary printed, and its exit code.
pub struct Run {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

/// Runs the real binary on `db` in `dir` as operator `who` (`SETTLE_OPERATOR`), with no config
/// and no database from the environment, the log in `dir`. No panic may happen, whatever the
/// input: a backtrace is asked for so that one would show.
pub fn settle_as(db: &str, dir: &std::path::Path, who: &str, args: &[&str]) -> Run {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_settle"))
        .arg("--db")
        .arg(db)
        .args(args)
        .current_dir(dir)
        .env("SETTLE_OPERATOR", who)
        .env("SETTLE_LOG_FILE", dir.join("settle.log"))
        .env_remove("SETTLE_CONFIG")
        .env("XDG_CONFIG_HOME", dir.join("no-config"))
        .env_remove("SETTLE_DATABASE_URL")
        .env("RUST_BACKTRACE", "1")
        .stdin(std::process::Stdio::null())
        .output()
        .expect("run settle");
    let run = Run {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into(),
        stderr: String::from_utf8_lossy(&out.stderr).into(),
    };
    assert!(
        run.code != 101 && !run.stderr.contains("panicked"),
        "settle {args:?} panicked: {}",
        run.stderr
    );
    run
}

/// The benches' operations as ingest lines: `n` intents over seven workflows and five
/// destinations, a tenth of them with an attempt that made them exceptions (alternately unknown
/// and rejected).
pub fn seed_lines(n: usize) -> String {
    let mut text = String::with_capacity(n * 220);
    for i in 0..n {
        text.push_str(&format!(
            r#"{{"type":"intent","key":"bench-{i:08}","workflow":"wf-{}","step":"upsert","destination":"dest-{}","action":"upsert","payload":{{"customer":{{"id":{i},"email":"c{i}@example.com"}}}}}}"#,
            i % 7,
            i % 5
        ));
        text.push('\n');
        if i % 10 == 0 {
            let outcome = ["unknown", "rejected"][i / 10 % 2];
            text.push_str(&format!(r#"{{"type":"attempt","key":"bench-{i:08}","attempt":1,"outcome":"{outcome}","error":"read timeout after 30s"}}"#));
            text.push('\n');
        }
    }
    text
}

/// The keys of the first page (up to 50) that a list of `scope` shows `viewer` for the filter
/// `text`, sorted.
pub async fn keys_listed(
    l: &settle::Ledger,
    scope: settle::Scope,
    text: &str,
    viewer: &str,
) -> Vec<String> {
    let filter = settle::ListFilter {
        query: settle::domain::filter::Filter::parse(text).unwrap(),
        scope,
        ..Default::default()
    };
    let page = l.read().list(&filter, viewer, None, 50).await.unwrap();
    let mut keys: Vec<String> = page.items.into_iter().map(|v| v.key).collect();
    keys.sort();
    keys
}

/// A count a bench reads from the environment (`SETTLE_BENCH_OPS=50000`), or `default`.
pub fn env_count(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// The PostgreSQL server a bench runs on (`SETTLE_BENCH_DB=postgres://...`), if any.
pub fn bench_server() -> Option<String> {
    std::env::var("SETTLE_BENCH_DB")
        .ok()
        .filter(|u| u.starts_with("postgres"))
}

/// A fresh database for a bench: a file in `dir`, or one on the bench's PostgreSQL server
/// (`SETTLE_BENCH_DB`), dropped with the returned guard.
pub async fn bench_db(dir: &std::path::Path, name: &str) -> (String, Option<TestDb>) {
    match bench_server() {
        Some(server) => {
            let db = postgres_on(&server).await;
            (db.url.clone(), Some(db))
        }
        None => (
            format!("sqlite://{}", dir.join(format!("{name}.db")).display()),
            None,
        ),
    }
}

/// The text format: `# HELP`/`# TYPE` lines (gauges, counters and histograms), then
/// `name{k="v",...} value` samples.
pub fn parse_prometheus(
    text: &str,
) -> Vec<(String, std::collections::BTreeMap<String, String>, f64)> {
    let mut samples = Vec::new();
    let mut typed = std::collections::BTreeSet::new();
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, kind) = rest.split_once(' ').unwrap();
            assert!(["gauge", "counter", "histogram"].contains(&kind), "{line}");
            if kind == "histogram" {
                for part in ["_bucket", "_sum", "_count"] {
                    typed.insert(format!("{name}{part}"));
                }
            } else {
                typed.insert(name.to_string());
            }
            continue;
        }
        if line.starts_with("# HELP ") || line.is_empty() {
            continue;
        }
        let (series, value) = line.rsplit_once(' ').unwrap_or_else(|| panic!("{line}"));
        let value: f64 = value.parse().unwrap_or_else(|_| panic!("value: {line}"));
        let (name, labels) = match series.split_once('{') {
            Some((n, l)) => (n, l.strip_suffix('}').unwrap_or_else(|| panic!("{line}"))),
            None => (series, ""),
        };
        assert!(typed.contains(name), "{name} has no TYPE line");
        let mut map = std::collections::BTreeMap::new();
        for pair in labels.split("\",").filter(|p| !p.is_empty()) {
            let (k, v) = pair.split_once("=\"").unwrap_or_else(|| panic!("{line}"));
            map.insert(k.to_string(), v.trim_end_matches('"').to_string());
        }
        samples.push((name.to_string(), map, value));
    }
    samples
}

/// The `p` quantile of some latencies, in milliseconds (sorts them).
pub fn percentile(v: &mut [std::time::Duration], p: f64) -> f64 {
    v.sort();
    let i = ((v.len() as f64 - 1.0) * p).round() as usize;
    v[i].as_secs_f64() * 1e3
}

/// A port nobody listens on now.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Whether the tests run as root (PostgreSQL and PgBouncer then run as `postgres`).
pub fn running_as_root() -> bool {
    std::process::Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| o.stdout.starts_with(b"0\n"))
}
