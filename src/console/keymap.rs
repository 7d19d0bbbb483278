//! The console's keys, in one table: the footer and the help screen are generated from it, so
//! they can never disagree with what the keys do.

/// When a binding applies.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum When {
    Always,
    /// An operation is selected (and the database is reachable, for actions).
    Row,
    /// The selected operation may change state (not terminal).
    Open,
}

#[derive(Clone, Copy, Debug)]
pub struct Binding {
    pub keys: &'static str,
    pub label: &'static str,
    pub help: &'static str,
    pub when: When,
    /// Shown in the footer (the rest only in `?`).
    pub footer: bool,
}

pub const KEYMAP: &[Binding] = &[
    Binding {
        keys: "j/k ↑/↓",
        label: "move",
        help: "move the selection",
        when: When::Always,
        footer: false,
    },
    Binding {
        keys: "g/G",
        label: "first/last",
        help: "first / last item",
        when: When::Always,
        footer: false,
    },
    Binding {
        keys: "PgUp/PgDn",
        label: "page",
        help: "a page up / down",
        when: When::Always,
        footer: false,
    },
    Binding {
        keys: "Enter/Tab",
        label: "detail",
        help: "focus the detail pane (j/k scroll it)",
        when: When::Row,
        footer: false,
    },
    Binding {
        keys: "Esc",
        label: "back",
        help: "back to the list, or clear the filter",
        when: When::Always,
        footer: false,
    },
    Binding {
        keys: "1-5",
        label: "views",
        help: "Exceptions, Mine, In progress, Closed, Activity",
        when: When::Always,
        footer: false,
    },
    Binding {
        keys: "c",
        label: "claim",
        help: "claim the item to work it",
        when: When::Open,
        footer: true,
    },
    Binding {
        keys: "u",
        label: "release",
        help: "release your claim",
        when: When::Open,
        footer: true,
    },
    Binding {
        keys: "r",
        label: "reconcile",
        help: "reconcile: found (with the reference) or absent",
        when: When::Open,
        footer: true,
    },
    Binding {
        keys: "R",
        label: "retry",
        help: "retry with the same key and a fresh budget",
        when: When::Open,
        footer: true,
    },
    Binding {
        keys: "x",
        label: "close",
        help: "close: resolution, reference or new key, note",
        when: When::Open,
        footer: true,
    },
    Binding {
        keys: "n",
        label: "note",
        help: "add a note to the history",
        when: When::Row,
        footer: true,
    },
    Binding {
        keys: "P",
        label: "pause",
        help: "pause / resume the item's workflow",
        when: When::Row,
        footer: false,
    },
    Binding {
        keys: "/",
        label: "filter",
        help: "filter by key, workflow, step, destination, state, error",
        when: When::Always,
        footer: true,
    },
    Binding {
        keys: "s",
        label: "sort",
        help: "sort by age, state, workflow, destination",
        when: When::Always,
        footer: true,
    },
    Binding {
        keys: "?",
        label: "help",
        help: "this help",
        when: When::Always,
        footer: true,
    },
    Binding {
        keys: "q",
        label: "quit",
        help: "quit (Ctrl-C too)",
        when: When::Always,
        footer: true,
    },
];
