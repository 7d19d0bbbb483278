//! What each key does in the normal mode, the filter and the detail pane; which bindings apply.

use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

use tui_input::backend::crossterm::EventHandler;

use crate::console::app::groups::GroupKey;
use crate::console::app::review::ReviewKey;
use crate::console::app::{Focus, Mode, View};
use crate::console::{App, Effect};
use crate::ledger::Position;

impl App {
    pub(crate) fn on_key(&mut self, key: KeyEvent) -> Vec<Effect> {
        if key.modifiers.contains(KeyModifiers::CONTROL) && key.code == KeyCode::Char('c') {
            if let Some(b) = &self.bulk {
                b.stop.stop();
            }
            self.quit = true;
            return vec![Effect::Quit];
        }
        match std::mem::replace(&mut self.mode, Mode::Normal) {
            Mode::Help => Vec::new(), // any key closes the help
            Mode::Filter => self.on_filter_key(key),
            Mode::Form(form) => self.on_form_key(*form, key),
            Mode::Undo(r) => super::undo::on_key(self, *r, key),
            Mode::Normal => self.on_normal_key(key),
        }
    }

    pub(crate) fn on_filter_key(&mut self, key: KeyEvent) -> Vec<Effect> {
        match key.code {
            KeyCode::Enter => Vec::new(),
            KeyCode::Esc => {
                self.filter.reset();
                self.reload(Position::First, false)
            }
            _ => {
                self.mode = Mode::Filter;
                let before = self.filter.value().to_string();
                self.filter
                    .handle_event(&ratatui::crossterm::event::Event::Key(key));
                if self.filter.value() != before {
                    self.selected = 0;
                    self.reload(Position::First, false)
                } else {
                    Vec::new()
                }
            }
        }
    }

    pub(crate) fn on_normal_key(&mut self, key: KeyEvent) -> Vec<Effect> {
        if self.focus == Focus::Detail
            && let Some(effects) = self.on_detail_key(key)
        {
            return effects;
        }
        if self.view == View::Exceptions
            && self.groups.shown
            && let Some(done) = self.groups.on_key(key.code, self.viewport.max(1))
        {
            return self.on_group_key(done);
        }
        if let Some(effects) = self.on_run_key(key) {
            return effects;
        }
        // view 6's own keys: its tables scroll, its windows go round
        if self.view == View::Review {
            match self.review.on_key(key.code) {
                Some(ReviewKey::Done) => return Vec::new(),
                Some(ReviewKey::AskAgain) => {
                    let seq = self.next_seq();
                    return vec![self.review.ask(seq, self.review_scope())];
                }
                None => {}
            }
        }
        match key.code {
            KeyCode::Char('q') => {
                self.quit = true;
                vec![Effect::Quit]
            }
            KeyCode::Char('j') | KeyCode::Down => self.move_by(1),
            KeyCode::Char('k') | KeyCode::Up => self.move_by(-1),
            KeyCode::PageDown => self.move_by(self.viewport.max(1) as isize),
            KeyCode::PageUp => self.move_by(-(self.viewport.max(1) as isize)),
            KeyCode::Char('g') | KeyCode::Home => {
                self.selected = 0;
                if self.more_before {
                    self.reload(Position::First, false)
                } else {
                    self.after_move()
                }
            }
            KeyCode::Char('G') | KeyCode::End => {
                if self.more_after {
                    self.reload(Position::Last, true)
                } else {
                    self.selected = self.len().saturating_sub(1);
                    self.after_move()
                }
            }
            KeyCode::Enter | KeyCode::Tab if self.view == View::Activity => self.open_event(),
            KeyCode::Enter | KeyCode::Tab => {
                if self.selected_row().is_some() {
                    self.focus = Focus::Detail;
                }
                Vec::new()
            }
            KeyCode::Char('a') if self.view == View::Activity => self.toggle_automation(),
            KeyCode::Char('t') if self.view == View::Exceptions => {
                self.on_group_key(GroupKey::Show)
            }
            KeyCode::Esc => self.on_esc(),
            KeyCode::Char(c @ '1'..='6') => self.switch_view(c),
            KeyCode::Char('/') => {
                self.mode = Mode::Filter;
                Vec::new()
            }
            KeyCode::Char('S') => self.sort_by_key(true),
            KeyCode::Char('s') => self.sort_by_key(false),
            KeyCode::Char('?') => {
                self.mode = Mode::Help;
                Vec::new()
            }
            KeyCode::Char(' ') => self.toggle_mark(),
            KeyCode::Char('A') => self.mark_all(),
            KeyCode::Char('U') => super::undo::begin(self),
            KeyCode::Char(c @ ('c' | 'C' | 'u' | 'r' | 'R' | 'x' | 'n' | 'P' | 'L' | 'e')) => {
                if self.marks.is_empty() {
                    self.begin_action(c)
                } else {
                    self.begin_bulk(c)
                }
            }
            _ => Vec::new(),
        }
    }

