//! Stalled runs in view 1 (manual: Runs): rows above the operations, oldest stall first; `Enter`
//! opens one in the detail pane with its steps; `c` `u` `n` `x` claim, release, note and close
//! the run as a whole. The selection is on a run (`on_run`) or on an operation, never both.

use ratatui::crossterm::event::{KeyCode, KeyEvent};

use super::form::{ActionKind, Form, FormStep};
use super::messages::Effect;
use super::{App, Focus, Mode, View};
use crate::domain::Resolution;
use crate::domain::run_action::RunAction;
use crate::ledger::RunSummary;

/// Closing a run: how it ended.
const RUN_CLOSE_CHOICES: [(char, Resolution, &str); 2] = [
    (
        '1',
        Resolution::DoneElsewhere,
        "done elsewhere: finished by hand",
    ),
    ('3', Resolution::Abandoned, "abandoned: no longer wanted"),
];

impl App {
    /// The run the selection is on (view 1 only).
    pub fn selected_run(&self) -> Option<&RunSummary> {
        if self.view != View::Exceptions {
            return None;
        }
        self.stalled.selected()
    }

    /// The selected run's detail, when view 1 shows and the pane does not hold it.
    pub(super) fn run_effect(&self) -> Vec<Effect> {
        match self.view {
            View::Exceptions => self.stalled.effect(),
            _ => Vec::new(),
        }
    }

    /// A key of the list while runs are in view 1: moving between them and the operations, and
    /// a run's own actions. `None`: the key is the operations'.
    pub(super) fn on_run_key(&mut self, key: KeyEvent) -> Option<Vec<Effect>> {
        if self.view != View::Exceptions || self.stalled.runs.is_empty() || !self.marks.is_empty() {
            return None;
        }
        let Some(i) = self.stalled.on else {
            // up from the first operation (or down into an empty list) reaches the runs
            let up = matches!(key.code, KeyCode::Char('k') | KeyCode::Up);
            let down = matches!(key.code, KeyCode::Char('j') | KeyCode::Down);
            if (up && self.selected == 0 && !self.more_before) || (down && self.rows.is_empty()) {
                self.stalled.on = Some(if up { self.stalled.runs.len() - 1 } else { 0 });
                return Some(self.run_effect());
            }
            return None;
        };
        let run = self.stalled.runs[i].run.clone();
        Some(match key.code {
            KeyCode::Char('j') | KeyCode::Down => {
                if i + 1 < self.stalled.runs.len() {
                    self.stalled.on = Some(i + 1);
                } else if !self.rows.is_empty() {
                    self.stalled.on = None;
                    self.selected = 0;
                    return Some(self.after_move());
                }
                self.run_effect()
            }
            KeyCode::Char('k') | KeyCode::Up => {
                self.stalled.on = Some(i.saturating_sub(1));
                self.run_effect()
            }
            KeyCode::Char('g') | KeyCode::Home => {
                self.stalled.on = Some(0);
                self.run_effect()
            }
            KeyCode::Enter | KeyCode::Tab => {
                self.focus = Focus::Detail;
                self.detail_scroll = 0;
                vec![Effect::Run { run }]
            }
            KeyCode::Char(c @ ('c' | 'u' | 'n' | 'x')) => self.begin_run_action(c, run),
            KeyCode::Char('C' | 'r' | 'R' | 'P' | 'L' | ' ' | 'A') => {
                self.status.set(
                    format!(
                        "run {run} is stalled between steps: rerun its automation, or c claim, \
                         n note, x close it (Enter opens it)"
                    ),
                    true,
                    self.now,
                );
                Vec::new()
            }
            _ => return None,
        })
    }

    fn begin_run_action(&mut self, c: char, run: String) -> Vec<Effect> {
        if !self.role.acts() {
            self.status
                .set("a viewer reads, and takes no action", true, self.now);
            return Vec::new();
        }
        let (kind, step) = match c {
            'c' => {
                self.status.set("working…", false, self.now);
                return vec![Effect::RunAction {
                    run,
                    action: RunAction::Claim,
                }];
            }
            'u' => {
                self.status.set("working…", false, self.now);
                return vec![Effect::RunAction {
                    run,
                    action: RunAction::Release,
                }];
            }
            'n' => (
                ActionKind::Note,
                FormStep::Text {
                    label: "note",
                    required: true,
                },
            ),
            _ => (
                ActionKind::Close,
                FormStep::Choose(
                    RUN_CLOSE_CHOICES
                        .iter()
                        .map(|(k, _, words)| (*k, words.to_string()))
                        .collect(),
                ),
            ),
        };
        let mut form = Form::new(kind, run, step);
        form.run = true;
        self.mode = Mode::Form(Box::new(form));
        Vec::new()
    }
}

/// A run's close: the resolution chosen, then its note (a run takes no reference).
pub(super) fn choose_run_close(form: &mut Form, c: char) {
    if let Some((_, r, _)) = RUN_CLOSE_CHOICES.iter().find(|(k, _, _)| *k == c) {
        form.resolution = Some(*r);
        form.step = FormStep::Text {
            label: "note (what was done)",
            required: true,
        };
    }
}

/// What a run's form asks, once confirmed.
pub(super) fn run_action_of(form: &Form) -> Option<RunAction> {
    let text = form.text.clone().unwrap_or_default();
    match form.kind {
        ActionKind::Note => Some(RunAction::Note { text }),
        ActionKind::Close => Some(RunAction::Close {
            resolution: form.resolution?,
            note: text,
        }),
        _ => None,
    }
}
