//! `U`'s preview (manual: Taking an action back), on one screen: the action, what will be taken
//! back, and what will be left as it is, each with who or what changed it since.

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Clear, Paragraph};

use crate::console::app::{App, Mode};
use crate::console::theme::{Meaning, Theme};
use crate::console::ui::cells::{centered, esc};

pub(super) fn draw_undo(f: &mut Frame, app: &App, theme: &Theme, area: Rect) {
    let Mode::Undo(r) = &app.mode else { return };
    let width = 76.min(area.width);
    let inner = usize::from(width.saturating_sub(2));
    let fit = |text: String| -> String {
        let text = esc(&text);
        match text.chars().count() > inner {
            true => text
                .chars()
                .take(inner.saturating_sub(1))
                .chain(['…'])
                .collect(),
            false => text,
        }
    };
    let mut lines = vec![
        Line::from(Span::styled(
            fit(format!("Take back {}", r.action)),
            theme.style(Meaning::Title),
        )),
        Line::from(fit(format!(
            "{} by {}, {} ago",
            r.was,
            r.by,
            crate::domain::format_age(app.now - r.at)
        ))),
        Line::from(fit(format!(
            "{} will be taken back: {}",
            r.taken_back.len(),
            r.taken_back.join(", ")
        ))),
    ];
    if !r.already.is_empty() {
        lines.push(Line::from(fit(format!(
            "{} taken back already",
            r.already.len()
        ))));
    }
    // the rest of the screen for what is left, with room for its heading and the keys
    let room = usize::from(area.height.saturating_sub(4)).saturating_sub(lines.len() + 2);
    if !r.refused.is_empty() {
        lines.push(Line::from(Span::styled(
            match r.refused.len() {
                1 => "1 will be left as it is:".to_string(),
                n => format!("{n} will be left as they are:"),
            },
            theme.style(Meaning::Warning),
        )));
        let shown = match r.refused.len() > room {
            true => room.saturating_sub(1),
            false => r.refused.len(),
        };
        for (_, why) in r.refused.iter().take(shown) {
            lines.push(Line::from(fit(format!("  {why}"))));
        }
        if shown < r.refused.len() {
            lines.push(Line::from(Span::styled(
                format!(
                    "  … and {} more (settle undo --dry-run lists all)",
                    r.refused.len() - shown
                ),
                theme.style(Meaning::Muted),
            )));
        }
    }
    lines.push(Line::from(Span::styled(
        "y/Enter takes it back · n/Esc leaves it",
        theme.style(Meaning::Accent),
    )));
    let box_area = centered(area, width, lines.len() as u16 + 2);
    f.render_widget(Clear, box_area);
    f.render_widget(
        Paragraph::new(lines).block(Block::default().borders(Borders::ALL)),
        box_area,
    );
}
