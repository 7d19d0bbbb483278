//! What every connection of the server shares, and the command runner it is handed.

use std::sync::{Arc, RwLock};
use std::time::Duration;

use tokio::sync::watch;

use crate::domain::Identity;
use crate::ledger::Ledger;
use crate::serve::identity::Operators;
use crate::serve::sessions::Sessions;

/// What an `exec` request runs (`ssh HOST COMMAND`): one reading command as the key's operator,
/// its output written through [`crate::out`]; it returns the exit status. Whoever starts the
/// server hands it in, so that the server knows nothing of how commands are read.
pub type Exec = Arc<
    dyn Fn(
            Ledger,
            Identity,
            String,
        ) -> std::pin::Pin<Box<dyn std::future::Future<Output = i32> + Send>>
        + Send
        + Sync,
>;

/// What every connection shares.
pub(super) struct Shared {
    pub(super) ledger: Ledger,
    pub(super) operators: RwLock<Arc<Operators>>,
    pub(super) sessions: Arc<Sessions>,
    pub(super) changes: watch::Receiver<u64>,
    pub(super) limits: crate::serve::sessions::SessionLimits,
    pub(super) idle: Duration,
    pub(super) exec: Exec,
}

impl Shared {
    pub(super) fn operators(&self) -> Arc<Operators> {
        self.operators
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }
}
