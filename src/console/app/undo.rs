//! `U` (manual: Taking an action back): the person's own newest action taken back. The ledger
//! first says what can be taken back and what not; an action on one item that can be is taken
//! back at once, anything else is shown on one screen and `y` takes it back.

use ratatui::crossterm::event::{KeyCode, KeyEvent};

use super::messages::Effect;
use super::{App, Mode};
use crate::ledger::UndoReport;

/// What the status line adds after a person's action: the key that takes it back, and for how
/// long.
pub fn offer(window: std::time::Duration) -> String {
    format!(
        " · U takes it back ({} left)",
        crate::domain::time::format_duration(window)
    )
}

/// `U`: asks the ledger what taking back the person's newest action would do.
pub(super) fn begin(app: &mut App) -> Vec<Effect> {
    if !app.role.acts() {
        app.status
            .set("a viewer reads, and takes no action", true, app.now);
        return Vec::new();
    }
    if super::actions::offline(app) {
        return Vec::new();
    }
    if app.bulk.is_some() {
        app.status
            .set("a bulk action is under way (Esc stops it)", true, app.now);
        return Vec::new();
    }
    app.status
        .set("checking what can be taken back…", false, app.now);
    vec![Effect::UndoPreview]
}

/// The ledger's answer to `U`: taken back at once (one item that can be), shown (anything else
/// that can be), or said why not.
pub(super) fn on_previewed(app: &mut App, report: Result<UndoReport, String>) -> Vec<Effect> {
    let r = match report {
        Ok(r) => r,
        Err(e) => {
            app.status
                .set(format!("nothing to take back: {e}"), true, app.now);
            return Vec::new();
        }
    };
    if r.taken_back.is_empty() {
        let said = match r.refused.first() {
            Some((_, why)) => format!("{} cannot be taken back: {why}", r.action),
            None => format!(
                "{} ({} by {}) was taken back already",
                r.action, r.was, r.by
            ),
        };
        app.status.set(said, true, app.now);
        return Vec::new();
    }
    if r.taken_back.len() == 1 && r.refused.is_empty() && r.already.is_empty() {
        return take_back(app, r.action);
    }
    app.mode = Mode::Undo(Box::new(r));
    Vec::new()
}

/// A key on the preview: `y`/Enter takes it back, anything else leaves it.
pub(super) fn on_key(app: &mut App, r: UndoReport, key: KeyEvent) -> Vec<Effect> {
    match key.code {
        KeyCode::Char('y') | KeyCode::Enter => take_back(app, r.action),
        _ => {
            app.status
                .set("not taken back; nothing changed", false, app.now);
            Vec::new()
        }
    }
}

fn take_back(app: &mut App, action: String) -> Vec<Effect> {
    app.status.set("taking it back…", false, app.now);
    vec![Effect::Undo { action }]
}
