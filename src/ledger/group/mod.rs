//! Concurrent writes grouped into shared transactions (manual: The HTTP API), as a dispatcher's round groups
//! its sends: the HTTP API hands each record, start and attempt report to a [`Writer`], which
//! runs whatever has queued while the last group committed as one transaction and answers each
//! only after that commit. Nothing is acknowledged before it is in the ledger (a write handed
//! over with [`Writer::queue`] is one nobody waits on: its answer too comes after its commit).
//!
//! Design (the lane itself, its groups and their order: `lane.rs`):
//! - Lanes (a thread each, see [`lane_thread`]; one on either backend by default, see
//!   `api::default_lanes`), a write going to the lane its key hashes to: two writes of one
//!   key meet in one lane, in the order they came, and never in two transactions at once. The
//!   lanes share no operation's row, so their groups do not wait for each other's row locks.
//! - A lane takes the first write that comes, and then every write already queued (up to
//!   [`GROUP`]): no timer, so a lone write waits for nothing, and under load a commit is shared by
//!   as many writes as arrived while the last one ran. Writes someone waits on go before those
//!   nobody waits on, never before an earlier write of their own key.
//! - Each write runs on the rules of the single call (`record_in`, `start_in`, `act_in`) inside
//!   the group's transaction. A refusal concerns that write alone (the rules refuse before they
//!   write). Anything else (a lost compare-and-set, a value the database will not store, a
//!   deadlock between lanes) rolls the group back, and each of its writes is then run on its own,
//!   as the single call would run it.
//! - A commit that fails leaves each write's outcome unknown: every write of that group is told
//!   the database is unavailable, never retried here (the caller repeats it with its key, and the
//!   rules answer as for any repeat).
//!
//! Rooms: `lane.rs` a lane's thread and its groups' transactions, `writes.rs` one caller's writes
//! judged as one batch.

use std::hash::{Hash, Hasher};
use std::sync::Arc;
use std::sync::atomic::Ordering;

use tokio::sync::{mpsc, oneshot};

mod lane;
mod writes;

pub use lane::GROUP;
pub use writes::{Answered, Write, Written};

use super::Ledger;
use crate::error::{Error, Result};
use lane::{Counts, Job, lane_thread};
use writes::Prepared;

/// Hands writes to the lanes; cheap to clone. The lanes end when every clone is dropped.
#[derive(Clone)]
pub struct Writer {
    lanes: Vec<mpsc::Sender<Job>>,
    counts: Arc<Counts>,
    /// Keys with a write nobody waits on still in a lane ([`Writer::queue`]), and how many.
    unsettled: Unsettled,
}

type Unsettled = Arc<std::sync::Mutex<std::collections::HashMap<String, usize>>>;

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
        Writer {
            lanes,
            counts,
            unsettled: Unsettled::default(),
        }
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
        self.hand(ledger, actor, write, false)
            .await?
            .answered()
            .await
    }

    /// `write` handed to its lane, for a caller that does not wait on it (the gateway's outcome
    /// of an answer already given): from here on, every later write of its key is judged after
    /// it (one lane a key, in order), while writes of other keys that are waited on may go first.
    /// Its answer comes after its group committed.
    pub async fn queue(&self, ledger: &Ledger, actor: &str, write: Write) -> Result<Queued> {
        self.hand(ledger, actor, write, true).await
    }

    async fn hand(
        &self,
        ledger: &Ledger,
        actor: &str,
        write: Write,
        unwaited: bool,
    ) -> Result<Queued> {
        let (lane, mut job, answer) = self.job(ledger, actor, write)?;
        job.unwaited = unwaited;
        let guard = unwaited.then(|| Settling::new(&self.unsettled, job.key()));
        self.lanes[lane].send(job).await.map_err(|_| stopped())?;
        self.counts.queued.fetch_add(1, Ordering::Relaxed);
        Ok(Queued(answer, guard))
    }

    /// Waits, at most `limit`, until no write nobody waits on is left in a lane for `key`:
    /// what a read of that key through the API does first, so that it reads the outcome the
    /// gateway already answered, not the attempt still in flight.
    pub async fn settled(&self, key: &str, limit: std::time::Duration) {
        let until = tokio::time::Instant::now() + limit;
        while tokio::time::Instant::now() < until
            && self
                .unsettled
                .lock()
                .map(|m| m.contains_key(key))
                .unwrap_or(false)
        {
            tokio::time::sleep(std::time::Duration::from_millis(1)).await;
        }
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
        super::checks::check_name("actor", actor, false)?;
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
                super::checks::check_report(&report)?;
                Prepared::Attempt(report)
            }
        };
        let (job, answer) = Job::new(ledger, actor, write);
        Ok((lane, job, answer))
    }
}

/// A write in its lane's queue ([`Writer::queue`]).
pub struct Queued(oneshot::Receiver<Result<Answered>>, Option<Settling>);

impl Queued {
    /// The write's answer, once its group committed.
    pub async fn answered(self) -> Result<Answered> {
        let answer = self.0.await.map_err(|_| stopped())?;
        drop(self.1);
        answer
    }
}

/// A key's count among the unsettled while its write nobody waits on is in a lane.
struct Settling {
    unsettled: Unsettled,
    key: String,
}

impl Settling {
    fn new(unsettled: &Unsettled, key: &str) -> Settling {
        if let Ok(mut m) = unsettled.lock() {
            *m.entry(key.to_string()).or_default() += 1;
        }
        Settling {
            unsettled: unsettled.clone(),
            key: key.to_string(),
        }
    }
}

impl Drop for Settling {
    fn drop(&mut self) {
        if let Ok(mut m) = self.unsettled.lock()
            && let Some(n) = m.get_mut(&self.key)
        {
            *n -= 1;
            if *n == 0 {
                m.remove(&self.key);
            }
        }
    }
}

fn stopped() -> Error {
    Error::Unavailable("the ledger's writer stopped".into())
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::AtomicBool;

    use super::*;

    #[test]
    fn a_read_waits_for_the_unwaited_write_of_its_key() {
        crate::ledger::with_scratch_ledger(|ledger| async move {
            let writer = Writer::new(&ledger, 1);
            let guard = Settling::new(&writer.unsettled, "k-1");
            let committed = Arc::new(AtomicBool::new(false));
            let c = committed.clone();
            tokio::spawn(async move {
                tokio::time::sleep(std::time::Duration::from_millis(30)).await;
                c.store(true, Ordering::SeqCst);
                drop(guard);
            });
            writer
                .settled("k-1", std::time::Duration::from_secs(10))
                .await;
            assert!(committed.load(Ordering::SeqCst), "read before the write");
            assert!(writer.unsettled.lock().unwrap().is_empty());
        });
    }
}
