//! The Activity view's filter (the console's view 5): `actor:NAME`, `kind:KIND`, words; and which
//! events are automation's rather than a person's, which the view hides unless asked.

/// Event kinds written by automation (the dispatcher, a workflow's own recording and attempts,
/// the sweep): the Activity view hides them unless asked (`a`), so that people's actions are
/// not buried under a running dispatcher's.
pub const AUTOMATION_KINDS: [&str; 7] = [
    "recorded",
    "attempt_started",
    "attempt",
    "looked_up",
    "conflict",
    "swept",
    "auto_paused",
];

/// The SQL condition of a person's event: [`AUTOMATION_KINDS`] and the system names, spelt
/// as the partial index `events_people` (schema 6) spells them.
pub const PEOPLE_ONLY: &str = "kind NOT IN ('recorded', 'attempt_started', 'attempt', 'looked_up', 'conflict', 'swept', 'auto_paused') AND actor NOT IN ('settle', 'dispatcher')";

/// Whether an event is automation's rather than a person's: its kind, or a system actor.
pub fn is_automation(actor: &str, kind: &str) -> bool {
    AUTOMATION_KINDS.contains(&kind) || super::names::SYSTEM_NAMES.contains(&actor)
}

/// The Activity view's filter: `actor:NAME`, `kind:claimed,closed`, words; a term
/// not understood is said, and the others still apply.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ActivityFilter {
    pub actors: Vec<String>,
    pub kinds: Vec<String>,
    /// Lower-case words found in the event as the console shows it (actor, kind, subject,
    /// detail in words: redacted values never match).
    pub words: Vec<String>,
    /// Automation's events shown too.
    pub automation: bool,
}

impl ActivityFilter {
    /// The filter in `text`, and what was not understood.
    pub fn lenient(text: &str, automation: bool) -> (ActivityFilter, Option<String>) {
        let mut f = ActivityFilter {
            automation,
            ..Default::default()
        };
        let mut problem = None;
        for term in text.split_whitespace() {
            let list = |v: &str| -> Vec<String> {
                v.split(',')
                    .filter(|s| !s.is_empty())
                    .map(str::to_string)
                    .collect()
            };
            match term.split_once(':') {
                Some(("actor", v)) if !v.is_empty() => f.actors.extend(list(v)),
                Some(("kind", v)) if !v.is_empty() => f.kinds.extend(list(v)),
                Some((q, _)) if q.chars().all(|c| c.is_ascii_lowercase()) => {
                    problem.get_or_insert(format!(
                        "\"{term}\": Activity filters by actor:NAME, kind:KIND and words"
                    ));
                }
                _ => f.words.push(term.to_lowercase()),
            }
        }
        // asking for automation's own kinds or actors shows them
        if f.kinds
            .iter()
            .any(|k| AUTOMATION_KINDS.contains(&k.as_str()))
            || f.actors
                .iter()
                .any(|a| super::names::SYSTEM_NAMES.contains(&a.as_str()))
        {
            f.automation = true;
        }
        (f, problem)
    }
}

#[cfg(test)]
mod activity_tests {
    use super::*;

    #[test]
    fn people_only_names_every_automation_kind_and_system_name() {
        let quoted = |xs: &[&str]| {
            xs.iter()
                .map(|x| format!("'{x}'"))
                .collect::<Vec<_>>()
                .join(", ")
        };
        assert_eq!(
            PEOPLE_ONLY,
            format!(
                "kind NOT IN ({}) AND actor NOT IN ({})",
                quoted(&AUTOMATION_KINDS),
                quoted(&crate::domain::names::SYSTEM_NAMES)
            )
        );
    }

    #[test]
    fn activity_filter_terms() {
        let (f, problem) = ActivityFilter::lenient("actor:bob kind:claimed,closed Outage", false);
        assert_eq!(f.actors, ["bob"]);
        assert_eq!(f.kinds, ["claimed", "closed"]);
        assert_eq!(f.words, ["outage"]);
        assert!(!f.automation && problem.is_none());
        let (f, problem) = ActivityFilter::lenient("state:unknown kind:attempt", false);
        assert!(
            f.automation,
            "asking for an automation kind shows automation"
        );
        assert!(problem.unwrap().contains("state:unknown"));
    }
}
