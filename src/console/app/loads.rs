//! What the console loads: the filters it asks with, reloads, refreshes, the status line.

use super::messages::Place;
use crate::console::app::{MAX_ROWS, PAGE, View};
use crate::console::{App, Effect};
use crate::ledger::{ListFilter, Position};

impl App {
    pub fn list_filter(&self) -> ListFilter {
        // the filter (manual: The filter): the terms that are whole narrow the list as they are typed
        let (query, _) = crate::domain::filter::Filter::lenient(self.filter.value());
        ListFilter {
            scope: self.view.scope(),
            query,
            sort: self.sort,
            reverse: self.reverse,
            ..Default::default()
        }
    }

    /// The review's scope: the list filter's workflow or destination, when it names one (manual: The review after a release).
    pub fn review_scope(&self) -> crate::ledger::ReviewScope {
        use crate::domain::filter::Match;
        let (query, _) = crate::domain::filter::Filter::lenient(self.filter.value());
        let mut scope = crate::ledger::ReviewScope::default();
        for t in query.terms.iter().filter(|t| !t.negated) {
            match &t.matches {
                Match::Workflow(w) => scope.workflow = Some(w.clone()),
                Match::Destination(d) => scope.destination = Some(d.clone()),
                _ => {}
            }
        }
        scope
    }

    /// Activity's filter: what `/` holds, read as Activity reads it.
    pub fn activity_filter(&self) -> crate::domain::activity_filter::ActivityFilter {
        crate::domain::activity_filter::ActivityFilter::lenient(
            self.filter.value(),
            self.automation,
        )
        .0
    }

    pub(crate) fn next_seq(&mut self) -> u64 {
        self.seq += 1;
        self.seq
    }

    pub(crate) fn reload(&mut self, position: Position, select_last: bool) -> Vec<Effect> {
        let seq = self.next_seq();
        if self.view == View::Review {
            return vec![self.review.ask(seq, self.review_scope()), Effect::Header];
        }
        self.loading = true;
        if self.view == View::Activity {
            return vec![Effect::Activity {
                seq,
                filter: self.activity_filter(),
            }];
        }
        let filter = self.list_filter();
        let mut fx = vec![Effect::Page {
            seq,
            filter: filter.clone(),
            position,
            limit: PAGE,
            place: Place::Replace { select_last },
        }];
        self.filter_count = None;
        if self.view == View::Exceptions {
            self.stalled.asked_fresh(seq);
            fx.push(Effect::Stalled {
                seq,
                filter: filter.clone(),
            });
        } else {
            self.stalled.on = None;
        }
        if self.groups.shown {
            self.groups.asked(seq);
            fx.push(Effect::Groups {
                seq,
                filter: filter.clone(),
            });
        }
        if !filter.query.is_empty() {
            self.count_seq = seq;
            fx.push(Effect::Count { seq, filter });
        }
        fx
    }

    /// Reloads the rows on screen where they are (live refresh): the selection stays put.
    pub(crate) fn refresh(&mut self) -> Vec<Effect> {
        let position = match self.rows.first() {
            Some(r) if self.more_before => Position::From(r.cursor.clone()),
            _ => Position::First,
        };
        let seq = self.next_seq();
        let mut fx = if self.view == View::Review {
            vec![self.review.ask(seq, self.review_scope())]
        } else if self.view == View::Activity {
            vec![Effect::Activity {
                seq,
                filter: self.activity_filter(),
            }]
        } else {
            let limit = self.rows.len().clamp(PAGE, MAX_ROWS);
            let filter = self.list_filter();
            let mut fx = vec![Effect::Page {
                seq,
                filter: filter.clone(),
                position,
                limit,
                place: Place::Replace { select_last: false },
            }];
            if self.view == View::Exceptions {
                self.stalled.asked(seq);
                fx.push(Effect::Stalled {
                    seq,
                    filter: filter.clone(),
                });
            }
            if self.view == View::Exceptions && self.groups.shown {
                self.groups.asked(seq);
                fx.push(Effect::Groups {
                    seq,
                    filter: filter.clone(),
                });
            }
            // the header's "N of M" follows the change too
            if !filter.query.is_empty() {
                self.count_seq = seq;
                fx.push(Effect::Count { seq, filter });
            }
            fx
        };
        fx.push(Effect::Header);
        if let Some(k) = self.selected_row().map(|r| r.key.clone()) {
            fx.push(Effect::Detail { key: k });
        }
        if let Some(r) = self.selected_run() {
            fx.push(Effect::Run { run: r.run.clone() });
        }
        fx
    }
}
