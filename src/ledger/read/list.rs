//! Lists of operations: keyset-paginated pages in the filter's order (never the whole queue), the
//! keys a filter matches, their count. All redacted; a corrected original says its correction.

use std::time::Duration;

use chrono::{DateTime, Utc};

use super::Reader;
use crate::domain::{Op, State};
use crate::error::Result;
use crate::ledger::views::OperationView;
use crate::store::{Cursor, ListQuery, Order, ms};

/// Which part of the ledger a list shows.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Scope {
    /// The exception queue, oldest exception first.
    #[default]
    Exceptions,
    /// Everything, oldest first.
    All,
    /// `pending`, `in_flight` and `retry_wait`.
    InProgress,
    /// `succeeded` and `closed`.
    Closed,
    /// Live claims held by the viewer.
    Mine,
}

/// The order of a list. Every order ends with the time (oldest first) and the id.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Sort {
    #[default]
    Age,
    State,
    Workflow,
    Destination,
}

impl Sort {
    pub const ALL: [Sort; 4] = [Sort::Age, Sort::State, Sort::Workflow, Sort::Destination];

    /// The next order in the cycle of the console's `s` key.
    pub fn next(self) -> Sort {
        let i = Sort::ALL.iter().position(|s| *s == self).unwrap_or(0);
        Sort::ALL[(i + 1) % Sort::ALL.len()]
    }

    pub fn label(self) -> &'static str {
        match self {
            Sort::Age => "age",
            Sort::State => "state",
            Sort::Workflow => "workflow",
            Sort::Destination => "destination",
        }
    }

    fn order(self) -> Order {
        match self {
            Sort::Age => Order::Time,
            Sort::State => Order::State,
            Sort::Workflow => Order::Workflow,
            Sort::Destination => Order::Destination,
        }
    }
}

#[derive(Clone, Debug, Default, PartialEq)]
pub struct ListFilter {
    pub scope: Scope,
    /// Only this state (the scope's own restriction still applies).
    pub state: Option<State>,
    pub workflow: Option<String>,
    /// Only items whose age is at least this.
    pub older_than: Option<Duration>,
    /// The terms of the filter (manual: The filter) (`list --where`, the console's `/`), all of which hold.
    pub query: crate::domain::filter::Filter,
    pub sort: Sort,
    /// The sort's order reversed (newest or last first).
    pub reverse: bool,
}

/// Where a page starts.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Position {
    First,
    /// This row and those after it.
    From(Cursor),
    After(Cursor),
    /// This row and those before it (a reversed list's refresh in place).
    UpTo(Cursor),
    Before(Cursor),
    Last,
}

/// One page of a list, in order, and whether there is more on either side.
#[derive(Clone, Debug, Default)]
pub struct Page {
    pub items: Vec<OperationView>,
    pub more_before: bool,
    pub more_after: bool,
    /// Where the next page starts (none at the end).
    pub next: Option<Cursor>,
}

/// The states and the time limit a list's scope and options ask for; `None` when they exclude
/// each other (a state outside the scope).
pub(super) fn scope_of(
    filter: &ListFilter,
    now: DateTime<Utc>,
) -> Option<(Vec<State>, Option<DateTime<Utc>>)> {
    let cutoff = |d: Duration| crate::domain::time::before(now, d);
    let mut states: Vec<State> = match filter.scope {
        Scope::InProgress => IN_PROGRESS.to_vec(),
        Scope::Closed => CLOSED.to_vec(),
        _ => Vec::new(),
    };
    if let Some(s) = filter.state {
        if !states.is_empty() && !states.contains(&s) {
            return None;
        }
        states = vec![s];
    }
    let not_after = match (filter.scope == Scope::Exceptions, filter.older_than) {
        (true, d) => Some(cutoff(d.unwrap_or_default())),
        (false, Some(d)) => Some(cutoff(d)),
        (false, None) => None,
    };
    Some((states, not_after))
}

