//! `settle correct` (manual: Correcting a request): a rejected or failed request corrected and sent
//! once under a new key, one key or many with a frozen preview of what changes per item.

use super::bulk::{Confirm, chosen_keys, confirm_and_apply};
use super::common::{invalid, required};
use super::output;
use super::targets::Many;
use crate::domain::edit::Edit;
use crate::error::{Error, Result};
use crate::ledger::{CorrectionPreview, Ledger, StaffAction};

/// `settle correct`: one key (under `--new-key` or the next along its chain), or many.
pub(super) async fn correct(
    ledger: &Ledger,
    args: &CorrectArgs,
    operator: &Option<String>,
) -> Result<i32> {
    let actor = required(operator)?;
    let mut edits = Vec::new();
    for s in &args.set {
        edits.push(Edit::set(s).map_err(invalid)?);
    }
    for u in &args.unset {
        edits.push(Edit::unset(u).map_err(|e| invalid(format!("--unset {u}: {e}")))?);
    }
    if edits.is_empty() {
        return Err(invalid(
            "nothing to change: say what with --set PATH=VALUE or --unset PATH".into(),
        ));
    }
    let staff = ledger.staff();
    if let Some(key) = args.many.single() {
        let action = staff
            .correction(key, args.new_key.as_deref(), edits, &args.note)
            .await?;
        let StaffAction::Correct { corrected_as, .. } = &action else {
            unreachable!("a correction is a correction")
        };
        let corrected_as = corrected_as.clone();
        let a = staff.act(key, actor, action).await?;
        output::applied(&a, &format!("corrected as {}", output::esc(&corrected_as)));
        say!(
            "{}: {}",
            output::esc(&corrected_as),
            ledger
                .read()
                .operation(&corrected_as, actor)
                .await?
                .next_step
        );
        return Ok(0);
    }
    if args.new_key.is_some() {
        return Err(invalid(
            "--new-key names the correction of one key; many are corrected along their chains (KEY:c2)"
                .into(),
        ));
    }
    let keys = chosen_keys(ledger, &args.many, actor).await?;
    let mut items = Vec::with_capacity(keys.len());
    let mut unnamed = Vec::new();
    for key in keys {
        match staff
            .correction(&key, None, edits.clone(), &args.note)
            .await
        {
            Ok(action) => items.push((key, action)),
            Err(Error::Refused(_)) => unnamed.push(key),
            Err(e) => return Err(e),
        }
    }
    let mut preview = staff.correction_preview(&items, actor).await?;
    if !unnamed.is_empty() {
        preview.bulk.matched += unnamed.len();
        preview.bulk.refused.insert(
            "its correction's chain has no free key (too long, or taken)".into(),
            unnamed,
        );
    }
    show_preview(&preview, &args.many);
    let eligible: Vec<(String, StaffAction)> = items
        .into_iter()
        .filter(|(k, _)| preview.bulk.eligible.contains(k))
        .collect();
    let how = Confirm {
        dry_run: args.many.dry_run,
        yes: args.many.yes,
        json: args.many.json,
        canary: false,
    };
    confirm_and_apply(
        ledger,
        &preview.bulk,
        &eligible,
        actor,
        "correct",
        how,
        None,
    )
    .await
}

/// The preview: a line per item (`KEY -> KEY:c2  country "FR" -> "DE"`, redacted fields as
/// `[redacted]`), then what is left alone; or with `--json --dry-run` the whole preview.
fn show_preview(preview: &CorrectionPreview, many: &Many) {
    if many.json {
        if many.dry_run {
            output::json(preview);
        }
        return;
    }
    for line in &preview.items {
        let changes: Vec<String> = line
            .changes
            .iter()
            .map(|c| {
                let shown = |v: &Option<serde_json::Value>| {
                    v.as_ref().map_or("(none)".to_string(), |v| v.to_string())
                };
                format!("{} {} -> {}", c.path, shown(&c.before), shown(&c.after))
            })
            .collect();
        say!(
            "{}",
            output::esc(&format!(
                "{} -> {}  {}",
                line.key,
                line.corrected_as,
                changes.join(", ")
            ))
        );
    }
    output::bulk_preview("correct", &preview.bulk, false);
    for (why, keys) in &preview.bulk.refused {
        crate::tell!("  {}: {}", output::esc(why), output::esc(&keys.join(" ")));
    }
}

/// The arguments of `settle correct`.
#[derive(Debug, clap::Args)]
pub struct CorrectArgs {
    #[command(flatten)]
    pub many: Many,
    /// A field's new value, e.g. email='"a@b.example"' (JSON, or else taken as a string);
    /// repeat for more fields
    #[arg(long, value_name = "PATH=VALUE")]
    pub set: Vec<String>,
    /// A field to remove, e.g. customer.phone
    #[arg(long, value_name = "PATH")]
    pub unset: Vec<String>,
    /// The corrected request's key (one key only; by default KEY:c2, then :c3 along a chain)
    #[arg(long, value_name = "KEY2")]
    pub new_key: Option<String>,
    /// Why, for the history (required)
    #[arg(long, value_name = "TEXT")]
    pub note: String,
}
