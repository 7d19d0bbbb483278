//! The chaos run of the manual's Proof under faults: many faults at once, counted at the destinations.
//!
//! Three `settle sim` destinations, each with seeded faults on 20% of its requests (reject, drop,
//! late, unavailable, error) and 5-50 ms of latency: `crm` deduplicates, `projects` does not but
//! can be looked up, `sms` neither. Each has its bad hour too: `crm` hangs from 4 s to 8 s,
//! `projects` answers 503 from 6 s to 10 s, `sms` is limited to 15 requests a second (429) and
//! hangs from 11 s to 12 s; their breakers and paces are in play. Against them, all at once:
//!
//! - the automation, in chunks at a steady pace: every other chunk through `settle ingest`, the
//!   others over the HTTP API, each operation recorded through two `settle serve --http` at once
//!   (one key's requests split over the two servers);
//! - two `settle dispatch` processes, one of them killed with SIGKILL at a random moment every few
//!   seconds and started again (and any that exits by itself, as in an outage, started again);
//! - the manual's `onboard.sh` (the three-step protocol script, as it stands in docs/automations.md),
//!   killed with SIGKILL before or after a random one of its calls to settle and rerun;
//! - a person at the command line (`pat`): claim, release, reconcile from the destination's own
//!   records (found with the task's id, or absent), retry, close as abandoned, at random;
//! - on PostgreSQL (a cluster of the run's own): a restart (fast) at a quarter of the ingest, every
//!   client connection cut at 45%, a crash restart (immediate) at 65%;
//! - or, in the failover drill, a primary and a synchronous standby, reached through a multi-host
//!   URL: at half the ingest the primary is stopped as in a crash (`-m immediate`) and the standby
//!   promoted. No dispatcher is killed then: each process must carry on by itself, and the drill
//!   measures when each did (a server's first answer, a dispatcher's first attempt recorded).
//!
//! Then the dispatchers are killed for the last time, the person lets go of what they hold, and
//! after the attempt timeout a `settle sweep` and a `settle dispatch --until-settled` run; the
//! checker reads the ledger and the simulators' records. The seed fixes every fault schedule and
//! every random choice of the run (which dispatcher dies when, which line kills a script, what the
//! person does); the interleaving of the processes is the machine's, so a replay with the same seed
//! runs the same faults, not the same race.

use std::collections::BTreeMap;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use super::api::ApiServer;
use super::checker::{self, Destination, Violation};
use super::cluster::Cluster;
use super::{Killed, Sim};

/// What a chaos run does.
#[derive(Clone, Debug)]
pub struct Plan {
    pub seed: u64,
    /// The run's size as asked for (SETTLE_CHAOS_OPS): what a replay asks for again.
    pub total: usize,
    /// Operations the automation ingests (each run of the script adds three more).
    pub ops: usize,
    /// Runs of the manual's `onboard.sh`.
    pub runs: usize,
    /// Operations ingested a second.
    pub rate: usize,
    /// A PostgreSQL of the run's own (restarted twice, its connections cut once); else SQLite.
    pub postgres: bool,
    /// PostgreSQL as a primary and a synchronous standby, failed over at half the ingest.
    pub failover: bool,
}

impl Plan {
    /// About `total` operations, at least: a run of the manual's script for every 30, each
    /// counted as one (a run stopped for a person records no later step; one that goes through
    /// records three), the rest ingested by the automation, 80 a second.
    pub fn of(seed: u64, total: usize, postgres: bool) -> Plan {
        Plan {
            seed,
            total,
            ops: total - total / 30,
            runs: total / 30,
            rate: 80,
            postgres,
            failover: false,
        }
    }

    /// The failover drill of `total` operations on a primary and its synchronous standby.
    pub fn failover(seed: u64, total: usize) -> Plan {
        Plan {
            failover: true,
            ..Plan::of(seed, total, true)
        }
    }
}

/// What the failover drill saw.
#[derive(Debug, Default)]
pub struct Failover {
    /// Operations the automation had been told were recorded when the primary stopped.
    pub acked: usize,
    /// From the stop until the standby took writes.
    pub promoted: Duration,
    /// Each long-running process, and when (from the stop) it carried on; `None`: not within
    /// half a minute.
    pub carried_on: Vec<(String, Option<Duration>)>,
}

