//! The filter of `settle runs --where` (manual: Runs): a run's state, its workflow, the run itself,
//! its workflow's owner. The same words as the operations' filter (manual: The filter), over what
//! a run has.

use super::filter::Owner;
use super::run::RunState;

/// One term of a runs filter; every term must hold.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RunTerm {
    States(Vec<RunState>, bool),
    Workflow(String, bool),
    Run(String, bool),
    /// The team that owns its workflow (`owner:TEAM|mine|none`).
    Owner(Owner, bool),
}

/// Whose a run's workflow is, as an `owner:` term asks: its owning team, and the viewer's teams.
#[derive(Clone, Copy, Debug, Default)]
pub struct Owners<'a> {
    pub owner: Option<&'a str>,
    pub mine: &'a [&'a str],
}

/// A parsed runs filter.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RunFilter {
    pub terms: Vec<RunTerm>,
}

impl RunState {
    pub const ALL: [RunState; 5] = [
        RunState::Running,
        RunState::Blocked,
        RunState::Stalled,
        RunState::Done,
        RunState::Closed,
    ];

    pub fn parse(text: &str) -> Result<RunState, String> {
        RunState::ALL
            .into_iter()
            .find(|s| s.as_str() == text)
            .ok_or_else(|| {
                format!("a run is running, blocked, stalled, done or closed, not `{text}`")
            })
    }
}

impl RunFilter {
    pub fn parse(text: &str) -> Result<RunFilter, String> {
        let mut terms = Vec::new();
        for word in text.split_whitespace() {
            let (negated, word) = match word.strip_prefix('-') {
                Some(w) => (true, w),
                None => (false, word),
            };
            let Some((name, value)) = word.split_once(':') else {
                return Err(format!(
                    "`{word}`: runs are filtered by state:, workflow:, run: and owner: (e.g. state:stalled)"
                ));
            };
            if value.is_empty() {
                return Err(format!("`{name}:` needs a value"));
            }
            terms.push(match name {
                "state" => RunTerm::States(
                    value
                        .split(',')
                        .map(RunState::parse)
                        .collect::<Result<_, _>>()?,
                    negated,
                ),
                "wf" | "workflow" => RunTerm::Workflow(value.into(), negated),
                "run" => RunTerm::Run(value.into(), negated),
                "owner" => RunTerm::Owner(
                    match value {
                        "mine" => Owner::Mine,
                        "none" => Owner::Nobody,
                        team => Owner::Team(team.into()),
                    },
                    negated,
                ),
                _ => {
                    return Err(format!(
                        "`{name}:`: runs are filtered by state:, workflow:, run: and owner:"
                    ));
                }
            });
        }
        Ok(RunFilter { terms })
    }

    /// Whether a run of this workflow, in this state, holds every term (`owners`: whose its
    /// workflow is, for an `owner:` term).
    pub fn holds(&self, run: &str, workflow: &str, state: RunState, owners: Owners) -> bool {
        self.terms.iter().all(|t| match t {
            RunTerm::States(s, neg) => s.contains(&state) != *neg,
            RunTerm::Workflow(w, neg) => (w == workflow) != *neg,
            RunTerm::Run(r, neg) => (r == run) != *neg,
            RunTerm::Owner(o, neg) => {
                let holds = match o {
                    Owner::Team(t) => owners.owner == Some(t.as_str()),
                    Owner::Mine => owners.owner.is_some_and(|w| owners.mine.contains(&w)),
                    Owner::Nobody => owners.owner.is_none(),
                };
                holds != *neg
            }
        })
    }

    /// Only stalled runs can hold it (the index of waits answers it, not a walk of the runs).
    pub fn only_stalled(&self) -> bool {
        self.terms
            .iter()
            .any(|t| matches!(t, RunTerm::States(s, false) if s == &[RunState::Stalled]))
    }

    /// The one workflow it asks for, if it names one.
    pub fn workflow(&self) -> Option<&str> {
        self.terms.iter().find_map(|t| match t {
            RunTerm::Workflow(w, false) => Some(w.as_str()),
            _ => None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_runs_filter_reads_states_workflows_and_runs() {
        let f = RunFilter::parse("state:stalled wf:onboarding -run:r1").unwrap();
        assert!(f.only_stalled());
        assert_eq!(f.workflow(), Some("onboarding"));
        let none = Owners::default();
        assert!(f.holds("r2", "onboarding", RunState::Stalled, none));
        assert!(!f.holds("r1", "onboarding", RunState::Stalled, none));
        assert!(!f.holds("r2", "billing", RunState::Stalled, none));
        assert!(!f.holds("r2", "onboarding", RunState::Done, none));
        let any = RunFilter::parse("state:done,blocked").unwrap();
        assert!(!any.only_stalled());
        assert!(any.holds("r", "w", RunState::Blocked, none));
        let mine = RunFilter::parse("owner:mine").unwrap();
        let ops = Owners {
            owner: Some("ops"),
            mine: &["ops"],
        };
        assert!(mine.holds("r", "w", RunState::Done, ops));
        assert!(!mine.holds("r", "w", RunState::Done, none));
        assert!(
            RunFilter::parse("owner:none")
                .unwrap()
                .holds("r", "w", RunState::Done, none)
        );
        for bad in ["state:unknown", "dest:crm", "stalled", "state:"] {
            assert!(RunFilter::parse(bad).is_err(), "{bad}");
        }
    }
}
