//! What every handler is handed: the state the requests share, and who is calling.

use std::sync::{Arc, RwLock};

use axum::extract::FromRequestParts;
use axum::http::StatusCode;
use axum::http::request::Parts;

use super::answer::Failure;
use super::auth::{Automations, Rates};
use super::gateway::Gateway;
use crate::ledger::{Ledger, Writer};

/// What every request shares.
#[derive(Clone)]
pub struct Api {
    /// The group writer (its counts show whether commits were shared).
    pub writer: Writer,
    pub(super) ledger: Ledger,
    pub(super) automations: Arc<RwLock<Arc<Automations>>>,
    pub(super) rates: Arc<Rates>,
    pub(super) max_body: usize,
    /// The destinations the gateway sends to (manual: The gateway).
    pub(super) gateway: Arc<Gateway>,
}

/// Who is calling: their automation, and the ledger acting for it.
#[derive(Clone)]
pub struct Caller {
    pub name: String,
    pub ledger: Ledger,
    /// The workflows its token may write (`None`: every one).
    pub workflows: Option<Vec<String>>,
}

impl<S: Send + Sync> FromRequestParts<S> for Caller {
    type Rejection = Failure;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> std::result::Result<Caller, Failure> {
        parts.extensions.get::<Caller>().cloned().ok_or_else(|| {
            Failure::new(
                StatusCode::UNAUTHORIZED,
                "unauthorized",
                "a bearer token is required",
            )
        })
    }
}
