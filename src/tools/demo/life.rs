//! One demo operation's life: its intent, its attempts, and the staff work that settled it.

use chrono::{DateTime, TimeDelta, Utc};
use serde_json::json;

use crate::error::Result;
use crate::ledger::StaffAction;
use crate::tools::demo::week::{Demo, PEOPLE};
use crate::{Outcome, Resolution};

/// Operation `i`'s intent, made at `t`: one of four kinds of work, for one of the demo's people.
pub(super) fn intent_of(
    i: usize,
    t: DateTime<Utc>,
) -> (
    String,
    &'static str,
    &'static str,
    &'static str,
    &'static str,
    serde_json::Value,
) {
    let (name, email, phone) = PEOPLE[i % PEOPLE.len()];
    let kind = i % 4;
    match kind {
        0 => (
            format!("onb-{}-task", 4000 + i),
            "onboarding",
            "create-task",
            "projects",
            "create_task",
            json!({"title": format!("Kickoff call with {name}"), "due": (t + TimeDelta::days(3)).format("%Y-%m-%d").to_string(),
                   "assignee": {"team": "cs", "id": 7 + i % 5}, "customer": {"name": name, "email": email},
                   "notes": format!("Prefers mornings; call {phone}")}),
        ),
        1 => (
            format!("crm-sync-{}", 9000 + i),
            "crm-sync",
            "upsert-customer",
            "crm",
            "upsert_customer",
            json!({"customer": {"name": name, "email": email, "phone": phone, "company": "Analytical Engines Ltd",
                   "billing_address": "12 St James's Square, London"}, "source": "signup-form",
                   "auth": {"api_key": format!("sk_live_{:x}", 0xdead_beef_u64 + i as u64)}}),
        ),
        2 => (
            format!("notify-sms-{}", 7000 + i),
            "notifications",
            "welcome-sms",
            "sms",
            "send_sms",
            json!({"recipient": {"name": name, "phone": phone}, "template": "welcome", "locale": "en-GB"}),
        ),
        _ => (
            format!("notify-mail-{}", 5000 + i),
            "notifications",
            "welcome-email",
            "email",
            "send_email",
            json!({"to": email, "template": "welcome", "headers": {"Authorization": "Bearer eyJhbGciOiJIUzI1NiJ9.demo.sig"}}),
        ),
    }
}

impl Demo {
    /// One operation's life, starting at `t`; `fate` picks how it ends.
    pub(super) async fn operation(&mut self, i: usize, t: DateTime<Utc>, fate: u32) -> Result<()> {
        let (key, workflow, step, dest, action, payload) = intent_of(i, t);
        self.at(t);
        self.record(&key, workflow, step, dest, action, payload)
            .await?;
        self.attempts_of(i, t, &key, dest, fate).await?;
        self.staff_work(i, t, &key, workflow, dest, fate).await;
        Ok(())
    }

    /// What the automation's attempts at operation `i` came to, by its `fate`.
    pub(super) async fn attempts_of(
        &mut self,
        i: usize,
        t: DateTime<Utc>,
        key: &str,
        dest: &str,
        fate: u32,
    ) -> Result<()> {
        let (_, email, phone) = PEOPLE[i % PEOPLE.len()];
        let reference = || Some(format!("{}-{}", &dest[..3].to_uppercase(), 100_000 + i));
        let later = |s: i64| t + TimeDelta::seconds(s);
        match fate {
            // most work just succeeds, some after a transient hiccup
            0..=59 => {
                self.at(later(2));
                self.attempt(key, Outcome::Accepted, reference(), None, Some(201))
                    .await?;
            }
            60..=69 => {
                self.at(later(2));
                self.attempt(
                    key,
                    Outcome::Transient,
                    None,
                    Some("503 Service Unavailable (Retry-After: 5)"),
                    Some(503),
                )
                .await?;
                self.at(later(9));
                self.attempt(key, Outcome::Accepted, reference(), None, Some(201))
                    .await?;
            }
            // the outcome could not be observed
            70..=79 => {
                self.at(later(2));
                let err = match dest {
                    "crm" => format!("read timeout after 30s (upsert of {email})"),
                    "sms" => format!("connection reset after sending to {phone}"),
                    _ => "read timeout after 30s".to_string(),
                };
                self.attempt(key, Outcome::Unknown, None, Some(&err), None)
                    .await?;
            }
            // a confirmed rejection
            80..=85 => {
                self.at(later(2));
                let err = match dest {
                    "crm" => format!(
                        "422 Unprocessable Entity: email {email} already belongs to another customer"
                    ),
                    "projects" => "422 Unprocessable Entity: due date is in the past".to_string(),
                    "sms" => format!("400 Bad Request: number {phone} is not reachable"),
                    _ => format!("550 mailbox unavailable: {email}"),
                };
                self.attempt(key, Outcome::Rejected, None, Some(&err), Some(422))
                    .await?;
            }
            // retried until the policy was spent
            86..=91 => {
                for k in 0..6 {
                    self.at(later(2 + k * 30));
                    let r = self
                        .attempt(
                            key,
                            Outcome::Transient,
                            None,
                            Some("connect error: connection refused"),
                            None,
                        )
                        .await;
                    if r.is_err() {
                        break;
                    }
                }
            }
            // an attempt that started and never reported back (the sweep finds it)
            92..=94 => {
                self.at(later(1));
                // refused when the workflow was paused by its stopping threshold meanwhile
                let _ = self.ledger.start_attempt(key, "dispatcher").await;
            }
            // recorded, not yet attempted
            _ => {}
        }
        Ok(())
    }

