//! Characters a terminal, a log line or a JSON document must never receive raw (manual: Redaction), and
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

/// `text` in at most `width` terminal columns, by display width (a CJK character takes two, a
/// combining mark none): cut with `…` when it is wider, padded with spaces to `width` when `pad`.
/// The text is shown as it is: escape it first.
pub fn fit_width(text: &str, width: usize, pad: bool) -> String {
    use unicode_width::UnicodeWidthStr;
    let wide = text.width();
    if wide <= width {
        return match pad {
            true => format!("{text}{}", " ".repeat(width - wide)),
            false => text.to_string(),
        };
    }
    let mut out = String::new();
    let mut used = 0;
    for c in text.chars() {
        let w = unicode_width::UnicodeWidthChar::width(c).unwrap_or(0);
        if used + w + 1 > width {
            break;
        }
        out.push(c);
        used += w;
    }
    if width > 0 {
        out.push('…');
        used += 1;
    }
    if pad && used < width {
        out.push_str(&" ".repeat(width - used));
    }
    out
}

#[cfg(test)]
mod width_tests {
    use super::fit_width;
    use unicode_width::UnicodeWidthStr;

    #[test]
    fn text_fits_its_columns_by_display_width() {
        assert_eq!(fit_width("crm", 6, true), "crm   ");
        assert_eq!(fit_width("crm", 6, false), "crm");
        assert_eq!(fit_width("onboarding", 6, true), "onboa…");
        // two columns a character: cut before one would straddle the edge, then padded
        assert_eq!(fit_width("数据同步服务", 6, true), "数据… ");
        assert_eq!(fit_width("数据", 4, true), "数据");
        for text in [
            "ü?\"",
            "数据同步服务",
            "e\u{301}e\u{301}",
            "日本語テキスト",
            "abc",
        ] {
            for width in 1..12 {
                assert_eq!(
                    fit_width(text, width, true).width(),
                    width,
                    "{text} in {width}"
                );
                assert!(
                    fit_width(text, width, false).width() <= width,
                    "{text} in {width}"
                );
            }
        }
    }
}
