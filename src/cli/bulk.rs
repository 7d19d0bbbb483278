//! A staff action on many operations (manual: Many at once): chosen, previewed, confirmed, applied item by item.
use std::time::Duration;

use super::common::{invalid, looks_past_exceptions};
use super::output;
use super::targets::Many;
use crate::error::Result;
use crate::ledger::{Ledger, ListFilter, Scope, StaffAction};

/// A staff action on one operation (`what` says what it did), or on many (manual: Many at once): the set is
/// chosen, frozen at a preview grouped by reason, confirmed (`--yes`, or `y` on a terminal), then
/// acted on item by item with one batch id; Ctrl-C stops between items. Exit 3 when any chosen
/// item was left alone.
pub(super) async fn act_on(
    ledger: &Ledger,
    many: &Many,
    action: StaffAction,
    actor: &str,
    what: &str,
    verb: &str,
    (pace, canary): (Option<Duration>, bool),
) -> Result<i32> {
    if let Some(key) = many.single() {
        let a = ledger.staff().act(key, actor, action).await?;
        output::applied(&a, what);
        return Ok(0);
    }
    let keys = chosen_keys(ledger, many, actor).await?;
    let preview = ledger.staff().bulk_preview(&keys, &action, actor).await?;
    if many.dry_run || !many.json {
        output::bulk_preview(verb, &preview, many.json && many.dry_run);
    }
    let items: Vec<(String, StaffAction)> = preview
        .eligible
        .iter()
        .map(|k| (k.clone(), action.clone()))
        .collect();
    let how = Confirm {
        dry_run: many.dry_run,
        yes: many.yes,
        json: many.json,
        canary,
    };
    confirm_and_apply(ledger, &preview, &items, actor, verb, how, pace).await
}

/// The keys a staff action is for: those given, or every operation the filter matches now (the
/// exceptions, or every state when the filter names states or claims).
pub(super) async fn chosen_keys(ledger: &Ledger, many: &Many, actor: &str) -> Result<Vec<String>> {
    Ok(match &many.filter {
        Some(text) => {
            let query = crate::domain::filter::Filter::parse(text).map_err(invalid)?;
            let scope = if looks_past_exceptions(&query) {
                Scope::All
            } else {
                Scope::Exceptions
            };
            let filter = ListFilter {
                query,
                scope,
                ..Default::default()
            };
            ledger.read().matching_keys(&filter, actor).await?
        }
        None => many.keys.clone(),
    })
}

/// How a bulk action goes on after its preview.
#[derive(Clone, Copy)]
pub(super) struct Confirm {
    pub(super) dry_run: bool,
    pub(super) yes: bool,
    pub(super) json: bool,
    /// Send the first item alone and go on only when the destination accepts it (a retry).
    pub(super) canary: bool,
}

/// After a preview: stop there (`--dry-run`), or ask (on a terminal; `--yes` otherwise), then
/// act item by item with progress on a terminal and Ctrl-C stopping between items, and print
/// the summary. Exit 3 when anything chosen was left alone.
pub(super) async fn confirm_and_apply(
    ledger: &Ledger,
    preview: &crate::ledger::BulkPreview,
    items: &[(String, StaffAction)],
    actor: &str,
    verb: &str,
    how: Confirm,
    pace: Option<Duration>,
) -> Result<i32> {
    use std::io::IsTerminal;
    let left_alone = preview.matched - preview.eligible.len();
    if how.dry_run || items.is_empty() {
        return Ok(if left_alone > 0 && !how.dry_run { 3 } else { 0 });
    }
    if !how.yes {
        if !std::io::stdin().is_terminal() {
            return Err(invalid(
                "a bulk action without a terminal needs --yes (--dry-run shows what it would do)"
                    .into(),
            ));
        }
        crate::tell!("go on with {} item(s)? [y/N]", items.len());
        let mut answer = String::new();
        let _ = std::io::stdin().read_line(&mut answer);
        if !answer.trim().eq_ignore_ascii_case("y") {
            say!("nothing changed");
            return Ok(0);
        }
    }
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    {
        let stop = stop.clone();
        tokio::spawn(async move {
            if tokio::signal::ctrl_c().await.is_ok() {
                stop.store(true, std::sync::atomic::Ordering::SeqCst);
            }
        });
    }
    let tty = std::io::stderr().is_terminal();
    let progress = |i, n| {
        if tty {
            eprint!("\r{verb} {i}/{n}");
        }
    };
    let staff = ledger.staff();
    let report = match how.canary {
        true => {
            let waiting = |key: &str, dest: &str, wait: Duration| {
                crate::tell!(
                    "canary {}: retried alone first; waiting for {}'s answer (up to {}s)",
                    output::esc(key),
                    output::esc(dest),
                    wait.as_secs()
                )
            };
            (staff.bulk_apply_canary_first(items, actor, &stop, pace, progress, waiting)).await?
        }
        false => {
            staff
                .bulk_apply_each(items, actor, &stop, pace, progress)
                .await?
        }
    };
    if tty {
        eprintln!();
    }
    output::bulk_report(verb, &report, how.json);
    let all = report.changed_meanwhile.is_empty()
        && report.not_reached.is_empty()
        && report.not_sent.is_empty();
    Ok(if all && left_alone == 0 { 0 } else { 3 })
}