    /// The week's staff work on operation `i` (manual: The review after a release).
    pub(super) async fn staff_work(
        &mut self,
        i: usize,
        t: DateTime<Utc>,
        key: &str,
        workflow: &str,
        dest: &str,
        fate: u32,
    ) {
        let reference = || Some(format!("{}-{}", &dest[..3].to_uppercase(), 100_000 + i));
        // the week's staff work (manual: The review after a release): most exceptions older than a day and a half
        // were settled; onboarding's wait on the projects team, days; the others', hours
        if (70..=85).contains(&fate) && t < self.real_now - TimeDelta::hours(36) && i % 10 < 7 {
            let after = if workflow == "onboarding" {
                TimeDelta::hours(30 + (i % 40) as i64)
            } else {
                TimeDelta::minutes(40 + (i % 9) as i64 * 35)
            };
            self.at(t + after);
            let unknown = fate < 80;
            match (unknown, dest) {
                // found by the dispatcher's lookup: a blind retry would have sent it twice
                (true, "crm") => {
                    let answer = crate::domain::LookupAnswer::Found {
                        reference: reference().unwrap_or_default(),
                        http_status: 200,
                    };
                    let _ = self.ledger.lookup(key, answer).await;
                }
                (true, _) => {
                    self.claimed(
                        key,
                        "erin",
                        StaffAction::ReconcileFound {
                            reference: reference().unwrap_or_default(),
                            note: Some("found in the provider's log".into()),
                        },
                    )
                    .await;
                }
                // the customer already existed: the duplicate record was merged away
                (false, "crm") => {
                    self.claimed(
                        key,
                        "bob",
                        StaffAction::Close {
                            resolution: Resolution::DuplicateCleanedUp,
                            reference: None,
                            superseded_by: None,
                            note: "merged the duplicate customer record".into(),
                        },
                    )
                    .await;
                }
                (false, _) => {
                    self.claimed(
                        key,
                        "carol",
                        StaffAction::Close {
                            resolution: Resolution::DoneElsewhere,
                            reference: Some(format!("MANUAL-{i}")),
                            superseded_by: None,
                            note: "done by hand after correcting the source".into(),
                        },
                    )
                    .await;
                }
            }
        }
    }

    /// A bad day (the review shows it): the SMS provider reset connections after sending
    /// for two hours four days ago; the next morning erin found most of them sent in its log.
    pub(super) async fn sms_spike(&mut self, at: DateTime<Utc>) -> Result<()> {
        for n in 0..40usize {
            let (name, _, phone) = PEOPLE[n % PEOPLE.len()];
            let key = format!("notify-sms-spike-{n}");
            let t = at + TimeDelta::seconds(n as i64 * 180);
            self.at(t);
            self.record(
                &key,
                "notifications",
                "welcome-sms",
                "sms",
                "send_sms",
                json!({"recipient": {"name": name, "phone": phone}, "template": "welcome", "locale": "en-GB"}),
            )
            .await?;
            self.at(t + TimeDelta::seconds(2));
            self.attempt(
                &key,
                Outcome::Unknown,
                None,
                Some(&format!("connection reset after sending to {phone}")),
                None,
            )
            .await?;
        }
        for n in 0..32usize {
            let key = format!("notify-sms-spike-{n}");
            self.at(at + TimeDelta::hours(22) + TimeDelta::seconds(n as i64 * 60));
            self.claimed(
                &key,
                "erin",
                StaffAction::ReconcileFound {
                    reference: format!("SMS-spike-{n}"),
                    note: Some("in the provider's delivery log".into()),
                },
            )
            .await;
        }
        Ok(())
    }
}
