//! The filter syntax (manual: The filter), one parser for `list --where` and the console's `/`:
//! space-separated terms, `state:unknown,failed`, `wf:NAME`, `step:NAME`, `dest:NAME`,
//! `action:NAME`, `claimed:NAME|me|none|any`, `owner:TEAM|mine|none`, `group:ID`, `age>2h`,
//! `age<30m`, `key:PREFIX*`; a leading `-` negates a term; a bare word matches the key, workflow, step, destination, state or error text
//! (never a redacted value). An unknown qualifier or a bad value is an error naming the term.

use std::time::Duration;

use super::state::State;

/// Who holds the claim, as a filter asks.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Claimed {
    By(String),
    /// The operator asking.
    Me,
    /// No live claim.
    Nobody,
    /// Any live claim.
    Anyone,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Match {
    States(Vec<State>),
    Workflow(String),
    Step(String),
    Destination(String),
    Action(String),
    Claimed(Claimed),
    /// At least this old.
    AgeOver(Duration),
    /// Younger than this.
    AgeUnder(Duration),
    /// The key starts with this (`key:onb-*`).
    KeyPrefix(String),
    /// The key is exactly this.
    Key(String),
    /// The operations of this run (manual: Runs).
    Run(String),
    /// The exceptions of one group (manual: Owners and notifications), by its id.
    Group(String),
    /// `state:stalled`: a run's state, never an operation's (the console's view 1 shows the
    /// stalled runs; `settle runs --where state:stalled` lists them).
    Stalled,
    /// Lower-case text found in the key, workflow, step, destination, state or error.
    Word(String),
    /// The workflows a team owns (manual: Owners and notifications): `owner:TEAM`, `owner:mine`
    /// (the viewer's teams), `owner:none`. The ledger turns it into [`Match::Workflows`], by
    /// the config.
    Owner(Owner),
    /// In these workflows (`inside`), or in none of them.
    Workflows {
        names: Vec<String>,
        inside: bool,
    },
}

/// Whose workflows `owner:` asks for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Owner {
    Team(String),
    /// The viewer's teams.
    Mine,
    /// Nobody's.
    Nobody,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Term {
    pub negated: bool,
    pub matches: Match,
}

/// A parsed filter: every term must hold.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Filter {
    pub terms: Vec<Term>,
}

impl Filter {
    /// Parses a whole filter; the first bad term is the error.
    pub fn parse(text: &str) -> Result<Filter, String> {
        let terms = terms(text).into_iter().collect::<Result<Vec<_>, _>>()?;
        Ok(Filter { terms })
    }

    /// The terms that parse, and the first error (for a console whose user is still typing:
    /// the list narrows by what is already whole, and the line says what is not).
    pub fn lenient(text: &str) -> (Filter, Option<String>) {
        let mut filter = Filter::default();
        let mut error = None;
        for t in terms(text) {
            match t {
                Ok(t) => filter.terms.push(t),
                Err(e) => {
                    error.get_or_insert(e);
                }
            }
        }
        (filter, error)
    }

    pub fn is_empty(&self) -> bool {
        self.terms.is_empty()
    }

    /// The bare words (not negated), which the list checks again against what it shows.
    pub fn words(&self) -> impl Iterator<Item = &str> {
        self.terms.iter().filter_map(|t| match &t.matches {
            Match::Word(w) if !t.negated => Some(w.as_str()),
            _ => None,
        })
    }

    /// The negated bare words: checked only against what the list shows (matching them in the
    /// database would drop a row for a word found inside a redacted value, and so tell it).
    pub fn negated_words(&self) -> impl Iterator<Item = &str> {
        self.terms.iter().filter_map(|t| match &t.matches {
            Match::Word(w) if t.negated => Some(w.as_str()),
            _ => None,
        })
    }
}

/// The terms of a filter: separated by ASCII whitespace (space, tab, line breaks, form feed).
fn terms(text: &str) -> Vec<Result<Term, String>> {
    text.split(|c: char| c.is_ascii_whitespace())
        .filter(|t| !t.is_empty())
        .map(term)
        .collect()
}

/// The units an age of a filter is counted in, with their milliseconds.
const AGE_UNITS: [(&str, u64); 13] = [
    ("ms", 1),
    ("s", 1_000),
    ("sec", 1_000),
    ("secs", 1_000),
    ("m", 60_000),
    ("min", 60_000),
    ("mins", 60_000),
    ("h", 3_600_000),
    ("hr", 3_600_000),
    ("hrs", 3_600_000),
    ("d", 86_400_000),
    ("day", 86_400_000),
    ("days", 86_400_000),
];

