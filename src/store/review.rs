//! The review's rows (manual: The review after a release), each from a range of an index: the exceptions open now grouped
//! by workflow, destination, state and age bucket (the exceptions' index); the exception spans
//! opened in the window per day, and those resolved in it (schema 9's spans, by their times); the
//! conflicts and automatic pauses in the window (the events' review index). The ledger folds
//! them into the review; nothing here reads the history at large.

use chrono::{DateTime, Utc};

use super::Store;
use super::sql::{Cell, Stmt, get, ms, time};
use crate::domain::State;
use crate::error::{Error, Result};

/// The age buckets' upper bounds, in hours (the last bucket is open): < 1 h, 1-4 h, 4-24 h,
/// 1-3 d, 3-7 d, > 7 d.
pub const AGE_BOUNDS_HOURS: [i64; 5] = [1, 4, 24, 72, 168];

/// Open exceptions of one workflow, destination, state and age bucket.
#[derive(Clone, Debug, PartialEq)]
pub struct OpenGroup {
    pub workflow: String,
    pub destination: String,
    pub state: State,
    pub bucket: usize,
    pub n: i64,
    pub oldest: DateTime<Utc>,
}

/// Exceptions opened on one day (days since the epoch, UTC).
#[derive(Clone, Debug, PartialEq)]
pub struct OpenedDay {
    pub workflow: String,
    pub destination: String,
    pub day: i64,
    pub n: i64,
}

/// One exception resolved in the window.
#[derive(Clone, Debug, PartialEq)]
pub struct ResolvedSpan {
    pub workflow: String,
    pub destination: String,
    pub resolved_at: DateTime<Utc>,
    pub took_ms: i64,
    /// The state it left for `succeeded` or `closed`.
    pub from: String,
    pub to: String,
    pub resolution: Option<String>,
}

/// A conflict or an automatic pause in the window.
#[derive(Clone, Debug, PartialEq)]
pub struct ReviewEvent {
    pub kind: String,
    pub workflow: Option<String>,
    pub destination: Option<String>,
    pub detail: String,
}

#[derive(Clone, Debug, Default, PartialEq)]
pub struct ReviewRows {
    pub open: Vec<OpenGroup>,
    pub opened: Vec<OpenedDay>,
    pub resolved: Vec<ResolvedSpan>,
    pub events: Vec<ReviewEvent>,
}

const DAY_MS: i64 = 86_400_000;

/// The columns of each group's exceptions newer than each of [`AGE_BOUNDS_HOURS`].
const NEWER: [&str; AGE_BOUNDS_HOURS.len()] = ["newer0", "newer1", "newer2", "newer3", "newer4"];

impl Store {
    /// The review's rows for the window `since..=now`.
    pub(crate) async fn review_rows(
        &self,
        since: DateTime<Utc>,
        now: DateTime<Utc>,
    ) -> Result<ReviewRows> {
        let (since, now) = (ms(since), ms(now));
        // each group's exceptions newer than each bound, in one pass over the groups' index in
        // its order (no sort): the buckets are the differences
        let newer: Vec<String> = AGE_BOUNDS_HOURS
            .iter()
            .enumerate()
            .map(|(i, h)| {
                format!(
                    "SUM(CASE WHEN exception_since > {} THEN 1 ELSE 0 END) AS {}",
                    now - h * 3_600_000,
                    NEWER[i]
                )
            })
            .collect();
        let open = Stmt::new(
            format!(
                "SELECT workflow, destination, state, {}, COUNT(*) AS n, MIN(exception_since) AS oldest \
                 FROM operations WHERE exception_since IS NOT NULL AND exception_since <= $1 \
                 GROUP BY workflow, destination, state",
                newer.join(", ")
            ),
            vec![Cell::Int(Some(now))],
        );
        // schema 14's counts per day (PostgreSQL's as differences, summed here); a day is
        // counted whole, as the review's days are
        let opened = Stmt::new(
            "SELECT workflow, destination, day, CAST(SUM(n) AS BIGINT) AS n FROM review_opened \
             WHERE day >= $1 AND day <= $2 GROUP BY workflow, destination, day",
            vec![
                Cell::Int(Some(since.div_euclid(DAY_MS))),
                Cell::Int(Some(now.div_euclid(DAY_MS))),
            ],
        );
        let resolved = Stmt::new(
            "SELECT workflow, destination, resolved_at, resolved_at - opened_at AS took, \
             resolved_from, resolved_as, resolution FROM exception_spans \
             WHERE resolved_at IS NOT NULL AND resolved_at >= $1 AND resolved_at <= $2",
            vec![Cell::Int(Some(since)), Cell::Int(Some(now))],
        );
        let events = Stmt::new(
            "SELECT e.kind, COALESCE(e.workflow, o.workflow) AS workflow, o.destination, e.detail FROM events e \
             LEFT JOIN operations o ON o.id = e.operation_id \
             WHERE e.kind IN ('conflict', 'auto_paused', 'corrected') AND e.at >= $1 AND e.at <= $2",
            vec![Cell::Int(Some(since)), Cell::Int(Some(now))],
        );
        let mut conn = super::replica::reads(self).conn().await?;
        let open = open_groups(&open, &mut conn).await?;
        let opened = opened
            .rows(conn.db(), |r| {
                Ok(OpenedDay {
                    workflow: get(r, "workflow")?,
                    destination: get(r, "destination")?,
                    day: get(r, "day")?,
                    n: get(r, "n")?,
                })
            })
            .await?;
        let resolved = resolved
            .rows(conn.db(), |r| {
                Ok(ResolvedSpan {
                    workflow: get(r, "workflow")?,
                    destination: get(r, "destination")?,
                    resolved_at: time(get(r, "resolved_at")?),
                    took_ms: get(r, "took")?,
                    from: get::<Option<String>>(r, "resolved_from")?.unwrap_or_default(),
                    to: get::<Option<String>>(r, "resolved_as")?.unwrap_or_default(),
                    resolution: get(r, "resolution")?,
                })
            })
            .await?;
        let events = events
            .rows(conn.db(), |r| {
                Ok(ReviewEvent {
                    kind: get(r, "kind")?,
                    workflow: get(r, "workflow")?,
                    destination: get(r, "destination")?,
                    detail: get(r, "detail")?,
                })
            })
            .await?;
        Ok(ReviewRows {
            open,
            opened,
            resolved,
            events,
        })
    }
}

/// The open exceptions' groups, each as one [`OpenGroup`] per age bucket it has exceptions in.
async fn open_groups(stmt: &Stmt<'_>, conn: &mut super::Conn) -> Result<Vec<OpenGroup>> {
    let rows = stmt.rows(conn.db(), |r| {
        let s: String = get(r, "state")?;
        let state = State::parse(&s).map_err(Error::Unavailable)?;
        let n: i64 = get(r, "n")?;
        let oldest = time(get(r, "oldest")?);
        let mut newer = Vec::with_capacity(AGE_BOUNDS_HOURS.len() + 1);
        for column in NEWER {
            newer.push(get::<Option<i64>>(r, column)?.unwrap_or(0));
        }
        newer.push(n);
        let mut groups = Vec::new();
        let mut below = 0;
        for (bucket, upto) in newer.into_iter().enumerate() {
            if upto > below {
                groups.push(OpenGroup {
                    workflow: get(r, "workflow")?,
                    destination: get(r, "destination")?,
                    state,
                    bucket,
                    n: upto - below,
                    oldest,
                });
            }
            below = upto;
        }
        Ok(groups)
    });
    Ok(rows.await?.into_iter().flatten().collect())
}
