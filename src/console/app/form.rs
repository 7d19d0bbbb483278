//! Staff actions put together step by step (choices, texts with tui-input), ending in a
//! confirmation; nothing is written before `y`/Enter, and `n`/Esc cancel at any step.

use tui_input::Input;

use crate::domain::{Offer, Resolution};
use crate::ledger::StaffAction;

/// Close's resolutions as a person reads them (manual: The console: words, not identifiers).
pub(super) const CLOSE_CHOICES: [(char, Resolution, &str); 4] = [
    (
        '1',
        Resolution::DoneElsewhere,
        "done elsewhere: give its reference",
    ),
    (
        '2',
        Resolution::Superseded,
        "superseded by another operation: give its key",
    ),
    ('3', Resolution::Abandoned, "abandoned: no longer wanted"),
    (
        '4',
        Resolution::DuplicateCleanedUp,
        "a duplicate, cleaned up at the destination",
    ),
];

/// A staff action being put together, step by step, ending in a confirmation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ActionKind {
    Claim,
    TakeOver,
    Release,
    Reconcile,
    Retry,
    Close,
    Note,
    Pause,
    Resume,
    /// Reveal one redacted field of the detail pane (a lead; the manual's Redaction).
    Reveal,
    /// Look the item up at its destination now, then reconcile by its answer (manual: Many at once).
    LookUp,
    /// Correct a rejected or failed request (manual: Correcting a request).
    Correct,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FormStep {
    /// Pick one of these (key, meaning).
    Choose(Vec<(char, String)>),
    /// Type a value; `required` refuses an empty one.
    Text {
        label: &'static str,
        required: bool,
    },
    Confirm,
    /// A bulk action's preview is being asked of the ledger.
    Checking,
    /// The item's destination is being asked (a lookup).
    LookingUp,
}

#[derive(Clone, Debug)]
pub struct Form {
    pub kind: ActionKind,
    /// The operation's key (or the workflow, for pause and resume).
    pub target: String,
    pub step: FormStep,
    pub input: Input,
    pub found: Option<bool>,
    pub resolution: Option<Resolution>,
    pub reference: Option<String>,
    pub new_key: Option<String>,
    pub text: Option<String>,
    pub hint: Option<String>,
    /// A bulk action: the marked keys, frozen when the key was pressed (manual: Many at once).
    pub bulk: Option<Vec<String>>,
    /// The bulk action's preview, once the ledger answered: confirming acts on its eligible keys.
    pub preview: Option<crate::ledger::BulkPreview>,
    /// A paced bulk retry: the items' next attempts this far apart.
    pub pace: Option<std::time::Duration>,
    /// A reveal: the field chosen (a dotted path of the payload).
    pub field: Option<String>,
    /// `P`: the item's workflow and destination (key, which, name, paused now); once chosen,
    /// `pausing` names the one.
    pub pause_choices: Vec<(char, crate::ledger::Pausable, String, bool)>,
    pub pausing: Option<crate::ledger::Pausable>,
    /// A lookup's answers, once they came: (key, destination, what it said).
    pub answers: Vec<(String, String, crate::domain::LookupAnswer)>,
    /// The target is a run (manual: Runs): its note or close is the run's own.
    pub run: bool,
    /// A correction: the payload's fields offered (path, value as shown), and the new values.
    pub fields: Vec<(String, String)>,
    pub edits: Vec<(String, String)>,
    /// What is typed is not shown (a redacted field's new value).
    pub secret: bool,
}

impl ActionKind {
    /// The verb of a bulk preview and summary ("retry 212: ...").
    pub fn verb(&self) -> &'static str {
        match self {
            ActionKind::Claim => "claim",
            ActionKind::TakeOver => "take over",
            ActionKind::Release => "release",
            ActionKind::Reconcile => "reconcile",
            ActionKind::Retry => "retry",
            ActionKind::Close => "close",
            ActionKind::Note => "note",
            ActionKind::Pause => "pause",
            ActionKind::Resume => "resume",
            ActionKind::Reveal => "reveal",
            ActionKind::LookUp => "look up",
            ActionKind::Correct => "correct",
        }
    }
}

