//! The run states of the manual's Runs as a table: the second step's situation, declared steps or none,
//! inside or past `step_gap`.

use chrono::TimeDelta;

use super::*;

fn t0() -> DateTime<Utc> {
    DateTime::from_timestamp(1_800_000_000, 0).unwrap()
}

fn op(key: &str, step: &str, state: State, resolution: Option<Resolution>, at: i64) -> RunOp {
    RunOp {
        key: key.into(),
        step: step.into(),
        state,
        resolution,
        exception: state.is_exception(),
        reference: (state == State::Succeeded).then(|| format!("REF-{key}")),
        recorded_at: t0() + TimeDelta::seconds(at),
        updated_at: t0() + TimeDelta::seconds(at + 1),
        superseded_by: None,
    }
}

/// The second step's situations, and the state each gives with declared steps and without,
/// inside the gap and past it.
#[derive(Clone, Copy)]
enum Second {
    NotRecorded,
    In(State, Option<Resolution>),
    /// In flight past its attempt timeout: an exception by its age.
    Stuck,
}

#[test]
fn the_run_state_follows_its_steps() {
    use RunState::*;
    use Second::*;
    let gap = Duration::from_secs(15 * 60);
    let declared = ["create-customer".to_string(), "create-task".to_string()];
    // (situation, declared inside, declared past, undeclared inside, undeclared past)
    let table = [
        (NotRecorded, Running, Stalled, Done, Done),
        (In(State::Pending, None), Running, Running, Running, Running),
        (
            In(State::InFlight, None),
            Running,
            Running,
            Running,
            Running,
        ),
        (
            In(State::RetryWait, None),
            Running,
            Running,
            Running,
            Running,
        ),
        (In(State::Succeeded, None), Done, Done, Done, Done),
        (
            In(State::Closed, Some(Resolution::DoneElsewhere)),
            Done,
            Done,
            Done,
            Done,
        ),
        (
            In(State::Closed, Some(Resolution::Abandoned)),
            Blocked,
            Blocked,
            Blocked,
            Blocked,
        ),
        (
            In(State::Rejected, None),
            Blocked,
            Blocked,
            Blocked,
            Blocked,
        ),
        (In(State::Unknown, None), Blocked, Blocked, Blocked, Blocked),
        (In(State::Failed, None), Blocked, Blocked, Blocked, Blocked),
        (
            In(State::Conflict, None),
            Blocked,
            Blocked,
            Blocked,
            Blocked,
        ),
        (Stuck, Blocked, Blocked, Blocked, Blocked),
    ];
    for (i, (second, di, dp, ui, up)) in table.into_iter().enumerate() {
        let mut ops = vec![op("r:a", "create-customer", State::Succeeded, None, 0)];
        match second {
            NotRecorded => {}
            In(state, resolution) => ops.push(op("r:b", "create-task", state, resolution, 60)),
            Stuck => {
                let mut o = op("r:b", "create-task", State::InFlight, None, 60);
                o.exception = true;
                ops.push(o);
            }
        }
        for (steps, inside, past) in [(&declared[..], di, dp), (&[][..], ui, up)] {
            let inside_now = t0() + TimeDelta::minutes(5);
            let past_now = t0() + TimeDelta::minutes(30);
            let got_inside = derive(steps, gap, &ops, None, inside_now).state;
            let got_past = derive(steps, gap, &ops, None, past_now).state;
            assert_eq!(
                (got_inside, got_past),
                (inside, past),
                "row {i}, declared {}",
                !steps.is_empty()
            );
            // a person's close wins over every situation
            let closed = derive(steps, gap, &ops, Some(past_now), past_now);
            assert_eq!(closed.state, Closed, "row {i}");
        }
    }
}

