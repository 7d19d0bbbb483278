//! The status line (with a bulk run's progress), the footer's keys and the help.

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Clear, Paragraph, Wrap};

use crate::console::app::{App, Mode, View};
use crate::console::keymap::KEYMAP;
use crate::console::theme::{Meaning, Theme};
use crate::console::ui::cells::{centered, esc};

/// A bulk action's progress as text (readable without colour): `[████░░░░] 45 of 180 ...`.
pub(super) fn progress(b: &crate::console::app::BulkRun, width: usize) -> String {
    let tail = format!(" {} of {} · {} · Esc stops", b.done, b.total, b.verb);
    let bar = width.saturating_sub(tail.chars().count() + 4).clamp(4, 40);
    let filled = (bar * b.done).checked_div(b.total).unwrap_or(0).min(bar);
    format!(
        " [{}{}]{tail}",
        "█".repeat(filled),
        "░".repeat(bar - filled)
    )
}

pub(super) fn draw_status(f: &mut Frame, app: &App, theme: &Theme, area: Rect) {
    if let Some(b) = &app.bulk {
        let text = progress(b, area.width as usize);
        f.render_widget(
            Paragraph::new(text).style(theme.style(Meaning::Accent)),
            area,
        );
        return;
    }
    let line = match (&app.mode, &app.status.line) {
        (Mode::Filter, _) => {
            // a term not whole yet (or wrong) is said; the list narrows by the others
            let problem = if app.view == View::Activity {
                crate::domain::activity_filter::ActivityFilter::lenient(app.filter.value(), false).1
            } else {
                crate::domain::filter::Filter::lenient(app.filter.value()).1
            };
            let terms = if app.view == View::Activity {
                "▏  Enter keeps · Esc clears · actor:NAME kind:KIND words"
            } else {
                "▏  Enter keeps · Esc clears · state: wf: dest: claimed: age> key: owner:"
            };
            let hint = match problem {
                Some(why) => {
                    Span::styled(format!("▏  {}", esc(&why)), theme.style(Meaning::Warning))
                }
                None => Span::styled(terms, theme.style(Meaning::Muted)),
            };
            Line::from(vec![
                Span::styled(" / ", theme.style(Meaning::Accent)),
                Span::raw(esc(app.filter.value())),
                hint,
            ])
        }
        (_, Some((text, error))) => Span::styled(
            format!(" {}", esc(text)),
            theme.style(if *error {
                Meaning::Critical
            } else {
                Meaning::Good
            }),
        )
        .into(),
        _ if !app.filter.value().is_empty() => Span::styled(
            format!(" filter: {} (Esc clears)", esc(app.filter.value())),
            theme.style(Meaning::Accent),
        )
        .into(),
        _ => Line::default(),
    };
    let line = Paragraph::new(line);
    // wrapped only where it was given the room (see `draw`)
    let line = if area.height > 1 {
        line.wrap(Wrap { trim: false })
    } else {
        line
    };
    f.render_widget(line, area);
}

/// Why a retry of the selected item would not be sent now: its destination's breaker is open.
fn held_retry(app: &App) -> Option<String> {
    let row = app.selected_row()?;
    let stats = app.header.stats.as_ref()?;
    (stats.breakers.iter())
        .find(|b| b.destination == row.destination && b.is_down())
        .map(|b| {
            format!(
                "held: {} down",
                crate::console::ui::cells::esc(&b.destination)
            )
        })
}

pub(super) fn draw_footer(f: &mut Frame, app: &App, theme: &Theme, area: Rect) {
    // The keys that apply now, in the keymap's order, as many as fit; `? help` and `q quit`
    // always keep their place at the end.
    // a retry there would wait for the destination's breaker: the footer says so
    let held = held_retry(app);
    let item = |b: &crate::console::keymap::Binding| {
        let label = match (&held, b.keys) {
            (Some(why), "R") => format!("{} ({why})", b.label),
            _ => b.label.to_string(),
        };
        let width = b.keys.chars().count() + label.chars().count() + 3;
        (b.keys, label, width)
    };
    let applicable: Vec<_> = KEYMAP
        .iter()
        .filter(|b| b.footer && app.applies(b))
        .collect();
    let tail: Vec<_> = applicable
        .iter()
        .filter(|b| matches!(b.keys, "?" | "q"))
        .map(|b| item(b))
        .collect();
    let mut room =
        (area.width as usize).saturating_sub(1 + tail.iter().map(|t| t.2).sum::<usize>());
    let mut shown = Vec::new();
    for b in applicable.iter().filter(|b| !matches!(b.keys, "?" | "q")) {
        let it = item(b);
        if it.2 <= room {
            room -= it.2;
            shown.push(it);
        }
    }
    shown.extend(tail);
    let mut spans = vec![Span::raw(" ")];
    for (keys, label, _) in shown {
        spans.push(Span::styled(keys, theme.style(Meaning::Accent)));
        spans.push(Span::raw(format!(" {label}  ")));
    }
    f.render_widget(Paragraph::new(Line::from(spans)), area);
}

pub(super) fn draw_help(f: &mut Frame, app: &App, theme: &Theme, area: Rect) {
    let mut lines = Vec::new();
    for b in KEYMAP.iter().filter(|b| app.in_view(b)) {
        let applies = app.applies(b);
        let style = if applies {
            theme.style(Meaning::Normal)
        } else {
            theme.style(Meaning::Muted)
        };
        lines.push(Line::from(vec![
            Span::styled(format!("{:<12}", b.keys), theme.style(Meaning::Accent)),
            Span::styled(b.help, style),
        ]));
    }
    let last = if app.role.acts() {
        "every action asks first (y/Enter) · any key closes this help"
    } else {
        "a viewer reads, and acts on nothing · any key closes this help"
    };
    // no bottom border: every row of 24 but the title's is a key's
    let r = centered(area, 76, lines.len() as u16 + 1);
    f.render_widget(Clear, r);
    f.render_widget(
        Paragraph::new(lines).block(
            Block::default()
                .borders(Borders::TOP | Borders::LEFT | Borders::RIGHT)
                .title(vec![
                    Span::styled(" keys ", theme.style(Meaning::Title)),
                    Span::styled(format!("· {last} "), theme.style(Meaning::Muted)),
                ]),
        ),
        r,
    );
}
