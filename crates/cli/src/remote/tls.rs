//! TLS to an `https://` API address, with rustls (ring): the server's
//! certificate checked against `--certificate-authority FILE` (PEM), else
//! the system's roots; `--insecure-skip-tls-verify` checks nothing, as
//! kubectl's flag of that name. HTTP/2 is negotiated by ALPN.

use std::sync::Arc;

use anyhow::{Context, Result, bail};
use hyper_util::rt::TokioIo;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::CryptoProvider;
use rustls::{ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, ServerName, UnixTime};

use super::ConnectArgs;

/// The client's TLS configuration for `args`.
pub fn client_config(args: &ConnectArgs) -> Result<ClientConfig> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .context("TLS protocol versions")?;
    let mut config = if args.insecure_skip_tls_verify {
        builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(NoVerify(provider)))
            .with_no_client_auth()
    } else {
        builder
            .with_root_certificates(roots(args)?)
            .with_no_client_auth()
    };
    config.alpn_protocols = vec![b"h2".to_vec()];
    Ok(config)
}

fn roots(args: &ConnectArgs) -> Result<RootCertStore> {
    let mut roots = RootCertStore::empty();
    if let Some(path) = &args.certificate_authority {
        let shown = path.display();
        let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(path)
            .with_context(|| format!("--certificate-authority {shown}: cannot read"))?
            .collect::<Result<_, _>>()
            .with_context(|| format!("--certificate-authority {shown}: not PEM certificates"))?;
        if certs.is_empty() {
            bail!(
                "--certificate-authority {shown}: holds no certificate (expected PEM, BEGIN CERTIFICATE)"
            );
        }
        for c in certs {
            roots
                .add(c)
                .with_context(|| format!("--certificate-authority {shown}"))?;
        }
        return Ok(roots);
    }
    let found = rustls_native_certs::load_native_certs();
    let (added, _ignored) = roots.add_parsable_certificates(found.certs);
    if added == 0 {
        bail!(
            "no system CA certificates to check the scheduler's certificate with; pass --certificate-authority FILE (or --insecure-skip-tls-verify)"
        );
    }
    Ok(roots)
}

/// A TCP connection to `host:port` with TLS over it.
pub async fn connect(
    config: Arc<ClientConfig>,
    host: String,
    port: u16,
) -> std::io::Result<TokioIo<tokio_rustls::client::TlsStream<tokio::net::TcpStream>>> {
    let name = ServerName::try_from(host.clone())
        .map_err(|e| std::io::Error::other(format!("{host}: not a TLS server name: {e}")))?;
    let tcp = tokio::net::TcpStream::connect((host.as_str(), port)).await?;
    let tls = tokio_rustls::TlsConnector::from(config)
        .connect(name, tcp)
        .await?;
    Ok(TokioIo::new(tls))
}

/// `--insecure-skip-tls-verify`: any certificate is taken; signatures
/// are still checked (the handshake stays well-formed).
#[derive(Debug)]
struct NoVerify(Arc<CryptoProvider>);

impl ServerCertVerifier for NoVerify {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

/// The TLS error somewhere in `e`'s chain (tokio-rustls gives it inside an
/// `io::Error`, whose `source()` skips it).
pub fn rustls_error<'a>(e: &'a (dyn std::error::Error + 'static)) -> Option<&'a rustls::Error> {
    let mut next = Some(e);
    while let Some(e) = next {
        if let Some(r) = e.downcast_ref::<rustls::Error>() {
            return Some(r);
        }
        if let Some(r) = e
            .downcast_ref::<std::io::Error>()
            .and_then(|io| io.get_ref())
            .and_then(|inner| inner.downcast_ref::<rustls::Error>())
        {
            return Some(r);
        }
        next = e.source();
    }
    None
}

/// A TLS handshake with the scheduler at `address` that failed with `e`,
/// said for people: what was wrong with its certificate and what to do
/// (rustls' own words for some are its enum's names, as `UnknownIssuer`).
pub fn handshake_failed(
    e: &rustls::Error,
    address: &impl std::fmt::Display,
    args: &ConnectArgs,
) -> anyhow::Error {
    use rustls::CertificateError as C;
    let trusted = match &args.certificate_authority {
        Some(f) => format!("--certificate-authority {}", f.display()),
        None => "the system's CA certificates".to_string(),
    };
    let fix = "pass --certificate-authority FILE with the CA that signed it, or --insecure-skip-tls-verify for a test";
    let text = match e {
        rustls::Error::InvalidCertificate(c) => match c {
            C::UnknownIssuer => format!(
                "the scheduler's certificate at {address} is not trusted: it is not signed by a CA in {trusted} ({fix})"
            ),
            C::NotValidForName | C::NotValidForNameContext { .. } => format!(
                "the scheduler's certificate at {address} is not for that name: {c} (connect by a name or address the certificate has)"
            ),
            C::Expired | C::ExpiredContext { .. } => {
                format!("the scheduler's certificate at {address} has expired: {c}")
            }
            C::NotValidYet | C::NotValidYetContext { .. } => format!(
                "the scheduler's certificate at {address} is not valid yet: {c} (is this machine's clock right?)"
            ),
            C::BadSignature | C::BadEncoding => format!(
                "the scheduler's certificate at {address} is not accepted: {}",
                if matches!(c, C::BadSignature) {
                    "its signature does not verify"
                } else {
                    "it cannot be parsed"
                }
            ),
            other => {
                format!("the scheduler's certificate at {address} is not accepted: {other} ({fix})")
            }
        },
        rustls::Error::NoApplicationProtocol => format!(
            "TLS with the scheduler at {address} failed: it does not speak HTTP/2 (ALPN h2); is it the scheduler's gRPC API?"
        ),
        other => format!(
            "TLS with the scheduler at {address} failed: {other} (does it serve TLS there? an API without --api-tls-cert is http://)"
        ),
    };
    anyhow::anyhow!(text)
}
