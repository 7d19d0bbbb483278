//! The columns of `operations`, in one place: their names, their types, which a change may set,
//! how an [`Op`] is written into them and read back. Every statement's column list is made from
//! [`OpCol::ALL`], and the tests hold this list to the migrations: adding a column means a
//! migration, a variant here and its arms in `cell` and `decode` (the compiler finds the rest).

use std::sync::LazyLock;

use super::sql::{Cell, Cells, Col, corrupt, get, get_time, ms, opt_ms, time};
use crate::domain::{Claim, Op, Resolution, State};
use crate::error::Result;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum OpCol {
    Id,
    Key,
    Workflow,
    Step,
    Destination,
    Action,
    Payload,
    Fingerprint,
    ConflictingPayload,
    ConflictingFingerprint,
    State,
    Reason,
    Attempts,
    BudgetStart,
    Ambiguous,
    FirstSentAt,
    AttemptStartedAt,
    NextAttemptAt,
    Reference,
    LastError,
    CreatedAt,
    UpdatedAt,
    ExceptionSince,
    ClaimedBy,
    ClaimedAt,
    ClaimExpiresAt,
    Resolution,
    SupersededBy,
    Version,
    /// The run the operation belongs to (manual: Runs), given when it is recorded.
    Run,
    /// The key of the operation this one corrects (manual: Correcting a request).
    Corrects,
    /// Its group's id while it is an exception (manual: Owners and notifications).
    Group,
}

/// What a column holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    Int,
    Text,
}

/// When a column is written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Written {
    /// Never: the database numbers the row.
    Never,
    /// When the row is made: the operation's identity and contents.
    Once,
    /// When the row is made and by every change.
    Always,
}

impl OpCol {
    pub(crate) const ALL: [OpCol; 32] = [
        OpCol::Id,
        OpCol::Key,
        OpCol::Workflow,
        OpCol::Step,
        OpCol::Destination,
        OpCol::Action,
        OpCol::Payload,
        OpCol::Fingerprint,
        OpCol::ConflictingPayload,
        OpCol::ConflictingFingerprint,
        OpCol::State,
        OpCol::Reason,
        OpCol::Attempts,
        OpCol::BudgetStart,
        OpCol::Ambiguous,
        OpCol::FirstSentAt,
        OpCol::AttemptStartedAt,
        OpCol::NextAttemptAt,
        OpCol::Reference,
        OpCol::LastError,
        OpCol::CreatedAt,
        OpCol::UpdatedAt,
        OpCol::ExceptionSince,
        OpCol::ClaimedBy,
        OpCol::ClaimedAt,
        OpCol::ClaimExpiresAt,
        OpCol::Resolution,
        OpCol::SupersededBy,
        OpCol::Version,
        OpCol::Run,
        OpCol::Corrects,
        OpCol::Group,
    ];

