//! The console's effects run against the ledger, each in its own task; the answer comes back as
//! a message.

use std::time::Duration;

use tokio::sync::mpsc::UnboundedSender;

use super::app::{self, Effect, Header, Msg};
use crate::error::Error;
use crate::ledger::Ledger;

/// Runs one piece of database work in a task; its answer comes back as a `Msg`.
pub(super) fn spawn(ledger: &Ledger, fx: Effect, operator: &str, tx: &UnboundedSender<Msg>) {
    let ledger = ledger.clone();
    let tx = tx.clone();
    let operator = operator.to_string();
    tokio::spawn(async move {
        let progress = |m: Msg| {
            let _ = tx.send(m);
        };
        let msg = run_effect_with(&ledger, fx, &operator, &progress).await;
        if let Some(m) = msg {
            let _ = tx.send(m);
        }
    });
}

/// The header's numbers, read together.
async fn header(ledger: &Ledger, operator: &str) -> Result<Header, Error> {
    Ok(Header {
        stats: Some(ledger.read().stats().await?),
        mine: ledger.read().count_mine(operator).await?,
        dispatcher_seen: ledger.read().dispatcher_seen().await?,
        replica_lag: ledger.read().replica_lag().await,
        at: Some(ledger.now()),
    })
}

pub async fn run_effect(ledger: &Ledger, fx: Effect, operator: &str) -> Option<Msg> {
    run_effect_with(ledger, fx, operator, &|_| {}).await
}

/// [`run_effect`], telling `progress` how a bulk action goes.
async fn run_effect_with(
    ledger: &Ledger,
    fx: Effect,
    operator: &str,
    progress: &(dyn Fn(Msg) + Sync),
) -> Option<Msg> {
    let s = |e: Error| e.to_string();
    Some(match fx {
        Effect::Page {
            seq,
            filter,
            position,
            limit,
            place,
        } => Msg::Page {
            seq,
            place,
            page: ledger
                .read()
                .page(&filter, operator, &position, limit)
                .await
                .map_err(s),
        },
        Effect::Detail { key } => {
            let detail = ledger
                .read()
                .show(&key, operator)
                .await
                .map(Box::new)
                .map_err(s);
            Msg::Detail { key, detail }
        }
        Effect::Header => Msg::Header(header(ledger, operator).await.map_err(s)),
        Effect::Stalled { seq, filter } => Msg::Stalled {
            seq,
            runs: ledger
                .read()
                .stalled_for(&filter, operator, crate::console::app::PAGE)
                .await
                .map_err(s),
        },
        Effect::Groups { seq, filter } => Msg::Groups {
            seq,
            groups: ledger.read().groups(&filter, operator).await.map_err(s),
        },
        Effect::Run { run } => Msg::Run {
            view: ledger
                .read()
                .run(&run, operator)
                .await
                .map(Box::new)
                .map_err(s),
            run,
        },
        Effect::Count { seq, filter } => Msg::Counted {
            seq,
            count: ledger
                .read()
                .count_matching(&filter, operator)
                .await
                .map_err(s),
        },
        Effect::Activity { seq, filter } => Msg::Activity {
            seq,
            events: ledger.read().activity(200, &filter).await.map_err(s),
        },
        Effect::Staff { .. }
        | Effect::Pause { .. }
        | Effect::Resume { .. }
        | Effect::MarkAll { .. }
        | Effect::BulkPreview { .. }
        | Effect::BulkApply { .. }
        | Effect::LookUp { .. }
        | Effect::BulkPreviewEach { .. }
        | Effect::BulkApplyEach { .. }
        | Effect::Reveal { .. }
        | Effect::RunAction { .. } => act(ledger, fx, operator, progress).await,
        Effect::Review { seq, days, scope } => Msg::Reviewed {
            seq,
            review: ledger
                .read()
                .review(Duration::from_secs(days * 86_400), &scope)
                .await
                .map(Box::new)
                .map_err(s),
        },
        Effect::Poll => Msg::Polled(ledger.read().latest_event_id().await.map_err(s)),
        Effect::UndoPreview => Msg::UndoPreviewed(
            ledger
                .staff()
                .undo_preview(crate::ledger::UndoOf::Last, operator)
                .await
                .map_err(s),
        ),
        Effect::Undo { action } => taken_back(ledger, &action, operator).await,
        Effect::Quit => return None,
    })
}

