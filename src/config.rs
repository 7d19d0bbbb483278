//! Configuration (SPEC section 14): a TOML file, every key checked, every duration parsed.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Deserializer};

use crate::domain::policy::{DestinationPolicy, RetryPolicy};
use crate::domain::redact::{FieldRule, Redactor};
use crate::domain::time::parse_duration_within;
use crate::error::{Error, Result};

pub const DEFAULT_DATABASE: &str = "sqlite://settle.db";

/// How long a request to a destination may take when its `timeout` is not set (SPEC 11a).
pub const DEFAULT_HTTP_TIMEOUT: Duration = Duration::from_secs(10);

const SECOND: Duration = Duration::from_secs(1);
const MILLI: Duration = Duration::from_millis(1);
const fn days(n: u64) -> Duration {
    Duration::from_secs(n * 86_400)
}

/// A duration field of the config, read within the range its use makes sense of (a lease of a
/// century is a typo, and one too large to add to the clock would stop settle): `$name` reads a
/// required field, `$opt` an optional one. An error names the file, line and key.
macro_rules! bounded {
    ($name:ident, $opt:ident, $min:expr, $max:expr) => {
        fn $name<'de, D: Deserializer<'de>>(d: D) -> std::result::Result<Duration, D::Error> {
            let text = String::deserialize(d)?;
            parse_duration_within(&text, $min, $max).map_err(serde::de::Error::custom)
        }
        #[allow(dead_code)]
        fn $opt<'de, D: Deserializer<'de>>(
            d: D,
        ) -> std::result::Result<Option<Duration>, D::Error> {
            $name(d).map(Some)
        }
    };
}

bounded!(lease_or_timeout, opt_lease_or_timeout, SECOND, days(7));
bounded!(age_limit, opt_age_limit, SECOND, days(365));
bounded!(retention, opt_retention, SECOND, days(3650));
bounded!(backoff, opt_backoff, MILLI, days(7));
bounded!(
    http_timeout,
    opt_http_timeout,
    MILLI,
    Duration::from_secs(3600)
);

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// Database URL; `--db` and `SETTLE_DATABASE_URL` come first.
    #[serde(default)]
    pub database: Option<String>,
    /// Where logs go (never the terminal).
    #[serde(default)]
    pub log_file: Option<PathBuf>,
    /// How long a claim lasts; each action of the holder renews it.
    #[serde(default = "default_lease", deserialize_with = "lease_or_timeout")]
    pub lease: Duration,
    /// An attempt without an outcome after this long is swept to `unknown`.
    #[serde(
        default = "default_attempt_timeout",
        deserialize_with = "lease_or_timeout"
    )]
    pub attempt_timeout: Duration,
    #[serde(default = "default_warn_after", deserialize_with = "age_limit")]
    pub warn_after: Duration,
    #[serde(default = "default_critical_after", deserialize_with = "age_limit")]
    pub critical_after: Duration,
    #[serde(default)]
    pub destinations: BTreeMap<String, DestinationConfig>,
    #[serde(default)]
    pub workflows: BTreeMap<String, WorkflowConfig>,
    #[serde(default)]
    pub redaction: RedactionConfig,
    /// The most items an `operator` acts on in one bulk action (SPEC 17; a lead has no limit).
    #[serde(default = "default_bulk_limit")]
    pub bulk_limit: usize,
    /// The largest payload any entrance takes (SPEC 14), in bytes of its canonical JSON:
    /// bytes, or a text like `256KiB`, `1MiB`.
    #[serde(default = "default_max_payload", deserialize_with = "payload_size")]
    pub max_payload: usize,
    /// Who may log in to `settle serve`, by name: their role and public keys (SPEC 17).
    #[serde(default)]
    pub operators: BTreeMap<String, OperatorConfig>,
}

/// `[operators.NAME]`: an operator of `settle serve`, known by their SSH public keys.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct OperatorConfig {
    pub role: crate::domain::Role,
    /// OpenSSH public keys (`ssh-ed25519 AAAA... comment`).
    #[serde(default)]
    pub keys: Vec<String>,
}

