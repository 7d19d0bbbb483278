//! A staff action's form: its title, what it holds so far, the step, a bulk preview.

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Clear, Paragraph, Wrap};

use crate::console::app::{App, FormStep, Mode};
use crate::console::theme::SPINNER;
use crate::console::theme::{Meaning, Theme};
use crate::console::ui::cells::{centered, esc};

/// A bulk preview, grouped (manual: Many at once): what will be done, then what is left alone and why.
pub(super) fn preview_lines<'a>(
    p: &crate::ledger::BulkPreview,
    verb: &str,
    theme: &Theme,
) -> Vec<Line<'a>> {
    let mut lines = vec![Line::from(Span::styled(
        format!("{verb} {}: {} will be done", p.matched, p.eligible.len()),
        theme.style(Meaning::Good),
    ))];
    if !p.refused.is_empty() {
        lines.push(Line::from("left alone:"));
    }
    for (why, keys) in &p.refused {
        lines.push(Line::from(Span::styled(
            format!("  {} {}", keys.len(), esc(why)),
            theme.style(Meaning::Warning),
        )));
    }
    lines
}

/// What a lookup answered, for its confirmation: one item's answer and what confirming does, or
/// marked items' answers in a tally (manual: Many at once).
pub(super) fn answer_lines<'a>(form: &crate::console::app::Form, theme: &Theme) -> Vec<Line<'a>> {
    use crate::domain::LookupAnswer;
    match form.answers.as_slice() {
        [] => Vec::new(),
        [(_, dest, answer)] if form.bulk.is_none() => {
            let does = match answer {
                LookupAnswer::Found { reference, .. } => {
                    format!("reconcile as found, reference {}?", esc(reference))
                }
                _ => "reconcile as absent (confirmed not done)?".to_string(),
            };
            vec![
                Line::from(Span::styled(
                    esc(&answer.describe(dest)),
                    theme.style(Meaning::Good),
                )),
                Line::from(does),
            ]
        }
        answers => vec![Line::from(format!(
            "looked up {}: {}",
            answers.len(),
            crate::console::app::lookup::tally(answers)
        ))],
    }
}

pub(super) fn draw_form(f: &mut Frame, app: &App, theme: &Theme, area: Rect) {
    let Mode::Form(form) = &app.mode else { return };
    let verb = form_verb(form);
    let mut lines = vec![Line::from(Span::styled(
        format!("{verb} {}", esc(&form.target)),
        theme.style(Meaning::Title),
    ))];
    if let Some(summary) = form_summary(form) {
        lines.push(Line::from(summary));
    }
    lines.extend(
        crate::console::app::correction_summary(form)
            .iter()
            .map(|l| Line::from(esc(l))),
    );
    match &form.step {
        FormStep::Choose(options) => {
            for (k, meaning) in options {
                lines.push(Line::from(vec![
                    Span::styled(format!("  {k} "), theme.style(Meaning::Accent)),
                    Span::raw(esc(meaning)),
                ]));
            }
            lines.push(Line::from(Span::styled(
                "Esc cancels",
                theme.style(Meaning::Muted),
            )));
        }
        FormStep::Text { label, .. } => lines.extend(text_lines(form, label, theme)),
        FormStep::Checking => {
            lines.extend(answer_lines(form, theme));
            lines.push(Line::from(Span::styled(
                format!("{} checking every item…", SPINNER[app.spinner % 4]),
                theme.style(Meaning::Muted),
            )));
        }
        FormStep::LookingUp => {
            lines.push(Line::from(Span::styled(
                format!("{} asking its destination…", SPINNER[app.spinner % 4]),
                theme.style(Meaning::Muted),
            )));
            lines.push(Line::from(Span::styled(
                "Esc cancels",
                theme.style(Meaning::Muted),
            )));
        }
        FormStep::Confirm => {
            lines.extend(answer_lines(form, theme));
            if let Some(p) = &form.preview {
                let verb = match form.kind {
                    crate::console::app::ActionKind::LookUp if !form.answers.is_empty() => {
                        "reconcile"
                    }
                    _ => form.kind.verb(),
                };
                lines.extend(preview_lines(p, verb, theme));
                if let Some(pace) = form.pace {
                    let what = match form.kind {
                        crate::console::app::ActionKind::LookUp => "lookups",
                        _ => "next attempts",
                    };
                    lines.push(Line::from(format!(
                        "paced: {what} {} ms apart",
                        pace.as_millis()
                    )));
                }
            }
            lines.push(Line::from(Span::styled(
                "y/Enter confirms · n/Esc cancels",
                theme.style(Meaning::Accent),
            )));
        }
    }
    if let Some(h) = &form.hint {
        lines.push(Line::from(Span::styled(
            esc(h),
            theme.style(Meaning::Warning),
        )));
    }
    let r = centered(area, 70, lines.len() as u16 + 2);
    f.render_widget(Clear, r);
    f.render_widget(
        Paragraph::new(lines)
            .wrap(Wrap { trim: false })
            .block(Block::default().borders(Borders::ALL)),
        r,
    );
}

