//! `settle notify test CHANNEL` and `settle notifications` (manual: Owners and notifications): a
//! channel tried now, and the messages recorded with their delivery.

use clap::Subcommand;

use super::output;
use crate::domain::escape_text as esc;
use crate::error::{Error, Result};
use crate::ledger::{Ledger, Message, Sent};

#[derive(Debug, Subcommand)]
pub enum NotifyCmd {
    /// Send a test message through CHANNEL now and print its answer (exit 1 where it failed)
    Test {
        /// The channel, as [channels.NAME] names it
        channel: String,
    },
}

/// The arguments of `settle notifications`.
#[derive(Debug, clap::Args)]
pub struct NotificationsArgs {
    /// How many, the newest first
    #[arg(long, default_value_t = 20)]
    pub limit: i64,
    /// An array of messages with their delivery as JSON
    #[arg(long)]
    pub json: bool,
}

pub(super) async fn notify(ledger: &Ledger, what: &NotifyCmd) -> Result<i32> {
    let NotifyCmd::Test { channel } = what;
    let Some(config) = ledger.config().channels.get(channel) else {
        return Err(Error::Invalid(format!(
            "no channel {channel}: the config's channels are {}",
            names(ledger)
        )));
    };
    let message = Message {
        id: format!("test-{:016x}", rand::random::<u64>()),
        kind: "test".into(),
        level: "info".into(),
        next_step: Some("Nothing to do: this is a test".into()),
        created_at: ledger.now(),
        ..Message::default()
    };
    for line in ledger.config().warnings() {
        crate::tell!("settle: {line}");
    }
    let http = crate::outbound::client();
    match crate::notify::send(&http, channel, config, &message).await {
        Sent::Ok(answer) => {
            crate::say!("{channel}: sent ({answer}), id {}", message.id);
            Ok(0)
        }
        Sent::Failed(answer) => {
            crate::tell!("settle: {channel}: not sent: {answer}");
            Ok(1)
        }
    }
}

fn names(ledger: &Ledger) -> String {
    let names: Vec<&str> = ledger
        .config()
        .channels
        .keys()
        .map(String::as_str)
        .collect();
    match names.is_empty() {
        true => "none".into(),
        false => names.join(", "),
    }
}

pub(super) async fn notifications(ledger: &Ledger, args: &NotificationsArgs) -> Result<i32> {
    if !(1..=10_000).contains(&args.limit) {
        return Err(Error::Invalid("--limit: from 1 to 10000".into()));
    }
    let recent = ledger.notices().recent(args.limit).await?;
    if args.json {
        output::json(&recent);
        return Ok(0);
    }
    if recent.is_empty() {
        crate::say!("no notifications");
        return Ok(0);
    }
    for d in &recent {
        let status = match d.status.as_str() {
            "pending" if d.tries > 0 => format!("failing ({} tries)", d.tries),
            "pending" => "waiting".to_string(),
            "sent" => "sent".to_string(),
            _ => format!("given up ({} tries)", d.tries),
        };
        crate::say!(
            "{}  {:<16} {:<18} {}",
            d.created_at.format("%Y-%m-%d %H:%M:%S"),
            esc(&d.channel),
            status,
            esc(&d.message.headline())
        );
        if let Some(a) = &d.answer {
            crate::say!("{:>21}last answer: {}", "", esc(a));
        }
    }
    Ok(0)
}