fn staff_verb(a: &crate::ledger::StaffAction) -> &'static str {
    use crate::ledger::StaffAction::*;
    match a {
        Claim { .. } => "claimed",
        Release => "released",
        ReconcileFound { .. } | ReconcileAbsent { .. } | LookUp { .. } => "reconciled",
        Retry { .. } => "will be retried with the same key",
        Close { .. } => "closed",
        Note { .. } => "note added",
        Correct { .. } => "corrected",
    }
}

/// A person's action on a run as a whole; what the status line says of it.
async fn run_action(
    ledger: &Ledger,
    run: String,
    action: crate::domain::run_action::RunAction,
    operator: &str,
) -> Msg {
    use crate::domain::run_action::RunAction;
    let what = match action {
        RunAction::Claim => "claimed",
        RunAction::Release => "released",
        RunAction::Note { .. } => "note added",
        RunAction::Close { .. } => "closed",
    };
    Msg::Acted(
        ledger
            .staff()
            .run_action(&run, operator, action)
            .await
            .map(|v| format!("run {run}: {what} ({})", v.state))
            .map_err(|e| e.to_string()),
    )
}

/// One staff action on one operation, and what the status line says of it.
async fn one_action(
    ledger: &Ledger,
    key: String,
    action: crate::ledger::StaffAction,
    operator: &str,
) -> Msg {
    let what = match &action {
        crate::ledger::StaffAction::Correct { corrected_as, .. } => {
            format!("corrected as {corrected_as}, which is sent once")
        }
        a => staff_verb(a).to_string(),
    };
    let result = ledger.staff().act(&key, operator, action).await;
    Msg::Acted(match result {
        Ok(a) => {
            let mut text = match a.kind {
                None => format!("{key}: nothing to change"),
                Some(_) if a.from == a.to => format!("{key}: {what}"),
                Some(_) => format!("{key}: {what}: {} → {}", a.from, a.to),
            };
            if let Some(w) = a.warning {
                text.push_str(&format!(" (warning: {w})"));
            }
            if let Some(id) = &a.action {
                text.push_str(&format!(" · {id}"));
                text.push_str(&app::undo::offer(ledger.config().undo_window));
            }
            Ok(text)
        }
        Err(e) => Err(format!("refused: {}", keys_to_press(&e.to_string()))),
    })
}

/// `U` confirmed: the action taken back, and what was left as it is (the first, with why).
async fn taken_back(ledger: &Ledger, action: &str, operator: &str) -> Msg {
    let undo = ledger
        .staff()
        .undo(crate::ledger::UndoOf::Id(action), operator, None);
    Msg::Acted(match undo.await {
        Ok(r) => {
            let text = r.summary(true);
            match r.refused.first() {
                None => Ok(text),
                Some((_, why)) => Err(format!("{text} · {why}")),
            }
        }
        Err(e) => Err(format!("refused: {e}")),
    })
}

/// A refusal as the console says it: the key to press next where the rules name what to do
/// (the command line's flags are the command line's).
fn keys_to_press(text: &str) -> String {
    text.replace(
        "take it over only with --force --reason",
        "take it over with C (it asks why)",
    )
    .replace("take it over first", "take it over first with C")
}

