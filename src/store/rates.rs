//! A token's shared rate (manual: Running settle for a team): one bucket per token in the
//! database, so that every settle process on the ledger draws on one budget. Counted in millionths
//! of a request, on the database's clock (the processes' clocks may differ), in one statement.

use super::Store;
use super::sql::{Cell, Stmt, get};
use crate::error::Result;

/// Millionths of a request: the bucket's unit.
pub(crate) const UNIT: i64 = 1_000_000;

/// A take from a token's bucket: what it asks and what the token allows.
pub(crate) struct Take<'a> {
    /// The token's fingerprint (never the token).
    pub token: &'a str,
    /// Whole requests wanted.
    pub want: i64,
    /// Millionths of a request the bucket refills a second.
    pub per_second: i64,
    /// Whole requests the bucket holds at most.
    pub burst: i64,
}

impl Store {
    /// Takes up to `want` whole requests from the token's bucket (made full the first time):
    /// how many it gave, and the millionths left after.
    pub(crate) async fn take_rate(&self, t: &Take<'_>) -> Result<(i64, i64)> {
        let (least, greatest, now) = match self.backend() {
            super::Backend::Sqlite => (
                "MIN",
                "MAX",
                "CAST((julianday('now') - 2440587.5) * 86400000.0 AS INTEGER)",
            ),
            super::Backend::Postgres => (
                "LEAST",
                "GREATEST",
                "CAST(EXTRACT(EPOCH FROM clock_timestamp()) * 1000 AS BIGINT)",
            ),
        };
        let burst = t.burst.max(1) * UNIT;
        // the longest wait that still adds anything: past it the bucket is full (and the
        // product below stays far from overflowing)
        let cap = burst.saturating_mul(1000) / t.per_second.max(1) + 1;
        let mut conn = self.conn().await?;
        Stmt::new(
            format!("INSERT INTO rate_buckets (token, tokens, at) VALUES ($1, $2, {now}) ON CONFLICT (token) DO NOTHING"),
            vec![Cell::Text(Some(t.token)), Cell::Int(Some(burst))],
        )
        .execute(conn.db())
        .await?;
        let refilled =
            format!("{least}($2, tokens + {least}({greatest}({now} - at, 0), $3) * $4 / 1000)");
        let given = format!("{least}($5, {refilled} / {UNIT}) * {UNIT}");
        Stmt::new(
            format!(
                "UPDATE rate_buckets SET tokens = {refilled} - {given}, granted = {given}, \
                 at = {greatest}(at, {now}) WHERE token = $1 RETURNING granted, tokens"
            ),
            vec![
                Cell::Text(Some(t.token)),
                Cell::Int(Some(burst)),
                Cell::Int(Some(cap)),
                Cell::Int(Some(t.per_second)),
                Cell::Int(Some(t.want)),
            ],
        )
        .one(conn.db(), |r| {
            Ok((get::<i64>(r, "granted")? / UNIT, get(r, "tokens")?))
        })
        .await
    }
}
