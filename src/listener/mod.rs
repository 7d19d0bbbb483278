//! Every listener's door (manual: Limits): the SSH console, the
//! HTTP API and the metrics each take at most so many connections at once, and so many from one
//! client address. A connection past either limit takes the place of the oldest connection
//! (of its address, or of all) that is of no use yet: an HTTP connection between requests, an
//! SSH connection not logged in. So a flood holds places only until someone with a request
//! comes, and one address's flood ends its own connections first. Where none is idle, the new
//! connection is closed at once. The accept loop
//! survives running out of handles: it backs off, says so once, and keeps serving what it
//! holds. The deadlines are the listeners' own: an SSH connection has `login_grace` to log in
//! ([`Watched`]), an HTTP request `header_timeout` for its headers and `body_timeout` for its
//! body ([`http`]).
//!
//! Rooms: `mod.rs` the door and its accept loop, `watched.rs` a connection its door can end and
//! whose deadline ends it, `http.rs` an axum router served through a door.

pub mod http;
mod watched;

use std::collections::{BTreeMap, HashMap};
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::net::{TcpListener, TcpStream};

pub use watched::{Kill, Watched};

use crate::config::LimitsConfig;
use crate::counters;

/// A door: how many connections it lets in at once, in all and from one address.
pub struct Door {
    /// `ssh`, `http` or `metrics`: the listener, as the metrics and the log name it.
    pub name: &'static str,
    max: usize,
    per_address: usize,
    /// Whether a connection past `max` may take the place of an idle one.
    makes_room: bool,
    open: Mutex<Open>,
    next: AtomicU64,
    /// Out of handles since the last accept: said once, until an accept succeeds again.
    starved: AtomicBool,
    /// When a refusal was last logged: a flood is one line a minute, not one per connection.
    last_said: Mutex<Option<Instant>>,
}

#[derive(Default)]
struct Open {
    total: usize,
    by_address: HashMap<IpAddr, usize>,
    /// Every connection in, the oldest first.
    live: BTreeMap<u64, Entry>,
}

/// A connection in: where from, what ends it, and whether it is busy.
struct Entry {
    address: IpAddr,
    kill: Arc<Kill>,
    busy: Arc<AtomicUsize>,
}

impl Entry {
    fn idle(&self) -> bool {
        !self.kill.killed() && self.busy.load(Ordering::SeqCst) == 0
    }
}

impl Open {
    /// Connections that stay (those ended and on their way out not counted), of `address` or of all.
    fn staying(&self, address: Option<IpAddr>) -> usize {
        self.live
            .values()
            .filter(|e| !e.kill.killed() && address.is_none_or(|a| e.address == a))
            .count()
    }

    /// Ends the oldest idle connection (of `address`, or of all): whether there was one.
    fn make_room(&self, address: Option<IpAddr>) -> bool {
        let oldest = self
            .live
            .values()
            .find(|e| e.idle() && address.is_none_or(|a| e.address == a));
        match oldest {
            Some(e) => {
                e.kill.kill();
                true
            }
            None => false,
        }
    }
}

/// A place behind a door, held for as long as its connection lives.
pub struct Pass {
    door: Arc<Door>,
    address: IpAddr,
    id: u64,
    kill: Arc<Kill>,
    busy: Arc<AtomicUsize>,
}

impl Pass {
    /// What ends this connection when its door makes room.
    pub fn kill(&self) -> Arc<Kill> {
        self.kill.clone()
    }

    /// Marks the connection busy (a request under way: its place is not taken) while the
    /// returned guard lives.
    pub fn busy(&self) -> Busy {
        self.busy.fetch_add(1, Ordering::SeqCst);
        Busy(self.busy.clone())
    }

    /// The counter [`Pass::busy`] keeps, for a task that outlives a borrow of the pass.
    pub fn busy_counter(&self) -> Arc<AtomicUsize> {
        self.busy.clone()
    }
}

/// A request under way on a connection (see [`Pass::busy`]).
pub struct Busy(Arc<AtomicUsize>);

impl Busy {
    /// Busy on the connection whose counter this is.
    pub fn on(counter: &Arc<AtomicUsize>) -> Busy {
        counter.fetch_add(1, Ordering::SeqCst);
        Busy(counter.clone())
    }
}

impl Drop for Busy {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

impl Drop for Pass {
    fn drop(&mut self) {
        let mut open = self.door.open.lock().unwrap_or_else(|e| e.into_inner());
        open.total = open.total.saturating_sub(1);
        open.live.remove(&self.id);
        if let Some(n) = open.by_address.get_mut(&self.address) {
            *n -= 1;
            if *n == 0 {
                open.by_address.remove(&self.address);
            }
        }
    }
}

impl Door {
    /// A door for `max` connections, `per_address` from one address; `makes_room`: one past
    /// `max` takes the place of the oldest that is not busy.
    pub fn new(name: &'static str, max: usize, per_address: usize, makes_room: bool) -> Arc<Door> {
        Arc::new(Door {
            name,
            max: max.max(1),
            per_address: per_address.max(1),
            makes_room,
            open: Mutex::default(),
            next: AtomicU64::new(0),
            starved: AtomicBool::new(false),
            last_said: Mutex::new(None),
        })
    }

