//! Names (workflow, step, destination, action, operator) identify automations, systems and people;
//! they are shown everywhere unredacted, so they must never carry customer data, and the names
//! settle acts under itself cannot be taken by a person. The names an operation is recorded with
//! (workflow, step, destination, action) use the keys' alphabet: they are filter terms, path
//! segments of the HTTP API, metric labels and columns of a table, where a space, a quote or a
//! character two columns wide would break each.

use super::patterns::{find_bearer_tokens, find_card_numbers, find_emails, is_hostile};

/// The actors settle itself writes as: its own automatic actions, and the dispatcher's attempts.
pub const SYSTEM_NAMES: [&str; 2] = ["settle", "dispatcher"];

pub const MAX_NAME_LEN: usize = 128;

/// What kind of customer data a text holds, if any: an email address, a card-like number (whatever
/// separates its digits) or a bearer token.
pub fn customer_data(text: &str) -> Option<&'static str> {
    if !find_emails(text).is_empty() {
        Some("an email address")
    } else if !find_card_numbers(text).is_empty() {
        Some("a card-like number")
    } else if !find_bearer_tokens(text).is_empty() {
        Some("a bearer token")
    } else {
        None
    }
}

/// Checks a name: 1-128 characters (or none, where `may_be_empty`), no control, bidi or zero-width
/// characters, no customer data. The error never repeats the value.
pub fn validate_name(what: &str, value: &str, may_be_empty: bool) -> Result<(), String> {
    if value.is_empty() {
        return if may_be_empty {
            Ok(())
        } else {
            Err(format!("{what} must not be empty"))
        };
    }
    if value.trim().is_empty() {
        return Err(format!("{what} must not be blank"));
    }
    if value.chars().count() > MAX_NAME_LEN {
        return Err(format!("{what} has at most {MAX_NAME_LEN} characters"));
    }
    if value.chars().any(is_hostile) {
        return Err(format!(
            "{what} must not hold control, bidi or zero-width characters"
        ));
    }
    if let Some(kind) = customer_data(value) {
        return Err(format!(
            "{what} must not hold customer data (it holds {kind}); names identify automations, systems and people"
        ));
    }
    Ok(())
}

/// Checks a name an operation is recorded with (workflow, step, destination, action): a
/// name's rules, in the keys' alphabet. The error says the rule, never the value.
pub fn validate_op_name(what: &str, value: &str, may_be_empty: bool) -> Result<(), String> {
    // customer data first: the more useful of the two reasons
    validate_name(what, value, may_be_empty)?;
    match super::key::outside_alphabet(value) {
        Some(shown) => Err(format!(
            "{what}: character {shown} is not allowed (names use {})",
            super::key::ALPHABET
        )),
        None => Ok(()),
    }
}

/// Checks an operator's name: a valid name that is not one of settle's own.
pub fn validate_operator(name: &str) -> Result<(), String> {
    validate_name("operator name", name, false)?;
    if SYSTEM_NAMES
        .iter()
        .any(|s| s.eq_ignore_ascii_case(name.trim()))
    {
        return Err(format!(
            "operator name '{name}' is reserved for settle itself; choose your own"
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_without_customer_data_pass() {
        for n in [
            "onboarding",
            "crm-sync",
            "create task",
            "upsert_customer",
            "ops.team:7",
            "x",
        ] {
            assert_eq!(validate_name("workflow", n, false), Ok(()), "{n}");
        }
        assert_eq!(validate_name("step", "", true), Ok(()));
    }

    #[test]
    fn names_with_customer_data_or_hostile_characters_are_refused_without_echo() {
        for (n, why) in [
            ("onb a@b.co", "email"),
            ("pay 4111111111111111", "card"),
            ("ord_4111.1111.1111.1111", "card"),
            ("x 4111/1111/1111/1111", "card"),
            ("auth Bearer abc.def", "bearer"),
            ("a\u{202e}b", "bidi"),
            ("a\nb", "control"),
            ("", "empty"),
            ("   ", "blank"),
        ] {
            let err = validate_name("workflow", n, false).unwrap_err();
            assert!(err.starts_with("workflow must not"), "{n}: {err}");
            assert!(
                n.is_empty() || n.trim().is_empty() || !err.contains(n),
                "{why}: the value is not repeated: {err}"
            );
        }
        assert!(validate_name("w", &"x".repeat(129), false).is_err());
    }

    #[test]
    fn an_operations_names_use_the_keys_alphabet() {
        for n in [
            "onboarding",
            "crm-sync",
            "upsert_customer",
            "ops.team:7",
            "x",
        ] {
            assert_eq!(validate_op_name("workflow", n, false), Ok(()), "{n}");
        }
        assert_eq!(validate_op_name("step", "", true), Ok(()));
        for (n, shown) in [
            ("ü?\"", "U+00FC"),
            ("create task", "U+0020"),
            ("a\"b", "'\"'"),
            ("a/b", "'/'"),
            ("数据", "U+6570"),
        ] {
            let err = validate_op_name("workflow", n, false).unwrap_err();
            assert_eq!(
                err,
                format!(
                    "workflow: character {shown} is not allowed (names use A-Z a-z 0-9 . _ : -)"
                ),
                "{n}"
            );
        }
        assert!(validate_op_name("workflow", "", false).is_err());
        assert!(validate_op_name("w", &"x".repeat(129), false).is_err());
        assert!(
            validate_op_name("workflow", "a\u{1b}[31m", false)
                .unwrap_err()
                .contains("control")
        );
        assert!(
            validate_op_name("workflow", "onb a@b.co", false)
                .unwrap_err()
                .contains("customer data")
        );
        // a card-like number in the alphabet is still customer data
        let err = validate_op_name("workflow", "pay-4111-1111-1111-1111", false).unwrap_err();
        assert!(
            err.contains("customer data") && !err.contains("4111"),
            "{err}"
        );
    }

    #[test]
    fn settle_s_own_names_are_reserved() {
        for n in ["settle", "Settle", "dispatcher"] {
            assert!(
                validate_operator(n).unwrap_err().contains("reserved"),
                "{n}"
            );
        }
        assert!(validate_operator("alice").is_ok());
        assert!(validate_operator("").is_err());
    }
}
