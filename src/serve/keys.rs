//! Keys from the bytes an SSH client sends: what crossterm reads from a local terminal, decoded
//! from a channel instead (UTF-8 text, control keys, and the CSI and SS3 sequences of xterm and
//! its kind for arrows, Home/End, PgUp/PgDn, Delete, Shift-Tab, with their modifiers).
//!
//! An Esc that ends a packet is the Esc key (a person pressed it; a sequence arrives whole in one
//! packet); a sequence cut at a packet's end waits for the next. Esc followed by any other byte
//! is Esc, then that key: the console binds nothing to Alt, and a quick Esc-then-key must not be
//! lost.

use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

#[derive(Default)]
pub struct Decoder {
    pending: Vec<u8>,
}

const ESC: u8 = 0x1b;

impl Decoder {
    /// The keys in `bytes` (with what an earlier packet left unfinished).
    pub fn feed(&mut self, bytes: &[u8]) -> Vec<KeyEvent> {
        self.pending.extend_from_slice(bytes);
        let buf = std::mem::take(&mut self.pending);
        let mut keys = Vec::new();
        let mut i = 0;
        while i < buf.len() {
            match decode(&buf[i..]) {
                Step::Key(used, key) => {
                    keys.extend(key);
                    i += used;
                }
                Step::Incomplete => {
                    self.pending = buf[i..].to_vec();
                    break;
                }
            }
        }
        keys
    }
}

enum Step {
    /// Bytes used, and the key they make (none for what the console ignores).
    Key(usize, Option<KeyEvent>),
    Incomplete,
}

fn key(code: KeyCode, modifiers: KeyModifiers) -> Option<KeyEvent> {
    Some(KeyEvent::new(code, modifiers))
}

fn plain(code: KeyCode) -> Option<KeyEvent> {
    key(code, KeyModifiers::NONE)
}

fn decode(b: &[u8]) -> Step {
    let none = KeyModifiers::NONE;
    match b[0] {
        ESC => match b.get(1) {
            None => Step::Key(1, plain(KeyCode::Esc)),
            Some(b'[') => csi(b),
            Some(b'O') => match b.get(2) {
                None => Step::Incomplete,
                Some(&f) => Step::Key(3, final_key(f, none)),
            },
            Some(_) => Step::Key(1, plain(KeyCode::Esc)),
        },
        b'\r' | b'\n' => Step::Key(1, plain(KeyCode::Enter)),
        b'\t' => Step::Key(1, plain(KeyCode::Tab)),
        0x7f | 0x08 => Step::Key(1, plain(KeyCode::Backspace)),
        c @ 0x01..=0x1a => Step::Key(
            1,
            key(KeyCode::Char((c + b'a' - 1) as char), KeyModifiers::CONTROL),
        ),
        0x00 | 0x1c..=0x1f => Step::Key(1, None),
        c if c < 0x80 => {
            let ch = c as char;
            let m = if ch.is_ascii_uppercase() {
                KeyModifiers::SHIFT
            } else {
                none
            };
            Step::Key(1, key(KeyCode::Char(ch), m))
        }
        c => {
            let len = match c {
                0xc0..=0xdf => 2,
                0xe0..=0xef => 3,
                0xf0..=0xf7 => 4,
                _ => return Step::Key(1, None),
            };
            if b.len() < len {
                return Step::Incomplete;
            }
            match std::str::from_utf8(&b[..len])
                .ok()
                .and_then(|s| s.chars().next())
            {
                Some(ch) => Step::Key(len, plain(KeyCode::Char(ch))),
                None => Step::Key(1, None),
            }
        }
    }
}

/// `ESC [ params final`: parameters are digits and `;` (a `<`, `?` or `>` starts a report the
/// console does not ask for, read and dropped).
fn csi(b: &[u8]) -> Step {
    let mut end = 2;
    loop {
        match b.get(end) {
            None => return Step::Incomplete,
            Some(c) if (0x20..=0x3f).contains(c) => end += 1,
            Some(_) => break,
        }
        // a runaway sequence is not a key
        if end > 32 {
            return Step::Key(end, None);
        }
    }
    let used = end + 1;
    let params: Vec<u32> = std::str::from_utf8(&b[2..end])
        .unwrap_or("")
        .split(';')
        .map(|p| p.parse().unwrap_or(0))
        .collect();
    if matches!(b.get(2), Some(b'<' | b'?' | b'>')) {
        return Step::Key(used, None);
    }
    let modifiers = params.get(1).map_or(KeyModifiers::NONE, |&m| modifiers(m));
    let k = match b[end] {
        b'~' => match params.first().copied().unwrap_or(0) {
            1 | 7 => key(KeyCode::Home, modifiers),
            4 | 8 => key(KeyCode::End, modifiers),
            2 => key(KeyCode::Insert, modifiers),
            3 => key(KeyCode::Delete, modifiers),
            5 => key(KeyCode::PageUp, modifiers),
            6 => key(KeyCode::PageDown, modifiers),
            n @ 11..=15 => key(KeyCode::F((n - 10) as u8), modifiers),
            n @ 17..=21 => key(KeyCode::F((n - 11) as u8), modifiers),
            n @ 23..=24 => key(KeyCode::F((n - 12) as u8), modifiers),
            _ => None,
        },
        b'Z' => key(KeyCode::BackTab, KeyModifiers::SHIFT),
        f => final_key(f, modifiers),
    };
    Step::Key(used, k)
}

