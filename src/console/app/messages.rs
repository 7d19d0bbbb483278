//! What the console asks of the world (effects) and what comes back (messages).

use chrono::{DateTime, Utc};
use ratatui::crossterm::event::KeyEvent;

use crate::ledger::{
    BulkPreview, BulkReport, EventView, ListFilter, OperationDetail, Page, Position, StaffAction,
    Stats,
};

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
        filter: crate::domain::activity_filter::ActivityFilter,
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
    /// `stop` (manual: Many at once); progress comes back as `Msg::BulkProgress`, the answers as
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
    /// What taking back the person's newest action would do (`U`), changing nothing.
    UndoPreview,
    /// Take back the action with this id.
    Undo {
        action: String,
    },
    /// A lead's reveal of one redacted field (manual: Redaction): the event is written, the value returned.
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
    /// The stalled runs view 1 shows above its operations (manual: Runs), for request `seq`.
    Stalled {
        seq: u64,
        filter: ListFilter,
    },
    /// View 1's exceptions by group, for request `seq`.
    Groups {
        seq: u64,
        filter: ListFilter,
    },
    /// One run, for the detail pane.
    Run {
        run: String,
    },
    /// A person's action on a run as a whole.
    RunAction {
        run: String,
        action: crate::domain::run_action::RunAction,
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
    /// Seconds the replica the lists are read from is behind the primary (`None`: none).
    pub replica_lag: Option<i64>,
    /// When these were read: the oldest exception's age goes on from there between two reads.
    pub at: Option<DateTime<Utc>>,
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
    /// What taking back the person's newest action would do (`U`).
    UndoPreviewed(Result<crate::ledger::UndoReport, String>),
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
    /// The stalled runs for request `seq`.
    Stalled {
        seq: u64,
        runs: Result<Vec<crate::ledger::RunSummary>, String>,
    },
    /// View 1's groups for request `seq`.
    Groups {
        seq: u64,
        groups: Result<Vec<crate::ledger::ExceptionGroup>, String>,
    },
    /// One run, for the detail pane.
    Run {
        run: String,
        view: Result<Box<crate::ledger::RunView>, String>,
    },
    /// The review asked for by request `seq`.
    Reviewed {
        seq: u64,
        review: Result<Box<crate::ledger::Review>, String>,
    },
}

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
