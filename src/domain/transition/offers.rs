//! What the console offers (manual: The console): the staff actions a person may take on an operation now,
//! exactly those [`staff_check`] passes with well-formed details.

use serde::Serialize;

use super::op::Op;
use super::rules::staff_check;
use super::terms::{Ctx, StaffAction};
use crate::domain::lookup::LookupAnswer;
use crate::domain::state::Resolution;

/// A staff action as a person picks it (a key in the console), before its details are asked.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Offer {
    Claim,
    /// Take over another's live claim (asks a reason).
    TakeOver,
    Release,
    ReconcileFound,
    ReconcileAbsent,
    Retry,
    Close,
    Note,
    /// Look the item up at its destination now, then reconcile by the answer (manual: Many at once).
    LookUp,
    /// Correct a rejected or failed request: a new one, sent once (manual: Correcting a request).
    Correct,
}

impl Offer {
    pub const ALL: [Offer; 10] = [
        Offer::Claim,
        Offer::TakeOver,
        Offer::Release,
        Offer::ReconcileFound,
        Offer::ReconcileAbsent,
        Offer::Retry,
        Offer::Close,
        Offer::Note,
        Offer::LookUp,
        Offer::Correct,
    ];

    /// The command this action becomes with well-formed details: what [`offered`] tries.
    pub fn sample(self) -> StaffAction {
        match self {
            Offer::Claim => StaffAction::Claim { force_reason: None },
            Offer::TakeOver => StaffAction::Claim {
                force_reason: Some("taking over".into()),
            },
            Offer::Release => StaffAction::Release,
            Offer::ReconcileFound => StaffAction::ReconcileFound {
                reference: "REF".into(),
                note: None,
            },
            Offer::ReconcileAbsent => StaffAction::ReconcileAbsent { note: None },
            Offer::Retry => StaffAction::Retry { note: None },
            Offer::Close => StaffAction::Close {
                resolution: Resolution::Abandoned,
                reference: None,
                superseded_by: None,
                note: "note".into(),
            },
            Offer::Note => StaffAction::Note {
                text: "note".into(),
            },
            Offer::LookUp => StaffAction::LookUp {
                answer: LookupAnswer::Found {
                    reference: "REF".into(),
                    http_status: 200,
                },
            },
            Offer::Correct => StaffAction::Correct {
                corrected_as: "KEY:c2".into(),
                edits: vec![crate::domain::edit::Edit::Set {
                    path: "field".into(),
                    value: serde_json::Value::Null,
                }],
                note: "note".into(),
            },
        }
    }
}

/// A set of offers, one bit each: carried on every listed row, so it costs no allocation.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Offers(u16);

impl Offers {
    pub fn contains(self, o: Offer) -> bool {
        self.0 & (1 << o as u8) != 0
    }

    pub fn insert(&mut self, o: Offer) {
        self.0 |= 1 << o as u8;
    }

    pub fn iter(self) -> impl Iterator<Item = Offer> {
        Offer::ALL.into_iter().filter(move |o| self.contains(*o))
    }
}

impl FromIterator<Offer> for Offers {
    fn from_iter<I: IntoIterator<Item = Offer>>(offers: I) -> Self {
        let mut set = Offers::default();
        offers.into_iter().for_each(|o| set.insert(o));
        set
    }
}

/// As a list of names (`list --json`'s `actions`).
impl Serialize for Offers {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(self.iter())
    }
}

/// Each offer's sample, in `Offer::ALL`'s order: made once (the list asks for every row).
static SAMPLES: std::sync::LazyLock<[StaffAction; 10]> =
    std::sync::LazyLock::new(|| Offer::ALL.map(Offer::sample));

/// The staff actions `ctx.actor` may take on `op` now (manual: Staff actions, The console): exactly those
/// [`staff_check`] (the rules `apply` enforces) passes with well-formed details, so that what the
/// console offers can never disagree with what the ledger does. A claim is offered only where it changes
/// something (not to its holder), a take-over only over another's live claim.
pub fn offered(op: &Op, ctx: &Ctx) -> Offers {
    let others = op.claimed_by_other(ctx.actor, ctx.now).is_some();
    let mine = op
        .claim
        .as_ref()
        .is_some_and(|c| c.by == ctx.actor && c.is_live(ctx.now));
    Offer::ALL
        .into_iter()
        .filter(|o| match o {
            Offer::Claim => !others && !mine,
            Offer::TakeOver => others,
            _ => true,
        })
        .filter(|o| staff_check::<()>(op, &SAMPLES[*o as usize], ctx).is_ok())
        .collect()
}

#[cfg(test)]
#[path = "offers_tests.rs"]
mod tests;
