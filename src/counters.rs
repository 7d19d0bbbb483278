//! The process's own counters and histograms (manual: Metrics): what this process did since it
//! started, by Prometheus' conventions. Kept in memory, one registry per process; `/metrics`
//! writes them beside the ledger's gauges, and keeps writing them while the database is down.
//!
//! A write's counts are tallied on its transaction and added only once it commits (see
//! `store::Tx::tally`), so a write that lost a race and was tried again counts once.

use std::collections::BTreeMap;
use std::fmt::Write;
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

/// A counter family: its name, help and label names.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Family {
    pub name: &'static str,
    help: &'static str,
    labels: &'static [&'static str],
}

pub const ATTEMPTS: Family = Family {
    name: "settle_attempts_total",
    help: "Attempts recorded by this process, by destination and outcome.",
    labels: &["destination", "outcome"],
};
pub const EXCEPTIONS_OPENED: Family = Family {
    name: "settle_exceptions_opened_total",
    help: "Operations this process moved into an exception state, by workflow and state.",
    labels: &["workflow", "state"],
};
pub const STAFF_ACTIONS: Family = Family {
    name: "settle_staff_actions_total",
    help: "A person's actions this process carried out, by action.",
    labels: &["action"],
};
pub const HTTP_REQUESTS: Family = Family {
    name: "settle_http_requests_total",
    help: "HTTP requests this process answered, by route and status code.",
    labels: &["route", "code"],
};
pub const GATEWAY_ANSWERS: Family = Family {
    name: "settle_gateway_answers_total",
    help: "The gateway's answers, by destination and what it did (sent, replayed, refused, ...).",
    labels: &["destination", "answer"],
};
pub const LOOKUPS: Family = Family {
    name: "settle_lookups_total",
    help: "Lookups at destinations recorded by this process, by destination and answer.",
    labels: &["destination", "answer"],
};

pub const NOTIFICATIONS: Family = Family {
    name: "settle_notifications_total",
    help: "Tries at sending a message to a channel by this process, by channel and result (sent, failed).",
    labels: &["channel", "result"],
};

pub const CONNECTIONS_REFUSED: Family = Family {
    name: "settle_connections_refused_total",
    help: "Connections this process closed at once, or ended before they were of use, by listener (ssh, http, metrics) and why (full, per_address, startups, login_grace, no_handles).",
    labels: &["listener", "why"],
};

pub const BREAKER_TRANSITIONS: Family = Family {
    name: "settle_breaker_transitions_total",
    help: "Destinations' breakers this process opened or closed, by destination and the state it went to (open, closed).",
    labels: &["destination", "to"],
};

/// The counter families every process writes (with no sample until something is counted).
const COUNTERS: [Family; 9] = [
    ATTEMPTS,
    EXCEPTIONS_OPENED,
    STAFF_ACTIONS,
    HTTP_REQUESTS,
    GATEWAY_ANSWERS,
    LOOKUPS,
    NOTIFICATIONS,
    CONNECTIONS_REFUSED,
    BREAKER_TRANSITIONS,
];

pub const ATTEMPT_SECONDS: Family = Family {
    name: "settle_attempt_duration_seconds",
    help: "How long the attempts this process sent took, by destination.",
    labels: &["destination"],
};
pub const HTTP_SECONDS: Family = Family {
    name: "settle_http_request_duration_seconds",
    help: "How long this process took to answer HTTP requests, by route.",
    labels: &["route"],
};

const HISTOGRAMS: [Family; 2] = [ATTEMPT_SECONDS, HTTP_SECONDS];

/// Prometheus' default buckets, in seconds.
const BUCKETS: [f64; 11] = [
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
];

/// One increment of a counter, waiting for its transaction to commit.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Count {
    family: Family,
    values: Vec<String>,
}

impl Count {
    /// One of `family`, with its label values in the family's order.
    pub fn of(family: Family, values: &[&str]) -> Count {
        debug_assert_eq!(values.len(), family.labels.len(), "{}", family.name);
        Count {
            family,
            values: values.iter().map(|v| v.to_string()).collect(),
        }
    }
}

#[derive(Default)]
struct Histogram {
    /// Observations at or under each bucket's bound (not yet cumulative).
    buckets: [u64; BUCKETS.len()],
    count: u64,
    sum: f64,
}

#[derive(Default)]
struct Registry {
    counters: BTreeMap<(Family, Vec<String>), u64>,
    histograms: BTreeMap<(Family, Vec<String>), Histogram>,
}

static REGISTRY: Mutex<Registry> = Mutex::new(Registry {
    counters: BTreeMap::new(),
    histograms: BTreeMap::new(),
});

fn registry() -> std::sync::MutexGuard<'static, Registry> {
    // a panic elsewhere while counting leaves the counts as they were: still worth serving
    REGISTRY.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Adds one to each count.
pub fn add(counts: impl IntoIterator<Item = Count>) {
    let mut r = registry();
    for c in counts {
        *r.counters.entry((c.family, c.values)).or_default() += 1;
    }
}

/// Adds one to a counter now (for what no transaction writes: a request answered).
pub fn inc(family: Family, values: &[&str]) {
    add([Count::of(family, values)]);
}

/// One observation of a histogram.
pub fn observe(family: Family, values: &[&str], took: Duration) {
    let secs = took.as_secs_f64();
    let mut r = registry();
    let key = (family, values.iter().map(|v| v.to_string()).collect());
    let h = r.histograms.entry(key).or_default();
    if let Some(i) = BUCKETS.iter().position(|b| secs <= *b) {
        h.buckets[i] += 1;
    }
    h.count += 1;
    h.sum += secs;
}

/// A label value as the text format wants it: backslash, double quote and newline escaped.
pub fn label(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

fn labels(family: &Family, values: &[String], extra: Option<(&str, &str)>) -> String {
    let mut pairs: Vec<String> = family
        .labels
        .iter()
        .zip(values)
        .map(|(n, v)| format!("{n}=\"{}\"", label(v)))
        .collect();
    pairs.extend(extra.map(|(n, v)| format!("{n}=\"{v}\"")));
    if pairs.is_empty() {
        String::new()
    } else {
        format!("{{{}}}", pairs.join(","))
    }
}

/// The counters and histograms as Prometheus text (format 0.0.4), appended to `out`.
pub fn render(out: &mut String) {
    let r = registry();
    for family in COUNTERS {
        let _ = writeln!(
            out,
            "# HELP {0} {1}\n# TYPE {0} counter",
            family.name, family.help
        );
        for ((f, values), n) in r.counters.iter().filter(|((f, _), _)| *f == family) {
            let _ = writeln!(out, "{}{} {n}", f.name, labels(f, values, None));
        }
    }
    for family in HISTOGRAMS {
        let _ = writeln!(
            out,
            "# HELP {0} {1}\n# TYPE {0} histogram",
            family.name, family.help
        );
        for ((f, values), h) in r.histograms.iter().filter(|((f, _), _)| *f == family) {
            let mut below = 0;
            for (bound, n) in BUCKETS.iter().zip(h.buckets) {
                below += n;
                let le = bound.to_string();
                let _ = writeln!(
                    out,
                    "{}_bucket{} {below}",
                    f.name,
                    labels(f, values, Some(("le", &le)))
                );
            }
            let _ = writeln!(
                out,
                "{}_bucket{} {}\n{0}_sum{3} {4}\n{0}_count{3} {2}",
                f.name,
                labels(f, values, Some(("le", "+Inf"))),
                h.count,
                labels(f, values, None),
                h.sum
            );
        }
    }
}
