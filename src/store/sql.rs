//! Statement and row plumbing shared by both backends: bound cells, placeholder lists, times as
//! milliseconds, a statement run on either driver (SQLite's prepared once per connection), and
//! reading a row's cells whichever driver returned it.

use chrono::{DateTime, Utc};
use sqlx::postgres::{PgArguments, PgRow};
use sqlx::query::Query;
use sqlx::{Postgres, Row};

use rusqlite::{CachedStatement, Connection};

use super::Db;
pub(crate) use super::driver::{blocking, corrupt, db, err, ms, opt_ms, time};
use crate::error::Result;

/// A statement prepared (once per connection) with its cells bound: `$n` names a parameter
/// (it may appear twice), `?` takes the next.
pub(crate) fn prepare<'c>(conn: &'c Connection, s: &Stmt<'_>) -> Result<CachedStatement<'c>> {
    let mut stmt = conn.prepare_cached(&s.sql).map_err(err)?;
    let numbered = stmt.parameter_name(1).is_some_and(|n| n.starts_with('$'));
    for (i, cell) in s.cells.iter().enumerate() {
        let index = if numbered {
            match stmt.parameter_index(&format!("${}", i + 1)).map_err(err)? {
                Some(index) => index,
                None => continue,
            }
        } else {
            i + 1
        };
        match cell {
            Cell::Int(v) => stmt.raw_bind_parameter(index, v),
            Cell::Text(v) => stmt.raw_bind_parameter(index, v),
        }
        .map_err(err)?;
    }
    Ok(stmt)
}

/// A bound value: settle stores integers and texts only.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum Cell<'a> {
    Int(Option<i64>),
    Text(Option<&'a str>),
}

impl<'a> Cell<'a> {
    /// The integer it holds (`None` for a text cell).
    pub(crate) fn int(self) -> Option<i64> {
        match self {
            Cell::Int(v) => v,
            Cell::Text(_) => None,
        }
    }

    /// The text it holds (`None` for an integer cell).
    pub(crate) fn text(self) -> Option<&'a str> {
        match self {
            Cell::Text(v) => v,
            Cell::Int(_) => None,
        }
    }
}

/// A statement with its parameters, written once and run on either backend.
#[derive(Clone, Debug)]
pub(crate) struct Stmt<'a> {
    pub sql: String,
    pub cells: Vec<Cell<'a>>,
    /// PostgreSQL: planned anew with its values each time (unnamed), never by a generic plan.
    pub planned_each_time: bool,
}

impl<'a> Stmt<'a> {
    pub(crate) fn new(sql: impl Into<String>, cells: Vec<Cell<'a>>) -> Stmt<'a> {
        Stmt {
            sql: sql.into(),
            cells,
            planned_each_time: false,
        }
    }

    /// PostgreSQL plans this statement with its values each time it runs: for one whose best plan
    /// depends on them (a word of the filter), where a plan made once for any value would do for
    /// none.
    pub(crate) fn planned_each_time(mut self) -> Self {
        self.planned_each_time = true;
        self
    }

    /// The statement as a PostgreSQL query, its cells bound in order.
    fn pg(&self) -> Query<'_, Postgres, PgArguments> {
        let mut q = super::bouncer::pg_statement(&self.sql);
        if self.planned_each_time {
            q = q.persistent(false);
        }
        for c in &self.cells {
            q = match *c {
                Cell::Int(v) => q.bind(v),
                Cell::Text(v) => q.bind(v),
            };
        }
        q
    }

    /// Every row the statement answers, each read by `decode`.
    pub(crate) async fn rows<T>(
        &self,
        conn: Db<'_>,
        decode: impl Fn(&dyn Cells) -> Result<T>,
    ) -> Result<Vec<T>> {
        match conn {
            Db::Sqlite(c) => blocking(|| {
                let mut st = prepare(c, self)?;
                let mut rows = st.raw_query();
                let mut out = Vec::new();
                while let Some(row) = rows.next().map_err(err)? {
                    out.push(decode(row)?);
                }
                Ok(out)
            }),
            Db::Postgres(c) => {
                let rows = self.pg().fetch_all(c).await.map_err(db)?;
                rows.iter().map(|r| decode(r)).collect()
            }
        }
    }

    /// The first row the statement answers, if any.
    pub(crate) async fn row<T>(
        &self,
        conn: Db<'_>,
        decode: impl Fn(&dyn Cells) -> Result<T>,
    ) -> Result<Option<T>> {
        match conn {
            Db::Sqlite(c) => blocking(|| {
                let mut st = prepare(c, self)?;
                let mut rows = st.raw_query();
                match rows.next().map_err(err)? {
                    Some(row) => decode(row).map(Some),
                    None => Ok(None),
                }
            }),
            Db::Postgres(c) => {
                let row = self.pg().fetch_optional(c).await.map_err(db)?;
                row.as_ref().map(|r| decode(r)).transpose()
            }
        }
    }

    /// The one row the statement must answer.
    pub(crate) async fn one<T>(
        &self,
        conn: Db<'_>,
        decode: impl Fn(&dyn Cells) -> Result<T>,
    ) -> Result<T> {
        self.row(conn, decode)
            .await?
            .ok_or_else(|| corrupt("a count that came back empty"))
    }