/// What the run injected and did, counted as it went.
#[derive(Debug, Default)]
pub struct Tally {
    pub dispatcher_kills: usize,
    /// Dispatchers that ended by themselves (the database went away) and were started again.
    pub dispatcher_exits: usize,
    pub script_runs: usize,
    pub script_kills: usize,
    /// Script runs that stopped with exit 3, leaving a step to a person.
    pub script_stops: usize,
    /// The person's actions: what was asked, and whether settle did it or refused.
    pub person: BTreeMap<String, usize>,
    pub db_restarts: usize,
    pub db_cuts: usize,
    /// Operations the automation recorded over the HTTP API (each through both servers).
    pub served: usize,
    pub failover: Option<Failover>,
}

/// What a chaos run found.
pub struct Outcome {
    pub plan: Plan,
    pub tally: Tally,
    /// Faults the simulators injected, by kind, over the three.
    pub faults: BTreeMap<String, u64>,
    pub requests: u64,
    pub tasks: u64,
    pub states: BTreeMap<String, u64>,
    pub operations: u64,
    pub duration: Duration,
    pub violations: Vec<Violation>,
    /// What `dispatch --until-settled` left that automation could still move (pending,
    /// retry_wait, in_flight): key, state, claim, next step. None is expected once the person has
    /// let go of every claim.
    pub left_moving: Vec<String>,
    /// Keys the automation was told were recorded that the ledger does not hold.
    pub missing: Vec<String>,
}

impl Outcome {
    /// Violations per invariant, 1 to 6.
    pub fn per_invariant(&self) -> [usize; 6] {
        let mut n = [0; 6];
        for v in &self.violations {
            n[(v.invariant as usize).clamp(1, 6) - 1] += 1;
        }
        n
    }

    /// The run in a few lines: seed, what was injected, what came of it, each invariant's count.
    pub fn summary(&self) -> String {
        let p = &self.plan;
        let t = &self.tally;
        let faults: u64 = self.faults.values().sum();
        let inv = self.per_invariant();
        format!(
            "chaos on {} seed {}: {} operations ({} ingested, {} script runs) in {:.0} s\n\
             injected: {faults} faults of {} requests {:?}; dispatchers killed {}, ended by \
             themselves {}; script runs {} (killed {}, stopped for a person {}); database restarts \
             {}, connection cuts {}; recorded over HTTP {}; failover {:?}\n\
             person: {:?}\n\
             destinations hold {} tasks; states {:?}\n\
             left to automation after the last dispatch: {:?}; recorded and missing: {:?}\n\
             violations by invariant 1-6: {:?}\n\
             replay: SETTLE_CHAOS_SEED={} SETTLE_CHAOS_OPS={} SETTLE_CHAOS_DB={} cargo bench --bench chaos",
            match (p.postgres, p.failover) {
                (_, true) => "PostgreSQL failing over",
                (true, _) => "PostgreSQL",
                _ => "SQLite",
            },
            p.seed,
            self.operations,
            p.ops,
            p.runs,
            self.duration.as_secs_f64(),
            self.requests,
            self.faults,
            t.dispatcher_kills,
            t.dispatcher_exits,
            t.script_runs,
            t.script_kills,
            t.script_stops,
            t.db_restarts,
            t.db_cuts,
            t.served,
            t.failover,
            t.person,
            self.tasks,
            self.states,
            self.left_moving,
            self.missing,
            inv,
            p.seed,
            p.total,
            match (p.postgres, p.failover) {
                (_, true) => "failover",
                (true, _) => "postgres",
                _ => "sqlite",
            },
        )
    }
}

impl Outcome {
    /// The checker found nothing, the last dispatch left nothing automation could move, and no
    /// operation the automation was told was recorded is missing.
    pub fn assert_clean(&self) {
        assert!(
            self.violations.is_empty(),
            "{}\n{}",
            self.summary(),
            checker::report(&self.violations)
        );
        assert!(self.left_moving.is_empty(), "{}", self.summary());
        assert!(self.missing.is_empty(), "{}", self.summary());
    }
}

/// The destinations: name, simulator arguments beyond the shared ones, dedupes, lookup.
const DESTS: [(&str, bool, bool); 3] = [
    ("crm", true, false),
    ("projects", false, true),
    ("sms", false, false),
];

/// The database under test: a file of the run's own, a cluster of its own, or a primary and its
/// synchronous standby.
enum Db {
    Sqlite(tempfile::TempDir),
    Postgres(Cluster),
    Pair(Cluster, Cluster),
}

