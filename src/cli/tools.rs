//! The tools the command line starts: `settle sim` (a destination to try settle against).

use std::time::Duration;

use super::args::Cmd;
use super::common::{duration_arg, invalid};
use crate::error::Result;

/// `settle sim`: its options checked, then the simulated destination until it is stopped.
pub(super) async fn sim(command: &Cmd) -> Result<i32> {
    let Cmd::Sim {
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
    } = command
    else {
        unreachable!("sim is given its own command only")
    };
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