/// `reconcile --from FILE` (manual: Many at once): what the destination's own records say, as CSV
/// (`key,outcome,reference` with a header) or JSON lines (`{"key":..,"outcome":"found"|"absent",
/// "reference":..}`). A malformed line is reported and left out; the preview says per line what
/// will happen (an unknown key or an item in the wrong state is reported, not applied).
pub(super) async fn reconcile_from(
    ledger: &Ledger,
    file: &std::path::Path,
    how: Confirm,
    actor: &str,
) -> Result<i32> {
    let text = std::fs::read_to_string(file)
        .map_err(|e| invalid(format!("cannot read {}: {e}", file.display())))?;
    let (lines, problems) = reconcile_lines(&text);
    for (n, why) in &problems {
        crate::tell!("line {n}: {}", output::esc(why));
    }
    let items: Vec<(String, StaffAction)> = lines
        .iter()
        .map(|(_, k, a)| (k.clone(), a.clone()))
        .collect();
    let preview = ledger.staff().bulk_preview_each(&items, actor).await?;
    if how.json && how.dry_run {
        output::json(&preview);
    } else {
        let why_of = |key: &str| {
            preview
                .refused
                .iter()
                .find(|(_, keys)| keys.iter().any(|k| k == key))
                .map(|(why, _)| why.clone())
        };
        for (n, key, action) in &lines {
            let what = match action {
                StaffAction::ReconcileFound { reference, .. } => format!("found {reference}"),
                _ => "absent".to_string(),
            };
            let verdict =
                why_of(key).map_or("will be reconciled".into(), |w| format!("left alone: {w}"));
            say!(
                "line {n}: {}: {}: {verdict}",
                output::esc(key),
                output::esc(&what)
            );
        }
        output::bulk_preview("reconcile", &preview, false);
    }
    let eligible: Vec<(String, StaffAction)> = items
        .into_iter()
        .filter(|(k, _)| preview.eligible.contains(k))
        .collect();
    let code =
        confirm_and_apply(ledger, &preview, &eligible, actor, "reconcile", how, None).await?;
    Ok(if problems.is_empty() { code } else { 2 })
}

/// The lines of a reconcile file: (line number, key, action), and the malformed ones with why.
#[allow(clippy::type_complexity)]
pub(super) fn reconcile_lines(
    text: &str,
) -> (Vec<(usize, String, StaffAction)>, Vec<(usize, String)>) {
    let mut lines = Vec::new();
    let mut problems = Vec::new();
    let mut rows = text
        .lines()
        .enumerate()
        .map(|(i, l)| (i + 1, l.trim()))
        .filter(|(_, l)| !l.is_empty());
    let Some((first_n, first)) = rows.next() else {
        return (lines, problems);
    };
    let json = first.starts_with('{');
    let note = || Some("reconciled from the destination's records".to_string());
    let take = |n: usize, key: &str, outcome: &str, reference: Option<&str>| {
        let action = match (outcome, reference.filter(|r| !r.is_empty())) {
            ("found", Some(r)) => StaffAction::ReconcileFound {
                reference: r.to_string(),
                note: note(),
            },
            ("found", None) => return Err((n, "found needs a reference".to_string())),
            ("absent", _) => StaffAction::ReconcileAbsent { note: note() },
            (other, _) => {
                let other = crate::domain::escape_text(other);
                return Err((n, format!("outcome '{other}': use found or absent")));
            }
        };
        crate::domain::validate_key(key).map_err(|e| (n, e))?;
        Ok((n, key.to_string(), action))
    };
    let mut keep = |r: std::result::Result<(usize, String, StaffAction), (usize, String)>| match r {
        Ok(line) => lines.push(line),
        Err(p) => problems.push(p),
    };
    if json {
        for (n, l) in std::iter::once((first_n, first)).chain(rows) {
            match serde_json::from_str::<serde_json::Value>(l) {
                Ok(v) => match (v["key"].as_str(), v["outcome"].as_str()) {
                    (Some(k), Some(o)) => keep(take(n, k, o, v["reference"].as_str())),
                    _ => keep(Err((n, "a line needs key and outcome".into()))),
                },
                Err(e) => keep(Err((n, format!("not JSON: {e}")))),
            }
        }
    } else {
        let header: Vec<String> = first.split(',').map(|c| c.trim().to_lowercase()).collect();
        if header != ["key", "outcome", "reference"] {
            keep(Err((
                first_n,
                "the header must be key,outcome,reference".into(),
            )));
            return (lines, problems);
        }
        for (n, l) in rows {
            let cells: Vec<&str> = l.split(',').map(|c| c.trim().trim_matches('"')).collect();
            match cells.as_slice() {
                [k, o] => keep(take(n, k, o, None)),
                [k, o, r] => keep(take(n, k, o, Some(r))),
                _ => keep(Err((n, "a row is key,outcome,reference".into()))),
            }
        }
    }
    (lines, problems)
}