    /// A key on the detail pane: it scrolls, widens, reveals or goes back; `None` for the
    /// keys it leaves to the list.
    pub(crate) fn on_detail_key(&mut self, key: KeyEvent) -> Option<Vec<Effect>> {
        match key.code {
            KeyCode::Char('j') | KeyCode::Down => {
                self.detail_scroll = self.detail_scroll.saturating_add(1);
                Some(Vec::new())
            }
            KeyCode::Char('k') | KeyCode::Up => {
                self.detail_scroll = self.detail_scroll.saturating_sub(1);
                Some(Vec::new())
            }
            KeyCode::PageDown => {
                self.detail_scroll = self.detail_scroll.saturating_add(self.viewport as u16);
                Some(Vec::new())
            }
            KeyCode::PageUp => {
                self.detail_scroll = self.detail_scroll.saturating_sub(self.viewport as u16);
                Some(Vec::new())
            }
            KeyCode::Char('g') => {
                self.detail_scroll = 0;
                Some(Vec::new())
            }
            KeyCode::Enter => {
                self.detail_full = !self.detail_full;
                Some(Vec::new())
            }
            KeyCode::Esc | KeyCode::Tab => {
                self.focus = Focus::List;
                self.detail_full = false;
                self.revealed = None;
                Some(Vec::new())
            }
            KeyCode::Char('v') => Some(self.begin_reveal()),
            _ => None,
        }
    }

    /// Enter on Activity: the event's operation, full screen; Esc comes back to the list.
    pub(crate) fn open_event(&mut self) -> Vec<Effect> {
        // opens the event's operation, full screen; Esc comes back to the list
        match self.opened().map(str::to_string) {
            Some(key) => {
                self.focus = Focus::Detail;
                self.detail_full = true;
                self.detail_scroll = 0;
                self.detail = None;
                vec![Effect::Detail { key }]
            }
            None => {
                self.status
                    .set("this event is not an operation's", false, self.now);
                Vec::new()
            }
        }
    }

    /// Esc: stops a bulk run, else clears the filter, else the status line.
    pub(crate) fn on_esc(&mut self) -> Vec<Effect> {
        if let Some(b) = &self.bulk {
            b.stop.stop();
            self.status
                .set("stopping after the item under way…", false, self.now);
            return Vec::new();
        }
        if !self.filter.value().is_empty() {
            self.filter.reset();
            // what the line said of the filter (a group's items) no longer holds
            self.status.line = None;
            return self.reload(Position::First, false);
        }
        self.status.line = None;
        Vec::new()
    }

    /// t in view 1 (its groups instead of its items, asked for now), and what a key on the
    /// groups asks of the shell.
    fn on_group_key(&mut self, done: GroupKey) -> Vec<Effect> {
        match done {
            GroupKey::Show => {
                self.groups.shown = true;
                self.focus = Focus::List;
                let seq = self.next_seq();
                self.groups.asked(seq);
                self.status.set(
                    "groups: Enter lists a group's items (then A marks them all) · t back",
                    false,
                    self.now,
                );
                vec![Effect::Groups {
                    seq,
                    filter: self.list_filter(),
                }]
            }
            GroupKey::Done => Vec::new(),
            GroupKey::Close => {
                self.status.line = None;
                Vec::new()
            }
            GroupKey::Open(filter) => {
                self.filter = tui_input::Input::new(filter);
                self.selected = 0;
                self.status.set(
                    "the group's items: A marks them all · Esc clears the filter",
                    false,
                    self.now,
                );
                self.reload(Position::First, false)
            }
        }
    }

