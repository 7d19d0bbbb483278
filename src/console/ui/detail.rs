//! The detail pane: what a person acts on first, then the attempts, payload and history.

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span, Text};
use ratatui::widgets::{Block, Borders, Paragraph, Wrap};

use crate::console::app::{App, Focus, View};
use crate::console::theme::SPINNER;
use crate::console::theme::{Meaning, Theme};
use crate::console::ui::cells::{esc, state_style};
use crate::console::ui::pane::{history_lines, label};
use crate::console::ui::run_detail::{draw_run, step_lines};
use crate::ledger::OperationView;

pub(super) fn draw_detail(f: &mut Frame, app: &App, theme: &Theme, area: Rect) {
    if let Some(r) = app.selected_run() {
        return draw_run(f, app, theme, area, r);
    }
    // a list's selected row, or the operation Activity opened
    let subject = match app.view {
        View::Activity => app.detail.as_ref().map(|d| &d.op),
        _ => app.selected_row(),
    };
    let title = match subject {
        Some(v) => format!(" {} ", esc(&v.key)),
        None => String::new(),
    };
    let border = if app.focus == Focus::Detail {
        theme.style(Meaning::Accent)
    } else {
        theme.style(Meaning::Muted)
    };
    let block = Block::default()
        .borders(Borders::TOP)
        .title(title)
        .border_style(border);
    let Some(row) = subject else {
        f.render_widget(block, area);
        return;
    };
    let mut lines = summary_lines(app, theme, row);
    match app.detail.as_ref().filter(|d| d.op.key == row.key) {
        None => lines.push(Line::from(Span::styled(
            format!("{} loading…", SPINNER[app.spinner % 4]),
            theme.style(Meaning::Muted),
        ))),
        Some(d) => loaded_lines(d, theme, &mut lines),
    }
    // scrolling stops at the end: the last lines stay in view, never a blank pane
    let last = (lines.len() as u16).saturating_sub(area.height.saturating_sub(1).max(1));
    let p = Paragraph::new(Text::from(lines))
        .block(block)
        .scroll((app.detail_scroll.min(last), 0))
        .wrap(Wrap { trim: false });
    f.render_widget(p, area);
}

/// What a person acts on first (manual: The console): the next step, a reveal, the state, the claim, the
/// error, the resolution, the reference.
pub(super) fn summary_lines<'a>(app: &App, theme: &Theme, row: &OperationView) -> Vec<Line<'a>> {
    let mut lines: Vec<Line> = Vec::new();
    // the detail's next step names what to search the destination by (when it is loaded)
    let next = app
        .detail
        .as_ref()
        .filter(|d| d.op.key == row.key)
        .map_or(&row.next_step, |d| &d.op.next_step);
    lines.push(Line::from(vec![
        label(theme, "next"),
        Span::styled(esc(next), theme.style(Meaning::Title)),
    ]));
    // a lead's reveal: on this pane only, until it closes (manual: Redaction)
    if let Some((key, path, value)) = &app.revealed
        && *key == row.key
    {
        lines.push(Line::from(vec![
            label(theme, "revealed"),
            Span::styled(
                format!("{} = {}", esc(path), esc(value)),
                theme.style(Meaning::Warning),
            ),
            Span::styled(
                "  (this pane only; the reveal is in the history)",
                theme.style(Meaning::Muted),
            ),
        ]));
    }
    let mut state = vec![
        label(theme, "state"),
        Span::styled(
            row.state.as_str().to_string(),
            state_style(theme, row.state),
        ),
    ];
    if let Some(r) = &row.reason {
        state.push(Span::raw(format!(" ({})", esc(r))));
    }
    state.push(Span::raw(format!(
        " · {}/{} → {} {}",
        esc(&row.workflow),
        esc(&row.step),
        esc(&row.destination),
        esc(&row.action)
    )));
    lines.push(Line::from(state));
    if let Some(team) = &row.owner {
        lines.push(Line::from(vec![
            label(theme, "owner"),
            Span::raw(esc(team)),
        ]));
    }
    if let Some(by) = &row.claimed_by {
        let until = row
            .claim_expires_at
            .map(|t| t.format("%H:%M UTC").to_string())
            .unwrap_or_default();
        lines.push(Line::from(vec![
            label(theme, "claim"),
            Span::raw(format!("{} until {until}", esc(by))),
        ]));
    }
    // The console: what a person acts on first: the error, the claim, the latest notes, the
    // resolution; then the attempts, the payload and the history
    if let Some(e) = row
        .last_error
        .as_ref()
        .filter(|e| row.reason.as_ref() != Some(*e))
    {
        lines.push(Line::from(vec![label(theme, "error"), Span::raw(esc(e))]));
    }
    match (&row.resolution, &row.superseded_by) {
        (Some(_), Some(k)) => lines.push(Line::from(vec![
            label(theme, "closed"),
            Span::raw(format!("superseded by {}", esc(k))),
        ])),
        (Some(r), None) => lines.push(Line::from(vec![
            label(theme, "closed"),
            Span::raw(r.as_str().replace('_', " ")),
        ])),
        _ => {}
    }
    if let Some(r) = &row.reference {
        lines.push(Line::from(vec![label(theme, "ref"), Span::raw(esc(r))]));
    }
    if let Some(k) = &row.corrects {
        lines.push(Line::from(vec![
            label(theme, "corrects"),
            Span::raw(esc(k)),
        ]));
    }
    lines
}

