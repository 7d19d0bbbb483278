//! What taking an action back did, or (previewed) would do (manual: Taking an action back).

use chrono::{DateTime, Utc};
use serde::Serialize;

use crate::domain::format_age;

/// What taking an action back did (or, previewed, would do).
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct UndoReport {
    /// The action's id.
    pub action: String,
    /// What it was (its events' kind: `closed`, `claimed`, ...).
    pub was: String,
    /// Who took it.
    pub by: String,
    pub at: DateTime<Utc>,
    /// The keys taken back (previewed: to be taken back).
    pub taken_back: Vec<String>,
    /// The keys an earlier undo took back already.
    pub already: Vec<String>,
    /// The keys left as they are, each with why (who or what changed it since).
    pub refused: Vec<(String, String)>,
}

impl UndoReport {
    /// One line: what was taken back, of what.
    pub fn summary(&self, done: bool) -> String {
        let verb = if done {
            "taken back"
        } else {
            "can be taken back"
        };
        let mut line = format!(
            "{} ({} by {}, {} ago): {} of {} {verb}",
            self.action,
            self.was,
            self.by,
            format_age(Utc::now() - self.at),
            self.taken_back.len(),
            self.taken_back.len() + self.refused.len() + self.already.len(),
        );
        if (1..=3).contains(&self.taken_back.len()) {
            line.push_str(&format!(" ({})", self.taken_back.join(", ")));
        }
        if !self.already.is_empty() {
            line.push_str(&format!(", {} already", self.already.len()));
        }
        if !self.refused.is_empty() {
            let n = self.refused.len();
            let how = if n == 1 { "it is" } else { "they are" };
            line.push_str(&format!(", {n} left as {how}"));
        }
        line
    }
}