/// The automation's token on the HTTP API.
const TOKEN: &str = "settle_c4a05c4a05c4a05c4a05c4a05c4a05c4a05c4a05c4a05c4a05c4a05c4a05c4a0";

/// How every process of the run calls settle.
struct Env {
    db: String,
    config: PathBuf,
    dir: PathBuf,
}

impl Env {
    fn settle(&self, who: &str, args: &[&str]) -> Command {
        let mut c = Command::new(env!("CARGO_BIN_EXE_settle"));
        c.arg("--db")
            .arg(&self.db)
            .arg("--config")
            .arg(&self.config)
            .args(args)
            .env("SETTLE_OPERATOR", who)
            .env("SETTLE_LOG_FILE", self.dir.join("settle.log"))
            .env("RUST_BACKTRACE", "1")
            .stdin(Stdio::null());
        c
    }

    /// Runs settle to its end: exit code, stdout, stderr. A panic fails the run.
    fn run(&self, who: &str, args: &[&str]) -> (i32, String, String) {
        let out = self.settle(who, args).output().expect("run settle");
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        let code = out.status.code().unwrap_or(-1);
        assert!(
            code != 101 && !stderr.contains("panicked"),
            "settle {args:?} panicked: {stderr}"
        );
        (
            code,
            String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr,
        )
    }

    fn dispatcher(&self, n: usize) -> Killed {
        let err = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir.join(format!("dispatcher-{n}.err")))
            .unwrap();
        Killed(
            self.settle("chaos-dispatch", &["dispatch", "--concurrency", "16"])
                .env(
                    "SETTLE_LOG_FILE",
                    self.dir.join(format!("dispatcher-{n}.log")),
                )
                .stdout(Stdio::null())
                .stderr(err)
                .spawn()
                .expect("start a dispatcher"),
        )
    }
}

