//! The store's own tests, on SQLite and (when `SETTLE_TEST_POSTGRES_URL` names a server) on
//! PostgreSQL: the columns against the migrations, every column written and read back, and a
//! change set that loses its compare-and-set leaving nothing behind.

use chrono::{DateTime, TimeDelta, Utc};

use super::columns::{Kind, OpCol, Written};
use super::ops::Opened;
use super::sql::{Cell, Stmt, get};
use super::{AttemptWrite, NewEvent, Open, Store, Tx};
use crate::domain::{Claim, Op, Outcome, Resolution, State};

/// A store on a fresh database: a SQLite file, or a new PostgreSQL database dropped afterwards.
pub(super) struct Fresh {
    pub(super) store: Store,
    _dir: Option<tempfile::TempDir>,
    drop_pg: Option<(String, String)>,
}

impl Drop for Fresh {
    fn drop(&mut self) {
        if let Some((admin, name)) = self.drop_pg.take() {
            let _ = std::thread::spawn(move || {
                let rt = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .unwrap();
                rt.block_on(async {
                    use sqlx::Connection;
                    if let Ok(mut c) = sqlx::PgConnection::connect(&admin).await {
                        let _ =
                            sqlx::query(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"))
                                .execute(&mut c)
                                .await;
                    }
                });
            })
            .join();
        }
    }
}

pub(super) async fn sqlite() -> Fresh {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}", dir.path().join("t.db").display());
    Fresh {
        store: Store::open(&url).await.unwrap(),
        _dir: Some(dir),
        drop_pg: None,
    }
}

#[allow(dead_code)]
pub(super) async fn postgres() -> Fresh {
    use sqlx::Connection;
    let admin = std::env::var("SETTLE_TEST_POSTGRES_URL")
        .expect("SETTLE_TEST_POSTGRES_URL names a PostgreSQL server");
    let name = format!(
        "settle_store_{}_{}",
        std::process::id(),
        rand::random::<u32>()
    );
    let mut c = sqlx::PgConnection::connect(&admin).await.unwrap();
    sqlx::query(&format!("CREATE DATABASE {name}"))
        .execute(&mut c)
        .await
        .unwrap();
    let base = admin.rsplit_once('/').unwrap().0;
    Fresh {
        store: Store::open(&format!("{base}/{name}")).await.unwrap(),
        _dir: None,
        drop_pg: Some((admin.clone(), name)),
    }
}

fn t(ms: i64) -> DateTime<Utc> {
    DateTime::from_timestamp_millis(ms).unwrap()
}

