//! The SQL of a list's query: which operations a page shows and in which order (a view's scope
//! and the filter (manual: The filter) terms), shared by a page, its count and the keys a bulk action selects;
//! and the values a statement binds.

use chrono::{DateTime, Utc};

use super::sql::{Cell, ms};
use crate::domain::State;
use crate::domain::filter::{Claimed, Match, Term};

/// A keyset position: the sort column's value (when sorting by one), the ordering time, the id.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Cursor {
    pub group: Option<String>,
    pub at: i64,
    pub id: i64,
}

/// The order of a page: by a column (then time and id), or by time and id alone.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) enum Order {
    #[default]
    Time,
    State,
    Workflow,
    Destination,
}

impl Order {
    pub(super) fn column(self) -> Option<&'static str> {
        match self {
            Order::Time => None,
            Order::State => Some("state"),
            Order::Workflow => Some("workflow"),
            Order::Destination => Some("destination"),
        }
    }
}

impl ListQuery<'_> {
    /// The time a list is ordered by: since an item became an exception, or since it was made.
    pub(super) fn time_column(&self) -> &'static str {
        if self.exceptions_only {
            "exception_since"
        } else {
            "created_at"
        }
    }
}

/// Which operations a page shows, in which order, and where it starts.
#[derive(Clone, Debug, Default)]
pub(crate) struct ListQuery<'a> {
    /// the filter (manual: The filter) terms, all of which hold; `now` and `viewer` read ages and `claimed:me`.
    pub terms: &'a [Term],
    pub now: DateTime<Utc>,
    pub viewer: &'a str,
    /// Only exceptions, ordered by when they became one; otherwise by creation.
    pub exceptions_only: bool,
    pub states: &'a [State],
    pub workflow: Option<&'a str>,
    /// Only these workflows (an automation's scope, the manual's The HTTP API); `None`: all.
    pub within: Option<&'a [String]>,
    pub claimed_by: Option<&'a str>,
    /// With `claimed_by` (view 2, Mine): also the exceptions nobody holds of these workflows
    /// (`true`) or of every workflow but these (`false`): what the viewer's teams own.
    pub team_unheld: Option<(Vec<String>, bool)>,
    /// Only rows whose ordering time is at or before this.
    pub not_after: Option<DateTime<Utc>>,
    pub order: Order,
    /// Rows strictly after (or, `backwards`, strictly before) this position.
    pub from: Option<&'a Cursor>,
    /// Include the row at `from` itself.
    pub inclusive: bool,
    /// Walk the order backwards (the rows come back nearest first).
    pub backwards: bool,
    pub limit: i64,
}

pub(super) enum Arg {
    Int(i64),
    Text(String),
}

/// ` WHERE a AND b`, or nothing when there is no condition.
pub(super) fn where_clause(cond: &[String]) -> String {
    if cond.is_empty() {
        String::new()
    } else {
        format!(" WHERE {}", cond.join(" AND "))
    }
}

pub(super) fn cells(args: &[Arg]) -> Vec<Cell<'_>> {
    args.iter()
        .map(|a| match a {
            Arg::Int(v) => Cell::Int(Some(*v)),
            Arg::Text(v) => Cell::Text(Some(v.as_str())),
        })
        .collect()
}

/// Appends a value and gives its placeholder.
pub(super) fn mark(args: &mut Vec<Arg>, a: Arg) -> String {
    args.push(a);
    format!("${}", args.len())
}

/// The conditions of a list's scope and options (before the terms (manual: The command line)).
fn scope_conditions(q: &ListQuery<'_>, time: &str, args: &mut Vec<Arg>, cond: &mut Vec<String>) {
    if q.exceptions_only {
        cond.push("exception_since IS NOT NULL".into());
    }
    if let Some(t) = q.not_after {
        let m = mark(args, Arg::Int(ms(t)));
        cond.push(format!("{time} <= {m}"));
    }
    if !q.states.is_empty() {
        let marks: Vec<String> = q
            .states
            .iter()
            .map(|s| mark(args, Arg::Text(s.as_str().to_string())))
            .collect();
        cond.push(format!("state IN ({})", marks.join(", ")));
    }
    if let Some(w) = q.workflow {
        let m = mark(args, Arg::Text(w.to_string()));
        cond.push(format!("workflow = {m}"));
    }
    if let Some(ws) = q.within {
        let marks: Vec<String> = ws
            .iter()
            .map(|w| mark(args, Arg::Text(w.clone())))
            .collect();
        cond.push(if marks.is_empty() {
            "1 = 0".into()
        } else {
            format!("workflow IN ({})", marks.join(", "))
        });
    }
    if let Some(c) = q.claimed_by {
        let m = mark(args, Arg::Text(c.to_string()));
        let Some((names, inside)) = &q.team_unheld else {
            cond.push(format!("claimed_by = {m}"));
            return;
        };
        let (free, now) = (
            mark(args, Arg::Int(ms(q.now))),
            mark(args, Arg::Int(ms(q.now))),
        );
        let marks: Vec<String> = names
            .iter()
            .map(|w| mark(args, Arg::Text(w.clone())))
            .collect();
        let within = match (marks.is_empty(), inside) {
            (true, true) => "1 = 0".to_string(),
            (true, false) => "1 = 1".to_string(),
            (false, true) => format!("workflow IN ({})", marks.join(", ")),
            (false, false) => format!("workflow NOT IN ({})", marks.join(", ")),
        };
        cond.push(format!(
            "(claimed_by = {m} OR ((claimed_by IS NULL OR claim_expires_at <= {free}) \
             AND exception_since IS NOT NULL AND exception_since <= {now} AND {within}))"
        ));
    }
}

