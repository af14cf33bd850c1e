//! TLS for the API's TCP listener: rustls (ring), HTTP/2 by ALPN, the
//! certificate chain and key read from PEM files (`--api-tls-cert`,
//! `--api-tls-key`) and read again when either file changes (a renewed
//! Secret, as cert-manager writes it, needs no restart). A change that
//! does not load (a half-written file, a key that is not the
//! certificate's) is logged and the certificate in use is kept.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use tokio::net::{TcpListener, TcpStream};
use tokio_rustls::TlsAcceptor;
use tokio_rustls::rustls::pki_types::pem::PemObject;
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio_rustls::rustls::server::{ClientHello, ResolvesServerCert};
use tokio_rustls::rustls::sign::CertifiedKey;
use tokio_rustls::rustls::{self, ServerConfig};
use tokio_rustls::server::TlsStream;
use tokio_stream::wrappers::ReceiverStream;

/// The PEM files of the listener's certificate chain and private key.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TlsFiles {
    pub cert: PathBuf,
    pub key: PathBuf,
}

/// The TLS configuration cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("reading the API's TLS certificate {path} (--api-tls-cert): {error}")]
    Cert { path: String, error: String },
    #[error("reading the API's TLS key {path} (--api-tls-key): {error}")]
    Key { path: String, error: String },
    #[error("the API's TLS key {key} is not the key of certificate {cert}: {error}")]
    Mismatch {
        cert: String,
        key: String,
        error: String,
    },
    #[error("building the API's TLS configuration: {0}")]
    Config(String),
}

/// The chain and key of `files`, checked to belong together.
fn load(files: &TlsFiles) -> Result<Arc<CertifiedKey>, TlsError> {
    let cert_err = |error: String| TlsError::Cert {
        path: files.cert.display().to_string(),
        error,
    };
    let key_err = |error: String| TlsError::Key {
        path: files.key.display().to_string(),
        error,
    };
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(&files.cert)
        .map_err(|e| cert_err(e.to_string()))?
        .collect::<Result<_, _>>()
        .map_err(|e| cert_err(e.to_string()))?;
    if certs.is_empty() {
        return Err(cert_err("no PEM CERTIFICATE block in it".into()));
    }
    let key = PrivateKeyDer::from_pem_file(&files.key).map_err(|e| key_err(e.to_string()))?;
    let signer =
        rustls::crypto::ring::sign::any_supported_type(&key).map_err(|e| key_err(e.to_string()))?;
    let certified = CertifiedKey::new(certs, signer);
    certified.keys_match().map_err(|e| TlsError::Mismatch {
        cert: files.cert.display().to_string(),
        key: files.key.display().to_string(),
        error: e.to_string(),
    })?;
    Ok(Arc::new(certified))
}

/// When the files last changed (`None` for one that cannot be read).
type Stamp = (Option<SystemTime>, Option<SystemTime>);

fn stamp(files: &TlsFiles) -> Stamp {
    let modified = |p: &PathBuf| std::fs::metadata(p).and_then(|m| m.modified()).ok();
    (modified(&files.cert), modified(&files.key))
}

/// Serves the files' certificate, loading it again when they change.
#[derive(Debug)]
struct Reloading {
    files: TlsFiles,
    current: Mutex<(Stamp, Arc<CertifiedKey>)>,
}

impl ResolvesServerCert for Reloading {
    fn resolve(&self, _: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        let now = stamp(&self.files);
        let mut current = self.current.lock().unwrap_or_else(|e| e.into_inner());
        if current.0 != now {
            // Tried once per change, not at every handshake.
            current.0 = now;
            match load(&self.files) {
                Ok(k) => {
                    current.1 = k;
                    tracing::info!(cert = %self.files.cert.display(), "the API's TLS certificate was reloaded");
                }
                Err(e) => tracing::warn!("{e}; the certificate in use is kept"),
            }
        }
        Some(current.1.clone())
    }
}

/// A TLS acceptor for `files` (HTTP/2 only, as gRPC needs). The files
/// must load now.
pub fn acceptor(files: &TlsFiles) -> Result<TlsAcceptor, TlsError> {
    let at_start = stamp(files);
    let resolver = Reloading {
        files: files.clone(),
        current: Mutex::new((at_start, load(files)?)),
    };
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| TlsError::Config(e.to_string()))?
        .with_no_client_auth()
        .with_cert_resolver(Arc::new(resolver));
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(TlsAcceptor::from(Arc::new(config)))
}

/// How long a client may take to finish its TLS handshake.
const HANDSHAKE: Duration = Duration::from_secs(10);

/// The TLS connections `listener` accepts, each handshake on its own
/// task (a slow client holds up no other). Ends when the stream is dropped.
pub fn incoming(
    listener: TcpListener,
    acceptor: TlsAcceptor,
) -> ReceiverStream<std::io::Result<TlsStream<TcpStream>>> {
    let (tx, rx) = tokio::sync::mpsc::channel(64);
    tokio::spawn(async move {
        loop {
            let (tcp, peer) = tokio::select! {
                _ = tx.closed() => return,
                accepted = listener.accept() => match accepted {
                    Ok(a) => a,
                    Err(e) => {
                        // Out of file descriptors, most likely: back off
                        // rather than spin.
                        tracing::warn!("accepting an API connection: {e}");
                        tokio::time::sleep(Duration::from_millis(100)).await;
                        continue;
                    }
                },
            };
            let acceptor = acceptor.clone();
            let tx = tx.clone();
            tokio::spawn(async move {
                match tokio::time::timeout(HANDSHAKE, acceptor.accept(tcp)).await {
                    Ok(Ok(tls)) => {
                        let _ = tx.send(Ok(tls)).await;
                    }
                    Ok(Err(e)) => tracing::debug!(%peer, "TLS handshake failed: {e}"),
                    Err(_) => tracing::debug!(%peer, "TLS handshake timed out"),
                }
            });
        }
    });
    ReceiverStream::new(rx)
}