    /// The most it lets in at once.
    pub fn max(&self) -> usize {
        self.max
    }

    /// How many it holds now.
    pub fn holds(&self) -> usize {
        self.open.lock().unwrap_or_else(|e| e.into_inner()).total
    }

    /// A place for a connection from `address`, or why not (`per_address`, `full`). At either
    /// limit the oldest idle connection (of that address, or of all) is ended to make room,
    /// where the door does, and the new one let in: the ended one leaves as soon as its task
    /// sees it.
    pub fn admit(self: &Arc<Self>, address: IpAddr) -> Result<Pass, &'static str> {
        let mut open = self.open.lock().unwrap_or_else(|e| e.into_inner());
        for (scope, limit, why) in [
            (Some(address), self.per_address, "per_address"),
            (None, self.max, "full"),
        ] {
            if open.staying(scope) < limit {
                continue;
            }
            if !(self.makes_room && open.make_room(scope)) {
                return Err(why);
            }
            counters::inc(counters::CONNECTIONS_REFUSED, &[self.name, "made_room"]);
        }
        *open.by_address.entry(address).or_default() += 1;
        open.total += 1;
        let id = self.next.fetch_add(1, Ordering::SeqCst);
        let (kill, busy) = (Arc::new(Kill::default()), Arc::new(AtomicUsize::new(0)));
        open.live.insert(
            id,
            Entry {
                address,
                kill: kill.clone(),
                busy: busy.clone(),
            },
        );
        Ok(Pass {
            door: self.clone(),
            address,
            id,
            kill,
            busy,
        })
    }

    /// Counts a connection closed before it was of use, and says so in the log at most once a
    /// minute per door.
    pub fn refused(&self, peer: SocketAddr, why: &'static str) {
        counters::inc(counters::CONNECTIONS_REFUSED, &[self.name, why]);
        let mut last = self.last_said.lock().unwrap_or_else(|e| e.into_inner());
        if last.is_none_or(|t| t.elapsed() >= Duration::from_secs(60)) {
            *last = Some(Instant::now());
            tracing::warn!(listener = self.name, %peer, why, max = self.max, per_address = self.per_address, "connections refused (said once a minute; settle_connections_refused_total counts them)");
        }
    }

    /// The next connection let in, with its place. Connections past the limits are closed at
    /// once; an accept that fails for want of handles (or memory) is tried again after a pause
    /// that grows to a second, and said once, while what is held keeps being served.
    pub async fn accept(self: &Arc<Self>, socket: &TcpListener) -> (TcpStream, SocketAddr, Pass) {
        let mut pause = Duration::from_millis(10);
        loop {
            match socket.accept().await {
                Ok((tcp, peer)) => {
                    pause = Duration::from_millis(10);
                    if self.starved.swap(false, Ordering::SeqCst) {
                        tracing::info!(listener = self.name, "accepting connections again");
                    }
                    match self.admit(peer.ip()) {
                        Ok(pass) => return (tcp, peer, pass),
                        Err(why) => {
                            self.refused(peer, why);
                            drop(tcp);
                        }
                    }
                }
                Err(e) if per_connection(&e) => {}
                Err(e) => {
                    if !self.starved.swap(true, Ordering::SeqCst) {
                        counters::inc(counters::CONNECTIONS_REFUSED, &[self.name, "no_handles"]);
                        tracing::warn!(listener = self.name, error = %e, "cannot accept connections (out of handles?): waiting, and serving what is open; raise LimitNOFILE or lower [limits] max_connections");
                    }
                    tokio::time::sleep(pause).await;
                    pause = (pause * 2).min(Duration::from_secs(1));
                }
            }
        }
    }
}

/// An accept error that concerns one connection only (it went before it was taken).
fn per_connection(e: &std::io::Error) -> bool {
    use std::io::ErrorKind::*;
    matches!(
        e.kind(),
        ConnectionAborted | ConnectionReset | ConnectionRefused | Interrupted | WouldBlock
    )
}

/// The doors of one process, sized so that together they never need more handles than the
/// process may open: each listener's `max_connections` is lowered, in the same proportion,
/// until they fit the handle limit less what the database, the log and the destinations need.
pub struct Doors {
    pub ssh: Arc<Door>,
    pub http: Arc<Door>,
    pub metrics: Arc<Door>,
    /// The SSH connections not yet logged in.
    pub startups: Arc<Door>,
}

/// Handles kept for everything but the listeners' connections: the database's pools, the log,
/// the host key, the sends of the dispatcher and the gateway.
const RESERVED: usize = 128;

