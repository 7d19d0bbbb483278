//! Incident mode in the console (manual: Many at once): `Space` marks rows, `A` marks everything the view and
//! filter match (the whole set in the database), and the action keys then act on every marked
//! item: the set is frozen when the key is pressed, the ledger's preview says what will be done
//! and what left alone, `y` starts it, a progress bar counts, `Esc` stops between two items.

use std::time::Duration;

use super::form::{Form, FormStep, first_step};
use super::messages::{Effect, StopFlag};
use super::{App, BulkRun, Mode};
use crate::ledger::{BulkPreview, BulkReport, StaffAction};

impl App {
    /// `Space`: marks or unmarks the selected row and moves to the next.
    pub(super) fn toggle_mark(&mut self) -> Vec<Effect> {
        if self.bulk.is_some() || !self.view.lists() {
            return Vec::new();
        }
        let Some(key) = self.selected_row().map(|r| r.key.clone()) else {
            return Vec::new();
        };
        self.marks.toggle(key);
        self.move_by(1)
    }

    /// `A`: marks every item the view and filter match; with items marked, unmarks them all.
    pub(super) fn mark_all(&mut self) -> Vec<Effect> {
        if self.bulk.is_some() || !self.view.lists() {
            return Vec::new();
        }
        if !self.marks.is_empty() {
            let n = self.marks.clear();
            self.status.set(format!("{n} unmarked"), false, self.now);
            return Vec::new();
        }
        let seq = self.next_seq();
        self.marks.asked = Some(seq);
        self.loading = true;
        self.status.set(
            "marking everything the view and filter match…",
            false,
            self.now,
        );
        vec![Effect::MarkAll {
            seq,
            filter: self.list_filter(),
        }]
    }

    /// An action key with items marked: the action for all of them, frozen now.
    pub(super) fn begin_bulk(&mut self, c: char) -> Vec<Effect> {
        let Some(b) = crate::console::keymap::action(c).filter(|b| b.bulk) else {
            self.status.set(
                format!(
                    "{c} acts on one item; {} marked (A unmarks them)",
                    self.marks.len()
                ),
                true,
                self.now,
            );
            return Vec::new();
        };
        if !self.applies(b) {
            self.status
                .set("a bulk action is under way (Esc stops it)", true, self.now);
            return Vec::new();
        }
        let keys = self.marks.frozen();
        let Some((kind, step)) = first_step(c, |_| true, Some(keys.len())) else {
            return Vec::new();
        };
        let mut form = Form::new(kind, format!("{} marked items", keys.len()), step);
        form.bulk = Some(keys);
        self.show_form(form)
    }

    /// Shows the form; a bulk form that has reached its confirmation first asks the ledger for
    /// the preview (the confirmation shows it).
    pub(super) fn show_form(&mut self, mut form: Form) -> Vec<Effect> {
        let mut fx = Vec::new();
        if form.step == FormStep::Confirm
            && form.preview.is_none()
            && let (Some(keys), Some(action)) = (form.bulk.clone(), form.staff_action())
        {
            form.step = FormStep::Checking;
            fx.push(Effect::BulkPreview { keys, action });
        }
        self.mode = Mode::Form(Box::new(form));
        fx
    }

    pub(super) fn on_previewed(&mut self, preview: Result<BulkPreview, String>) -> Vec<Effect> {
        let Mode::Form(form) = &mut self.mode else {
            return Vec::new(); // cancelled meanwhile
        };
        if form.step != FormStep::Checking {
            return Vec::new();
        }
        match preview {
            Ok(p) => {
                form.preview = Some(p);
                form.step = FormStep::Confirm;
            }
            Err(e) => {
                self.mode = Mode::Normal;
                self.status.set(
                    format!("could not check the marked items: {e}"),
                    true,
                    self.now,
                );
            }
        }
        Vec::new()
    }

    pub(super) fn start_bulk(
        &mut self,
        verb: &'static str,
        preview: BulkPreview,
        action: StaffAction,
        pace: Option<Duration>,
    ) -> Vec<Effect> {
        if preview.eligible.is_empty() {
            self.status.set(
                format!("nothing to do: {}", preview.summary(verb)),
                true,
                self.now,
            );
            return Vec::new();
        }
        let stop = StopFlag::default();
        self.bulk = Some(BulkRun {
            verb,
            done: 0,
            total: preview.eligible.len(),
            stop: stop.clone(),
        });
        let canary = matches!(action, StaffAction::Retry { .. }) && preview.eligible.len() > 1;
        let first = if canary {
            " · one first, the rest once it is taken"
        } else {
            ""
        };
        self.status.set(
            format!("{}{first} · Esc stops", preview.summary(verb)),
            false,
            self.now,
        );
        vec![Effect::BulkApply {
            keys: preview.eligible,
            action,
            pace,
            stop,
        }]
    }

    pub(super) fn on_bulk_done(&mut self, report: Result<BulkReport, String>) -> Vec<Effect> {
        let verb = self.bulk.take().map_or("bulk action", |b| b.verb);
        match report {
            Ok(r) => {
                // what was done is unmarked; what was left alone stays marked to look at
                self.marks.unmark(&r.done);
                let mut text = r.summary(verb);
                if !r.done.is_empty() {
                    text.push_str(&super::undo::offer(self.undo_window));
                }
                if !self.marks.is_empty() {
                    text.push_str(&format!(" · {} still marked", self.marks.len()));
                }
                let short = !r.not_reached.is_empty() || !r.not_sent.is_empty();
                self.status.set(text, short, self.now);
            }
            Err(e) => self
                .status
                .set(format!("{verb} stopped: {e}"), true, self.now),
        }
        self.refresh()
    }
}
