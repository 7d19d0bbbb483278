//! `settle prune` (manual: Retention and the archive): terminal operations past `[retention]` removed in small
//! transactions, each batch written to the archive (and synced) before it is deleted, so a prune
//! killed at any moment loses nothing: an operation may be archived twice, never zero times.
//! Their keys stay in `pruned_keys` until the horizon; one `pruned` event says what was done.

use std::path::PathBuf;

use chrono::{DateTime, Utc};
use serde::Serialize;
use serde_json::json;

use super::archive::Archive;
use crate::domain::Op;
use crate::error::{Error, Result};
use crate::ledger::{Cursor, Ledger, OperationDetail};
use crate::store::{self, NewEvent, ms};

/// Operations removed in one transaction: with their attempts and events a few thousand rows,
/// short enough that a dispatcher or a console never waits long behind it.
pub const PRUNE_BATCH: i64 = 500;

/// After each batch a prune waits this many times as long as the batch held the database: on
/// SQLite, whose one writer at a time a prune would otherwise take from a running dispatcher;
/// not on PostgreSQL, where the two write side by side (`cargo bench --bench prune` measures
/// the dispatcher's rate beside a prune).
fn pause_after_batch(backend: crate::store::Backend) -> f64 {
    match backend {
        crate::store::Backend::Sqlite => 6.0,
        crate::store::Backend::Postgres => 0.0,
    }
}

/// How often `settle serve` and `settle dispatch` prune when `[retention] auto = true`.
pub const AUTO_PRUNE_EVERY: std::time::Duration = std::time::Duration::from_secs(15 * 60);

/// What `settle prune` is asked.
#[derive(Clone, Debug, Default)]
pub struct PruneOptions {
    /// Count what would go, remove nothing.
    pub dry_run: bool,
    /// Where every removed operation is first written, one `show --json` document a line.
    pub archive: Option<PathBuf>,
}

/// What a prune did (or, dry, would do).
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct PruneReport {
    pub dry_run: bool,
    /// `succeeded` operations that became terminal before this are pruned (absent: kept).
    pub succeeded_before: Option<DateTime<Utc>>,
    pub closed_before: Option<DateTime<Utc>>,
    pub succeeded: u64,
    pub closed: u64,
    /// Operations written to the archive (more than those removed where one changed meanwhile).
    pub archived: u64,
    /// Keys of operations pruned earlier whose horizon has passed: free again.
    pub keys_freed: u64,
    /// Messages to the owners done with (sent, settled or given up) past the longer retention,
    /// with their tries: removed (or, on a dry run, that would be).
    pub notifications: u64,
    pub archive: Option<String>,
}

/// The ledger's handle for retention (`Ledger::retention`).
#[derive(Clone, Copy)]
pub struct Retention<'a>(pub(in crate::ledger) &'a Ledger);