    pub(crate) const fn name(self) -> &'static str {
        match self {
            OpCol::Id => "id",
            OpCol::Key => "key",
            OpCol::Workflow => "workflow",
            OpCol::Step => "step",
            OpCol::Destination => "destination",
            OpCol::Action => "action",
            OpCol::Payload => "payload",
            OpCol::Fingerprint => "fingerprint",
            OpCol::ConflictingPayload => "conflicting_payload",
            OpCol::ConflictingFingerprint => "conflicting_fingerprint",
            OpCol::State => "state",
            OpCol::Reason => "reason",
            OpCol::Attempts => "attempts",
            OpCol::BudgetStart => "budget_start",
            OpCol::Ambiguous => "ambiguous",
            OpCol::FirstSentAt => "first_sent_at",
            OpCol::AttemptStartedAt => "attempt_started_at",
            OpCol::NextAttemptAt => "next_attempt_at",
            OpCol::Reference => "reference",
            OpCol::LastError => "last_error",
            OpCol::CreatedAt => "created_at",
            OpCol::UpdatedAt => "updated_at",
            OpCol::ExceptionSince => "exception_since",
            OpCol::ClaimedBy => "claimed_by",
            OpCol::ClaimedAt => "claimed_at",
            OpCol::ClaimExpiresAt => "claim_expires_at",
            OpCol::Resolution => "resolution",
            OpCol::SupersededBy => "superseded_by",
            OpCol::Version => "version",
            OpCol::Run => "run",
            OpCol::Corrects => "corrects",
            OpCol::Group => "group_id",
        }
    }

    pub(crate) const fn kind(self) -> Kind {
        match self {
            OpCol::Id
            | OpCol::Attempts
            | OpCol::BudgetStart
            | OpCol::Ambiguous
            | OpCol::FirstSentAt
            | OpCol::AttemptStartedAt
            | OpCol::NextAttemptAt
            | OpCol::CreatedAt
            | OpCol::UpdatedAt
            | OpCol::ExceptionSince
            | OpCol::ClaimedAt
            | OpCol::ClaimExpiresAt
            | OpCol::Version => Kind::Int,
            _ => Kind::Text,
        }
    }

    /// Not `created_at` among the changing ones: an update that sets a column rewrites every
    /// index holding it, changed or not, and three indexes hold it.
    pub(crate) const fn written(self) -> Written {
        match self {
            OpCol::Id => Written::Never,
            OpCol::Key
            | OpCol::Workflow
            | OpCol::Step
            | OpCol::Destination
            | OpCol::Action
            | OpCol::Payload
            | OpCol::Fingerprint
            | OpCol::CreatedAt
            | OpCol::Run
            | OpCol::Corrects => Written::Once,
            _ => Written::Always,
        }
    }

    /// The value `op` holds for this column (not `id`, which the row gets from the database).
    pub(crate) fn cell(self, op: &Op) -> Cell<'_> {
        let claim = op.claim.as_ref();
        match self {
            OpCol::Id => Cell::Int(None),
            OpCol::Key => Cell::Text(Some(&op.key)),
            OpCol::Workflow => Cell::Text(Some(&op.workflow)),
            OpCol::Step => Cell::Text(Some(&op.step)),
            OpCol::Destination => Cell::Text(Some(&op.destination)),
            OpCol::Action => Cell::Text(Some(&op.action)),
            OpCol::Payload => Cell::Text(Some(&op.payload)),
            OpCol::Fingerprint => Cell::Text(Some(&op.fingerprint)),
            OpCol::ConflictingPayload => Cell::Text(op.conflicting_payload.as_deref()),
            OpCol::ConflictingFingerprint => Cell::Text(op.conflicting_fingerprint.as_deref()),
            OpCol::State => Cell::Text(Some(op.state.as_str())),
            OpCol::Reason => Cell::Text(op.reason.as_deref()),
            OpCol::Attempts => Cell::Int(Some(i64::from(op.attempts))),
            OpCol::BudgetStart => Cell::Int(Some(i64::from(op.budget_start))),
            OpCol::Ambiguous => Cell::Int(Some(i64::from(op.ambiguous))),
            OpCol::FirstSentAt => Cell::Int(opt_ms(op.first_sent_at)),
            OpCol::AttemptStartedAt => Cell::Int(opt_ms(op.attempt_started_at)),
            OpCol::NextAttemptAt => Cell::Int(opt_ms(op.next_attempt_at)),
            OpCol::Reference => Cell::Text(op.reference.as_deref()),
            OpCol::LastError => Cell::Text(op.last_error.as_deref()),
            OpCol::CreatedAt => Cell::Int(Some(ms(op.created_at))),
            OpCol::UpdatedAt => Cell::Int(Some(ms(op.updated_at))),
            OpCol::ExceptionSince => Cell::Int(opt_ms(op.exception_since)),
            OpCol::ClaimedBy => Cell::Text(claim.map(|c| c.by.as_str())),
            OpCol::ClaimedAt => Cell::Int(claim.map(|c| ms(c.since))),
            OpCol::ClaimExpiresAt => Cell::Int(claim.map(|c| ms(c.expires))),
            OpCol::Resolution => Cell::Text(op.resolution.map(|r| r.as_str())),
            OpCol::SupersededBy => Cell::Text(op.superseded_by.as_deref()),
            OpCol::Version => Cell::Int(Some(op.version)),
            OpCol::Run => Cell::Text(op.run.as_deref()),
            OpCol::Corrects => Cell::Text(op.corrects.as_deref()),
            OpCol::Group => Cell::Text(op.group.as_deref()),
        }
    }

    /// The column's position in [`OpCol::ALL`], which is also its position in [`select`].
    pub(crate) const fn at(self) -> Col {
        let mut i = 0;
        while i < OpCol::ALL.len() {
            if OpCol::ALL[i] as u8 == self as u8 {
                return Col::At(i, self.name());
            }
            i += 1;
        }
        Col::At(0, "id")
    }
}

