//! `L` in the console (manual: Many at once): the lookup a safe next step asks for, run now. One item: its
//! destination is asked at once and its answer shown for the person to confirm; marked items: a
//! frozen preview, the lookups paced with a progress bar (`Esc` stops), then the answers grouped
//! and, confirmed, one reconcile per found or absent item. No answer changes nothing.

use std::sync::atomic::AtomicBool;
use std::time::Duration;

use super::form::{ActionKind, Form, FormStep};
use super::messages::{Effect, Msg, StopFlag};
use super::{App, BulkRun, Mode};
use crate::dispatch::{Looked, Lookups};
use crate::domain::{LookupAnswer, State};
use crate::error::Result;
use crate::ledger::{Ledger, StaffAction};

/// The verb of a bulk lookup under way (its progress bar).
const LOOKING_UP: &str = "look up";

/// What a lookup's answers were, in a few words: "150 found, 30 absent, 20 no answer".
pub(crate) fn tally(answers: &[Looked]) -> String {
    let count = |word: &str| {
        answers
            .iter()
            .filter(|(_, _, a)| a.as_str() == word)
            .count()
    };
    let mut parts = Vec::new();
    for (word, shown) in [
        ("found", "found"),
        ("absent", "absent"),
        ("no_answer", "no answer"),
    ] {
        let n = count(word);
        if n > 0 {
            parts.push(format!("{n} {shown}"));
        }
    }
    parts.join(", ")
}

/// The reconciles the answers allow: found and absent, each as its own action.
fn reconciles(answers: &[Looked]) -> Vec<(String, StaffAction)> {
    answers
        .iter()
        .filter(|(_, _, a)| !matches!(a, LookupAnswer::NoAnswer { .. }))
        .map(|(k, _, a)| (k.clone(), StaffAction::LookUp { answer: a.clone() }))
        .collect()
}

impl App {
    /// A confirmed lookup form: the first confirmation of marked items starts their lookups;
    /// the confirmation of answers reconciles by them.
    pub(super) fn submit_lookup(&mut self, form: Form) -> Vec<Effect> {
        let stop = StopFlag::default();
        if !form.answers.is_empty() {
            let mut items = reconciles(&form.answers);
            if let Some(p) = &form.preview {
                items.retain(|(k, _)| p.eligible.contains(k));
            }
            if form.bulk.is_none() {
                let Some((key, action)) = items.pop() else {
                    return Vec::new();
                };
                self.status.set("working…", false, self.now);
                return vec![Effect::Staff { key, action }];
            }
            if items.is_empty() {
                self.status.set("nothing to reconcile", true, self.now);
                return Vec::new();
            }
            self.bulk = Some(BulkRun {
                verb: "reconcile by lookup",
                done: 0,
                total: items.len(),
                stop: stop.clone(),
            });
            self.status.set(
                format!("reconciling {} · Esc stops", items.len()),
                false,
                self.now,
            );
            return vec![Effect::BulkApplyEach { items, stop }];
        }
        let Some(preview) = form.preview else {
            return Vec::new();
        };
        if preview.eligible.is_empty() {
            self.status.set(
                format!("nothing to look up: {}", preview.summary(LOOKING_UP)),
                true,
                self.now,
            );
            return Vec::new();
        }
        self.bulk = Some(BulkRun {
            verb: LOOKING_UP,
            done: 0,
            total: preview.eligible.len(),
            stop: stop.clone(),
        });
        self.status.set(
            format!("{} · Esc stops", preview.summary(LOOKING_UP)),
            false,
            self.now,
        );
        vec![Effect::LookUp {
            keys: preview.eligible,
            pace: form.pace,
            stop,
        }]
    }

    /// The answers of a lookup: one item's, for its confirmation; marked items', grouped, for
    /// theirs (after the rules say which of them the answers may reconcile).
    pub(super) fn on_looked_up(
        &mut self,
        answers: std::result::Result<Vec<Looked>, String>,
    ) -> Vec<Effect> {
        if self.bulk.as_ref().is_some_and(|b| b.verb == LOOKING_UP) {
            let run = self.bulk.take();
            let answers = match answers {
                Ok(a) => a,
                Err(e) => {
                    self.status
                        .set(format!("the lookups stopped: {e}"), true, self.now);
                    return Vec::new();
                }
            };
            let stopped = run.is_some_and(|r| answers.len() < r.total);
            let items = reconciles(&answers);
            let said = format!(
                "looked up {}{}: {}",
                answers.len(),
                if stopped { " (stopped)" } else { "" },
                tally(&answers)
            );
            if items.is_empty() {
                self.status
                    .set(format!("{said}: nothing to reconcile"), true, self.now);
                return Vec::new();
            }
            let keys: Vec<String> = answers.iter().map(|(k, _, _)| k.clone()).collect();
            let mut form = Form::new(
                ActionKind::LookUp,
                format!("{} marked items", keys.len()),
                FormStep::Checking,
            );
            form.bulk = Some(keys);
            form.answers = answers;
            form.hint = stopped.then(|| "stopped: the rest were not looked up".to_string());
            self.mode = Mode::Form(Box::new(form));
            return vec![Effect::BulkPreviewEach { items }];
        }
        let state = self.selected_row().map(|r| r.state);
        let Mode::Form(form) = &mut self.mode else {
            return Vec::new(); // cancelled meanwhile
        };
        if form.kind != ActionKind::LookUp || form.step != FormStep::LookingUp {
            return Vec::new();
        }
        let key = form.target.clone();
        let said = |(k, d, a): &Looked| format!("{k}: {}", a.describe(d));
        match answers.as_deref() {
            Err(e) => {
                self.mode = Mode::Normal;
                self.status.set(
                    format!("{key}: the lookup could not be asked: {e}"),
                    true,
                    self.now,
                );
            }
            Ok([]) => {
                self.mode = Mode::Normal;
                self.status
                    .set(format!("{key}: no such operation"), true, self.now);
            }
            Ok([one @ (_, _, LookupAnswer::NoAnswer { .. })]) => {
                let text = format!("{}: left as it was", said(one));
                self.mode = Mode::Normal;
                self.status.set(text, true, self.now);
            }
            Ok([one @ (_, _, LookupAnswer::Absent { .. })]) if state == Some(State::Failed) => {
                let text = format!("{}: it is failed already; nothing to change", said(one));
                self.mode = Mode::Normal;
                self.status.set(text, false, self.now);
            }
            Ok(answers) => {
                form.answers = answers.to_vec();
                form.step = FormStep::Confirm;
            }
        }
        Vec::new()
    }
}

/// Asks each operation's destination, `pace` apart, until `stop`; `progress` is told as a bulk
/// action's is (at most every 1%).
pub(crate) async fn look_up_each(
    ledger: &Ledger,
    keys: &[String],
    pace: Option<Duration>,
    stop: &AtomicBool,
    progress: &(dyn Fn(Msg) + Sync),
) -> Result<Vec<Looked>> {
    let step = (keys.len() / 100).max(1);
    Lookups::new(ledger.config())
        .each(ledger, keys, pace, stop, |done, total, _| {
            if done % step == 0 || done == total {
                progress(Msg::BulkProgress { done, total });
            }
        })
        .await
}
