//! A hot standby for what is read most and needed least to the second (`--read-db`, `read_db`):
//! the console's pages and counts, the review, `report`, `stats` and the metrics. Writes, and
//! what a person reads in the few seconds after their own action, go to the primary, so that
//! nobody sees their action undone by the replica's lag.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::conn::{Replica, Store};
use super::open::{Backend, Profile};
use super::sql::{Stmt, get};
use crate::error::Result;

/// How long after a person's action their reads go to the primary, beyond the lag last seen.
const AFTER_ACTION: Duration = Duration::from_secs(5);

/// This store, reading its lists, counts and reviews from the PostgreSQL hot standby at
/// `url` from now on. A replica that cannot be opened is logged and read around: the
/// primary answers instead.
pub(crate) async fn with_replica(mut store: Store, url: &str, profile: Profile) -> Result<Store> {
    if Backend::of_url(url)? != Backend::Postgres || store.backend() != Backend::Postgres {
        return Err(crate::error::Error::Invalid(
            "a replica to read from (read_db) is a PostgreSQL hot standby of a PostgreSQL ledger"
                .into(),
        ));
    }
    match Store::open_with(url, profile).await {
        Ok(replica) => {
            store.replica = Some(Arc::new(Replica {
                store: replica,
                primary_until: Mutex::new(None),
                lag: Mutex::new(Duration::ZERO),
            }))
        }
        Err(e) => tracing::warn!(error = %e, "the replica cannot be read: reading the primary"),
    }
    Ok(store)
}

/// This store without its replica: every read on the primary.
pub(crate) fn without_replica(store: &Store) -> Store {
    Store {
        replica: None,
        ..store.clone()
    }
}

/// Where the lists, counts and reviews are read: the replica, unless a person acted here a
/// moment ago (or there is none).
pub(super) fn reads(store: &Store) -> &Store {
    match &store.replica {
        Some(r)
            if r.primary_until
                .lock()
                .unwrap()
                .is_none_or(|t| Instant::now() >= t) =>
        {
            &r.store
        }
        _ => store,
    }
}

/// A person acted: what they read next comes from the primary, until the replica has had
/// time to replay it (a few seconds beyond its lag last seen).
pub(crate) fn acted(store: &Store) {
    if let Some(r) = &store.replica {
        let lag = *r.lag.lock().unwrap();
        *r.primary_until.lock().unwrap() = Some(Instant::now() + AFTER_ACTION + lag);
    }
}

/// How far the replica is behind the primary (`None`: no replica): the time since the last
/// transaction it replayed, while it has received more than it replayed; nothing while it is
/// caught up.
pub(crate) async fn lag(store: &Store) -> Result<Option<Duration>> {
    let Some(r) = &store.replica else {
        return Ok(None);
    };
    let stmt = Stmt::new(
        "SELECT CAST(CASE WHEN NOT pg_is_in_recovery() \
                 OR pg_last_wal_receive_lsn() = pg_last_wal_replay_lsn() THEN 0 \
               ELSE COALESCE(EXTRACT(EPOCH FROM now() - pg_last_xact_replay_timestamp()) * 1000, 0) \
             END AS BIGINT) AS ms",
        Vec::new(),
    );
    let ms: i64 = stmt
        .one(r.store.conn().await?.db(), |row| get(row, "ms"))
        .await?;
    let lag = Duration::from_millis(ms.max(0) as u64);
    *r.lag.lock().unwrap() = lag;
    Ok(Some(lag))
}
