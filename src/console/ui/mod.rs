//! Drawing: a pure function of the app state. Never touches the database; every text that came
//! from the database goes through `escape_text` before it reaches a cell.
//!
//! Rooms: One room per part of the screen: `header.rs`, `list.rs`, `groups.rs`, `detail.rs`,
//! `run_detail.rs`, `pane.rs` what the two detail panes share, `activity.rs`, `review.rs`,
//! `form.rs`, `undo.rs` `U`'s preview, `status.rs`; `cells.rs` what every part draws with.

use ratatui::Frame;
use ratatui::layout::{Constraint, Layout};

use super::theme::Theme;
use crate::console::app::{App, Focus, Mode, View};
use crate::console::ui::activity::draw_activity;
use crate::console::ui::cells::esc;
use crate::console::ui::detail::draw_detail;
use crate::console::ui::form::draw_form;
use crate::console::ui::header::{draw_header, draw_tabs};
use crate::console::ui::list::draw_list;
use crate::console::ui::status::{draw_footer, draw_help, draw_status};

mod activity;
mod cells;
mod detail;
mod form;
mod groups;
mod header;
mod list;
mod pane;
mod review;
mod run_detail;
mod status;
mod undo;

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
            .line
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
    } else if app.view == View::Exceptions && app.groups.shown {
        groups::draw(f, app, theme, list, detail);
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
        Mode::Undo(_) => undo::draw_undo(f, app, theme, area),
        _ => {}
    }
}