    /// Runs the statement; how many rows it wrote.
    pub(crate) async fn execute(&self, conn: Db<'_>) -> Result<u64> {
        match conn {
            Db::Sqlite(c) => blocking(|| {
                let mut st = prepare(c, self)?;
                st.raw_execute().map(|n| n as u64).map_err(err)
            }),
            Db::Postgres(c) => self
                .pg()
                .execute(c)
                .await
                .map(|r| r.rows_affected())
                .map_err(db),
        }
    }
}

impl Db<'_> {
    /// Runs several statements without parameters (a migration).
    pub(crate) async fn execute_batch(self, sql: &str) -> Result<()> {
        match self {
            Db::Sqlite(c) => blocking(|| c.execute_batch(sql)).map_err(err),
            Db::Postgres(c) => sqlx::raw_sql(sql).execute(c).await.map(|_| ()).map_err(db),
        }
    }
}

/// How a statement names its parameters.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Marks {
    /// `$1, $2, ...`: both backends; a parameter may appear twice.
    Numbered,
    /// SQLite's plain `?`, bound in the order they appear. SQLite finds a numbered parameter by
    /// walking the statement's list of names, so binding hundreds of them (a round's VALUES
    /// lists) costs their number squared.
    InOrder,
}

/// `($first, ..., $first+n-1)` (or `(?, ...)`).
pub(crate) fn marks(style: Marks, first: usize, n: usize) -> String {
    let cells: Vec<String> = (0..n)
        .map(|i| match style {
            Marks::Numbered => format!("${}", first + i),
            Marks::InOrder => "?".to_string(),
        })
        .collect();
    format!("({})", cells.join(", "))
}

/// `rows` lists of `width` plain `?` marks, comma-separated: a multi-row `VALUES` on SQLite.
pub(crate) fn rows_of_marks(rows: usize, width: usize) -> String {
    let row = marks(Marks::InOrder, 1, width);
    let mut out = String::with_capacity(rows * (row.len() + 2));
    for i in 0..rows {
        if i > 0 {
            out.push_str(", ");
        }
        out.push_str(&row);
    }
    out
}

/// The two kinds of cell settle stores, read from either driver's row.
pub(crate) trait Cells {
    fn int(&self, col: Col) -> Result<Option<i64>>;
    fn text(&self, col: Col) -> Result<Option<String>>;
}

/// A column by name, or by position (the operation columns, read on every list row: a lookup by
/// name hashes the name each time).
#[derive(Clone, Copy, Debug)]
pub(crate) enum Col {
    Name(&'static str),
    /// Its position in the statement's columns, and its name (for a message about it).
    At(usize, &'static str),
}

impl From<&'static str> for Col {
    fn from(name: &'static str) -> Col {
        Col::Name(name)
    }
}

impl Col {
    fn name(self) -> &'static str {
        match self {
            Col::Name(n) => n,
            Col::At(_, n) => n,
        }
    }
}

impl Cells for PgRow {
    fn int(&self, col: Col) -> Result<Option<i64>> {
        match col {
            Col::Name(n) => self.try_get::<Option<i64>, _>(n),
            Col::At(i, _) => self.try_get::<Option<i64>, _>(i),
        }
        .map_err(|_| corrupt(col.name()))
    }
    fn text(&self, col: Col) -> Result<Option<String>> {
        match col {
            Col::Name(n) => self.try_get::<Option<String>, _>(n),
            Col::At(i, _) => self.try_get::<Option<String>, _>(i),
        }
        .map_err(|_| corrupt(col.name()))
    }
}

impl Cells for rusqlite::Row<'_> {
    fn int(&self, col: Col) -> Result<Option<i64>> {
        match col {
            Col::Name(n) => self.get::<_, Option<i64>>(n),
            Col::At(i, _) => self.get::<_, Option<i64>>(i),
        }
        .map_err(|_| corrupt(col.name()))
    }
    fn text(&self, col: Col) -> Result<Option<String>> {
        match col {
            Col::Name(n) => self.get::<_, Option<String>>(n),
            Col::At(i, _) => self.get::<_, Option<String>>(i),
        }
        .map_err(|_| corrupt(col.name()))
    }
}

pub(crate) trait FromCell: Sized {
    fn read(row: &dyn Cells, col: Col) -> Result<Self>;
}

impl FromCell for Option<i64> {
    fn read(row: &dyn Cells, col: Col) -> Result<Self> {
        row.int(col)
    }
}

impl FromCell for i64 {
    fn read(row: &dyn Cells, col: Col) -> Result<Self> {
        row.int(col)?.ok_or_else(|| corrupt(col.name()))
    }
}

impl FromCell for Option<String> {
    fn read(row: &dyn Cells, col: Col) -> Result<Self> {
        row.text(col)
    }
}

impl FromCell for String {
    fn read(row: &dyn Cells, col: Col) -> Result<Self> {
        row.text(col)?.ok_or_else(|| corrupt(col.name()))
    }
}

pub(crate) fn get<T: FromCell>(row: &dyn Cells, col: impl Into<Col>) -> Result<T> {
    T::read(row, col.into())
}

pub(crate) fn get_time(row: &dyn Cells, col: impl Into<Col>) -> Result<Option<DateTime<Utc>>> {
    Ok(get::<Option<i64>>(row, col)?.map(time))
}
