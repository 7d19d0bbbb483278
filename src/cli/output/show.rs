//! `settle show` out: one operation whole, its attempts and history.

use chrono::{DateTime, Utc};

use super::text::esc;
use crate::domain::format_age;
use crate::ledger::OperationDetail;

fn when(t: DateTime<Utc>) -> String {
    t.format("%Y-%m-%d %H:%M:%S UTC").to_string()
}

pub fn show(d: &OperationDetail, now: DateTime<Utc>) {
    let v = &d.op;
    say!("key          {}", esc(&v.key));
    say!(
        "state        {}{}",
        v.state,
        v.reason
            .as_deref()
            .map(|r| format!(" ({})", esc(r)))
            .unwrap_or_default()
    );
    say!("safe next    {}", esc(&v.next_step));
    say!(
        "workflow     {}/{}{}",
        esc(&v.workflow),
        esc(&v.step),
        if v.workflow_paused { " (paused)" } else { "" }
    );
    if let Some(team) = &v.owner {
        say!("owner        {}", esc(team));
    }
    say!(
        "destination  {} {}{}",
        esc(&v.destination),
        esc(&v.action),
        if v.destination_paused {
            " (paused)"
        } else {
            ""
        }
    );
    say!(
        "created      {} ({} ago)",
        when(v.created_at),
        format_age(now - v.created_at)
    );
    if let Some(t) = v.exception_since {
        say!("exception    since {} ({})", when(t), format_age(now - t));
    }
    if let Some(t) = v.next_attempt_at {
        say!("next attempt {}", when(t));
    }
    if let Some(by) = &v.claimed_by {
        let until = v.claim_expires_at.map(when).unwrap_or_default();
        say!("claimed by   {} until {until}", esc(by));
    }
    if let Some(r) = &v.reference {
        say!("reference    {}", esc(r));
    }
    if let Some(r) = v.resolution {
        say!(
            "resolution   {}{}",
            r.as_str(),
            v.superseded_by
                .as_deref()
                .map(|k| format!(" by {}", esc(k)))
                .unwrap_or_default()
        );
    }
    if let Some(e) = &d.corrected_as {
        say!(
            "corrected as {} ({}{}{}): it answers for this key",
            esc(&e.key),
            e.state,
            e.reference
                .as_deref()
                .map(|r| format!(", reference {}", esc(r)))
                .unwrap_or_default(),
            if e.corrections > 1 {
                format!(", after {} corrections", e.corrections)
            } else {
                String::new()
            }
        );
    }
    if let Some(k) = &v.corrects {
        say!("corrects     {}", esc(k));
    }
    say!("fingerprint  {}", d.fingerprint);
    if d.pruned {
        say!("pruned       its payload, attempts and history are in the prune's archive");
        return;
    }
    say!(
        "payload      {}",
        esc(&serde_json::to_string_pretty(&d.payload).unwrap_or_default())
            .replace("\\x0a", "\n             ")
    );
    if let (Some(p), Some(f)) = (&d.conflicting_payload, &d.conflicting_fingerprint) {
        say!("conflicting  {f}");
        say!(
            "             {}",
            esc(&serde_json::to_string(p).unwrap_or_default())
        );
    }
    attempts_and_history(d);
}

/// The attempts of `settle show`, then the history.
fn attempts_and_history(d: &OperationDetail) {
    say!(
        "attempts     {}",
        if d.attempt_log.is_empty() {
            "none yet"
        } else {
            ""
        }
    );
    for a in &d.attempt_log {
        let outcome = a.outcome.map_or("in flight".to_string(), |o| o.to_string());
        let mut line = format!(
            "  #{} {} {} by {}",
            a.n,
            when(a.started_at),
            outcome,
            esc(&a.actor)
        );
        line.push_str(&esc(&a.answer_said()));
        say!("{line}");
    }
    say!("history");
    for e in &d.history {
        let states = match (&e.from_state, &e.to_state) {
            (Some(f), Some(t)) if f != t => format!(" {f} -> {t}"),
            (None, Some(t)) => format!(" -> {t}"),
            _ => String::new(),
        };
        let detail = match &e.detail {
            serde_json::Value::Object(m) if m.values().all(|v| v.is_null()) => String::new(),
            serde_json::Value::Object(m) if m.is_empty() => String::new(),
            other => format!(" {}", esc(&other.to_string())),
        };
        let id = e
            .action
            .as_ref()
            .map_or(String::new(), |id| format!(" [{}]", esc(id)));
        say!(
            "  {} {} {}{id}{states}{detail}",
            when(e.at),
            esc(&e.actor),
            esc(&e.kind)
        );
    }
}
