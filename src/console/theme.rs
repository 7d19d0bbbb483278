//! Semantic colours, mapped once. `NO_COLOR` gives plain text (bold and reverse still mark things).

use ratatui::style::{Color, Modifier, Style};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Meaning {
    Normal,
    Muted,
    Accent,
    Good,
    Warning,
    Critical,
    Selected,
    Title,
    /// A row another writer just changed (briefly).
    Changed,
}

#[derive(Clone, Copy, Debug)]
pub struct Theme {
    pub color: bool,
}

impl Theme {
    pub fn from_env() -> Theme {
        Theme {
            color: std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty()),
        }
    }

    pub fn style(&self, m: Meaning) -> Style {
        let plain = Style::default();
        if !self.color {
            return match m {
                Meaning::Selected => plain.add_modifier(Modifier::REVERSED),
                Meaning::Changed => plain.add_modifier(Modifier::BOLD | Modifier::UNDERLINED),
                Meaning::Critical | Meaning::Title | Meaning::Accent => {
                    plain.add_modifier(Modifier::BOLD)
                }
                _ => plain,
            };
        }
        match m {
            Meaning::Normal => plain,
            Meaning::Muted => plain.fg(Color::DarkGray),
            Meaning::Accent => plain.fg(Color::Cyan),
            Meaning::Good => plain.fg(Color::Green),
            Meaning::Warning => plain.fg(Color::Yellow),
            Meaning::Critical => plain.fg(Color::Red).add_modifier(Modifier::BOLD),
            Meaning::Selected => plain.add_modifier(Modifier::REVERSED),
            Meaning::Title => plain.add_modifier(Modifier::BOLD),
            Meaning::Changed => plain.bg(Color::Blue).add_modifier(Modifier::BOLD),
        }
    }
}

/// The spinner's frames: something is being loaded.
pub(crate) const SPINNER: [&str; 4] = ["|", "/", "-", "\\"];
