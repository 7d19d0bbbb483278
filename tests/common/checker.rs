//! the invariants (manual: Proof under faults), checked against the ledger and the destinations' own records (each a
//! `settle sim`), for any drill, test or chaos run to call after its run, however faulty:
//!
//! 1. at a destination that does not deduplicate, at most one task per key;
//! 2. `succeeded` means the destination has the task, and the stored reference is its id;
//! 3. `failed` ("confirmed not done") means the destination has no task for the key;
//! 4. an operation is `unknown` only where settle could not observe the outcome: its last
//!    attempt's recorded outcome is not a confirmed one (accepted or rejected);
//! 5. nothing stays `in_flight` after a sweep past the attempt timeout;
//! 6. every state change has exactly one audit event (each operation's events chain from its
//!    record to its state now), and the kept counters equal a recount.
//!
//! It reads the database with plain SQL (the tests' back door, [`Raw`]), never through settle.

use std::collections::BTreeMap;
use std::fmt;

use super::{Raw, Sim};

/// A destination as the checker sees it: its name in the config, the simulator behind it.
pub struct Destination<'a> {
    pub name: &'a str,
    pub sim: &'a Sim,
    pub dedupes: bool,
}

/// One broken invariant: which, the key (empty for a counter), what the ledger and the
/// destination hold.
#[derive(Clone, Debug, PartialEq)]
pub struct Violation {
    pub invariant: u8,
    pub key: String,
    pub what: String,
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "invariant {} {}: {}",
            self.invariant, self.key, self.what
        )
    }
}

/// Every violation, one a line; "no violations" when there is none.
pub fn report(found: &[Violation]) -> String {
    if found.is_empty() {
        return "no violations".into();
    }
    found.iter().map(|v| format!("{v}\n")).collect()
}

