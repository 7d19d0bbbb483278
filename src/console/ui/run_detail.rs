//! A run in the detail pane (manual: Runs): its safe next step, state and claim, its steps one line
//! each (`✓ create-customer  CUST-77`, `✗ create-task  unknown`, `○ welcome-sms  not recorded`),
//! and its own history; and the steps of an operation's run in the operation's pane.

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span, Text};
use ratatui::widgets::{Block, Borders, Paragraph, Wrap};

use crate::console::app::{App, Focus};
use crate::console::theme::SPINNER;
use crate::console::theme::{Meaning, Theme};
use crate::console::ui::cells::esc;
use crate::console::ui::pane::{history_lines, label};
use crate::domain::format_age;
use crate::domain::run::RunStep;
use crate::ledger::RunSummary;

pub(super) fn draw_run(f: &mut Frame, app: &App, theme: &Theme, area: Rect, r: &RunSummary) {
    let border = if app.focus == Focus::Detail {
        theme.style(Meaning::Accent)
    } else {
        theme.style(Meaning::Muted)
    };
    let block = Block::default()
        .borders(Borders::TOP)
        .title(format!(" run {} ", esc(&r.run)))
        .border_style(border);
    let view = app.stalled.view.as_ref().filter(|v| v.run == r.run);
    let next = view.map_or(&r.next_step, |v| &v.next_step);
    let mut lines = vec![Line::from(vec![
        label(theme, "next"),
        Span::styled(esc(next), theme.style(Meaning::Title)),
    ])];
    let state = view.map_or(r.state, |v| v.state);
    lines.push(Line::from(vec![
        label(theme, "state"),
        Span::styled(state.as_str().to_string(), theme.style(Meaning::Critical)),
        Span::raw(format!(
            " {} · workflow {}",
            format_age(app.now - view.map_or(r.since, |v| v.since)),
            esc(&r.workflow)
        )),
    ]));
    if let Some(by) = view.map_or(&r.claimed_by, |v| &v.claimed_by) {
        lines.push(Line::from(vec![label(theme, "claim"), Span::raw(esc(by))]));
    }
    match view {
        None => lines.push(Line::from(Span::styled(
            format!("{} loading…", SPINNER[app.spinner % 4]),
            theme.style(Meaning::Muted),
        ))),
        Some(v) => {
            step_lines(&v.steps, theme, &mut lines);
            history_lines(&v.history, theme, &mut lines);
        }
    }
    let last = (lines.len() as u16).saturating_sub(area.height.saturating_sub(1).max(1));
    let p = Paragraph::new(Text::from(lines))
        .block(block)
        .scroll((app.detail_scroll.min(last), 0))
        .wrap(Wrap { trim: false });
    f.render_widget(p, area);
}

/// A run's steps, one line each, in order.
pub(super) fn step_lines<'a>(steps: &[RunStep], theme: &Theme, lines: &mut Vec<Line<'a>>) {
    let width = steps
        .iter()
        .map(|s| s.step.chars().count())
        .max()
        .unwrap_or(0);
    for (i, s) in steps.iter().enumerate() {
        let style = match s.mark() {
            "✓" => theme.style(Meaning::Good),
            "✗" => theme.style(Meaning::Critical),
            _ => theme.style(Meaning::Muted),
        };
        lines.push(Line::from(vec![
            if i == 0 {
                label(theme, "steps")
            } else {
                Span::raw(" ".repeat(9))
            },
            Span::styled(format!("{} ", s.mark()), style),
            Span::raw(format!("{:<width$}  {}", esc(&s.step), esc(&s.shown()))),
        ]));
    }
}
