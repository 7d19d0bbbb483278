//! The status line as a component: what just happened, said once, cleared after a while (a
//! result after 8 s, a refusal after 20 s; manual: The console).

use chrono::{DateTime, TimeDelta, Utc};

#[derive(Default)]
pub struct Status {
    /// The text, and whether it is a refusal or an error.
    pub line: Option<(String, bool)>,
    /// When it was set.
    at: Option<DateTime<Utc>>,
}

impl Status {
    /// Says `text` from `now` on; `error`: a refusal, kept longer and shown as one.
    pub fn set(&mut self, text: impl Into<String>, error: bool, now: DateTime<Utc>) {
        self.line = Some((text.into(), error));
        self.at = Some(now);
    }

    /// Clears a line that has been shown long enough by `now`.
    pub fn expire(&mut self, now: DateTime<Utc>) {
        let keep = match &self.line {
            Some((_, true)) => TimeDelta::seconds(20),
            Some((_, false)) => TimeDelta::seconds(8),
            None => return,
        };
        if self.at.is_some_and(|at| now - at > keep) {
            self.line = None;
            self.at = None;
        }
    }
}
