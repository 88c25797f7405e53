//! TLS for the transports that carry it (quic always, grpc with `--tls`): the server's
//! identity (given or self-signed), the client's trust (the fingerprint the server announced
//! over control, or `--tls-ca`), and the rustls TLS 1.3 configurations of both ends, each
//! transport naming its own ALPN protocol. [`endpoint`] is the `PORT/sha256=HEX` they announce.

pub(super) mod endpoint;

use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};

use anyhow::{anyhow, bail, Context, Result};
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::WebPkiServerVerifier;
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::{DigitallySignedStruct, RootCertStore, SignatureScheme};

/// Server name the client asks for when it pins the announced certificate (no CA check).
const PINNED_NAME: &str = "wirebench";

/// The server identity: certificate chain and private key.
pub(super) struct Identity {
    pub(super) chain: Vec<CertificateDer<'static>>,
    pub(super) key: PrivateKeyDer<'static>,
}

impl Identity {
    pub(super) fn clone_identity(&self) -> Identity {
        Identity {
            chain: self.chain.clone(),
            key: self.key.clone_key(),
        }
    }
}

/// The CA certificates a client verifies the server with.
pub(super) struct Trust {
    path: PathBuf,
    roots: Arc<RootCertStore>,
}

/// This side's certificate files (`--tls-cert` with `--tls-key`, `--tls-ca`), read when a
/// transport is opened so that a bad file is an error before any test starts; quic and grpc
/// take them alike.
pub(super) struct Credentials {
    pub(super) identity: Option<Identity>,
    pub(super) trust: Option<Trust>,
}

impl Credentials {
    pub(super) fn load(config: &super::TransportConfig) -> Result<Credentials> {
        let identity = match (&config.tls_cert, &config.tls_key) {
            (Some(cert), Some(key)) => Some(load_identity(cert, key)?),
            (None, None) => None,
            _ => bail!("--tls-cert and --tls-key go together"),
        };
        let trust = config.tls_ca.as_deref().map(load_trust).transpose()?;
        Ok(Credentials { identity, trust })
    }
}

pub(super) fn load_identity(cert: &Path, key: &Path) -> Result<Identity> {
    let chain = CertificateDer::pem_file_iter(cert)
        .and_then(|it| it.collect::<Result<Vec<_>, _>>())
        .map_err(|e| anyhow!("cannot read certificates from {}: {e}", cert.display()))?;
    if chain.is_empty() {
        bail!("{} holds no PEM certificate", cert.display());
    }
    let key = PrivateKeyDer::from_pem_file(key)
        .map_err(|e| anyhow!("cannot read a private key from {}: {e}", key.display()))?;
    Ok(Identity { chain, key })
}

pub(super) fn load_trust(path: &Path) -> Result<Trust> {
    let certs = CertificateDer::pem_file_iter(path)
        .and_then(|it| it.collect::<Result<Vec<_>, _>>())
        .map_err(|e| anyhow!("cannot read CA certificates from {}: {e}", path.display()))?;
    let mut roots = RootCertStore::empty();
    for c in certs {
        roots
            .add(c)
            .map_err(|e| anyhow!("bad CA certificate in {}: {e}", path.display()))?;
    }
    if roots.is_empty() {
        bail!("{} holds no PEM certificate", path.display());
    }
    Ok(Trust {
        path: path.to_owned(),
        roots: Arc::new(roots),
    })
}

/// The self-signed identity, made once per process: key generation is not free, and every
/// test would pay it again.
pub(super) fn self_signed() -> Result<Identity> {
    static CELL: OnceLock<std::result::Result<Identity, String>> = OnceLock::new();
    let made = CELL.get_or_init(|| {
        let ck = rcgen::generate_simple_self_signed(vec![PINNED_NAME.to_owned()])
            .map_err(|e| format!("cannot make a self-signed certificate: {e}"))?;
        Ok(Identity {
            chain: vec![ck.cert.der().clone()],
            key: PrivateKeyDer::Pkcs8(ck.key_pair.serialize_der().into()),
        })
    });
    match made {
        Ok(id) => Ok(id.clone_identity()),
        Err(e) => Err(anyhow!("{e}")),
    }
}

fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

pub(super) fn sha256(der: &[u8]) -> [u8; 32] {
    let d = ring::digest::digest(&ring::digest::SHA256, der);
    let mut out = [0u8; 32];
    out.copy_from_slice(d.as_ref());
    out
}

