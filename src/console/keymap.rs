//! The console's keys, in one table: the footer, the help screen and the key handler all read it,
//! so they can never disagree with what the keys do. An action's binding names the staff actions
//! it stands for; it applies only when the ledger offers one of them for the selected item (the
//! transition rules' `offered`, carried on each row).

use crate::domain::Offer;

/// When a binding applies.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum When {
    Always,
    /// An operation is selected (and the database is reachable, for actions).
    Row,
    /// The ledger offers one of the binding's actions on the selected operation to this operator
    /// (with items marked: the action can be taken on many, `bulk`).
    Offered,
    /// Marking (a list view, no bulk action under way).
    Marks,
    /// The Activity view.
    Activity,
    /// The Review view (6).
    Review,
    /// An operation is selected and the operator is a lead (pause and resume, the manual's Running settle for a team).
    Lead,
    /// The detail pane has focus, shows a redacted field, and the operator is a lead.
    Reveal,
    /// A stalled run is selected in view 1 (manual: Runs).
    Run,
    /// View 1 (its items or their groups).
    Groups,
    /// Any view, for a person who acts (not a viewer), while no bulk action is under way.
    Acts,
}

#[derive(Clone, Copy, Debug)]
pub struct Binding {
    pub keys: &'static str,
    pub label: &'static str,
    pub help: &'static str,
    pub when: When,
    /// Shown in the footer (the rest only in `?`).
    pub footer: bool,
    /// The staff actions this key stands for (`When::Offered`).
    pub offers: &'static [Offer],
    /// With items marked, the key acts on all of them (bulk actions, manual: Many at once).
    pub bulk: bool,
}

pub const KEYMAP: &[Binding] = &[
    Binding {
        keys: "j/k g/G ↑/↓",
        label: "move",
        help: "move; g/G the first / last item; PgUp/PgDn a page",
        when: When::Always,
        footer: false,
        offers: &[],
        bulk: false,
    },
    Binding {
        keys: "Enter/Tab",
        label: "detail",
        help: "the detail pane (Enter again: full screen; j/k scroll)",
        when: When::Row,
        footer: false,
        offers: &[],
        bulk: false,
    },
    Binding {
        keys: "c/u/n/x",
        label: "run: claim release note close",
        help: "a stalled run (view 1): claim, release, note or close it",
        when: When::Run,
        footer: true,
        offers: &[],
        bulk: false,
    },
    Binding {
        keys: "t",
        label: "groups",
        help: "view 1: items / their groups; Enter: a group's items",
        when: When::Groups,
        footer: false,
        offers: &[],
        bulk: false,
    },
    Binding {
        keys: "Esc",
        label: "back",
        help: "back to the list, or clear the filter",
        when: When::Always,
        footer: false,
        offers: &[],
        bulk: false,
    },
    Binding {
        keys: "1-6",
        label: "views",
        help: "Exceptions, Mine, In progress, Closed, Activity, Review",
        when: When::Always,
        footer: false,
        offers: &[],
        bulk: false,
    },
    Binding {
        keys: "c",
        label: "claim",
        help: "claim the item to work it",
        when: When::Offered,
        footer: true,
        offers: &[Offer::Claim],
        bulk: true,
    },
    Binding {
        keys: "C",
        label: "take over",
        help: "take over another's live claim (asks a reason)",
        when: When::Offered,
        footer: true,
        offers: &[Offer::TakeOver],
        bulk: false,
    },
    Binding {
        keys: "u",
        label: "release",
        help: "release your claim",
        when: When::Offered,
        footer: true,
        offers: &[Offer::Release],
        bulk: true,
    },
    Binding {
        keys: "r",
        label: "reconcile",
        help: "reconcile: found (with the reference) or absent",
        when: When::Offered,
        footer: true,
        offers: &[Offer::ReconcileFound, Offer::ReconcileAbsent],
        bulk: false,
    },
    Binding {
        keys: "L",
        label: "look up",
        help: "look up at the destination now, then reconcile by its answer",
        when: When::Offered,
        footer: true,
        offers: &[Offer::LookUp],
        bulk: true,
    },
    Binding {
        keys: "R",
        label: "retry",
        help: "retry with the same key and a fresh budget",
        when: When::Offered,
        footer: true,
        offers: &[Offer::Retry],
        bulk: true,
    },
    Binding {
        keys: "x",
        label: "close",
        help: "close: resolution, reference or new key, note",
        when: When::Offered,
        footer: true,
        offers: &[Offer::Close],
        bulk: true,
    },
    Binding {
        keys: "e",
        label: "correct",
        help: "correct a rejected request's fields: sent once under a new key",
        when: When::Offered,
        footer: true,
        offers: &[Offer::Correct],
        bulk: false,
    },
    Binding {
        keys: "n",
        label: "note",
        help: "add a note to the history",
        when: When::Offered,
        footer: true,
        offers: &[Offer::Note],
        bulk: true,
    },
    Binding {
        keys: "Enter",
        label: "open",
        help: "open the event's operation",
        when: When::Activity,
        footer: true,
        offers: &[],
        bulk: false,
    },
    Binding {
        keys: "a",
        label: "automation",
        help: "show / hide automation's events (dispatcher, workflows)",
        when: When::Activity,
        footer: true,
        offers: &[],
        bulk: false,
    },
    Binding {
        keys: "[ ]",
        label: "window",
        help: "the review's window: 1, 7 or 30 days",
        when: When::Review,
        footer: true,
        offers: &[],
        bulk: false,
    },
    Binding {
        keys: "v",
        label: "reveal",
        help: "reveal a redacted field (a lead; asks a reason; audited)",
        when: When::Reveal,
        footer: true,
        offers: &[],
        bulk: false,
    },
    Binding {
        keys: "U",
        label: "undo",
        help: "take back your newest action (a bulk one shows what first)",
        when: When::Acts,
        footer: false,
        offers: &[],
        bulk: false,
    },
    Binding {
        keys: "Space/A",
        label: "mark",
        help: "mark; A: all it matches; c u L R x n act on all, e r C on one",
        when: When::Marks,
        footer: true,
        offers: &[],
        bulk: false,
    },
    Binding {
        keys: "/",
        label: "filter",
        help: "filter: state: wf: dest: owner: claimed: age> key: -term",
        when: When::Always,
        footer: true,
        offers: &[],
        bulk: false,
    },
    Binding {
        keys: "s",
        label: "sort",
        help: "sort by age, state, workflow, destination (S reverses)",
        when: When::Always,
        footer: true,
        offers: &[],
        bulk: false,
    },
    Binding {
        keys: "P",
        label: "pause",
        help: "pause / resume the item's workflow or destination",
        when: When::Lead,
        footer: true,
        offers: &[],
        bulk: false,
    },
    Binding {
        keys: "?",
        label: "help",
        help: "this help",
        when: When::Always,
        footer: true,
        offers: &[],
        bulk: false,
    },
    Binding {
        keys: "q",
        label: "quit",
        help: "quit (Ctrl-C too)",
        when: When::Always,
        footer: true,
        offers: &[],
        bulk: false,
    },
];

/// The binding of an action key (a staff action, or pause), if `c` is one.
pub fn action(c: char) -> Option<&'static Binding> {
    KEYMAP.iter().find(|b| {
        (!b.offers.is_empty() || b.when == When::Lead) && b.keys.chars().eq(std::iter::once(c))
    })
}
