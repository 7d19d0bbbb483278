//! Every open session: the limit, the metrics gauge, and the end of a removed operator's.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use tokio::sync::mpsc::{UnboundedSender, WeakUnboundedSender};

use crate::console::Input;
use crate::domain::{Identity, Role};
use crate::serve::identity::Operators;

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

/// How many sessions a server takes.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SessionLimits {
    /// Sessions at once (`--max-sessions`), and as many more for leads only ([`LEAD_SEATS`]).
    pub max: usize,
    /// Sessions of one operator at once, within `max`.
    pub per_operator: usize,
}

/// Seats beyond `--max-sessions` that only a lead may take: whoever fills the server, a lead
/// can always get in to see why, and end it.
pub const LEAD_SEATS: usize = 4;

/// Why a session was not let in.
#[derive(Clone, Debug, PartialEq)]
pub enum Full {
    /// The server holds its most.
    Server(usize),
    /// This operator holds their most.
    Operator(String, usize),
}

impl Sessions {
    /// A place for a session of `who` within `limits`: not past `per_operator` sessions of
    /// theirs, and not past `max` in all unless a lead (who has [`LEAD_SEATS`] more).
    pub(super) fn enter(
        self: &Arc<Self>,
        who: &Identity,
        input: Option<UnboundedSender<Input>>,
        limits: SessionLimits,
    ) -> Result<SessionGuard, Full> {
        let mut open = self.open.lock().unwrap_or_else(|e| e.into_inner());
        let theirs = open.values().filter(|s| s.name == who.name).count();
        if theirs >= limits.per_operator.max(1) {
            return Err(Full::Operator(who.name.clone(), theirs));
        }
        let seats = match who.role {
            Role::Lead => limits.max + LEAD_SEATS,
            _ => limits.max,
        };
        if open.len() >= seats {
            return Err(Full::Server(limits.max));
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
        Ok(SessionGuard {
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
