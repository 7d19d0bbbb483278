//! The exceptions by group (manual: Owners and notifications): the ones that share a workflow,
//! destination, state and reason as a group names it (`domain::group`: a destination's answer
//! summarized, its numbers, ids and quoted values masked) are one line, so that an incident of
//! 10,000 items reads as a handful; each group's filter lists exactly its items.

use chrono::{DateTime, Utc};
use serde::Serialize;

use super::Reader;
use super::list::{ListFilter, Scope, list_query, owned, scope_of};
use crate::domain::State;
use crate::domain::group::group_reason;
use crate::error::Result;

/// One group of exceptions.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ExceptionGroup {
    /// Its id, which `group:ID` in a filter names (none for attempts stuck in flight).
    pub id: Option<String>,
    /// The team that owns the workflow; none: nobody.
    pub owner: Option<String>,
    pub workflow: String,
    pub destination: String,
    pub state: State,
    /// The reason, redacted, with what varies between items masked.
    pub reason: String,
    pub count: i64,
    pub oldest_seconds: i64,
    pub newest_seconds: i64,
    /// The safe next step of its oldest key's kind (each item's own is in `show`).
    pub next_step: String,
    /// The filter that lists exactly its items.
    pub filter: String,
}

impl Reader<'_> {
    /// The exceptions `filter` matches, by group: the largest first.
    pub async fn groups(self, filter: &ListFilter, viewer: &str) -> Result<Vec<ExceptionGroup>> {
        let filter = ListFilter {
            scope: Scope::Exceptions,
            ..owned(&self.0.config, filter, viewer).into_owned()
        };
        let now = self.0.now();
        let Some((states, not_after)) = scope_of(&filter, now) else {
            return Ok(Vec::new());
        };
        let query = list_query(&filter, self.0.scope(), viewer, &states, not_after, now);
        let rows = self.0.store.exception_groups(&query).await?;
        let mut groups = Vec::with_capacity(rows.len());
        for r in rows {
            let age = |t: Option<DateTime<Utc>>| t.map_or(0, |t| (now - t).num_seconds().max(0));
            // the reason and the safe next step of the group's oldest item
            let sample = self.0.store.group_sample(&r).await?;
            let (reason, next_step) = match sample {
                Some(key) => self.sampled(&key, viewer).await,
                None => (String::new(), String::new()),
            };
            let mut filter = format!(
                "wf:{} dest:{} state:{}",
                r.workflow,
                r.destination,
                r.state.as_str()
            );
            if let Some(id) = &r.group {
                filter.push_str(&format!(" group:{id}"));
            }
            groups.push(ExceptionGroup {
                id: r.group.clone(),
                owner: self.0.config.owner_of(&r.workflow).map(str::to_string),
                filter,
                workflow: r.workflow,
                destination: r.destination,
                state: r.state,
                reason,
                count: r.count,
                oldest_seconds: age(r.oldest),
                newest_seconds: age(r.newest),
                next_step,
            });
        }
        groups.sort_by(|a, b| {
            b.count
                .cmp(&a.count)
                .then(b.oldest_seconds.cmp(&a.oldest_seconds))
                // the same on every backend, whatever order the count came in
                .then_with(|| a.owner.cmp(&b.owner))
                .then_with(|| a.workflow.cmp(&b.workflow))
                .then_with(|| a.destination.cmp(&b.destination))
                .then_with(|| a.state.as_str().cmp(b.state.as_str()))
                .then_with(|| a.reason.cmp(&b.reason))
        });
        Ok(groups)
    }

    /// A group's reason as it names it (from its item `key`), and that item's safe next step.
    async fn sampled(self, key: &str, viewer: &str) -> (String, String) {
        let reason = match self.0.store.load_op(key).await {
            Ok(Some((_, op))) => group_reason(op.reason.as_deref(), &op.payload),
            _ => String::new(),
        };
        let next_step = match self.operation(key, viewer).await {
            Ok(v) => v.next_step,
            Err(_) => String::new(),
        };
        (reason, next_step)
    }
}
