//! A destination's templates: `{key}` and `{payload.x}` filled in, `${ENV}` expanded, form bodies.

use serde_json::Value;

use crate::ledger::StartedOp;

/// Reads `${NAME}` from the environment; the text with them filled in and the values read, or
/// the name of a variable that is not set.
pub(super) fn expand_env(
    text: &str,
    env: &dyn Fn(&str) -> Option<String>,
) -> std::result::Result<(String, Vec<String>), String> {
    let mut out = String::with_capacity(text.len());
    let mut read = Vec::new();
    let mut rest = text;
    while let Some(start) = rest.find("${") {
        let Some(len) = rest[start + 2..].find('}') else {
            break;
        };
        let name = &rest[start + 2..start + 2 + len];
        let value = env(name).ok_or_else(|| name.to_string())?;
        out.push_str(&rest[..start]);
        out.push_str(&value);
        read.push(value);
        rest = &rest[start + 3 + len..];
    }
    out.push_str(rest);
    Ok((out, read))
}

/// The placeholders a URL may hold: `{key}`, `{action}`, `{payload.a.b}`.
pub(super) fn check_template(url: &str) -> std::result::Result<(), String> {
    placeholders(url).try_for_each(|p| match p {
        "key" | "action" => Ok(()),
        p if p
            .strip_prefix("payload.")
            .is_some_and(|path| !path.is_empty()) =>
        {
            Ok(())
        }
        other => Err(format!(
            "unknown placeholder {{{other}}}: use {{key}}, {{action}} or {{payload.a.b}}"
        )),
    })
}

pub(super) fn placeholders(text: &str) -> impl Iterator<Item = &str> {
    text.split('{')
        .skip(1)
        .filter_map(|part| part.split_once('}').map(|(p, _)| p))
}

/// A started operation's payload, parsed only when a placeholder or a form body needs it.
pub(super) struct Payload<'a> {
    pub(super) text: &'a str,
    pub(super) value: std::cell::OnceCell<Option<Value>>,
}

impl<'a> Payload<'a> {
    pub(super) fn new(text: &'a str) -> Payload<'a> {
        Payload {
            text,
            value: std::cell::OnceCell::new(),
        }
    }

    pub(super) fn value(&self) -> std::result::Result<&Value, String> {
        self.value
            .get_or_init(|| serde_json::from_str(self.text).ok())
            .as_ref()
            .ok_or_else(|| "the payload is not JSON".to_string())
    }

    /// A payload value by a dotted path, as text.
    pub(super) fn at(&self, path: &str) -> std::result::Result<String, String> {
        let pointer: String = path.split('.').map(|p| format!("/{p}")).collect();
        match self.value()?.pointer(&pointer) {
            Some(Value::String(s)) => Ok(s.clone()),
            Some(v @ (Value::Number(_) | Value::Bool(_))) => Ok(v.to_string()),
            _ => Err(format!("the payload has no value at {path}")),
        }
    }
}

#[derive(Clone, Copy)]
pub(super) enum Encode {
    Url,
    None,
}

/// A template with its placeholders filled in.
pub(super) fn fill(
    template: &str,
    op: &StartedOp,
    payload: &Payload,
    encode: Encode,
) -> std::result::Result<String, String> {
    if !template.contains('{') {
        return Ok(template.to_string());
    }
    let mut out = String::with_capacity(template.len() + op.key.len());
    let mut rest = template;
    while let Some(start) = rest.find('{') {
        let Some(len) = rest[start + 1..].find('}') else {
            break;
        };
        let name = &rest[start + 1..start + 1 + len];
        let value = match name {
            "key" => op.key.clone(),
            "action" => op.action.clone(),
            _ => match name.strip_prefix("payload.") {
                Some(path) => payload.at(path)?,
                None => rest[start..start + 2 + len].to_string(),
            },
        };
        out.push_str(&rest[..start]);
        match encode {
            Encode::Url => percent_encode(&value, &mut out),
            Encode::None => out.push_str(&value),
        }
        rest = &rest[start + 2 + len..];
    }
    out.push_str(rest);
    Ok(out)
}

/// A lookup body with the placeholders of its strings filled in.
pub(super) fn fill_json(
    template: &Value,
    op: &StartedOp,
    payload: &Payload,
) -> std::result::Result<Value, String> {
    Ok(match template {
        Value::String(s) => Value::String(fill(s, op, payload, Encode::None)?),
        Value::Array(items) => Value::Array(
            items
                .iter()
                .map(|v| fill_json(v, op, payload))
                .collect::<std::result::Result<_, _>>()?,
        ),
        Value::Object(map) => Value::Object(
            map.iter()
                .map(|(k, v)| Ok((k.clone(), fill_json(v, op, payload)?)))
                .collect::<std::result::Result<_, String>>()?,
        ),
        other => other.clone(),
    })
}

/// Percent-encodes all but the unreserved characters (RFC 3986).
pub(super) fn percent_encode(text: &str, out: &mut String) {
    for b in text.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
}

/// A JSON object as `application/x-www-form-urlencoded`, nested keys as `a[b]=` and arrays as
/// `a[0]=`, as Stripe reads them; `null` is sent empty.
pub(super) fn form_body(payload: &Value) -> std::result::Result<String, String> {
    pub(super) fn walk(prefix: &str, v: &Value, pairs: &mut Vec<(String, String)>) {
        let nested = |k: &str| {
            if prefix.is_empty() {
                k.to_string()
            } else {
                format!("{prefix}[{k}]")
            }
        };
        match v {
            Value::Object(m) => m.iter().for_each(|(k, v)| walk(&nested(k), v, pairs)),
            Value::Array(a) => a
                .iter()
                .enumerate()
                .for_each(|(i, v)| walk(&nested(&i.to_string()), v, pairs)),
            Value::String(s) => pairs.push((prefix.to_string(), s.clone())),
            Value::Null => pairs.push((prefix.to_string(), String::new())),
            other => pairs.push((prefix.to_string(), other.to_string())),
        }
    }
    if !payload.is_object() {
        return Err("a form body needs a JSON object as payload".into());
    }
    let mut pairs = Vec::new();
    walk("", payload, &mut pairs);
    let mut out = String::new();
    for (i, (k, v)) in pairs.iter().enumerate() {
        if i > 0 {
            out.push('&');
        }
        percent_encode(k, &mut out);
        out.push('=');
        percent_encode(v, &mut out);
    }
    Ok(out)
}