fn default_bulk_limit() -> usize {
    100
}

fn default_max_payload() -> usize {
    crate::domain::payload::DEFAULT_MAX_PAYLOAD
}

/// `max_payload`: bytes, or a size with its unit; from 1 KiB to 16 MiB.
fn payload_size<'de, D: Deserializer<'de>>(d: D) -> std::result::Result<usize, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Size {
        Bytes(u64),
        Text(String),
    }
    let bytes = match Size::deserialize(d)? {
        Size::Bytes(n) => usize::try_from(n).unwrap_or(usize::MAX),
        Size::Text(t) => {
            crate::domain::payload::parse_size(&t).map_err(serde::de::Error::custom)?
        }
    };
    if !(1024..=16 * 1024 * 1024).contains(&bytes) {
        return Err(serde::de::Error::custom(
            "max_payload is from 1KiB to 16MiB",
        ));
    }
    Ok(bytes)
}

fn default_lease() -> Duration {
    Duration::from_secs(30 * 60)
}
fn default_attempt_timeout() -> Duration {
    Duration::from_secs(5 * 60)
}
fn default_warn_after() -> Duration {
    Duration::from_secs(3600)
}
fn default_critical_after() -> Duration {
    Duration::from_secs(86_400)
}

impl Default for Config {
    fn default() -> Self {
        Config {
            database: None,
            log_file: None,
            lease: default_lease(),
            attempt_timeout: default_attempt_timeout(),
            warn_after: default_warn_after(),
            critical_after: default_critical_after(),
            destinations: BTreeMap::new(),
            workflows: BTreeMap::new(),
            redaction: RedactionConfig::default(),
            bulk_limit: default_bulk_limit(),
            max_payload: default_max_payload(),
            operators: BTreeMap::new(),
        }
    }
}