/// Runs the chaos of `plan` and checks every invariant.
pub fn run(plan: &Plan) -> Outcome {
    let began = Instant::now();
    let sims: Vec<Sim> = DESTS
        .iter()
        .enumerate()
        .map(|(i, (_, dedupes, _))| {
            let seed = (plan.seed * 3 + i as u64).to_string();
            let mut args = vec!["--fault-rate", "0.2", "--seed", &seed];
            args.extend(["--latency", "5ms..50ms", "--late", "1500ms"]);
            if !dedupes {
                args.push("--no-dedupe");
            }
            // a bad hour of each: crm hangs, projects answers 503, sms is rate limited (not in
            // the failover drill, which times how soon each process carries on)
            if !plan.failover {
                args.extend(match i {
                    0 => ["--outage", "4s..8s", "--outage-kind", "hang"],
                    1 => ["--outage", "6s..10s", "--outage-kind", "503"],
                    _ => ["--rate-limit", "15/s", "--outage", "11s..12s"],
                });
            }
            Sim::start(&args)
        })
        .collect();
    let (db, url) = open_database(plan);
    let dir = tempfile::tempdir().unwrap();
    let env = Env {
        db: url.clone(),
        config: dir.path().join("settle.toml"),
        dir: dir.path().to_path_buf(),
    };
    std::fs::write(&env.config, config(&sims)).unwrap();
    let (code, _, err) = env.run("ops", &["init"]);
    assert_eq!(code, 0, "settle init: {err}");
    let config_text = std::fs::read_to_string(&env.config).unwrap();
    let servers: Vec<ApiServer> = (0..2)
        .map(|_| ApiServer::start_with(&url, &config_text, &[]))
        .collect();
    let bases: Vec<String> = servers.iter().map(|s| s.base.clone()).collect();

    let tally = Mutex::new(Tally::default());
    let progress = AtomicUsize::new(0);
    let (ingested, stop) = (AtomicBool::new(false), AtomicBool::new(false));
    std::thread::scope(|s| {
        // a panic in this thread (the automation's) stops the others rather than leave them running
        let _stops = Stops(&ingested, &stop);
        let chaos = s.spawn(|| dispatchers(&env, plan, &stop, &tally));
        let person = s.spawn(|| person(&env, &sims, plan.seed, &stop, &tally));
        let scripts: Vec<_> = (0..2)
            .map(|k| {
                let (env, sims, tally) = (&env, &sims, &tally);
                s.spawn(move || scripts(env, sims, plan, k, tally))
            })
            .collect();
        match &db {
            Db::Postgres(cluster) => {
                s.spawn(|| outages(cluster, plan.ops, &progress, &ingested, &tally));
            }
            Db::Pair(primary, standby) => {
                let (env, bases, progress, tally) = (&env, &bases, &progress, &tally);
                let ingested = &ingested;
                s.spawn(move || {
                    let seen = failover(primary, standby, env, bases, plan.ops, progress, ingested);
                    tally.lock().unwrap().failover = seen;
                });
            }
            Db::Sqlite(_) => {}
        }
        tally.lock().unwrap().served = automation(&env, plan, &bases, &progress);
        ingested.store(true, Ordering::SeqCst);
        for script in scripts {
            script.join().unwrap();
        }
        // the dispatchers catch up under the same chaos for a little longer
        std::thread::sleep(Duration::from_secs(3));
        stop.store(true, Ordering::SeqCst);
        chaos.join().unwrap();
        person.join().unwrap();
    });

    settle_the_rest(&env);
    let dests: Vec<Destination> = DESTS
        .iter()
        .zip(&sims)
        .map(|((name, dedupes, _), sim)| Destination {
            name,
            sim,
            dedupes: *dedupes,
        })
        .collect();
    // the checker reads the ledger on one host: after the drill, the promoted standby's
    let checked = match &db {
        Db::Pair(_, standby) => standby.url("postgres"),
        _ => url.clone(),
    };
    let violations = checker::check_blocking(&checked, &dests, true);
    let (code, out, err) = env.run(
        "ops",
        &[
            "list",
            "--all",
            "--json",
            "--where",
            "state:pending,retry_wait,in_flight",
        ],
    );
    assert_eq!(code, 0, "settle list: {err}");
    let left: Vec<serde_json::Value> = serde_json::from_str(&out).unwrap();
    let (code, out, err) = env.run(
        "ops",
        &["list", "--all", "--json", "--where", "workflow:sync"],
    );
    assert_eq!(code, 0, "settle list: {err}");
    let listed: std::collections::BTreeSet<String> =
        serde_json::from_str::<Vec<serde_json::Value>>(&out)
            .unwrap()
            .iter()
            .filter_map(|o| o["key"].as_str().map(str::to_string))
            .collect();
    let missing = (0..plan.ops)
        .map(|i| format!("{}-{i}", DESTS[i % DESTS.len()].0))
        .filter(|key| !listed.contains(key))
        .collect();
    let left_moving = left
        .iter()
        .map(|o| {
            format!(
                "{} {} claimed by {} ({})",
                o["key"], o["state"], o["claimed_by"], o["next_step"]
            )
        })
        .collect();
    let mut faults = BTreeMap::new();
    let (mut requests, mut tasks) = (0, 0);
    for sim in &sims {
        let stats = sim.stats();
        for (kind, n) in stats["faults"].as_object().into_iter().flatten() {
            *faults.entry(kind.clone()).or_default() += n.as_u64().unwrap_or(0);
        }
        requests += stats["requests"].as_u64().unwrap_or(0);
        for kind in ["outage", "limited"] {
            *faults.entry(kind.to_string()).or_default() += stats[kind].as_u64().unwrap_or(0);
        }
        tasks += stats["tasks"].as_u64().unwrap_or(0);
    }
    let (code, out, err) = env.run("ops", &["stats", "--json"]);
    assert_eq!(code, 0, "settle stats: {err}");
    let stats: serde_json::Value = serde_json::from_str(&out).unwrap();
    let states: BTreeMap<String, u64> =
        serde_json::from_value(stats["by_state"].clone()).unwrap_or_default();
    drop(servers);
    drop(db);
    Outcome {
        plan: plan.clone(),
        tally: tally.into_inner().unwrap(),
        faults,
        requests,
        tasks,
        operations: states.values().sum(),
        states,
        duration: began.elapsed(),
        violations,
        left_moving,
        missing,
    }
}

/// Sets both flags when dropped, as at the end of the run or in a panic.
struct Stops<'a>(&'a AtomicBool, &'a AtomicBool);

impl Drop for Stops<'_> {
    fn drop(&mut self) {
        self.0.store(true, Ordering::SeqCst);
        self.1.store(true, Ordering::SeqCst);
    }
}