/// The first column after the operation's own in a statement that selects [`select`] and then
/// more (read by position: a lookup by name compares every column's name).
pub(crate) const AFTER: Col = Col::At(OpCol::ALL.len(), "workflow_paused");
/// The column after that.
pub(crate) const AFTER_NEXT: Col = Col::At(OpCol::ALL.len() + 1, "destination_paused");

fn names(which: impl Fn(OpCol) -> bool) -> Vec<&'static str> {
    OpCol::ALL
        .into_iter()
        .filter(|c| which(*c))
        .map(OpCol::name)
        .collect()
}

static SELECT: LazyLock<String> = LazyLock::new(|| names(|_| true).join(", "));
static INSERTED: LazyLock<Vec<OpCol>> = LazyLock::new(|| {
    OpCol::ALL
        .into_iter()
        .filter(|c| c.written() != Written::Never)
        .collect()
});
static CHANGING: LazyLock<Vec<OpCol>> = LazyLock::new(|| {
    OpCol::ALL
        .into_iter()
        .filter(|c| c.written() == Written::Always)
        .collect()
});

/// Every column, in [`OpCol::ALL`]'s order: what [`decode`] reads.
pub(crate) fn select() -> &'static str {
    &SELECT
}

/// The columns a new row is given, in order.
pub(crate) fn inserted() -> &'static [OpCol] {
    &INSERTED
}

/// The columns a change sets, in order.
pub(crate) fn changing() -> &'static [OpCol] {
    &CHANGING
}

/// An operation and its row id, from a row selected with [`select`].
pub(crate) fn decode(row: &dyn Cells) -> Result<(i64, Op)> {
    let state: String = get(row, OpCol::State.at())?;
    let resolution: Option<String> = get(row, OpCol::Resolution.at())?;
    let claim = match (
        get::<Option<String>>(row, OpCol::ClaimedBy.at())?,
        get_time(row, OpCol::ClaimedAt.at())?,
        get_time(row, OpCol::ClaimExpiresAt.at())?,
    ) {
        (Some(by), Some(since), Some(expires)) => Some(Claim { by, since, expires }),
        _ => None,
    };
    let op = Op {
        key: get(row, OpCol::Key.at())?,
        workflow: get(row, OpCol::Workflow.at())?,
        step: get(row, OpCol::Step.at())?,
        destination: get(row, OpCol::Destination.at())?,
        action: get(row, OpCol::Action.at())?,
        payload: get(row, OpCol::Payload.at())?,
        fingerprint: get(row, OpCol::Fingerprint.at())?,
        conflicting_payload: get(row, OpCol::ConflictingPayload.at())?,
        conflicting_fingerprint: get(row, OpCol::ConflictingFingerprint.at())?,
        state: State::parse(&state).map_err(|_| corrupt("state"))?,
        reason: get(row, OpCol::Reason.at())?,
        attempts: get::<i64>(row, OpCol::Attempts.at())? as u32,
        budget_start: get::<i64>(row, OpCol::BudgetStart.at())? as u32,
        ambiguous: get::<i64>(row, OpCol::Ambiguous.at())? != 0,
        first_sent_at: get_time(row, OpCol::FirstSentAt.at())?,
        attempt_started_at: get_time(row, OpCol::AttemptStartedAt.at())?,
        next_attempt_at: get_time(row, OpCol::NextAttemptAt.at())?,
        reference: get(row, OpCol::Reference.at())?,
        last_error: get(row, OpCol::LastError.at())?,
        created_at: time(get(row, OpCol::CreatedAt.at())?),
        updated_at: time(get(row, OpCol::UpdatedAt.at())?),
        exception_since: get_time(row, OpCol::ExceptionSince.at())?,
        claim,
        resolution: resolution
            .map(|r| Resolution::parse(&r).map_err(|_| corrupt("resolution")))
            .transpose()?,
        superseded_by: get(row, OpCol::SupersededBy.at())?,
        version: get(row, OpCol::Version.at())?,
        run: get(row, OpCol::Run.at())?,
        corrects: get(row, OpCol::Corrects.at())?,
        group: get(row, OpCol::Group.at())?,
    };
    Ok((get(row, OpCol::Id.at())?, op))
}