/// A text being typed (a redacted field's new value unseen, as dots) and how to go on.
fn text_lines<'a>(form: &crate::console::app::Form, label: &str, theme: &Theme) -> [Line<'a>; 2] {
    let typed = if form.secret {
        "•".repeat(form.input.value().chars().count())
    } else {
        esc(form.input.value())
    };
    [
        Line::from(vec![
            Span::styled(format!("{label}: "), theme.style(Meaning::Muted)),
            Span::raw(typed),
            Span::raw("▏"),
        ]),
        Line::from(Span::styled(
            "Enter continues · Esc cancels",
            theme.style(Meaning::Muted),
        )),
    ]
}

/// What the form's title says it does.
pub(super) fn form_verb(form: &crate::console::app::Form) -> &'static str {
    match form.kind {
        crate::console::app::ActionKind::Close if form.run => "Close run",
        crate::console::app::ActionKind::Note if form.run => "Note on run",
        crate::console::app::ActionKind::Claim => "Claim",
        crate::console::app::ActionKind::TakeOver => "Take over",
        crate::console::app::ActionKind::Release => "Release",
        crate::console::app::ActionKind::Reconcile => "Reconcile",
        crate::console::app::ActionKind::Retry => "Retry",
        crate::console::app::ActionKind::Close => "Close",
        crate::console::app::ActionKind::Note => "Note on",
        crate::console::app::ActionKind::Pause | crate::console::app::ActionKind::Resume => {
            match form.pausing {
                None => "Pause or resume, for",
                Some(crate::ledger::Pausable::Workflow)
                    if form.kind == crate::console::app::ActionKind::Pause =>
                {
                    "Pause workflow"
                }
                Some(crate::ledger::Pausable::Workflow) => "Resume workflow",
                Some(_) if form.kind == crate::console::app::ActionKind::Pause => {
                    "Pause destination"
                }
                Some(_) => "Resume destination",
            }
        }
        crate::console::app::ActionKind::Reveal => "Reveal a field of",
        crate::console::app::ActionKind::LookUp => "Look up",
        crate::console::app::ActionKind::Correct => "Correct",
    }
}

/// What the form holds so far, on one line (`None` before anything is chosen).
pub(super) fn form_summary(form: &crate::console::app::Form) -> Option<String> {
    let mut summary = Vec::new();
    if let Some(found) = form.found {
        summary.push(if found {
            "found".to_string()
        } else {
            "absent (confirmed not done)".to_string()
        });
    }
    if let Some(r) = form.resolution {
        summary.push(format!("resolution: {}", r.as_str().replace('_', " ")));
    }
    if let Some(r) = &form.reference {
        summary.push(format!("reference {}", esc(r)));
    }
    if let Some(k) = &form.new_key {
        summary.push(format!("superseded by {}", esc(k)));
    }
    if let Some(t) = &form.text {
        summary.push(format!("\"{}\"", esc(t)));
    }
    (!summary.is_empty()).then(|| summary.join(" · "))
}
