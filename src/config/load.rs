//! Reading settle.toml: where it is, what it says, and one clear line for what is wrong.

use std::path::{Path, PathBuf};

use crate::Config;
use crate::config::{DEFAULT_HTTP_TIMEOUT, DestinationConfig, WorkflowConfig};
use crate::domain::policy::{DestinationPolicy, RetryPolicy};
use crate::domain::redact::Redactor;
use crate::error::{Error, Result};

impl Config {
    /// Reads a config file; errors name the file, line and key in one line.
    pub fn load(path: &Path) -> Result<Config> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| Error::Invalid(format!("cannot read config {}: {e}", path.display())))?;
        Config::parse(&text, &path.display().to_string())
    }

    pub fn parse(text: &str, origin: &str) -> Result<Config> {
        let config: Config = toml::from_str(text).map_err(|e| {
            let (line, key) = match e.span() {
                Some(span) => locate(text, span.start),
                None => (0, String::new()),
            };
            let message = e.message().replace('\n', " ");
            let key = if key.is_empty() {
                String::new()
            } else {
                format!(" key `{key}`:")
            };
            Error::Invalid(format!("{origin}:{line}:{key} {message}"))
        })?;
        let named = |table: &str, what: &str, name: &str| {
            crate::domain::validate_op_name(what, name, false).map_err(|e| {
                let name = crate::domain::escape_text(name);
                Error::Invalid(format!("{origin}: key `{table}.{name}`: {e}"))
            })
        };
        for name in config.destinations.keys() {
            named("destinations", "destination", name)?;
        }
        for name in config.workflows.keys() {
            named("workflows", "workflow", name)?;
        }
        for (name, d) in &config.destinations {
            if d.max_attempts == Some(0) {
                return Err(Error::Invalid(format!(
                    "{origin}: key `destinations.{name}.max_attempts`: must be at least 1"
                )));
            }
            super::recovery::breaker_policy(
                d.breaker.as_ref(),
                d.pace.as_ref(),
                d.probe_url.as_deref(),
            )
            .map_err(|e| Error::Invalid(format!("{origin}: key `destinations.{name}.{e}")))?;
            let at = format!("destinations.{name}");
            let base = d.http_settings();
            let checked = base.check(&at).and_then(|()| {
                d.actions
                    .iter()
                    .try_for_each(|(a, s)| s.check(&format!("{at}.actions.{a}")))
            });
            checked.map_err(|why| Error::Invalid(format!("{origin}: {why}")))?;
            // Destinations: a lookup is evidence only when its request names the operation
            let unnamed = std::iter::once((None, base.clone()))
                .chain(
                    d.actions
                        .iter()
                        .map(|(a, over)| (Some(a.as_str()), base.overridden_by(over))),
                )
                .find(|(_, s)| s.lookup_url.is_some() && !s.lookup_names_the_operation());
            if let Some((action, _)) = unnamed {
                let of = action.map_or(String::new(), |a| format!(" (action {a})"));
                return Err(Error::Invalid(format!(
                    "{origin}: destination {name}{of}: the lookup names nothing of the operation: \
                     lookup_url or lookup_body must hold {{key}} or a {{payload...}} placeholder, \
                     else its answer cannot tell absent from not searched for"
                )));
            }
        }
        for (name, w) in &config.workflows {
            check_steps(name, w).map_err(|why| Error::Invalid(format!("{origin}: {why}")))?;
        }
        Redactor::new(&config.redaction.rules)
            .map_err(|e| Error::Invalid(format!("{origin}: key `redaction.rules`: {e}")))?;
        check_people(&config, origin)?;
        check_owners(&config).map_err(|why| Error::Invalid(format!("{origin}: {why}")))?;
        Ok(config)
    }

    /// `--config`, else `SETTLE_CONFIG`, else `$XDG_CONFIG_HOME/settle/settle.toml`, else defaults.
    pub fn discover(explicit: Option<&Path>) -> Result<Config> {
        match Config::discover_path(explicit) {
            Some(p) => Config::load(&p),
            None => Ok(Config::default()),
        }
    }

    /// The file [`Config::discover`] reads (`None`: none, the defaults apply).
    pub fn discover_path(explicit: Option<&Path>) -> Option<PathBuf> {
        if let Some(p) = explicit {
            return Some(p.to_path_buf());
        }
        if let Some(p) = std::env::var_os("SETTLE_CONFIG").filter(|p| !p.is_empty()) {
            return Some(PathBuf::from(p));
        }
        let xdg = std::env::var_os("XDG_CONFIG_HOME")
            .filter(|p| !p.is_empty())
            .map(PathBuf::from)
            .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".config")));
        xdg.map(|d| d.join("settle").join("settle.toml"))
            .filter(|p| p.exists())
    }

    pub fn destination(&self, name: &str) -> DestinationPolicy {
        let d = self.destinations.get(name).cloned().unwrap_or_default();
        let defaults = RetryPolicy::default();
        let can_look_up =
            d.lookup_url.is_some() || d.actions.values().any(|a| a.lookup_url.is_some());
        DestinationPolicy {
            dedupes: d.dedupes,
            key_retention: d.key_retention,
            // a configured lookup is a lookup, whether or not `lookup = true` says so too
            lookup: d.lookup || can_look_up,
            can_look_up,
            // the longest any of its requests may take
            timeout: d
                .actions
                .values()
                .filter_map(|a| a.timeout)
                .chain(d.timeout)
                .max()
                .unwrap_or(DEFAULT_HTTP_TIMEOUT),
            retry: RetryPolicy {
                max_attempts: d.max_attempts.unwrap_or(defaults.max_attempts),
                base: d.base.unwrap_or(defaults.base),
                cap: d.cap.unwrap_or(defaults.cap),
            },
            breaker: self.breaker(name),
        }
    }

    /// A destination's breaker and pace, without the rest of its policy (what a dispatcher's
    /// round asks of every answer).
    pub fn breaker(&self, name: &str) -> crate::domain::breaker::BreakerPolicy {
        // checked when the file was read
        self.destinations
            .get(name)
            .and_then(|d| {
                super::recovery::breaker_policy(
                    d.breaker.as_ref(),
                    d.pace.as_ref(),
                    d.probe_url.as_deref(),
                )
                .ok()
            })
            .unwrap_or_default()
    }

    /// The destinations `settle dispatch` can send to: those with a `url`, for the destination
    /// or for one of its actions. Their settings as written; the dispatcher resolves them.
    pub fn http_destinations(&self) -> Vec<(&str, &DestinationConfig)> {
        self.destinations
            .iter()
            .filter(|(_, d)| d.url.is_some() || d.actions.values().any(|a| a.url.is_some()))
            .map(|(name, d)| (name.as_str(), d))
            .collect()
    }

    pub fn redactor(&self) -> Redactor {
        Redactor::new(&self.redaction.rules)
            .unwrap_or_default()
            .with_hints(self.redaction.hints)
    }
}