/// The conditions of a list's filter (scope, states, workflow, claim, the terms (manual: The command line)),
/// shared by a page and its count; their values are appended to `args`.
pub(super) fn conditions(
    q: &ListQuery<'_>,
    time: &str,
    args: &mut Vec<Arg>,
    terms: bool,
) -> Vec<String> {
    let mut cond: Vec<String> = Vec::new();
    scope_conditions(q, time, args, &mut cond);
    // a negated bare word is left to the reader, who checks it against the redacted row
    for t in q
        .terms
        .iter()
        .filter(|t| terms && !(t.negated && matches!(t.matches, Match::Word(_))))
    {
        let now = ms(q.now);
        let live = |args: &mut Vec<Arg>| mark(args, Arg::Int(now));
        let sql = match &t.matches {
            Match::States(states) => {
                let marks: Vec<String> = states
                    .iter()
                    .map(|s| mark(args, Arg::Text(s.as_str().to_string())))
                    .collect();
                format!("state IN ({})", marks.join(", "))
            }
            Match::Workflow(v) => {
                format!("workflow = {}", mark(args, Arg::Text(v.clone())))
            }
            Match::Step(v) => format!("step = {}", mark(args, Arg::Text(v.clone()))),
            Match::Destination(v) => {
                format!("destination = {}", mark(args, Arg::Text(v.clone())))
            }
            Match::Action(v) => format!("action = {}", mark(args, Arg::Text(v.clone()))),
            Match::Claimed(c) => {
                let who = match c {
                    Claimed::By(name) => Some(name.clone()),
                    Claimed::Me => Some(q.viewer.to_string()),
                    Claimed::Nobody | Claimed::Anyone => None,
                };
                let at = live(args);
                match (c, who) {
                    (Claimed::Nobody, _) => {
                        format!("(claimed_by IS NULL OR claim_expires_at <= {at})")
                    }
                    (_, Some(name)) => format!(
                        "(claimed_by = {} AND claim_expires_at > {at})",
                        mark(args, Arg::Text(name))
                    ),
                    _ => format!("(claimed_by IS NOT NULL AND claim_expires_at > {at})"),
                }
            }
            Match::AgeOver(d) => {
                let t0 = ms(crate::domain::time::before(q.now, *d));
                format!("{time} <= {}", mark(args, Arg::Int(t0)))
            }
            Match::AgeUnder(d) => {
                let t0 = ms(crate::domain::time::before(q.now, *d));
                format!("{time} > {}", mark(args, Arg::Int(t0)))
            }
            // exact on both backends (SQLite's LIKE ignores case, PostgreSQL's does not)
            Match::KeyPrefix(p) => format!(
                "substr(key, 1, {}) = {}",
                p.chars().count(),
                mark(args, Arg::Text(p.clone()))
            ),
            Match::Key(k) => format!("key = {}", mark(args, Arg::Text(k.clone()))),
            Match::Run(r) => format!("run = {}", mark(args, Arg::Text(r.clone()))),
            Match::Group(g) => format!("group_id = {}", mark(args, Arg::Text(g.clone()))),
            // no operation is stalled: a run is
            Match::Stalled => "1 = 0".into(),
            Match::Workflows { names, inside } => {
                if names.is_empty() {
                    if *inside { "1 = 0" } else { "1 = 1" }.into()
                } else {
                    let marks: Vec<String> = names
                        .iter()
                        .map(|w| mark(args, Arg::Text(w.clone())))
                        .collect();
                    let not = if *inside { "" } else { "NOT " };
                    format!("workflow {not}IN ({})", marks.join(", "))
                }
            }
            // the ledger turns every owner term into its workflows before it asks
            Match::Owner(_) => "1 = 0".into(),
            Match::Word(w) => {
                let n = mark(args, Arg::Text(format!("%{}%", like_escaped(w))));
                words_match(&n)
            }
        };
        // a negated term keeps the rows where it is false or unknown (a NULL claim)
        cond.push(if t.negated {
            format!("({sql}) IS NOT TRUE")
        } else {
            sql
        });
    }
    cond
}

/// Text for a LIKE pattern: its own `%`, `_` and `\` match only themselves.
fn like_escaped(text: &str) -> String {
    text.chars()
        .flat_map(|c| match c {
            '%' | '_' | '\\' => vec!['\\', c],
            c => vec![c],
        })
        .collect()
}

/// The text a bare word of the filter is looked for in: the key, workflow, step, destination,
/// state and error, joined by spaces (a word holds no space, so it is found here exactly where it
/// is found in one of them). Schema 15 indexes this very expression for the exceptions.
pub(crate) const EXCEPTION_TEXT: &str = "LOWER(key || ' ' || workflow || ' ' || step || ' ' || destination || ' ' || state || ' ' || COALESCE(last_error, ''))";

/// A bare word of the filter: found in the key, workflow, step, destination, state or error.
fn words_match(n: &str) -> String {
    format!("{EXCEPTION_TEXT} LIKE {n} ESCAPE '\\'")
}
