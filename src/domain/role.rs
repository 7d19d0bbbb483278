//! Who may do what (manual: Running settle for a team): a `viewer` reads, an `operator` works items, a `lead` may also
//! take over a claim, pause and resume, act in bulk without limit and reveal. The rules are
//! asked by the ledger (`staff_check` reads the role from its `Ctx`), so the console, the CLI and
//! the SSH server refuse the same way.

use serde::{Deserialize, Serialize};

#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    Viewer,
    Operator,
    /// The local CLI's role: whoever holds the database credentials may do anything.
    #[default]
    Lead,
    /// An automation over the HTTP API (manual: The HTTP API): it records, starts, reports attempts and
    /// reads its own workflows; it takes no staff action.
    Automation,
}

impl Role {
    /// The staff roles, as `[operators]` names them.
    pub const ALL: [Role; 3] = [Role::Viewer, Role::Operator, Role::Lead];

    pub fn as_str(self) -> &'static str {
        match self {
            Role::Viewer => "viewer",
            Role::Operator => "operator",
            Role::Lead => "lead",
            Role::Automation => "automation",
        }
    }

    /// Whether this role may take any staff action at all.
    pub fn acts(self) -> bool {
        matches!(self, Role::Operator | Role::Lead)
    }

    /// Whether this role may take over a claim, pause or resume, and act in bulk without limit.
    pub fn leads(self) -> bool {
        self == Role::Lead
    }
}

impl std::fmt::Display for Role {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Who is acting through a session of `settle serve`: the operator the key belongs to, their
/// role, and the key's SHA-256 fingerprint (written into every event of the session).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Identity {
    pub name: String,
    pub role: Role,
    pub fingerprint: String,
}
