//! The options of `settle serve` (the console over SSH, the metrics, the HTTP API) and `settle
//! token`.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use clap::{Args, Subcommand};

use super::common::duration_arg;
use crate::config::Config;
use crate::error::{Error, Result};
use crate::ledger::Ledger;

#[derive(Debug, Args)]
pub struct ServeArgs {
    /// Address for SSH (port 0 picks a free one; the first line printed says which); default
    /// 0.0.0.0:2222, and none with --http unless given
    #[arg(long, value_name = "ADDR")]
    pub listen: Option<String>,
    /// The server's host key (made on first start); else $XDG_STATE_HOME/settle/host_key
    #[arg(long, value_name = "FILE")]
    pub host_key: Option<PathBuf>,
    /// Serve Prometheus metrics at http://ADDR/metrics and /healthz (alone, without --listen or
    /// --http: only the metrics)
    #[arg(long, value_name = "ADDR")]
    pub metrics: Option<String>,
    /// The most sessions open at once
    #[arg(long, default_value_t = 32, value_name = "N")]
    pub max_sessions: usize,
    /// A console without a key for this long ends (warned a minute before), e.g. 30m
    #[arg(long, default_value = "30m", value_name = "DUR")]
    pub idle_timeout: String,
    /// Serve the HTTP API for automations on ADDR, e.g. 127.0.0.1:8080
    #[arg(long, value_name = "ADDR")]
    pub http: Option<String>,
    /// HTTPS for the API: the certificate chain (PEM); needs --tls-key
    #[arg(long, value_name = "FILE", requires = "tls_key", requires = "http")]
    pub tls_cert: Option<PathBuf>,
    /// HTTPS for the API: the private key (PEM); needs --tls-cert
    #[arg(long, value_name = "FILE", requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,
}

#[derive(Debug, Subcommand)]
pub enum TokenCmd {
    /// Make a new bearer token for automation NAME: printed once, with the config lines that let
    /// it in (only its SHA-256 is kept)
    New {
        /// The automation's name (as an operator is named)
        name: String,
        /// The workflows it may write and read ("*": all)
        #[arg(long, value_name = "NAME", num_args = 1.., default_values_t = ["*".to_string()])]
        workflows: Vec<String>,
    },
}

/// `settle serve`: the operators checked, then the servers asked for (the console over SSH, the
/// HTTP API, or both) until they are stopped.
pub(super) async fn serve(
    a: &ServeArgs,
    url: &str,
    config: Config,
    config_path: Option<PathBuf>,
    exec: crate::serve::Exec,
) -> Result<i32> {
    // every listener's door, sized to this process's handle limit
    let doors = Arc::new(crate::listener::Doors::for_this_process(&config.limits));
    // the console over SSH where asked for, or where nothing else is
    let ssh = (a.listen.is_some() || (a.http.is_none() && a.metrics.is_none())).then(|| {
        crate::serve::Options {
            listen: a.listen.clone().unwrap_or_else(|| "0.0.0.0:2222".into()),
            host_key: a
                .host_key
                .clone()
                .unwrap_or_else(crate::serve::default_host_key),
            metrics: a.metrics.clone(),
            max_sessions: a.max_sessions.max(1),
            idle: Duration::ZERO,
            config_path: config_path.clone(),
            exec,
            doors: doors.clone(),
        }
    });
    let idle = duration_arg(
        "--idle-timeout",
        &a.idle_timeout,
        Duration::from_secs(1),
        Duration::from_secs(7 * 86_400),
    )?;
    let ssh = ssh.map(|o| crate::serve::Options { idle, ..o });
    crate::serve::Operators::from_config(&config)?;
    let ledger = Ledger::open_server(url, config).await?;
    let http = a.http.as_ref().map(|listen| crate::api::Options {
        listen: listen.clone(),
        tls: a.tls_cert.clone().zip(a.tls_key.clone()),
        config_path,
        lanes: crate::api::default_lanes(ledger.backend()),
        door: doors.http.clone(),
    });
    tracing::info!(command = "serve", "start");
    let pruning = ledger.retention().auto_prune();
    let _folding = ledger
        .rounds()
        .keep_counters_folded(std::time::Duration::from_secs(60));
    let sending = crate::notify::start(&ledger, sender_name("serve"), Duration::from_secs(1));
    let result = match (ssh, http) {
        (Some(s), Some(h)) => tokio::select! {
            r = crate::serve::run(ledger.clone(), s) => r,
            r = crate::api::run(ledger.primary_only(), h) => r,
        },
        (Some(s), None) => crate::serve::run(ledger.clone(), s).await,
        // no console to count sessions of: the metrics of their own
        (None, http) => match metrics_alone(&ledger, a.metrics.as_deref(), &doors).await {
            Ok(serving) => {
                let r = match http {
                    Some(h) => crate::api::run(ledger.primary_only(), h).await,
                    None => {
                        crate::signals::terminated().await;
                        Ok(())
                    }
                };
                drop(serving);
                r
            }
            Err(e) => Err(e),
        },
    };
    drop(pruning);
    if let Some(s) = sending {
        s.stop().await;
    }
    ledger.close().await;
    result.map(|()| 0)
}

/// This process, as the notification sender's lease names it.
pub(super) fn sender_name(what: &str) -> String {
    let tag: u32 = rand::random();
    format!("settle {what} {} {tag:08x}", std::process::id())
}

/// `--metrics` without the console over SSH (no console sessions to count).
async fn metrics_alone(
    ledger: &Ledger,
    at: Option<&str>,
    doors: &crate::listener::Doors,
) -> Result<Option<crate::metrics::Serving>> {
    match at {
        Some(at) => Ok(Some(
            crate::metrics::serve_at(ledger, at, None, "settle serve", doors.metrics.clone())
                .await?,
        )),
        None => Ok(None),
    }
}

/// `settle token new NAME`: a new token, shown once, and the lines of the config that let it in.
pub(super) fn token(what: &TokenCmd) -> Result<i32> {
    let TokenCmd::New { name, workflows } = what;
    crate::domain::validate_operator(name)
        .map_err(|e| Error::Invalid(format!("the automation's name: {e}")))?;
    for w in workflows.iter().filter(|w| *w != "*") {
        crate::domain::validate_op_name("workflow", w, false).map_err(Error::Invalid)?;
    }
    let token = crate::api::auth::new_token();
    let list: Vec<String> = workflows.iter().map(|w| format!("{w:?}")).collect();
    crate::say!("{token}");
    crate::say!("");
    crate::say!("[automations.{name}]");
    crate::say!(
        "token_sha256 = \"{}\"",
        crate::api::auth::token_sha256(&token)
    );
    crate::say!("workflows = [{}]", list.join(", "));
    crate::tell!(
        "settle: the first line is {name}'s bearer token, shown this once: keep it in the automation's secret store; \
         add the lines after it to settle.toml (a running settle serve reads them on SIGHUP)"
    );
    Ok(0)
}