/// Declares a config table with the HTTP settings of SPEC 11a beside its own fields: a
/// destination has them, and each of its `actions` overrides any of them (unset inherits).
/// One list, so the two can never drift apart.
macro_rules! with_http_settings {
    ($(#[$meta:meta])* pub struct $name:ident { $($(#[$fmeta:meta])* pub $field:ident: $ty:ty,)* }) => {
        $(#[$meta])*
        pub struct $name {
            $($(#[$fmeta])* pub $field: $ty,)*
            /// Where the dispatcher sends; `{key}`, `{action}`, `{payload.a.b}` are filled in.
            #[serde(default)]
            pub url: Option<String>,
            /// POST (default), PUT, PATCH or DELETE.
            #[serde(default)]
            pub method: Option<Method>,
            /// `json` (default), `form` or `none`.
            #[serde(default)]
            pub body: Option<BodyKind>,
            /// Header values; `${NAME}` reads the environment when the dispatcher starts.
            #[serde(default)]
            pub headers: Option<BTreeMap<String, String>>,
            /// The header that carries the key (default `Idempotency-Key`; `""` sends none).
            #[serde(default)]
            pub idempotency_header: Option<String>,
            /// JSON pointer to the reference in a 2xx answer (default `/id`).
            #[serde(default)]
            pub reference: Option<String>,
            /// Overrides of the default classes by status, e.g. `{ 409 = "accepted" }`.
            #[serde(default)]
            pub status: Option<BTreeMap<String, AnswerClass>>,
            /// Where a key is looked up (placeholders as in `url`).
            #[serde(default)]
            pub lookup_url: Option<String>,
            /// GET (default) or POST.
            #[serde(default)]
            pub lookup_method: Option<Method>,
            /// The JSON body of a POST lookup; its strings take the placeholders of `url`.
            #[serde(default)]
            pub lookup_body: Option<toml::Value>,
            /// JSON pointer present and not null in the lookup's answer when the work exists
            /// (its value is the reference); default `/id`.
            #[serde(default)]
            pub lookup_found: Option<String>,
            /// How long an attempt may take before its outcome is unknown (default 10s).
            #[serde(default, deserialize_with = "opt_http_timeout")]
            pub timeout: Option<Duration>,
        }

        impl $name {
            /// Its HTTP settings alone.
            pub fn http_settings(&self) -> HttpSettings {
                HttpSettings {
                    url: self.url.clone(),
                    method: self.method,
                    body: self.body,
                    headers: self.headers.clone(),
                    idempotency_header: self.idempotency_header.clone(),
                    reference: self.reference.clone(),
                    status: self.status.clone(),
                    lookup_url: self.lookup_url.clone(),
                    lookup_method: self.lookup_method,
                    lookup_body: self.lookup_body.clone(),
                    lookup_found: self.lookup_found.clone(),
                    timeout: self.timeout,
                }
            }
        }
    };
}

with_http_settings! {
    #[derive(Clone, Debug, Default, Deserialize)]
    #[serde(deny_unknown_fields)]
    pub struct DestinationConfig {
        #[serde(default)]
        pub dedupes: bool,
        #[serde(default, deserialize_with = "opt_retention")]
        pub key_retention: Option<Duration>,
        #[serde(default)]
        pub lookup: bool,
        #[serde(default)]
        pub max_attempts: Option<u32>,
        #[serde(default, deserialize_with = "opt_backoff")]
        pub base: Option<Duration>,
        #[serde(default, deserialize_with = "opt_backoff")]
        pub cap: Option<Duration>,
        /// Per action: HTTP settings that override the destination's.
        #[serde(default)]
        pub actions: BTreeMap<String, HttpSettings>,
    }
}

with_http_settings! {
    /// The HTTP settings of a destination, or one action's overrides of them (SPEC 11a).
    #[derive(Clone, Debug, Default, Deserialize, PartialEq)]
    #[serde(deny_unknown_fields)]
    pub struct HttpSettings {}
}

/// Whether a template holds a placeholder that names the operation: `{key}` or `{payload...}`.
fn names_the_operation(text: &str) -> bool {
    text.contains("{key}") || text.contains("{payload.")
}

impl HttpSettings {
    /// Whether the lookup's request names the operation (SPEC 11a): its URL, or a string of its
    /// body, holds `{key}` or a `{payload...}` placeholder. A lookup that names nothing would
    /// get the same answer for every key, so its "absent" would prove nothing.
    pub fn lookup_names_the_operation(&self) -> bool {
        fn in_value(v: &toml::Value) -> bool {
            match v {
                toml::Value::String(s) => names_the_operation(s),
                toml::Value::Array(items) => items.iter().any(in_value),
                toml::Value::Table(t) => {
                    t.iter().any(|(k, v)| names_the_operation(k) || in_value(v))
                }
                _ => false,
            }
        }
        self.lookup_url.as_deref().is_some_and(names_the_operation)
            || self.lookup_body.as_ref().is_some_and(in_value)
    }

    /// These settings with `over`'s wherever it sets one.
    pub fn overridden_by(&self, over: &HttpSettings) -> HttpSettings {
        macro_rules! pick {
            ($($f:ident),*) => { HttpSettings { $($f: over.$f.clone().or_else(|| self.$f.clone()),)* } };
        }
        pick!(
            url,
            method,
            body,
            headers,
            idempotency_header,
            reference,
            status,
            lookup_url,
            lookup_method,
            lookup_body,
            lookup_found,
            timeout
        )
    }

    /// Checks what can be checked before the environment is read: statuses, pointers, header
    /// names, methods. `at` names the table in errors.
    fn check(&self, at: &str) -> std::result::Result<(), String> {
        for code in self.status.iter().flat_map(|m| m.keys()) {
            if !code.parse::<u16>().is_ok_and(|c| (100..=599).contains(&c)) {
                return Err(format!(
                    "key `{at}.status`: `{code}` is not an HTTP status (100-599)"
                ));
            }
        }
        for (name, pointer) in [
            ("reference", &self.reference),
            ("lookup_found", &self.lookup_found),
        ] {
            if let Some(p) = pointer
                && !p.is_empty()
                && !p.starts_with('/')
            {
                return Err(format!(
                    "key `{at}.{name}`: `{p}` is not a JSON pointer (it starts with `/`, like `/id`)"
                ));
            }
        }
        for name in self
            .headers
            .iter()
            .flat_map(|h| h.keys())
            .chain(self.idempotency_header.iter().filter(|h| !h.is_empty()))
        {
            let token = !name.is_empty()
                && name
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b));
            if !token {
                return Err(format!("key `{at}.headers`: `{name}` is not a header name"));
            }
        }
        if let Some(m) = self.lookup_method
            && !matches!(m, Method::Get | Method::Post)
        {
            return Err(format!("key `{at}.lookup_method`: GET or POST"));
        }
        if self.method == Some(Method::Get) {
            return Err(format!(
                "key `{at}.method`: POST, PUT, PATCH or DELETE (a GET must not change anything)"
            ));
        }
        Ok(())
    }
}

/// An HTTP method of the dispatcher's requests and lookups.
#[derive(Clone, Copy, Debug, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "UPPERCASE")]
pub enum Method {
    Get,
    Post,
    Put,
    Patch,
    Delete,
}

/// How a payload travels (SPEC 11a).
#[derive(Clone, Copy, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum BodyKind {
    #[default]
    Json,
    /// `application/x-www-form-urlencoded`, nested keys as `a[b]=`, as Stripe expects.
    Form,
    None,
}

/// What an answer means (SPEC 11a): the outcome classes, and `auth` (credentials refused:
/// provably not done, and the destination is paused).
#[derive(Clone, Copy, Debug, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum AnswerClass {
    Accepted,
    Rejected,
    Transient,
    Unknown,
    Auth,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WorkflowConfig {
    #[serde(default)]
    pub pause_when: Option<PauseWhen>,
}

/// The stopping threshold: pause the workflow when either is passed.
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct PauseWhen {
    #[serde(default)]
    pub unresolved: Option<u64>,
    #[serde(default, deserialize_with = "opt_age_limit")]
    pub oldest: Option<Duration>,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RedactionConfig {
    #[serde(default)]
    pub rules: Vec<FieldRule>,
    /// Keep a fragment of redacted values that helps find the record at the destination (SPEC 8:
    /// an email's first letter and domain, a phone's or card's last four digits). Off by default.
    #[serde(default)]
    pub hints: bool,
}

impl Config {
    /// Reads a config file; errors name the file, line and key in one line.
    pub fn load(path: &Path) -> Result<Config> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| Error::Invalid(format!("cannot read config {}: {e}", path.display())))?;
        Config::parse(&text, &path.display().to_string())
    }

    pub fn parse(text: &str, origin: &str) -> Result<Config> {
        let config: Config = toml::from_str(text).map_err(|e| {
            let (line, key) = match e.span() {
                Some(span) => locate(text, span.start),
                None => (0, String::new()),
            };
            let message = e.message().replace('\n', " ");
            let key = if key.is_empty() {
                String::new()
            } else {
                format!(" key `{key}`:")
            };
            Error::Invalid(format!("{origin}:{line}:{key} {message}"))
        })?;
        for (name, d) in &config.destinations {
            if d.max_attempts == Some(0) {
                return Err(Error::Invalid(format!(
                    "{origin}: key `destinations.{name}.max_attempts`: must be at least 1"
                )));
            }
            let at = format!("destinations.{name}");
            let base = d.http_settings();
            let checked = base.check(&at).and_then(|()| {
                d.actions
                    .iter()
                    .try_for_each(|(a, s)| s.check(&format!("{at}.actions.{a}")))
            });
            checked.map_err(|why| Error::Invalid(format!("{origin}: {why}")))?;
            // SPEC 11a: a lookup is evidence only when its request names the operation
            let unnamed = std::iter::once((None, base.clone()))
                .chain(
                    d.actions
                        .iter()
                        .map(|(a, over)| (Some(a.as_str()), base.overridden_by(over))),
                )
                .find(|(_, s)| s.lookup_url.is_some() && !s.lookup_names_the_operation());
            if let Some((action, _)) = unnamed {
                let of = action.map_or(String::new(), |a| format!(" (action {a})"));
                return Err(Error::Invalid(format!(
                    "{origin}: destination {name}{of}: the lookup names nothing of the operation: \
                     lookup_url or lookup_body must hold {{key}} or a {{payload...}} placeholder, \
                     else its answer cannot tell absent from not searched for"
                )));
            }
        }
        Redactor::new(&config.redaction.rules)
            .map_err(|e| Error::Invalid(format!("{origin}: key `redaction.rules`: {e}")))?;
        for (name, o) in &config.operators {
            crate::domain::validate_operator(name)
                .map_err(|e| Error::Invalid(format!("{origin}: key `operators.{name}`: {e}")))?;
            for key in &o.keys {
                let mut parts = key.split_whitespace();
                let (kind, body) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
                if !kind.starts_with("ssh-") && !kind.starts_with("ecdsa-") || body.is_empty() {
                    return Err(Error::Invalid(format!(
                        "{origin}: key `operators.{name}.keys`: not an OpenSSH public key (want `ssh-ed25519 AAAA... comment`)"
                    )));
                }
            }
        }
        Ok(config)
    }

    /// `--config`, else `SETTLE_CONFIG`, else `$XDG_CONFIG_HOME/settle/settle.toml`, else defaults.
    pub fn discover(explicit: Option<&Path>) -> Result<Config> {
        match Config::discover_path(explicit) {
            Some(p) => Config::load(&p),
            None => Ok(Config::default()),
        }
    }

    /// The file [`Config::discover`] reads (`None`: none, the defaults apply).
    pub fn discover_path(explicit: Option<&Path>) -> Option<PathBuf> {
        if let Some(p) = explicit {
            return Some(p.to_path_buf());
        }
        if let Some(p) = std::env::var_os("SETTLE_CONFIG").filter(|p| !p.is_empty()) {
            return Some(PathBuf::from(p));
        }
        let xdg = std::env::var_os("XDG_CONFIG_HOME")
            .filter(|p| !p.is_empty())
            .map(PathBuf::from)
            .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".config")));
        xdg.map(|d| d.join("settle").join("settle.toml"))
            .filter(|p| p.exists())
    }

    pub fn destination(&self, name: &str) -> DestinationPolicy {
        let d = self.destinations.get(name).cloned().unwrap_or_default();
        let defaults = RetryPolicy::default();
        let can_look_up =
            d.lookup_url.is_some() || d.actions.values().any(|a| a.lookup_url.is_some());
        DestinationPolicy {
            dedupes: d.dedupes,
            key_retention: d.key_retention,
            // a configured lookup is a lookup, whether or not `lookup = true` says so too
            lookup: d.lookup || can_look_up,
            can_look_up,
            // the longest any of its requests may take
            timeout: d
                .actions
                .values()
                .filter_map(|a| a.timeout)
                .chain(d.timeout)
                .max()
                .unwrap_or(DEFAULT_HTTP_TIMEOUT),
            retry: RetryPolicy {
                max_attempts: d.max_attempts.unwrap_or(defaults.max_attempts),
                base: d.base.unwrap_or(defaults.base),
                cap: d.cap.unwrap_or(defaults.cap),
            },
        }
    }

    /// The destinations `settle dispatch` can send to: those with a `url`, for the destination
    /// or for one of its actions. Their settings as written; the dispatcher resolves them.
    pub fn http_destinations(&self) -> Vec<(&str, &DestinationConfig)> {
        self.destinations
            .iter()
            .filter(|(_, d)| d.url.is_some() || d.actions.values().any(|a| a.url.is_some()))
            .map(|(name, d)| (name.as_str(), d))
            .collect()
    }

    pub fn redactor(&self) -> Redactor {
        Redactor::new(&self.redaction.rules)
            .unwrap_or_default()
            .with_hints(self.redaction.hints)
    }
}

