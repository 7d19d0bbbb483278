//! Concurrent writes grouped into shared transactions (SPEC 20), as a dispatcher's round groups
//! its sends: the HTTP API hands each record, start and attempt report to a [`Writer`], which
//! runs whatever has queued while the last group committed as one transaction and answers each
//! only after that commit. Nothing is acknowledged before it is in the ledger.
//!
//! Design:
//! - Lanes (a thread each, see [`lane_thread`]; one on either backend by default, see
//!   `api::default_lanes`), a write going to the lane its key hashes to: two writes of one
//!   key meet in one lane, in the order they came, and never in two transactions at once. The
//!   lanes share no operation's row, so their groups do not wait for each other's row locks.
//! - A lane takes the first write that comes, and then every write already queued (up to
//!   [`GROUP`]): no timer, so a lone write waits for nothing, and under load a commit is shared by
//!   as many writes as arrived while the last one ran.
//! - Each write runs on the rules of the single call (`record_in`, `start_in`, `act_in`) inside
//!   the group's transaction. A refusal concerns that write alone (the rules refuse before they
//!   write). Anything else (a lost compare-and-set, a value the database will not store, a
//!   deadlock between lanes) rolls the group back, and each of its writes is then run on its own,
//!   as the single call would run it.
//! - A commit that fails leaves each write's outcome unknown: every write of that group is told
//!   the database is unavailable, never retried here (the caller repeats it with its key, and the
//!   rules answer as for any repeat).

use std::collections::BTreeSet;
use std::hash::{Hash, Hasher};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use tokio::sync::{mpsc, oneshot};

use super::change::Ask;
use super::group_writes::{Answered, Prepared, Write, Written};
use super::{Ledger, Recorded};
use crate::error::{Error, Result};
use crate::store::{self, Store, Tried, Tx};

/// The most writes one transaction takes.
pub const GROUP: usize = 64;

struct Job {
    /// The handle of the one who writes (an automation's: its scope, its token's fingerprint).
    ledger: Ledger,
    actor: String,
    write: Prepared,
    reply: oneshot::Sender<Result<Answered>>,
}

/// Hands writes to the lanes; cheap to clone. The lanes end when every clone is dropped.
#[derive(Clone)]
pub struct Writer {
    lanes: Vec<mpsc::Sender<Job>>,
    counts: Arc<Counts>,
}

/// What the lanes have done: writes, and the transactions they shared.
#[derive(Debug, Default)]
struct Counts {
    writes: AtomicU64,
    groups: AtomicU64,
    /// Groups that could not stand together and were run write by write.
    split: AtomicU64,
    /// Writes handed to the lanes, and those of them answered: equal when nothing waits.
    queued: AtomicU64,
    answered: AtomicU64,
}

impl Writer {
    /// `lanes` lanes of groups (at least one) on `ledger`'s database, each on a thread of its
    /// own with its own connection (see [`lane_thread`]).
    pub fn new(ledger: &Ledger, lanes: usize) -> Writer {
        let counts = Arc::new(Counts::default());
        let lanes = (0..lanes.max(1))
            .map(|i| {
                let (tx, rx) = mpsc::channel(GROUP * 4);
                lane_thread(i, ledger.store.clone(), rx, counts.clone());
                tx
            })
            .collect();
        Writer { lanes, counts }
    }

    /// The writes answered so far, and the groups they were run in (fewer groups than writes:
    /// commits were shared).
    pub fn counts(&self) -> (u64, u64, u64) {
        (
            self.counts.writes.load(Ordering::Relaxed),
            self.counts.groups.load(Ordering::Relaxed),
            self.counts.split.load(Ordering::Relaxed),
        )
    }

    /// `write` by `actor` through `ledger` (its scope and its events' signature), in the next
    /// group of its lane; answered after that group committed.
    pub async fn write(&self, ledger: &Ledger, actor: &str, write: Write) -> Result<Answered> {
        self.queue(ledger, actor, write).await?.answered().await
    }

    /// `write` handed to its lane, not yet run: from here on, every later write of its key is
    /// judged after it (one lane a key, in order). Its answer comes after its group committed.
    pub async fn queue(&self, ledger: &Ledger, actor: &str, write: Write) -> Result<Queued> {
        let (lane, job, answer) = self.job(ledger, actor, write)?;
        self.lanes[lane].send(job).await.map_err(|_| stopped())?;
        self.counts.queued.fetch_add(1, Ordering::Relaxed);
        Ok(Queued(answer))
    }

    /// Waits, at most `limit`, until every write handed to the lanes is answered (committed,
    /// or told why not); `false` if some still waited. What a stopping server does, so that an
    /// outcome the gateway answered before its commit is not left in flight.
    pub async fn drain(&self, limit: std::time::Duration) -> bool {
        let until = tokio::time::Instant::now() + limit;
        loop {
            let (queued, answered) = (
                self.counts.queued.load(Ordering::Relaxed),
                self.counts.answered.load(Ordering::Relaxed),
            );
            if answered >= queued {
                return true;
            }
            if tokio::time::Instant::now() >= until {
                return false;
            }
            tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        }
    }

