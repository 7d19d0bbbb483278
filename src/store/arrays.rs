//! PostgreSQL's way with many rows: each column one typed array, bound in order and read back
//! with `UNNEST`, so a statement's text and its parameter count stay the same whatever the number
//! of rows.

use super::columns::Kind;
use super::sql::Cell;

/// A column of many rows, as PostgreSQL takes it: one typed array.
pub(super) enum Array<'a> {
    Int(Vec<Option<i64>>),
    Text(Vec<Option<&'a str>>),
}

impl<'a> Array<'a> {
    pub(super) fn of(kind: Kind, cells: impl Iterator<Item = Cell<'a>>) -> Array<'a> {
        match kind {
            Kind::Int => Array::Int(cells.map(Cell::int).collect()),
            Kind::Text => Array::Text(cells.map(Cell::text).collect()),
        }
    }
}

/// A PostgreSQL statement over arrays, each bound in order.
pub(super) fn pg_query<'q>(
    sql: &'q str,
    arrays: Vec<Array<'q>>,
) -> sqlx::query::Query<'q, sqlx::Postgres, sqlx::postgres::PgArguments> {
    let mut q = super::bouncer::pg_statement(sql);
    for a in arrays {
        q = match a {
            Array::Int(v) => q.bind(v),
            Array::Text(v) => q.bind(v),
        };
    }
    q
}

/// `$first::T[], ...` for PostgreSQL arrays of these kinds.
pub(super) fn array_marks(first: usize, kinds: &[Kind]) -> String {
    kinds
        .iter()
        .enumerate()
        .map(|(i, k)| {
            let t = match k {
                Kind::Int => "BIGINT",
                Kind::Text => "TEXT",
            };
            format!("${}::{t}[]", first + i)
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// PostgreSQL's code for a transaction it broke to end a deadlock, or could not serialize.
pub(super) fn lost_a_race(e: &sqlx::Error) -> bool {
    matches!(e, sqlx::Error::Database(d) if matches!(d.code().as_deref(), Some("40P01" | "40001")))
}
