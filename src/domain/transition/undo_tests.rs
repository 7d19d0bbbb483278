//! Taking an action back: every staff action, on every state it is taken in, restored exactly
//! while nothing touched the item since, and refused once something did.

use super::test_support::*;

fn undo_cmd(before: &Op, after: &Op, kind: &str) -> Command {
    Command::Undo {
        action: "a-1".into(),
        undid: kind.into(),
        restore: Box::new(Restore::of(before, after, kind == "note")),
    }
}

/// The row as a reader compares it: everything but its version and the time it changed.
fn as_seen(op: &Op) -> Op {
    Op {
        version: 0,
        updated_at: t0(),
        ..op.clone()
    }
}

#[test]
fn every_staff_action_is_taken_back_exactly_while_nothing_touched_it() {
    let policy = DestinationPolicy::default();
    let c = ctx(&policy, "alice");
    let mut taken_back = 0;
    for state in State::ALL {
        for stuck in [false, true] {
            for claimed in [None, Some("alice"), Some("bob")] {
                let mut before = op_in(state, stuck);
                before.version = 7;
                if let Some(by) = claimed {
                    before = with_claim(before, by);
                }
                // as every stored row has it
                before.group = crate::domain::group::group_of(&before);
                for (name, cmd) in commands(&before) {
                    if !matches!(cmd, Command::Staff(_)) {
                        continue;
                    }
                    let Ok(Some(t)) = apply(&before, &cmd, &c) else {
                        continue;
                    };
                    let undo = undo_cmd(&before, &t.op, t.kind);
                    let ended =
                        before.attempt_started_at.is_some() && t.op.attempt_started_at.is_none();
                    match apply(&t.op, &undo, &c) {
                        Ok(Some(back)) if name == "note" => {
                            assert_eq!(as_seen(&back.op), as_seen(&t.op), "a note is withdrawn");
                            assert_eq!(back.kind, "undone");
                        }
                        Ok(Some(back)) => {
                            assert!(
                                !ended,
                                "{name} on {state:?}: an ended attempt is not reopened"
                            );
                            assert_eq!(
                                as_seen(&back.op),
                                as_seen(&before),
                                "{name} on {state:?} claimed by {claimed:?}"
                            );
                            assert_eq!(back.op.version, t.op.version + 1);
                            assert_eq!(back.kind, "undone");
                            taken_back += 1;
                        }
                        Ok(None) => panic!("{name} on {state:?}: an undo always answers"),
                        Err(Refusal(why)) => {
                            assert!(ended, "{name} on {state:?}: refused: {why}");
                        }
                    }
                    // anything since (here: another version) and the item is left alone
                    let mut moved = t.op.clone();
                    moved.version += 1;
                    let again = apply(&moved, &undo, &c);
                    if name == "note" {
                        assert!(
                            matches!(again, Ok(Some(_))),
                            "a note is withdrawn whatever came since"
                        );
                    } else {
                        assert!(
                            matches!(&again, Err(Refusal(w)) if !w.contains('\n')),
                            "{name} on {state:?}: changed since, refused"
                        );
                    }
                }
            }
        }
    }
    assert!(
        taken_back > 50,
        "the table reached the actions: {taken_back}"
    );
}

#[test]
fn a_viewer_takes_nothing_back() {
    let policy = DestinationPolicy::default();
    let c = ctx(&policy, "alice");
    let before = op_in(State::Unknown, false);
    let cmd = Command::Staff(StaffAction::Claim { force_reason: None });
    let t = apply(&before, &cmd, &c).unwrap().unwrap();
    let viewer = Ctx {
        role: crate::domain::Role::Viewer,
        ..c.clone()
    };
    assert!(apply(&t.op, &undo_cmd(&before, &t.op, t.kind), &viewer).is_err());
}

#[test]
fn what_is_kept_holds_no_payload_and_reads_back() {
    let mut before = with_claim(op_in(State::Unknown, false), "alice");
    before.payload = r#"{"email":"a@b.example"}"#.into();
    let mut after = before.clone();
    after.state = State::Closed;
    after.version = 2;
    let kept = serde_json::to_string(&Restore::of(&before, &after, false)).unwrap();
    assert!(!kept.contains("a@b.example"), "{kept}");
    let back: Restore = serde_json::from_str(&kept).unwrap();
    assert_eq!(back, Restore::of(&before, &after, false));
}
