//! Recording an intended operation: its checks, its fingerprint, and the conflict new contents
//! under a known key make.

use serde_json::json;

use super::change::Ask;
use super::checks::{check_name, check_op_name};
use super::engine::Batch;
use super::{Intent, Ledger, Recorded};
use crate::domain::fingerprint::{canonical_json, fingerprint_of_canonical};
use crate::domain::{Command, Op, validate_key};
use crate::error::{Error, Result};
use crate::store::{self, Tried, Tx};

impl Ledger {
    /// The detail of an operation's `recorded` event: the fingerprint of the contents recorded,
    /// and the credential of the one who recorded it.
    pub(super) fn recorded_detail(&self, op: &Op) -> String {
        let mut detail = json!({ "fingerprint": op.fingerprint });
        if let Some(original) = &op.corrects {
            detail["corrects"] = original.as_str().into();
        }
        self.sign(&mut detail);
        detail.to_string()
    }

    /// Records an intended operation. Repeating it is harmless; new contents under a known key
    /// make a `conflict` that keeps both (a terminal operation refuses them).
    pub async fn record(&self, intent: &Intent, actor: &str) -> Result<Recorded> {
        check_name("actor", actor, false)?;
        let prepared = self.prepare(intent)?;
        let result = store::in_tx!(self.store, |tx| self.record_in(tx, &prepared, actor).await)?;
        if result == Recorded::Conflict {
            self.check_threshold(&intent.workflow).await?;
        }
        Ok(result)
    }

    /// Reads JSON lines and records each; a bad line is reported with its number and the
    /// valid lines are kept. Re-ingesting the same input changes nothing.
    ///
    /// Reading and parsing run beside writing (a task of its own, a batch at a time through a
    /// channel two batches deep), so the next batch is parsed while the database stores the last.
    pub async fn ingest<R: tokio::io::AsyncBufRead + Unpin>(
        &self,
        reader: R,
        actor: &str,
    ) -> Result<super::IngestReport> {
        super::ingest::ingest(self, reader, actor).await
    }

    pub(super) fn prepare(&self, intent: &Intent) -> Result<Op> {
        validate_key(&intent.key).map_err(Error::Invalid)?;
        check_op_name("workflow", &intent.workflow, false)?;
        self.check_scope(&intent.workflow)?;
        check_op_name("step", &intent.step, true)?;
        check_op_name("destination", &intent.destination, false)?;
        check_op_name("action", &intent.action, false)?;
        crate::domain::payload::check_payload(&intent.payload).map_err(Error::Invalid)?;
        let canonical = canonical_json(&intent.payload);
        crate::domain::payload::check_size(canonical.len(), self.config.max_payload)
            .map_err(|why| Error::Invalid(format!("{}: {why}", intent.key)))?;
        if let Some(run) = &intent.run {
            crate::domain::validate_run(run).map_err(Error::Invalid)?;
        }
        let fp = fingerprint_of_canonical(&intent.destination, &intent.action, &canonical);
        let mut op = Op::new(
            &intent.key,
            &intent.workflow,
            &intent.step,
            &intent.destination,
            &intent.action,
            canonical,
            fp,
            self.now(),
        );
        op.run = intent.run.clone();
        Ok(op)
    }

    pub(super) async fn record_in(
        &self,
        tx: &mut Tx,
        new: &Op,
        actor: &str,
    ) -> Result<Tried<Recorded>> {
        let now = self.now();
        let mut op = new.clone();
        op.created_at = now;
        op.updated_at = now;
        op.next_attempt_at = Some(now);
        let mut batch = Batch::of(Default::default()).recording();
        batch.make(std::borrow::Cow::Borrowed(&op));
        if batch.write(self, tx, actor).await?.is_some() {
            return Ok(Tried::Done(Recorded::Created));
        }
        let cmd = Command::Record {
            payload: op.payload.clone(),
            fingerprint: op.fingerprint.clone(),
            run: op.run.clone(),
        };
        Ok(
            match self.act_in(tx, &op.key, actor, &Ask::Cmd(cmd)).await {
                Ok(Tried::Raced) => Tried::Raced,
                Ok(Tried::Done(a)) if a.kind.is_some() => Tried::Done(Recorded::Conflict),
                Ok(Tried::Done(_)) => Tried::Done(Recorded::Unchanged),
                // not stored, and not inserted: a pruned operation's key (manual: Retention and the archive), else one
                // pruned between the two statements
                Err(Error::NotFound(_)) => match tx.pruned_key(&op.key, store::ms(now)).await? {
                    Some(p) => Tried::Done(self.record_pruned(&op, &p)?),
                    None => Tried::Raced,
                },
                Err(e) => return Err(e),
            },
        )
    }

    /// A record of a pruned operation's key, answered as for the live terminal operation: the
    /// same contents change nothing, new contents are refused.
    fn record_pruned(&self, op: &Op, pruned: &Op) -> Result<Recorded> {
        self.check_scope(&pruned.workflow)?;
        if pruned.fingerprint == op.fingerprint {
            return Ok(Recorded::Unchanged);
        }
        Err(Error::Refused(format!(
            "{}: the operation under this key is {} (pruned, its key kept until its horizon): new contents are refused, as for any terminal operation",
            op.key, pruned.state
        )))
    }
}
