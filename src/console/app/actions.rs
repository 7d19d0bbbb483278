//! A staff action in the console: begun by its key, asked step by step in its form, submitted.

use ratatui::crossterm::event::{KeyCode, KeyEvent};
use tui_input::backend::crossterm::EventHandler;

use super::form::{ActionKind, Form, FormStep};
use super::messages::Effect;
use super::{App, Mode};
use crate::console::app::form::{choose, entered, first_step};
use crate::domain::{Offer, State};

impl App {
    pub(super) fn begin_action(&mut self, c: char) -> Vec<Effect> {
        let Some(row) = self.selected_row().cloned() else {
            self.status.set("select an item first", true, self.now);
            return Vec::new();
        };
        if offline(self) {
            return Vec::new();
        }
        // a key stands for actions the ledger may not offer on this item now: say so, and what
        // to do instead, rather than ask for details and then be refused
        if let Some(b) = crate::console::keymap::action(c)
            && !self.applies(b)
        {
            let why = match &row.claimed_by {
                _ if !self.role.acts() => " (a viewer reads, and takes no action)".to_string(),
                _ if b.when == crate::console::keymap::When::Lead => {
                    " (that is for a lead)".to_string()
                }
                Some(by) if *by != self.operator && self.role.leads() => {
                    format!(" (claimed by {by}: C takes it over)")
                }
                Some(by) if *by != self.operator => format!(" (claimed by {by})"),
                _ => String::new(),
            };
            self.status.set(
                format!(
                    "{} is not possible on {} ({}){why} · safe next step: {}",
                    b.label, row.key, row.state, row.next_step
                ),
                true,
                self.now,
            );
            return Vec::new();
        }
        if c == 'e' {
            match super::correct::correct_form(&row, self.detail.as_ref()) {
                Ok(form) => self.mode = Mode::Form(Box::new(form)),
                Err(why) => self.status.set(why, true, self.now),
            }
            return Vec::new();
        }
        let offered = |o: Offer| row.actions.contains(o);
        let Some((kind, step)) = first_step(c, offered, None) else {
            // P: the item's workflow or its destination, paused or resumed (a lead's; the manual's Running settle for a team)
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
                stop: super::messages::StopFlag::default(),
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
    /// only; the manual's Redaction, Running settle for a team). The value shows on this pane until it closes, and nowhere else.
    pub(super) fn begin_reveal(&mut self) -> Vec<Effect> {
        if !self.role.leads() {
            self.status
                .set("revealing a redacted field is for a lead", true, self.now);
            return Vec::new();
        }
        let Some(d) = &self.detail else {
            return Vec::new();
        };
        let paths = crate::ledger::redacted_paths(&d.payload);
        if paths.is_empty() {
            self.status
                .set("nothing is redacted in this item", false, self.now);
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
            self.status
                .set("cancelled; nothing changed", false, self.now);
            return Vec::new();
        }
        match form.step.clone() {
            FormStep::Choose(options) => {
                let KeyCode::Char(c) = key.code else {
                    self.mode = Mode::Form(Box::new(form));
                    return Vec::new();
                };
                if c == 'n' && !options.iter().any(|(k, _)| *k == 'n') {
                    self.status
                        .set("cancelled; nothing changed", false, self.now);
                    return Vec::new();
                }
                let Some(_) = options.iter().find(|(k, _)| *k == c) else {
                    self.mode = Mode::Form(Box::new(form));
                    return Vec::new();
                };
                if form.run {
                    super::runs::choose_run_close(&mut form, c);
                } else if form.kind == ActionKind::Correct {
                    super::correct::choose(&mut form, c);
                } else {
                    choose(&mut form, &options, c);
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
                    if form.kind == ActionKind::Correct {
                        super::correct::entered(&mut form, label, value);
                    } else {
                        entered(&mut form, label, value);
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
                    self.status
                        .set("cancelled; nothing changed", false, self.now);
                    return Vec::new();
                }
                _ => {}
            },
            FormStep::Checking | FormStep::LookingUp => {}
        }
        self.show_form(form)
    }

    pub(super) fn submit(&mut self, form: Form) -> Vec<Effect> {
        let key = form.target.clone();
        if form.run {
            let Some(action) = super::runs::run_action_of(&form) else {
                return Vec::new();
            };
            self.status.set("working…", false, self.now);
            return vec![Effect::RunAction { run: key, action }];
        }
        let text = form.text.clone().unwrap_or_default();
        let action = match form.kind {
            ActionKind::Correct => super::correct::action(&form),
            _ => form.staff_action(),
        };
        match (form.kind.clone(), action) {
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
                self.status.set("revealing…", false, self.now);
                vec![Effect::Reveal {
                    key,
                    path: form.field.clone().unwrap_or_default(),
                    reason: text,
                }]
            }
            (kind, Some(action)) => match form.preview {
                Some(preview) => self.start_bulk(kind.verb(), preview, action, form.pace),
                None => {
                    self.status.set("working…", false, self.now);
                    vec![Effect::Staff { key, action }]
                }
            },
            (_, None) => Vec::new(),
        }
    }
}

/// Whether the database is unreachable, said on the status line: no action until it is back.
pub(super) fn offline(app: &mut App) -> bool {
    if !app.online {
        app.status.set(
            "the database is unreachable: actions are off until it is back",
            true,
            app.now,
        );
    }
    !app.online
}
