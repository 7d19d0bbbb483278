//! PostgreSQL on more than one host: libpq's multi-host URL
//! (`postgres://h1:5432,h2:5432/settle?target_session_attrs=read-write`) and finding the writable
//! host again after a failover, without a restart.
//!
//! The driver takes one host, so the URL is split into one set of options per host, in order.
//! Opening tries them in turn and keeps the first that takes writes (when the URL asks for
//! `read-write` or `primary`, which a URL of more than one host does unless it says `any`); every
//! new connection is checked the same way, so a host that became a standby is refused at once.
//! When a connection cannot be had, or takes more than a second to come, the hosts are tried
//! again in the background (one search at a time, every half second until one would do), and
//! every pool of the process is pointed at the writable one found: a wait for a connection that
//! is still going on then reaches the new primary, and a caller that gave up reports the outage as
//! before and reaches it at its next try (a dispatcher's round, an automation's retry).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use sqlx::postgres::{PgConnectOptions, PgPool, PgPoolOptions};
use sqlx::{ConnectOptions, Connection};

use crate::error::{Error, Result};

/// How long one host is given to answer while the hosts are searched.
const PROBE: Duration = Duration::from_secs(2);
/// How often the hosts are tried while none would do.
const AGAIN: Duration = Duration::from_millis(500);
/// How long a search goes on while no host would do.
const LOOK: Duration = Duration::from_secs(30);
/// How long a connection may take before the hosts are searched (while the wait goes on).
pub(super) const SLOW: Duration = Duration::from_secs(1);

/// Which session a URL asks for (`target_session_attrs`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Wants {
    Any,
    ReadWrite,
}

/// A PostgreSQL URL split into one URL per host (as the driver takes it), and what it asks of
/// the host: `read-write` for a list of hosts unless it says `any`.
pub(super) fn split(url: &str) -> Result<(Vec<String>, Wants)> {
    let bad = |why: &str| {
        Error::Invalid(format!(
            "database URL {}: {why}",
            super::open::display_url(url)
        ))
    };
    let (scheme, rest) = url.split_once("://").ok_or_else(|| bad("no host"))?;
    let end = rest.find(['/', '?']).unwrap_or(rest.len());
    let (authority, tail) = rest.split_at(end);
    let (user, hosts) = match authority.rfind('@') {
        Some(at) => (&authority[..=at], &authority[at + 1..]),
        None => ("", authority),
    };
    let (tail, wants) = take_wants(tail).map_err(|w| {
        bad(&format!(
            "target_session_attrs={} is not one settle knows: use read-write, primary or any",
            crate::domain::escape_text(&w)
        ))
    })?;
    let list: Vec<&str> = hosts.split(',').collect();
    // one host may be empty (a Unix socket named by `?host=`); in a list, none may
    if list.len() > 1 && list.iter().any(|h| h.is_empty() || h.starts_with(':')) {
        return Err(bad("a host in its list is empty"));
    }
    let wants = wants.unwrap_or(match list.len() {
        1 => Wants::Any,
        _ => Wants::ReadWrite,
    });
    let urls = list
        .iter()
        .map(|h| format!("{scheme}://{user}{h}{tail}"))
        .collect();
    Ok((urls, wants))
}

/// The URL's tail without `target_session_attrs`, and what that said.
fn take_wants(tail: &str) -> std::result::Result<(String, Option<Wants>), String> {
    let (tail, value) = super::open::take_param(tail, "target_session_attrs");
    let wants = match value {
        None => None,
        Some("read-write" | "primary") => Some(Wants::ReadWrite),
        Some("any") => Some(Wants::Any),
        Some(other) => return Err(other.to_string()),
    };
    Ok((tail, wants))
}

/// The hosts of a URL with more than one, or one that asks for a writable host, shared by every
/// pool of the process that reaches them.
#[derive(Debug)]
pub(crate) struct Hosts {
    options: Vec<PgConnectOptions>,
    wants: Wants,
    /// The host the pools connect to.
    current: AtomicUsize,
    pools: Mutex<Vec<PgPool>>,
    /// When the last search began (`None`: one is running).
    searched: Mutex<Option<Instant>>,
}

impl Hosts {
    pub(super) fn new(options: Vec<PgConnectOptions>, wants: Wants) -> Arc<Hosts> {
        Arc::new(Hosts {
            options,
            wants,
            current: AtomicUsize::new(0),
            pools: Mutex::new(Vec::new()),
            searched: Mutex::new(Some(Instant::now() - AGAIN)),
        })
    }

    /// Starts at host `i` (found when the store opened).
    pub(super) fn start_at(&self, i: usize) {
        self.current.store(i, Ordering::SeqCst);
    }

    /// The options of the host the pools connect to.
    pub(super) fn current(&self) -> PgConnectOptions {
        self.options[self.current.load(Ordering::SeqCst)].clone()
    }

    /// Pool options that refuse a connection to a host that does not take writes, when that is
    /// asked.
    pub(super) fn pool_options(&self) -> PgPoolOptions {
        let options = PgPoolOptions::new();
        match self.wants {
            Wants::Any => options,
            Wants::ReadWrite => options.after_connect(|conn, _| {
                Box::pin(async move {
                    match takes_writes(conn).await? {
                        true => Ok(()),
                        false => Err(sqlx::Error::Protocol(
                            "the host does not take writes (a standby?)".into(),
                        )),
                    }
                })
            }),
        }
    }

