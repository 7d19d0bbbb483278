//! Operation keys: the stable identity sent to destinations as the idempotency key.

use super::redact::find_card_numbers;

pub const MAX_KEY_LEN: usize = 128;

/// The characters of keys, runs and the names of operations, as a person reads them.
pub const ALPHABET: &str = "A-Z a-z 0-9 . _ : -";

/// The first character of `text` outside [`ALPHABET`], as a message shows it: quoted when it is
/// printable ASCII, else its code point (never the raw character, which may be an escape).
pub fn outside_alphabet(text: &str) -> Option<String> {
    let c = text
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | ':' | '-')))?;
    Some(if c.is_ascii_graphic() {
        format!("'{c}'")
    } else {
        format!("U+{:04X}", c as u32)
    })
}

/// Checks a key against the manual: 1-128 chars of `[A-Za-z0-9._:-]`, holding no card-like number.
/// The error names the rule broken but never echoes a key that holds a card number.
pub fn validate_key(key: &str) -> Result<(), String> {
    if key.is_empty() {
        return Err("bad key: a key must not be empty".into());
    }
    if key.chars().count() > MAX_KEY_LEN {
        return Err(format!(
            "bad key: a key has at most {MAX_KEY_LEN} characters"
        ));
    }
    if let Some(shown) = outside_alphabet(key) {
        return Err(format!(
            "bad key: character {shown} is not allowed (use {ALPHABET})"
        ));
    }
    if !find_card_numbers(key).is_empty() {
        return Err(
            "bad key: it holds a card-like number; keys must not embed customer data".into(),
        );
    }
    Ok(())
}

/// A run's id (manual: Runs): the key's alphabet, 1-128 characters, and the key's rule on customer
/// data, said of a run.
pub fn validate_run(run: &str) -> Result<(), String> {
    validate_key(run).map_err(|e| {
        e.replacen("bad key: a key", "bad run: a run", 1)
            .replacen("bad key: keys", "bad run: runs", 1)
            .replacen("bad key", "bad run", 1)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_ordinary_keys() {
        for k in [
            "onb-42-task",
            "crm:cust:9001",
            "a",
            "x.y_z",
            &"k".repeat(128),
            "order-20261201-1234",
        ] {
            assert!(validate_key(k).is_ok(), "{k}");
        }
    }

    #[test]
    fn refuses_bad_keys_without_echoing_card_numbers() {
        assert!(validate_key("").is_err());
        assert!(validate_key(&"k".repeat(129)).is_err());
        assert!(validate_key("has space").unwrap_err().contains("U+0020"));
        assert!(validate_key("a@b").is_err());
        assert!(validate_key("é").unwrap_err().contains("U+00E9"));
        let err = validate_key("pay-4111111111111111").unwrap_err();
        assert!(err.contains("card-like") && !err.contains("4111"), "{err}");
        assert!(validate_key("pay-4111-1111-1111-1111").is_err());
        // 16 digits that fail Luhn are just a number
        assert!(validate_key("order-1234567812345678").is_ok());
    }
}