impl Config {
    /// The team that owns `workflow`: its `owner`, else `[defaults] owner`, else none.
    pub fn owner_of(&self, workflow: &str) -> Option<&str> {
        self.workflows
            .get(workflow)
            .and_then(|w| w.owner.as_deref())
            .or(self.defaults.owner.as_deref())
    }

    /// The team told of `workflow`'s exceptions: its owner, where that team has a channel.
    /// What the config holds that does nothing: a line each, for the processes that would
    /// act on it to say (the config loads all the same).
    pub fn warnings(&self) -> Vec<String> {
        self.channels
            .iter()
            .flat_map(|(name, c)| super::teams::channel_warnings(name, c))
            .collect()
    }

    pub fn told_of(&self, workflow: &str) -> Option<&str> {
        let team = self.owner_of(workflow)?;
        let t = self.teams.get(team)?;
        (!t.notify.is_empty() || !t.escalate.is_empty()).then_some(team)
    }

    /// The teams `operator` is a member of.
    pub fn teams_of(&self, operator: &str) -> Vec<&str> {
        self.teams
            .iter()
            .filter(|(_, t)| t.members.iter().any(|m| m == operator))
            .map(|(n, _)| n.as_str())
            .collect()
    }

    /// The workflows the teams of `operator` own, as a filter asks (`true`: these; `false`: every
    /// one but these); `None` where the operator is in no team.
    pub fn teams_workflows(&self, operator: &str) -> Option<(Vec<String>, bool)> {
        let teams = self.teams_of(operator);
        (!teams.is_empty()).then(|| match self.owned_by(&teams) {
            super::teams::Owned::These(names) => (names, true),
            super::teams::Owned::AllBut(names) => (names, false),
        })
    }

