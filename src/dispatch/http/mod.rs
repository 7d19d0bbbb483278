//! How the dispatcher speaks HTTP to a destination (manual: Destinations and the dispatcher): the settings of the config made
//! ready to send (environment read once, at start), the request built from a started operation,
//! the answer classified by a pure function, and the lookup of a key.
//!
//! Rooms: `endpoint.rs` a destination's resolved settings, `answers.rs` an answer classified
//! (redirects never followed), `template.rs` the URL and body templates, `probe.rs` a destination's health asked directly; the request and the lookup
//! in `mod.rs`.

use std::collections::HashMap;
use std::sync::Arc;

use chrono::Utc;
use reqwest::header::{CONTENT_TYPE, HeaderMap, HeaderName, HeaderValue};
use serde_json::Value;

use crate::config::{BodyKind, DestinationConfig, HttpSettings, Method};
use crate::domain::{LookupAnswer, Outcome};
use crate::error::{Error, Result};
use crate::ledger::StartedOp;

mod answers;
mod endpoint;
mod probe;
mod template;

use crate::dispatch::http::answers::{pointed, read_capped, transport_failure};
use crate::dispatch::http::template::{
    Encode, Payload, check_template, expand_env, fill, fill_json, form_body,
};
pub use answers::{Answer, Observed, Raw, classify, is_redirect};
pub use endpoint::Endpoint;
use endpoint::Lookup;
pub use probe::Probe;

/// A destination as the dispatcher reaches it: its own endpoint and its actions' overrides.
#[derive(Debug)]
pub struct HttpDestination {
    pub name: String,
    default: Option<Arc<Endpoint>>,
    actions: HashMap<String, Arc<Endpoint>>,
    /// Its `probe_url`, asked while its breaker probes.
    pub probe: Option<Arc<Probe>>,
}

