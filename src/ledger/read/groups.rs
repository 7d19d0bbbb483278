//! The exceptions by group (manual: Owners and notifications): the ones that share an owner,
//! workflow, destination, state and reason, its numbers, ids and quoted values masked, are one
//! line, so that an incident of 10,000 items reads as a handful.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use serde::Serialize;

use super::Reader;
use super::list::{ListFilter, Scope, list_query, owned, scope_of};
use crate::domain::State;
use crate::domain::mask::mask_reason;
use crate::domain::patterns::redact_text;
use crate::error::Result;

/// One group of exceptions.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ExceptionGroup {
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
    /// The filter that lists its items (with the others of its workflow, destination and
    /// state whose reason differs).
    pub filter: String,
}

/// Owner, workflow, destination, state and masked reason.
type GroupKey = (Option<String>, String, String, State, String);
/// How many, the oldest and newest, and the stored group (a row) its oldest is in.
type Tally = (i64, Option<DateTime<Utc>>, Option<DateTime<Utc>>, usize);

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
        let mut merged: BTreeMap<GroupKey, Tally> = BTreeMap::new();
        for (i, r) in rows.iter().enumerate() {
            let reason = mask_reason(&redact_text(r.reason.as_deref().unwrap_or("")));
            let owner = self.0.config.owner_of(&r.workflow).map(str::to_string);
            let key = (
                owner,
                r.workflow.clone(),
                r.destination.clone(),
                r.state,
                reason,
            );
            let e = merged.entry(key).or_insert((0, None, None, i));
            e.0 += r.count;
            if r.oldest.is_some() && (e.1.is_none() || r.oldest < e.1) {
                e.1 = r.oldest;
                e.3 = i;
            }
            e.2 = e.2.max(r.newest);
        }
        let mut groups = Vec::with_capacity(merged.len());
        for ((owner, workflow, destination, state, reason), (count, oldest, newest, sample)) in
            merged
        {
            let age = |t: Option<DateTime<Utc>>| t.map_or(0, |t| (now - t).num_seconds().max(0));
            // the safe next step of the group's oldest item
            let sample = self.0.store.group_sample(&rows[sample]).await?;
            let next_step = match sample {
                Some(key) => match self.operation(&key, viewer).await {
                    Ok(v) => v.next_step,
                    Err(_) => String::new(),
                },
                None => String::new(),
            };
            let filter = format!("wf:{workflow} dest:{destination} state:{}", state.as_str());
            groups.push(ExceptionGroup {
                owner,
                filter,
                workflow,
                destination,
                state,
                reason,
                count,
                oldest_seconds: age(oldest),
                newest_seconds: age(newest),
                next_step,
            });
        }
        groups.sort_by(|a, b| {
            b.count
                .cmp(&a.count)
                .then(b.oldest_seconds.cmp(&a.oldest_seconds))
        });
        Ok(groups)
    }
}
