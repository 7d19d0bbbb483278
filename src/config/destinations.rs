//! A destination's table: its retry policy, its HTTP settings (manual: Destinations and the dispatcher) and each action's overrides.

use std::collections::BTreeMap;
use std::time::Duration;

use crate::config::bounds::{opt_backoff, opt_http_timeout, opt_retention};
use serde::Deserialize;

/// Declares a config table with the HTTP settings of the manual's Destinations and the dispatcher beside its own fields: a
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
        /// When its breaker opens and how long it waits to probe.
        #[serde(default)]
        pub breaker: Option<super::recovery::BreakerConfig>,
        /// How fast attempts start after it recovers, and never faster.
        #[serde(default)]
        pub pace: Option<super::recovery::PaceConfig>,
        /// A URL whose `GET` answers 2xx when the destination is well: its open breaker probes
        /// it instead of sending a real attempt.
        #[serde(default)]
        pub probe_url: Option<String>,
    }
}

with_http_settings! {
    /// The HTTP settings of a destination, or one action's overrides of them (manual: Destinations and the dispatcher).
    #[derive(Clone, Debug, Default, Deserialize, PartialEq)]
    #[serde(deny_unknown_fields)]
    pub struct HttpSettings {}
}

/// Whether a template holds a placeholder that names the operation: `{key}` or `{payload...}`.
fn names_the_operation(text: &str) -> bool {
    text.contains("{key}") || text.contains("{payload.")
}

impl HttpSettings {
    /// Whether the lookup's request names the operation (manual: Destinations and the dispatcher): its URL, or a string of its
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
    pub(super) fn check(&self, at: &str) -> std::result::Result<(), String> {
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

/// How a payload travels (manual: Destinations and the dispatcher).
#[derive(Clone, Copy, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum BodyKind {
    #[default]
    Json,
    /// `application/x-www-form-urlencoded`, nested keys as `a[b]=`, as Stripe expects.
    Form,
    None,
}

/// What an answer means (manual: Destinations and the dispatcher): the outcome classes, and `auth` (credentials refused:
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
