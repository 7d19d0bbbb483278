//! Owners (manual: Owners and notifications): `[teams.NAME]` with their members and the
//! channels they are told through, `[channels.NAME]`, `[notify]` and `[defaults] owner`. A
//! workflow's owner is its `owner`, else the default owner, else nobody. A channel's URL and
//! secrets are never written in the file: it names the environment variables that hold them.

use std::time::Duration;

use serde::Deserialize;

use super::bounds::age_limit;

/// `[teams.NAME]`.
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct TeamConfig {
    /// Its people, by operator name.
    #[serde(default)]
    pub members: Vec<String>,
    /// The channels it is told through when automatic recovery stops, and of aging.
    #[serde(default)]
    pub notify: Vec<String>,
    /// The channels also told when an exception passes `critical_after`.
    #[serde(default)]
    pub escalate: Vec<String>,
}

/// What a channel is.
#[derive(Clone, Copy, Debug, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum ChannelKind {
    /// An incoming webhook that takes `{"text": ...}` (Slack, Mattermost, Teams).
    Slack,
    /// settle's JSON document, signed where a secret is given.
    Webhook,
    /// Mail over SMTP.
    Email,
}

/// `[channels.NAME]`.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ChannelConfig {
    pub kind: ChannelKind,
    /// The environment variable that holds its URL (slack, webhook).
    #[serde(default)]
    pub url_env: Option<String>,
    /// The environment variable that holds the secret its bodies are signed with (webhook).
    #[serde(default)]
    pub secret_env: Option<String>,
    /// The mail server, `smtp://HOST:PORT` (email).
    #[serde(default)]
    pub smtp: Option<String>,
    #[serde(default)]
    pub from: Option<String>,
    #[serde(default)]
    pub to: Vec<String>,
}

/// `[notify]`: how messages are grouped and how long they are tried.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct NotifyConfig {
    /// What enters the queue together is told together.
    #[serde(default = "default_group_window", deserialize_with = "age_limit")]
    pub group_window: Duration,
    /// A group that keeps growing is told again at most this often.
    #[serde(default = "default_repeat", deserialize_with = "age_limit")]
    pub repeat: Duration,
    /// How long a message is tried before it is given up.
    #[serde(default = "default_horizon", deserialize_with = "age_limit")]
    pub notify_horizon: Duration,
}

impl Default for NotifyConfig {
    fn default() -> Self {
        NotifyConfig {
            group_window: default_group_window(),
            repeat: default_repeat(),
            notify_horizon: default_horizon(),
        }
    }
}

fn default_group_window() -> Duration {
    Duration::from_secs(60)
}
fn default_repeat() -> Duration {
    Duration::from_secs(15 * 60)
}
fn default_horizon() -> Duration {
    Duration::from_secs(86_400)
}

/// `[defaults]`.
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct DefaultsConfig {
    /// The team that owns a workflow without an `owner`.
    #[serde(default)]
    pub owner: Option<String>,
}

/// Which workflows a set of teams owns, as a filter asks: the ones named, or every one but
/// those named (where the set holds the default owner, whose workflows are not listed).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Owned {
    These(Vec<String>),
    AllBut(Vec<String>),
}

/// What a channel's config holds that does nothing for its kind: a line each (the config loads;
/// `serve`, `dispatch` and `notify test` say these on stderr and in the log).
pub fn channel_warnings(name: &str, c: &ChannelConfig) -> Vec<String> {
    let kind = match c.kind {
        ChannelKind::Slack => "slack",
        ChannelKind::Webhook => "webhook",
        ChannelKind::Email => "email",
    };
    // each key and the kinds it means something for
    let used: [(&str, bool, &[ChannelKind]); 5] = [
        (
            "url_env",
            c.url_env.is_some(),
            &[ChannelKind::Slack, ChannelKind::Webhook],
        ),
        (
            "secret_env",
            c.secret_env.is_some(),
            &[ChannelKind::Webhook],
        ),
        ("smtp", c.smtp.is_some(), &[ChannelKind::Email]),
        ("from", c.from.is_some(), &[ChannelKind::Email]),
        ("to", !c.to.is_empty(), &[ChannelKind::Email]),
    ];
    let idle = used
        .iter()
        .filter(|(_, set, kinds)| *set && !kinds.contains(&c.kind))
        .map(|(k, _, _)| *k);
    idle.map(|key| {
        let why = match key {
            "secret_env" if c.kind == ChannelKind::Slack => {
                " (only a webhook's body is signed; Slack checks nothing)"
            }
            _ => "",
        };
        format!("channels.{name}.{key} does nothing for a {kind} channel{why}")
    })
    .collect()
}

pub(super) fn check_channel(name: &str, c: &ChannelConfig) -> std::result::Result<(), String> {
    let at = |key: &str| format!("key `channels.{name}.{key}`");
    for (key, var) in [("url_env", &c.url_env), ("secret_env", &c.secret_env)] {
        if let Some(v) = var
            && (v.is_empty()
                || v.starts_with(|ch: char| ch.is_ascii_digit())
                || !v.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_'))
        {
            return Err(format!(
                "{}: the name of an environment variable (A-Z, 0-9, _), never the value itself",
                at(key)
            ));
        }
    }
    match c.kind {
        ChannelKind::Slack | ChannelKind::Webhook if c.url_env.is_none() => Err(format!(
            "{}: a {} channel needs the variable that holds its URL",
            at("url_env"),
            if c.kind == ChannelKind::Slack {
                "slack"
            } else {
                "webhook"
            }
        )),
        ChannelKind::Email if c.smtp.is_none() || c.from.is_none() || c.to.is_empty() => Err(
            format!("key `channels.{name}`: an email channel needs smtp, from and to"),
        ),
        ChannelKind::Email
            if !c
                .smtp
                .as_deref()
                .is_some_and(|s| s.starts_with("smtp://") || s.starts_with("smtps://")) =>
        {
            Err(format!(
                "{}: smtp://HOST:PORT or smtps://HOST:PORT",
                at("smtp")
            ))
        }
        _ => Ok(()),
    }
}
