//! The console's state and how keys and results change it. No terminal and no database here:
//! `update` returns the work to do (`Effect`s), and the event loop runs it in spawned tasks.

use chrono::{DateTime, Utc};
use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use tui_input::Input;

pub use super::form::{ActionKind, Form, FormStep};
use tui_input::backend::crossterm::EventHandler;

use crate::ledger::{
    BulkPreview, BulkReport, EventView, ListFilter, OperationDetail, OperationView, Page, Position,
    Scope, Sort, StaffAction, Stats,
};

/// Stops a bulk action between two items (`Esc`, Ctrl-C); what is done stays done.
#[derive(Clone, Debug, Default)]
pub struct StopFlag(pub std::sync::Arc<std::sync::atomic::AtomicBool>);

impl StopFlag {
    pub fn stop(&self) {
        self.0.store(true, std::sync::atomic::Ordering::SeqCst);
    }
}

impl PartialEq for StopFlag {
    fn eq(&self, other: &Self) -> bool {
        std::sync::Arc::ptr_eq(&self.0, &other.0)
    }
}

/// A bulk action under way: the progress bar's numbers.
#[derive(Clone, Debug)]
pub struct BulkRun {
    pub verb: &'static str,
    pub done: usize,
    pub total: usize,
    pub stop: StopFlag,
}

/// Rows asked for at a time; the window never holds more than `MAX_ROWS`.
pub const PAGE: usize = 100;
const MAX_ROWS: usize = 400;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum View {
    Exceptions,
    Mine,
    InProgress,
    Closed,
    Activity,
    /// The review after a release (SPEC 18): exception age, opened against resolved, time to
    /// resolve, duplicates.
    Review,
}

/// The review's windows (`[` and `]`), in days; the second is the default.
pub const REVIEW_WINDOWS: [u64; 3] = [1, 7, 30];

impl View {
    pub const ALL: [View; 6] = [
        View::Exceptions,
        View::Mine,
        View::InProgress,
        View::Closed,
        View::Activity,
        View::Review,
    ];

    /// Whether the view is a list of operations (the others: Activity and Review).
    pub fn lists(self) -> bool {
        !matches!(self, View::Activity | View::Review)
    }

