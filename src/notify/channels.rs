//! One message to one channel (manual: Owners and notifications): `slack` posts `{"text"}`,
//! `webhook` posts the document with its id and, given a secret, its signature, `email` sends a
//! plain-text mail over SMTP. An answer names what came back, never the URL or a secret.

use std::time::Duration;

use sha2::{Digest, Sha256};

use crate::config::{ChannelConfig, ChannelKind};
use crate::ledger::{Medium, Message, Sent, shown_in};

/// Values this process gives in place of environment variables (the demo's own receiver).
static GIVEN: std::sync::Mutex<std::collections::BTreeMap<String, String>> =
    std::sync::Mutex::new(std::collections::BTreeMap::new());

/// `var` reads as `value` in this process, where the environment does not set it.
pub fn give_variable(var: &str, value: String) {
    GIVEN
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .insert(var.to_string(), value);
}

/// A channel's variable: the environment's, else one this process gave.
pub(super) fn variable(var: &str) -> Option<String> {
    std::env::var(var)
        .ok()
        .filter(|v| !v.is_empty())
        .or_else(|| {
            GIVEN
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .get(var)
                .cloned()
        })
}

/// How long one try may take.
pub const TRY_TIMEOUT: Duration = Duration::from_secs(10);

/// Sends `m` through `channel` (its config `c`): what came back.
pub async fn send(http: &reqwest::Client, channel: &str, c: &ChannelConfig, m: &Message) -> Sent {
    match c.kind {
        ChannelKind::Slack => {
            let body = serde_json::json!({ "text": m.text_for(Medium::Slack) }).to_string();
            post(http, channel, c, body, Vec::new()).await
        }
        ChannelKind::Webhook => {
            let body = serde_json::to_string(m).unwrap_or_default();
            let mut headers = vec![("Settle-Notification-Id", m.id.clone())];
            if let Some(var) = &c.secret_env {
                let Some(secret) = variable(var) else {
                    return Sent::Failed(format!("the variable {var} (the secret) is not set"));
                };
                let t = chrono::Utc::now().timestamp();
                headers.push(("Settle-Signature", signature(&secret, t, &body)));
            }
            post(http, channel, c, body, headers).await
        }
        ChannelKind::Email => mail(channel, c, m).await,
    }
}

/// `t=UNIX,v1=HEX`, HEX the HMAC-SHA256 of `"{t}.{body}"` under `secret`.
pub fn signature(secret: &str, t: i64, body: &str) -> String {
    let mac = hmac_sha256(secret.as_bytes(), format!("{t}.{body}").as_bytes());
    let hex: String = mac.iter().map(|b| format!("{b:02x}")).collect();
    format!("t={t},v1={hex}")
}

fn hmac_sha256(key: &[u8], msg: &[u8]) -> [u8; 32] {
    let mut k = [0u8; 64];
    if key.len() > 64 {
        k[..32].copy_from_slice(&Sha256::digest(key));
    } else {
        k[..key.len()].copy_from_slice(key);
    }
    let mut inner = Sha256::new();
    inner.update(k.map(|b| b ^ 0x36));
    inner.update(msg);
    let mut outer = Sha256::new();
    outer.update(k.map(|b| b ^ 0x5c));
    outer.update(inner.finalize());
    outer.finalize().into()
}