    /// `owner:` in a filter (manual: Owners and notifications): each `owner:` term of `query`
    /// turned into the workflows the config gives that team (`owner:mine`: the teams of
    /// `viewer`), so that the store never needs the config.
    pub fn resolve_owners(&self, query: &mut crate::domain::filter::Filter, viewer: &str) {
        use crate::domain::filter::{Match, Owner, Term};
        for term in &mut query.terms {
            if let Match::Owner(owner) = &term.matches {
                let teams: Vec<&str> = match owner {
                    Owner::Team(t) => vec![t.as_str()],
                    Owner::Mine => self.teams_of(viewer),
                    Owner::Nobody => Vec::new(),
                };
                // a team that owns nothing (or is not in the config) owns no workflow
                let known = teams.iter().all(|t| self.teams.contains_key(*t));
                let (names, inside) = match self.owned_by(&teams) {
                    _ if !known => (Vec::new(), true),
                    _ if matches!(owner, Owner::Mine) && teams.is_empty() => (Vec::new(), true),
                    super::teams::Owned::These(names) => (names, true),
                    super::teams::Owned::AllBut(names) => (names, false),
                };
                *term = Term {
                    negated: term.negated,
                    matches: Match::Workflows { names, inside },
                };
            }
        }
    }

    /// The workflows `teams` own (none: the workflows nobody owns).
    pub fn owned_by(&self, teams: &[&str]) -> super::teams::Owned {
        let named = |keep: &dyn Fn(&str) -> bool| -> Vec<String> {
            self.workflows
                .iter()
                .filter(|(_, w)| w.owner.as_deref().is_some_and(keep))
                .map(|(n, _)| n.clone())
                .collect()
        };
        match self.defaults.owner.as_deref() {
            // the default owner's workflows are every one not owned by another
            Some(d) if teams.contains(&d) => {
                super::teams::Owned::AllBut(named(&|o| !teams.contains(&o)))
            }
            Some(_) => super::teams::Owned::These(named(&|o| teams.contains(&o))),
            // nobody: every workflow without an owner
            None if teams.is_empty() => super::teams::Owned::AllBut(named(&|_| true)),
            None => super::teams::Owned::These(named(&|o| teams.contains(&o))),
        }
    }
}

/// `[teams]`, `[channels]`, `[defaults] owner` and each workflow's `owner` hold together: every
/// team and channel named exists, each channel has what its kind needs, and the environment's
/// variables are named as variables are.
fn check_owners(config: &Config) -> std::result::Result<(), String> {
    let team = |at: &str, name: &str| {
        if config.teams.contains_key(name) {
            Ok(())
        } else {
            Err(format!("key `{at}`: no [teams.{name}]"))
        }
    };
    if let Some(o) = &config.defaults.owner {
        team("defaults.owner", o)?;
    }
    for (name, w) in &config.workflows {
        if let Some(o) = &w.owner {
            team(&format!("workflows.{name}.owner"), o)?;
        }
    }
    for (name, t) in &config.teams {
        crate::domain::validate_op_name("team", name, false)
            .map_err(|e| format!("key `teams.{name}`: {e}"))?;
        for m in &t.members {
            crate::domain::validate_operator(m)
                .map_err(|e| format!("key `teams.{name}.members`: {e}"))?;
        }
        for (list, names) in [("notify", &t.notify), ("escalate", &t.escalate)] {
            if let Some(c) = names.iter().find(|c| !config.channels.contains_key(*c)) {
                return Err(format!("key `teams.{name}.{list}`: no [channels.{c}]"));
            }
        }
    }
    for (name, c) in &config.channels {
        crate::domain::validate_op_name("channel", name, false)
            .map_err(|e| format!("key `channels.{name}`: {e}"))?;
        super::teams::check_channel(name, c)?;
    }
    Ok(())
}

