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

/// Sends while it lives (`None` where no team has a channel, or where this process lacks a
/// channel's variable). [`Sending::stop`] hands the lease over; dropped, it only stops.
pub struct Sending {
    task: JoinHandle<()>,
    ledger: Ledger,
    holder: String,
}

impl Drop for Sending {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Sending {
    /// A clean stop: the sends under way are cut off (their messages are tried again, with the
    /// same ids, by the next sender) and the lease is given up, so that another process sends
    /// at its next turn rather than when the lease would have run out.
    pub async fn stop(mut self) {
        self.task.abort();
        let _ = (&mut self.task).await;
        if let Err(e) = self.ledger.notices().step_down(&self.holder).await {
            tracing::warn!(error = %e, "the notification sender's lease could not be given up: another takes it over within 30 s");
        }
    }
}

/// Each channel's sends under way, cut off when the sender stops.
#[derive(Default)]
struct Busy(HashMap<String, JoinHandle<()>>);

impl Drop for Busy {
    fn drop(&mut self) {
        for sending in self.0.values() {
            sending.abort();
        }
    }
}

/// The variables each channel needs that this process's environment does not set, as a line
/// each: `CHANNEL: the variable NAME (what) is not set`.
pub fn missing_variables(config: &crate::config::Config) -> Vec<String> {
    let mut out = Vec::new();
    for (name, c) in &config.channels {
        for (var, what) in [(&c.url_env, "its URL"), (&c.secret_env, "its secret")] {
            if let Some(var) = var
                && super::channels::variable(var).is_none()
            {
                out.push(format!("{name}: the variable {var} ({what}) is not set"));
            }
        }
    }
    out
}

/// Starts the sender of this process, named `holder` for the lease, turning every `every`. A
/// process that lacks a channel's variable says so (stderr and the log) and sends nothing: a
/// sender without them would fail every message; one that has them sends.
pub fn start(ledger: &Ledger, holder: String, every: Duration) -> Option<Sending> {
    if ledger.config().channels.is_empty() {
        return None;
    }
    for line in ledger.config().warnings() {
        crate::tell!("settle: {line}");
        tracing::warn!(warning = %line, "config");
    }
    let missing = missing_variables(ledger.config());
    if !missing.is_empty() {
        for line in &missing {
            crate::tell!(
                "settle: {line}: this process sends no message (set it where settle runs, e.g. /etc/settle/env; messages wait for a process that has it)"
            );
            tracing::warn!(missing = %line, "notification sender not started");
        }
        return None;
    }
    let task = {
        let (ledger, holder) = (ledger.clone(), holder.clone());
        tokio::spawn(async move {
            let http = crate::outbound::client();
            let mut busy = Busy::default();
            loop {
                if let Err(e) = turn_beside(&ledger, &holder, &http, &mut busy.0).await {
                    tracing::warn!(error = %e, "the notification sender could not go on; trying again");
                }
                tokio::time::sleep(every).await;
            }
        })
    };
    Some(Sending {
        task,
        ledger: ledger.clone(),
        holder,
    })
}

/// One turn, waiting for every channel's sends (a test turns by hand on a clock of its own).
pub async fn turn(
    ledger: &Ledger,
    holder: &str,
    http: &reqwest::Client,
) -> crate::error::Result<()> {
    let mut busy = Busy::default();
    turn_beside(ledger, holder, http, &mut busy.0).await?;
    for (_, sending) in std::mem::take(&mut busy.0) {
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
        // what it names may have been settled while it waited: then it is not told
        match notices.still_told(&out).await {
            Ok(true) => {}
            Ok(false) => {
                if let Err(e) = notices.settled(out).await {
                    tracing::warn!(error = %e, "a settled message could not be kept as such");
                    return;
                }
                continue;
            }
            Err(e) => {
                tracing::warn!(error = %e, "a message could not be checked before it was sent");
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
