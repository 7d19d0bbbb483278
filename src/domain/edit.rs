//! A correction's edits of a payload (manual: Correcting a request): `PATH=VALUE` to set a field,
//! a path alone to unset one. PATH names one field as the redaction rules do (`customer.email`,
//! `items[0].sku`), without wildcards; VALUE is JSON (`12`, `true`, `"a@b.example"`), or taken as
//! a string when it is not valid JSON.

use serde_json::Value;

/// One edit of a payload.
#[derive(Clone, Debug, PartialEq)]
pub enum Edit {
    Set { path: String, value: Value },
    Unset { path: String },
}

impl Edit {
    /// `PATH=VALUE`, as `--set` takes it.
    pub fn set(arg: &str) -> Result<Edit, String> {
        let (path, value) = arg.split_once('=').ok_or_else(|| {
            format!("--set {arg}: expected PATH=VALUE (e.g. email=\"a@b.example\")")
        })?;
        parse_path(path)?;
        let value = serde_json::from_str(value).unwrap_or_else(|_| Value::String(value.into()));
        Ok(Edit::Set {
            path: path.into(),
            value,
        })
    }

    /// `PATH`, as `--unset` takes it.
    pub fn unset(path: &str) -> Result<Edit, String> {
        parse_path(path)?;
        Ok(Edit::Unset { path: path.into() })
    }

    pub fn path(&self) -> &str {
        match self {
            Edit::Set { path, .. } | Edit::Unset { path } => path,
        }
    }
}

/// The most segments a path may have: one fewer than a payload's depth, the object it starts
/// in being the first level.
const MAX_PATH: usize = crate::domain::payload::MAX_DEPTH - 1;

#[derive(Clone, Debug, PartialEq)]
enum Seg {
    Key(String),
    Index(usize),
}

fn parse_path(text: &str) -> Result<Vec<Seg>, String> {
    let shown = || match text.chars().count() > 60 {
        true => format!("{}…", text.chars().take(60).collect::<String>()),
        false => text.to_string(),
    };
    let bad = |why: &str| format!("bad field path '{}': {why}", shown());
    let mut segs = Vec::new();
    for part in text.split('.') {
        // a field at this depth could not be stored and read again (the payload's own limit)
        if segs.len() >= MAX_PATH {
            return Err(bad(&format!(
                "deeper than {MAX_PATH} fields (a payload nests at most {} levels)",
                crate::domain::payload::MAX_DEPTH
            )));
        }
        let (name, mut rest) = match part.find('[') {
            Some(i) => (&part[..i], &part[i..]),
            None => (part, ""),
        };
        match name {
            "" => return Err(bad("empty segment")),
            n if n.contains(['*', ']', '=']) => return Err(bad("a field's name, no wildcard")),
            n => segs.push(Seg::Key(n.to_string())),
        }
        while !rest.is_empty() {
            let close = rest.find(']').ok_or_else(|| bad("unclosed '['"))?;
            let n = rest[1..close]
                .parse()
                .map_err(|_| bad("an index is a number"))?;
            segs.push(Seg::Index(n));
            if segs.len() > MAX_PATH {
                return Err(bad(&format!(
                    "deeper than {MAX_PATH} fields (a payload nests at most {} levels)",
                    crate::domain::payload::MAX_DEPTH
                )));
            }
            rest = &rest[close + 1..];
            if !rest.is_empty() && !rest.starts_with('[') {
                return Err(bad("unexpected text after ']'"));
            }
        }
    }
    Ok(segs)
}

/// The payload with `edits` made, in order; refused (one line) where a path does not fit it: an
/// index past an array's end, a field inside something that is not an object, a field to unset
/// that is not there. Missing objects on the way to a field set are made.
pub fn apply_edits(payload: &Value, edits: &[Edit]) -> Result<Value, String> {
    let mut out = payload.clone();
    for edit in edits {
        let segs = parse_path(edit.path())?;
        let (last, parents) = segs.split_last().ok_or("an empty field path")?;
        let mut at = &mut out;
        for (i, seg) in parents.iter().enumerate() {
            let creating =
                matches!(edit, Edit::Set { .. }) && matches!(segs.get(i + 1), Some(Seg::Key(_)));
            at = step(at, seg, creating).ok_or_else(|| missing(edit.path()))?;
        }
        match (edit, last, at) {
            (Edit::Set { value, .. }, Seg::Key(k), Value::Object(m)) => {
                m.insert(k.clone(), value.clone());
            }
            (Edit::Set { value, .. }, Seg::Index(n), Value::Array(a)) if *n < a.len() => {
                a[*n] = value.clone();
            }
            (Edit::Unset { .. }, Seg::Key(k), Value::Object(m)) if m.contains_key(k) => {
                m.remove(k);
            }
            (Edit::Unset { .. }, Seg::Index(n), Value::Array(a)) if *n < a.len() => {
                a.remove(*n);
            }
            _ => return Err(missing(edit.path())),
        }
    }
    crate::domain::payload::check_payload(&out)?;
    Ok(out)
}

fn step<'a>(at: &'a mut Value, seg: &Seg, creating: bool) -> Option<&'a mut Value> {
    match (seg, at) {
        (Seg::Key(k), Value::Object(m)) => {
            if creating {
                Some(
                    m.entry(k.clone())
                        .or_insert_with(|| Value::Object(Default::default())),
                )
            } else {
                m.get_mut(k)
            }
        }
        (Seg::Index(n), Value::Array(a)) => a.get_mut(*n),
        _ => None,
    }
}

fn missing(path: &str) -> String {
    format!("the payload has no field {path} to change")
}