impl HttpDestination {
    /// Resolves a destination's settings, reading `${NAME}` from `env`. A missing variable or a
    /// value that cannot travel in a header is an error naming the destination and the variable
    /// or header (never the value).
    pub fn resolve(
        name: &str,
        config: &DestinationConfig,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<HttpDestination> {
        let base = config.http_settings();
        // a lookup alone is an endpoint too: scripts may send, and settle look up
        let reached = |s: &HttpSettings| s.url.is_some() || s.lookup_url.is_some();
        let default = match reached(&base) {
            true => Some(Arc::new(Endpoint::resolve(name, None, &base, env)?)),
            false => None,
        };
        let mut actions = HashMap::new();
        for (action, over) in &config.actions {
            let settings = base.overridden_by(over);
            if reached(&settings) {
                let e = Endpoint::resolve(name, Some(action), &settings, env)?;
                actions.insert(action.clone(), Arc::new(e));
            }
        }
        let probe = config.probe_url.as_ref().map(|url| {
            Arc::new(Probe {
                url: url.clone(),
                headers: default
                    .as_ref()
                    .map(|e| e.headers.clone())
                    .unwrap_or_default(),
                timeout: base.timeout.unwrap_or(crate::config::DEFAULT_HTTP_TIMEOUT),
            })
        });
        Ok(HttpDestination {
            name: name.to_string(),
            default,
            actions,
            probe,
        })
    }

    /// Whether it, or one of its actions, has a lookup the dispatcher can run.
    pub fn has_lookup(&self) -> bool {
        self.default
            .iter()
            .chain(self.actions.values())
            .any(|e| e.has_lookup())
    }

    /// Where and how one action is sent or looked up; `None` when neither it nor the
    /// destination has a URL or a lookup.
    pub fn endpoint(&self, action: &str) -> Option<&Arc<Endpoint>> {
        self.actions.get(action).or(self.default.as_ref())
    }

    /// Where and how one action is sent; `None` when neither it nor the destination has a URL.
    pub fn sender(&self, action: &str) -> Option<&Arc<Endpoint>> {
        self.endpoint(action).filter(|e| !e.url.is_empty())
    }
}

fn method(m: Method) -> reqwest::Method {
    match m {
        Method::Get => reqwest::Method::GET,
        Method::Post => reqwest::Method::POST,
        Method::Put => reqwest::Method::PUT,
        Method::Patch => reqwest::Method::PATCH,
        Method::Delete => reqwest::Method::DELETE,
    }
}

impl Endpoint {
    fn resolve(
        destination: &str,
        action: Option<&str>,
        s: &HttpSettings,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Endpoint> {
        let at = match action {
            Some(a) => format!("destination {destination} (action {a})"),
            None => format!("destination {destination}"),
        };
        let mut secrets = Vec::new();
        let mut expand = |text: &str, what: &str| -> Result<String> {
            let (out, read) = expand_env(text, env).map_err(|var| {
                Error::Invalid(format!(
                    "{at}: {what} reads ${{{var}}}, which is not set in the environment"
                ))
            })?;
            secrets.extend(read.into_iter().filter(|v| v.len() >= 4));
            Ok(out)
        };
        let url = expand(s.url.as_deref().unwrap_or_default(), "url")?;
        check_template(&url).map_err(|why| Error::Invalid(format!("{at}: url: {why}")))?;
        let mut headers = HeaderMap::new();
        for (name, value) in s.headers.iter().flatten() {
            let value = expand(value, &format!("header {name}"))?;
            let header = HeaderName::from_bytes(name.as_bytes())
                .map_err(|_| Error::Invalid(format!("{at}: `{name}` is not a header name")))?;
            let mut value = HeaderValue::from_str(&value).map_err(|_| {
                Error::Invalid(format!(
                    "{at}: header {name}: the value cannot be sent in a header"
                ))
            })?;
            value.set_sensitive(true);
            headers.insert(header, value);
        }
        let idempotency_header = match s.idempotency_header.as_deref() {
            Some("") => None,
            other => Some(
                HeaderName::from_bytes(other.unwrap_or("Idempotency-Key").as_bytes())
                    .map_err(|_| Error::Invalid(format!("{at}: bad idempotency_header")))?,
            ),
        };
        let lookup = match &s.lookup_url {
            Some(u) => {
                let url = expand(u, "lookup_url")?;
                check_template(&url)
                    .map_err(|why| Error::Invalid(format!("{at}: lookup_url: {why}")))?;
                let body = s
                    .lookup_body
                    .as_ref()
                    .map(serde_json::to_value)
                    .transpose()
                    .map_err(|e| Error::Invalid(format!("{at}: lookup_body: {e}")))?;
                Some(Lookup {
                    url,
                    method: method(s.lookup_method.unwrap_or(Method::Get)),
                    body,
                    found: s.lookup_found.clone().unwrap_or_else(|| "/id".into()),
                })
            }
            None => None,
        };
        let status = s
            .status
            .iter()
            .flatten()
            .filter_map(|(code, class)| Some((code.parse().ok()?, *class)))
            .collect();
        Ok(Endpoint {
            destination: destination.to_string(),
            url,
            method: method(s.method.unwrap_or(Method::Post)),
            body: s.body.unwrap_or_default(),
            headers,
            idempotency_header,
            reference: s.reference.clone().unwrap_or_else(|| "/id".into()),
            status,
            lookup,
            timeout: s.timeout.unwrap_or(crate::config::DEFAULT_HTTP_TIMEOUT),
            secrets,
        })
    }

    /// A destination's text with the values read from the environment taken out (an answer
    /// may echo a header back).
    pub fn scrub_secrets(&self, text: String) -> String {
        self.secrets.iter().fold(text, |t, s| {
            if t.contains(s.as_str()) {
                t.replace(s.as_str(), "[redacted]")
            } else {
                t
            }
        })
    }

    pub fn has_lookup(&self) -> bool {
        self.lookup.is_some()
    }

    /// The JSON pointer of the reference in a 2xx answer (`""`: none is read).
    pub fn reference_pointer(&self) -> &str {
        &self.reference
    }

    /// The request for one started attempt, or why it cannot be sent (then nothing was sent).
    fn request(
        &self,
        client: &reqwest::Client,
        op: &StartedOp,
    ) -> std::result::Result<reqwest::RequestBuilder, String> {
        let payload = Payload::new(&op.payload);
        let url = fill(&self.url, op, &payload, Encode::Url)?;
        let mut req = client
            .request(self.method.clone(), url)
            .headers(self.headers.clone())
            .timeout(self.timeout);
        if let Some(h) = &self.idempotency_header {
            req = req.header(h, op.key.as_str());
        }
        Ok(match self.body {
            BodyKind::Json => req
                .header(CONTENT_TYPE, "application/json")
                .body(op.payload.clone()),
            BodyKind::Form => {
                let body = form_body(payload.value()?)?;
                req.header(CONTENT_TYPE, "application/x-www-form-urlencoded")
                    .body(body)
            }
            BodyKind::None => req,
        })
    }

    /// Sends one started attempt and classifies what came back.
    pub async fn send(&self, client: &reqwest::Client, op: &StartedOp) -> Observed {
        self.exchange(client, op).await.0
    }

    /// Sends one started attempt: what came back classified, and as it came (`None`: no answer
    /// arrived whole, or nothing was sent). The body handed on has the values read from the
    /// environment taken out, as everything settle keeps has.
    pub async fn exchange(
        &self,
        client: &reqwest::Client,
        op: &StartedOp,
    ) -> (Observed, Option<Raw>) {
        let req = match self.request(client, op) {
            Ok(r) => r,
            Err(why) => {
                let seen = Observed::new(Outcome::Rejected, None).error(format!("not sent: {why}"));
                return (seen, None);
            }
        };
        match req.send().await {
            Err(e) => (transport_failure(&e, self.timeout), None),
            Ok(resp) => {
                let status = resp.status().as_u16();
                let header = |name| {
                    resp.headers()
                        .get(name)
                        .and_then(|v: &HeaderValue| v.to_str().ok())
                        .map(str::to_string)
                };
                let (retry_after, content_type) = (header("retry-after"), header("content-type"));
                let location = answers::is_redirect(status)
                    .then(|| crate::outbound::location(resp.headers().get("location")));
                let body = read_capped(resp).await;
                let answer = Answer {
                    status,
                    retry_after: retry_after.as_deref(),
                    location: location.as_deref(),
                    body: body.as_deref(),
                };
                let seen = classify(&answer, self, Utc::now());
                let raw = body.map(|body| Raw {
                    status,
                    content_type,
                    retry_after,
                    body: match String::from_utf8(body) {
                        Ok(text) => self.scrub_secrets(text).into_bytes(),
                        Err(e) => e.into_bytes(),
                    },
                });
                (seen, raw)
            }
        }
    }

    /// Asks the destination whether the work for this key exists (manual: Destinations and the dispatcher). Absent only from
    /// a 404, or a 2xx without the `lookup_found` value (the config check made sure the request
    /// names the operation); any other answer proves nothing. `None`: no lookup is configured.
    pub async fn look_up(&self, client: &reqwest::Client, op: &StartedOp) -> Option<LookupAnswer> {
        let lookup = self.lookup.as_ref()?;
        let no_answer = |why: String| LookupAnswer::NoAnswer { why };
        let payload = Payload::new(&op.payload);
        let url = match fill(&lookup.url, op, &payload, Encode::Url) {
            Ok(u) => u,
            Err(why) => return Some(no_answer(format!("not asked: {why}"))),
        };
        let mut req = client
            .request(lookup.method.clone(), url)
            .headers(self.headers.clone())
            .timeout(self.timeout);
        if let Some(body) = &lookup.body {
            match fill_json(body, op, &payload) {
                Ok(b) => req = req.json(&b),
                Err(why) => return Some(no_answer(format!("not asked: {why}"))),
            }
        }
        let resp = match req.send().await {
            Ok(r) => r,
            Err(e) if e.is_connect() => return Some(no_answer("could not connect".into())),
            Err(e) if e.is_timeout() => {
                let secs = self.timeout.as_secs_f32();
                return Some(no_answer(format!("no answer within {secs}s")));
            }
            Err(_) => return Some(no_answer("the connection broke".into())),
        };
        let status = resp.status().as_u16();
        if status == 404 {
            return Some(LookupAnswer::Absent {
                http_status: status,
            });
        }
        if (300..400).contains(&status) {
            return Some(no_answer(format!(
                "HTTP {status}: a redirect, not followed"
            )));
        }
        if !(200..300).contains(&status) {
            return Some(no_answer(format!("HTTP {status}")));
        }
        let Some(body) = read_capped(resp).await else {
            return Some(no_answer(format!(
                "HTTP {status}, then the connection broke"
            )));
        };
        let Ok(body) = serde_json::from_slice::<Value>(&body) else {
            return Some(no_answer(format!(
                "HTTP {status}, but the answer is not JSON"
            )));
        };
        Some(match pointed(&body, &lookup.found) {
            Some(r) if r.trim().is_empty() => {
                no_answer(format!("HTTP {status}, but {} is empty", lookup.found))
            }
            Some(reference) => LookupAnswer::Found {
                reference,
                http_status: status,
            },
            None => LookupAnswer::Absent {
                http_status: status,
            },
        })
    }
}

#[cfg(test)]
#[path = "http_tests.rs"]
mod tests;