#[test]
fn a_stalled_run_names_the_step_it_stopped_after_and_the_missing_one() {
    let gap = Duration::from_secs(15 * 60);
    let declared: Vec<String> = ["create-customer", "create-task", "welcome-sms"]
        .map(String::from)
        .to_vec();
    let ops = vec![
        op("r:a", "create-customer", State::Succeeded, None, 0),
        op("r:b", "create-task", State::Succeeded, None, 60),
    ];
    let d = derive(&declared, gap, &ops, None, t0() + TimeDelta::hours(1));
    assert_eq!(d.state, RunState::Stalled);
    assert_eq!(d.step.as_deref(), Some("welcome-sms"));
    assert_eq!(d.after.as_deref(), Some("create-task"));
    // stalled since the gap ran out after the step before settled (at 61 s)
    assert_eq!(
        d.since,
        t0() + TimeDelta::seconds(61) + TimeDelta::minutes(15)
    );
    // a blocked run waits on its exception's step
    let mut ops = ops;
    ops.push(op("r:c", "welcome-sms", State::Unknown, None, 120));
    let d = derive(&declared, gap, &ops, None, t0() + TimeDelta::hours(1));
    assert_eq!(
        (d.state, d.step.as_deref(), d.key.as_deref()),
        (RunState::Blocked, Some("welcome-sms"), Some("r:c"))
    );
}

#[test]
fn steps_list_the_declared_in_order_then_the_rest_as_recorded() {
    let declared: Vec<String> = ["create-customer", "create-task", "welcome-sms"]
        .map(String::from)
        .to_vec();
    let ops = vec![
        op("r:x", "audit", State::Succeeded, None, 30),
        op("r:b", "create-task", State::Unknown, None, 20),
        op("r:a", "create-customer", State::Succeeded, None, 0),
        op("r:y", "cleanup", State::Pending, None, 10),
    ];
    let s = steps(&declared, &ops);
    let shown: Vec<(&str, &str, bool)> = s
        .iter()
        .map(|s| (s.step.as_str(), s.state.as_str(), s.done))
        .collect();
    assert_eq!(
        shown,
        [
            ("create-customer", "succeeded", true),
            ("create-task", "unknown", false),
            ("welcome-sms", "not_recorded", false),
            ("cleanup", "pending", false),
            ("audit", "succeeded", true),
        ]
    );
    assert_eq!(s[0].reference.as_deref(), Some("REF-r:a"));
    assert!(s[2].key.is_none() && s[2].recorded_at.is_none());
}

#[test]
fn a_corrected_step_is_done_when_the_end_of_its_chain_succeeds() {
    let gap = Duration::from_secs(15 * 60);
    let declared = ["create-customer".to_string(), "create-task".to_string()];
    let corrected = |key: &str, by: &str, at| RunOp {
        superseded_by: Some(by.into()),
        ..op(
            key,
            "create-task",
            State::Closed,
            Some(Resolution::Superseded),
            at,
        )
    };
    let first = op("c-1", "create-customer", State::Succeeded, None, 0);
    let now = t0() + TimeDelta::seconds(60);
    let chain = |end: State| {
        vec![
            first.clone(),
            corrected("t-1", "t-1:c2", 10),
            corrected("t-1:c2", "t-1:c3", 20),
            op("t-1:c3", "create-task", end, None, 30),
        ]
    };
    let ops = chain(State::Succeeded);
    assert_eq!(
        derive(&declared, gap, &ops, None, now).state,
        RunState::Done
    );
    let shown = steps(&declared, &ops);
    assert_eq!(
        shown.len(),
        2,
        "the replaced steps are not listed: {shown:?}"
    );
    assert_eq!(shown[1].key.as_deref(), Some("t-1:c3"));
    assert_eq!(
        derive(&declared, gap, &chain(State::Pending), None, now).state,
        RunState::Running
    );
    let d = derive(&declared, gap, &chain(State::Rejected), None, now);
    assert_eq!(
        (d.state, d.key.as_deref()),
        (RunState::Blocked, Some("t-1:c3"))
    );
    // superseded by a key outside the run: still a step closed without being done
    let outside = vec![first, corrected("t-1", "elsewhere-9", 10)];
    assert_eq!(
        derive(&declared, gap, &outside, None, now).state,
        RunState::Blocked
    );
}