/// What a list's filter asks of the store, from its first row (a page sets where it starts and
/// how many it takes; a count takes the filter alone).
pub(super) fn list_query<'a>(
    filter: &'a ListFilter,
    within: Option<&'a [String]>,
    viewer: &'a str,
    states: &'a [State],
    not_after: Option<DateTime<Utc>>,
    now: DateTime<Utc>,
) -> ListQuery<'a> {
    ListQuery {
        terms: &filter.query.terms,
        now,
        viewer,
        exceptions_only: filter.scope == Scope::Exceptions,
        states,
        workflow: filter.workflow.as_deref(),
        within,
        claimed_by: (filter.scope == Scope::Mine).then_some(viewer),
        team_unheld: None,
        not_after,
        order: filter.sort.order(),
        from: None,
        inclusive: false,
        backwards: false,
        limit: 0,
    }
}

const IN_PROGRESS: [State; 3] = [State::Pending, State::InFlight, State::RetryWait];

const CLOSED: [State; 2] = [State::Succeeded, State::Closed];

/// Whether a (redacted) row contains the filter text, as the console shows it.
fn view_matches(v: &OperationView, text: &str) -> bool {
    let has = |s: &str| s.to_lowercase().contains(text);
    has(&v.key)
        || has(&v.workflow)
        || has(&v.step)
        || has(&v.destination)
        || v.state.as_str().contains(text)
        || v.last_error.as_deref().is_some_and(has)
}

impl Reader<'_> {
    /// One page of operations, `limit` rows after `after` (a cursor from a previous page).
    pub async fn list(
        self,
        filter: &ListFilter,
        viewer: &str,
        after: Option<Cursor>,
        limit: usize,
    ) -> Result<Page> {
        let from = after.map_or(Position::First, Position::After);
        self.page(filter, viewer, &from, limit).await
    }

    /// One page of operations from `position`, in the filter's order. Only that page is read:
    /// keyset pagination on indexed columns, never the whole queue.
    pub async fn page(
        self,
        filter: &ListFilter,
        viewer: &str,
        position: &Position,
        limit: usize,
    ) -> Result<Page> {
        let filter = &*owned(&self.0.config, filter, viewer);
        let now = self.0.now();
        let limit = limit.max(1);
        let Some((states, not_after)) = scope_of(filter, now) else {
            return Ok(Page::default());
        };
        // A reversed list walks the same keyset the other way: its "after" is the order's
        // "before". `position` from here on is the position in the order's own direction.
        let flipped;
        let position = if filter.reverse {
            flipped = position.flipped();
            &flipped
        } else {
            position
        };
        let (from, backwards, inclusive) = position.keyset();
        let query = ListQuery {
            from,
            inclusive,
            backwards,
            limit: limit as i64,
            team_unheld: team_unheld(&self.0.config, filter, viewer),
            ..list_query(filter, self.0.scope(), viewer, &states, not_after, now)
        };
        let mut rows = self.0.store.page(&query).await?;
        let full = rows.len() >= limit;
        if backwards {
            rows.reverse();
        }
        let items: Vec<OperationView> = rows
            .into_iter()
            .map(|(id, op, paused)| {
                let cursor = cursor_of(filter, id, &op);
                self.view(op, cursor, viewer, paused, now)
            })
            .collect();
        let items = self.said_corrected(items).await?;
        let mut page = Page::of(items, position, full, backwards, filter.reverse);
        keep_what_shows(
            &mut page.items,
            filter,
            viewer,
            &self.0.config.teams_of(viewer),
        );
        Ok(page)
    }
}

impl Position {
    /// The same place in the order walked the other way (a reversed list).
    fn flipped(&self) -> Position {
        match self {
            Position::First => Position::Last,
            Position::Last => Position::First,
            Position::After(c) => Position::Before(c.clone()),
            Position::Before(c) => Position::After(c.clone()),
            Position::From(c) => Position::UpTo(c.clone()),
            Position::UpTo(c) => Position::From(c.clone()),
        }
    }

