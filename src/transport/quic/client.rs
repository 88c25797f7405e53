//! The client side of a data connection: its own UDP socket, engine and endpoint, the
//! handshake, and the test cookie's admission, with errors that say which step failed.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{anyhow, bail, Context, Result};
use quinn::{ConnectionError, ReadError, VarInt, WriteError};

use super::connection::{describe_close, QuicConnection};
use super::engine::Engine;
use super::tls::parse_endpoint;
use super::tls::{self, Trust};
use super::{transport_config, udp_socket, ADMITTED, CLOSE_BAD_COOKIE};
use crate::transport::{Cookie, SocketOptions};

/// Idle timeout the client asks for, at least; the server asks for none, so the client's
/// value applies (QUIC takes the smaller non-zero one). It must exceed every wait of a test
/// during which nothing moves (io timeout, the control exchanges between connect and go), so
/// it is the larger of this and four io timeouts.
const MIN_IDLE_TIMEOUT: Duration = Duration::from_secs(60);

/// Connects to the server's `endpoint` at the control connection's address and presents
/// `cookie`; returns once the server admitted the connection.
pub(super) fn connect(
    trust: Option<&Trust>,
    control: SocketAddr,
    endpoint: &str,
    opts: &SocketOptions,
    cookie: &Cookie,
    timeout: Duration,
) -> Result<QuicConnection> {
    let (port, fingerprint) = parse_endpoint(endpoint)?;
    let addr = SocketAddr::new(control.ip(), port);
    let failure = Arc::new(Mutex::new(None));
    let (crypto, server_name) = tls::client_crypto(trust, fingerprint, addr.ip(), &failure)?;
    let mut client_config = quinn::ClientConfig::new(Arc::new(crypto));
    client_config.transport_config(transport_config(
        Some(MIN_IDLE_TIMEOUT.max(timeout.saturating_mul(4))),
        false,
    ));

    let unspecified = match addr {
        SocketAddr::V4(_) => IpAddr::V4(Ipv4Addr::UNSPECIFIED),
        SocketAddr::V6(_) => IpAddr::V6(Ipv6Addr::UNSPECIFIED),
    };
    let socket = udp_socket(SocketAddr::new(unspecified, 0), opts, None)
        .context("making the QUIC data socket")?;
    let options = Arc::new(socket.try_clone().context("duplicating the UDP socket")?);
    let engine = Engine::start()?;
    let quinn_endpoint = engine
        .endpoint(socket, None)
        .context("starting the QUIC endpoint")?;

    let handshake_failed = |why: String| anyhow!("QUIC handshake with {addr} failed: {why}");
    // Whether the handshake was done when time ran out.
    let mut shook_hands = false;
    let outcome = engine.run(async {
        tokio::time::timeout(timeout, async {
            let connecting = quinn_endpoint
                .connect_with(client_config, addr, &server_name)
                .map_err(|e| Step::Handshake(e.to_string()))?;
            let conn = connecting.await.map_err(Step::from_connection)?;
            shook_hands = true;
            let (mut send, mut recv) = conn.open_bi().await.map_err(Step::from_connection)?;
            send.write_all(&cookie.0).await.map_err(Step::from_write)?;
            let mut admitted = [0u8; 1];
            recv.read_exact(&mut admitted)
                .await
                .map_err(Step::from_read_exact)?;
            if admitted[0] != ADMITTED {
                return Err(Step::Admission(
                    "the server answered the test cookie with an unexpected byte".into(),
                ));
            }
            Ok((conn, send, recv))
        })
        .await
    });
    let recorded = || failure.lock().ok().and_then(|mut f| f.take());
    let (conn, send, recv) = match outcome {
        Ok(Ok(c)) => c,
        Ok(Err(Step::Handshake(why))) => {
            return Err(handshake_failed(recorded().unwrap_or(why)));
        }
        Ok(Err(Step::Admission(why))) => {
            bail!("QUIC data connection to {addr} not admitted: {why}")
        }
        Err(_) if shook_hands => bail!(
            "QUIC data connection to {addr} not admitted: the server did not accept it within {}",
            crate::units::format_seconds(timeout.as_secs_f64())
        ),
        Err(_) => {
            return Err(handshake_failed(recorded().unwrap_or_else(|| {
                format!(
                    "no answer within {} (is a wirebench server reachable over UDP there?)",
                    crate::units::format_seconds(timeout.as_secs_f64())
                )
            })));
        }
    };
    Ok(QuicConnection::new(
        engine,
        conn,
        (send, recv),
        Some(quinn_endpoint),
        options,
    ))
}

/// Where setting up a client connection failed.
enum Step {
    /// TLS or QUIC handshake: the reason to print.
    Handshake(String),
    /// The handshake worked, the test cookie did not.
    Admission(String),
}

impl Step {
    fn from_connection(e: ConnectionError) -> Step {
        match e {
            ConnectionError::ApplicationClosed(c)
                if c.error_code == VarInt::from(CLOSE_BAD_COOKIE) =>
            {
                Step::Admission("the server refused the test cookie".into())
            }
            ConnectionError::ConnectionClosed(c) => Step::Handshake(format!(
                "the server closed the connection: {}",
                describe_close(&c.reason, &c.error_code.to_string())
            )),
            e => Step::Handshake(e.to_string()),
        }
    }
    fn from_write(e: WriteError) -> Step {
        match e {
            WriteError::ConnectionLost(c) => Step::from_connection(c),
            e => Step::Admission(format!("sending the test cookie: {e}")),
        }
    }
    fn from_read_exact(e: quinn::ReadExactError) -> Step {
        match e {
            quinn::ReadExactError::ReadError(ReadError::ConnectionLost(c)) => {
                Step::from_connection(c)
            }
            e => Step::Admission(format!(
                "waiting for the server to admit the connection: {e}"
            )),
        }
    }
}
