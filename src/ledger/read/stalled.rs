//! The stalled runs view 1 shows beside the exceptions (manual: Runs): those a list's filter
//! allows, and how many, by the index of waits where the filter asks for no more than a workflow.

use super::Reader;
use super::runs::RunSummary;
use crate::error::Result;

impl Reader<'_> {
    /// How many stalled runs view 1 shows with a list filter: by the counts of the index of
    /// waits when it asks for no more than a workflow, else those of the first thousand it allows.
    pub(super) async fn stalled_count_for(
        self,
        filter: &super::list::ListFilter,
        viewer: &str,
    ) -> Result<i64> {
        use crate::domain::filter::Match;
        let terms = &filter.query.terms;
        let by_workflow = terms
            .iter()
            .all(|t| !t.negated && matches!(t.matches, Match::Stalled | Match::Workflow(_)));
        if by_workflow && filter.scope == super::list::Scope::Exceptions && filter.state.is_none() {
            let only: Vec<&str> = terms
                .iter()
                .filter_map(|t| match &t.matches {
                    Match::Workflow(w) => Some(w.as_str()),
                    _ => None,
                })
                .collect();
            return Ok(self
                .stalled_counts()
                .await?
                .iter()
                .filter(|(w, _, _)| only.iter().all(|o| o == w))
                .map(|(_, n, _)| n)
                .sum());
        }
        Ok(self.stalled_for(filter, viewer, 1000).await?.len() as i64)
    }

    /// The stalled runs view 1 shows with a list filter (manual: Runs): none when the filter asks for
    /// what only an operation has (a state, a destination, a key, words); else the oldest
    /// stalls first, at most `limit`, those the filter's workflow, run, claim and age allow.
    pub async fn stalled_for(
        self,
        filter: &super::list::ListFilter,
        viewer: &str,
        limit: usize,
    ) -> Result<Vec<RunSummary>> {
        use crate::domain::filter::{Claimed, Match};
        let now = self.0.now();
        let terms = &filter.query.terms;
        let fits = terms.iter().all(|t| match &t.matches {
            Match::Workflow(_) | Match::Run(_) | Match::AgeOver(_) | Match::AgeUnder(_) => true,
            Match::Claimed(_) => true,
            Match::Stalled => !t.negated,
            _ => false,
        });
        if filter.scope != super::list::Scope::Exceptions || !fits || filter.state.is_some() {
            return Ok(Vec::new());
        }
        let mut out = self.stalled_runs(None, limit, viewer).await?;
        out.retain(|r| {
            let age = (now - r.since).to_std().unwrap_or_default();
            terms.iter().all(|t| {
                let holds = match &t.matches {
                    Match::Workflow(w) => *w == r.workflow,
                    Match::Run(x) => *x == r.run,
                    Match::AgeOver(d) => age >= *d,
                    Match::AgeUnder(d) => age < *d,
                    Match::Claimed(Claimed::Nobody) => r.claimed_by.is_none(),
                    Match::Claimed(Claimed::Me) => r.claimed_by.as_deref() == Some(viewer),
                    Match::Claimed(Claimed::By(who)) => r.claimed_by.as_deref() == Some(who),
                    Match::Claimed(Claimed::Anyone) => r.claimed_by.is_some(),
                    _ => true,
                };
                holds != t.negated
            })
        });
        Ok(out)
    }
}
