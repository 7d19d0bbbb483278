//! The breaker's and the pace's rules, on plain data.

use super::*;
use crate::domain::Outcome;

fn t0() -> DateTime<Utc> {
    DateTime::parse_from_rfc3339("2026-12-07T10:00:00Z")
        .unwrap()
        .with_timezone(&Utc)
}

fn at(ms: i64) -> DateTime<Utc> {
    t0() + TimeDelta::milliseconds(ms)
}

const TIMEOUT: Signal = Signal::Failing {
    why: "no answer",
    slows: true,
};

#[test]
fn the_signals_of_answers() {
    assert_eq!(signal(Outcome::Accepted, Some(201)), Signal::Healthy);
    assert_eq!(signal(Outcome::Rejected, Some(422)), Signal::Neutral);
    assert_eq!(signal(Outcome::Transient, Some(401)), Signal::Neutral);
    assert_eq!(signal(Outcome::Transient, Some(409)), Signal::Neutral);
    assert!(matches!(
        signal(Outcome::Transient, Some(429)),
        Signal::Failing { slows: true, .. }
    ));
    assert!(matches!(
        signal(Outcome::Unknown, Some(500)),
        Signal::Failing { slows: false, .. }
    ));
    assert!(matches!(
        signal(Outcome::Unknown, None),
        Signal::Failing { slows: true, .. }
    ));
    assert!(matches!(
        signal(Outcome::Transient, None),
        Signal::Failing { slows: false, .. }
    ));
}

#[test]
fn five_failures_that_are_half_the_window_open_it_and_nothing_starts() {
    let p = BreakerPolicy::default();
    let mut h = Health::new(t0());
    assert_eq!(h.gate(&p, t0()), Gate::Send(usize::MAX));
    // five successes, then four timeouts: 4 of 9, not enough
    for i in 0..5 {
        assert_eq!(
            h.observe(Signal::Healthy, None, false, &p, at(i), 0.5),
            None
        );
    }
    for i in 0..4 {
        assert_eq!(h.observe(TIMEOUT, None, false, &p, at(10 + i), 0.5), None);
    }
    assert_eq!(h.state, BreakerState::Closed);
    // the fifth is 5 of 10: half, and five
    let opened = h.observe(TIMEOUT, None, false, &p, at(20), 0.5);
    assert!(matches!(opened, Some(Change::Opened { .. })), "{opened:?}");
    assert!(matches!(h.gate(&p, at(30)), Gate::Held(_)));
}

#[test]
fn business_rejections_never_open_it() {
    let p = BreakerPolicy::default();
    let mut h = Health::new(t0());
    for i in 0..100 {
        let s = signal(Outcome::Rejected, Some(422));
        assert_eq!(h.observe(s, None, false, &p, at(i), 0.5), None);
    }
    assert_eq!(h.state, BreakerState::Closed);
    assert_eq!(h.gate(&p, at(200)), Gate::Send(usize::MAX));
}

#[test]
fn after_its_cooldown_one_probe_then_a_close_at_the_starting_pace() {
    let p = BreakerPolicy {
        pace_max: Some(40.0),
        ..BreakerPolicy::default()
    };
    let mut h = Health::new(t0());
    for i in 0..5 {
        h.observe(TIMEOUT, None, false, &p, at(i), 0.0);
    }
    assert_eq!(h.state, BreakerState::Open);
    // jitter 0: half the cooldown
    assert_eq!(h.gate(&p, at(4_999)), Gate::Held(at(5_004)));
    assert_eq!(h.gate(&p, at(5_004)), Gate::Probe);
    h.probing("p-1", at(5_004));
    assert!(h.is_probe("p-1") && !h.is_probe("p-2"));
    // one probe at a time
    assert!(matches!(h.gate(&p, at(5_100)), Gate::Held(_)));
    // it fails: open again, for twice as long
    assert_eq!(h.observe(TIMEOUT, None, true, &p, at(6_000), 0.0), None);
    assert_eq!(h.state, BreakerState::Open);
    assert_eq!(h.gate(&p, at(6_001)), Gate::Held(at(16_000)));
    assert_eq!(h.gate(&p, at(16_000)), Gate::Probe);
    h.probing("p-2", at(16_000));
    let closed = h.observe(Signal::Healthy, None, true, &p, at(16_100), 0.0);
    assert_eq!(closed, Some(Change::Closed));
    // the pace starts at 5/s: one now, then five a second
    assert_eq!(h.gate(&p, at(16_100)), Gate::Send(1));
    h.took(1);
    assert!(matches!(h.gate(&p, at(16_150)), Gate::Held(_)));
    assert_eq!(h.gate(&p, at(17_100)), Gate::Send(5));
}

