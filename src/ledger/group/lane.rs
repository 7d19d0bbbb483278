//! The order in which a lane of the group writer (see `mod.rs`) runs what it is handed.
//!
//! Writes someone waits on go first. A lane takes every write queued; those waited on are one
//! group, run at once; the unwaited ones (the gateway's outcome of an answer already given, see
//! [`Writer::queue`](super::Writer::queue)) are deferred for a group of their own, run when nothing
//! waited on is queued, or once [`GROUP`] of them are deferred or the oldest has waited [`DEFER`].
//! A write of a key that has a deferred write goes after it, in one group: one lane a key, in
//! order. So a record + start, which must be committed before its request is sent, never waits
//! behind the outcomes of other requests that were already answered.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use tokio::sync::mpsc::{self, error::TryRecvError};
use tokio::sync::oneshot;

use super::writes::{Answered, Prepared, Written};
use crate::error::{Error, Result};
use crate::ledger::change::Ask;
use crate::ledger::{Ledger, Recorded};
use crate::store::{self, Store, Tried, Tx};

/// The most writes one transaction takes.
pub const GROUP: usize = 64;

pub(super) struct Job {
    /// The handle of the one who writes (an automation's: its scope, its token's fingerprint).
    ledger: Ledger,
    actor: String,
    write: Prepared,
    reply: oneshot::Sender<Result<Answered>>,
    /// Nobody waits on its answer ([`Writer::queue`](super::Writer::queue)): it may yield to
    /// writes that are waited on, never to a later write of its key.
    pub(super) unwaited: bool,
}

/// What the lanes have done: writes, and the transactions they shared.
#[derive(Debug, Default)]
pub(super) struct Counts {
    pub(super) writes: AtomicU64,
    pub(super) groups: AtomicU64,
    /// Groups that could not stand together and were run write by write.
    pub(super) split: AtomicU64,
    /// Writes handed to the lanes, and those of them answered: equal when nothing waits.
    pub(super) queued: AtomicU64,
    pub(super) answered: AtomicU64,
}

/// A lane on a thread and a single-threaded runtime of its own, with its own store made there
/// ([`Store::for_writer`]): as a task among the server's requests, each wake-up of its chain of
/// statements would wait behind them. A thread that cannot start drops the receiver: its writes hear the writer stopped.
pub(super) fn lane_thread(i: usize, store: Store, rx: mpsc::Receiver<Job>, counts: Arc<Counts>) {
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

impl Job {
    pub(super) fn key(&self) -> &str {
        self.write.key()
    }

    /// A write waited on, by `actor` through `ledger`, and where its answer comes.
    pub(super) fn new(
        ledger: &Ledger,
        actor: &str,
        write: Prepared,
    ) -> (Job, oneshot::Receiver<Result<Answered>>) {
        let (reply, answer) = oneshot::channel();
        let job = Job {
            ledger: ledger.clone(),
            actor: actor.to_string(),
            write,
            reply,
            unwaited: false,
        };
        (job, answer)
    }

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
        match super::writes::Group(ledger)
            .write(&mut tx, caller, &writes)
            .await
        {
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

/// The longest an unwaited write is deferred while writes that are waited on keep coming.
pub(super) const DEFER: Duration = Duration::from_millis(10);

async fn lane(mut rx: mpsc::Receiver<Job>, counts: Arc<Counts>, store: Store) {
    let mut deferred: Vec<Job> = Vec::new();
    let mut deferred_since = Instant::now();
    loop {
        let first = if deferred.is_empty() {
            match rx.recv().await {
                Some(j) => j,
                None => return,
            }
        } else {
            match rx.try_recv() {
                Ok(j) => j,
                Err(e) => {
                    // nothing waited on is queued: the deferred writes' turn
                    run(std::mem::take(&mut deferred), &counts, &store).await;
                    match e {
                        TryRecvError::Empty => continue,
                        TryRecvError::Disconnected => return,
                    }
                }
            }
        };
        let mut jobs = vec![first];
        while jobs.len() < GROUP {
            match rx.try_recv() {
                Ok(j) => jobs.push(j),
                Err(_) => break,
            }
        }
        let was_empty = deferred.is_empty();
        let now = waited_first(jobs, &mut deferred);
        if was_empty {
            deferred_since = Instant::now();
        }
        if !now.is_empty() {
            run(now, &counts, &store).await;
        }
        if deferred.len() >= GROUP || (!deferred.is_empty() && deferred_since.elapsed() >= DEFER) {
            run(std::mem::take(&mut deferred), &counts, &store).await;
        }
    }
}

/// The writes to run now, in the order they came: those waited on, each after any deferred write of
/// its key. The unwaited ones join `deferred`.
fn waited_first(jobs: Vec<Job>, deferred: &mut Vec<Job>) -> Vec<Job> {
    let mut now = Vec::with_capacity(jobs.len());
    for j in jobs {
        if j.unwaited {
            deferred.push(j);
            continue;
        }
        let key = j.write.key();
        if deferred.iter().any(|h| h.write.key() == key) {
            let (same, other): (Vec<Job>, Vec<Job>) = std::mem::take(deferred)
                .into_iter()
                .partition(|h| h.write.key() == key);
            *deferred = other;
            now.extend(same);
        }
        now.push(j);
    }
    now
}

/// One group on the lane's own connection, counted.
async fn run(mut jobs: Vec<Job>, counts: &Counts, store: &Store) {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_waited_write_goes_after_the_held_writes_of_its_key() {
        crate::ledger::with_scratch_ledger(|ledger| async move {
            let job = |key: &str, unwaited: bool| {
                let (mut j, _) = Job::new(&ledger, "bot", Prepared::Start(key.into()));
                j.unwaited = unwaited;
                j
            };
            let keys = |v: &[Job]| {
                v.iter()
                    .map(|j| format!("{}{}", j.write.key(), if j.unwaited { "?" } else { "" }))
                    .collect::<Vec<_>>()
            };
            let mut deferred = vec![job("a", true)];
            let came = vec![
                job("b", false),
                job("c", true),
                job("a", false),
                job("c", false),
            ];
            let now = waited_first(came, &mut deferred);
            assert_eq!(keys(&now), ["b", "a?", "a", "c?", "c"]);
            assert!(deferred.is_empty());
            // an unwaited write of another key stays deferred; the waited one goes
            let now = waited_first(vec![job("d", true), job("e", false)], &mut deferred);
            assert_eq!(
                (keys(&now), keys(&deferred)),
                (vec!["e".to_string()], vec!["d?".to_string()])
            );
        });
    }
}