fn open_database(plan: &Plan) -> (Db, String) {
    if plan.failover {
        let (primary, standby) = Cluster::synchronous_pair();
        let url = format!(
            "postgres://postgres@127.0.0.1:{},127.0.0.1:{}/postgres?target_session_attrs=read-write",
            primary.port, standby.port
        );
        (Db::Pair(primary, standby), url)
    } else if plan.postgres {
        let cluster = Cluster::primary();
        let url = cluster.url("postgres");
        (Db::Postgres(cluster), url)
    } else {
        let dir = tempfile::tempdir().unwrap();
        let url = format!("sqlite://{}", dir.path().join("chaos.db").display());
        (Db::Sqlite(dir), url)
    }
}

fn config(sims: &[Sim]) -> String {
    let mut text = format!(
        "attempt_timeout = \"2s\"\n[automations.chaos]\ntoken_sha256 = \"{}\"\nworkflows = [\"*\"]\n\
         rate = \"100000/s\"\nburst = 100000\n",
        super::api::sha256(TOKEN)
    );
    for ((name, dedupes, lookup), sim) in DESTS.iter().zip(sims) {
        let base = &sim.base;
        text.push_str(&format!(
            "[destinations.{name}]\nurl = \"{base}/tasks\"\ndedupes = {dedupes}\nlookup = {lookup}\n\
             key_retention = \"1h\"\nmax_attempts = 6\nbase = \"20ms\"\ncap = \"500ms\"\ntimeout = \"1s\"\n"
        ));
        if *lookup {
            text.push_str(&format!("lookup_url = \"{base}/tasks?key={{key}}\"\n"));
        }
    }
    text
}

/// Sleeps `d` in short steps; false when `stop` was set meanwhile.
fn nap(d: Duration, stop: &AtomicBool) -> bool {
    let until = Instant::now() + d;
    while Instant::now() < until {
        if stop.load(Ordering::SeqCst) {
            return false;
        }
        std::thread::sleep(Duration::from_millis(50).min(until - Instant::now()));
    }
    !stop.load(Ordering::SeqCst)
}

/// The automation: every operation recorded, in chunks at `plan.rate` a second: even chunks
/// through `settle ingest`, odd ones over the HTTP API, each operation sent to both servers at
/// once. An ingest or a request that meets the database down is made again (both are
/// idempotent). How many went over HTTP.
fn automation(env: &Env, plan: &Plan, bases: &[String], progress: &AtomicUsize) -> usize {
    let chunk = (plan.rate / 2).max(1);
    let file = env.dir.join("intents.jsonl");
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let client = reqwest::Client::new();
    let mut served = 0;
    for (n, from) in (0..plan.ops).step_by(chunk).enumerate() {
        let to = (from + chunk).min(plan.ops);
        let paced = Instant::now() + Duration::from_millis(500);
        let intents = (from..to).map(|i| {
            let dest = DESTS[i % DESTS.len()].0;
            serde_json::json!({"key": format!("{dest}-{i}"), "workflow": "sync", "step": dest,
                "destination": dest, "action": "create", "payload": {"n": i}})
        });
        if n % 2 == 1 {
            for intent in intents {
                runtime.block_on(record_twice(&client, bases, &intent));
                served += 1;
            }
        } else {
            let text: String = intents
                .map(|mut i| {
                    i["type"] = "intent".into();
                    format!("{i}\n")
                })
                .collect();
            std::fs::write(&file, text).unwrap();
            for tries in 0.. {
                let (code, _, err) = env.run("sync-bot", &["ingest", file.to_str().unwrap()]);
                match code {
                    0 => break,
                    4 if tries < 600 => std::thread::sleep(Duration::from_millis(200)),
                    _ => panic!("settle ingest: exit {code}: {err}"),
                }
            }
        }
        progress.store(to, Ordering::SeqCst);
        std::thread::sleep(paced.saturating_duration_since(Instant::now()));
    }
    served
}

/// Records `intent` through every server at once, each until it answers that it is recorded
/// (201, or 200 for the other's); a server that cannot reach the database is asked again.
async fn record_twice(client: &reqwest::Client, bases: &[String], intent: &serde_json::Value) {
    tokio::join!(
        record(client, &bases[0], intent),
        record(client, &bases[1], intent)
    );
}

