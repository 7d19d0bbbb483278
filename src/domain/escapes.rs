//! Characters a terminal, a log line or a JSON document must never receive raw (SPEC 8), and
//! stored text shown with them escaped.

use std::borrow::Cow;

/// Characters that must never reach a terminal, a log line or a JSON document raw: C0 and C1
/// controls and DEL, the bidi marks, embeddings, overrides and isolates that reorder text
/// (U+061C, U+200E-U+200F, U+202A-U+202E, U+2066-U+2069), zero-width characters that hide text
/// (U+200B-U+200D, U+2060-U+2064, U+FEFF) and the line and paragraph separators (U+2028,
/// U+2029) that some readers take for a new line.
pub fn is_hostile(c: char) -> bool {
    c.is_control()
        || matches!(
            c,
            '\u{061c}'
                | '\u{200b}'..='\u{200f}'
                | '\u{2028}'..='\u{202e}'
                | '\u{2060}'..='\u{2069}'
                | '\u{feff}'
        )
}

/// Shows control characters and terminal escape sequences as `\xNN` (or `\u{...}` for the Unicode
/// characters that reorder, hide or break text, see [`is_hostile`]), so stored text can never
/// drive the terminal.
pub fn escape_text(text: &str) -> Cow<'_, str> {
    if !text.chars().any(is_hostile) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        if !is_hostile(c) {
            out.push(c);
        } else if (c as u32) < 0x100 {
            out.push_str(&format!("\\x{:02x}", c as u32));
        } else {
            out.push_str(&format!("\\u{{{:x}}}", c as u32));
        }
    }
    Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_terminal_sequences() {
        assert_eq!(
            escape_text("\u{1b}]0;owned\u{7}x\u{1b}[2J"),
            "\\x1b]0;owned\\x07x\\x1b[2J"
        );
        assert_eq!(escape_text("line\nnext\u{202e}"), "line\\x0anext\\u{202e}");
        assert_eq!(
            escape_text("a\u{2028}b\u{2029}c\u{feff}d\u{61c}e\u{2060}f\u{9b}g\u{7f}"),
            "a\\u{2028}b\\u{2029}c\\u{feff}d\\u{61c}e\\u{2060}f\\x9bg\\x7f"
        );
        assert!(matches!(escape_text("plain é"), Cow::Borrowed(_)));
    }
}
