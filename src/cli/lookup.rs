//! `settle lookup KEY... | --where FILTER` (manual: Many at once): the lookup a safe next step asks for, run
//! now. The set is chosen and frozen at a preview; each eligible item's destination is asked
//! (paced by `--rate`), and what it answered is shown; then, with the person's confirmation, each
//! found or absent item is reconciled in one audited action that names the lookup as its
//! evidence. No answer leaves an item as it was and says why.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use serde::Serialize;

use super::bulk::chosen_keys;
use super::common::{invalid, parse_rate};
use super::output::{self, esc};
use super::targets::Many;
use crate::dispatch::Lookups;
use crate::domain::LookupAnswer;
use crate::error::Result;
use crate::ledger::{BulkPreview, BulkReport, Ledger, StaffAction};

/// One item's lookup, as `--json` gives it.
#[derive(Clone, Serialize)]
struct Looked {
    key: String,
    destination: String,
    answer: &'static str,
    reference: Option<String>,
    http_status: Option<u16>,
    why: Option<String>,
}

impl Looked {
    fn new(key: &str, destination: &str, answer: &LookupAnswer) -> Looked {
        let (http_status, why) = match answer {
            LookupAnswer::Found { http_status, .. } | LookupAnswer::Absent { http_status } => {
                (Some(*http_status), None)
            }
            LookupAnswer::NoAnswer { why } => (None, Some(why.clone())),
        };
        Looked {
            key: key.into(),
            destination: destination.into(),
            answer: answer.as_str(),
            reference: answer.reference().map(str::to_string),
            http_status,
            why,
        }
    }
}

/// The whole run as one JSON document.
#[derive(Serialize)]
struct Document<'a> {
    preview: &'a BulkPreview,
    looked_up: Vec<Looked>,
    /// What the answers allow: the items to reconcile and those left alone, by reason.
    reconcile: &'a BulkPreview,
    report: Option<&'a BulkReport>,
}

/// What the sample asks of the rules at the preview: may this person reconcile this item by a
/// lookup (its state, the claim, their role, a lookup settle can run).
fn sample() -> StaffAction {
    StaffAction::LookUp {
        answer: LookupAnswer::Found {
            reference: "REF".into(),
            http_status: 200,
        },
    }
}

pub(super) async fn run(
    ledger: &Ledger,
    many: &Many,
    rate: Option<&str>,
    actor: &str,
) -> Result<i32> {
    let pace = rate.map(parse_rate).transpose()?;
    let keys = chosen_keys(ledger, many, actor).await?;
    let preview = ledger.staff().bulk_preview(&keys, &sample(), actor).await?;
    if !many.json {
        output::bulk_preview("look up", &preview, false);
    }
    let stop = Arc::new(AtomicBool::new(false));
    {
        let stop = stop.clone();
        tokio::spawn(async move {
            if tokio::signal::ctrl_c().await.is_ok() {
                stop.store(true, Ordering::SeqCst);
            }
        });
    }
    let answers = look_up_each(ledger, &preview.eligible, pace, &stop, !many.json).await?;
    let looked_up: Vec<Looked> = answers
        .iter()
        .map(|(k, d, a)| Looked::new(k, d, a))
        .collect();
    // what the answers allow, asked of the rules again (an absent at a failed item changes
    // nothing; no answer reconciles nothing)
    let items: Vec<(String, StaffAction)> = answers
        .iter()
        .filter(|(_, _, a)| !matches!(a, LookupAnswer::NoAnswer { .. }))
        .map(|(k, _, a)| (k.clone(), StaffAction::LookUp { answer: a.clone() }))
        .collect();
    let reconcile = ledger.staff().bulk_preview_each(&items, actor).await?;
    let unanswered = answers.len() - items.len();
    let not_reached = preview.eligible.len() - answers.len();
    let left_alone = preview.refused.values().map(Vec::len).sum::<usize>()
        + unanswered
        + not_reached
        + reconcile.refused.values().map(Vec::len).sum::<usize>();
    if !many.json && !reconcile.refused.is_empty() {
        for (why, keys) in &reconcile.refused {
            say!("left as they are ({}): {}", esc(why), esc(&keys.join(" ")));
        }
    }
    if not_reached > 0 && !many.json {
        say!("stopped: {not_reached} not looked up");
    }
    let eligible: Vec<(String, StaffAction)> = items
        .into_iter()
        .filter(|(k, _)| reconcile.eligible.contains(k))
        .collect();
    let document = |report: Option<&BulkReport>| {
        output::json(&Document {
            preview: &preview,
            looked_up: looked_up.clone(),
            reconcile: &reconcile,
            report,
        })
    };
    if many.dry_run || eligible.is_empty() || stop.load(Ordering::SeqCst) {
        if many.json {
            document(None);
        } else if !many.dry_run && eligible.is_empty() {
            say!("nothing to reconcile");
        }
        return Ok(if left_alone > 0 && !many.dry_run {
            3
        } else {
            0
        });
    }
    if !confirmed(many, eligible.len())? {
        say!("nothing changed");
        return Ok(0);
    }
    let report = ledger
        .staff()
        .bulk_apply_each(&eligible, actor, &stop, None, |_, _| {})
        .await?;
    if many.json {
        document(Some(&report));
    } else {
        output::bulk_report("reconcile by lookup", &report, false);
    }
    let all = report.changed_meanwhile.is_empty() && report.not_reached.is_empty();
    Ok(if all && left_alone == 0 { 0 } else { 3 })
}

/// Asks each item's destination, `pace` apart, until all are asked or Ctrl-C; prints each
/// answer as it comes when `say` is set.
async fn look_up_each(
    ledger: &Ledger,
    keys: &[String],
    pace: Option<Duration>,
    stop: &AtomicBool,
    say: bool,
) -> Result<Vec<crate::dispatch::Looked>> {
    Lookups::new(ledger.config())
        .each(ledger, keys, pace, stop, |_, _, (key, dest, answer)| {
            if say {
                say!("{}: {}", esc(key), esc(&answer.describe(dest)));
            }
        })
        .await
}

/// `--yes`, or `y` at a terminal.
fn confirmed(many: &Many, n: usize) -> Result<bool> {
    use std::io::IsTerminal;
    if many.yes {
        return Ok(true);
    }
    if !std::io::stdin().is_terminal() {
        return Err(invalid(
            "reconciling by a lookup without a terminal needs --yes (--dry-run only looks up)"
                .into(),
        ));
    }
    crate::tell!("reconcile {n} item(s) by what the lookup said? [y/N]");
    let mut answer = String::new();
    let _ = std::io::stdin().read_line(&mut answer);
    Ok(answer.trim().eq_ignore_ascii_case("y"))
}
