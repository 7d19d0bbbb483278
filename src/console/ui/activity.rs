//! The Activity view: who did what, newest first.

use ratatui::Frame;
use ratatui::layout::{Constraint, Rect};
use ratatui::widgets::{Paragraph, Row, Table};

use crate::console::app::App;
use crate::console::theme::{Meaning, Theme};
use crate::console::ui::cells::{esc, fit};

pub(super) fn draw_activity(f: &mut Frame, app: &App, theme: &Theme, area: Rect) {
    // narrow: the event's kind alone; wide: with its state change
    let wide = area.width >= 120;
    let shown = if app.automation {
        "DETAIL · +automation"
    } else {
        "DETAIL · people only"
    };
    let header =
        Row::new(["TIME", "ACTOR", "EVENT", "SUBJECT", shown]).style(theme.style(Meaning::Muted));
    let body = area.height.saturating_sub(1) as usize;
    let start = app.selected.saturating_sub(body.saturating_sub(1));
    let (event_width, subject_width) = if wide { (30, 24) } else { (15, 19) };
    let widths = [
        Constraint::Length(11),
        Constraint::Length(10),
        Constraint::Length(event_width),
        Constraint::Length(subject_width),
        Constraint::Min(10),
    ];
    let detail_width = area
        .width
        .saturating_sub(11 + 10 + event_width + subject_width + 4);
    let rows = app
        .activity
        .iter()
        .enumerate()
        .skip(start)
        .take(body)
        .map(|(i, e)| {
            let event = match (&e.from_state, &e.to_state) {
                (Some(a), Some(b)) if a != b && wide => format!("{} {a}→{b}", esc(&e.kind)),
                _ => esc(&e.kind),
            };
            let cells = vec![
                e.at.format("%m-%d %H:%M").to_string(),
                fit(esc(&e.actor), 10),
                fit(event, event_width),
                fit(esc(e.subject.as_deref().unwrap_or("-")), subject_width),
                fit(esc(&e.detail_words()), detail_width),
            ];
            let row = Row::new(cells);
            if i == app.selected {
                row.style(theme.style(Meaning::Selected))
            } else if e.is_automation() {
                row.style(theme.style(Meaning::Muted))
            } else {
                row
            }
        });
    f.render_widget(
        Table::new(rows, widths).header(header).column_spacing(1),
        area,
    );
    if app.activity.is_empty() && app.loaded_once {
        let text = if !app.filter.value().is_empty() {
            "No event matches the filter (Esc clears it)."
        } else if !app.automation {
            "No one has acted yet (a shows automation's events)."
        } else {
            "Nothing has happened yet."
        };
        f.render_widget(
            Paragraph::new(format!(" {text}")).style(theme.style(Meaning::Muted)),
            Rect {
                y: area.y + 1.min(area.height.saturating_sub(1)),
                height: 1,
                ..area
            },
        );
    }
}