    pub fn title(self) -> &'static str {
        match self {
            View::Exceptions => "Exceptions",
            View::Mine => "Mine",
            View::InProgress => "In progress",
            View::Closed => "Closed",
            View::Activity => "Activity",
            View::Review => "Review",
        }
    }

    fn scope(self) -> Scope {
        match self {
            View::Exceptions | View::Activity | View::Review => Scope::Exceptions,
            View::Mine => Scope::Mine,
            View::InProgress => Scope::InProgress,
            View::Closed => Scope::Closed,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Focus {
    List,
    Detail,
}

#[derive(Clone, Debug)]
pub enum Mode {
    Normal,
    Filter,
    Help,
    Form(Box<Form>),
}

/// What the console asks of the database; run in spawned tasks, answered with `Msg`s.
#[derive(Clone, Debug, PartialEq)]
pub enum Effect {
    /// Load a page of the list for request `seq`, placing it as `place` says.
    Page {
        seq: u64,
        filter: ListFilter,
        position: Position,
        limit: usize,
        place: Place,
    },
    Detail {
        key: String,
    },
    /// The header's numbers and the tabs' counts (from the counters the store keeps: cheap at
    /// any size, so asked for at every refresh).
    Header,
    Activity {
        seq: u64,
        filter: crate::domain::filter::ActivityFilter,
    },
    /// How many items of the view the filter matches (the header's "N of M").
    Count {
        seq: u64,
        filter: ListFilter,
    },
    Staff {
        key: String,
        action: StaffAction,
    },
    /// Pause a workflow or a destination (a lead's).
    Pause {
        what: crate::ledger::Pausable,
        name: String,
        reason: String,
    },
    Resume {
        what: crate::ledger::Pausable,
        name: String,
    },
    /// Every key the view and filter match (`A`: the whole set in the database).
    MarkAll {
        seq: u64,
        filter: ListFilter,
    },
    /// The frozen preview of one action on the marked keys.
    BulkPreview {
        keys: Vec<String>,
        action: StaffAction,
    },
    /// The action on the preview's eligible keys, one transaction and one event each;
    /// progress comes back as `Msg::BulkProgress`.
    BulkApply {
        keys: Vec<String>,
        action: StaffAction,
        pace: Option<std::time::Duration>,
        stop: StopFlag,
    },
    /// Ask the destinations of these operations whether their work exists, `pace` apart, until
    /// `stop` (SPEC 16); progress comes back as `Msg::BulkProgress`, the answers as
    /// `Msg::LookedUp`.
    LookUp {
        keys: Vec<String>,
        pace: Option<std::time::Duration>,
        stop: StopFlag,
    },
    /// The frozen preview of an action per key (the reconciles a bulk lookup's answers allow).
    BulkPreviewEach {
        items: Vec<(String, StaffAction)>,
    },
    /// An action per key, one transaction and one event each, as `BulkApply`.
    BulkApplyEach {
        items: Vec<(String, StaffAction)>,
        stop: StopFlag,
    },
    /// A lead's reveal of one redacted field (SPEC 8): the event is written, the value returned.
    Reveal {
        key: String,
        path: String,
        reason: String,
    },
    /// The review of the last `days` days for `scope` (view 6).
    Review {
        seq: u64,
        days: u64,
        scope: crate::ledger::ReviewScope,
    },
    Poll,
    Quit,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Place {
    /// Replace the window, selecting the row with the same key as before (or index `select`).
    Replace {
        select_last: bool,
    },
    Append,
    Prepend,
}

/// The header's numbers.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Header {
    pub stats: Option<Stats>,
    pub mine: i64,
    /// Seconds since a dispatcher last said it was alive (`None`: none ever ran here).
    pub dispatcher_seen: Option<i64>,
    /// When these were read: the oldest exception's age goes on from there between two reads.
    pub at: Option<DateTime<Utc>>,
}

/// How long a row another writer changed stays highlighted.
const CHANGED_FOR: chrono::TimeDelta = chrono::TimeDelta::seconds(3);

/// What a person notices changing on a row (its age moves by itself).
fn seen(v: &OperationView) -> impl PartialEq + use<'_> {
    (
        v.state,
        &v.claimed_by,
        v.attempts,
        &v.reason,
        &v.resolution,
        &v.next_attempt_at,
    )
}

#[derive(Debug)]
pub enum Msg {
    Key(KeyEvent),
    Tick,
    Resized {
        rows: u16,
    },
    Page {
        seq: u64,
        place: Place,
        page: Result<Page, String>,
    },
    Detail {
        key: String,
        detail: Result<Box<OperationDetail>, String>,
    },
    Header(Result<Header, String>),
    Activity {
        seq: u64,
        events: Result<Vec<EventView>, String>,
    },
    Acted(Result<String, String>),
    /// The filter's count for request `seq` (`None`: it holds words, which are not counted).
    Counted {
        seq: u64,
        count: Result<Option<i64>, String>,
    },
    Polled(Result<i64, String>),
    Marked {
        seq: u64,
        keys: Result<Vec<String>, String>,
    },
    Previewed(Result<BulkPreview, String>),
    BulkProgress {
        done: usize,
        total: usize,
    },
    BulkDone(Result<BulkReport, String>),
    /// What the destinations' lookups answered: (key, destination, answer).
    LookedUp(Result<Vec<(String, String, crate::domain::LookupAnswer)>, String>),
    /// The revealed value of `path` of `key` (shown on the detail pane only).
    Revealed {
        key: String,
        path: String,
        value: Result<String, String>,
    },
    /// Another writer changed something (a PostgreSQL notification).
    Changed,
    /// The review asked for by request `seq`.
    Reviewed {
        seq: u64,
        review: Result<Box<crate::ledger::Review>, String>,
    },
}

pub struct App {
    pub database: String,
    pub operator: String,
    /// What the operator may do (SPEC 17): the footer and help offer only that.
    pub role: crate::domain::Role,
    pub view: View,
    pub sort: Sort,
    /// `S`: the sort's order reversed.
    pub reverse: bool,
    /// The next page starts the selection at its top (a new order), not on the same key.
    to_top: bool,
    pub filter: Input,
    pub focus: Focus,
    /// The detail pane fills the screen (Enter in the detail pane).
    pub detail_full: bool,
    pub mode: Mode,
    pub rows: Vec<OperationView>,
    pub selected: usize,
    pub more_before: bool,
    pub more_after: bool,
    pub activity: Vec<EventView>,
    /// Activity shows automation's events too (`a`).
    pub automation: bool,
    /// View 6's review (the last one answered; kept on screen while the next loads).
    pub review: Option<Box<crate::ledger::Review>>,
    /// Its window: an index into [`REVIEW_WINDOWS`].
    pub review_window: usize,
    /// The review request whose answer is awaited (`None`: none).
    pub review_seq: Option<u64>,
    /// What the last review asked for covers (the filter's workflow or destination), read once
    /// when it is asked, not at every frame.
    pub review_of: crate::ledger::ReviewScope,
    /// How many rows the review's tables are scrolled (`j`/`k` in view 6).
    pub review_scroll: usize,
    pub detail: Option<OperationDetail>,
    /// How many items of the view the filter matches, once counted (for request `count_seq`).
    pub filter_count: Option<i64>,
    count_seq: u64,
    pub detail_scroll: u16,
    /// Marked keys (`Space`, `A`): the action keys act on all of them (SPEC 16).
    pub marks: std::collections::BTreeSet<String>,
    /// `A` was asked for (request `seq`) and its answer has not come yet.
    pub(super) marking: Option<u64>,
    /// A bulk action under way.
    pub bulk: Option<BulkRun>,
    /// A revealed value (key, field, value): shown while that item's detail pane stays open.
    pub revealed: Option<(String, String, String)>,
    /// Rows another writer changed, and when it was seen: highlighted for `CHANGED_FOR`.
    pub changed: std::collections::HashMap<String, DateTime<Utc>>,
    pub header: Header,
    pub status: Option<(String, bool)>,
    /// When the status line was set: it clears itself after a while (SPEC 13), an error later.
    status_at: Option<DateTime<Utc>>,
    /// The database answered the last poll.
    pub online: bool,
    /// A request is out; the spinner turns.
    pub loading: bool,
    pub loaded_once: bool,
    pub spinner: usize,
    /// Rows of the list that fit on screen (for PgUp/PgDn).
    pub viewport: usize,
    pub now: DateTime<Utc>,
    /// Ages turn warning-coloured past this many seconds, critical past the second.
    pub age_thresholds: (i64, i64),
    seq: u64,
    last_event: Option<i64>,
    pub quit: bool,
}

impl App {
    pub fn new(database: &str, operator: &str) -> App {
        App {
            database: database.into(),
            operator: operator.into(),
            role: crate::domain::Role::Lead,
            view: View::Exceptions,
            sort: Sort::Age,
            reverse: false,
            to_top: false,
            filter: Input::default(),
            focus: Focus::List,
            detail_full: false,
            mode: Mode::Normal,
            rows: Vec::new(),
            selected: 0,
            more_before: false,
            more_after: false,
            activity: Vec::new(),
            automation: false,
            review: None,
            review_window: 1,
            review_seq: None,
            review_of: Default::default(),
            review_scroll: 0,
            detail: None,
            detail_scroll: 0,
            marks: Default::default(),
            marking: None,
            bulk: None,
            revealed: None,
            changed: Default::default(),
            filter_count: None,
            count_seq: 0,
            header: Header::default(),
            status: Some((
                "oldest exceptions first · j/k move · Tab details · / filter · ? all keys".into(),
                false,
            )),
            status_at: Some(Utc::now()),
            online: true,
            loading: true,
            loaded_once: false,
            spinner: 0,
            viewport: 10,
            now: Utc::now(),
            age_thresholds: (3_600, 86_400),
            seq: 0,
            last_event: None,
            quit: false,
        }
    }

    /// The work to do before the first key: the first page, the header.
    pub fn start(&mut self) -> Vec<Effect> {
        let mut fx = self.reload(Position::First, false);
        fx.push(Effect::Header);
        fx
    }

    /// The operation of the selected Activity event, if it is an operation's.
    pub fn opened(&self) -> Option<&str> {
        if self.view != View::Activity {
            return None;
        }
        self.activity.get(self.selected)?.op_key.as_deref()
    }

    pub fn selected_row(&self) -> Option<&OperationView> {
        if self.view == View::Activity {
            return None;
        }
        self.rows.get(self.selected)
    }

    pub fn list_filter(&self) -> ListFilter {
        // SPEC 12's filter: the terms that are whole narrow the list as they are typed
        let (query, _) = crate::domain::filter::Filter::lenient(self.filter.value());
        ListFilter {
            scope: self.view.scope(),
            query,
            sort: self.sort,
            reverse: self.reverse,
            ..Default::default()
        }
    }

    /// The review's scope: the list filter's workflow or destination, when it names one (SPEC 18).
    pub fn review_scope(&self) -> crate::ledger::ReviewScope {
        use crate::domain::filter::Match;
        let (query, _) = crate::domain::filter::Filter::lenient(self.filter.value());
        let mut scope = crate::ledger::ReviewScope::default();
        for t in query.terms.iter().filter(|t| !t.negated) {
            match &t.matches {
                Match::Workflow(w) => scope.workflow = Some(w.clone()),
                Match::Destination(d) => scope.destination = Some(d.clone()),
                _ => {}
            }
        }
        scope
    }

    fn review_effect(&mut self, seq: u64) -> Effect {
        self.review_seq = Some(seq);
        self.review_of = self.review_scope();
        Effect::Review {
            seq,
            days: REVIEW_WINDOWS[self.review_window],
            scope: self.review_of.clone(),
        }
    }

    /// Activity's filter: what `/` holds, read as Activity reads it.
    pub fn activity_filter(&self) -> crate::domain::filter::ActivityFilter {
        crate::domain::filter::ActivityFilter::lenient(self.filter.value(), self.automation).0
    }

    pub(super) fn next_seq(&mut self) -> u64 {
        self.seq += 1;
        self.seq
    }

    fn reload(&mut self, position: Position, select_last: bool) -> Vec<Effect> {
        let seq = self.next_seq();
        if self.view == View::Review {
            return vec![self.review_effect(seq), Effect::Header];
        }
        self.loading = true;
        if self.view == View::Activity {
            return vec![Effect::Activity {
                seq,
                filter: self.activity_filter(),
            }];
        }
        let filter = self.list_filter();
        let mut fx = vec![Effect::Page {
            seq,
            filter: filter.clone(),
            position,
            limit: PAGE,
            place: Place::Replace { select_last },
        }];
        self.filter_count = None;
        if !filter.query.is_empty() {
            self.count_seq = seq;
            fx.push(Effect::Count { seq, filter });
        }
        fx
    }

    /// Reloads the rows on screen where they are (live refresh): the selection stays put.
    pub(super) fn refresh(&mut self) -> Vec<Effect> {
        let position = match self.rows.first() {
            Some(r) if self.more_before => Position::From(r.cursor.clone()),
            _ => Position::First,
        };
        let seq = self.next_seq();
        let mut fx = if self.view == View::Review {
            vec![self.review_effect(seq)]
        } else if self.view == View::Activity {
            vec![Effect::Activity {
                seq,
                filter: self.activity_filter(),
            }]
        } else {
            let limit = self.rows.len().clamp(PAGE, MAX_ROWS);
            let filter = self.list_filter();
            let mut fx = vec![Effect::Page {
                seq,
                filter: filter.clone(),
                position,
                limit,
                place: Place::Replace { select_last: false },
            }];
            // the header's "N of M" follows the change too
            if !filter.query.is_empty() {
                self.count_seq = seq;
                fx.push(Effect::Count { seq, filter });
            }
            fx
        };
        fx.push(Effect::Header);
        if let Some(k) = self.selected_row().map(|r| r.key.clone()) {
            fx.push(Effect::Detail { key: k });
        }
        fx
    }

    pub(super) fn set_status(&mut self, text: impl Into<String>, error: bool) {
        self.status = Some((text.into(), error));
        self.status_at = Some(self.now);
    }

    /// A status line says what just happened: a result clears after 8 s, a refusal after 20 s.
    fn expire_status(&mut self) {
        let keep = match &self.status {
            Some((_, true)) => chrono::TimeDelta::seconds(20),
            Some((_, false)) => chrono::TimeDelta::seconds(8),
            None => return,
        };
        if self.status_at.is_some_and(|at| self.now - at > keep) {
            self.status = None;
            self.status_at = None;
        }
    }

    pub fn update(&mut self, msg: Msg) -> Vec<Effect> {
        match msg {
            Msg::Key(key) => self.on_key(key),
            Msg::Tick => {
                self.spinner = self.spinner.wrapping_add(1);
                self.now = Utc::now();
                self.expire_status();
                let now = self.now;
                self.changed.retain(|_, at| now - *at < CHANGED_FOR);
                Vec::new()
            }
            Msg::Resized { rows } => {
                self.viewport = usize::from(rows).max(1);
                Vec::new()
            }
            Msg::Page { seq, place, page } => self.on_page(seq, place, page),
            Msg::Detail { key, detail } => {
                let opened = self.view == View::Activity && self.opened() == Some(key.as_str());
                if opened || self.selected_row().is_some_and(|r| r.key == key) {
                    match detail {
                        Ok(d) => {
                            if self
                                .detail
                                .as_ref()
                                .is_none_or(|old| old.op.key != d.op.key)
                            {
                                self.detail_scroll = 0;
                            }
                            self.detail = Some(*d);
                        }
                        Err(e) => self.set_status(e, true),
                    }
                }
                Vec::new()
            }
            Msg::Header(h) => {
                match h {
                    Ok(h) => self.header = h,
                    Err(e) => self.went_offline(e),
                }
                Vec::new()
            }
            Msg::Activity { seq, events } => {
                if seq == self.seq {
                    self.loading = false;
                    match events {
                        Ok(ev) => {
                            self.activity = ev;
                            self.selected =
                                self.selected.min(self.activity.len().saturating_sub(1));
                            self.loaded_once = true;
                        }
                        Err(e) => self.went_offline(e),
                    }
                }
                Vec::new()
            }
            Msg::Acted(result) => {
                match result {
                    Ok(text) => self.set_status(text, false),
                    Err(text) => self.set_status(text, true),
                }
                self.refresh()
            }
            Msg::Changed => vec![Effect::Poll],
            Msg::Reviewed { seq, review } => {
                if self.review_seq == Some(seq) {
                    self.review_seq = None;
                    match review {
                        Ok(r) => {
                            self.review = Some(r);
                            self.online = true;
                        }
                        Err(e) => self.set_status(format!("the review: {e}"), true),
                    }
                }
                Vec::new()
            }
            Msg::Marked { seq, keys } => self.on_marked(seq, keys),
            Msg::Previewed(preview) => self.on_previewed(preview),
            Msg::BulkProgress { done, total } => {
                if let Some(b) = self.bulk.as_mut() {
                    (b.done, b.total) = (done, total);
                }
                Vec::new()
            }
            Msg::BulkDone(report) => self.on_bulk_done(report),
            Msg::LookedUp(answers) => self.on_looked_up(answers),
            Msg::Revealed { key, path, value } => {
                match value {
                    Ok(v) => {
                        self.set_status(
                            format!("{key}: {path} revealed; the reveal is audited"),
                            false,
                        );
                        self.revealed = Some((key, path, v));
                    }
                    Err(e) => self.set_status(format!("refused: {e}"), true),
                }
                self.refresh()
            }
            Msg::Counted { seq, count } => {
                if seq == self.count_seq {
                    self.filter_count = count.ok().flatten();
                }
                Vec::new()
            }
            Msg::Polled(result) => match result {
                Ok(id) => {
                    let back = !self.online;
                    self.online = true;
                    let changed = self.last_event.is_some_and(|old| old != id);
                    self.last_event = Some(id);
                    if back {
                        self.set_status("database reachable again", false);
                    }
                    if back || changed {
                        self.refresh()
                    } else {
                        Vec::new()
                    }
                }
                Err(e) => {
                    self.went_offline(e);
                    Vec::new()
                }
            },
        }
    }

    fn went_offline(&mut self, e: String) {
        self.online = false;
        self.loading = false;
        self.set_status(
            format!("database unreachable: {e} (retrying; actions are off)"),
            true,
        );
    }

    fn on_page(&mut self, seq: u64, place: Place, page: Result<Page, String>) -> Vec<Effect> {
        if seq != self.seq {
            return Vec::new(); // a newer request superseded this one
        }
        self.loading = false;
        let page = match page {
            Ok(p) => p,
            Err(e) => {
                self.went_offline(e);
                return Vec::new();
            }
        };
        self.loaded_once = true;
        let before_key = self.selected_row().map(|r| r.key.clone());
        match place {
            Place::Replace { select_last } => {
                let before: std::collections::HashMap<&str, &OperationView> =
                    self.rows.iter().map(|r| (r.key.as_str(), r)).collect();
                let changed: Vec<String> = page
                    .items
                    .iter()
                    .filter(|r| {
                        before
                            .get(r.key.as_str())
                            .is_some_and(|b| seen(b) != seen(r))
                    })
                    .map(|r| r.key.clone())
                    .collect();
                for k in changed {
                    self.changed.insert(k, self.now);
                }
                self.rows = page.items;
                self.more_before = page.more_before;
                self.more_after = page.more_after;
                self.selected = if select_last {
                    self.rows.len().saturating_sub(1)
                } else if std::mem::take(&mut self.to_top) {
                    0
                } else {
                    before_key
                        .and_then(|k| self.rows.iter().position(|r| r.key == k))
                        .unwrap_or(self.selected)
                        .min(self.rows.len().saturating_sub(1))
                };
            }
            Place::Append => {
                self.more_after = page.more_after;
                self.rows.extend(page.items);
                if self.rows.len() > MAX_ROWS {
                    let drop = self.rows.len() - MAX_ROWS;
                    self.rows.drain(..drop);
                    self.selected = self.selected.saturating_sub(drop);
                    self.more_before = true;
                }
            }
            Place::Prepend => {
                self.more_before = page.more_before;
                let added = page.items.len();
                let mut rows = page.items;
                rows.append(&mut self.rows);
                self.rows = rows;
                self.selected += added;
                if self.rows.len() > MAX_ROWS {
                    self.rows.truncate(MAX_ROWS);
                    self.more_after = true;
                }
                self.selected = self
                    .selected
                    .saturating_sub(1)
                    .min(self.rows.len().saturating_sub(1));
            }
        }
        self.after_move()
    }

    /// After the selection moved: load the detail, and more rows when near an edge.
    fn after_move(&mut self) -> Vec<Effect> {
        let mut fx = Vec::new();
        // a revealed value never follows the selection to another item
        if self
            .revealed
            .as_ref()
            .is_some_and(|(k, _, _)| self.selected_row().is_none_or(|r| r.key != *k))
        {
            self.revealed = None;
        }
        let key = self.selected_row().map(|r| r.key.clone());
        match key {
            Some(k) if self.detail.as_ref().is_none_or(|d| d.op.key != k) => {
                fx.push(Effect::Detail { key: k })
            }
            Some(_) => {}
            None => self.detail = None,
        }
        if self.view != View::Activity && !self.loading {
            let edge = if self.more_after && self.selected + 5 >= self.rows.len() {
                self.rows
                    .last()
                    .map(|r| (Position::After(r.cursor.clone()), Place::Append))
            } else if self.more_before && self.selected == 0 {
                self.rows
                    .first()
                    .map(|r| (Position::Before(r.cursor.clone()), Place::Prepend))
            } else {
                None
            };
            if let Some((position, place)) = edge {
                let seq = self.next_seq();
                self.loading = true;
                fx.push(Effect::Page {
                    seq,
                    filter: self.list_filter(),
                    position,
                    limit: PAGE,
                    place,
                });
            }
        }
        fx
    }

    fn len(&self) -> usize {
        if self.view == View::Activity {
            self.activity.len()
        } else {
            self.rows.len()
        }
    }

    pub(super) fn move_by(&mut self, delta: isize) -> Vec<Effect> {
        let len = self.len();
        if len == 0 {
            return Vec::new();
        }
        let target = (self.selected as isize + delta).clamp(0, len as isize - 1) as usize;
        let at_top = self.selected == 0 && delta < 0;
        self.selected = target;
        if at_top && self.more_before {
            return self.after_move();
        }
        self.after_move()
    }

    fn on_key(&mut self, key: KeyEvent) -> Vec<Effect> {
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
            Mode::Normal => self.on_normal_key(key),
        }
    }

    fn on_filter_key(&mut self, key: KeyEvent) -> Vec<Effect> {
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

    fn on_normal_key(&mut self, key: KeyEvent) -> Vec<Effect> {
        if self.focus == Focus::Detail {
            match key.code {
                KeyCode::Char('j') | KeyCode::Down => {
                    self.detail_scroll = self.detail_scroll.saturating_add(1);
                    return Vec::new();
                }
                KeyCode::Char('k') | KeyCode::Up => {
                    self.detail_scroll = self.detail_scroll.saturating_sub(1);
                    return Vec::new();
                }
                KeyCode::PageDown => {
                    self.detail_scroll = self.detail_scroll.saturating_add(self.viewport as u16);
                    return Vec::new();
                }
                KeyCode::PageUp => {
                    self.detail_scroll = self.detail_scroll.saturating_sub(self.viewport as u16);
                    return Vec::new();
                }
                KeyCode::Char('g') => {
                    self.detail_scroll = 0;
                    return Vec::new();
                }
                KeyCode::Enter => {
                    self.detail_full = !self.detail_full;
                    return Vec::new();
                }
                KeyCode::Esc | KeyCode::Tab => {
                    self.focus = Focus::List;
                    self.detail_full = false;
                    self.revealed = None;
                    return Vec::new();
                }
                KeyCode::Char('v') => return self.begin_reveal(),
                _ => {}
            }
        }
        match key.code {
            KeyCode::Char('q') => {
                self.quit = true;
                vec![Effect::Quit]
            }
            // the review's tables scroll (SPEC 18: at 80x24 they may hold more than fits)
            KeyCode::Char('j') | KeyCode::Down if self.view == View::Review => {
                let longest = self
                    .review
                    .as_ref()
                    .map_or(0, |r| r.by_workflow.len().max(r.by_destination.len()));
                self.review_scroll = (self.review_scroll + 1).min(longest.saturating_sub(1));
                Vec::new()
            }
            KeyCode::Char('k') | KeyCode::Up if self.view == View::Review => {
                self.review_scroll = self.review_scroll.saturating_sub(1);
                Vec::new()
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
            KeyCode::Enter | KeyCode::Tab if self.view == View::Activity => {
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
                        self.set_status("this event is not an operation's", false);
                        Vec::new()
                    }
                }
            }
            KeyCode::Enter | KeyCode::Tab => {
                if self.selected_row().is_some() {
                    self.focus = Focus::Detail;
                }
                Vec::new()
            }
            KeyCode::Char('a') if self.view == View::Activity => {
                self.automation = !self.automation;
                self.selected = 0;
                self.set_status(
                    if self.automation {
                        "automation's events shown (a hides them)"
                    } else {
                        "people's actions only (a shows automation's too)"
                    },
                    false,
                );
                self.reload(Position::First, false)
            }
            KeyCode::Esc => {
                if let Some(b) = &self.bulk {
                    b.stop.stop();
                    self.set_status("stopping after the item under way…", false);
                    return Vec::new();
                }
                if !self.filter.value().is_empty() {
                    self.filter.reset();
                    return self.reload(Position::First, false);
                }
                self.status = None;
                Vec::new()
            }
            KeyCode::Char(c @ ('[' | ']')) if self.view == View::Review => {
                // round and round: each press changes the window
                let n = REVIEW_WINDOWS.len();
                self.review_window = if c == '[' {
                    (self.review_window + n - 1) % n
                } else {
                    (self.review_window + 1) % n
                };
                let seq = self.next_seq();
                vec![self.review_effect(seq)]
            }
            KeyCode::Char(c @ '1'..='6') => {
                let view = View::ALL[(c as usize) - ('1' as usize)];
                if view == self.view {
                    return Vec::new();
                }
                // Activity's filter speaks of actors and kinds, the lists' of operations
                if (view == View::Activity) != (self.view == View::Activity) {
                    self.filter.reset();
                }
                self.detail_full = false;
                self.view = view;
                self.selected = 0;
                self.rows.clear();
                self.detail = None;
                self.focus = Focus::List;
                self.reload(Position::First, false)
            }
            KeyCode::Char('/') => {
                self.mode = Mode::Filter;
                Vec::new()
            }
            KeyCode::Char('S') => {
                self.reverse = !self.reverse;
                self.selected = 0;
                self.to_top = true;
                let way = if self.reverse { "reversed" } else { "in order" };
                self.set_status(format!("sorted by {}, {way}", self.sort.label()), false);
                self.reload(Position::First, false)
            }
            KeyCode::Char('s') => {
                self.sort = self.sort.next();
                self.selected = 0;
                self.to_top = true;
                self.set_status(format!("sorted by {}", self.sort.label()), false);
                self.reload(Position::First, false)
            }
            KeyCode::Char('?') => {
                self.mode = Mode::Help;
                Vec::new()
            }
            KeyCode::Char(' ') => self.toggle_mark(),
            KeyCode::Char('A') => self.mark_all(),
            KeyCode::Char(c @ ('c' | 'C' | 'u' | 'r' | 'R' | 'x' | 'n' | 'P' | 'L')) => {
                if self.marks.is_empty() {
                    self.begin_action(c)
                } else {
                    self.begin_bulk(c)
                }
            }
            _ => Vec::new(),
        }
    }

    /// Whether a binding belongs to the view on screen (the help lists those).
    pub fn in_view(&self, b: &super::keymap::Binding) -> bool {
        use super::keymap::When;
        if !self.may(b) {
            return false;
        }
        match b.when {
            When::Activity => self.view == View::Activity,
            When::Review => self.view == View::Review,
            When::Always => true,
            _ => self.view.lists(),
        }
    }

    /// Whether this operator's role ever allows the binding (SPEC 17: a viewer is offered no
    /// action key, an operator no lead's key), whatever is selected.
    pub fn may(&self, b: &super::keymap::Binding) -> bool {
        use super::keymap::When;
        use crate::domain::Offer;
        match b.when {
            When::Offered if b.offers.iter().all(|o| *o == Offer::TakeOver) => self.role.leads(),
            When::Offered | When::Marks => self.role.acts(),
            When::Lead | When::Reveal => self.role.leads(),
            When::Always | When::Row | When::Activity | When::Review => true,
        }
    }

    /// Whether a binding applies to the selected item right now (footer, help and the key
    /// handler): an action's only when the ledger offers it to this operator on this item.
    pub fn applies(&self, b: &super::keymap::Binding) -> bool {
        use super::keymap::When;
        if !self.may(b) {
            return false;
        }
        let row = self.selected_row().filter(|_| self.online);
        match b.when {
            When::Always => true,
            When::Review => self.view == View::Review,
            When::Row => row.is_some(),
            // with items marked, the keys that act on many (each item is checked at the preview)
            When::Offered if !self.marks.is_empty() => b.bulk && self.online && self.bulk.is_none(),
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
        }
    }
}
