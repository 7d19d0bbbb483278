//! Every open session: the limit, the metrics gauge, and the end of a removed operator's.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use tokio::sync::mpsc::{UnboundedSender, WeakUnboundedSender};

use crate::console::Input;
use crate::domain::{Identity, Role};
use crate::serve::Operators;

/// The open sessions: consoles (which can be told to end) and exec requests.
#[derive(Default)]
pub struct Sessions {
    pub(super) open: Mutex<HashMap<u64, SessionEntry>>,
    pub(super) next: AtomicU64,
    /// The count, for `settle_console_sessions`.
    pub count: Arc<AtomicUsize>,
}

pub(super) struct SessionEntry {
    pub(super) fingerprint: String,
    pub(super) name: String,
    pub(super) role: Role,
    /// Weak: only the connection's handler keeps a console's input open, so a dropped
    /// connection ends its console at once, whatever this list holds.
    pub(super) input: Option<WeakUnboundedSender<Input>>,
}

/// A place in [`Sessions`]; dropping it frees the place.
pub(super) struct SessionGuard {
    pub(super) sessions: Arc<Sessions>,
    pub(super) id: u64,
}

impl Drop for SessionGuard {
    fn drop(&mut self) {
        let mut open = self.sessions.open.lock().unwrap_or_else(|e| e.into_inner());
        if open.remove(&self.id).is_some() {
            self.sessions.count.store(open.len(), Ordering::SeqCst);
        }
    }
}

impl Sessions {
    /// A place for a session of `who`, unless `limit` are open.
    pub(super) fn enter(
        self: &Arc<Self>,
        who: &Identity,
        input: Option<UnboundedSender<Input>>,
        limit: usize,
    ) -> Option<SessionGuard> {
        let mut open = self.open.lock().unwrap_or_else(|e| e.into_inner());
        if open.len() >= limit {
            return None;
        }
        let id = self.next.fetch_add(1, Ordering::SeqCst);
        open.insert(
            id,
            SessionEntry {
                fingerprint: who.fingerprint.clone(),
                name: who.name.clone(),
                role: who.role,
                input: input.map(|tx| tx.downgrade()),
            },
        );
        self.count.store(open.len(), Ordering::SeqCst);
        Some(SessionGuard {
            sessions: self.clone(),
            id,
        })
    }

    /// Ends the consoles whose key no longer names the same operator with the same role.
    pub(super) fn end_stale(&self, operators: &Operators) -> usize {
        let open = self.open.lock().unwrap_or_else(|e| e.into_inner());
        let mut ended = 0;
        for s in open.values() {
            let same = operators
                .lookup(&s.fingerprint)
                .is_some_and(|(n, r)| *n == s.name && *r == s.role);
            if !same && let Some(tx) = s.input.as_ref().and_then(|w| w.upgrade()) {
                let _ = tx.send(Input::End(format!(
                    "{}'s key or role changed in the configuration; log in again",
                    s.name
                )));
                ended += 1;
            }
        }
        ended
    }
}
