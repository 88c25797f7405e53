//! QUIC's TLS: the shared TLS 1.3 configurations ([`crate::transport::tls`]) with ALPN
//! "wirebench", as quinn takes them.

use std::net::IpAddr;
use std::sync::{Arc, Mutex};

use anyhow::{anyhow, Result};
use quinn::crypto::rustls::{QuicClientConfig, QuicServerConfig};

pub(super) use crate::transport::tls::{self_signed, sha256, Identity, Trust};

const ALPN: &[u8] = b"wirebench";

/// The server's TLS 1.3 configuration for quinn: `identity`, no client authentication.
pub(super) fn server_crypto(identity: Identity) -> Result<QuicServerConfig> {
    let tls = crate::transport::tls::server_config(identity, ALPN)?;
    QuicServerConfig::try_from(tls).map_err(|e| anyhow!("TLS configuration unusable for QUIC: {e}"))
}

/// The client's TLS 1.3 configuration for quinn and the server name to ask for (see
/// [`crate::transport::tls::client_config`]).
pub(super) fn client_crypto(
    trust: Option<&Trust>,
    fingerprint: [u8; 32],
    ip: IpAddr,
    failure: &Arc<Mutex<Option<String>>>,
) -> Result<(QuicClientConfig, String)> {
    let (tls, server_name) =
        crate::transport::tls::client_config(trust, fingerprint, ip, failure, ALPN)?;
    let crypto = QuicClientConfig::try_from(tls)
        .map_err(|e| anyhow!("TLS configuration unusable for QUIC: {e}"))?;
    Ok((crypto, server_name))
}

/// The announced endpoint, `PORT/sha256=HEX`.
pub(super) fn format_endpoint(port: u16, fingerprint: &[u8; 32]) -> String {
    crate::transport::tls::endpoint::format_endpoint(port, fingerprint)
}

/// Parses what a QUIC server announced.
pub(super) fn parse_endpoint(s: &str) -> Result<(u16, [u8; 32])> {
    crate::transport::tls::endpoint::parse_endpoint("QUIC", s)
}
