//! `e`: a correction put together in the console (manual: Correcting a request): the item's
//! payload fields to pick from (redacted ones shown as `[redacted]`, and typed unseen), a new value
//! for each picked, a note, then the confirmation. Offered only where the ledger accepts a
//! correction; the correction's key is the next along the item's chain.

use tui_input::Input;

use super::form::{ActionKind, Form, FormStep};
use crate::domain::edit::{Edit, fields};
use crate::domain::transition::correction_key;
use crate::ledger::{OperationDetail, OperationView, StaffAction};

/// Fields offered in the form (`1`-`9`); more are corrected with `settle correct`.
const MAX_FIELDS: usize = 9;

/// The label of the note's step.
const NOTE: &str = "note (why it is corrected)";

/// What a field shows until it is changed: `[redacted]` for a redacted one.
fn is_redacted(shown: &str) -> bool {
    shown.contains("[redacted")
}

/// The form of a correction of `row`, from its detail (loaded for the selected item).
pub(super) fn correct_form(
    row: &OperationView,
    detail: Option<&OperationDetail>,
) -> Result<Form, String> {
    let Some(d) = detail.filter(|d| d.op.key == row.key) else {
        return Err(format!("{} is still loading: press e again", row.key));
    };
    correction_key(&row.key).map_err(|r| r.0.replace("--new-key", "settle correct --new-key"))?;
    let all = fields(&d.payload);
    if all.is_empty() {
        return Err(format!(
            "{} has no field to change here: settle correct --set",
            row.key
        ));
    }
    let mut form = Form::new(ActionKind::Correct, row.key.clone(), FormStep::Confirm);
    if all.len() > MAX_FIELDS {
        form.hint = Some(format!(
            "the first {MAX_FIELDS} of {} fields: settle correct --set changes any",
            all.len()
        ));
    }
    form.fields = all
        .into_iter()
        .take(MAX_FIELDS)
        .map(|(path, v)| (path, v.to_string()))
        .collect();
    form.step = FormStep::Choose(options(&form));
    Ok(form)
}

/// The fields to pick, each with its value now (or the new one, once changed), and `d` to go on.
fn options(form: &Form) -> Vec<(char, String)> {
    let mut out: Vec<(char, String)> = ('1'..='9')
        .zip(&form.fields)
        .map(|(k, (path, shown))| {
            let now = match form.edits.iter().find(|(p, _)| p == path) {
                Some(_) if is_redacted(shown) => format!("{path} = [redacted] (changed)"),
                Some((_, v)) => format!("{path} = {} (was {})", short(v), short(shown)),
                None => format!("{path} = {}", short(shown)),
            };
            (k, now)
        })
        .collect();
    out.push(('d', "done: give a note, then confirm".into()));
    out
}

fn short(text: &str) -> String {
    match text.char_indices().nth(40) {
        Some((i, _)) => format!("{}…", &text[..i]),
        None => text.to_string(),
    }
}

/// A choice at the form's `Choose` step: a field to change, or `d` to go on to the note.
pub(super) fn choose(form: &mut Form, c: char) {
    if c == 'd' {
        if form.edits.is_empty() {
            form.hint = Some("change a field first (its number)".into());
            return;
        }
        form.hint = None;
        form.secret = false;
        form.step = FormStep::Text {
            label: NOTE,
            required: true,
        };
        return;
    }
    let Some((path, shown)) = c
        .to_digit(10)
        .and_then(|n| form.fields.get(n as usize - 1))
        .cloned()
    else {
        return;
    };
    form.secret = is_redacted(&shown);
    // a value to edit where it can be seen; a redacted one is typed afresh, unseen
    form.input = if form.secret {
        Input::default()
    } else {
        Input::new(match form.edits.iter().find(|(p, _)| *p == path) {
            Some((_, v)) => v.clone(),
            None => shown,
        })
    };
    form.field = Some(path);
    form.hint = None;
    form.step = FormStep::Text {
        label: "new value (JSON, or text)",
        required: true,
    };
}

/// A value entered: a field's new value (back to the fields), or the note (on to confirm).
pub(super) fn entered(form: &mut Form, label: &str, value: String) {
    if label == NOTE {
        form.text = Some(value);
        form.step = FormStep::Confirm;
        return;
    }
    if let Some(path) = form.field.take() {
        form.edits.retain(|(p, _)| *p != path);
        form.edits.push((path, value));
    }
    form.secret = false;
    form.step = FormStep::Choose(options(form));
}

/// The correction the form has put together.
pub(super) fn action(form: &Form) -> Option<StaffAction> {
    let edits = form
        .edits
        .iter()
        .map(|(path, value)| Edit::set(&format!("{path}={value}")))
        .collect::<Result<Vec<_>, _>>()
        .ok()?;
    Some(StaffAction::Correct {
        corrected_as: correction_key(&form.target).ok()?,
        edits,
        note: form.text.clone().unwrap_or_default(),
    })
}

/// What the form says it holds: the correction's key and each field's new value, a redacted one
/// as `[redacted]`; the field being changed.
pub fn summary(form: &Form) -> Vec<String> {
    let mut lines = Vec::new();
    if let Some(path) = &form.field {
        lines.push(format!("changing {path}"));
    }
    if form.edits.is_empty() {
        return lines;
    }
    let key = correction_key(&form.target).unwrap_or_default();
    lines.push(format!("as {key}:"));
    for (path, value) in &form.edits {
        let redacted = form
            .fields
            .iter()
            .any(|(p, shown)| p == path && is_redacted(shown));
        lines.push(match redacted {
            true => format!("  {path} → [redacted]"),
            false => format!("  {path} → {}", short(value)),
        });
    }
    lines
}