/// An age of a filter (`2h`, `1d12h`): one to three parts, each a number of at most four digits
/// (leading zeros aside) and a unit, written without spaces. Bounded so that no age a filter can
/// say is too large to compare (at most 29,997 days), and so that the HTTP API's description can
/// say exactly which texts are ages.
fn filter_age(text: &str) -> Result<Duration, String> {
    // the term, with the text, is named by the caller
    let bad = || "an age reads 90s, 2h or 1d12h (up to 4 digits a part)".to_string();
    let (mut rest, mut total, mut parts) = (text, 0u64, 0);
    while !rest.is_empty() {
        let digits = rest
            .find(|c: char| !c.is_ascii_digit())
            .unwrap_or(rest.len());
        let number = rest[..digits].trim_start_matches('0');
        if digits == 0 || number.len() > 4 || parts == 3 {
            return Err(bad());
        }
        rest = &rest[digits..];
        let unit = rest
            .find(|c: char| c.is_ascii_digit())
            .unwrap_or(rest.len());
        let (_, per) = AGE_UNITS
            .iter()
            .find(|(u, _)| *u == &rest[..unit])
            .ok_or_else(bad)?;
        total += number.parse::<u64>().unwrap_or(0) * per;
        rest = &rest[unit..];
        parts += 1;
    }
    if parts == 0 {
        return Err(bad());
    }
    Ok(Duration::from_millis(total))
}

const QUALIFIERS: &str = "state, wf, step, dest, action, claimed, owner, group, age, key, run";

