//! Opening a store: the pool for a URL and a profile, its schema brought up to date.

use sqlx::postgres::{PgConnectOptions, PgPoolOptions};

use super::bouncer::name_no_statements;
use super::conn::{Pool, Store};
use super::driver::pg_error;
use super::hosts::{self, Hosts, Wants};
use super::open::{self, Backend, Profile, display_url, prepare_sqlite_file, sqlite_file};
use super::{migrate, sqlite};
use crate::error::{Error, Result};

impl Store {
    /// Opens the database and applies the embedded migrations.
    pub async fn open(url: &str) -> Result<Store> {
        Store::open_with(url, Profile::Batch).await
    }

    /// Opens the database for a process that uses it as `profile` says, and migrates it.
    pub async fn open_with(url: &str, profile: Profile) -> Result<Store> {
        let backend = Backend::of_url(url)?;
        let shown_url = display_url(url);
        let cannot = |e| pg_error(&format!("cannot open database {shown_url}"), e);
        let max = profile.connections(backend);
        let (url, bouncer) = match backend {
            Backend::Postgres => open::pg_url(url)?,
            Backend::Sqlite => (url.to_string(), false),
        };
        let url = url.as_str();
        let mut hosts = None;
        let pool = match backend {
            Backend::Sqlite if url.contains(":memory:") => {
                return Err(Error::Invalid(
                    "settle keeps its ledger in a file: use sqlite://FILE".into(),
                ));
            }
            Backend::Sqlite => {
                let (path, read_only) = sqlite_file(url);
                prepare_sqlite_file(&path, &shown_url, !read_only)?;
                let pool = sqlite::Pool::new(
                    &path,
                    profile.sqlite_cache(),
                    read_only,
                    max,
                    profile.acquire_timeout(),
                );
                // the first connection says at once whether the file can be used
                drop(pool.acquire().await.map_err(|e| {
                    Error::Unavailable(format!("cannot open database {shown_url}: {e}"))
                })?);
                Pool::Sqlite(pool)
            }
            Backend::Postgres => {
                let (urls, wants) = hosts::split(url)?;
                let mut each = Vec::new();
                for url in &urls {
                    // settle stores no floats, and a stock PgBouncer refuses this parameter
                    let mut options = url
                        .parse::<PgConnectOptions>()
                        .map_err(cannot)?
                        .extra_float_digits(None);
                    if bouncer {
                        options = options.statement_cache_capacity(0);
                    }
                    each.push(options);
                }
                if bouncer {
                    name_no_statements();
                }
                let (options, pool, found) = match each.len() > 1 || wants == Wants::ReadWrite {
                    true => {
                        let found = Hosts::new(each, wants);
                        let i = found.find().await.map_err(|why| {
                            Error::Unavailable(format!(
                                "cannot open database {shown_url}: no host would do: {why}"
                            ))
                        })?;
                        found.start_at(i);
                        (found.current(), found.pool_options(), Some(found))
                    }
                    false => (each.remove(0), PgPoolOptions::new(), None),
                };
                let pool = match bouncer {
                    true => pool.after_release(|conn, _| Box::pin(ended_alone(conn))),
                    false => pool,
                };
                let pool = pool
                    .max_connections(max)
                    .idle_timeout(profile.idle_timeout())
                    // a server connection may have died since it was last used
                    .test_before_acquire(true)
                    .acquire_timeout(profile.acquire_timeout())
                    .connect_with(options)
                    .await
                    .map_err(cannot)?;
                if let Some(found) = &found {
                    found.keep(&pool);
                }
                hosts = found;
                Pool::Postgres(pool)
            }
        };
        let store = Store {
            pool,
            shown_url,
            hosts,
            replica: None,
            bouncer,
        };
        migrate::migrate(&store).await?;
        Ok(store)
    }
}

/// Through PgBouncer in transaction pooling mode, a connection going back to the pool first sends
/// what its dropped transaction left queued (the `ROLLBACK` a read's pinning transaction or a
/// refused write leaves unsent) and waits for its answer, before the pool's own check sends
/// its `Sync`. Sent together, PgBouncer 1.18 hands the server connection back at the first
/// answer and the second reaches whichever client takes that server next ("expected
/// ParseComplete, got CommandComplete" there, seen once under a loaded test run).
async fn ended_alone(conn: &mut sqlx::PgConnection) -> std::result::Result<bool, sqlx::Error> {
    use sqlx::Connection;
    conn.flush().await?;
    Ok(true)
}