/// What the loaded detail adds: the latest notes, the attempts, the payload, the history.
pub(super) fn loaded_lines<'a>(
    d: &crate::ledger::OperationDetail,
    theme: &Theme,
    lines: &mut Vec<Line<'a>>,
) {
    lines.extend(lineage(d, theme));
    // the run it belongs to, its steps in order (manual: Runs)
    if let Some(run) = &d.op.run {
        lines.push(Line::from(vec![label(theme, "run"), Span::raw(esc(run))]));
        step_lines(&d.run_steps, theme, lines);
    }
    let notes: Vec<String> = d
        .history
        .iter()
        .rev()
        .filter(|e| e.kind == "note")
        .filter_map(|e| {
            let text = e.detail.get("text")?.as_str()?;
            Some(format!(
                "{} {}: {}",
                e.at.format("%m-%d %H:%M"),
                esc(&e.actor),
                esc(text)
            ))
        })
        .take(2)
        .collect();
    for (i, n) in notes.into_iter().enumerate() {
        lines.push(Line::from(vec![
            if i == 0 {
                label(theme, "notes")
            } else {
                Span::raw(" ".repeat(9))
            },
            Span::raw(n),
        ]));
    }
    if d.attempt_log.is_empty() {
        lines.push(Line::from(vec![
            label(theme, "attempts"),
            Span::raw("none yet"),
        ]));
    }
    for (i, a) in d.attempt_log.iter().enumerate() {
        let mut text = format!(
            "#{} {} {}",
            a.n,
            a.started_at.format("%m-%d %H:%M"),
            a.outcome.map_or("in flight", |o| o.as_str())
        );
        text.push_str(&esc(&a.answer_said()));
        lines.push(Line::from(vec![
            if i == 0 {
                label(theme, "attempts")
            } else {
                Span::raw(" ".repeat(9))
            },
            Span::raw(text),
        ]));
    }
    let payload = serde_json::to_string_pretty(&d.payload).unwrap_or_default();
    for (i, l) in payload.lines().enumerate() {
        lines.push(Line::from(vec![
            if i == 0 {
                label(theme, "payload")
            } else {
                Span::raw(" ".repeat(9))
            },
            Span::raw(esc(l)),
        ]));
    }
    if let Some(p) = &d.conflicting_payload {
        lines.push(Line::from(vec![
            label(theme, "changed"),
            Span::styled(esc(&p.to_string()), theme.style(Meaning::Warning)),
        ]));
    }
    history_lines(&d.history, theme, lines);
}

/// The end of its chain of corrections, which answers for it (manual: Correcting a request).
fn lineage<'a>(d: &crate::ledger::OperationDetail, theme: &Theme) -> Option<Line<'a>> {
    let e = d.corrected_as.as_ref()?;
    let reference = e
        .reference
        .as_deref()
        .map(|r| format!(", ref {}", esc(r)))
        .unwrap_or_default();
    Some(Line::from(vec![
        label(theme, "corrected"),
        Span::styled(
            format!(" as {} ({}{reference})", esc(&e.key), e.state),
            state_style(theme, e.state),
        ),
    ]))
}