fn term(raw: &str) -> Result<Term, String> {
    let (negated, body) = match raw.strip_prefix('-') {
        Some(rest) if !rest.is_empty() => (true, rest),
        _ => (false, raw),
    };
    let shown = super::escape_text(raw);
    let bad = |why: String| format!("filter term '{shown}': {why}");
    if raw.contains('\0') {
        return Err(bad("a NUL character matches nothing stored".into()));
    }
    let matches = if let Some(rest) = body.strip_prefix("age>") {
        Match::AgeOver(filter_age(rest).map_err(bad)?)
    } else if let Some(rest) = body.strip_prefix("age<") {
        Match::AgeUnder(filter_age(rest).map_err(bad)?)
    } else if let Some((name, value)) = body.split_once(':') {
        if value.is_empty() {
            return Err(bad(format!("`{name}:` needs a value")));
        }
        match name {
            "state" if value == "stalled" => Match::Stalled,
            "state" => Match::States(
                value
                    .split(',')
                    .map(|s| State::parse(s).map_err(&bad))
                    .collect::<Result<_, _>>()?,
            ),
            "wf" | "workflow" => Match::Workflow(value.into()),
            "step" => Match::Step(value.into()),
            "dest" | "destination" => Match::Destination(value.into()),
            "action" => Match::Action(value.into()),
            "run" => Match::Run(value.into()),
            "group" if super::group::is_group_id(value) => Match::Group(value.into()),
            "group" => {
                return Err(bad(
                    "a group's id is 10 hex digits, as `settle groups` gives it".into(),
                ));
            }
            "owner" => Match::Owner(match value {
                "mine" => Owner::Mine,
                "none" => Owner::Nobody,
                team => Owner::Team(team.into()),
            }),
            "claimed" => Match::Claimed(match value {
                "me" => Claimed::Me,
                "none" => Claimed::Nobody,
                "any" => Claimed::Anyone,
                name => Claimed::By(name.into()),
            }),
            "key" => match value.strip_suffix('*') {
                Some(prefix) => Match::KeyPrefix(prefix.into()),
                None => Match::Key(value.into()),
            },
            other => {
                return Err(bad(format!(
                    "unknown qualifier `{}`: use {QUALIFIERS}",
                    super::escape_text(other)
                )));
            }
        }
    } else if body.starts_with("age") && body.len() > 3 && !body.as_bytes()[3].is_ascii_alphabetic()
    {
        return Err(bad("write age>DURATION or age<DURATION, e.g. age>2h".into()));
    } else {
        Match::Word(body.to_lowercase())
    };
    Ok(Term { negated, matches })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn one(text: &str) -> Term {
        let f = Filter::parse(text).unwrap();
        assert_eq!(f.terms.len(), 1, "{text}");
        f.terms[0].clone()
    }

    #[test]
    fn every_qualifier_of_the_filter() {
        let m = |t: &str| one(t).matches;
        assert_eq!(
            m("state:unknown,failed"),
            Match::States(vec![State::Unknown, State::Failed])
        );
        assert_eq!(m("wf:onboarding"), Match::Workflow("onboarding".into()));
        assert_eq!(m("step:create-task"), Match::Step("create-task".into()));
        assert_eq!(m("dest:sms"), Match::Destination("sms".into()));
        assert_eq!(m("action:send"), Match::Action("send".into()));
        assert_eq!(m("run:onb-42"), Match::Run("onb-42".into()));
        assert_eq!(m("group:0a1b2c3d4e"), Match::Group("0a1b2c3d4e".into()));
        assert!(
            Filter::parse("group:nope")
                .unwrap_err()
                .contains("10 hex digits")
        );
        assert_eq!(m("state:stalled"), Match::Stalled);
        assert_eq!(m("claimed:bob"), Match::Claimed(Claimed::By("bob".into())));
        assert_eq!(m("claimed:me"), Match::Claimed(Claimed::Me));
        assert_eq!(m("claimed:none"), Match::Claimed(Claimed::Nobody));
        assert_eq!(m("claimed:any"), Match::Claimed(Claimed::Anyone));
        assert_eq!(m("age>2h"), Match::AgeOver(Duration::from_secs(7200)));
        assert_eq!(m("age<30m"), Match::AgeUnder(Duration::from_secs(1800)));
        assert_eq!(m("key:onb-*"), Match::KeyPrefix("onb-".into()));
        assert_eq!(m("key:onb-42-task"), Match::Key("onb-42-task".into()));
        assert_eq!(m("Timeout"), Match::Word("timeout".into()));
        let t = one("-dest:crm");
        assert!(t.negated && t.matches == Match::Destination("crm".into()));
        let f = Filter::parse("  dest:sms   state:unknown  timeout ").unwrap();
        assert_eq!(f.terms.len(), 3);
        assert_eq!(f.words().collect::<Vec<_>>(), vec!["timeout"]);
    }

    #[test]
    fn a_bad_term_is_named() {
        for (text, says) in [
            (
                "dest:sms colour:red",
                "filter term 'colour:red': unknown qualifier `colour`",
            ),
            ("state:unknwn", "filter term 'state:unknwn': unknown state"),
            ("age>soon", "filter term 'age>soon'"),
            ("dest:", "`dest:` needs a value"),
            ("age=2h", "write age>DURATION"),
        ] {
            let err = Filter::parse(text).unwrap_err();
            assert!(err.contains(says), "{text}: {err}");
        }
        // ages: up to three parts of up to four digits, no space inside a term
        for (text, ms) in [
            ("age>90s", 90_000),
            ("age>1d12h", 129_600_000),
            ("age<00005m", 300_000),
            ("age>9999d", 863_913_600_000),
            ("age>1h1m1s", 3_661_000),
            ("age>250ms", 250),
        ] {
            let m = one(text).matches;
            assert!(
                m == Match::AgeOver(Duration::from_millis(ms))
                    || m == Match::AgeUnder(Duration::from_millis(ms)),
                "{text}: {m:?}"
            );
        }
        for text in [
            "age>10000d",
            "age>1d1h1m1s",
            "age>2 h",
            "age>2hours",
            "age>h",
            "age>",
            "age>2h\u{3000}",
            "age>+2h",
        ] {
            let err = Filter::parse(text).unwrap_err();
            assert!(
                err.contains("bad age") || err.contains("filter term"),
                "{text}: {err}"
            );
        }
        // ASCII whitespace separates terms; other spaces are part of one
        assert_eq!(
            Filter::parse("dest:a\tstate:failed\nx")
                .unwrap()
                .terms
                .len(),
            3
        );
        assert_eq!(
            one("wf:a\u{a0}b").matches,
            Match::Workflow("a\u{a0}b".into())
        );
        assert!(Filter::parse("x\0y").unwrap_err().contains("NUL"));
        // a word may be anything without a colon, unless it begins an age
        assert_eq!(one("AGE>2h").matches, Match::Word("age>2h".into()));
        assert_eq!(one("--x").matches, Match::Word("-x".into()));
        assert!(one("--x").negated);
        assert_eq!(one("-").matches, Match::Word("-".into()));
        assert_eq!(one("agenda").matches, Match::Word("agenda".into()));
        assert!(Filter::parse("age2h").is_err());
        assert!(Filter::parse("ageé").is_err());
        assert_eq!(one("agé").matches, Match::Word("agé".into()));
        // while typing: the whole terms hold, the error is said
        let (f, err) = Filter::lenient("dest:sms state:");
        assert_eq!(f.terms.len(), 1);
        assert!(err.unwrap().contains("`state:` needs a value"));
    }
}
