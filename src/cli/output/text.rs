//! What every printer shares: stored text escaped for the terminal.

use std::borrow::Cow;

use crate::domain::escape_text;

/// Stored text as it may be printed: control characters, escape sequences, bidi and zero-width
/// characters shown escaped, never sent to the terminal.
pub fn esc(text: &str) -> Cow<'_, str> {
    escape_text(text)
}
