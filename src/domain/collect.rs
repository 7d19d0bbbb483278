//! The values a redaction removes, collected from a JSON text without building a `Value`.

use super::field_path::{FieldPath, PathSeg};
use super::patterns::{card_like_number, sensitive_key};
use super::payload::NUMBER_TOKEN;

/// Walks a JSON text collecting the values `redact_value` would remove, without building a
/// `Value`: a list row needs only these, and parsing into maps cost more than the query.
pub(super) struct Collect<'a, 'r> {
    pub(super) path: &'a mut Vec<PathSeg>,
    pub(super) rules: &'a [&'r FieldPath],
    pub(super) out: &'a mut Vec<String>,
    pub(super) sensitive: bool,
}

impl<'de> serde::de::DeserializeSeed<'de> for Collect<'_, '_> {
    type Value = ();
    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> serde::de::Visitor<'de> for Collect<'_, '_> {
    type Value = ();

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("JSON")
    }
    fn visit_bool<E>(self, _: bool) -> Result<(), E> {
        Ok(())
    }
    fn visit_unit<E>(self) -> Result<(), E> {
        Ok(())
    }
    fn visit_i64<E>(self, v: i64) -> Result<(), E> {
        if self.sensitive {
            self.out.push(v.to_string());
        }
        Ok(())
    }
    fn visit_u64<E>(self, v: u64) -> Result<(), E> {
        if self.sensitive {
            self.out.push(v.to_string());
        }
        Ok(())
    }
    fn visit_f64<E>(self, v: f64) -> Result<(), E> {
        if self.sensitive {
            self.out.push(v.to_string());
        }
        Ok(())
    }
    fn visit_str<E>(self, v: &str) -> Result<(), E> {
        if self.sensitive {
            self.out.push(v.to_string());
        }
        Ok(())
    }
    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let mut first = true;
        while let Some(k) = map.next_key::<std::borrow::Cow<'de, str>>()? {
            if std::mem::take(&mut first) && k == NUMBER_TOKEN {
                // a number as written (serde_json's arbitrary precision)
                let text: std::borrow::Cow<'de, str> = map.next_value()?;
                if self.sensitive || card_like_number(&text) {
                    self.out.push(text.into_owned());
                }
                return Ok(());
            }
            let by_name = self.sensitive || sensitive_key(&k);
            if self.rules.is_empty() {
                // no configured paths: the key's name alone decides, and no path is kept
                map.next_value_seed(Collect {
                    path: &mut *self.path,
                    rules: self.rules,
                    out: &mut *self.out,
                    sensitive: by_name,
                })?;
                continue;
            }
            self.path.push(PathSeg::Key(k.into_owned()));
            let sensitive = by_name || self.rules.iter().any(|r| r.matches(self.path));
            map.next_value_seed(Collect {
                path: &mut *self.path,
                rules: self.rules,
                out: &mut *self.out,
                sensitive,
            })?;
            self.path.pop();
        }
        Ok(())
    }
    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        let mut i = 0;
        loop {
            self.path.push(PathSeg::Index(i));
            let sensitive = self.sensitive
                || (!self.rules.is_empty() && self.rules.iter().any(|r| r.matches(self.path)));
            let more = seq
                .next_element_seed(Collect {
                    path: &mut *self.path,
                    rules: self.rules,
                    out: &mut *self.out,
                    sensitive,
                })?
                .is_some();
            self.path.pop();
            if !more {
                return Ok(());
            }
            i += 1;
        }
    }
}
