//! JSON text that is safe to show on a terminal (manual: The command line): every character a terminal would act
//! on, escaped. The command line's `--json` and the HTTP API's answers are written with it.

use serde::Serialize;
use std::io::Write;

use super::patterns::is_hostile;

/// serde_json's formatting, with every character of [`is_hostile`] written as `\uXXXX` as well:
/// serde_json escapes the C0 controls but leaves C1 controls, DEL, bidi overrides, zero-width
/// characters and U+2028/U+2029 as they are, and a terminal showing `--json` would act on them
/// (manual: The command line). The layout is the inner formatter's.
struct Safe<F>(F);

impl<F: serde_json::ser::Formatter> serde_json::ser::Formatter for Safe<F> {
    fn write_string_fragment<W: ?Sized + Write>(
        &mut self,
        w: &mut W,
        fragment: &str,
    ) -> std::io::Result<()> {
        let mut start = 0;
        for (i, c) in fragment.char_indices() {
            if is_hostile(c) {
                w.write_all(&fragment.as_bytes()[start..i])?;
                write!(w, "\\u{:04x}", c as u32)?;
                start = i + c.len_utf8();
            }
        }
        w.write_all(&fragment.as_bytes()[start..])
    }
    fn begin_array<W: ?Sized + Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        self.0.begin_array(w)
    }
    fn end_array<W: ?Sized + Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        self.0.end_array(w)
    }
    fn begin_array_value<W: ?Sized + Write>(
        &mut self,
        w: &mut W,
        first: bool,
    ) -> std::io::Result<()> {
        self.0.begin_array_value(w, first)
    }
    fn end_array_value<W: ?Sized + Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        self.0.end_array_value(w)
    }
    fn begin_object<W: ?Sized + Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        self.0.begin_object(w)
    }
    fn end_object<W: ?Sized + Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        self.0.end_object(w)
    }
    fn begin_object_key<W: ?Sized + Write>(
        &mut self,
        w: &mut W,
        first: bool,
    ) -> std::io::Result<()> {
        self.0.begin_object_key(w, first)
    }
    fn end_object_key<W: ?Sized + Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        self.0.end_object_key(w)
    }
    fn begin_object_value<W: ?Sized + Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        self.0.begin_object_value(w)
    }
    fn end_object_value<W: ?Sized + Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        self.0.end_object_value(w)
    }
}

/// A value as JSON text that is safe to show on a terminal: pretty (indented) or on one line.
pub fn to_json<T: Serialize>(
    value: &T,
    pretty: bool,
) -> std::result::Result<String, serde_json::Error> {
    let mut out = Vec::with_capacity(256);
    if pretty {
        let mut ser = serde_json::Serializer::with_formatter(
            &mut out,
            Safe(serde_json::ser::PrettyFormatter::new()),
        );
        value.serialize(&mut ser)?;
    } else {
        let mut ser = serde_json::Serializer::with_formatter(
            &mut out,
            Safe(serde_json::ser::CompactFormatter),
        );
        value.serialize(&mut ser)?;
    }
    // serde_json writes UTF-8, and the escapes above are ASCII
    Ok(String::from_utf8(out).unwrap_or_default())
}
