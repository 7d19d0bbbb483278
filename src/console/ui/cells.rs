//! What every part of the screen draws with: stored text escaped and fitted to its cell, the
//! colours of an age and a state, a box in the middle of an area.

use ratatui::layout::Rect;
use ratatui::style::Style;

use crate::console::app::App;
use crate::console::theme::{Meaning, Theme};
use crate::domain::{State, escape_text};

pub(super) fn esc(s: &str) -> String {
    escape_text(s).into_owned()
}

/// `text` in at most `room` columns, ending in `…` when cut.
pub(super) fn cut_text(text: &str, room: usize) -> String {
    crate::domain::escapes::fit_width(text, room, false)
}

pub(super) fn age_style(app: &App, theme: &Theme, secs: i64) -> Style {
    let (warn, critical) = app.age_thresholds;
    if secs >= critical {
        theme.style(Meaning::Critical)
    } else if secs >= warn {
        theme.style(Meaning::Warning)
    } else {
        theme.style(Meaning::Normal)
    }
}

/// A cell's text within its width in columns: what does not fit ends in `…`.
pub(super) fn fit(text: String, width: u16) -> String {
    crate::domain::escapes::fit_width(&text, width as usize, false)
}

pub(super) fn state_style(theme: &Theme, s: State) -> Style {
    match s {
        State::Unknown | State::Conflict => theme.style(Meaning::Critical),
        State::Rejected | State::Failed => theme.style(Meaning::Warning),
        State::Succeeded => theme.style(Meaning::Good),
        State::Closed => theme.style(Meaning::Muted),
        _ => theme.style(Meaning::Accent),
    }
}

pub(super) fn centered(area: Rect, width: u16, height: u16) -> Rect {
    let w = width.min(area.width);
    let h = height.min(area.height);
    Rect {
        x: area.x + (area.width - w) / 2,
        y: area.y + (area.height - h) / 2,
        width: w,
        height: h,
    }
}
