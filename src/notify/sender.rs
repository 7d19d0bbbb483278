//! The sender (manual: Owners and notifications): in every `settle dispatch` and `settle serve`,
//! each second, the process that holds the lease folds the inbox into messages and sends those
//! due; the others wait their turn. A failed try is kept and tried again later; nothing is lost
//! while a channel is down.

use std::time::Duration;

use tokio::task::JoinSet;

use super::channels::send;
use crate::ledger::{Ledger, Sent};

/// Messages sent in one turn.
const TURN: i64 = 100;

/// Sends while it lives (`None` where no team has a channel).
pub struct Sending(tokio::task::JoinHandle<()>);

impl Drop for Sending {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Starts the sender of this process, named `holder` for the lease, turning every `every`.
pub fn start(ledger: &Ledger, holder: String, every: Duration) -> Option<Sending> {
    if ledger.config().channels.is_empty() {
        return None;
    }
    let ledger = ledger.clone();
    Some(Sending(tokio::spawn(async move {
        let http = reqwest::Client::new();
        loop {
            if let Err(e) = turn(&ledger, &holder, &http).await {
                tracing::warn!(error = %e, "the notification sender could not go on; trying again");
            }
            tokio::time::sleep(every).await;
        }
    })))
}

/// One turn: the lease, the fold, the sends due (a test turns by hand on a clock of its own).
pub async fn turn(
    ledger: &Ledger,
    holder: &str,
    http: &reqwest::Client,
) -> crate::error::Result<()> {
    let notices = ledger.notices();
    if !notices.lead(holder).await? {
        return Ok(());
    }
    notices.fold().await?;
    let due = notices.due(TURN).await?;
    let mut sends = JoinSet::new();
    for out in due {
        let config = ledger.config().channels.get(&out.channel).cloned();
        let http = http.clone();
        sends.spawn(async move {
            let sent = match &config {
                Some(c) => send(&http, &out.channel, c, &out.message).await,
                None => Sent::Failed(format!("no [channels.{}] in the config", out.channel)),
            };
            (out, sent)
        });
    }
    while let Some(done) = sends.join_next().await {
        if let Ok((out, sent)) = done {
            if let Sent::Failed(why) = &sent {
                tracing::warn!(channel = %out.channel, id = %out.message.id, answer = %why, "a message was not delivered; it will be tried again");
            }
            notices.keep(out, sent).await?;
        }
    }
    Ok(())
}
