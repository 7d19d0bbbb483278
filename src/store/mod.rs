//! Storage: the only part of settle that knows a database exists.
//!
//! The ledger asks a [`Store`] for named operations, in a write transaction ([`in_tx!`],
//! through a [`Tx`]) or on a pooled connection for reads; it never sees a connection, a pool or
//! SQL. Each backend is one variant and one driver: SQLite (embedded, WAL) through its own C API
//! (`rusqlite`, chosen by measurement: see `sqlite.rs`), and PostgreSQL (shared) through sqlx's
//! native driver. A statement that reads the same on both is written once and run on either
//! ([`sql::Stmt`] on a [`Db`]); where a backend has a better way it has its own: PostgreSQL writes
//! many rows through arrays (`UNNEST`) in one statement and takes due work with `FOR UPDATE SKIP
//! LOCKED`; SQLite writes a change's rows through statements prepared once per connection, inside
//! a `BEGIN IMMEDIATE` transaction that holds the database from its start.
//!
//! The rooms: `conn` (the store, its transactions and connections), `connect` (opening one),
//! `driver` (the drivers' errors, blocking calls, times), `bouncer` (PostgreSQL behind
//! PgBouncer), `columns` (the operation's columns, once), `sql` (statements and rows), `sqlite`
//! (the SQLite driver's connections and transactions), `open` (URLs, files and profiles), `ops`
//! (operations and change sets written), `attempts` (attempts and audit events), `arrays`
//! (PostgreSQL's many rows as arrays), `work` (the dispatcher's due work, budgets and
//! heartbeats), `workflows` (pause flags and thresholds), `pages` (lists, counts and the history
//! readers see), `pg` (what only PostgreSQL has: statistics, notifications), `migrate`.
//!
//! Rooms: `conn.rs` the pool and a write transaction (`Tx`), `connect.rs` and `open.rs` opening,
//! `hosts.rs` a multi-host URL and its failover, `replica.rs` a hot standby, `driver.rs` what every
//! statement needs of the drivers, `bouncer.rs` PgBouncer, `sql.rs` a statement and its arguments,
//! `arrays.rs` PostgreSQL's arrays, `columns.rs` the column list; statements by subject: `ops.rs`,
//! `attempts.rs`, `pages.rs` and `page_sql.rs` what readers see, `terms.rs` a filter's SQL,
//! `words.rs`, `history.rs`, `counts.rs`, `work.rs`, `workflows.rs`, `review.rs`, `runs.rs`,
//! `run_writes.rs`, `run_review.rs`, `prune.rs`, `rates.rs`, `notify.rs` the notices' inbox, groups
//! and lease, `outbox.rs` the messages, `pg.rs` what only PostgreSQL has, `plans.rs` how a write is
//! planned, `group_load.rs` the group writer's reads; `migrate.rs` the migrations, `group_ids.rs`
//! schema 21's own step, `undo.rs` a person's actions found again to take them back.

mod arrays;
mod attempts;
mod bouncer;
mod columns;
mod conn;
mod connect;
mod counts;
mod driver;
mod group_ids;
mod group_load;
mod history;
mod hosts;
mod migrate;
mod notify;
mod open;
mod ops;
mod outbox;
mod page_sql;
mod pages;
mod pg;
mod plans;
mod prune;
mod rates;
pub(crate) mod replica;
pub mod review;
mod run_review;
mod run_writes;
mod runs;
mod sql;
mod sqlite;
mod terms;
mod undo;
mod words;
mod work;
mod workflows;

pub(crate) use attempts::{AttemptWrite, NewEvent};
pub use conn::Store;
pub(crate) use conn::{Conn, Db, Open, TRIES, Tried, Tx, in_tx};
pub(crate) use history::EventRow;
pub use migrate::SCHEMA_VERSION;
pub(crate) use notify::{GroupState, Notice, TakenNotice};
pub use open::{Backend, Profile, display_url, missing_ledger};
pub(crate) use outbox::MessageRow;
pub(crate) use pg::Listener;
pub(crate) use prune::Prunable;
pub(crate) use rates::{Take, UNIT};
pub(crate) use runs::{RunKept, RunOpRow, RunWrite, StoredRun};
pub(crate) use sql::ms;
pub use terms::Cursor;
pub(crate) use terms::{ListQuery, Order};
pub(crate) use undo::{ActionEvent, action_events, changes_after, last_action};
pub use workflows::Pausable;
pub(crate) use workflows::WorkflowRow;

#[cfg(test)]
#[path = "tests.rs"]
mod store_tests;
