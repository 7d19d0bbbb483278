//! The statement of one keyset page (pagination on indexed columns, never the whole queue),
//! with what PostgreSQL's pages of words add (`words.rs`): a bound on the order, the view's rows
//! without the filter, the rows sorted apart from the order's index.

use super::sql::{Cells, Stmt, get};
use super::terms::{Arg, Cursor, ListQuery, cells, conditions, mark, where_clause};
use super::{Store, columns};
use crate::domain::Op;
use crate::domain::next_step::Paused;
use crate::error::Result;

/// A page's statement beyond its query: a bound on the order (rows before, or from, a position
/// in the walk's direction), the bare words left out, its rows sorted apart from the order's
/// index.
#[derive(Clone, Copy, Default)]
pub(super) struct Extra<'a> {
    pub bound: Option<Bound<'a>>,
    /// Leave the filter's terms out: only the view's scope (the rows the words are looked for in).
    pub no_terms: bool,
    /// Sort the matching rows rather than walk an index in the order: the planner then reads
    /// only the rows that match, by whichever index finds them.
    pub sorted_apart: bool,
}

/// A bound on a page's order, in the walk's direction.
#[derive(Clone, Copy)]
pub(super) enum Bound<'a> {
    /// Only the rows before this position.
    Before(&'a Cursor),
    /// Only the rows from this position on (itself included).
    From(&'a Cursor),
}

impl Store {
    pub(super) async fn page_rows(&self, stmt: &Stmt<'_>) -> Result<Vec<(i64, Op, Paused)>> {
        stmt.rows(super::replica::reads(self).conn().await?.db(), page_row)
            .await
    }
}

/// One row of a page: the operation, and whether its workflow or destination is paused.
pub(super) fn page_row(r: &dyn Cells) -> Result<(i64, Op, Paused)> {
    let (id, op) = columns::decode(r)?;
    let workflow: i64 = get(r, columns::AFTER)?;
    let destination: i64 = get(r, columns::AFTER_NEXT)?;
    let paused = Paused {
        workflow: workflow != 0,
        destination: destination != 0,
    };
    Ok((id, op, paused))
}

/// The columns of a page's order (the sort column, the ordering time, the id).
pub(super) fn order_columns(q: &ListQuery<'_>) -> String {
    let time = q.time_column();
    match q.order.column() {
        Some(g) => format!("{g}, {time}, id"),
        None => format!("{time}, id"),
    }
}

/// A page's `ORDER BY` list, in the walk's direction; `sorted_apart`: as expressions no index
/// holds, so that the rows are sorted rather than walked.
pub(super) fn order_by(q: &ListQuery<'_>, sorted_apart: bool) -> String {
    let direction = if q.backwards { " DESC" } else { "" };
    order_columns(q)
        .split(", ")
        .map(|c| match (sorted_apart, c) {
            (false, c) => format!("{c}{direction}"),
            (true, c) if q.order.column() == Some(c) => format!("{c} || ''{direction}"),
            (true, c) => format!("{c} + 0{direction}"),
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// `(columns) cmp (marks)` for a keyset position.
fn keyset(q: &ListQuery<'_>, c: &Cursor, cmp: &str, args: &mut Vec<Arg>) -> String {
    let mut marks = Vec::new();
    if q.order.column().is_some() {
        marks.push(mark(args, Arg::Text(c.group.clone().unwrap_or_default())));
    }
    marks.push(mark(args, Arg::Int(c.at)));
    marks.push(mark(args, Arg::Int(c.id)));
    format!("({}) {cmp} ({})", order_columns(q), marks.join(", "))
}

/// The conditions of a page: its filter, where it starts, and `extra`'s bound.
pub(super) fn page_conditions(
    q: &ListQuery<'_>,
    extra: Extra<'_>,
    args: &mut Vec<Arg>,
) -> Vec<String> {
    let mut cond = conditions(q, q.time_column(), args, !extra.no_terms);
    let after = |back: bool| if back { "<" } else { ">" };
    if let Some(c) = q.from {
        let cmp = format!(
            "{}{}",
            after(q.backwards),
            if q.inclusive { "=" } else { "" }
        );
        cond.push(keyset(q, c, &cmp, args));
    }
    match extra.bound {
        Some(Bound::Before(c)) => cond.push(keyset(q, c, after(!q.backwards), args)),
        Some(Bound::From(c)) => {
            let cmp = format!("{}=", after(q.backwards));
            cond.push(keyset(q, c, &cmp, args));
        }
        None => {}
    }
    cond
}

/// A statement's text and its values.
pub(super) struct Sql {
    pub text: String,
    pub args: Vec<Arg>,
}

impl Sql {
    pub(super) fn stmt(&self) -> Stmt<'_> {
        Stmt::new(self.text.as_str(), cells(&self.args))
    }
}

/// The statement of a page of `q`, with `extra`.
pub(super) fn page_statement(q: &ListQuery<'_>, extra: Extra<'_>) -> Sql {
    let mut args: Vec<Arg> = Vec::new();
    let cond = page_conditions(q, extra, &mut args);
    let limit = mark(&mut args, Arg::Int(q.limit));
    let sql = format!(
        "SELECT {}, COALESCE((SELECT paused FROM workflows w WHERE w.name = operations.workflow), 0) \
         AS workflow_paused, \
         COALESCE((SELECT paused FROM destinations d WHERE d.name = operations.destination), 0) \
         AS destination_paused FROM operations{} ORDER BY {} LIMIT {limit}",
        columns::select(),
        where_clause(&cond),
        order_by(q, extra.sorted_apart),
    );
    Sql { text: sql, args }
}
