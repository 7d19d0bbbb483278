//! The console's state and how keys and results change it. No terminal and no database here:
//! `update` returns the work to do (`Effect`s), and the event loop runs it in spawned tasks.
//!
//! Rooms: `messages.rs` the messages, effects and the header; `update.rs` results folded in;
//! `keys.rs` what a key does and which keys apply; `actions.rs` a staff action begun; `form.rs` the
//! forms that ask what an action needs; `correct.rs` a correction's form over the payload's fields;
//! `lookup.rs` a look-up at the destination; `loads.rs` pages asked for; the components, each with
//! its state and keys: `review.rs` view 6, `stalled.rs` view 1's stalled runs (their keys in
//! `runs.rs`), `groups.rs` view 1's groups, `marks.rs` the marked keys (what acts on them in
//! `incident.rs`), `undo.rs` `U` taking an action back, `status.rs` the status line.

use chrono::{DateTime, Utc};
use tui_input::Input;

mod actions;
mod correct;
mod form;
mod groups;
pub(crate) mod incident;
mod keys;
mod loads;
pub(crate) mod lookup;
mod marks;
mod messages;
mod review;
mod runs;
mod stalled;
mod status;
pub(crate) mod undo;
mod update;

pub use correct::summary as correction_summary;
pub use form::{ActionKind, Form, FormStep};
pub use groups::GroupsPanel;
pub use marks::Marks;
pub use messages::{Effect, Header, Msg, Place, StopFlag};
pub use review::{REVIEW_WINDOWS, ReviewView};
pub use stalled::StalledRuns;
pub use status::Status;

use crate::ledger::{EventView, OperationDetail, OperationView, Position, Scope, Sort};

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
    /// The review after a release (manual: The review after a release): exception age, opened against resolved, time to
    /// resolve, duplicates.
    Review,
}

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
    /// What taking back one's newest action would do, waiting for `y` (`U`).
    Undo(Box<crate::ledger::UndoReport>),
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

pub struct App {
    pub database: String,
    pub operator: String,
    /// What the operator may do (manual: Running settle for a team): the footer and help offer only that.
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
    /// View 6, the review after a release.
    pub review: ReviewView,
    pub detail: Option<OperationDetail>,
    /// View 1's stalled runs (manual: Runs), shown above its operations.
    pub stalled: StalledRuns,
    /// View 1's groups, shown instead of its items (`t`).
    pub groups: GroupsPanel,
    /// How many items of the view the filter matches, once counted (for request `count_seq`).
    pub filter_count: Option<i64>,
    count_seq: u64,
    pub detail_scroll: u16,
    /// Marked keys (`Space`, `A`): the action keys act on all of them (manual: Many at once).
    pub marks: Marks,
    /// A bulk action under way.
    pub bulk: Option<BulkRun>,
    /// A revealed value (key, field, value): shown while that item's detail pane stays open.
    pub revealed: Option<(String, String, String)>,
    /// Rows another writer changed, and when it was seen: highlighted for `CHANGED_FOR`.
    pub changed: std::collections::HashMap<String, DateTime<Utc>>,
    pub header: Header,
    pub status: Status,
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
    /// How long an action can be taken back (`U`; the config's `undo_window`).
    pub undo_window: std::time::Duration,
    seq: u64,
    last_event: Option<i64>,
    pub quit: bool,
}

impl App {
    pub fn new(database: &str, operator: &str) -> App {
        let mut status = Status::default();
        status.set(
            "oldest exceptions first · j/k move · Tab details · / filter · ? all keys",
            false,
            Utc::now(),
        );
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
            review: ReviewView::default(),
            detail: None,
            stalled: StalledRuns::default(),
            groups: GroupsPanel::default(),
            detail_scroll: 0,
            marks: Marks::default(),
            bulk: None,
            revealed: None,
            changed: Default::default(),
            filter_count: None,
            count_seq: 0,
            header: Header::default(),
            status,
            online: true,
            loading: true,
            loaded_once: false,
            spinner: 0,
            viewport: 10,
            now: Utc::now(),
            age_thresholds: (3_600, 86_400),
            undo_window: std::time::Duration::from_secs(15 * 60),
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
        if self.view == View::Activity || self.selected_run().is_some() {
            return None;
        }
        self.rows.get(self.selected)
    }
}
