//! What the ledger checks before it asks the database anything: names, texts, reports, who acts
//! and what their role allows.

use super::{AttemptReport, Ledger, StaffAction};
use crate::domain::validate_key;
use crate::error::{Error, Result};

pub(super) fn check_name(what: &str, value: &str, may_be_empty: bool) -> Result<()> {
    crate::domain::validate_name(what, value, may_be_empty).map_err(Error::Invalid)
}

/// A name an operation is recorded with: the keys' alphabet (see `domain::names`).
pub(super) fn check_op_name(what: &str, value: &str, may_be_empty: bool) -> Result<()> {
    crate::domain::validate_op_name(what, value, may_be_empty).map_err(Error::Invalid)
}

/// An operator acting as a person: a valid name, not one of settle's own.
pub(super) fn check_operator(name: &str) -> Result<()> {
    crate::domain::validate_operator(name).map_err(Error::Invalid)
}

/// A text given to settle must be storable as it is on both databases (no NUL).
pub(crate) fn check_text(what: &str, text: Option<&str>) -> Result<()> {
    text.map_or(Ok(()), |t| {
        crate::domain::payload::check_text(what, t).map_err(Error::Invalid)
    })
}

/// The texts a staff action carries.
pub(super) fn staff_texts(action: &StaffAction) -> Vec<(&'static str, Option<&str>)> {
    match action {
        StaffAction::Claim { force_reason } => vec![("the reason", force_reason.as_deref())],
        StaffAction::Release => Vec::new(),
        StaffAction::ReconcileFound { reference, note } => vec![
            ("the reference", Some(reference.as_str())),
            ("the note", note.as_deref()),
        ],
        StaffAction::ReconcileAbsent { note } | StaffAction::Retry { note } => {
            vec![("the note", note.as_deref())]
        }
        StaffAction::Close {
            reference, note, ..
        } => vec![
            ("the reference", reference.as_deref()),
            ("the note", Some(note.as_str())),
        ],
        StaffAction::Note { text } => vec![("the note", Some(text.as_str()))],
        StaffAction::LookUp { answer } => vec![("the reference", answer.reference())],
        StaffAction::Correct { note, .. } => vec![("the note", Some(note.as_str()))],
    }
}

/// An attempt's report: a valid key, an outcome, and texts that can be stored.
pub(super) fn check_report(report: &AttemptReport) -> Result<()> {
    validate_key(&report.key).map_err(Error::Invalid)?;
    if report.outcome.is_none() {
        return Err(Error::Invalid("an attempt needs an outcome".into()));
    }
    check_text("the error", report.error.as_deref())?;
    check_text("the reference", report.reference.as_deref())
}

impl Ledger {
    /// This ledger as an automation of the HTTP API (manual: The HTTP API): role `automation`, its events
    /// naming it with its token's fingerprint, and only `workflows` to write and read (`None`:
    /// all).
    pub fn for_automation(
        &self,
        who: crate::domain::Identity,
        workflows: Option<Vec<String>>,
    ) -> Ledger {
        Ledger {
            scope: workflows.map(Into::into),
            ..self.for_session(who)
        }
    }

    /// Refused (403 over HTTP) when an automation's handle asks for a workflow outside its scope.
    pub(crate) fn check_scope(&self, workflow: &str) -> Result<()> {
        match &self.scope {
            Some(mine) if !mine.iter().any(|w| w == workflow) => Err(Error::Forbidden(format!(
                "{} may write and read workflow{} {} only, not {workflow}",
                self.session.as_ref().map_or("this automation", |s| &s.name),
                if mine.len() == 1 { "" } else { "s" },
                mine.join(", ")
            ))),
            _ => Ok(()),
        }
    }

    /// An event's detail with the credential this handle acts with: a session's key, an
    /// automation's token fingerprint (manual: Running settle for a team, The HTTP API).
    pub(super) fn sign(&self, detail: &mut serde_json::Value) {
        if let (Some(s), Some(d)) = (&self.session, detail.as_object_mut()) {
            d.insert("key".into(), s.fingerprint.clone().into());
        }
    }

    /// The workflows this handle may read (`None`: all).
    pub(crate) fn scope(&self) -> Option<&[String]> {
        self.scope.as_deref()
    }

    /// Whether `actor` may take a staff action through this handle at all, asked before anything
    /// of the action is read: an automation is refused whatever it sends.
    pub fn may_act(&self, actor: &str) -> Result<()> {
        self.check_acting(actor)
    }

    /// A session acts under its operator's name only; the local faces under the name given. An
    /// automation takes no staff action.
    pub(super) fn check_acting(&self, actor: &str) -> Result<()> {
        if self.role() == crate::domain::Role::Automation {
            return Err(Error::Forbidden(
                "an automation records, starts and reports attempts; staff actions are for people (settle serve, or the CLI)".into(),
            ));
        }
        check_operator(actor)?;
        match &self.session {
            Some(s) if s.name != actor => Err(Error::Refused(format!(
                "this session acts as {} only",
                s.name
            ))),
            _ => Ok(()),
        }
    }

    /// Refused unless the actor is a lead: taking `what` is a lead's (manual: Running settle for a team).
    pub(super) fn require_lead(&self, what: &str) -> Result<()> {
        let role = self.role();
        if role.leads() {
            Ok(())
        } else {
            Err(Error::Refused(format!(
                "{what} is for a lead; you are {} {role}",
                if role == crate::domain::Role::Operator {
                    "an"
                } else {
                    "a"
                }
            )))
        }
    }
}
