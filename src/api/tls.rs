//! HTTPS for the API (rustls): the certificate chain and key from PEM files. The handshakes run
//! beside each other, each with its deadline (`listener::http`), so a slow client never holds
//! up the next.

use std::path::Path;
use std::sync::Arc;

use tokio_rustls::TlsAcceptor;
use tokio_rustls::rustls::ServerConfig;
use tokio_rustls::rustls::pki_types::pem::PemObject;
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer};

use crate::error::{Error, Result};

/// The acceptor of `--tls-cert` (PEM, the chain) and `--tls-key` (PEM).
pub fn acceptor(cert: &Path, key: &Path) -> Result<TlsAcceptor> {
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(cert)
        .and_then(|i| i.collect::<std::result::Result<_, _>>())
        .map_err(|e| Error::Invalid(format!("--tls-cert {}: {e}", cert.display())))?;
    if certs.is_empty() {
        return Err(Error::Invalid(format!(
            "--tls-cert {}: no certificate in it (want PEM)",
            cert.display()
        )));
    }
    let private = PrivateKeyDer::from_pem_file(key)
        .map_err(|e| Error::Invalid(format!("--tls-key {}: {e}", key.display())))?;
    let provider = Arc::new(tokio_rustls::rustls::crypto::aws_lc_rs::default_provider());
    let config = ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .and_then(|b| b.with_no_client_auth().with_single_cert(certs, private))
        .map_err(|e| Error::Invalid(format!("--tls-cert/--tls-key: {e}")))?;
    Ok(TlsAcceptor::from(Arc::new(config)))
}