impl Form {
    pub(super) fn new(kind: ActionKind, target: String, step: FormStep) -> Form {
        Form {
            kind,
            target,
            step,
            input: Input::default(),
            found: None,
            resolution: None,
            reference: None,
            new_key: None,
            text: None,
            hint: None,
            bulk: None,
            preview: None,
            pace: None,
            field: None,
            pause_choices: Vec::new(),
            pausing: None,
            answers: Vec::new(),
            run: false,
            fields: Vec::new(),
            edits: Vec::new(),
            secret: false,
        }
    }
}

/// The first step of the action a key stands for. `offered` says which reconcile outcomes the
/// item allows; `bulk`: the action is for many items (close's "done elsewhere" needs a
/// reference per item, so it is left to `settle reconcile --from`; a retry of more than 20
/// asks for a pace).
pub(super) fn first_step(
    c: char,
    offered: impl Fn(Offer) -> bool,
    bulk: Option<usize>,
) -> Option<(ActionKind, FormStep)> {
    Some(match c {
        'c' => (ActionKind::Claim, FormStep::Confirm),
        'C' => (
            ActionKind::TakeOver,
            FormStep::Text {
                label: "reason for taking over",
                required: true,
            },
        ),
        'u' => (ActionKind::Release, FormStep::Confirm),
        'r' => (
            ActionKind::Reconcile,
            FormStep::Choose(
                [
                    (Offer::ReconcileFound, 'f', "found it: give the reference"),
                    (Offer::ReconcileAbsent, 'a', "absent: not done"),
                ]
                .into_iter()
                .filter(|(o, _, _)| offered(*o))
                .map(|(_, k, text)| (k, text.to_string()))
                .collect(),
            ),
        ),
        'R' if bulk.is_some_and(|n| n > 20) => (
            ActionKind::Retry,
            FormStep::Text {
                label: "pace, items per second (Enter: all at once)",
                required: false,
            },
        ),
        'R' => (ActionKind::Retry, FormStep::Confirm),
        'x' => (
            ActionKind::Close,
            FormStep::Choose(
                CLOSE_CHOICES
                    .iter()
                    .filter(|(_, r, _)| bulk.is_none() || *r != Resolution::DoneElsewhere)
                    .map(|(k, _, words)| (*k, words.to_string()))
                    .collect(),
            ),
        ),
        'n' => (
            ActionKind::Note,
            FormStep::Text {
                label: "note",
                required: true,
            },
        ),
        // one item: asked at once, its answer confirmed; many: a preview first, paced past 20
        'L' if bulk.is_none() => (ActionKind::LookUp, FormStep::LookingUp),
        'L' if bulk.is_some_and(|n| n > 20) => (
            ActionKind::LookUp,
            FormStep::Text {
                label: "pace, lookups per second (Enter: one after another)",
                required: false,
            },
        ),
        'L' => (ActionKind::LookUp, FormStep::Confirm),
        _ => return None,
    })
}

impl Form {
    /// The staff action the form has put together (`None`: pause and resume, not staff actions).
    pub(super) fn staff_action(&self) -> Option<StaffAction> {
        let text = self.text.clone().unwrap_or_default();
        Some(match self.kind {
            ActionKind::Claim => StaffAction::Claim { force_reason: None },
            ActionKind::TakeOver => StaffAction::Claim {
                force_reason: self.text.clone(),
            },
            ActionKind::Release => StaffAction::Release,
            ActionKind::Retry => StaffAction::Retry { note: None },
            ActionKind::Note => StaffAction::Note { text },
            ActionKind::Reconcile if self.found == Some(true) => StaffAction::ReconcileFound {
                reference: self.reference.clone().unwrap_or_default(),
                note: None,
            },
            ActionKind::Reconcile => StaffAction::ReconcileAbsent { note: None },
            ActionKind::Close => StaffAction::Close {
                resolution: self.resolution.unwrap_or(Resolution::Abandoned),
                reference: self.reference.clone(),
                superseded_by: self.new_key.clone(),
                note: text,
            },
            // what the preview asks of the rules; each item's own answer is reconciled after
            ActionKind::LookUp => StaffAction::LookUp {
                answer: crate::domain::LookupAnswer::Found {
                    reference: "REF".into(),
                    http_status: 200,
                },
            },
            // put together by its own form (`correct.rs`)
            ActionKind::Correct | ActionKind::Pause | ActionKind::Resume | ActionKind::Reveal => {
                return None;
            }
        })
    }
}