/// The 1-based line of a byte offset, and the key written on that line (or the table it opens).
fn locate(text: &str, offset: usize) -> (usize, String) {
    let offset = offset.min(text.len());
    let line_no = text[..offset].matches('\n').count() + 1;
    let line = text.lines().nth(line_no - 1).unwrap_or("").trim();
    let key = match line.split_once('=') {
        Some((k, _)) => k.trim(),
        None => line.trim_matches(|c| c == '[' || c == ']'),
    };
    (line_no, key.trim_matches('"').to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn operators_are_named_with_a_role_and_openssh_keys() {
        let c = Config::parse(
            "[operators.alice]\nrole = \"operator\"\nkeys = [\"ssh-ed25519 AAAAC3Nza alice@laptop\"]\n",
            "t",
        )
        .unwrap();
        let alice = &c.operators["alice"];
        assert_eq!(alice.role, crate::domain::Role::Operator);
        assert_eq!(alice.keys.len(), 1);
        for (bad, says) in [
            (
                "[operators.bob]\nrole = \"admin\"\n",
                "unknown variant `admin`",
            ),
            (
                "[operators.bob]\nrole = \"lead\"\nkeys = [\"hunter2\"]\n",
                "not an OpenSSH public key",
            ),
            ("[operators.settle]\nrole = \"lead\"\n", "operators.settle"),
        ] {
            let e = Config::parse(bad, "t").unwrap_err().to_string();
            assert!(e.contains(says), "{bad}: {e}");
        }
    }

    #[test]
    fn the_shipped_example_parses() {
        let text = include_str!("../assets/settle.toml");
        let c = Config::parse(text, "assets/settle.toml").unwrap();
        assert!(c.destinations.contains_key("projects"));
        assert!(c.destination("projects").dedupes);
    }

    #[test]
    fn errors_name_file_line_and_key() {
        let err = Config::parse(
            "lease = \"30m\"\n[destinations.crm]\ndedupes = true\nretention = \"1d\"\n",
            "my.toml",
        )
        .unwrap_err()
        .to_string();
        assert!(
            err.starts_with("my.toml:4: key `retention`:") && err.contains("unknown field"),
            "{err}"
        );
        assert!(!err.contains('\n'));
        let err = Config::parse("lease = \"thirty\"\n", "my.toml")
            .unwrap_err()
            .to_string();
        assert!(
            err.starts_with("my.toml:1: key `lease`:") && err.contains("bad duration"),
            "{err}"
        );
        let err = Config::parse(
            "[workflows.x]\npause_when = { unresolved = \"many\" }\n",
            "c.toml",
        )
        .unwrap_err()
        .to_string();
        assert!(err.starts_with("c.toml:2:"), "{err}");
    }

    #[test]
    fn a_lookup_that_names_nothing_of_the_operation_is_refused() {
        let named = [
            "lookup_url = \"http://x/tasks?key={key}\"",
            "lookup_url = \"http://x/tasks?ref={payload.client_ref}\"",
            "lookup_url = \"http://x/search\"\nlookup_method = \"POST\"\nlookup_body = { q = [{ value = \"{key}\" }] }",
        ];
        for lookup in named {
            let text = format!("[destinations.crm]\nurl = \"http://x/c\"\n{lookup}\n");
            let c = Config::parse(&text, "t.toml").unwrap_or_else(|e| panic!("{lookup}: {e}"));
            assert!(
                c.destination("crm").lookup,
                "a configured lookup is a lookup"
            );
        }
        let unnamed = [
            "[destinations.crm]\nlookup_url = \"http://x/search\"\nlookup_method = \"POST\"\n",
            "[destinations.crm]\nlookup_url = \"http://x/search\"\nlookup_body = { limit = 1, q = \"{action}\" }\n",
            "[destinations.crm]\nlookup_url = \"http://x/t?key={key}\"\n[destinations.crm.actions.sync]\nlookup_url = \"http://x/all\"\n",
        ];
        for text in unnamed {
            let e = Config::parse(text, "t.toml").unwrap_err();
            assert_eq!(e.exit_code(), 2);
            let e = e.to_string();
            assert!(
                e.starts_with("t.toml: destination crm")
                    && e.contains("names nothing of the operation"),
                "{text}: {e}"
            );
        }
    }

    #[test]
    fn unknown_destinations_get_the_defaults() {
        let p = Config::default().destination("nowhere");
        assert!(!p.dedupes && !p.lookup);
        assert_eq!(p.retry, RetryPolicy::default());
    }
}