/// `[operators]` and `[automations]`: names as a person is named, staff roles for the staff,
/// public keys that look like keys, and one token for one automation.
fn check_people(config: &Config, origin: &str) -> Result<()> {
    for (name, o) in &config.operators {
        crate::domain::validate_operator(name)
            .map_err(|e| Error::Invalid(format!("{origin}: key `operators.{name}`: {e}")))?;
        for key in &o.keys {
            let mut parts = key.split_whitespace();
            let (kind, body) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
            if !kind.starts_with("ssh-") && !kind.starts_with("ecdsa-") || body.is_empty() {
                return Err(Error::Invalid(format!(
                    "{origin}: key `operators.{name}.keys`: not an OpenSSH public key (want `ssh-ed25519 AAAA... comment`)"
                )));
            }
        }
    }
    for (name, o) in &config.operators {
        if !crate::domain::Role::ALL.contains(&o.role) {
            return Err(Error::Invalid(format!(
                "{origin}: key `operators.{name}.role`: {} is not a staff role (viewer, operator or lead); an automation goes under [automations.{name}]",
                o.role
            )));
        }
    }
    for (name, a) in &config.automations {
        crate::domain::validate_operator(name)
            .map_err(|e| Error::Invalid(format!("{origin}: key `automations.{name}`: {e}")))?;
        if a.workflows.is_empty() {
            return Err(Error::Invalid(format!(
                "{origin}: key `automations.{name}.workflows`: name at least one workflow (\"*\": all)"
            )));
        }
        for w in a.workflows.iter().filter(|w| *w != "*") {
            crate::domain::validate_op_name("workflow", w, false).map_err(|e| {
                Error::Invalid(format!("{origin}: key `automations.{name}.workflows`: {e}"))
            })?;
        }
        if let Some((other, _)) = config
            .automations
            .iter()
            .find(|(n, o)| *n < name && o.token_sha256 == a.token_sha256)
        {
            return Err(Error::Invalid(format!(
                "{origin}: key `automations.{name}.token_sha256`: the same token is also {other}'s"
            )));
        }
    }
    Ok(())
}

/// A workflow's declared steps (manual: Runs): names as a step is named, each once; a `step_gap`
/// means something only beside them.
fn check_steps(name: &str, w: &WorkflowConfig) -> std::result::Result<(), String> {
    let at = format!("key `workflows.{name}.steps`");
    for (i, step) in w.steps.iter().enumerate() {
        crate::domain::validate_op_name("step", step, false).map_err(|e| format!("{at}: {e}"))?;
        if w.steps[..i].contains(step) {
            return Err(format!("{at}: {step} is declared twice"));
        }
    }
    if w.step_gap.is_some() && w.steps.is_empty() {
        return Err(format!(
            "key `workflows.{name}.step_gap`: a step gap needs the workflow's steps (steps = [...])"
        ));
    }
    Ok(())
}

/// The 1-based line of a byte offset, and the key written on that line (or the table it opens).
pub(super) fn locate(text: &str, offset: usize) -> (usize, String) {
    let offset = offset.min(text.len());
    let line_no = text[..offset].matches('\n').count() + 1;
    let line = text.lines().nth(line_no - 1).unwrap_or("").trim();
    let key = match line.split_once('=') {
        Some((k, _)) => k.trim(),
        None => line.trim_matches(|c| c == '[' || c == ']'),
    };
    (line_no, key.trim_matches('"').to_string())
}
