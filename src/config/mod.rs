//! Configuration (manual: Configuration): a TOML file, every key checked, every duration parsed.
//!
//! Rooms: `load.rs` the file read and checked (and what a team owns, what does nothing),
//! `destinations.rs` destinations and their HTTP settings, `automations.rs` the HTTP API's
//! automations, `retention.rs`, `teams.rs` teams, channels, `[notify]` and `[defaults]`,
//! `limits.rs` the listeners' deadlines and caps, `recovery.rs` a destination's breaker and pace, `bounds.rs` the durations and sizes each read
//! within its range.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use serde::Deserialize;

use crate::domain::redact::FieldRule;

mod automations;
mod bounds;
mod destinations;
mod limits;
mod load;
mod recovery;
mod retention;
mod teams;

pub use automations::*;
use bounds::{age_limit, body_size, lease_or_timeout, opt_age_limit, opt_step_gap, payload_size};
pub use destinations::*;
pub use limits::LimitsConfig;
pub use recovery::{BreakerConfig, PaceConfig};
pub use retention::*;
pub use teams::{ChannelConfig, ChannelKind, DefaultsConfig, NotifyConfig, Owned, TeamConfig};

pub const DEFAULT_DATABASE: &str = "sqlite://settle.db";

/// How long a request to a destination may take when its `timeout` is not set (manual: Destinations and the dispatcher).
pub const DEFAULT_HTTP_TIMEOUT: Duration = Duration::from_secs(10);

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// Database URL; `--db` and `SETTLE_DATABASE_URL` come first.
    #[serde(default)]
    pub database: Option<String>,
    /// A PostgreSQL hot standby to read the console's lists, the review, reports and metrics
    /// from; `--read-db` and `SETTLE_READ_DATABASE_URL` come first.
    #[serde(default)]
    pub read_db: Option<String>,
    /// Where logs go (never the terminal).
    #[serde(default)]
    pub log_file: Option<PathBuf>,
    /// How long a claim lasts; each action of the holder renews it.
    #[serde(default = "default_lease", deserialize_with = "lease_or_timeout")]
    pub lease: Duration,
    /// An attempt without an outcome after this long is swept to `unknown`.
    #[serde(
        default = "default_attempt_timeout",
        deserialize_with = "lease_or_timeout"
    )]
    pub attempt_timeout: Duration,
    #[serde(default = "default_warn_after", deserialize_with = "age_limit")]
    pub warn_after: Duration,
    #[serde(default = "default_critical_after", deserialize_with = "age_limit")]
    pub critical_after: Duration,
    /// A dispatcher silent this long is forgotten (until then the metrics list it as down).
    #[serde(
        default = "default_dispatcher_gone_after",
        deserialize_with = "age_limit"
    )]
    pub dispatcher_gone_after: Duration,
    #[serde(default)]
    pub destinations: BTreeMap<String, DestinationConfig>,
    #[serde(default)]
    pub workflows: BTreeMap<String, WorkflowConfig>,
    #[serde(default)]
    pub redaction: RedactionConfig,
    /// How long a person's action can be taken back (manual: Taking an action back; default 15m).
    #[serde(default = "default_undo_window", deserialize_with = "lease_or_timeout")]
    pub undo_window: Duration,
    /// The most items an `operator` acts on in one bulk action (manual: Running settle for a team; a lead has no limit).
    #[serde(default = "default_bulk_limit")]
    pub bulk_limit: usize,
    /// The largest payload any entrance takes (manual: Configuration), in bytes of its canonical JSON:
    /// bytes, or a text like `256KiB`, `1MiB`.
    #[serde(default = "default_max_payload", deserialize_with = "payload_size")]
    pub max_payload: usize,
    /// Who may log in to `settle serve`, by name: their role and public keys (manual: Running settle for a team).
    #[serde(default)]
    pub operators: BTreeMap<String, OperatorConfig>,
    /// Who may write over the HTTP API, by name: their token's SHA-256 and scope (manual: The HTTP API).
    #[serde(default)]
    pub automations: BTreeMap<String, AutomationConfig>,
    /// The largest request body the HTTP API takes (manual: The HTTP API; default 1 MiB): bytes, or a text
    /// like `1MiB`.
    #[serde(default = "default_max_body", deserialize_with = "body_size")]
    pub max_body: usize,
    /// `[retention]`: what `settle prune` removes, and when keys are free again (manual: Retention and the archive).
    #[serde(default)]
    pub retention: RetentionConfig,
    /// `[teams.NAME]`: who owns the workflows, and the channels they are told through (manual:
    /// Owners and notifications).
    #[serde(default)]
    pub teams: BTreeMap<String, TeamConfig>,
    /// `[channels.NAME]`: where messages go.
    #[serde(default)]
    pub channels: BTreeMap<String, ChannelConfig>,
    /// `[notify]`: how messages are grouped and tried.
    #[serde(default)]
    pub notify: NotifyConfig,
    /// `[defaults]`: the owner of a workflow without one.
    #[serde(default)]
    pub defaults: DefaultsConfig,
    /// `[limits]`: the deadlines and caps of every listener.
    #[serde(default)]
    pub limits: LimitsConfig,
}