    /// Pointed at the writable host from now on, as long as this process lives.
    pub(super) fn keep(&self, pool: &PgPool) {
        self.pools.lock().unwrap().push(pool.clone());
    }

    /// Tries the hosts in order from the first until one answers (and takes writes, when asked):
    /// its index, or why none would do.
    pub(super) async fn find(&self) -> std::result::Result<usize, String> {
        let mut why = Vec::new();
        for (i, options) in self.options.iter().enumerate() {
            let host = format!("{}:{}", options.get_host(), options.get_port());
            let tried = tokio::time::timeout(PROBE, async {
                let mut conn = options.clone().connect().await?;
                let ok = match self.wants {
                    Wants::Any => true,
                    Wants::ReadWrite => takes_writes(&mut conn).await?,
                };
                let _ = conn.close().await;
                Ok::<_, sqlx::Error>(ok)
            })
            .await;
            match tried {
                Ok(Ok(true)) => return Ok(i),
                Ok(Ok(false)) => why.push(format!("{host} takes no writes")),
                Ok(Err(e)) => why.push(format!("{host}: {}", one_line(&e.to_string()))),
                Err(_) => why.push(format!("{host}: no answer in {}s", PROBE.as_secs())),
            }
        }
        Err(why.join("; "))
    }

    /// Points every pool at host `i`.
    pub(super) fn point_at(&self, i: usize) {
        if self.current.swap(i, Ordering::SeqCst) == i {
            return;
        }
        let options = &self.options[i];
        tracing::warn!(
            host = %format!("{}:{}", options.get_host(), options.get_port()),
            "database: the writable host moved; connecting there"
        );
        for pool in self.pools.lock().unwrap().iter() {
            pool.set_connect_options(options.clone());
        }
    }

    /// A connection could not be had, or is slow to come: search the hosts in the background
    /// until one would do (for up to half a minute, every half second), unless a search is
    /// running or one ended less than a second ago.
    pub(super) fn search(self: &Arc<Self>) {
        {
            let mut searched = self.searched.lock().unwrap();
            match *searched {
                Some(at) if at.elapsed() >= AGAIN * 2 => *searched = None,
                _ => return,
            }
        }
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            *self.searched.lock().unwrap() = Some(Instant::now());
            return;
        };
        let hosts = Arc::clone(self);
        runtime.spawn(async move {
            let end = Instant::now() + LOOK;
            loop {
                match hosts.find().await {
                    Ok(i) => {
                        hosts.point_at(i);
                        break;
                    }
                    Err(_) if Instant::now() < end => tokio::time::sleep(AGAIN).await,
                    Err(why) => {
                        tracing::warn!(error = %why, "database: no host would do");
                        break;
                    }
                }
            }
            *hosts.searched.lock().unwrap() = Some(Instant::now());
        });
    }
}

/// Whether this connection's host takes writes: neither a standby in recovery nor read-only by
/// default (what libpq's `read-write` asks).
async fn takes_writes(conn: &mut sqlx::PgConnection) -> std::result::Result<bool, sqlx::Error> {
    sqlx::query_scalar::<_, bool>(
        "SELECT NOT pg_is_in_recovery() AND current_setting('transaction_read_only') = 'off'",
    )
    .persistent(false)
    .fetch_one(conn)
    .await
}

fn one_line(text: &str) -> String {
    crate::domain::redact::redact_text(text).replace('\n', " ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_list_of_hosts_is_one_url_each_and_asks_for_the_writable_one() {
        let (urls, wants) =
            split("postgres://app:pw@h1:5432,h2:5433/settle?sslmode=disable").unwrap();
        assert_eq!(
            urls,
            [
                "postgres://app:pw@h1:5432/settle?sslmode=disable",
                "postgres://app:pw@h2:5433/settle?sslmode=disable"
            ]
        );
        assert_eq!(wants, Wants::ReadWrite);
        let (urls, wants) =
            split("postgres://h1,h2/settle?target_session_attrs=any&application_name=x").unwrap();
        assert_eq!(
            urls,
            [
                "postgres://h1/settle?application_name=x",
                "postgres://h2/settle?application_name=x"
            ]
        );
        assert_eq!(wants, Wants::Any);
    }

    #[test]
    fn one_host_asks_for_nothing_unless_told() {
        let (urls, _) = split("postgres:///settle?host=/var/run/postgresql").unwrap();
        assert_eq!(urls, ["postgres:///settle?host=/var/run/postgresql"]);
        let (urls, wants) = split("postgres://u@db/settle").unwrap();
        assert_eq!(
            (urls.as_slice(), wants),
            (&["postgres://u@db/settle".to_string()][..], Wants::Any)
        );
        let (urls, wants) = split("postgres://u@db/settle?target_session_attrs=primary").unwrap();
        assert_eq!(
            (urls[0].as_str(), wants),
            ("postgres://u@db/settle", Wants::ReadWrite)
        );
    }

    #[test]
    fn what_settle_cannot_follow_is_one_clear_line() {
        let e = split("postgres://a,b/s?target_session_attrs=prefer-standby").unwrap_err();
        assert_eq!(e.exit_code(), 2);
        assert!(e.to_string().contains("prefer-standby"), "{e}");
        let e = split("postgres://u:secret@a,,b/s").unwrap_err();
        assert!(
            e.to_string().contains("empty") && !e.to_string().contains("secret"),
            "{e}"
        );
    }
}