async fn record(client: &reqwest::Client, base: &str, intent: &serde_json::Value) {
    for _ in 0..600 {
        let sent = client
            .post(format!("{base}/v1/operations"))
            .bearer_auth(TOKEN)
            .json(intent)
            .send()
            .await;
        let Ok(answer) = sent else {
            tokio::time::sleep(Duration::from_millis(200)).await;
            continue;
        };
        match answer.status().as_u16() {
            200 | 201 => return,
            503 => tokio::time::sleep(Duration::from_millis(200)).await,
            other => panic!(
                "POST {base}/v1/operations {intent}: {other} {}",
                answer.text().await.unwrap_or_default()
            ),
        }
    }
    panic!("POST {base}/v1/operations {intent}: no answer in two minutes");
}

/// Two dispatchers under fire: one killed every 1-5 s and started again (not in the failover
/// drill, where each must carry on by itself); one that ended by itself started again.
fn dispatchers(env: &Env, plan: &Plan, stop: &AtomicBool, tally: &Mutex<Tally>) {
    let mut rng = StdRng::seed_from_u64(plan.seed ^ 0xd15);
    let mut running: Vec<Killed> = (0..2).map(|n| env.dispatcher(n)).collect();
    loop {
        let next = Instant::now() + Duration::from_millis(rng.random_range(1000..5000));
        while Instant::now() < next {
            if !nap(Duration::from_millis(100), stop) {
                return; // the guards kill them
            }
            for (n, d) in running.iter_mut().enumerate() {
                if let Ok(Some(_)) = d.0.try_wait() {
                    tally.lock().unwrap().dispatcher_exits += 1;
                    *d = env.dispatcher(n);
                }
            }
        }
        let n = rng.random_range(0..running.len());
        if plan.failover {
            continue;
        }
        running[n].kill_9();
        tally.lock().unwrap().dispatcher_kills += 1;
        running[n] = env.dispatcher(n);
    }
}

/// The manual's `onboard.sh` (docs/automations.md), as it stands.
fn readme_script() -> String {
    let readme = include_str!("../../docs/automations.md");
    let start = readme
        .find("# onboard.sh RUN")
        .expect("the manual's onboard.sh");
    let body = &readme[start..];
    body[..body.find("```").unwrap()].to_string()
}

/// Stands in for settle on the script's PATH: counts the calls, and kills the script's whole
/// process group (the script, its subshells, a running curl) with SIGKILL before or after the
/// call `SHIM_KILL` names (`before-3`, `after-5`).
const SHIM: &str = r#"#!/bin/sh
n=$(( $(cat "$SHIM_COUNT" 2>/dev/null || echo 0) + 1 )); echo $n > "$SHIM_COUNT"
group=$(cut -d' ' -f5 /proc/$$/stat)
if [ "$SHIM_KILL" = "before-$n" ]; then kill -9 -$group; fi
"$SHIM_REAL" "$@"; rc=$?
if [ "$SHIM_KILL" = "after-$n" ]; then kill -9 -$group; fi
exit $rc
"#;