/// `[operators.NAME]`: an operator of `settle serve`, known by their SSH public keys.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct OperatorConfig {
    pub role: crate::domain::Role,
    /// OpenSSH public keys (`ssh-ed25519 AAAA... comment`).
    #[serde(default)]
    pub keys: Vec<String>,
}

fn default_bulk_limit() -> usize {
    100
}

fn default_max_body() -> usize {
    1024 * 1024
}

fn default_max_payload() -> usize {
    crate::domain::payload::DEFAULT_MAX_PAYLOAD
}

fn default_undo_window() -> Duration {
    Duration::from_secs(15 * 60)
}

fn default_lease() -> Duration {
    Duration::from_secs(30 * 60)
}
fn default_attempt_timeout() -> Duration {
    Duration::from_secs(5 * 60)
}
fn default_warn_after() -> Duration {
    Duration::from_secs(3600)
}
fn default_critical_after() -> Duration {
    Duration::from_secs(86_400)
}
fn default_dispatcher_gone_after() -> Duration {
    Duration::from_secs(10 * 60)
}

impl Default for Config {
    fn default() -> Self {
        Config {
            database: None,
            read_db: None,
            log_file: None,
            lease: default_lease(),
            attempt_timeout: default_attempt_timeout(),
            warn_after: default_warn_after(),
            critical_after: default_critical_after(),
            dispatcher_gone_after: default_dispatcher_gone_after(),
            destinations: BTreeMap::new(),
            workflows: BTreeMap::new(),
            redaction: RedactionConfig::default(),
            undo_window: default_undo_window(),
            bulk_limit: default_bulk_limit(),
            max_payload: default_max_payload(),
            operators: BTreeMap::new(),
            automations: BTreeMap::new(),
            max_body: default_max_body(),
            retention: RetentionConfig::default(),
            teams: BTreeMap::new(),
            channels: BTreeMap::new(),
            notify: NotifyConfig::default(),
            defaults: DefaultsConfig::default(),
            limits: LimitsConfig::default(),
        }
    }
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WorkflowConfig {
    #[serde(default)]
    pub pause_when: Option<PauseWhen>,
    /// Its runs' steps, in order (manual: Runs): what a run must record to be done.
    #[serde(default)]
    pub steps: Vec<String>,
    /// How soon the next declared step must be recorded after one settles, before the run is
    /// stalled (manual: Runs; default 15m).
    #[serde(default, deserialize_with = "opt_step_gap")]
    pub step_gap: Option<Duration>,
    /// The team that owns it (manual: Owners and notifications); else `[defaults] owner`.
    #[serde(default)]
    pub owner: Option<String>,
}

/// How long a run may wait between steps when its workflow declares steps but no `step_gap`.
pub const DEFAULT_STEP_GAP: Duration = Duration::from_secs(15 * 60);

impl WorkflowConfig {
    /// The time a run may take between one declared step settling and the next being recorded.
    pub fn step_gap(&self) -> Duration {
        self.step_gap.unwrap_or(DEFAULT_STEP_GAP)
    }
}

/// The stopping threshold: pause the workflow when either is passed.
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct PauseWhen {
    #[serde(default)]
    pub unresolved: Option<u64>,
    #[serde(default, deserialize_with = "opt_age_limit")]
    pub oldest: Option<Duration>,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RedactionConfig {
    #[serde(default)]
    pub rules: Vec<FieldRule>,
    /// Keep a fragment of redacted values that helps find the record at the destination (manual: Redaction:
    /// an email's first letter and domain, a phone's or card's last four digits). Off by default.
    #[serde(default)]
    pub hints: bool,
}

impl Config {
    /// How long a pruned operation's key answers as a live one (manual: Retention and the archive).
    pub fn key_horizon(&self) -> Duration {
        let longest = self
            .destinations
            .values()
            .filter_map(|d| d.key_retention)
            .max()
            .unwrap_or_default();
        self.retention
            .key_horizon
            .unwrap_or(longest.max(MIN_KEY_HORIZON))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::policy::RetryPolicy;

    #[test]
    fn operators_are_named_with_a_role_and_openssh_keys() {
        let c = Config::parse(
            "[operators.alice]\nrole = \"operator\"\nkeys = [\"ssh-ed25519 AAAAC3Nza alice@laptop\"]\n",
            "t",
        )
        .unwrap();
        let alice = &c.operators["alice"];
        assert_eq!(alice.role, crate::domain::Role::Operator);
        assert_eq!(alice.keys.len(), 1);
        for (bad, says) in [
            (
                "[operators.bob]\nrole = \"admin\"\n",
                "unknown variant `admin`",
            ),
            (
                "[operators.bob]\nrole = \"lead\"\nkeys = [\"hunter2\"]\n",
                "not an OpenSSH public key",
            ),
            ("[operators.settle]\nrole = \"lead\"\n", "operators.settle"),
        ] {
            let e = Config::parse(bad, "t").unwrap_err().to_string();
            assert!(e.contains(says), "{bad}: {e}");
        }
    }

    #[test]
    fn a_workflow_declares_its_steps_and_their_gap() {
        let c = Config::parse(
            "[workflows.onboarding]\nsteps = [\"create-customer\", \"create-task\", \"welcome-sms\"]\nstep_gap = \"10m\"\n\n[workflows.crm-sync]\nsteps = [\"upsert\"]\n",
            "t.toml",
        )
        .unwrap();
        let w = &c.workflows["onboarding"];
        assert_eq!(w.steps, ["create-customer", "create-task", "welcome-sms"]);
        assert_eq!(w.step_gap(), Duration::from_secs(600));
        assert_eq!(c.workflows["crm-sync"].step_gap(), DEFAULT_STEP_GAP);
        for (toml, why) in [
            (
                "[workflows.w]\nsteps = [\"a\", \"a\"]\n",
                "a is declared twice",
            ),
            ("[workflows.w]\nsteps = [\"\"]\n", "workflows.w.steps"),
            (
                "[workflows.w]\nstep_gap = \"5m\"\n",
                "a step gap needs the workflow's steps",
            ),
            (
                "[workflows.w]\nsteps = [\"a\"]\nstep_gap = \"0s\"\n",
                "step_gap",
            ),
        ] {
            let e = Config::parse(toml, "t.toml").unwrap_err().to_string();
            assert!(e.contains(why), "{toml}: {e}");
        }
    }

    #[test]
    fn the_shipped_example_parses() {
        let text = include_str!("../../assets/settle.toml");
        let c = Config::parse(text, "assets/settle.toml").unwrap();
        assert!(c.destinations.contains_key("projects"));
        assert!(c.destination("projects").dedupes);
    }

    #[test]
    fn errors_name_file_line_and_key() {
        let err = Config::parse(
            "lease = \"30m\"\n[destinations.crm]\ndedupes = true\nretention = \"1d\"\n",
            "my.toml",
        )
        .unwrap_err()
        .to_string();
        assert!(
            err.starts_with("my.toml:4: key `retention`:") && err.contains("unknown field"),
            "{err}"
        );
        assert!(!err.contains('\n'));
        let err = Config::parse("lease = \"thirty\"\n", "my.toml")
            .unwrap_err()
            .to_string();
        assert!(
            err.starts_with("my.toml:1: key `lease`:") && err.contains("bad duration"),
            "{err}"
        );
        let err = Config::parse(
            "[workflows.x]\npause_when = { unresolved = \"many\" }\n",
            "c.toml",
        )
        .unwrap_err()
        .to_string();
        assert!(err.starts_with("c.toml:2:"), "{err}");
    }

    #[test]
    fn a_lookup_that_names_nothing_of_the_operation_is_refused() {
        let named = [
            "lookup_url = \"http://x/tasks?key={key}\"",
            "lookup_url = \"http://x/tasks?ref={payload.client_ref}\"",
            "lookup_url = \"http://x/search\"\nlookup_method = \"POST\"\nlookup_body = { q = [{ value = \"{key}\" }] }",
        ];
        for lookup in named {
            let text = format!("[destinations.crm]\nurl = \"http://x/c\"\n{lookup}\n");
            let c = Config::parse(&text, "t.toml").unwrap_or_else(|e| panic!("{lookup}: {e}"));
            assert!(
                c.destination("crm").lookup,
                "a configured lookup is a lookup"
            );
        }
        let unnamed = [
            "[destinations.crm]\nlookup_url = \"http://x/search\"\nlookup_method = \"POST\"\n",
            "[destinations.crm]\nlookup_url = \"http://x/search\"\nlookup_body = { limit = 1, q = \"{action}\" }\n",
            "[destinations.crm]\nlookup_url = \"http://x/t?key={key}\"\n[destinations.crm.actions.sync]\nlookup_url = \"http://x/all\"\n",
        ];
        for text in unnamed {
            let e = Config::parse(text, "t.toml").unwrap_err();
            assert_eq!(e.exit_code(), 2);
            let e = e.to_string();
            assert!(
                e.starts_with("t.toml: destination crm")
                    && e.contains("names nothing of the operation"),
                "{text}: {e}"
            );
        }
    }

    #[test]
    fn unknown_destinations_get_the_defaults() {
        let p = Config::default().destination("nowhere");
        assert!(!p.dedupes && !p.lookup);
        assert_eq!(p.retry, RetryPolicy::default());
    }
}