impl Retention<'_> {
    /// Prunes what `[retention]` lets go, as `actor` (a lead's; the manual's Retention and the archive).
    pub async fn prune(self, actor: &str, options: &PruneOptions) -> Result<PruneReport> {
        self.0.check_acting(actor)?;
        self.0.require_lead("prune")?;
        self.prune_as(actor, options).await
    }

    /// `[retention] auto = true`: prunes in the background every [`AUTO_PRUNE_EVERY`] (the
    /// first a minute after the start), as settle itself, without an archive, while the
    /// returned guard lives. `None` where the config does not ask for it.
    pub fn auto_prune(self) -> Option<crate::ledger::Background> {
        self.auto_prune_every(std::time::Duration::from_secs(60), AUTO_PRUNE_EVERY)
    }

    /// [`Retention::auto_prune`] with its waits: `first` after the start, then `every`.
    pub fn auto_prune_every(
        self,
        first: std::time::Duration,
        every: std::time::Duration,
    ) -> Option<crate::ledger::Background> {
        let r = &self.0.config.retention;
        if !(r.auto && r.prunes()) {
            return None;
        }
        let ledger = self.0.clone();
        Some(crate::ledger::Background(tokio::spawn(async move {
            let mut wait = first;
            loop {
                tokio::time::sleep(wait).await;
                wait = every;
                let options = PruneOptions::default();
                match ledger
                    .retention()
                    .prune_as(crate::ledger::SYSTEM_ACTOR, &options)
                    .await
                {
                    Ok(r) => tracing::info!(
                        succeeded = r.succeeded,
                        closed = r.closed,
                        keys_freed = r.keys_freed,
                        "pruned"
                    ),
                    Err(e) => {
                        tracing::warn!(error = %e, "the background prune failed; trying again later")
                    }
                }
            }
        })))
    }

    async fn prune_as(self, actor: &str, options: &PruneOptions) -> Result<PruneReport> {
        let retention = &self.0.config.retention;
        if !retention.prunes() {
            return Err(Error::Invalid(
                "[retention] keeps every operation (set succeeded = \"90d\" or closed = \"180d\"): nothing to prune".into(),
            ));
        }
        let mut archive = match &options.archive {
            Some(path) if !options.dry_run => Some(Archive::open(path)?),
            _ => None,
        };
        let now = self.0.now();
        let before =
            |keep: Option<std::time::Duration>| keep.map(|k| crate::domain::time::before(now, k));
        let mut report = PruneReport {
            dry_run: options.dry_run,
            succeeded_before: before(retention.succeeded),
            closed_before: before(retention.closed),
            archive: options.archive.as_ref().map(|p| p.display().to_string()),
            ..Default::default()
        };
        let horizon = i64::try_from(self.0.config.key_horizon().as_millis()).unwrap_or(i64::MAX);
        for (state, cutoff) in [
            ("succeeded", report.succeeded_before),
            ("closed", report.closed_before),
        ] {
            let Some(cutoff) = cutoff else { continue };
            let n = self
                .prune_state(
                    state,
                    ms(cutoff),
                    horizon,
                    options.dry_run,
                    &mut archive,
                    actor,
                )
                .await?;
            match state {
                "succeeded" => report.succeeded = n.0,
                _ => report.closed = n.0,
            }
            report.archived += n.1;
        }
        // the messages go with the longer of the two: a message tells of either kind
        let kept = retention.succeeded.max(retention.closed);
        if let Some(before) = before(kept) {
            report.notifications = store::in_tx!(self.0.store, |tx| tx
                .told()
                .prune_messages(ms(before), options.dry_run)
                .await
                .map(store::Tried::Done))?;
        }
        if !options.dry_run {
            self.end_prune(&mut report, actor, ms(now)).await?;
        }
        Ok(report)
    }

    /// One terminal state's operations past `cutoff` (ms), batch by batch: (removed, archived).
    async fn prune_state(
        self,
        state: &str,
        cutoff: i64,
        horizon: i64,
        dry_run: bool,
        archive: &mut Option<Archive>,
        actor: &str,
    ) -> Result<(u64, u64)> {
        let (mut removed, mut archived) = (0, 0);
        let mut after = (i64::MIN, i64::MIN);
        loop {
            let found = self
                .0
                .store
                .prunable(state, cutoff, after, PRUNE_BATCH)
                .await?;
            let Some(last) = found.last() else { break };
            after = (last.created_at, last.id);
            if dry_run {
                removed += found.len() as u64;
                continue;
            }
            if let Some(file) = archive.as_mut() {
                archived += self.archive_batch(file, &found, actor).await?;
            }
            let ids: Vec<i64> = found.iter().map(|p| p.id).collect();
            let t = std::time::Instant::now();
            removed += store::in_tx!(self.0.store, |tx| tx
                .prune_batch(&ids, &[state], cutoff, horizon)
                .await
                .map(store::Tried::Done))?;
            // a short batch was the last
            if found.len() < PRUNE_BATCH as usize {
                break;
            }
            // the other writers' turn
            tokio::time::sleep(t.elapsed().mul_f64(pause_after_batch(self.0.backend()))).await;
        }
        Ok((removed, archived))
    }

    /// Each operation of the batch as `show --json` gives it (redacted), one a line, synced to
    /// the disk before anything of it is deleted.
    async fn archive_batch(
        self,
        file: &mut Archive,
        batch: &[crate::store::Prunable],
        actor: &str,
    ) -> Result<u64> {
        let mut lines = String::new();
        let mut n = 0;
        for p in batch {
            match self.0.read().show(&p.key, actor).await {
                // pruned meanwhile (by another prune, which archived it): its stub is no record
                Ok(detail) if detail.pruned => {}
                Ok(detail) => {
                    lines.push_str(&serde_json::to_string(&detail).map_err(|e| {
                        Error::Invalid(format!("{}: cannot be archived: {e}", p.key))
                    })?);
                    lines.push('\n');
                    n += 1;
                }
                // gone meanwhile (another prune): nothing to keep of it
                Err(Error::NotFound(_)) => {}
                Err(e) => return Err(e),
            }
        }
        file.append(lines.as_bytes())?;
        Ok(n)
    }

    /// The keys past their horizon freed, and the prune's one `pruned` event.
    async fn end_prune(self, report: &mut PruneReport, actor: &str, now: i64) -> Result<()> {
        let mut detail = json!({
            "succeeded_before": report.succeeded_before,
            "closed_before": report.closed_before,
            "succeeded": report.succeeded,
            "closed": report.closed,
            "archived": report.archived,
            "notifications": report.notifications,
            "archive": report.archive,
        });
        self.0.sign(&mut detail);
        let detail = detail.to_string();
        let at = self.0.now();
        report.keys_freed = store::in_tx!(self.0.store, |tx| {
            let freed = tx.free_pruned_keys(now).await?;
            let event = NewEvent {
                operation_id: None,
                workflow: None,
                at,
                actor,
                kind: "pruned",
                from_state: None,
                to_state: None,
                detail: &detail,
                action: None,
                restore: None,
            };
            tx.insert_events(&[event]).await?;
            Ok(store::Tried::Done(freed))
        })?;
        Ok(())
    }
}

