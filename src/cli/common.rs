//! What the commands share: clean messages, the operator, durations, rates and payloads.

use std::time::Duration;

use crate::error::{Error, Result};

/// A message fit for stderr and the log: no sensitive value (a rejected argument may hold one), no
/// control or escape sequence.
pub(crate) fn clean(text: &str) -> String {
    crate::domain::escape_text(&crate::domain::redact::redact_text(text)).into_owned()
}

/// clap's error as one line: its first paragraph (which names what is missing or wrong), without
/// the usage that follows.
pub(crate) fn usage_error(e: &clap::Error) -> String {
    let text = e.to_string();
    let first: Vec<&str> = text
        .lines()
        .take_while(|l| !l.trim().is_empty())
        .map(str::trim)
        .collect();
    let line = first.join(" ");
    let line = line.trim_start_matches("error: ");
    if line.is_empty() {
        "bad usage".into()
    } else {
        line.to_string()
    }
}

pub(crate) fn invalid(text: String) -> Error {
    Error::Invalid(text)
}

pub(crate) fn required(operator: &Option<String>) -> Result<&str> {
    operator.as_deref().ok_or_else(|| {
        invalid("this command records who acted: pass --as NAME or set SETTLE_OPERATOR".into())
    })
}

/// A duration argument, within the range its use makes sense of.
pub(crate) fn duration_arg(
    flag: &str,
    text: &str,
    min: Duration,
    max: Duration,
) -> Result<Duration> {
    crate::domain::time::parse_duration_within(text, min, max)
        .map_err(|e| invalid(format!("{flag}: {e}")))
}

/// `--rate N/s` (or `N`): the time between two items, for N from 0.001 to 10,000 a second.
pub(crate) fn parse_rate(text: &str) -> Result<Duration> {
    let n = text.strip_suffix("/s").unwrap_or(text).trim();
    match n.parse::<f64>() {
        Ok(r) if (0.001..=10_000.0).contains(&r) => Ok(Duration::from_secs_f64(1.0 / r)),
        _ => Err(invalid(format!(
            "--rate '{}': write items a second, e.g. 10/s (from 0.001 to 10000)",
            crate::domain::escape_text(text)
        ))),
    }
}

/// `--payload`'s text: as given, or read from `@FILE` or `-` (stdin). A file or input much larger
/// than any payload within `limit` could be is refused before it is read whole.
pub(crate) fn payload_text(arg: &str, limit: usize) -> Result<std::borrow::Cow<'_, str>> {
    use std::io::Read as _;
    // whitespace and escapes may make the text larger than the payload it holds
    let most = limit.saturating_mul(4) + 64 * 1024;
    let too_big = |bytes: usize| {
        invalid(format!(
            "--payload: the input is {}; a payload may be at most {} (max_payload)",
            crate::domain::payload::size_text(bytes),
            crate::domain::payload::size_text(limit)
        ))
    };
    let (reader, what): (Box<dyn std::io::Read>, String) = if arg == "-" {
        (Box::new(std::io::stdin()), "stdin".into())
    } else if let Some(path) = arg.strip_prefix('@') {
        let file = std::fs::File::open(path)
            .map_err(|e| invalid(format!("--payload: cannot read {path}: {e}")))?;
        (Box::new(file), path.to_string())
    } else {
        return Ok(std::borrow::Cow::Borrowed(arg));
    };
    let mut bytes = Vec::new();
    reader
        .take(most as u64 + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| invalid(format!("--payload: cannot read {what}: {e}")))?;
    if bytes.len() > most {
        return Err(too_big(bytes.len()));
    }
    String::from_utf8(bytes)
        .map(std::borrow::Cow::Owned)
        .map_err(|_| invalid(format!("--payload: {what} is not UTF-8")))
}

/// A filter naming states, or whose claims (`claimed:me`, a name, `any`), looks beyond the
/// exceptions: a claim on a `retry_wait` or `pending` item holds automation off it as much as one
/// on an exception, so `release --where claimed:me` at the end of a shift must find it.
pub(crate) fn looks_past_exceptions(query: &crate::domain::filter::Filter) -> bool {
    use crate::domain::filter::{Claimed, Match};
    query.terms.iter().any(|t| {
        !t.negated
            && match &t.matches {
                Match::States(_) => true,
                Match::Claimed(c) => !matches!(c, Claimed::Nobody),
                _ => false,
            }
    })
}

/// A command line as a POSIX shell splits it: words, 'single' and "double" quotes, backslash.
pub(crate) fn split_words(line: &str) -> Result<Vec<String>> {
    let mut words = Vec::new();
    let mut word: Option<String> = None;
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        match c {
            c if c.is_whitespace() => {
                if let Some(w) = word.take() {
                    words.push(w);
                }
            }
            '\'' => {
                let w = word.get_or_insert_with(String::new);
                loop {
                    match chars.next() {
                        Some('\'') => break,
                        Some(c) => w.push(c),
                        None => return Err(invalid("unmatched ' in the command".into())),
                    }
                }
            }
            '"' => {
                let w = word.get_or_insert_with(String::new);
                loop {
                    match chars.next() {
                        Some('"') => break,
                        Some('\\') => match chars.next() {
                            Some(c @ ('"' | '\\' | '$' | '`')) => w.push(c),
                            Some(c) => {
                                w.push('\\');
                                w.push(c);
                            }
                            None => return Err(invalid("unmatched \" in the command".into())),
                        },
                        Some(c) => w.push(c),
                        None => return Err(invalid("unmatched \" in the command".into())),
                    }
                }
            }
            '\\' => {
                if let Some(c) = chars.next() {
                    word.get_or_insert_with(String::new).push(c);
                }
            }
            c => word.get_or_insert_with(String::new).push(c),
        }
    }
    words.extend(word);
    Ok(words)
}