#[test]
fn the_pace_rises_on_clean_seconds_halves_on_429_and_never_passes_its_max() {
    let p = BreakerPolicy {
        pace_max: Some(40.0),
        ..BreakerPolicy::default()
    };
    let mut h = Health::new(t0());
    h.open_by_hand("drill", t0());
    h.close_by_hand(&p, t0());
    assert_eq!(h.rate, Some(5.0));
    for s in 1..=20 {
        h.observe(Signal::Healthy, None, false, &p, at(s * 1000), 0.5);
    }
    assert_eq!(h.rate, Some(40.0));
    let slow = signal(Outcome::Transient, Some(429));
    h.observe(
        slow,
        Some(Duration::from_secs(1)),
        false,
        &p,
        at(21_000),
        0.5,
    );
    assert_eq!(h.rate, Some(20.0));
    // the Retry-After holds the whole destination
    assert_eq!(h.gate(&p, at(21_500)), Gate::Held(at(22_000)));
    assert!(matches!(h.gate(&p, at(22_000)), Gate::Send(_)));
    // with no max known, the pace is lifted after a window without trouble
    let free = BreakerPolicy::default();
    let mut h = Health::new(t0());
    assert_eq!(h.close_by_hand(&free, t0()), None);
    assert_eq!(h.rate, None, "closing a closed breaker sets no pace");
    h.open_by_hand("drill", t0());
    h.close_by_hand(&free, t0());
    h.observe(Signal::Healthy, None, false, &free, at(10_000), 0.5);
    assert_eq!(h.rate, Some(55.0));
    h.observe(Signal::Healthy, None, false, &free, at(31_000), 0.5);
    assert_eq!(h.rate, None);
    assert_eq!(h.gate(&free, at(31_000)), Gate::Send(usize::MAX));
}

#[test]
fn a_breaker_opened_by_hand_stays_open_until_a_person_closes_it() {
    let p = BreakerPolicy::default();
    let mut h = Health::new(t0());
    assert!(h.open_by_hand("maintenance", t0()).is_some());
    assert_eq!(h.open_by_hand("maintenance", t0()), None);
    assert!(matches!(h.gate(&p, at(3_600_000)), Gate::Held(_)));
    assert_eq!(h.close_by_hand(&p, at(3_600_000)), Some(Change::Closed));
    assert!(matches!(h.gate(&p, at(3_600_000)), Gate::Send(_)));
}

#[test]
fn the_cooldown_doubles_to_its_cap() {
    let p = BreakerPolicy::default();
    let mut h = Health::new(t0());
    assert_eq!(h.cooldown(&p, 0.999_999).as_secs(), 9);
    h.failed_probes = 3;
    assert_eq!(h.cooldown(&p, 0.0), Duration::from_secs(40));
    h.failed_probes = 10;
    assert_eq!(h.cooldown(&p, 0.0), Duration::from_secs(150));
}

#[test]
fn a_healthy_answer_alone_is_not_worth_a_write() {
    let p = BreakerPolicy::default();
    let mut h = Health::new(t0());
    h.observe(Signal::Healthy, None, false, &p, at(1), 0.5);
    assert!(!h.worth_keeping(None), "never troubled, still well");
    let stored = h.clone();
    h.observe(Signal::Healthy, None, false, &p, at(2), 0.5);
    assert!(!h.worth_keeping(Some(&stored)));
    // a failure is kept, with the attempts counted beside it
    h.observe(TIMEOUT, None, false, &p, at(3), 0.5);
    assert!(h.worth_keeping(Some(&stored)));
    assert_eq!((h.window_attempts, h.window_failures), (3, 1));
    // a pace that changed is kept
    let mut paced = Health::new(t0());
    paced.open_by_hand("drill", t0());
    paced.close_by_hand(&p, t0());
    let stored = paced.clone();
    paced.observe(Signal::Healthy, None, false, &p, at(2_000), 0.5);
    assert!(paced.worth_keeping(Some(&stored)));
    assert!(!paced.is_open_road(&p));
    assert!(Health::new(t0()).is_open_road(&p));
}

#[test]
fn a_kept_pace_never_exceeds_a_limit_given_since() {
    let unlimited = BreakerPolicy::default();
    let mut h = Health::new(t0());
    // slowed while no limit was known: halved from no pace at all
    h.observe(TIMEOUT, None, false, &unlimited, t0(), 0.5);
    assert!(h.rate.is_some_and(|r| r > 1e6));
    let limited = BreakerPolicy {
        pace_max: Some(20.0),
        ..BreakerPolicy::default()
    };
    assert_eq!(h.gate(&limited, at(5_000)), Gate::Send(20));
}
