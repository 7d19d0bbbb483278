//! Staff actions put together step by step (choices, texts with tui-input), ending in a
//! confirmation; nothing is written before `y`/Enter, and `n`/Esc cancel at any step.

use ratatui::crossterm::event::{KeyCode, KeyEvent};
use tui_input::Input;
use tui_input::backend::crossterm::EventHandler;

use super::app::{App, Effect, Mode};
use crate::domain::{Offer, Resolution, State};
use crate::ledger::StaffAction;

/// Close's resolutions as a person reads them (SPEC 13: words, not identifiers).
const CLOSE_CHOICES: [(char, Resolution, &str); 4] = [
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
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FormStep {
    /// Pick one of these (key, meaning).
    Choose(Vec<(char, &'static str)>),
    /// Type a value; `required` refuses an empty one.
    Text {
        label: &'static str,
        required: bool,
    },
    Confirm,
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
}

impl App {
    pub(super) fn begin_action(&mut self, c: char) -> Vec<Effect> {
        let Some(row) = self.selected_row().cloned() else {
            self.set_status("select an item first", true);
            return Vec::new();
        };
        if !self.online {
            self.set_status(
                "the database is unreachable: actions are off until it is back",
                true,
            );
            return Vec::new();
        }
        // a key stands for actions the ledger may not offer on this item now: say so, and what
        // to do instead, rather than ask for details and then be refused
        if let Some(b) = super::keymap::action(c)
            && !self.applies(b)
        {
            let why = match &row.claimed_by {
                Some(by) if *by != self.operator => format!(" (claimed by {by}: C takes it over)"),
                _ => String::new(),
            };
            self.set_status(
                format!(
                    "{} is not possible on {} ({}){why} · safe next step: {}",
                    b.label, row.key, row.state, row.next_step
                ),
                true,
            );
            return Vec::new();
        }
        let offered = |o: Offer| row.actions.contains(o);
        let (kind, step) = match c {
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
                    .map(|(_, k, text)| (k, text))
                    .collect(),
                ),
            ),
            'R' => (ActionKind::Retry, FormStep::Confirm),
            'x' => (
                ActionKind::Close,
                FormStep::Choose(
                    CLOSE_CHOICES
                        .iter()
                        .map(|(k, _, words)| (*k, *words))
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
            _ if row.workflow_paused => (ActionKind::Resume, FormStep::Confirm),
            _ => (
                ActionKind::Pause,
                FormStep::Text {
                    label: "reason for pausing",
                    required: true,
                },
            ),
        };
        let target = if matches!(kind, ActionKind::Pause | ActionKind::Resume) {
            row.workflow.clone()
        } else {
            row.key.clone()
        };
        let hint = (kind == ActionKind::Retry && row.state == State::Rejected).then(|| {
            format!(
                "{} rejected it before and may reject it again",
                row.destination
            )
        });
        self.mode = Mode::Form(Box::new(Form {
            kind,
            target,
            step,
            input: Input::default(),
            found: None,
            resolution: None,
            reference: None,
            new_key: None,
            text: None,
            hint,
        }));
        Vec::new()
    }

    pub(super) fn on_form_key(&mut self, mut form: Form, key: KeyEvent) -> Vec<Effect> {
        if key.code == KeyCode::Esc {
            self.set_status("cancelled; nothing changed", false);
            return Vec::new();
        }
        match form.step.clone() {
            FormStep::Choose(options) => {
                let KeyCode::Char(c) = key.code else {
                    self.mode = Mode::Form(Box::new(form));
                    return Vec::new();
                };
                if c == 'n' && !options.iter().any(|(k, _)| *k == 'n') {
                    self.set_status("cancelled; nothing changed", false);
                    return Vec::new();
                }
                let Some(_) = options.iter().find(|(k, _)| *k == c) else {
                    self.mode = Mode::Form(Box::new(form));
                    return Vec::new();
                };
                match form.kind {
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
            FormStep::Text { label, required } => match key.code {
                KeyCode::Enter => {
                    let value = form.input.value().trim().to_string();
                    if required && value.is_empty() {
                        form.hint = Some(format!("{label} is required (Esc cancels)"));
                        self.mode = Mode::Form(Box::new(form));
                        return Vec::new();
                    }
                    form.input.reset();
                    form.hint = None;
                    let asked_note = label.starts_with("note");
                    match (&form.kind, form.resolution) {
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
                _ => {
                    form.input
                        .handle_event(&ratatui::crossterm::event::Event::Key(key));
                }
            },
            FormStep::Confirm => match key.code {
                KeyCode::Char('y') | KeyCode::Enter => return self.submit(form),
                KeyCode::Char('n') => {
                    self.set_status("cancelled; nothing changed", false);
                    return Vec::new();
                }
                _ => {}
            },
        }
        self.mode = Mode::Form(Box::new(form));
        Vec::new()
    }

    fn submit(&mut self, form: Form) -> Vec<Effect> {
        self.set_status("working…", false);
        let key = form.target.clone();
        let action = match form.kind {
            ActionKind::Claim => StaffAction::Claim { force_reason: None },
            ActionKind::TakeOver => StaffAction::Claim {
                force_reason: form.text.clone(),
            },
            ActionKind::Release => StaffAction::Release,
            ActionKind::Retry => StaffAction::Retry { note: None },
            ActionKind::Note => StaffAction::Note {
                text: form.text.unwrap_or_default(),
            },
            ActionKind::Reconcile if form.found == Some(true) => StaffAction::ReconcileFound {
                reference: form.reference.unwrap_or_default(),
                note: None,
            },
            ActionKind::Reconcile => StaffAction::ReconcileAbsent { note: None },
            ActionKind::Close => StaffAction::Close {
                resolution: form.resolution.unwrap_or(Resolution::Abandoned),
                reference: form.reference,
                superseded_by: form.new_key,
                note: form.text.unwrap_or_default(),
            },
            ActionKind::Pause => {
                return vec![Effect::Pause {
                    workflow: key,
                    reason: form.text.unwrap_or_default(),
                }];
            }
            ActionKind::Resume => return vec![Effect::Resume { workflow: key }],
        };
        vec![Effect::Staff { key, action }]
    }
}
