//! The marked keys (manual: Many at once) as a component.

use std::collections::BTreeSet;

/// The marked keys as a component: what the action keys act on, and the request for "everything
/// the view and filter match" (`A`) while its answer has not come.
#[derive(Default)]
pub struct Marks {
    keys: BTreeSet<String>,
    pub(super) asked: Option<u64>,
}

impl Marks {
    pub fn len(&self) -> usize {
        self.keys.len()
    }

    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    /// Whether one of the marked items among `rows` (those on screen) is offered one of
    /// `offers`; none on screen: the preview will say.
    pub fn take_any(
        &self,
        rows: &[crate::ledger::OperationView],
        offers: &[crate::domain::Offer],
    ) -> bool {
        let mut marked = rows.iter().filter(|r| self.contains(&r.key)).peekable();
        marked.peek().is_none() || marked.any(|r| offers.iter().any(|o| r.actions.contains(*o)))
    }

    pub fn contains(&self, key: &str) -> bool {
        self.keys.contains(key)
    }

    /// The marked keys, in order: the set an action is frozen on.
    pub(super) fn frozen(&self) -> Vec<String> {
        self.keys.iter().cloned().collect()
    }

    /// Marks `key`, or unmarks it when it was marked.
    pub(super) fn toggle(&mut self, key: String) {
        if !self.keys.remove(&key) {
            self.keys.insert(key);
        }
    }

    /// Unmarks everything; how many were marked.
    pub(super) fn clear(&mut self) -> usize {
        let n = self.keys.len();
        self.keys.clear();
        n
    }

    /// What a bulk action did is unmarked; what it left alone stays marked, to look at.
    pub(super) fn unmark(&mut self, done: &[String]) {
        for k in done {
            self.keys.remove(k);
        }
    }

    /// The answer to `A` (request `seq`): `None` where it is not the one awaited; else how many
    /// are marked now, or what went wrong.
    pub(super) fn on_answer(
        &mut self,
        seq: u64,
        keys: Result<Vec<String>, String>,
    ) -> Option<Result<usize, String>> {
        if self.asked != Some(seq) {
            return None;
        }
        self.asked = None;
        Some(keys.map(|keys| {
            self.keys = keys.into_iter().collect();
            self.keys.len()
        }))
    }
}
