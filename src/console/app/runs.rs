//! Stalled runs in view 1 (manual: Runs): rows above the operations, oldest stall first; `Enter`
//! opens one in the detail pane with its steps; `c` `u` `n` `x` claim, release, note and close
//! the run as a whole. The selection is on a run (`on_run`) or on an operation, never both.

use ratatui::crossterm::event::{KeyCode, KeyEvent};

use super::form::{ActionKind, Form, FormStep};
use super::{App, Effect, Focus, Mode, View};
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
    /// The run the selection is on.
    pub fn selected_run(&self) -> Option<&RunSummary> {
        if self.view != View::Exceptions {
            return None;
        }
        self.stalled.get(self.on_run?)
    }

    /// The stalled runs came: kept while view 1 shows; a fresh list starts on the first.
    pub(super) fn on_stalled(
        &mut self,
        seq: u64,
        runs: Result<Vec<RunSummary>, String>,
    ) -> Vec<Effect> {
        if seq < self.stalled_seq {
            return Vec::new();
        }
        let Ok(runs) = runs else {
            return Vec::new();
        };
        let before = self.selected_run().map(|r| r.run.clone());
        self.stalled = runs;
        self.on_run = match before {
            Some(r) => self
                .stalled
                .iter()
                .position(|x| x.run == r)
                .or_else(|| (!self.stalled.is_empty()).then_some(0)),
            None if self.stalled_fresh && self.selected == 0 && !self.stalled.is_empty() => Some(0),
            None => None,
        };
        self.stalled_fresh = false;
        self.run_effect()
    }

    /// One run came for the detail pane.
    pub(super) fn on_run_view(
        &mut self,
        run: String,
        view: Result<Box<crate::ledger::RunView>, String>,
    ) -> Vec<Effect> {
        match view {
            Ok(v) if self.selected_run().is_some_and(|r| r.run == run) => self.run_view = Some(*v),
            Ok(_) => {}
            Err(e) => self.set_status(e, true),
        }
        Vec::new()
    }

    /// The run's detail, when the selection is on one it does not hold.
    pub(super) fn run_effect(&self) -> Vec<Effect> {
        match self.selected_run() {
            Some(r) if self.run_view.as_ref().is_none_or(|v| v.run != r.run) => {
                vec![Effect::Run { run: r.run.clone() }]
            }
            _ => Vec::new(),
        }
    }

    /// A key of the list while runs are in view 1: moving between them and the operations, and
    /// a run's own actions. `None`: the key is the operations'.
    pub(super) fn on_run_key(&mut self, key: KeyEvent) -> Option<Vec<Effect>> {
        if self.view != View::Exceptions || self.stalled.is_empty() || !self.marks.is_empty() {
            return None;
        }
        let Some(i) = self.on_run else {
            // up from the first operation (or down into an empty list) reaches the runs
            let up = matches!(key.code, KeyCode::Char('k') | KeyCode::Up);
            let down = matches!(key.code, KeyCode::Char('j') | KeyCode::Down);
            if (up && self.selected == 0 && !self.more_before) || (down && self.rows.is_empty()) {
                self.on_run = Some(if up { self.stalled.len() - 1 } else { 0 });
                return Some(self.run_effect());
            }
            return None;
        };
        let run = self.stalled[i].run.clone();
        Some(match key.code {
            KeyCode::Char('j') | KeyCode::Down => {
                if i + 1 < self.stalled.len() {
                    self.on_run = Some(i + 1);
                } else if !self.rows.is_empty() {
                    self.on_run = None;
                    self.selected = 0;
                    return Some(self.after_move());
                }
                self.run_effect()
            }
            KeyCode::Char('k') | KeyCode::Up => {
                self.on_run = Some(i.saturating_sub(1));
                self.run_effect()
            }
            KeyCode::Char('g') | KeyCode::Home => {
                self.on_run = Some(0);
                self.run_effect()
            }
            KeyCode::Enter | KeyCode::Tab => {
                self.focus = Focus::Detail;
                self.detail_scroll = 0;
                vec![Effect::Run { run }]
            }
            KeyCode::Char(c @ ('c' | 'u' | 'n' | 'x')) => self.begin_run_action(c, run),
            KeyCode::Char('C' | 'r' | 'R' | 'P' | 'L' | ' ' | 'A') => {
                self.set_status(
                    format!(
                        "run {run} is stalled between steps: rerun its automation, or c claim, \
                         n note, x close it (Enter opens it)"
                    ),
                    true,
                );
                Vec::new()
            }
            _ => return None,
        })
    }

    fn begin_run_action(&mut self, c: char, run: String) -> Vec<Effect> {
        if !self.role.acts() {
            self.set_status("a viewer reads, and takes no action", true);
            return Vec::new();
        }
        let (kind, step) = match c {
            'c' => {
                self.set_status("working…", false);
                return vec![Effect::RunAction {
                    run,
                    action: RunAction::Claim,
                }];
            }
            'u' => {
                self.set_status("working…", false);
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