/// Checks the ledger at `url` against `destinations`; `swept`: a sweep past the attempt
/// timeout has run (invariant 5 applies).
pub async fn check(url: &str, destinations: &[Destination<'_>], swept: bool) -> Vec<Violation> {
    let mut raw = Raw::connect(url).await;
    let mut found = Vec::new();
    let mut held = BTreeMap::new();
    for d in destinations {
        let ids = d.sim.ids_by_key();
        for (key, ids) in &ids {
            if !d.dedupes && ids.len() > 1 {
                found.push(violation(
                    1,
                    key,
                    format!("{} holds {} tasks: {ids:?}", d.name, ids.len()),
                ));
            }
        }
        held.insert(d.name.to_string(), ids);
    }
    let ops = raw
        .texts(
            "SELECT key || '|' || destination || '|' || state || '|' || COALESCE(reference, '') \
             FROM operations ORDER BY key",
        )
        .await;
    let mut states = BTreeMap::new();
    for line in &ops {
        let mut parts = line.rsplitn(4, '|');
        let (reference, state, destination, key) = (
            parts.next().unwrap(),
            parts.next().unwrap(),
            parts.next().unwrap(),
            parts.next().unwrap(),
        );
        states.insert(key.to_string(), state.to_string());
        let Some(at) = held.get(destination) else {
            continue;
        };
        let tasks = at.get(key).cloned().unwrap_or_default();
        match state {
            "succeeded" if tasks.is_empty() => found.push(violation(
                2,
                key,
                format!("succeeded ({reference}), but {destination} holds no task for it"),
            )),
            "succeeded" if !tasks.iter().any(|id| id == reference) => found.push(violation(
                2,
                key,
                format!("succeeded with reference {reference}, but {destination} holds {tasks:?}"),
            )),
            "failed" if !tasks.is_empty() => found.push(violation(
                3,
                key,
                format!("failed (confirmed not done), but {destination} holds {tasks:?}"),
            )),
            "in_flight" if swept => found.push(violation(
                5,
                key,
                format!("in_flight after a sweep; {destination} holds {tasks:?}"),
            )),
            _ => {}
        }
    }
    found.extend(observed_but_unknown(&mut raw).await);
    found.extend(event_chains(&mut raw, &states).await);
    found.extend(counters(&mut raw).await);
    found
}

fn violation(invariant: u8, key: &str, what: String) -> Violation {
    Violation {
        invariant,
        key: key.to_string(),
        what,
    }
}

/// Invariant 4: unknown operations whose last attempt has a confirmed outcome.
async fn observed_but_unknown(raw: &mut Raw) -> Vec<Violation> {
    raw.texts(
        "SELECT o.key || '|' || a.outcome FROM operations o JOIN attempts a ON a.operation_id = o.id \
         WHERE o.state = 'unknown' AND a.outcome IN ('accepted', 'rejected') \
           AND a.n = (SELECT MAX(b.n) FROM attempts b WHERE b.operation_id = o.id)",
    )
    .await
    .iter()
    .map(|line| {
        let (key, outcome) = line.rsplit_once('|').unwrap();
        violation(4, key, format!("unknown, though its last attempt was {outcome}"))
    })
    .collect()
}

/// Invariant 6, per operation: its state changes (events whose state before and after differ)
/// chain from nothing to its state now, with no change missing or told twice.
async fn event_chains(raw: &mut Raw, states: &BTreeMap<String, String>) -> Vec<Violation> {
    let rows = raw
        .texts(
            "SELECT o.key || '|' || COALESCE(e.from_state, '') || '|' || e.to_state \
             FROM events e JOIN operations o ON o.id = e.operation_id \
             WHERE e.to_state IS NOT NULL \
               AND (e.from_state IS NULL OR e.from_state <> e.to_state) \
             ORDER BY o.key, e.id",
        )
        .await;
    let mut chains: BTreeMap<&str, Vec<(&str, &str)>> = BTreeMap::new();
    for line in &rows {
        let mut parts = line.rsplitn(3, '|');
        let (to, from, key) = (
            parts.next().unwrap(),
            parts.next().unwrap(),
            parts.next().unwrap(),
        );
        chains.entry(key).or_default().push((from, to));
    }
    let mut found = Vec::new();
    for (key, state) in states {
        let chain = chains.get(key.as_str()).cloned().unwrap_or_default();
        let mut at = "";
        let mut broken = None;
        for (from, to) in &chain {
            if *from != at {
                broken = Some(format!(
                    "an event from {from} follows the state {}",
                    shown(at)
                ));
                break;
            }
            at = to;
        }
        if broken.is_none() && at != state {
            broken = Some(format!(
                "its events end at {}, its state is {state}",
                shown(at)
            ));
        }
        if let Some(what) = broken {
            let told: Vec<String> = chain
                .iter()
                .map(|(f, t)| format!("{}>{t}", shown(f)))
                .collect();
            found.push(violation(
                6,
                key,
                format!("{what} (events: {})", told.join(" ")),
            ));
        }
    }
    found
}

fn shown(state: &str) -> &str {
    if state.is_empty() { "(none)" } else { state }
}

/// Invariant 6, the counters: per state, the kept count equals a count of the operations.
async fn counters(raw: &mut Raw) -> Vec<Violation> {
    let pairs = async |raw: &mut Raw, sql: &str| -> BTreeMap<String, i64> {
        raw.texts(sql)
            .await
            .iter()
            .map(|l| {
                let (state, n) = l.rsplit_once('|').unwrap();
                (state.to_string(), n.parse().unwrap())
            })
            .collect()
    };
    let kept = pairs(
        raw,
        "SELECT state || '|' || CAST(SUM(n) AS TEXT) FROM state_counts GROUP BY state",
    )
    .await;
    let counted = pairs(
        raw,
        "SELECT state || '|' || CAST(COUNT(*) AS TEXT) FROM operations GROUP BY state",
    )
    .await;
    let states: std::collections::BTreeSet<&String> = kept.keys().chain(counted.keys()).collect();
    states
        .into_iter()
        .filter_map(|state| {
            let (k, c) = (
                kept.get(state).copied().unwrap_or(0),
                counted.get(state).copied().unwrap_or(0),
            );
            (k != c).then(|| {
                violation(
                    6,
                    "",
                    format!("{state}: the counter keeps {k}, a recount finds {c}"),
                )
            })
        })
        .collect()
}

/// [`check`] from blocking code (a drill that runs processes).
pub fn check_blocking(url: &str, destinations: &[Destination<'_>], swept: bool) -> Vec<Violation> {
    super::on_a_thread(check(url, destinations, swept))
}