/// `retry --rate`'s answer in the console: items per second, or nothing for all at once.
pub(super) fn pace(text: &str) -> Result<Option<std::time::Duration>, String> {
    let text = text.trim().trim_end_matches("/s");
    if text.is_empty() {
        return Ok(None);
    }
    match text.parse::<f64>() {
        Ok(n) if n > 0.0 && n.is_finite() => Ok(Some(std::time::Duration::from_secs_f64(1.0 / n))),
        _ => Err(format!(
            "\"{text}\" is not a pace: a number of items per second, like 10"
        )),
    }
}

/// A choice made at a `Choose` step: what the form asks next.
pub(super) fn choose(form: &mut Form, options: &[(char, String)], c: char) {
    match form.kind {
        ActionKind::Pause => {
            if let Some((_, what, name, paused)) =
                form.pause_choices.iter().find(|(k, ..)| *k == c).cloned()
            {
                form.pausing = Some(what);
                form.target = name;
                if paused {
                    form.kind = ActionKind::Resume;
                    form.step = FormStep::Confirm;
                } else {
                    form.step = FormStep::Text {
                        label: "reason for pausing",
                        required: true,
                    };
                }
            }
        }
        ActionKind::Reveal => {
            form.field = options
                .iter()
                .find(|(k, _)| *k == c)
                .map(|(_, path)| path.clone());
            form.step = FormStep::Text {
                label: "reason for revealing",
                required: true,
            };
        }
        ActionKind::Reconcile if c == 'f' => {
            form.found = Some(true);
            form.step = FormStep::Text {
                label: "reference at the destination",
                required: true,
            };
        }
        ActionKind::Reconcile => {
            form.found = Some(false);
            form.step = FormStep::Confirm;
        }
        _ => {
            let r = CLOSE_CHOICES
                .iter()
                .find(|(k, _, _)| *k == c)
                .map_or(Resolution::Abandoned, |(_, r, _)| *r);
            form.resolution = Some(r);
            form.step = match r {
                Resolution::DoneElsewhere => FormStep::Text {
                    label: "reference of the work done elsewhere",
                    required: true,
                },
                Resolution::Superseded => FormStep::Text {
                    label: "key of the operation that supersedes it",
                    required: true,
                },
                _ => FormStep::Text {
                    label: "note (what was done)",
                    required: true,
                },
            };
        }
    }
}

/// A value entered at a `Text` step (`label`'s): where it goes, and what the form asks next.
pub(super) fn entered(form: &mut Form, label: &str, value: String) {
    let asked_note = label.starts_with("note");
    match (&form.kind, form.resolution) {
        (ActionKind::Retry | ActionKind::LookUp, _) => match pace(&value) {
            Ok(pace) => {
                form.pace = pace;
                form.step = FormStep::Confirm;
            }
            Err(why) => form.hint = Some(why),
        },
        (ActionKind::Close, Some(Resolution::DoneElsewhere)) if !asked_note => {
            form.reference = Some(value);
            form.step = FormStep::Text {
                label: "note (what was done)",
                required: true,
            };
        }
        (ActionKind::Close, Some(Resolution::Superseded)) if !asked_note => {
            form.new_key = Some(value);
            form.step = FormStep::Text {
                label: "note (what was done)",
                required: true,
            };
        }
        (ActionKind::Reconcile, _) => {
            form.reference = Some(value);
            form.step = FormStep::Confirm;
        }
        _ => {
            form.text = Some(value);
            form.step = FormStep::Confirm;
        }
    }
}
