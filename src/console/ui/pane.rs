//! What both detail panes, an operation's and a run's, are made of: a label column and a history.

use ratatui::text::{Line, Span};

use crate::console::theme::{Meaning, Theme};
use crate::console::ui::cells::esc;

/// A detail line's label, in the muted column nine characters wide.
pub(super) fn label<'a>(theme: &Theme, s: &'static str) -> Span<'a> {
    Span::styled(format!("{s:<9}"), theme.style(Meaning::Muted))
}

/// A history, oldest first (an operation's, or a run's own).
pub(super) fn history_lines<'a>(
    history: &[crate::ledger::EventView],
    theme: &Theme,
    lines: &mut Vec<Line<'a>>,
) {
    for (i, e) in history.iter().enumerate() {
        let mut text = format!(
            "{} {} {}",
            e.at.format("%m-%d %H:%M"),
            esc(&e.actor),
            esc(&e.kind)
        );
        if let (Some(a), Some(b)) = (&e.from_state, &e.to_state)
            && a != b
        {
            text.push_str(&format!(" {a}→{b}"));
        }
        if let Some(note) = e
            .detail
            .get("text")
            .or_else(|| e.detail.get("note"))
            .and_then(|v| v.as_str())
        {
            text.push_str(&format!(": {}", esc(note)));
        }
        lines.push(Line::from(vec![
            if i == 0 {
                label(theme, "history")
            } else {
                Span::raw(" ".repeat(9))
            },
            Span::raw(text),
        ]));
    }
}