/// An operation with every column holding a value of its own.
fn full_op(key: &str, at: DateTime<Utc>) -> Op {
    let mut op = Op::new(
        key,
        "w",
        "s",
        "d",
        "a",
        r#"{"n":1}"#.into(),
        "fp".into(),
        at,
    );
    op.conflicting_payload = Some(r#"{"n":2}"#.into());
    op.conflicting_fingerprint = Some("fp2".into());
    op.state = State::Unknown;
    op.reason = Some("why".into());
    op.attempts = 3;
    op.budget_start = 1;
    op.ambiguous = true;
    op.first_sent_at = Some(at + TimeDelta::seconds(1));
    op.attempt_started_at = Some(at + TimeDelta::seconds(2));
    op.next_attempt_at = Some(at + TimeDelta::seconds(3));
    op.reference = Some("ref".into());
    op.last_error = Some("err".into());
    op.updated_at = at + TimeDelta::seconds(4);
    op.exception_since = Some(at + TimeDelta::seconds(5));
    op.claim = Some(Claim {
        by: "alice".into(),
        since: at + TimeDelta::seconds(6),
        expires: at + TimeDelta::seconds(7),
    });
    op.resolution = Some(Resolution::Superseded);
    op.superseded_by = Some("other".into());
    op.version = 9;
    op
}

/// The columns of `operations` as the database has them: (name, integer?).
async fn table_columns(tx: &mut Tx) -> Vec<(String, bool)> {
    match tx.open {
        Open::Sqlite(_) => {
            let stmt = Stmt::new(
                "SELECT name, type FROM pragma_table_info('operations')",
                Vec::new(),
            );
            stmt.rows(tx.db(), |r| {
                let ty: String = get(r, "type")?;
                Ok((get(r, "name")?, ty == "INTEGER"))
            })
            .await
            .unwrap()
        }
        Open::Postgres(..) => {
            let stmt = Stmt::new(
                "SELECT column_name::TEXT AS name, data_type::TEXT AS type FROM information_schema.columns \
                 WHERE table_schema = current_schema() AND table_name = 'operations'",
                Vec::new(),
            );
            stmt.rows(tx.db(), |r| {
                let ty: String = get(r, "type")?;
                Ok((get(r, "name")?, ty == "bigint"))
            })
            .await
            .unwrap()
        }
    }
}

/// The column list is the migrations' table, name for name and type for type.
async fn columns_match_the_migrations(f: &Fresh) {
    let mut tx = f.store.begin().await.unwrap();
    let mut table = table_columns(&mut tx).await;
    tx.rollback().await;
    let mut ours: Vec<(String, bool)> = OpCol::ALL
        .iter()
        .map(|c| (c.name().to_string(), c.kind() == Kind::Int))
        .collect();
    table.sort();
    ours.sort();
    assert_eq!(ours, table, "store/columns.rs and the migrations disagree");
    assert_eq!(
        OpCol::ALL
            .iter()
            .filter(|c| c.written() == Written::Never)
            .count(),
        1,
        "only the id is the database's"
    );
}

/// Every column goes in and comes back out as it was; and every column a change sets does too.
async fn every_column_round_trips(f: &Fresh) {
    let at = t(1_800_000_000_000);
    let op = full_op("rt-1", at);
    let mut tx = f.store.begin().await.unwrap();
    let (id, _) = tx.insert_ops(&[&op]).await.unwrap().pop().unwrap();
    let (got_id, got) = tx.hold_op("rt-1").await.unwrap().unwrap();
    assert_eq!(
        (got_id, &got),
        (id, &op),
        "the insert and the row mapping agree"
    );
    // a change that moves every changing column
    let mut next = full_op("rt-1", at);
    next.conflicting_payload = None;
    next.conflicting_fingerprint = None;
    next.state = State::Closed;
    next.reason = None;
    next.attempts = 4;
    next.budget_start = 2;
    next.ambiguous = false;
    next.first_sent_at = None;
    next.attempt_started_at = None;
    next.next_attempt_at = None;
    next.reference = Some("ref2".into());
    next.last_error = None;
    next.updated_at = at + TimeDelta::seconds(40);
    next.exception_since = None;
    next.claim = None;
    next.resolution = Some(Resolution::Abandoned);
    next.superseded_by = None;
    next.version = 10;
    assert!(
        tx.write_changes(&[(id, &next, 9)], &[], &[], &[], &[])
            .await
            .unwrap()
    );
    let (_, got) = tx.hold_op("rt-1").await.unwrap().unwrap();
    assert_eq!(got, next, "the update and the row mapping agree");
    tx.rollback().await;
}

/// A change set whose compare-and-set fails is refused whole: nothing of it stays.
async fn a_stale_change_set_leaves_nothing(f: &Fresh) {
    let at = Utc::now();
    let op = Op::new(
        "k-1",
        "w",
        "",
        "tasks",
        "create_task",
        "{}".into(),
        "fp".into(),
        at,
    );
    let mut tx = f.store.begin().await.unwrap();
    let (id, _) = tx.insert_ops(&[&op]).await.unwrap().pop().unwrap();
    tx.commit().await.unwrap();
    let next = Op {
        state: State::InFlight,
        attempts: 1,
        version: 1,
        ..op
    };
    let opened: [Opened; 1] = [(id, 1, "dispatcher", at)];
    let event = NewEvent::on_operation(
        id,
        at,
        "dispatcher",
        "attempt_started",
        Some(State::Pending),
        State::InFlight,
        "{}",
    );
    let whole = AttemptWrite {
        operation_id: id,
        n: 2,
        actor: "bot",
        at,
        outcome: Outcome::Unknown,
        http_status: None,
        reference: None,
        error: Some("x"),
    };
    let counts = async |f: &Fresh| -> (i64, i64) {
        let (_, attempts, events) = f.store.count_rows().await.unwrap();
        (attempts, events)
    };
    let mut tx = f.store.begin().await.unwrap();
    let written = tx
        .write_changes(
            &[(id, &next, 7)],
            &opened,
            &[],
            std::slice::from_ref(&whole),
            std::slice::from_ref(&event),
        )
        .await
        .unwrap();
    assert!(!written, "expected version 7, stored 0");
    tx.rollback().await;
    assert_eq!(counts(f).await, (0, 0));
    let mut tx = f.store.begin().await.unwrap();
    assert!(
        tx.write_changes(
            &[(id, &next, 0)],
            &opened,
            &[],
            std::slice::from_ref(&whole),
            std::slice::from_ref(&event)
        )
        .await
        .unwrap()
    );
    tx.commit().await.unwrap();
    assert_eq!(counts(f).await, (2, 1));
    let (_, stored) = f.store.load_op("k-1").await.unwrap().unwrap();
    assert_eq!((stored.state, stored.version), (State::InFlight, 1));
}

/// Events keep the order they were given in, however many go in one call.
async fn events_keep_their_order(f: &Fresh) {
    let at = Utc::now();
    let kinds: Vec<String> = (0..700).map(|i| format!("k{i:03}")).collect();
    let events: Vec<NewEvent> = kinds
        .iter()
        .map(|k| NewEvent {
            operation_id: None,
            workflow: Some("w"),
            at,
            actor: "t",
            kind: k,
            from_state: None,
            to_state: None,
            detail: "{}",
            action: None,
            restore: None,
        })
        .collect();
    let mut tx = f.store.begin().await.unwrap();
    tx.insert_events(&events).await.unwrap();
    let stmt = Stmt::new("SELECT kind FROM events ORDER BY id", Vec::new());
    let stored: Vec<String> = stmt.rows(tx.db(), |r| get(r, "kind")).await.unwrap();
    tx.rollback().await;
    assert_eq!(stored, kinds);
    let _ = Cell::Int(None);
}

macro_rules! on_both {
    ($($name:ident),* $(,)?) => {
        mod on_sqlite {
            $(
                #[tokio::test]
                async fn $name() {
                    super::$name(&super::sqlite().await).await;
                }
            )*
        }
        mod on_postgres {
            $(
                #[tokio::test]
                #[cfg_attr(not(settle_pg), ignore = "needs SETTLE_TEST_POSTGRES_URL")]
                async fn $name() {
                    super::$name(&super::postgres().await).await;
                }
            )*
        }
    };
}

on_both!(
    columns_match_the_migrations,
    every_column_round_trips,
    a_stale_change_set_leaves_nothing,
    events_keep_their_order,
);
