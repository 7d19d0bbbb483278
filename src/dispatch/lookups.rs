//! Looking up at a destination on a person's request (manual: Many at once: `settle lookup`, `L` in the
//! console): the destinations' configured lookups made ready once (their `${NAME}`s read from
//! this process's environment), asked one operation at a time. What a destination answers is
//! kept only scrubbed, as the dispatcher keeps it.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use super::http::HttpDestination;
use super::send::{kept, kept_answer};
use crate::config::Config;
use crate::domain::LookupAnswer;
use crate::error::Result;
use crate::ledger::{Ledger, StartedOp};

/// One operation's lookup: its key, its destination, what the destination said.
pub type Looked = (String, String, LookupAnswer);

/// The lookups of every destination that has one, and the client that asks them.
#[derive(Clone)]
pub struct Lookups {
    client: reqwest::Client,
    /// By destination: ready, or why not (a variable that is not set: said when asked, so that
    /// one destination's missing secret does not stop the console for the others).
    destinations: Arc<HashMap<String, Result<Arc<HttpDestination>, String>>>,
}

impl std::fmt::Debug for Lookups {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Lookups")
            .field(
                "destinations",
                &self.destinations.keys().collect::<Vec<_>>(),
            )
            .finish()
    }
}

impl Lookups {
    pub fn new(config: &Config) -> Lookups {
        let env = |name: &str| std::env::var(name).ok();
        let destinations = config
            .destinations
            .iter()
            .filter(|(_, d)| {
                d.lookup_url.is_some() || d.actions.values().any(|a| a.lookup_url.is_some())
            })
            .map(|(name, d)| {
                let ready = HttpDestination::resolve(name, d, &env)
                    .map(Arc::new)
                    .map_err(|e| e.to_string());
                (name.clone(), ready)
            })
            .collect();
        Lookups {
            client: crate::outbound::client(),
            destinations: Arc::new(destinations),
        }
    }

    /// Asks each operation's destination, one after the other, `pace` apart (the first at
    /// once), until all are asked or `stop` is set; `told` hears of each answer as it comes
    /// (how many so far, of how many, and the answer).
    pub async fn each(
        &self,
        ledger: &Ledger,
        keys: &[String],
        pace: Option<Duration>,
        stop: &AtomicBool,
        mut told: impl FnMut(usize, usize, &Looked),
    ) -> Result<Vec<Looked>> {
        let requests = ledger.rounds().lookup_requests(keys).await?;
        let start = Instant::now();
        let mut answers = Vec::with_capacity(requests.len());
        for (i, op) in requests.iter().enumerate() {
            if stop.load(Ordering::SeqCst) {
                break;
            }
            if let Some(p) = pace {
                let at = start + p.saturating_mul(u32::try_from(i).unwrap_or(u32::MAX));
                tokio::time::sleep_until(at.into()).await;
            }
            let answer = self.look_up(ledger, op).await;
            answers.push((op.key.clone(), op.destination.clone(), answer));
            told(i + 1, requests.len(), answers.last().expect("pushed"));
        }
        Ok(answers)
    }

    /// Asks the operation's destination whether its work exists. Anything that keeps the
    /// question from being asked is an answer too: no answer, and why.
    pub async fn look_up(&self, ledger: &Ledger, op: &StartedOp) -> LookupAnswer {
        let no_answer = |why: String| LookupAnswer::NoAnswer { why };
        let endpoint = match self.destinations.get(&op.destination) {
            None => return no_answer(format!("{} has no lookup_url", op.destination)),
            Some(Err(why)) => return no_answer(format!("not asked: {why}")),
            Some(Ok(d)) => d.endpoint(&op.action).filter(|e| e.has_lookup()).cloned(),
        };
        let Some(endpoint) = endpoint else {
            return no_answer(format!(
                "{} has no lookup_url for action {}",
                op.destination, op.action
            ));
        };
        let scrub = ledger.answer_scrubber(op);
        let keep = |text: String| kept(&scrub, &endpoint.scrub_secrets(text));
        match endpoint.look_up(&self.client, op).await {
            Some(answer) => kept_answer(answer, &keep),
            None => no_answer(format!("{} has no lookup_url", op.destination)),
        }
    }
}