    /// 1-6: another view, from its first page.
    pub(crate) fn switch_view(&mut self, c: char) -> Vec<Effect> {
        let view = View::ALL[(c as usize) - ('1' as usize)];
        if view == self.view {
            return Vec::new();
        }
        // Activity's filter speaks of actors and kinds, the lists' of operations
        if (view == View::Activity) != (self.view == View::Activity) {
            self.filter.reset();
        }
        self.detail_full = false;
        self.groups.shown = false;
        self.view = view;
        self.selected = 0;
        self.rows.clear();
        self.detail = None;
        self.focus = Focus::List;
        self.reload(Position::First, false)
    }

    /// a on Activity: automation's events shown or hidden.
    pub(crate) fn toggle_automation(&mut self) -> Vec<Effect> {
        self.automation = !self.automation;
        self.selected = 0;
        self.status.set(
            if self.automation {
                "automation's events shown (a hides them)"
            } else {
                "people's actions only (a shows automation's too)"
            },
            false,
            self.now,
        );
        self.reload(Position::First, false)
    }

    /// s: the next sort; S (`reverse`): the same sort, the other way.
    pub(crate) fn sort_by_key(&mut self, reverse: bool) -> Vec<Effect> {
        if reverse {
            self.reverse = !self.reverse;
        } else {
            self.sort = self.sort.next();
        }
        self.selected = 0;
        self.to_top = true;
        let line = match (reverse, self.reverse) {
            (false, _) => format!("sorted by {}", self.sort.label()),
            (true, true) => format!("sorted by {}, reversed", self.sort.label()),
            (true, false) => format!("sorted by {}, in order", self.sort.label()),
        };
        self.status.set(line, false, self.now);
        self.reload(Position::First, false)
    }

    /// Whether a binding belongs to the view on screen (the help lists those).
    pub fn in_view(&self, b: &crate::console::keymap::Binding) -> bool {
        use crate::console::keymap::When;
        if !self.may(b) {
            return false;
        }
        match b.when {
            When::Activity => self.view == View::Activity,
            When::Review => self.view == View::Review,
            When::Always | When::Acts => true,
            _ => self.view.lists(),
        }
    }

    /// Whether this operator's role ever allows the binding (manual: Running settle for a team: a viewer is offered no
    /// action key, an operator no lead's key), whatever is selected.
    pub fn may(&self, b: &crate::console::keymap::Binding) -> bool {
        use crate::console::keymap::When;
        use crate::domain::Offer;
        match b.when {
            When::Offered if b.offers.iter().all(|o| *o == Offer::TakeOver) => self.role.leads(),
            When::Offered | When::Marks | When::Run => self.role.acts(),
            When::Lead | When::Reveal => self.role.leads(),
            When::Acts => self.role.acts(),
            When::Always | When::Row | When::Activity | When::Review | When::Groups => true,
        }
    }

    /// Whether a binding applies to the selected item right now (footer, help and the key
    /// handler): an action's only when the ledger offers it to this operator on this item.
    pub fn applies(&self, b: &crate::console::keymap::Binding) -> bool {
        use crate::console::keymap::When;
        if !self.may(b) {
            return false;
        }
        // on view 1's groups only the keys of every view and the groups' own
        if self.view == View::Exceptions
            && self.groups.shown
            && !matches!(b.when, When::Always | When::Groups | When::Acts)
        {
            return false;
        }
        let row = self.selected_row().filter(|_| self.online);
        match b.when {
            When::Always => true,
            When::Acts => self.online && self.bulk.is_none(),
            When::Review => self.view == View::Review,
            When::Row => row.is_some(),
            // with items marked, the keys that act on many, where one of the marked items on
            // screen would take it (each is checked again at the preview)
            When::Offered if !self.marks.is_empty() => {
                b.bulk
                    && self.online
                    && self.bulk.is_none()
                    && self.marks.take_any(&self.rows, b.offers)
            }
            When::Offered => row.is_some_and(|r| b.offers.iter().any(|o| r.actions.contains(*o))),
            When::Marks => {
                self.view.lists() && self.online && self.bulk.is_none() && self.role.acts()
            }
            When::Lead => row.is_some() && self.role.leads(),
            When::Reveal => {
                self.focus == Focus::Detail
                    && self.role.leads()
                    && self.online
                    && self
                        .detail
                        .as_ref()
                        .is_some_and(|d| !crate::ledger::redacted_paths(&d.payload).is_empty())
            }
            When::Activity => self.view == View::Activity,
            When::Run => self.online && self.selected_run().is_some(),
            When::Groups => self.view == View::Exceptions,
        }
    }
}
