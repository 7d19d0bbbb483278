//! The sender (manual: Owners and notifications): in every `settle dispatch` and `settle serve`,
//! each second, the process that holds the lease folds the inbox into messages and sends those
//! due; the others wait their turn. A failed try is kept and tried again later; nothing is lost
//! while a channel is down.
//!
//! Each channel is sent to on its own, its messages one at a time in order: a slow mail server
//! holds up its own mail, never the Slack message behind it. The lease is renewed before each
//! try and while it lasts, and a try that loses it is given up unrecorded (the new holder tries
//! it): no two processes ever try one message at once. A try lasts at most [`TRY_DEADLINE`],
//! connecting and every step included.

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use tokio::task::JoinHandle;

use super::channels::send;
use crate::ledger::{Ledger, Outgoing, Sent};

/// Messages sent in one turn.
const TURN: i64 = 100;

/// How long one try may take, whole: connecting and every step of it (each step has its own
/// limit too, `channels::TRY_TIMEOUT`): a mail server that takes 8 s a step still delivers.
pub const TRY_DEADLINE: Duration = Duration::from_secs(90);

/// How often the lease is renewed while a try lasts: well inside the lease's 30 s.
const RENEW: Duration = Duration::from_secs(10);

/// Sends while it lives (`None` where no team has a channel).
pub struct Sending(JoinHandle<()>);

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
        let http = crate::outbound::client();
        let mut busy: HashMap<String, JoinHandle<()>> = HashMap::new();
        loop {
            if let Err(e) = turn_beside(&ledger, &holder, &http, &mut busy).await {
                tracing::warn!(error = %e, "the notification sender could not go on; trying again");
            }
            tokio::time::sleep(every).await;
        }
    })))
}

/// One turn, waiting for every channel's sends (a test turns by hand on a clock of its own).
pub async fn turn(
    ledger: &Ledger,
    holder: &str,
    http: &reqwest::Client,
) -> crate::error::Result<()> {
    let mut busy = HashMap::new();
    turn_beside(ledger, holder, http, &mut busy).await?;
    for (_, sending) in busy {
        let _ = sending.await;
    }
    Ok(())
}

/// One turn: the lease, the fold, and the messages due sent to each channel that is not still
/// busy with an earlier turn's (`busy`: each channel's sends under way).
async fn turn_beside(
    ledger: &Ledger,
    holder: &str,
    http: &reqwest::Client,
    busy: &mut HashMap<String, JoinHandle<()>>,
) -> crate::error::Result<()> {
    let notices = ledger.notices();
    if !notices.lead(holder).await? {
        return Ok(());
    }
    // the channels still sending are known before the messages due are read: a channel whose
    // sends end meanwhile waits for the next turn, so that none is read due while being sent
    busy.retain(|_, sending| !sending.is_finished());
    let held: Vec<String> = busy.keys().cloned().collect();
    notices.fold().await?;
    let mut by_channel: BTreeMap<String, Vec<Outgoing>> = BTreeMap::new();
    for out in notices.due(TURN).await? {
        if !held.contains(&out.channel) {
            by_channel.entry(out.channel.clone()).or_default().push(out);
        }
    }
    for (channel, queue) in by_channel {
        let sending = tokio::spawn(send_in_order(
            ledger.clone(),
            holder.to_string(),
            http.clone(),
            queue,
        ));
        busy.insert(channel, sending);
    }
    Ok(())
}

/// One channel's messages, one at a time in order, each try kept; stops where the lease is
/// lost, or where a try failed (the channel is tried again at its next due time, not hammered).
async fn send_in_order(
    ledger: Ledger,
    holder: String,
    http: reqwest::Client,
    queue: Vec<Outgoing>,
) {
    let notices = ledger.notices();
    for out in queue {
        match notices.lead(&holder).await {
            Ok(true) => {}
            Ok(false) => return,
            Err(e) => {
                tracing::warn!(error = %e, "the notification sender could not renew its lease");
                return;
            }
        }
        let config = ledger.config().channels.get(&out.channel).cloned();
        let sent = match &config {
            Some(c) => {
                let attempt =
                    tokio::time::timeout(TRY_DEADLINE, send(&http, &out.channel, c, &out.message));
                let held = async {
                    loop {
                        tokio::time::sleep(RENEW).await;
                        if !notices.lead(&holder).await.unwrap_or(false) {
                            return;
                        }
                    }
                };
                tokio::select! {
                    tried = attempt => tried.unwrap_or_else(|_| Sent::Failed(format!(
                        "cut off after {} s: it may have been handed over; tried again with the same id",
                        TRY_DEADLINE.as_secs()
                    ))),
                    () = held => {
                        tracing::warn!(channel = %out.channel, id = %out.message.id, "the sender's lease was lost during a try: the try is given up, the new holder tries it");
                        return;
                    }
                }
            }
            None => Sent::Failed(format!("no [channels.{}] in the config", out.channel)),
        };
        let failed = matches!(sent, Sent::Failed(_));
        if let Sent::Failed(why) = &sent {
            tracing::warn!(channel = %out.channel, id = %out.message.id, answer = %why, "a message was not delivered; it will be tried again");
        }
        if let Err(e) = notices.keep(out, sent).await {
            tracing::warn!(error = %e, "a try's answer could not be kept; the message is tried again");
            return;
        }
        if failed {
            return;
        }
    }
}