/// Runs of the manual's script (`k`-th of two threads takes every other run): each may be killed
/// at a random call to settle, and is rerun until it ends (0), stops for a person (3), or has
/// been tried five times.
fn scripts(env: &Env, sims: &[Sim], plan: &Plan, k: usize, tally: &Mutex<Tally>) {
    let mut rng = StdRng::seed_from_u64(plan.seed ^ (0x5c1 + k as u64));
    let bin = env.dir.join(format!("shim-{k}"));
    std::fs::create_dir_all(&bin).unwrap();
    let shim = bin.join("settle");
    std::fs::write(&shim, SHIM).unwrap();
    std::fs::set_permissions(&shim, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let script = env.dir.join("onboard.sh");
    std::fs::write(&script, readme_script()).unwrap();
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let count = env.dir.join(format!("calls-{k}"));
    for run in (k..plan.runs).step_by(2) {
        let id = format!("run-{run}");
        for _ in 0..5 {
            let kill = match rng.random_bool(0.5) {
                true => format!(
                    "{}-{}",
                    ["before", "after"][rng.random_range(0..2)],
                    rng.random_range(1..=9)
                ),
                false => String::new(),
            };
            let _ = std::fs::remove_file(&count);
            let status = Command::new("bash")
                .arg(&script)
                .arg(&id)
                .env("PATH", &path)
                .env("SHIM_REAL", env!("CARGO_BIN_EXE_settle"))
                .env("SHIM_COUNT", &count)
                .env("SHIM_KILL", &kill)
                .env("SETTLE_DATABASE_URL", &env.db)
                .env("SETTLE_CONFIG", &env.config)
                .env("SETTLE_LOG_FILE", env.dir.join("settle.log"))
                .env("CRM_URL", format!("{}/tasks", sims[0].base))
                .env("PROJECTS_URL", format!("{}/tasks", sims[1].base))
                .env("SMS_URL", format!("{}/tasks", sims[2].base))
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .process_group(0)
                .status()
                .expect("run onboard.sh");
            let mut t = tally.lock().unwrap();
            t.script_runs += 1;
            match (status.code(), status.signal()) {
                (Some(0), _) => break,
                (Some(3), _) => {
                    t.script_stops += 1;
                    break;
                }
                (_, Some(9)) => t.script_kills += 1,
                // the database was down (4), or a step's curl failed: try again later
                _ => {
                    drop(t);
                    std::thread::sleep(Duration::from_millis(300));
                }
            }
        }
    }
}

/// A person at the command line, every 0.1-0.5 s: picks an exception at random and claims,
/// releases, reconciles it from the destination's own records (or a few at once with
/// `reconcile --from`), looks it up at the destination, retries or closes it.
fn person(env: &Env, sims: &[Sim], seed: u64, stop: &AtomicBool, tally: &Mutex<Tally>) {
    let mut rng = StdRng::seed_from_u64(seed ^ 0x9e7);
    while nap(Duration::from_millis(rng.random_range(100..500)), stop) {
        let (code, out, _) = env.run(
            "pat",
            &[
                "list",
                "--json",
                "--where",
                "state:unknown,failed,rejected,in_flight",
            ],
        );
        let list: Vec<serde_json::Value> = match code {
            0 => serde_json::from_str(&out).unwrap(),
            _ => continue, // the database is down: look again later
        };
        if list.is_empty() {
            continue;
        }
        let op = &list[rng.random_range(0..list.len())];
        let (key, state) = (op["key"].as_str().unwrap(), op["state"].as_str().unwrap());
        let dest = op["destination"].as_str().unwrap();
        let sim = &sims[DESTS.iter().position(|d| d.0 == dest).unwrap()];
        let args: Vec<String> = match rng.random_range(0..12) {
            0..=2 => match sim.ids_by_key().get(key).map(Vec::as_slice) {
                Some([id]) => strings(&["reconcile", key, "--found", id]),
                None | Some([]) => strings(&["reconcile", key, "--absent"]),
                Some(_) => continue, // two tasks: the checker will name it
            },
            // many at once, from the destinations' own records (manual: Many at once)
            3 => {
                let file = env.dir.join("records.jsonl");
                std::fs::write(&file, records(&list, sims, &mut rng)).unwrap();
                strings(&["reconcile", "--from", file.to_str().unwrap(), "--yes"])
            }
            // the destination's own lookup, run at the person's request
            10 if dest == "projects" => strings(&["lookup", key, "--yes"]),
            4 => strings(&["claim", key]),
            5 => strings(&["release", key]),
            6 | 7 => strings(&["retry", key, "--note", "chaos: tried again"]),
            _ if state == "unknown" || state == "in_flight" => continue,
            _ => strings(&["close", key, "--resolution", "abandoned"])
                .into_iter()
                .chain(strings(&["--note", "chaos: given up"]))
                .collect(),
        };
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let (code, _, _) = env.run("pat", &args);
        let said = match code {
            0 => "done",
            3 => "refused",
            4 => "database down",
            _ => "bad",
        };
        assert_ne!(said, "bad", "settle {args:?}: exit {code}");
        *tally
            .lock()
            .unwrap()
            .person
            .entry(match args[1] {
                "--from" => format!("reconcile --from {said}"),
                _ => format!("{} {said}", args[0]),
            })
            .or_default() += 1;
    }
}

/// What the destinations' records say of up to five of these exceptions, as `reconcile --from`
/// reads it: found with the task's id, or absent.
fn records(list: &[serde_json::Value], sims: &[Sim], rng: &mut StdRng) -> String {
    let mut lines = String::new();
    for _ in 0..rng.random_range(1..=5) {
        let op = &list[rng.random_range(0..list.len())];
        let (key, dest) = (
            op["key"].as_str().unwrap(),
            op["destination"].as_str().unwrap(),
        );
        let sim = &sims[DESTS.iter().position(|d| d.0 == dest).unwrap()];
        let line = match sim.ids_by_key().get(key).map(Vec::as_slice) {
            Some([id]) => serde_json::json!({"key": key, "outcome": "found", "reference": id}),
            None | Some([]) => serde_json::json!({"key": key, "outcome": "absent"}),
            Some(_) => continue,
        };
        lines.push_str(&format!("{line}\n"));
    }
    lines
}

fn strings(args: &[&str]) -> Vec<String> {
    args.iter().map(|a| a.to_string()).collect()
}

/// PostgreSQL's faults, at points of the ingest: a restart at 25%, every connection cut at 45%,
/// a crash restart at 65%.
fn outages(
    cluster: &Cluster,
    ops: usize,
    progress: &AtomicUsize,
    ingested: &AtomicBool,
    tally: &Mutex<Tally>,
) {
    for (at, fault) in [(25, "fast"), (45, "cut"), (65, "immediate")] {
        while progress.load(Ordering::SeqCst) < ops * at / 100 && !ingested.load(Ordering::SeqCst) {
            std::thread::sleep(Duration::from_millis(50));
        }
        if fault == "cut" {
            cluster.cut_connections();
            tally.lock().unwrap().db_cuts += 1;
        } else {
            cluster.restart(fault);
            tally.lock().unwrap().db_restarts += 1;
        }
    }
}

/// The failover drill: at half the ingest the primary stops as in a crash and the standby is
/// promoted; then, every 100 ms for up to half a minute, when each long-running process carried on
/// by itself: a server once it answers a read, a dispatcher once it records an attempt (a line
/// its log gains after the promotion: nothing could be recorded between the stop and then).
fn failover(
    primary: &Cluster,
    standby: &Cluster,
    env: &Env,
    bases: &[String],
    ops: usize,
    progress: &AtomicUsize,
    ingested: &AtomicBool,
) -> Option<Failover> {
    while progress.load(Ordering::SeqCst) < ops / 2 {
        if ingested.load(Ordering::SeqCst) {
            return None;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let acked = progress.load(Ordering::SeqCst);
    primary.stop("immediate");
    let stopped = Instant::now();
    standby.promote();
    let promoted = stopped.elapsed();
    let logs: Vec<PathBuf> = (0..2)
        .map(|n| env.dir.join(format!("dispatcher-{n}.log")))
        .collect();
    let attempts = |log: &PathBuf| {
        std::fs::read_to_string(log)
            .unwrap_or_default()
            .matches(" attempt ")
            .count()
    };
    let before: Vec<usize> = logs.iter().map(attempts).collect();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let client = reqwest::Client::new();
    let answers = |base: &String| {
        runtime.block_on(async {
            let sent = client
                .get(format!("{base}/v1/operations?limit=1"))
                .bearer_auth(TOKEN)
                .timeout(Duration::from_secs(1))
                .send()
                .await;
            sent.is_ok_and(|a| a.status() == 200)
        })
    };
    let mut carried_on: Vec<(String, Option<Duration>)> = (0..2)
        .map(|n| (format!("server {n}"), None))
        .chain((0..2).map(|n| (format!("dispatcher {n}"), None)))
        .collect();
    while carried_on.iter().any(|c| c.1.is_none()) && stopped.elapsed() < Duration::from_secs(30) {
        for (n, base) in bases.iter().enumerate() {
            if carried_on[n].1.is_none() && answers(base) {
                carried_on[n].1 = Some(stopped.elapsed());
            }
        }
        for (n, log) in logs.iter().enumerate() {
            if carried_on[2 + n].1.is_none() && attempts(log) > before[n] {
                carried_on[2 + n].1 = Some(stopped.elapsed());
            }
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    Some(Failover {
        acked,
        promoted,
        carried_on,
    })
}

/// The end: the person lets go, and past the attempt timeout a sweep and a dispatcher that runs
/// until nothing automation may move is left.
fn settle_the_rest(env: &Env) {
    let steps: [&[&str]; 3] = [
        &["release", "--where", "claimed:me", "--yes"],
        &["sweep"],
        &["dispatch", "--until-settled"],
    ];
    for (i, args) in steps.iter().enumerate() {
        if i == 1 {
            std::thread::sleep(Duration::from_millis(2500));
        }
        let who = if i == 0 { "pat" } else { "ops" };
        let (code, out, err) = env.run(who, args);
        assert_eq!(code, 0, "settle {args:?}: {out}{err}");
    }
}
