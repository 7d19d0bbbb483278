//! The `Ledger` handle: the database, the config, the redactor, the clock, and who acts through
//! it (a session of `settle serve`, an automation's workflows). Every face of the ledger is a view
//! of one handle (`faces.rs`).

use std::sync::Arc;

use chrono::{DateTime, Utc};

use super::scrubbers::Scrubbers;
use crate::config::Config;
use crate::domain::Redactor;
use crate::error::Result;
use crate::store::{self, Store};

type Clock = Arc<dyn Fn() -> DateTime<Utc> + Send + Sync>;

#[derive(Clone)]
pub struct Ledger {
    pub(super) store: Store,
    pub(super) config: Arc<Config>,
    pub(super) redactor: Arc<Redactor>,
    /// What scrubs the texts of operations already shown, by fingerprint (see `read.rs`).
    pub(super) scrubbers: Arc<Scrubbers>,
    pub(super) clock: Clock,
    /// Who acts through this handle when it is a session of `settle serve` (manual: Running settle for a team): their role
    /// is enforced by the rules, and every event names them and their key. `None`: the local
    /// CLI, console or an automation, acting as `lead` under the name it gives.
    pub(super) session: Option<Arc<crate::domain::Identity>>,
    /// The workflows an automation's handle may write and read (manual: The HTTP API); `None`: all.
    pub(super) scope: Option<Arc<[String]>>,
}

impl std::fmt::Debug for Ledger {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ledger")
            .field("db", &self.store.shown_url())
            .finish()
    }
}

impl Ledger {
    /// Opens (and migrates) the database at `url`.
    pub async fn open(url: &str, config: Config) -> Result<Ledger> {
        Ledger::open_with(url, config, store::Profile::Batch).await
    }

    /// This handle on another store of the same database (a writer's own connection).
    pub(crate) fn on_store(&self, store: Store) -> Ledger {
        Ledger {
            store,
            ..self.clone()
        }
    }

    /// This handle reading the primary only, never a replica (the HTTP API: an automation reads
    /// what it just wrote).
    pub fn primary_only(&self) -> Ledger {
        self.on_store(store::replica::without_replica(&self.store))
    }

    /// Opens the ledger for the console: a long-running reader whose memory stays flat.
    pub async fn open_console(url: &str, config: Config) -> Result<Ledger> {
        Ledger::open_with(url, config, store::Profile::Console).await
    }

    /// Opens the ledger for `settle serve`: many consoles on one pool.
    pub async fn open_server(url: &str, config: Config) -> Result<Ledger> {
        Ledger::open_with(url, config, store::Profile::Server).await
    }

    pub(super) async fn open_with(
        url: &str,
        config: Config,
        profile: store::Profile,
    ) -> Result<Ledger> {
        let mut store = Store::open_with(url, profile).await?;
        if let Some(read) = &config.read_db {
            store = store::replica::with_replica(store, read, profile).await?;
        }
        Ok(Ledger {
            store,
            redactor: Arc::new(config.redactor()),
            scrubbers: Arc::default(),
            config: Arc::new(config),
            clock: Arc::new(Utc::now),
            session: None,
            scope: None,
        })
    }

    /// This ledger as a session of `settle serve` acting for `who` (manual: Running settle for a team): the rules enforce
    /// their role, actions must name them, and every event of theirs holds their key's
    /// fingerprint.
    pub fn for_session(&self, who: crate::domain::Identity) -> Ledger {
        Ledger {
            session: Some(Arc::new(who)),
            ..self.clone()
        }
    }

    /// What the actor of this handle may do: a session's role, else `lead` (manual: Running settle for a team: whoever
    /// holds the database credentials).
    pub fn role(&self) -> crate::domain::Role {
        self.session
            .as_ref()
            .map_or(crate::domain::Role::Lead, |s| s.role)
    }

    /// Replaces the clock (the demo builds a week of history; tests move time).
    pub fn with_clock(
        mut self,
        clock: impl Fn() -> DateTime<Utc> + Send + Sync + 'static,
    ) -> Ledger {
        self.clock = Arc::new(clock);
        self
    }

    pub fn now(&self) -> DateTime<Utc> {
        (self.clock)()
    }

    pub fn config(&self) -> &Config {
        &self.config
    }

    /// The database URL with any password masked.
    pub fn database(&self) -> &str {
        self.store.shown_url()
    }

    pub fn backend(&self) -> store::Backend {
        self.store.backend()
    }

    pub async fn close(&self) {
        self.store.close().await;
    }

    /// Raw row counts, for tests and the benchmark: (operations, attempts, events).
    pub async fn counts(&self) -> Result<(i64, i64, i64)> {
        self.store.count_rows().await
    }
}
