//! The ledger's faces, each a handle on one `Ledger` for what it serves: a person's actions, the
//! readers, a dispatcher's rounds, retention. An automation's writes are the `Ledger`'s own.

use super::Ledger;
use super::notices::Notices;
use super::read::Reader;
use super::retention::Retention;
use super::rounds::Rounds;
use super::staff::Staff;

impl Ledger {
    /// This handle, for a dispatcher: its rounds, what it asks between them, the sweep.
    pub fn rounds(&self) -> Rounds<'_> {
        Rounds(self)
    }

    /// This handle, for retention: the prune and the archive.
    pub fn retention(&self) -> Retention<'_> {
        Retention(self)
    }

    /// This handle, for a person's actions: on one operation or many, on runs, pauses, reveals.
    pub fn staff(&self) -> Staff<'_> {
        // what this person reads next comes from the primary, not a replica behind it
        crate::store::replica::acted(&self.store);
        Staff(self)
    }

    /// This handle, for telling the owners: the inbox folded into messages, their delivery.
    pub fn notices(&self) -> Notices<'_> {
        Notices(self)
    }

    /// This handle, for reading: pages, views, runs, stats, the review.
    pub fn read(&self) -> Reader<'_> {
        Reader(self)
    }
}