    /// Two writes of one key, `first` then `then`, queued together: they share a group (and so a
    /// commit) unless the lane took the first alone, and `then` is judged on what `first` left
    /// (the gateway's record and start of one request). Each has its own answer.
    pub async fn write_two(
        &self,
        ledger: &Ledger,
        actor: &str,
        first: Write,
        then: Write,
    ) -> (Result<Answered>, Result<Answered>) {
        debug_assert_eq!(first.key(), then.key(), "one key, one lane");
        let (lane, a, first_answer) = match self.job(ledger, actor, first) {
            Ok(j) => j,
            Err(e) => return (Err(e), Err(stopped())),
        };
        let (_, b, then_answer) = match self.job(ledger, actor, then) {
            Ok(j) => j,
            Err(e) => return (Err(e), Err(stopped())),
        };
        match self.lanes[lane].reserve_many(2).await {
            Ok(mut permits) => {
                for job in [a, b] {
                    if let Some(p) = permits.next() {
                        p.send(job);
                    }
                }
                self.counts.queued.fetch_add(2, Ordering::Relaxed);
            }
            Err(_) => return (Err(stopped()), Err(stopped())),
        }
        let first = first_answer.await.map_err(|_| stopped()).and_then(|r| r);
        let then = then_answer.await.map_err(|_| stopped()).and_then(|r| r);
        (first, then)
    }

    /// A write checked and made ready for its lane: the lane, the job, where its answer comes.
    fn job(
        &self,
        ledger: &Ledger,
        actor: &str,
        write: Write,
    ) -> Result<(usize, Job, oneshot::Receiver<Result<Answered>>)> {
        super::check_name("actor", actor, false)?;
        let mut hasher = std::collections::hash_map::DefaultHasher::new();
        write.key().hash(&mut hasher);
        let lane = hasher.finish() as usize % self.lanes.len();
        let write = match write {
            Write::Record(intent) => {
                let op = ledger.prepare(&intent)?;
                Prepared::Record(Box::new(op), intent.workflow)
            }
            Write::Start(key) => {
                crate::domain::validate_key(&key).map_err(Error::Invalid)?;
                Prepared::Start(key)
            }
            Write::Attempt(report) => {
                super::check_report(&report)?;
                Prepared::Attempt(report)
            }
        };
        let (reply, answer) = oneshot::channel();
        let job = Job {
            ledger: ledger.clone(),
            actor: actor.to_string(),
            write,
            reply,
        };
        Ok((lane, job, answer))
    }
}

/// A write in its lane's queue ([`Writer::queue`]).
pub struct Queued(oneshot::Receiver<Result<Answered>>);

impl Queued {
    /// The write's answer, once its group committed.
    pub async fn answered(self) -> Result<Answered> {
        self.0.await.map_err(|_| stopped())?
    }
}

fn stopped() -> Error {
    Error::Unavailable("the ledger's writer stopped".into())
}

/// A lane on a thread and a single-threaded runtime of its own, with its own store made there
/// ([`Store::for_writer`]): as a task among the server's requests, each wake-up of its chain of
/// statements waited behind them (the gateway's bench, SQLite: a group's mean 2.06 ms so, 1.21 ms
/// here). A thread that cannot start drops the receiver: its writes hear the writer stopped.
fn lane_thread(i: usize, store: Store, rx: mpsc::Receiver<Job>, counts: Arc<Counts>) {
    let started = std::thread::Builder::new()
        .name(format!("settle-writer-{i}"))
        .spawn(move || {
            match tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            {
                Ok(rt) => rt.block_on(async move { lane(rx, counts, store.for_writer()).await }),
                Err(e) => tracing::error!(error = %e, "the API's writer could not start"),
            }
        });
    if let Err(e) = started {
        tracing::error!(error = %e, "the API's writer could not start");
    }
}

async fn lane(mut rx: mpsc::Receiver<Job>, counts: Arc<Counts>, store: Store) {
    while let Some(first) = rx.recv().await {
        let mut jobs = vec![first];
        while jobs.len() < GROUP {
            match rx.try_recv() {
                Ok(j) => jobs.push(j),
                Err(_) => break,
            }
        }
        // every write of the group on the lane's own connection
        for j in &mut jobs {
            j.ledger = j.ledger.on_store(store.clone());
        }
        let n = jobs.len() as u64;
        counts.writes.fetch_add(n, Ordering::Relaxed);
        counts.groups.fetch_add(1, Ordering::Relaxed);
        if !run_group(jobs).await {
            counts.split.fetch_add(1, Ordering::Relaxed);
        }
        counts.answered.fetch_add(n, Ordering::Relaxed);
    }
}