impl Retention<'_> {
    /// The operation a pruned key still answers for (manual: Retention and the archive), until its horizon.
    pub(in crate::ledger) async fn pruned_op(self, key: &str) -> Result<Option<Op>> {
        let now = ms(self.0.now());
        store::in_tx!(self.0.store, |tx| tx
            .pruned_key(key, now)
            .await
            .map(store::Tried::Done))
    }

    /// A key without a stored operation: a pruned one's as its key answers for it (its names,
    /// terminal state and reference, `pruned`), else not found.
    pub(in crate::ledger) async fn pruned_detail(
        self,
        key: &str,
        viewer: &str,
    ) -> Result<OperationDetail> {
        let missing = || Error::NotFound(format!("no operation with key {key}"));
        let Some(op) = self.pruned_op(key).await? else {
            return Err(missing());
        };
        // outside an automation's workflows it is not there, as a live one is not
        self.0.check_scope(&op.workflow).map_err(|_| missing())?;
        let cursor = Cursor {
            group: None,
            at: ms(op.created_at),
            id: 0,
        };
        let fingerprint = op.fingerprint.clone();
        let view = self
            .0
            .read()
            .view(op, cursor, viewer, Default::default(), self.0.now());
        let corrected_as = self.0.read().chain_end(&view).await?;
        Ok(OperationDetail {
            op: view,
            payload: serde_json::Value::Null,
            fingerprint,
            conflicting_payload: None,
            conflicting_fingerprint: None,
            attempt_log: Vec::new(),
            history: Vec::new(),
            run_steps: Vec::new(),
            pruned: true,
            corrected_as,
        })
    }
}