/// The metrics listener takes at most this many connections: scrapers are few.
const METRICS_MAX: usize = 64;

impl Doors {
    /// The doors for `limits` within the handle limit `handles` (`None`: not known).
    pub fn new(limits: &LimitsConfig, handles: Option<u64>) -> Doors {
        let per_address = limits.max_connections_per_address;
        let mut ssh = limits.max_connections;
        let mut http = limits.max_connections;
        let mut metrics = METRICS_MAX.min(limits.max_connections);
        if let Some(h) = handles {
            // an HTTP connection may hold a second handle: the gateway's request onwards
            let wanted = ssh + 2 * http + metrics;
            let room = (h as usize).saturating_sub(RESERVED).max(8);
            if wanted > room {
                let share = |n: usize| (n * room / wanted).max(1);
                (ssh, http, metrics) = (share(ssh), share(http), share(metrics));
                tracing::warn!(
                    handles = h,
                    ssh,
                    http,
                    metrics,
                    "the handle limit holds fewer connections than [limits] max_connections: each listener takes this many (raise LimitNOFILE to take more)"
                );
            }
        }
        Doors {
            // a logged-in operator's connection is never ended for another
            ssh: Door::new("ssh", ssh, per_address, false),
            http: Door::new("http", http, per_address, true),
            metrics: Door::new("metrics", metrics, per_address, true),
            startups: Door::new(
                "ssh",
                limits.max_startups.min(ssh),
                limits.max_startups_per_address,
                true,
            ),
        }
    }

    /// The doors for `limits` within this process's own handle limit.
    pub fn for_this_process(limits: &LimitsConfig) -> Doors {
        Doors::new(limits, handle_limit())
    }
}

/// This process's limit on open handles (its soft `RLIMIT_NOFILE`), where it can be read.
pub fn handle_limit() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/self/limits").ok()?;
    let line = text.lines().find(|l| l.starts_with("Max open files"))?;
    line.split_whitespace().nth(3)?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_door_holds_its_limits_and_frees_a_place_when_a_connection_goes() {
        let door = Door::new("ssh", 3, 2, false);
        let a: IpAddr = "10.0.0.1".parse().unwrap();
        let b: IpAddr = "10.0.0.2".parse().unwrap();
        let p1 = door.admit(a).unwrap();
        let _p2 = door.admit(a).unwrap();
        assert_eq!(door.admit(a).err(), Some("per_address"));
        let _p3 = door.admit(b).unwrap();
        assert_eq!(door.admit(b).err(), Some("full"));
        drop(p1);
        assert_eq!(door.holds(), 2);
        assert!(door.admit(a).is_ok(), "a place freed is taken again");
    }

    #[test]
    fn an_address_past_its_limit_ends_its_own_idle_connections_first() {
        let door = Door::new("http", 10, 2, true);
        let (a, b): (IpAddr, IpAddr) = ("10.0.0.1".parse().unwrap(), "10.0.0.2".parse().unwrap());
        let theirs = door.admit(b).unwrap();
        let first = door.admit(a).unwrap();
        let second = door.admit(a).unwrap();
        let _working = second.busy();
        let _third = door.admit(a).unwrap();
        assert!(first.kill().killed(), "its own oldest idle one");
        assert!(!second.kill().killed() && !theirs.kill().killed());
        let _also = _third.busy();
        assert_eq!(
            door.admit(a).err(),
            Some("per_address"),
            "all of its own busy"
        );
    }

    #[test]
    fn a_full_door_ends_the_oldest_idle_connection_never_a_busy_one() {
        let door = Door::new("http", 2, 10, true);
        let a: IpAddr = "10.0.0.1".parse().unwrap();
        let first = door.admit(a).unwrap();
        let _working = first.busy();
        let second = door.admit(a).unwrap();
        let third = door.admit(a).unwrap();
        assert!(
            !first.kill().killed(),
            "a request under way keeps its place"
        );
        assert!(second.kill().killed(), "the oldest idle one makes room");
        assert!(!third.kill().killed());
        let _also_working = third.busy();
        assert_eq!(
            door.admit(a).err(),
            Some("full"),
            "nothing idle is left to end"
        );
        drop(second);
        assert_eq!(door.holds(), 2);
    }

    #[test]
    fn the_doors_fit_the_handle_limit() {
        let limits = LimitsConfig::default();
        let roomy = Doors::new(&limits, Some(65_536));
        assert_eq!(roomy.ssh.max(), 512);
        assert_eq!(roomy.http.max(), 512);
        let tight = Doors::new(&limits, Some(1024));
        let need = tight.ssh.max() + 2 * tight.http.max() + tight.metrics.max();
        assert!(need <= 1024 - RESERVED, "{need}");
        assert!(tight.ssh.max() >= 100 && tight.http.max() >= 100);
        assert!(tight.startups.max() <= tight.ssh.max());
        assert!(handle_limit().is_some_and(|n| n > 0), "read on Linux");
    }
}
