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
    /// Reveal one redacted field of the detail pane (a lead; SPEC 8).
    Reveal,
    /// Look the item up at its destination now, then reconcile by its answer (SPEC 16).
    LookUp,
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
    /// A bulk action: the marked keys, frozen when the key was pressed (SPEC 16).
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
                _ if !self.role.acts() => " (a viewer reads, and takes no action)".to_string(),
                _ if b.when == super::keymap::When::Lead => " (that is for a lead)".to_string(),
                Some(by) if *by != self.operator && self.role.leads() => {
                    format!(" (claimed by {by}: C takes it over)")
                }
                Some(by) if *by != self.operator => format!(" (claimed by {by})"),
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
        let Some((kind, step)) = first_step(c, offered, None) else {
            // P: the item's workflow or its destination, paused or resumed (a lead's; SPEC 17)
            use crate::ledger::Pausable;
            let choices = vec![
                (
                    'w',
                    Pausable::Workflow,
                    row.workflow.clone(),
                    row.workflow_paused,
                ),
                (
                    'd',
                    Pausable::Destination,
                    row.destination.clone(),
                    row.destination_paused,
                ),
            ];
            let options = choices
                .iter()
                .map(|(k, what, name, paused)| {
                    let verb = if *paused { "resume" } else { "pause" };
                    (*k, format!("{verb} {} {name}", what.noun()))
                })
                .collect();
            let mut form = Form::new(
                ActionKind::Pause,
                row.key.clone(),
                FormStep::Choose(options),
            );
            form.pause_choices = choices;
            self.mode = Mode::Form(Box::new(form));
            return Vec::new();
        };
        let target = row.key.clone();
        if kind == ActionKind::LookUp {
            self.mode = Mode::Form(Box::new(Form::new(kind, target.clone(), step)));
            return vec![Effect::LookUp {
                keys: vec![target],
                pace: None,
                stop: super::app::StopFlag::default(),
            }];
        }
        let hint = (kind == ActionKind::Retry && row.state == State::Rejected).then(|| {
            format!(
                "{} rejected it before and may reject it again",
                row.destination
            )
        });
        let mut form = Form::new(kind, target, step);
        form.hint = hint;
        self.mode = Mode::Form(Box::new(form));
        Vec::new()
    }

    /// `v` in the detail pane: choose one of its redacted fields, give a reason, confirm (a lead
    /// only; SPEC 8 and 17). The value shows on this pane until it closes, and nowhere else.
    pub(super) fn begin_reveal(&mut self) -> Vec<Effect> {
        if !self.role.leads() {
            self.set_status("revealing a redacted field is for a lead", true);
            return Vec::new();
        }
        let Some(d) = &self.detail else {
            return Vec::new();
        };
        let paths = crate::ledger::redacted_paths(&d.payload);
        if paths.is_empty() {
            self.set_status("nothing is redacted in this item", false);
            return Vec::new();
        }
        let options = ('1'..='9').zip(paths).collect();
        let form = Form::new(
            ActionKind::Reveal,
            d.op.key.clone(),
            FormStep::Choose(options),
        );
        self.mode = Mode::Form(Box::new(form));
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
                        (ActionKind::Retry | ActionKind::LookUp, _) => {
                            match super::incident::pace(&value) {
                                Ok(pace) => {
                                    form.pace = pace;
                                    form.step = FormStep::Confirm;
                                }
                                Err(why) => form.hint = Some(why),
                            }
                        }
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
            FormStep::Checking | FormStep::LookingUp => {}
        }
        self.show_form(form)
    }

    fn submit(&mut self, form: Form) -> Vec<Effect> {
        let key = form.target.clone();
        let text = form.text.clone().unwrap_or_default();
        match (form.kind.clone(), form.staff_action()) {
            (ActionKind::Pause, _) => vec![Effect::Pause {
                what: form.pausing.unwrap_or(crate::ledger::Pausable::Workflow),
                name: key,
                reason: text,
            }],
            (ActionKind::Resume, _) => vec![Effect::Resume {
                what: form.pausing.unwrap_or(crate::ledger::Pausable::Workflow),
                name: key,
            }],
            (ActionKind::LookUp, _) => self.submit_lookup(form),
            (ActionKind::Reveal, _) => {
                self.set_status("revealing…", false);
                vec![Effect::Reveal {
                    key,
                    path: form.field.clone().unwrap_or_default(),
                    reason: text,
                }]
            }
            (kind, Some(action)) => match form.preview {
                Some(preview) => self.start_bulk(kind.verb(), preview, action, form.pace),
                None => {
                    self.set_status("working…", false);
                    vec![Effect::Staff { key, action }]
                }
            },
            (_, None) => Vec::new(),
        }
    }
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
            ActionKind::Pause | ActionKind::Resume | ActionKind::Reveal => return None,
        })
    }
}
