//! View 6, the review after a release (manual: The review after a release), as a component of
//! its own: the review on screen, its window, the request awaited, what it covers and how far
//! its tables are scrolled; its keys and its answer. `ui/review.rs` draws it from this alone.

use ratatui::crossterm::event::KeyCode;

use super::messages::Effect;
use crate::ledger::{Review, ReviewScope};

/// The review's windows (`[` and `]`), in days; the second is the default.
pub const REVIEW_WINDOWS: [u64; 3] = [1, 7, 30];

pub struct ReviewView {
    /// The last review answered, kept on screen while the next loads.
    pub shown: Option<Box<Review>>,
    /// Its window: an index into [`REVIEW_WINDOWS`].
    pub window: usize,
    /// The request whose answer is awaited (`None`: none).
    pub seq: Option<u64>,
    /// What the last review asked for covers (the filter's workflow or destination), read once
    /// when it is asked, not at every frame.
    pub of: ReviewScope,
    /// How many rows the tables are scrolled (`j`/`k`).
    pub scroll: usize,
}

impl Default for ReviewView {
    fn default() -> ReviewView {
        ReviewView {
            shown: None,
            window: 1,
            seq: None,
            of: ReviewScope::default(),
            scroll: 0,
        }
    }
}

/// What a key of view 6 did.
pub enum ReviewKey {
    /// Nothing more to do (the tables scrolled).
    Done,
    /// The window changed: the review is asked again.
    AskAgain,
}

impl ReviewView {
    /// The request for the review of `scope` in the current window, numbered `seq`.
    pub fn ask(&mut self, seq: u64, scope: ReviewScope) -> Effect {
        self.seq = Some(seq);
        self.of = scope;
        Effect::Review {
            seq,
            days: REVIEW_WINDOWS[self.window],
            scope: self.of.clone(),
        }
    }

    /// A key while view 6 shows: `j`/`k` scroll the tables (manual: The review after a release:
    /// at 80x24 they may hold more than fits), `[` and `]` go round the windows. `None`: not its
    /// key.
    pub fn on_key(&mut self, code: KeyCode) -> Option<ReviewKey> {
        match code {
            KeyCode::Char('j') | KeyCode::Down => {
                let longest = self
                    .shown
                    .as_ref()
                    .map_or(0, |r| r.by_workflow.len().max(r.by_destination.len()));
                self.scroll = (self.scroll + 1).min(longest.saturating_sub(1));
                Some(ReviewKey::Done)
            }
            KeyCode::Char('k') | KeyCode::Up => {
                self.scroll = self.scroll.saturating_sub(1);
                Some(ReviewKey::Done)
            }
            KeyCode::Char(c @ ('[' | ']')) => {
                // round and round: each press changes the window
                let n = REVIEW_WINDOWS.len();
                self.window = if c == '[' {
                    (self.window + n - 1) % n
                } else {
                    (self.window + 1) % n
                };
                Some(ReviewKey::AskAgain)
            }
            _ => None,
        }
    }

    /// The answer to request `seq`: `None` where it is not the one awaited; else whether it came
    /// (the review is shown) or what went wrong.
    pub fn on_answer(
        &mut self,
        seq: u64,
        review: Result<Box<Review>, String>,
    ) -> Option<Result<(), String>> {
        if self.seq != Some(seq) {
            return None;
        }
        self.seq = None;
        Some(review.map(|r| self.shown = Some(r)))
    }
}
