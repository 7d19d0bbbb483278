//! What a filter matches as a whole: every key (what a bulk action acts on) and how many (the
//! console's "N of M").

use super::Reader;
use super::list::owned;
use super::list::{ListFilter, Position, list_query, scope_of, team_unheld};
use crate::error::Result;
use crate::store::ListQuery;

impl Reader<'_> {
    /// Every key a filter matches now, in the list's order (the whole set, page by page).
    pub async fn matching_keys(self, filter: &ListFilter, viewer: &str) -> Result<Vec<String>> {
        if let Some(keys) = self.matching_keys_only(filter, viewer).await? {
            return Ok(keys);
        }
        // bare words: matched against the rows as shown (redacted), page by page
        let mut keys = Vec::new();
        let mut position = Position::First;
        loop {
            let page = self.page(filter, viewer, &position, 500).await?;
            keys.extend(page.items.iter().map(|v| v.key.clone()));
            match (page.more_after, page.next) {
                (true, Some(c)) => position = Position::After(c),
                _ => return Ok(keys),
            }
        }
    }

    /// Every key a filter matches now, in the list's order, from the keys alone (one statement);
    /// `None` when the filter holds bare words, which are matched against the redacted rows.
    pub(super) async fn matching_keys_only(
        self,
        filter: &ListFilter,
        viewer: &str,
    ) -> Result<Option<Vec<String>>> {
        let filter = &*owned(&self.0.config, filter, viewer);
        if filter.query.words().next().is_some() || filter.query.negated_words().next().is_some() {
            return Ok(None);
        }
        let now = self.0.now();
        let Some((states, not_after)) = scope_of(filter, now) else {
            return Ok(Some(Vec::new()));
        };
        let query = ListQuery {
            backwards: filter.reverse,
            team_unheld: team_unheld(&self.0.config, filter, viewer),
            ..list_query(filter, self.0.scope(), viewer, &states, not_after, now)
        };
        self.0.store.matching_keys(&query).await.map(Some)
    }

    /// How many operations of the view the filter matches, for the console's "N of M"; `None`
    /// when the filter holds bare words (negated or not): those are checked against what is shown (a
    /// match inside a redacted value must not count), which a count cannot do.
    pub async fn count_matching(self, filter: &ListFilter, viewer: &str) -> Result<Option<i64>> {
        let filter = &*owned(&self.0.config, filter, viewer);
        let q = &filter.query;
        if q.words().chain(q.negated_words()).next().is_some() {
            return Ok(None);
        }
        let now = self.0.now();
        let Some((states, not_after)) = scope_of(filter, now) else {
            return Ok(Some(0));
        };
        let query = ListQuery {
            team_unheld: team_unheld(&self.0.config, filter, viewer),
            ..list_query(filter, self.0.scope(), viewer, &states, not_after, now)
        };
        let ops = self.0.store.count_matching(&query).await?;
        // view 1 shows the stalled runs the filter allows above its operations (manual: Runs)
        Ok(Some(ops + self.stalled_count_for(filter, viewer).await?))
    }
}