    /// Where a page starts in the order: the cursor, whether it walks backwards, whether the
    /// cursor's own row is in it.
    fn keyset(&self) -> (Option<&Cursor>, bool, bool) {
        match self {
            Position::First => (None, false, false),
            Position::From(c) => (Some(c), false, true),
            Position::After(c) => (Some(c), false, false),
            Position::Before(c) => (Some(c), true, false),
            Position::UpTo(c) => (Some(c), true, true),
            Position::Last => (None, true, false),
        }
    }
}

/// A row's place in the list's order: its sort column's value, its ordering time, its id.
fn cursor_of(filter: &ListFilter, id: i64, op: &Op) -> Cursor {
    let at = if filter.scope == Scope::Exceptions {
        op.exception_since.unwrap_or(op.created_at)
    } else {
        op.created_at
    };
    let group = match filter.sort {
        Sort::Age => None,
        Sort::State => Some(op.state.as_str().to_string()),
        Sort::Workflow => Some(op.workflow.clone()),
        Sort::Destination => Some(op.destination.clone()),
    };
    Cursor {
        group,
        at: ms(at),
        id,
    }
}

impl Page {
    /// A page of these rows (in the order's direction) read from `position`: whether there is
    /// more before and after it, and where the next one starts; `reverse` turns all of it round.
    fn of(
        mut items: Vec<OperationView>,
        position: &Position,
        full: bool,
        backwards: bool,
        reverse: bool,
    ) -> Page {
        let next = if full || backwards {
            items.last().map(|v| v.cursor.clone())
        } else {
            None
        };
        let (more_before, more_after) = if backwards {
            (
                full,
                matches!(position, Position::Before(_) | Position::UpTo(_)),
            )
        } else {
            (
                matches!(position, Position::After(_) | Position::From(_)),
                full,
            )
        };
        let next = if more_after { next } else { None };
        // reversed: the rows in the reversed order, its "more after" is the order's "before"
        let (next, more_before, more_after) = if reverse {
            items.reverse();
            let next = if more_before {
                items.last().map(|v| v.cursor.clone())
            } else {
                None
            };
            (next, more_after, more_before)
        } else {
            (next, more_before, more_after)
        };
        Page {
            items,
            more_before,
            more_after,
            next,
        }
    }
}

/// What the database matched on raw text, narrowed to what a reader sees: "Mine" is the
/// viewer's live claims, and a word matched only inside a redacted value must not show (it
/// would tell the typist the secret is there).
fn keep_what_shows(
    items: &mut Vec<OperationView>,
    filter: &ListFilter,
    viewer: &str,
    teams: &[&str],
) {
    if filter.scope == Scope::Mine {
        // and the exceptions their teams own that nobody holds
        items.retain(|v| {
            v.claimed_by.as_deref() == Some(viewer)
                || (v.claimed_by.is_none()
                    && v.owner.as_deref().is_some_and(|o| teams.contains(&o)))
        });
    }
    for t in filter.query.words() {
        items.retain(|v| view_matches(v, t));
    }
    for t in filter.query.negated_words() {
        items.retain(|v| !view_matches(v, t));
    }
}

/// View 2 (Mine) for a member of teams: the workflows the viewer's teams own, for the
/// exceptions nobody holds that it shows beside the viewer's own claims.
pub(super) fn team_unheld(
    config: &crate::config::Config,
    filter: &ListFilter,
    viewer: &str,
) -> Option<(Vec<String>, bool)> {
    (filter.scope == Scope::Mine)
        .then(|| config.teams_workflows(viewer))
        .flatten()
}

/// `owner:` in a filter (manual: Owners and notifications): `filter` with each owner term turned
/// into the workflows the config says it names, for `viewer` (whose teams `owner:mine` means).
pub(super) fn owned<'a>(
    config: &crate::config::Config,
    filter: &'a ListFilter,
    viewer: &str,
) -> std::borrow::Cow<'a, ListFilter> {
    use crate::domain::filter::Match;
    use std::borrow::Cow;
    if !filter
        .query
        .terms
        .iter()
        .any(|t| matches!(t.matches, Match::Owner(_)))
    {
        return Cow::Borrowed(filter);
    }
    let mut resolved = filter.clone();
    config.resolve_owners(&mut resolved.query, viewer);
    Cow::Owned(resolved)
}