fn final_key(f: u8, m: KeyModifiers) -> Option<KeyEvent> {
    let code = match f {
        b'A' => KeyCode::Up,
        b'B' => KeyCode::Down,
        b'C' => KeyCode::Right,
        b'D' => KeyCode::Left,
        b'H' => KeyCode::Home,
        b'F' => KeyCode::End,
        b'P' => KeyCode::F(1),
        b'Q' => KeyCode::F(2),
        b'R' => KeyCode::F(3),
        b'S' => KeyCode::F(4),
        _ => return None,
    };
    key(code, m)
}

/// xterm's modifier parameter: 1 + (shift 1, alt 2, ctrl 4).
fn modifiers(p: u32) -> KeyModifiers {
    let bits = p.saturating_sub(1);
    let mut m = KeyModifiers::NONE;
    if bits & 1 != 0 {
        m |= KeyModifiers::SHIFT;
    }
    if bits & 2 != 0 {
        m |= KeyModifiers::ALT;
    }
    if bits & 4 != 0 {
        m |= KeyModifiers::CONTROL;
    }
    m
}

#[cfg(test)]
mod tests {
    use super::*;

    fn codes(bytes: &[&[u8]]) -> Vec<(KeyCode, KeyModifiers)> {
        let mut d = Decoder::default();
        bytes
            .iter()
            .flat_map(|b| d.feed(b))
            .map(|k| (k.code, k.modifiers))
            .collect()
    }

    const N: KeyModifiers = KeyModifiers::NONE;

    #[test]
    fn text_and_control_keys() {
        assert_eq!(
            codes(&[b"cJ\r\t\x7f\x03"]),
            vec![
                (KeyCode::Char('c'), N),
                (KeyCode::Char('J'), KeyModifiers::SHIFT),
                (KeyCode::Enter, N),
                (KeyCode::Tab, N),
                (KeyCode::Backspace, N),
                (KeyCode::Char('c'), KeyModifiers::CONTROL),
            ]
        );
        assert_eq!(
            codes(&["é→".as_bytes()]),
            vec![(KeyCode::Char('é'), N), (KeyCode::Char('→'), N)]
        );
    }

    #[test]
    fn arrows_pages_and_modifiers_in_both_modes() {
        assert_eq!(
            codes(&[b"\x1b[A\x1bOB\x1b[5~\x1b[6~\x1b[H\x1b[4~\x1b[3~\x1b[Z\x1b[1;5C"]),
            vec![
                (KeyCode::Up, N),
                (KeyCode::Down, N),
                (KeyCode::PageUp, N),
                (KeyCode::PageDown, N),
                (KeyCode::Home, N),
                (KeyCode::End, N),
                (KeyCode::Delete, N),
                (KeyCode::BackTab, KeyModifiers::SHIFT),
                (KeyCode::Right, KeyModifiers::CONTROL),
            ]
        );
    }

    #[test]
    fn a_lone_esc_is_the_key_and_a_cut_sequence_waits() {
        assert_eq!(codes(&[b"\x1b"]), vec![(KeyCode::Esc, N)]);
        assert_eq!(
            codes(&[b"\x1b\x1b"]),
            vec![(KeyCode::Esc, N), (KeyCode::Esc, N)]
        );
        assert_eq!(
            codes(&[b"\x1bj"]),
            vec![(KeyCode::Esc, N), (KeyCode::Char('j'), N)]
        );
        assert_eq!(codes(&[b"\x1b[", b"6~"]), vec![(KeyCode::PageDown, N)]);
        assert_eq!(codes(&[&[0xc3], &[0xa9]]), vec![(KeyCode::Char('é'), N)]);
        // reports the console never asked for, and junk, are dropped without losing what follows
        assert_eq!(
            codes(&[b"\x1b[<0;3;4Mq\xffx"]),
            vec![(KeyCode::Char('q'), N), (KeyCode::Char('x'), N)]
        );
    }
}