/// A pause (with its reason) or a resume of a workflow or a destination.
async fn pausing(
    ledger: &Ledger,
    what: crate::ledger::Pausable,
    name: String,
    reason: Option<String>,
    operator: &str,
) -> Msg {
    let it = format!("{} {name}", what.noun());
    let staff = ledger.staff();
    let back = app::undo::offer(ledger.config().undo_window);
    Msg::Acted(match reason {
        Some(reason) => match staff.pause_one(what, &name, &reason, operator).await {
            Ok(true) => Ok(format!("{it} paused{back}")),
            Ok(false) => Ok(format!("{it} was already paused")),
            Err(e) => Err(format!("refused: {e}")),
        },
        None => match staff.resume_one(what, &name, operator).await {
            Ok(true) => Ok(format!("{it} resumed{back}")),
            Ok(false) => Ok(format!("{it} was not paused")),
            Err(e) => Err(format!("refused: {e}")),
        },
    })
}

/// The effects that act: staff actions, pauses, marks, bulk runs, lookups and reveals.
async fn act(ledger: &Ledger, fx: Effect, operator: &str, progress: &(dyn Fn(Msg) + Sync)) -> Msg {
    let s = |e: Error| e.to_string();
    match fx {
        Effect::RunAction { run, action } => run_action(ledger, run, action, operator).await,
        Effect::Staff { key, action } => one_action(ledger, key, action, operator).await,
        Effect::Pause { what, name, reason } => {
            pausing(ledger, what, name, Some(reason), operator).await
        }
        Effect::Resume { what, name } => pausing(ledger, what, name, None, operator).await,
        Effect::MarkAll { seq, filter } => Msg::Marked {
            seq,
            keys: ledger
                .read()
                .matching_keys(&filter, operator)
                .await
                .map_err(s),
        },
        Effect::BulkPreview { keys, action } => Msg::Previewed(
            ledger
                .staff()
                .bulk_preview(&keys, &action, operator)
                .await
                .map_err(s),
        ),
        Effect::BulkApply {
            keys,
            action,
            pace,
            stop,
        } => {
            // progress at most every 1% (a frame per item would flood the loop)
            let step = (keys.len() / 100).max(1);
            let items: Vec<(String, crate::ledger::StaffAction)> =
                keys.iter().map(|k| (k.clone(), action.clone())).collect();
            let tick = |done, total| {
                if done % step == 0 || done == total {
                    progress(Msg::BulkProgress { done, total });
                }
            };
            let staff = ledger.staff();
            // a retry of many sends one first, and the others once the destination took it
            let report = match action {
                crate::ledger::StaffAction::Retry { .. } => {
                    let waiting = |_: &str, _: &str, _| {};
                    (staff.bulk_apply_canary_first(&items, operator, &stop.0, pace, tick, waiting))
                        .await
                }
                _ => {
                    staff
                        .bulk_apply_each(&items, operator, &stop.0, pace, tick)
                        .await
                }
            };
            Msg::BulkDone(report.map_err(s))
        }
        Effect::LookUp { keys, pace, stop } => Msg::LookedUp(
            app::lookup::look_up_each(ledger, &keys, pace, &stop.0, progress)
                .await
                .map_err(s),
        ),
        Effect::BulkPreviewEach { items } => Msg::Previewed(
            ledger
                .staff()
                .bulk_preview_each(&items, operator)
                .await
                .map_err(s),
        ),
        Effect::BulkApplyEach { items, stop } => {
            let step = (items.len() / 100).max(1);
            let report = ledger
                .staff()
                .bulk_apply_each(&items, operator, &stop.0, None, |done, total| {
                    if done % step == 0 || done == total {
                        progress(Msg::BulkProgress { done, total });
                    }
                })
                .await;
            Msg::BulkDone(report.map_err(s))
        }
        Effect::Reveal { key, path, reason } => {
            let value = ledger
                .staff()
                .reveal(&key, &path, &reason, operator)
                .await
                .map_err(s);
            Msg::Revealed { key, path, value }
        }
        _ => unreachable!("act is given the effects that act only"),
    }
}