impl Job {
    /// This write inside a transaction, on the single call's rules.
    async fn run_in(&self, tx: &mut Tx) -> Result<Tried<Written>> {
        let (l, actor) = (&self.ledger, self.actor.as_str());
        Ok(match &self.write {
            Prepared::Record(op, _) => match l.record_in(tx, op, actor).await? {
                Tried::Done(r) => Tried::Done(Written::Recorded(r)),
                Tried::Raced => Tried::Raced,
            },
            Prepared::Start(key) => match l.start_in(tx, key, actor).await? {
                Tried::Done((a, n)) => Tried::Done(Written::Started(a, n)),
                Tried::Raced => Tried::Raced,
            },
            Prepared::Attempt(report) => {
                match l
                    .act_in(tx, &report.key, actor, &Ask::Attempt(report))
                    .await?
                {
                    Tried::Done(a) => Tried::Done(Written::Reported(a)),
                    Tried::Raced => Tried::Raced,
                }
            }
        })
    }

    /// This write in a transaction of its own, tried again where another writer raced it.
    async fn run_alone(&self) -> Result<Answered> {
        store::in_tx!(self.ledger.store, |tx| self.run_in(tx).await).map(|written| Answered {
            written,
            view: None,
        })
    }

    /// The workflow whose stopping threshold this write's answer may have reached.
    fn threshold_of(&self, done: &Result<Answered>) -> Option<String> {
        let done = done.as_ref().map(|a| &a.written);
        match (done, &self.write) {
            (Ok(Written::Recorded(Recorded::Conflict)), Prepared::Record(_, w)) => Some(w.clone()),
            (Ok(Written::Reported(a) | Written::Started(a, _)), _)
                if a.to != a.from && a.to.is_exception() =>
            {
                Some(a.workflow.clone())
            }
            _ => None,
        }
    }
}

/// One group: one transaction for all, or each alone where the group could not stand (`false`).
async fn run_group(jobs: Vec<Job>) -> bool {
    let mut whole = true;
    let results = match together(&jobs).await {
        Some(r) => r,
        None => {
            whole = false;
            let mut each = Vec::with_capacity(jobs.len());
            for j in &jobs {
                each.push(j.run_alone().await);
            }
            each
        }
    };
    // as the single call does before it answers: a write that made an exception may pause its
    // workflow at its threshold (asked once a workflow)
    let mut asked = BTreeSet::new();
    for (j, r) in jobs.iter().zip(&results) {
        if let Some(w) = j.threshold_of(r)
            && asked.insert(w.clone())
        {
            let _ = j.ledger.check_threshold(&w).await;
        }
    }
    for (j, r) in jobs.into_iter().zip(results) {
        let _ = j.reply.send(r);
    }
    whole
}

/// The group in one transaction: each write's answer, or `None` where the group must be run
/// write by write (see the module's design). Each caller's writes are one batch of the
/// transaction (`write_batch`); a failed commit answers every write with it.
async fn together(jobs: &[Job]) -> Option<Vec<Result<Answered>>> {
    let store = &jobs[0].ledger.store;
    // the group's statements are lookups by key, and nothing else
    let mut tx = store.begin_only_lookups().await.ok()?;
    let mut results: Vec<Option<Result<Answered>>> = jobs.iter().map(|_| None).collect();
    let mut callers: Vec<&str> = jobs.iter().map(|j| j.actor.as_str()).collect();
    callers.sort_unstable();
    callers.dedup();
    for caller in callers {
        let mine: Vec<usize> = (0..jobs.len())
            .filter(|i| jobs[*i].actor == caller)
            .collect();
        let writes: Vec<&Prepared> = mine.iter().map(|i| &jobs[*i].write).collect();
        let ledger = &jobs[mine[0]].ledger;
        match ledger.write_batch(&mut tx, caller, &writes).await {
            Ok(Some(answers)) => {
                for (i, a) in mine.into_iter().zip(answers) {
                    results[i] = Some(a);
                }
            }
            failed => {
                let error = failed.err().map(|e| e.to_string());
                tracing::debug!(
                    caller,
                    ?error,
                    "group: raced (no error) or failed, each alone"
                );
                tx.rollback().await;
                return None;
            }
        }
    }
    let results: Vec<Result<Answered>> = results
        .into_iter()
        .map(|r| r.expect("every write answered"))
        .collect();
    match tx.commit().await {
        Ok(()) => Some(results),
        Err(e) => {
            let why = format!(
                "the write's commit failed, its outcome is unknown: repeat it with its key ({e})"
            );
            Some(
                jobs.iter()
                    .map(|_| Err(Error::Unavailable(why.clone())))
                    .collect(),
            )
        }
    }
}
