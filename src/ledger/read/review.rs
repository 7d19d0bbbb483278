//! The review after a release (manual: The review after a release): exception age, opened against resolved per day, each
//! workflow's and destination's time to resolve and automatic pauses, and the duplicates that
//! happened, arrived or were prevented. One function computes it for a window; the console's
//! view 6 and `settle report` both show what it returns.

use std::collections::BTreeMap;
use std::time::Duration;

use chrono::{DateTime, TimeDelta, Utc};
use serde::Serialize;

use super::Reader;
use crate::domain::State;
use crate::domain::time::percentile;
use crate::error::{Error, Result};
use crate::store::review::{AGE_BOUNDS_HOURS, ReviewRows};

/// The age buckets as the manual's review names them, youngest first.
pub const AGE_BUCKETS: [&str; 6] = ["<1h", "1h-4h", "4h-24h", "1d-3d", "3d-7d", ">7d"];

/// Which part of the ledger a review covers: everything, or one workflow or destination.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ReviewScope {
    pub workflow: Option<String>,
    pub destination: Option<String>,
}

impl ReviewScope {
    fn covers(&self, workflow: Option<&str>, destination: Option<&str>) -> bool {
        let is = |want: &Option<String>, have: Option<&str>| {
            want.as_deref().is_none_or(|w| have == Some(w))
        };
        is(&self.workflow, workflow) && is(&self.destination, destination)
    }
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct AgeBucket {
    pub bucket: &'static str,
    pub count: i64,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct DayCount {
    pub day: String,
    pub opened: i64,
    pub resolved: i64,
}

/// One workflow's or destination's line of the review.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct GroupReview {
    pub open: i64,
    pub oldest_seconds: Option<i64>,
    pub unknown: i64,
    pub resolved: i64,
    pub resolve_p50_seconds: Option<i64>,
    pub resolve_p90_seconds: Option<i64>,
    pub auto_pauses: i64,
    /// Requests corrected in the window (manual: Correcting a request).
    pub corrections: i64,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Duplicates {
    /// Closed as `duplicate_cleaned_up` in the window: a duplicate happened and was cleaned up.
    pub cleaned_up: i64,
    /// The same key came with new contents.
    pub conflicts: i64,
    /// Unknown outcomes then found done, by lookup or a person's reconcile: a blind retry would
    /// have repeated them.
    pub prevented: i64,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Review {
    pub window_seconds: i64,
    /// The end of the window (not in the list (manual: The review after a release); a report says when it was made).
    pub at: DateTime<Utc>,
    pub open_exceptions: i64,
    pub age_buckets: Vec<AgeBucket>,
    pub per_day: Vec<DayCount>,
    pub by_workflow: BTreeMap<String, GroupReview>,
    pub by_destination: BTreeMap<String, GroupReview>,
    pub duplicates: Duplicates,
    /// Requests corrected in the window (manual: Correcting a request): each rejected or failed
    /// request a person corrected, a chain's every link counted.
    pub corrections: i64,
    /// The runs of the window (manual: Runs); of the scope's workflow (a destination's review counts
    /// every run: a run has no destination of its own).
    pub runs: super::run_review::RunsReview,
}

/// The longest window a review covers.
pub const MAX_WINDOW: Duration = Duration::from_secs(3650 * 86_400);

impl Reader<'_> {
    /// The review of the window ending now (manual: The review after a release), for `scope`.
    pub async fn review(self, window: Duration, scope: &ReviewScope) -> Result<Review> {
        if window.is_zero() || window > MAX_WINDOW {
            return Err(Error::Invalid(
                "a review's window is between 1 second and 10 years".into(),
            ));
        }
        let now = self.0.now();
        let since = now - TimeDelta::from_std(window).unwrap_or(TimeDelta::days(3650));
        let rows = self.0.store.review_rows(since, now).await?;
        let mut review = fold(rows, window, now, scope);
        review.runs = self.run_review(since, scope.workflow.as_deref()).await?;
        Ok(review)
    }
}

fn day_label(day: i64) -> String {
    DateTime::<Utc>::from_timestamp(day * 86_400, 0)
        .map(|d| d.format("%Y-%m-%d").to_string())
        .unwrap_or_default()
}

/// The review's lines, by workflow and by destination.
#[derive(Default)]
struct Lines {
    by_workflow: BTreeMap<String, GroupReview>,
    by_destination: BTreeMap<String, GroupReview>,
}

impl Lines {
    fn table(&mut self, by_dest: bool) -> &mut BTreeMap<String, GroupReview> {
        if by_dest {
            &mut self.by_destination
        } else {
            &mut self.by_workflow
        }
    }
}

fn fold(rows: ReviewRows, window: Duration, now: DateTime<Utc>, scope: &ReviewScope) -> Review {
    let mut lines = Lines::default();
    let buckets = fold_open(&rows, now, scope, &mut lines);
    let days = window.as_secs().div_ceil(86_400).max(1) as i64;
    let today = now.timestamp().div_euclid(86_400);
    let first = today - days + 1;
    let mut per_day: Vec<DayCount> = (first..=today)
        .map(|d| DayCount {
            day: day_label(d),
            opened: 0,
            resolved: 0,
        })
        .collect();
    let slot = |day: i64| {
        usize::try_from(day - first)
            .ok()
            .filter(|i| *i < days as usize)
    };
    for o in rows
        .opened
        .iter()
        .filter(|o| scope.covers(Some(&o.workflow), Some(&o.destination)))
    {
        if let Some(i) = slot(o.day) {
            per_day[i].opened += o.n;
        }
    }
    let mut duplicates = fold_resolved(&rows, scope, &mut lines, |day| {
        if let Some(i) = slot(day) {
            per_day[i].resolved += 1;
        }
    });
    let corrections = fold_events(&rows, scope, &mut lines, &mut duplicates);
    Review {
        window_seconds: window.as_secs() as i64,
        at: now,
        open_exceptions: buckets.iter().sum(),
        age_buckets: AGE_BUCKETS
            .iter()
            .zip(buckets)
            .map(|(bucket, count)| AgeBucket { bucket, count })
            .collect(),
        per_day,
        by_workflow: lines.by_workflow,
        by_destination: lines.by_destination,
        duplicates,
        corrections,
        runs: Default::default(),
    }
}

/// The open exceptions into their lines (open, unknown, oldest); returns the counts by age.
fn fold_open(
    rows: &ReviewRows,
    now: DateTime<Utc>,
    scope: &ReviewScope,
    lines: &mut Lines,
) -> [i64; 6] {
    let mut buckets = [0i64; 6];
    let mut oldest: BTreeMap<(bool, String), DateTime<Utc>> = BTreeMap::new();
    for g in rows
        .open
        .iter()
        .filter(|g| scope.covers(Some(&g.workflow), Some(&g.destination)))
    {
        buckets[g.bucket.min(AGE_BOUNDS_HOURS.len())] += g.n;
        for (by_dest, name) in [(false, &g.workflow), (true, &g.destination)] {
            let line = lines.table(by_dest).entry(name.clone()).or_default();
            line.open += g.n;
            if g.state == State::Unknown {
                line.unknown += g.n;
            }
            let o = oldest.entry((by_dest, name.clone())).or_insert(g.oldest);
            *o = (*o).min(g.oldest);
        }
    }
    for ((by_dest, name), at) in oldest {
        if let Some(line) = lines.table(by_dest).get_mut(&name) {
            line.oldest_seconds = Some((now - at).num_seconds().max(0));
        }
    }
    buckets
}

/// The resolutions into their lines (how many, how long they took); each one's day is handed to
/// `resolved_on`. Returns the duplicates they prevented and cleaned up.
fn fold_resolved(
    rows: &ReviewRows,
    scope: &ReviewScope,
    lines: &mut Lines,
    mut resolved_on: impl FnMut(i64),
) -> Duplicates {
    let mut duplicates = Duplicates::default();
    let mut took: BTreeMap<(bool, String), Vec<i64>> = BTreeMap::new();
    for r in rows
        .resolved
        .iter()
        .filter(|r| scope.covers(Some(&r.workflow), Some(&r.destination)))
    {
        resolved_on(r.resolved_at.timestamp().div_euclid(86_400));
        let seconds = r.took_ms.max(0) / 1000;
        for (by_dest, name) in [(false, &r.workflow), (true, &r.destination)] {
            took.entry((by_dest, name.clone()))
                .or_default()
                .push(seconds);
        }
        if r.resolution.as_deref() == Some("duplicate_cleaned_up") {
            duplicates.cleaned_up += 1;
        }
        if r.from == State::Unknown.as_str() && r.to == State::Succeeded.as_str() {
            duplicates.prevented += 1;
        }
    }
    for ((by_dest, name), mut v) in took {
        v.sort_unstable();
        let line = lines.table(by_dest).entry(name).or_default();
        line.resolved = v.len() as i64;
        line.resolve_p50_seconds = percentile(&v, 50);
        line.resolve_p90_seconds = percentile(&v, 90);
    }
    duplicates
}

/// The conflicts, the corrections and the automatic pauses of the window; how many corrections.
fn fold_events(
    rows: &ReviewRows,
    scope: &ReviewScope,
    lines: &mut Lines,
    duplicates: &mut Duplicates,
) -> i64 {
    let mut corrections = 0;
    for e in &rows.events {
        let detail: serde_json::Value = serde_json::from_str(&e.detail).unwrap_or_default();
        match e.kind.as_str() {
            "conflict" => {
                if scope.covers(e.workflow.as_deref(), e.destination.as_deref()) {
                    duplicates.conflicts += 1;
                }
            }
            "corrected" => {
                if !scope.covers(e.workflow.as_deref(), e.destination.as_deref()) {
                    continue;
                }
                corrections += 1;
                if let Some(w) = &e.workflow {
                    lines.by_workflow.entry(w.clone()).or_default().corrections += 1;
                }
                if let Some(d) = &e.destination {
                    lines
                        .by_destination
                        .entry(d.clone())
                        .or_default()
                        .corrections += 1;
                }
            }
            _ => {
                // an automatic pause: of a workflow (its column), or of a destination (its detail)
                let paused_destination = detail.get("destination").and_then(|d| d.as_str());
                if !scope.covers(e.workflow.as_deref(), paused_destination) {
                    continue;
                }
                if let Some(w) = &e.workflow {
                    lines.by_workflow.entry(w.clone()).or_default().auto_pauses += 1;
                }
                if let Some(d) = paused_destination {
                    lines
                        .by_destination
                        .entry(d.to_string())
                        .or_default()
                        .auto_pauses += 1;
                }
            }
        }
    }
    corrections
}
