//! One change by one caller: an attempt's report, a lookup's answer, a staff action; each a batch
//! of one of the write engine, in a transaction of its own.

use super::Ledger;
use super::change::{Ask, Decided};
use super::checks::{check_name, check_report};
use super::engine::Batch;
use super::terms::{AttemptReport, SYSTEM_ACTOR};
use super::views::Applied;
use crate::domain::{Command, validate_key};
use crate::error::{Error, Result};
use crate::store::{self, Tried, Tx};

impl Ledger {
    /// Records an attempt's outcome (`settle attempt`, a JSON line, or the dispatcher).
    pub async fn report_attempt(&self, report: &AttemptReport, actor: &str) -> Result<Applied> {
        check_report(report)?;
        check_name("actor", actor, false)?;
        self.act(&report.key, actor, Ask::Attempt(report)).await
    }

    /// Settles an unknown outcome by what the destination's lookup said (actor `settle`): found
    /// or absent; no answer leaves it unknown, with the reason said.
    pub async fn lookup(&self, key: &str, answer: crate::domain::LookupAnswer) -> Result<Applied> {
        validate_key(key).map_err(Error::Invalid)?;
        self.act(key, SYSTEM_ACTOR, Ask::Cmd(Command::Lookup { answer }))
            .await
    }

    pub(super) async fn act(&self, key: &str, actor: &str, ask: Ask<'_>) -> Result<Applied> {
        let applied = store::in_tx!(self.store, |tx| self.act_in(tx, key, actor, &ask).await)?;
        if applied.to != applied.from && applied.to.is_exception() {
            self.check_threshold(&applied.workflow).await?;
        }
        Ok(applied)
    }

    /// One change inside a transaction: a batch of one (hold, judge, compare-and-set, audit).
    pub(super) async fn act_in(
        &self,
        tx: &mut Tx,
        key: &str,
        actor: &str,
        ask: &Ask<'_>,
    ) -> Result<Tried<Applied>> {
        let mut batch = match ask.makes() {
            Some(new) => Batch::hold(tx, &[key, new]).await?,
            None => Batch::hold(tx, &[key]).await?,
        };
        match batch.judge(self, tx, key, actor, ask, None).await? {
            Decided::Unchanged(a) => Ok(Tried::Done(a)),
            Decided::Change(c) => {
                let applied = c.applied.clone();
                batch.take(c);
                Ok(match batch.write(self, tx, actor).await? {
                    Some(_) => Tried::Done(applied),
                    None => Tried::Raced,
                })
            }
        }
    }
}
