//! The tools the command line starts: `settle sim` (a destination to try settle against).

use std::time::Duration;

use std::path::PathBuf;

use super::common::{duration_arg, invalid};
use crate::error::Result;

/// `settle sim`: its options checked, then the simulated destination until it is stopped.
pub(super) async fn sim(args: &SimArgs) -> Result<i32> {
    let SimArgs {
        listen,
        state,
        no_dedupe,
        key_retention,
        fault,
        fault_rate,
        fault_kinds,
        seed,
        late,
        fault_first_only,
        latency,
        require_header,
        answer,
        exists_409,
        rate_limit,
        outage,
        outage_kind,
    } = args;
    if ![200, 201, 204].contains(answer) {
        return Err(invalid("--answer must be 200, 201 or 204".into()));
    }
    let require_header = match require_header {
        Some(h) => match h.split_once(':') {
            Some((name, value)) if !name.trim().is_empty() => {
                Some((name.trim().to_ascii_lowercase(), value.trim().to_string()))
            }
            _ => {
                return Err(invalid(
                    "--require-header reads 'NAME: VALUE', e.g. 'Authorization: Bearer X'".into(),
                ));
            }
        },
        None => None,
    };
    let (latency, latency_max) = latency_range(latency)?;
    if !(0.0..=1.0).contains(fault_rate) {
        return Err(invalid("--fault-rate must be between 0 and 1".into()));
    }
    let rate_limit = match rate_limit {
        Some(r) => {
            Some(crate::config::parse_rate(r).map_err(|e| invalid(format!("--rate-limit {e}")))?)
        }
        None => None,
    };
    let kind = crate::tools::sim::OutageKind::parse(outage_kind).map_err(invalid)?;
    let outages = outage
        .iter()
        .map(|w| crate::tools::sim::Outage::parse(w, kind))
        .collect::<std::result::Result<Vec<_>, _>>()
        .map_err(invalid)?;
    let profile = crate::tools::sim::Profile {
        dedupe: !no_dedupe,
        key_retention: duration_arg(
            "--key-retention",
            key_retention,
            Duration::from_secs(1),
            Duration::from_secs(3650 * 86_400),
        )?,
        fault: fault
            .as_deref()
            .map(crate::tools::sim::Fault::parse)
            .transpose()
            .map_err(invalid)?,
        fault_rate: *fault_rate,
        fault_kinds: match fault_kinds.is_empty() {
            true => crate::tools::sim::Fault::ALL.to_vec(),
            false => fault_kinds
                .iter()
                .map(|k| crate::tools::sim::Fault::parse(k.trim()))
                .collect::<std::result::Result<_, _>>()
                .map_err(invalid)?,
        },
        seed: *seed,
        late: duration_arg("--late", late, Duration::ZERO, Duration::from_secs(3600))?,
        fault_first_only: *fault_first_only,
        latency,
        latency_max,
        require_header,
        answer: *answer,
        exists_409: *exists_409,
        rate_limit,
        outages,
    };
    crate::tools::sim::run(listen, state.clone(), profile).await?;
    Ok(0)
}

/// `--latency 20ms` (always 20 ms) or `--latency 5ms..50ms` (drawn per request).
fn latency_range(text: &str) -> Result<(Duration, Duration)> {
    let hour = Duration::from_secs(3600);
    let (low, high) = match text.split_once("..") {
        Some((low, high)) => (
            duration_arg("--latency", low.trim(), Duration::ZERO, hour)?,
            duration_arg("--latency", high.trim(), Duration::ZERO, hour)?,
        ),
        None => {
            let d = duration_arg("--latency", text, Duration::ZERO, hour)?;
            (d, d)
        }
    };
    if high < low {
        return Err(invalid(format!(
            "--latency '{}': the range's end is below its start",
            crate::domain::escape_text(text)
        )));
    }
    Ok((low, high))
}

/// The arguments of `settle sim`.
#[derive(Debug, clap::Args)]
pub struct SimArgs {
    /// Address to listen on (port 0 picks a free one; the first line printed says which)
    #[arg(long, default_value = "127.0.0.1:8787", value_name = "ADDR")]
    pub listen: String,
    /// Keep the created tasks in this file, across restarts
    #[arg(long, value_name = "FILE")]
    pub state: Option<PathBuf>,
    /// Do not honour Idempotency-Key (every request creates a task)
    #[arg(long)]
    pub no_dedupe: bool,
    /// How long a key is remembered, e.g. 24h
    #[arg(long, default_value = "24h", value_name = "DUR")]
    pub key_retention: String,
    /// A fault for every create: reject, drop, late, unavailable, error, reject-nul, echo or lost
    #[arg(long, value_name = "FAULT")]
    pub fault: Option<String>,
    /// Chance of a random fault per create (0 to 1), from a schedule seeded by --seed
    #[arg(long, default_value_t = 0.0, value_name = "P")]
    pub fault_rate: f64,
    /// The faults the random schedule draws from, e.g. drop,late,error [default: reject,
    /// drop, late, unavailable, error]
    #[arg(long, value_name = "LIST", value_delimiter = ',')]
    pub fault_kinds: Vec<String>,
    /// The seed of the random fault schedule (the same seed, the same faults)
    #[arg(long, default_value_t = 1, value_name = "N")]
    pub seed: u64,
    /// How long a `late` answer waits
    #[arg(long, default_value = "10s", value_name = "DUR")]
    pub late: String,
    /// Apply the fault only to the first request of each key
    #[arg(long)]
    pub fault_first_only: bool,
    /// How long every create takes, e.g. 20ms, or a range drawn from per request, e.g.
    /// 5ms..50ms
    #[arg(long, default_value = "0s", value_name = "DUR[..DUR]")]
    pub latency: String,
    /// Answer 401 to any request without this header, e.g. 'Authorization: Bearer X'
    #[arg(long, value_name = "'NAME: VALUE'")]
    pub require_header: Option<String>,
    /// The status of a successful create: 201, 200 or 204 (no body)
    #[arg(long, default_value_t = 201, value_name = "STATUS")]
    pub answer: u16,
    /// A repeated key answers 409 "already exists" (as HubSpot does) instead of the task
    #[arg(long)]
    pub exists_409: bool,
    /// Answer 429 (Retry-After: 1) above this many requests, e.g. 40/s or 600/m
    #[arg(long, value_name = "RATE")]
    pub rate_limit: Option<String>,
    /// A window of the run, from its start, in which the destination is down, e.g. 10s..50s
    /// (may be given again)
    #[arg(long, value_name = "FROM..TO")]
    pub outage: Vec<String>,
    /// How it is down in an outage: hang (takes requests, never answers), refuse (refuses
    /// connections) or 503
    #[arg(long, default_value = "hang", value_name = "KIND")]
    pub outage_kind: String,
}
