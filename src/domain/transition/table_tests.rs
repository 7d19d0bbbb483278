//! Every state against every command: the manual's result, or a refusal.

use super::test_support::*;

/// Every state against every event and staff action: the manual's result, or a refusal.
#[test]
fn the_whole_transition_table() {
    use State::*;
    let policy = DestinationPolicy::default();
    // (state, stuck) -> expected per command, in the order of `commands`.
    #[rustfmt::skip]
    let table: Vec<((State, bool), [Expect; 16])> = vec![
        //                 rec=     rec!=          start          acc            rej            trans            unk            sweep      resend       claim          release        found          absent         retry          close          note
        ((Pending, false),   [Nothing, To(Conflict), To(InFlight),  To(Succeeded), To(Rejected),  To(RetryWait),  To(Unknown),   Nothing, Refused,   To(Pending),   To(Pending),   Refused,       Refused,       Refused,       To(Closed),    To(Pending)]),
        ((InFlight, false),  [Nothing, To(Conflict), Refused,       To(Succeeded), To(Rejected),  To(RetryWait),  To(Unknown),   Nothing, Refused,   To(InFlight),  To(InFlight),  Refused,       Refused,       Refused,       Refused,       To(InFlight)]),
        ((InFlight, true),   [Nothing, To(Conflict), Refused,       To(Succeeded), To(Rejected),  To(RetryWait),  To(Unknown),   To(Unknown), Refused, To(InFlight), To(InFlight),  To(Succeeded), To(Failed),    Refused,       To(Closed),    To(InFlight)]),
        ((RetryWait, false), [Nothing, To(Conflict), To(InFlight),  To(Succeeded), To(Rejected),  To(RetryWait),  To(Unknown),   Nothing, Refused,   To(RetryWait), To(RetryWait), Refused,       Refused,       Refused,       To(Closed),    To(RetryWait)]),
        ((Succeeded, false), [Nothing, Refused,      Refused,       Refused,       Refused,       Refused,        Refused,       Nothing, Refused,   Refused,       Refused,       Refused,       Refused,       Refused,       Refused,       To(Succeeded)]),
        ((Rejected, false),  [Nothing, To(Conflict), Refused,       Refused,       Refused,       Refused,        Refused,       Nothing, Refused,   To(Rejected),  To(Rejected),  Refused,       Refused,       To(Pending),   To(Closed),    To(Rejected)]),
        ((Unknown, false),   [Nothing, To(Conflict), Refused,       Refused,       Refused,       Refused,        Refused,       Nothing, Refused,   To(Unknown),   To(Unknown),   To(Succeeded), To(Failed),    Refused,       To(Closed),    To(Unknown)]),
        ((Failed, false),    [Nothing, To(Conflict), Refused,       Refused,       Refused,       Refused,        Refused,       Nothing, To(Pending),   To(Failed),    To(Failed),    To(Succeeded), Refused,       To(Pending),   To(Closed),    To(Failed)]),
        ((Conflict, false),  [Nothing, Nothing,      Refused,       Refused,       Refused,       Refused,        Refused,       Nothing, Refused,   To(Conflict),  To(Conflict),  To(Succeeded), Refused,       Refused,       To(Closed),    To(Conflict)]),
        ((Closed, false),    [Nothing, Refused,      Refused,       Refused,       Refused,       Refused,        Refused,       Nothing, Refused,   Refused,       Refused,       Refused,       Refused,       Refused,       Refused,       To(Closed)]),
    ];
    assert_eq!(
        table.len(),
        State::ALL.len() + 1,
        "every state, and in_flight both live and stuck"
    );
    for ((state, stuck), expected) in table {
        let plain = op_in(state, stuck);
        // Conflict already holds fp2, so "record changed" repeats it.
        let plain = if state == Conflict {
            Op {
                conflicting_fingerprint: Some("fp2".into()),
                ..plain
            }
        } else {
            plain
        };
        for ((name, cmd), want) in commands(&plain).into_iter().zip(expected) {
            // Staff actions other than claim are made by the holder of a live claim.
            let op = match name {
                "release" | "found" | "absent" | "retry" | "close" if !state.is_terminal() => {
                    with_claim(plain.clone(), "alice")
                }
                _ => plain.clone(),
            };
            let got = run(&op, &cmd, &ctx(&policy, "alice"));
            assert_eq!(got, want, "{state} (stuck: {stuck}) + {name}");
        }
    }
}