async fn post(
    http: &reqwest::Client,
    channel: &str,
    c: &ChannelConfig,
    body: String,
    headers: Vec<(&'static str, String)>,
) -> Sent {
    let var = c.url_env.as_deref().unwrap_or("");
    let Some(url) = variable(var) else {
        return Sent::Failed(format!(
            "the variable {var} (the URL of {channel}) is not set"
        ));
    };
    let mut req = http
        .post(url)
        .timeout(TRY_TIMEOUT)
        .header("Content-Type", "application/json")
        .body(body);
    for (name, value) in headers {
        req = req.header(name, value);
    }
    match req.send().await {
        Ok(r) if r.status().is_success() => Sent::Ok(format!("HTTP {}", r.status().as_u16())),
        // never followed: it would post the message, signed, wherever the answer points
        Ok(r) if r.status().is_redirection() => {
            let to = crate::outbound::location(r.headers().get("location"));
            Sent::Failed(format!(
                "HTTP {}: a redirect to {}, not followed: has the channel's URL moved?",
                r.status().as_u16(),
                crate::outbound::origin(&to)
            ))
        }
        Ok(r) => Sent::Failed(format!("HTTP {}", r.status().as_u16())),
        Err(e) => Sent::Failed(why(&e.without_url())),
    }
}

/// What went wrong with a request, without its URL.
fn why(e: &reqwest::Error) -> String {
    if e.is_timeout() {
        format!("no answer within {} s", TRY_TIMEOUT.as_secs())
    } else if e.is_connect() {
        "could not connect".into()
    } else {
        e.to_string()
    }
}

async fn mail(channel: &str, c: &ChannelConfig, m: &Message) -> Sent {
    use lettre::message::{Mailbox, header::ContentType};
    use lettre::transport::smtp::authentication::Credentials;
    use lettre::transport::smtp::client::{Tls, TlsParameters};
    use lettre::{AsyncSmtpTransport, AsyncTransport, Tokio1Executor};

    let Some((tls, host, port)) = c.smtp.as_deref().and_then(smtp_server) else {
        return Sent::Failed(format!("{channel}: smtp is not smtp://HOST:PORT"));
    };
    let mailbox = |a: &str| {
        a.parse::<Mailbox>()
            .map_err(|_| format!("{channel}: not an address"))
    };
    let mut builder = lettre::Message::builder()
        .subject(shown_in(&m.headline(), Medium::Plain))
        .message_id(Some(format!("<{}@settle>", m.id)))
        .header(ContentType::TEXT_PLAIN);
    match c.from.as_deref().map(mailbox) {
        Some(Ok(f)) => builder = builder.from(f),
        Some(Err(e)) => return Sent::Failed(e),
        None => return Sent::Failed(format!("{channel}: no from")),
    }
    for to in &c.to {
        match mailbox(to) {
            Ok(t) => builder = builder.to(t),
            Err(e) => return Sent::Failed(e),
        }
    }
    let email = match builder.body(m.text()) {
        Ok(e) => e,
        Err(e) => return Sent::Failed(format!("{channel}: {e}")),
    };
    let params = match TlsParameters::new(host.clone()) {
        Ok(p) => p,
        Err(e) => return Sent::Failed(format!("{channel}: {e}")),
    };
    let mut transport = AsyncSmtpTransport::<Tokio1Executor>::builder_dangerous(host)
        .port(port)
        .timeout(Some(TRY_TIMEOUT))
        .tls(if tls {
            Tls::Wrapper(params)
        } else {
            Tls::Opportunistic(params)
        });
    if let (Ok(user), Ok(password)) = (
        std::env::var("SETTLE_SMTP_USER"),
        std::env::var("SETTLE_SMTP_PASSWORD"),
    ) {
        transport = transport.credentials(Credentials::new(user, password));
    }
    match transport.build().send(email).await {
        Ok(r) => Sent::Ok(format!("SMTP {}", r.code())),
        Err(e) => Sent::Failed(match e.status() {
            Some(code) => format!("SMTP {code}"),
            None if e.is_timeout() => format!("no answer within {} s", TRY_TIMEOUT.as_secs()),
            None => "could not deliver to the mail server".into(),
        }),
    }
}

/// `smtp://HOST:PORT` (STARTTLS when offered) or `smtps://HOST:PORT` (TLS from the start).
fn smtp_server(url: &str) -> Option<(bool, String, u16)> {
    let (tls, rest) = match url.split_once("://")? {
        ("smtp", rest) => (false, rest),
        ("smtps", rest) => (true, rest),
        _ => return None,
    };
    let rest = rest.trim_end_matches('/');
    let (host, port) = match rest.rsplit_once(':') {
        Some((h, p)) => (h, p.parse().ok()?),
        None => (rest, if tls { 465 } else { 587 }),
    };
    (!host.is_empty()).then(|| (tls, host.to_string(), port))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_signature_is_rfc_4231_hmac_sha256() {
        // RFC 4231 test case 2
        let mac = hmac_sha256(b"Jefe", b"what do ya want for nothing?");
        let hex: String = mac.iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(
            hex,
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
        assert!(signature("Jefe", 7, "x").starts_with("t=7,v1="));
    }

    #[test]
    fn smtp_urls() {
        assert_eq!(
            smtp_server("smtp://mail.internal:587"),
            Some((false, "mail.internal".into(), 587))
        );
        assert_eq!(smtp_server("smtps://m:465"), Some((true, "m".into(), 465)));
        assert_eq!(smtp_server("http://m:25"), None);
    }
}