/// The value at `path` in `payload`, if there is one (a preview's before and after).
pub fn value_at<'a>(payload: &'a Value, path: &str) -> Option<&'a Value> {
    let mut at = payload;
    for seg in parse_path(path).ok()? {
        at = match (seg, at) {
            (Seg::Key(k), Value::Object(m)) => m.get(&k)?,
            (Seg::Index(n), Value::Array(a)) => a.get(n)?,
            _ => return None,
        };
    }
    Some(at)
}

/// The payload's fields that a correction may set, as paths (`customer.email`, `items[0].sku`)
/// with their values, in order: every value that is not an object or an array, whose names a
/// path can say.
pub fn fields(payload: &Value) -> Vec<(String, &Value)> {
    fn walk<'a>(v: &'a Value, path: String, out: &mut Vec<(String, &'a Value)>) {
        match v {
            Value::Object(m) => {
                for (k, child) in m {
                    if k.is_empty() || !k.chars().all(|c| c.is_alphanumeric() || "_-".contains(c)) {
                        continue;
                    }
                    let p = if path.is_empty() {
                        k.clone()
                    } else {
                        format!("{path}.{k}")
                    };
                    walk(child, p, out);
                }
            }
            Value::Array(items) => {
                for (i, child) in items.iter().enumerate() {
                    walk(child, format!("{path}[{i}]"), out);
                }
            }
            leaf if !path.is_empty() => out.push((path, leaf)),
            _ => {}
        }
    }
    let mut out = Vec::new();
    walk(payload, String::new(), &mut out);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn set(a: &str) -> Edit {
        Edit::set(a).unwrap()
    }

    #[test]
    fn a_value_is_json_or_else_a_string() {
        assert_eq!(
            set("email=\"a@b.example\""),
            Edit::Set {
                path: "email".into(),
                value: json!("a@b.example")
            }
        );
        assert_eq!(
            set("n=12"),
            Edit::Set {
                path: "n".into(),
                value: json!(12)
            }
        );
        assert_eq!(
            set("ok=true"),
            Edit::Set {
                path: "ok".into(),
                value: json!(true)
            }
        );
        assert_eq!(
            set("c=DE"),
            Edit::Set {
                path: "c".into(),
                value: json!("DE")
            }
        );
        assert_eq!(
            set("c=a=b"),
            Edit::Set {
                path: "c".into(),
                value: json!("a=b")
            }
        );
        assert!(Edit::set("email").unwrap_err().contains("PATH=VALUE"));
        assert!(
            Edit::set("items[*].sku=1")
                .unwrap_err()
                .contains("bad field path")
        );
        assert!(Edit::set("a..b=1").unwrap_err().contains("empty segment"));
        assert!(Edit::unset("items[x]").unwrap_err().contains("number"));
    }

    #[test]
    fn edits_change_the_fields_they_name_and_nothing_else() {
        let p = json!({"email": "nope", "customer": {"country": "FR"}, "items": [{"sku": "A"}, {"sku": "B"}]});
        let out = apply_edits(
            &p,
            &[
                set("email=\"a@b.example\""),
                set("customer.country=\"DE\""),
                set("items[1].sku=\"C\""),
                set("meta.source=\"fix\""),
                Edit::unset("items[0]").unwrap(),
            ],
        )
        .unwrap();
        assert_eq!(
            out,
            json!({"email": "a@b.example", "customer": {"country": "DE"},
                   "items": [{"sku": "C"}], "meta": {"source": "fix"}})
        );
        assert_eq!(value_at(&out, "items[0].sku"), Some(&json!("C")));
        let listed: Vec<String> = fields(&out).into_iter().map(|(p, _)| p).collect();
        assert_eq!(
            listed,
            ["customer.country", "email", "items[0].sku", "meta.source"]
        );
        assert_eq!(value_at(&out, "customer.nope"), None);
    }

    #[test]
    fn a_path_that_does_not_fit_is_refused() {
        let p = json!({"email": "x", "items": [1]});
        for bad in [
            set("items[3]=1"),
            set("email.domain=1"),
            Edit::unset("phone").unwrap(),
        ] {
            assert!(
                apply_edits(&p, std::slice::from_ref(&bad))
                    .unwrap_err()
                    .contains("no field"),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn a_path_deeper_than_a_payload_may_nest_is_refused_in_one_line() {
        let deep = vec!["a"; 60_000].join(".");
        let e = Edit::set(&format!("{deep}=1")).unwrap_err();
        assert!(
            e.contains("deeper than 126 fields") && !e.contains('\n'),
            "{e}"
        );
        assert!(e.len() < 200, "the path is not repeated whole: {e}");
        let e = Edit::unset(&format!("a{}", "[0]".repeat(500))).unwrap_err();
        assert!(e.contains("deeper than"), "{e}");
        // at the limit it is taken, and the payload it makes can be stored and read again
        let edge = vec!["a"; 126].join(".");
        let out = apply_edits(&json!({}), &[set(&format!("{edge}=[1]"))]).unwrap();
        let text = out.to_string();
        assert!(crate::domain::payload::parse_payload(&text).is_ok());
        // a value that would carry it past the limit is refused, not stored
        let e = apply_edits(&json!({}), &[set(&format!("{edge}=[[1]]"))]).unwrap_err();
        assert!(e.contains("deeper than 127"), "{e}");
        // and one level more cannot be read by any entrance
        let deeper = format!("{}1{}", "[".repeat(128), "]".repeat(128));
        assert!(crate::domain::payload::parse_payload(&deeper).is_err());
    }
}
