//! The destinations the gateway sends to, resolved once as the dispatcher would reach them.

use std::collections::HashMap;
use std::sync::Arc;

use axum::http::StatusCode;

use crate::api::answer::Failure;
use crate::dispatch::{Endpoint, HttpDestination};
use crate::ledger::Ledger;

/// The destinations the gateway sends to, as the dispatcher would reach them.
pub struct Gateway {
    pub(super) client: reqwest::Client,
    /// By name: resolved, or why not (a variable that is not set), said to each caller.
    destinations: HashMap<String, std::result::Result<Arc<HttpDestination>, String>>,
}

impl Gateway {
    /// The config's HTTP destinations, their `${NAME}`s read from this process's environment.
    pub fn new(ledger: &Ledger) -> Gateway {
        let env = |name: &str| std::env::var(name).ok();
        let destinations = ledger
            .config()
            .http_destinations()
            .into_iter()
            .map(|(name, d)| {
                let resolved = HttpDestination::resolve(name, d, &env).map(Arc::new);
                if let Err(e) = &resolved {
                    tracing::warn!(destination = name, error = %e, "gateway: destination not usable");
                }
                (name.to_string(), resolved.map_err(|e| e.to_string()))
            })
            .collect();
        Gateway {
            client: crate::outbound::client(),
            destinations,
        }
    }

    /// Where one action is sent, or the answer saying why it cannot be.
    pub(super) fn endpoint(
        &self,
        destination: &str,
        action: &str,
    ) -> Result<(Arc<HttpDestination>, Arc<Endpoint>), Failure> {
        let not_found = |what: String| Failure::new(StatusCode::NOT_FOUND, "not_found", what);
        let dest = match self.destinations.get(destination) {
            None => {
                return Err(not_found(format!(
                    "destination {destination} has no url in settle's config: the gateway sends only to configured destinations"
                )));
            }
            Some(Err(why)) => {
                return Err(Failure::new(
                    StatusCode::SERVICE_UNAVAILABLE,
                    "unavailable",
                    format!("{why}: nothing was sent"),
                ));
            }
            Some(Ok(d)) => d.clone(),
        };
        let endpoint = dest.sender(action).cloned().ok_or_else(|| {
            not_found(format!(
                "destination {destination} has no url for action {action} in settle's config"
            ))
        })?;
        Ok((dest, endpoint))
    }
}
