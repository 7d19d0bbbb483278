//! What a message says (manual: Owners and notifications): the concise record every channel's
//! format is made from. It holds names, counts, keys and the masked, redacted reason, never a
//! payload value or a secret.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

/// One message, as a webhook receives it (`assets/notification.schema.json`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Message {
    /// The same on every try, so that a receiver can drop repeats.
    pub id: String,
    /// Its place in the ledger's order of messages: a channel receives its messages in this
    /// order (0: a test message, in no order).
    #[serde(default)]
    pub seq: i64,
    /// `queue` (automatic recovery stopped), `aging`, `paused`, `resumed`, `breaker_open`,
    /// `breaker_closed` or `test`.
    pub kind: String,
    /// `info`, `warning` or `critical`.
    pub level: String,
    pub team: Option<String>,
    pub workflow: Option<String>,
    pub step: Option<String>,
    pub destination: Option<String>,
    pub state: Option<String>,
    /// The reason, redacted, with what varies between items masked.
    pub reason: Option<String>,
    /// The group's id: `group:ID` in a filter lists exactly its items.
    #[serde(default)]
    pub group: Option<String>,
    /// Who paused or resumed (a person's name, or `settle`).
    #[serde(default)]
    pub by: Option<String>,
    /// How many items it tells of that arrived since the group was last told.
    pub count: i64,
    /// How many the group holds open now, these among them.
    #[serde(default)]
    pub group_count: i64,
    pub oldest_seconds: i64,
    /// Up to five of their keys.
    pub keys: Vec<String>,
    pub next_step: Option<String>,
    /// The command that lists them.
    pub open: Option<String>,
    pub created_at: DateTime<Utc>,
}

/// A fresh message id: 128 random bits in hex.
pub(super) fn new_id() -> String {
    let bits: u128 = rand::random();
    format!("{bits:032x}")
}

/// The command that lists a group's items.
pub(super) fn open_command(filter: &str) -> String {
    format!("settle list --where '{filter}'")
}

/// Where a message's text lands, and what must be escaped there.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Medium {
    /// A mail's plain body and subject: one line per fact.
    Plain,
    /// Slack's `text` (and Mattermost's, Teams'): `&`, `<` and `>` escaped, so that no value
    /// makes a link, a mention or a `<!channel>`, and `@` made inert.
    Slack,
}

/// A value as `medium` shows it: on one line (a new line or any control character in it is
/// shown escaped, never begins a line of its own), escaped for where it lands.
pub fn shown_in(value: &str, medium: Medium) -> String {
    let one_line = crate::domain::escape_text(value);
    match medium {
        Medium::Plain => one_line.into_owned(),
        Medium::Slack => {
            let mut out = String::with_capacity(one_line.len());
            for c in one_line.chars() {
                match c {
                    '&' => out.push_str("&amp;"),
                    '<' => out.push_str("&lt;"),
                    '>' => out.push_str("&gt;"),
                    // `@here` and `@channel` notify everyone on Mattermost: a full-width at sign
                    '@' => out.push('＠'),
                    c => out.push(c),
                }
            }
            out
        }
    }
}

impl Message {
    /// The message as one short text for a mail's body, a line per fact.
    pub fn text(&self) -> String {
        self.text_for(Medium::Plain)
    }

    /// The message as one short text for `medium`, a line per fact, every value on its line.
    pub fn text_for(&self, medium: Medium) -> String {
        let shown = |v: &str| shown_in(v, medium);
        let mut lines = vec![shown(&self.headline())];
        let facts = [
            ("team", &self.team),
            ("workflow", &self.workflow),
            ("step", &self.step),
            ("destination", &self.destination),
            ("state", &self.state),
            ("reason", &self.reason),
        ];
        for (name, v) in facts {
            if let Some(v) = v.as_deref().filter(|v| !v.is_empty()) {
                lines.push(format!("{name}: {}", shown(v)));
            }
        }
        if self.count > 0 && matches!(self.kind.as_str(), "queue" | "aging") {
            let these = match self.kind.as_str() {
                "aging" => format!("past {}", self.level),
                _ => "new".to_string(),
            };
            lines.push(format!(
                "count: {} {these}, {} open in the group, the oldest {}",
                self.count,
                self.group_count.max(self.count),
                crate::domain::format_age(chrono::Duration::seconds(self.oldest_seconds))
            ));
        }
        if !self.keys.is_empty() {
            let more = if self.count > self.keys.len() as i64 {
                ", ..."
            } else {
                ""
            };
            lines.push(format!("keys: {}{more}", shown(&self.keys.join(", "))));
        }
        for (name, v) in [("next step", &self.next_step), ("open", &self.open)] {
            if let Some(v) = v.as_deref().filter(|v| !v.is_empty()) {
                lines.push(format!("{name}: {}", shown(v)));
            }
        }
        lines.join("\n")
    }

    /// The first line, and a mail's subject (on one line: see [`shown_in`]).
    pub fn headline(&self) -> String {
        let what = self
            .workflow
            .as_deref()
            .or(self.destination.as_deref())
            .unwrap_or("settle");
        let state = self.state.as_deref().unwrap_or("");
        match self.kind.as_str() {
            "queue" => format!(
                "[settle] {what}: {} {state} need a person (automatic recovery stopped)",
                self.count
            ),
            "aging" => format!(
                "[settle] {what}: {} {state} still open ({})",
                self.count, self.level
            ),
            "breaker_open" => format!(
                "[settle] {what} is struggling: nothing is sent there until it answers again"
            ),
            "breaker_closed" => format!("[settle] {what} answers again: sending resumes"),
            "paused" | "resumed" => match &self.by {
                Some(by) => format!("[settle] {what} {} by {by}", self.kind),
                None => format!("[settle] {what} {}", self.kind),
            },
            _ => "[settle] a test message: this channel works".to_string(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn growing(kind: &str, level: &str) -> Message {
        Message {
            kind: kind.into(),
            level: level.into(),
            workflow: Some("signup".into()),
            state: Some("unknown".into()),
            count: 3,
            group_count: 5,
            oldest_seconds: 600,
            keys: vec!["g-3".into(), "g-4".into(), "g-5".into()],
            ..Message::default()
        }
    }

    #[test]
    fn a_growing_group_says_its_new_items_and_its_whole() {
        let text = growing("queue", "info").text();
        assert!(
            text.contains("count: 3 new, 5 open in the group, the oldest 10m"),
            "{text}"
        );
        assert!(
            text.contains("keys: g-3, g-4, g-5") && !text.contains("..."),
            "{text}"
        );
        let aging = growing("aging", "critical").text();
        assert!(
            aging.contains("count: 3 past critical, 5 open in the group, the oldest 10m"),
            "{aging}"
        );
    }
}
