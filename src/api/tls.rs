//! HTTPS for the API (rustls): the certificate chain and key from PEM files, and a listener whose
//! handshakes run beside each other, so a slow client never holds up the next.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;

use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio_rustls::TlsAcceptor;
use tokio_rustls::rustls::ServerConfig;
use tokio_rustls::rustls::pki_types::pem::PemObject;
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio_rustls::server::TlsStream;

use crate::error::{Error, Result};

/// How long a TLS handshake may take before the connection is dropped.
pub(super) const HANDSHAKE: std::time::Duration = std::time::Duration::from_secs(10);

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

/// Connections whose handshake is done, for `axum::serve`.
pub struct Listener {
    done: mpsc::Receiver<(TlsStream<TcpStream>, SocketAddr)>,
    local: SocketAddr,
}

impl Listener {
    pub fn new(socket: TcpListener, acceptor: TlsAcceptor) -> Listener {
        let local = socket
            .local_addr()
            .unwrap_or_else(|_| SocketAddr::from(([0, 0, 0, 0], 0)));
        let (tx, done) = mpsc::channel(64);
        tokio::spawn(async move {
            loop {
                let Ok((tcp, peer)) = socket.accept().await else {
                    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                    continue;
                };
                let _ = tcp.set_nodelay(true);
                let (acceptor, tx) = (acceptor.clone(), tx.clone());
                tokio::spawn(async move {
                    let shake = tokio::time::timeout(HANDSHAKE, acceptor.accept(tcp)).await;
                    match shake {
                        Ok(Ok(stream)) => {
                            let _ = tx.send((stream, peer)).await;
                        }
                        Ok(Err(e)) => {
                            tracing::info!(%peer, error = %e, "http: TLS handshake failed")
                        }
                        Err(_) => tracing::info!(%peer, "http: TLS handshake timed out"),
                    }
                });
            }
        });
        Listener { done, local }
    }
}

impl axum::serve::Listener for Listener {
    type Io = TlsStream<TcpStream>;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        match self.done.recv().await {
            Some(c) => c,
            None => std::future::pending().await,
        }
    }

    fn local_addr(&self) -> std::io::Result<SocketAddr> {
        Ok(self.local)
    }
}