pub(super) fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// The server's TLS 1.3 configuration: `identity`, no client authentication, ALPN `alpn`.
pub(super) fn server_config(identity: Identity, alpn: &[u8]) -> Result<rustls::ServerConfig> {
    let mut tls = rustls::ServerConfig::builder_with_provider(provider())
        .with_protocol_versions(&[&rustls::version::TLS13])
        .context("setting up TLS 1.3")?
        .with_no_client_auth()
        .with_single_cert(identity.chain, identity.key)
        .map_err(|e| anyhow!("the server's certificate and key do not make a TLS identity: {e}"))?;
    tls.alpn_protocols = vec![alpn.to_vec()];
    Ok(tls)
}

/// The client's TLS 1.3 configuration (ALPN `alpn`) and the server name to ask for: without
/// `trust`, exactly the certificate with SHA-256 `fingerprint`; with it, webpki verification
/// for the server's address `ip`. Why a verifier refused goes into `failure`.
pub(super) fn client_config(
    trust: Option<&Trust>,
    fingerprint: [u8; 32],
    ip: IpAddr,
    failure: &Arc<Mutex<Option<String>>>,
    alpn: &[u8],
) -> Result<(rustls::ClientConfig, String)> {
    let (verifier, server_name): (Arc<dyn ServerCertVerifier>, String) = match trust {
        None => (
            Arc::new(Pinned {
                sha256: fingerprint,
                provider: provider(),
                failure: failure.clone(),
            }),
            PINNED_NAME.to_owned(),
        ),
        Some(trust) => {
            let inner =
                WebPkiServerVerifier::builder_with_provider(trust.roots.clone(), provider())
                    .build()
                    .map_err(|e| anyhow!("cannot verify with {}: {e}", trust.path.display()))?;
            (
                Arc::new(Recorded {
                    inner,
                    ca: trust.path.clone(),
                    failure: failure.clone(),
                }),
                ip.to_string(),
            )
        }
    };
    let mut tls = rustls::ClientConfig::builder_with_provider(provider())
        .with_protocol_versions(&[&rustls::version::TLS13])
        .context("setting up TLS 1.3")?
        .dangerous()
        .with_custom_certificate_verifier(verifier)
        .with_no_client_auth();
    tls.alpn_protocols = vec![alpn.to_vec()];
    Ok((tls, server_name))
}

/// Why a client's handshake failed: what its verifier recorded, else `fallback`.
pub(super) fn failure_or(failure: &Arc<Mutex<Option<String>>>, fallback: String) -> String {
    failure
        .lock()
        .ok()
        .and_then(|mut f| f.take())
        .unwrap_or(fallback)
}

/// Accepts exactly the certificate whose fingerprint the server announced over control.
#[derive(Debug)]
struct Pinned {
    sha256: [u8; 32],
    provider: Arc<CryptoProvider>,
    failure: Arc<Mutex<Option<String>>>,
}

impl ServerCertVerifier for Pinned {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> std::result::Result<ServerCertVerified, rustls::Error> {
        let got = sha256(end_entity.as_ref());
        if got == self.sha256 {
            return Ok(ServerCertVerified::assertion());
        }
        if let Ok(mut f) = self.failure.lock() {
            *f = Some(format!(
                "the server's certificate does not match the one it announced on the control connection (SHA-256 {}, announced {})",
                hex(&got),
                hex(&self.sha256)
            ));
        }
        Err(rustls::Error::InvalidCertificate(
            rustls::CertificateError::ApplicationVerificationFailure,
        ))
    }
    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> std::result::Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }
    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> std::result::Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }
    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.provider
            .signature_verification_algorithms
            .supported_schemes()
    }
}

/// The usual webpki verification against `--tls-ca`, remembering why it refused.
#[derive(Debug)]
struct Recorded {
    inner: Arc<WebPkiServerVerifier>,
    ca: PathBuf,
    failure: Arc<Mutex<Option<String>>>,
}

impl ServerCertVerifier for Recorded {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> std::result::Result<ServerCertVerified, rustls::Error> {
        self.inner
            .verify_server_cert(end_entity, intermediates, server_name, ocsp_response, now)
            .inspect_err(|e| {
                if let Ok(mut f) = self.failure.lock() {
                    *f = Some(format!(
                        "the server's certificate does not verify against the CA certificates in {} for {}: {e}",
                        self.ca.display(),
                        server_name.to_str()
                    ));
                }
            })
    }
    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> std::result::Result<HandshakeSignatureValid, rustls::Error> {
        self.inner.verify_tls12_signature(message, cert, dss)
    }
    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> std::result::Result<HandshakeSignatureValid, rustls::Error> {
        self.inner.verify_tls13_signature(message, cert, dss)
    }
    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.inner.supported_verify_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn self_signed_identity_is_made_once() {
        let a = self_signed().unwrap();
        let b = self_signed().unwrap();
        assert_eq!(a.chain, b.chain);
        assert_eq!(sha256(a.chain[0].as_ref()), sha256(b.chain[0].as_ref()));
    }
}
