//! Drawing: a pure function of the app state. Never touches the database; every text that came
//! from the database goes through `escape_text` before it reaches a cell.

use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::Style;

use super::theme::{Meaning, SPINNER, Theme};
use crate::console::app::{App, Focus, Mode, View};
use crate::console::ui::activity::draw_activity;
use crate::console::ui::detail::draw_detail;
use crate::console::ui::form::draw_form;
use crate::console::ui::header::{draw_header, draw_tabs};
use crate::console::ui::list::draw_list;
use crate::console::ui::status::{draw_footer, draw_help, draw_status};
use crate::domain::{State, escape_text};

mod activity;
mod detail;
mod form;
mod header;
mod list;
mod pane;
mod review;
mod run_detail;
mod status;

fn esc(s: &str) -> String {
    escape_text(s).into_owned()
}

pub fn draw(f: &mut Frame, app: &App, theme: &Theme) {
    let area = f.area();
    let detail_height = if area.height >= 30 {
        area.height / 2 - 2
    } else {
        (area.height.saturating_sub(6)) / 2
    };
    // a status too long for its line (a refusal, a lookup's answer) is shown whole: it wraps
    // onto the footer's line until it clears (manual: The console)
    let long_status = app.bulk.is_none()
        && !matches!(app.mode, Mode::Filter)
        && app
            .status
            .as_ref()
            .is_some_and(|(text, _)| esc(text).chars().count() + 1 > area.width as usize);
    let status_height = if long_status { 2 } else { 1 };
    let [header, tabs, list, detail, status, footer] = Layout::vertical([
        Constraint::Length(1),
        Constraint::Length(1),
        Constraint::Min(3),
        Constraint::Length(detail_height),
        Constraint::Length(status_height),
        Constraint::Length(2 - status_height),
    ])
    .areas(area);
    draw_header(f, app, theme, header);
    draw_tabs(f, app, theme, tabs);
    if app.view == View::Review {
        review::draw(f, app, theme, list.union(detail));
    } else if app.view == View::Activity && app.focus == Focus::Detail {
        draw_detail(f, app, theme, list.union(detail));
    } else if app.view == View::Activity {
        draw_activity(f, app, theme, list.union(detail));
    } else if app.detail_full && app.focus == Focus::Detail {
        draw_detail(f, app, theme, list.union(detail));
    } else {
        draw_list(f, app, theme, list);
        draw_detail(f, app, theme, detail);
    }
    draw_status(f, app, theme, status);
    draw_footer(f, app, theme, footer);
    match &app.mode {
        Mode::Help => draw_help(f, app, theme, area),
        Mode::Form(_) => draw_form(f, app, theme, area),
        _ => {}
    }
}

/// `text` in at most `room` columns, ending in `…` when cut.
fn cut_text(text: &str, room: usize) -> String {
    crate::domain::escapes::fit_width(text, room, false)
}

fn age_style(app: &App, theme: &Theme, secs: i64) -> Style {
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
fn fit(text: String, width: u16) -> String {
    crate::domain::escapes::fit_width(&text, width as usize, false)
}

fn state_style(theme: &Theme, s: State) -> Style {
    match s {
        State::Unknown | State::Conflict => theme.style(Meaning::Critical),
        State::Rejected | State::Failed => theme.style(Meaning::Warning),
        State::Succeeded => theme.style(Meaning::Good),
        State::Closed => theme.style(Meaning::Muted),
        _ => theme.style(Meaning::Accent),
    }
}

fn centered(area: Rect, width: u16, height: u16) -> Rect {
    let w = width.min(area.width);
    let h = height.min(area.height);
    Rect {
        x: area.x + (area.width - w) / 2,
        y: area.y + (area.height - h) / 2,
        width: w,
        height: h,
    }
}
