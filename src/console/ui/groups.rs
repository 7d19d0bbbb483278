//! View 1's groups (manual: Owners and notifications): how many, the state, the oldest, where, the
//! owner and the masked reason, the largest first; below, the selected group's safe next step
//! and the filter `Enter` lists its items with.

use chrono::TimeDelta;
use ratatui::Frame;
use ratatui::layout::{Constraint, Rect};
use ratatui::style::Style;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Paragraph, Row, Table, Wrap};

use crate::console::app::App;
use crate::console::theme::{Meaning, Theme};
use crate::console::ui::cells::{age_style, esc, fit, state_style};
use crate::console::ui::pane::label;
use crate::domain::format_age;
use crate::ledger::ExceptionGroup;

/// The columns that fit: count, state, oldest and where always; the owner from 100 columns; the
/// reason takes the rest.
fn columns(width: u16) -> Vec<(&'static str, u16)> {
    let mut cols = vec![
        ("COUNT", 6),
        ("STATE", 9),
        ("OLDEST", 7),
        ("WORKFLOW → DEST", 26),
    ];
    if width >= 100 {
        cols.push(("OWNER", 12));
    }
    let used: u16 = cols.iter().map(|(_, w)| w + 1).sum();
    cols.push(("REASON", width.saturating_sub(used)));
    cols
}

fn cell(g: &ExceptionGroup, name: &str) -> String {
    match name {
        "COUNT" => g.count.to_string(),
        "STATE" => g.state.as_str().to_string(),
        "OLDEST" => format_age(TimeDelta::seconds(g.oldest_seconds)),
        "WORKFLOW → DEST" => esc(&format!("{} → {}", g.workflow, g.destination)),
        "OWNER" => g.owner.as_deref().map_or("-".into(), esc),
        _ if g.reason.is_empty() => "-".into(),
        _ => esc(&g.reason),
    }
}

/// The groups in `list`, the selected one's record in `detail`.
pub(super) fn draw(f: &mut Frame, app: &App, theme: &Theme, list: Rect, detail: Rect) {
    let cols = columns(list.width);
    let header =
        Row::new(cols.iter().map(|(n, _)| n.to_string())).style(theme.style(Meaning::Muted));
    let body = list.height.saturating_sub(1) as usize;
    let panel = &app.groups;
    let start = panel.selected.saturating_sub(body.saturating_sub(1));
    let rows: Vec<Row> = panel
        .groups
        .iter()
        .enumerate()
        .skip(start)
        .take(body)
        .map(|(i, g)| {
            let cells = cols.iter().map(|(name, width)| {
                let style = match *name {
                    "STATE" => state_style(theme, g.state),
                    "OLDEST" => age_style(app, theme, g.oldest_seconds),
                    _ => Style::default(),
                };
                ratatui::widgets::Cell::from(fit(cell(g, name), *width)).style(style)
            });
            let row = Row::new(cells);
            match i == panel.selected {
                true => row.style(theme.style(Meaning::Selected)),
                false => row,
            }
        })
        .collect();
    let widths: Vec<Constraint> = cols.iter().map(|(_, w)| Constraint::Length(*w)).collect();
    f.render_widget(
        Table::new(rows, widths).header(header).column_spacing(1),
        list,
    );
    if panel.groups.is_empty() {
        let text = match panel.loading {
            true => "grouping…",
            false => "No exceptions: nothing needs a person right now.",
        };
        f.render_widget(
            Paragraph::new(format!(" {text}")).style(theme.style(Meaning::Muted)),
            Rect {
                y: list.y + 1.min(list.height.saturating_sub(1)),
                height: 1,
                ..list
            },
        );
    }
    let Some(g) = panel.selected_group() else {
        return;
    };
    let total: i64 = panel.groups.iter().map(|g| g.count).sum();
    let mut lines = vec![
        Line::from(vec![Span::styled(
            format!(
                "─ group {} of {} · {total} exceptions ",
                panel.selected + 1,
                panel.groups.len()
            ),
            theme.style(Meaning::Title),
        )]),
        Line::from(vec![
            label(theme, "next     "),
            Span::raw(esc(&g.next_step)),
        ]),
        Line::from(vec![
            label(theme, "count    "),
            Span::raw(format!(
                "{} · oldest {}, newest {}",
                g.count,
                format_age(TimeDelta::seconds(g.oldest_seconds)),
                format_age(TimeDelta::seconds(g.newest_seconds))
            )),
        ]),
        Line::from(vec![
            label(theme, "owner    "),
            Span::raw(g.owner.as_deref().map_or("nobody".into(), esc)),
        ]),
        Line::from(vec![label(theme, "reason   "), Span::raw(esc(&g.reason))]),
        Line::from(vec![
            label(theme, "Enter    "),
            Span::raw(format!("its items: {}", esc(&g.filter))),
        ]),
    ];
    lines.truncate(detail.height as usize);
    f.render_widget(Paragraph::new(lines).wrap(Wrap { trim: false }), detail);
}
