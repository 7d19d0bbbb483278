//! View 1's groups (manual: Owners and notifications) as a component: `t` switches view 1 between
//! its items and their groups (owner, workflow, destination, state, masked reason), `Enter` on a
//! group filters the items to it, so that `A` marks all of it for one action.

use ratatui::crossterm::event::KeyCode;

use crate::ledger::ExceptionGroup;

/// The groups shown instead of view 1's items, and the one selected.
#[derive(Default)]
pub struct GroupsPanel {
    /// The groups stand in view 1 instead of its items.
    pub shown: bool,
    /// The largest first.
    pub groups: Vec<ExceptionGroup>,
    pub selected: usize,
    /// Asked for, not yet come.
    pub loading: bool,
    seq: u64,
}

/// What a key did to the groups.
pub(super) enum GroupKey {
    /// Show the groups (`t` on the items).
    Show,
    /// Moved, or nothing to do.
    Done,
    /// Back to the items.
    Close,
    /// Back to the items, filtered to this group.
    Open(String),
}

impl GroupsPanel {
    /// The group the selection is on.
    pub fn selected_group(&self) -> Option<&ExceptionGroup> {
        self.groups.get(self.selected)
    }

    /// The groups are asked for (request `seq`).
    pub(super) fn asked(&mut self, seq: u64) {
        self.seq = seq;
        self.loading = true;
    }

    /// The groups came for request `seq`: kept, the selection on the same group where it still
    /// is. An error leaves the last ones on screen and says why.
    pub(super) fn on_list(
        &mut self,
        seq: u64,
        groups: Result<Vec<ExceptionGroup>, String>,
    ) -> Result<(), String> {
        if seq < self.seq {
            return Ok(());
        }
        self.loading = false;
        let before = self.selected_group().map(|g| g.filter.clone());
        self.groups = groups?;
        self.selected = before
            .and_then(|f| self.groups.iter().position(|g| g.filter == f))
            .unwrap_or(0);
        Ok(())
    }

    /// A key while the groups are shown; `None` for the keys left to the shell (views, filter,
    /// help, quit).
    pub(super) fn on_key(&mut self, code: KeyCode, page: usize) -> Option<GroupKey> {
        let last = self.groups.len().saturating_sub(1);
        match code {
            KeyCode::Char('j') | KeyCode::Down => self.selected = (self.selected + 1).min(last),
            KeyCode::Char('k') | KeyCode::Up => self.selected = self.selected.saturating_sub(1),
            KeyCode::PageDown => self.selected = (self.selected + page).min(last),
            KeyCode::PageUp => self.selected = self.selected.saturating_sub(page),
            KeyCode::Char('g') | KeyCode::Home => self.selected = 0,
            KeyCode::Char('G') | KeyCode::End => self.selected = last,
            KeyCode::Esc | KeyCode::Char('t') => {
                self.shown = false;
                return Some(GroupKey::Close);
            }
            KeyCode::Enter | KeyCode::Tab => {
                let filter = self.selected_group()?.filter.clone();
                self.shown = false;
                return Some(GroupKey::Open(filter));
            }
            KeyCode::Char('q' | '?' | '/' | '1'..='6') => return None,
            _ => {}
        }
        Some(GroupKey::Done)
    }
}
