//! QUIC: the user-space reliable transport over UDP (RFC 9000), with quinn and rustls.
//!
//! One data connection is one QUIC connection carrying one bidirectional stream, so a
//! pattern sees a byte stream as it does over TCP. What is measured is the whole user-space
//! stack: packet protection (TLS 1.3 keys, AES-GCM or ChaCha20), loss recovery, congestion
//! control (quinn's default, CUBIC) and flow control, all on the calling thread.
//!
//! **Setup.** The client opens the stream and writes the test's 16-byte cookie; the server
//! admits the connection by writing one byte back. `connect` returns after that byte came,
//! so the client's "data connection setup" figure is the QUIC handshake (1 RTT and the TLS
//! cryptography) plus the cookie's round trip, plus making the client's UDP socket, runtime
//! and endpoint (a few hundred microseconds), reported apart from the data-path figures.
//! Packets start at quinn's 1200 bytes and MTU discovery raises them to at most 1452, as on
//! an Ethernet path, also on loopback: the figures are those of QUIC as deployed.
//!
//! **Certificates.** The server uses `--tls-cert`/`--tls-key` (PEM) or else a self-signed
//! certificate made once per process, and announces `PORT/sha256=HEX` over the control
//! connection: HEX is the SHA-256 of its certificate (DER). Without `--tls-ca` the client
//! accepts exactly that certificate (the control connection vouches for it) and still checks
//! the handshake signatures with it. With `--tls-ca FILE` the client verifies the server the
//! usual way (webpki) against those CA certificates, for the server's IP address: the
//! certificate must name that address as an IP SAN, since connections go to the address the
//! control connection reached, not to a host name. ALPN is "wirebench".
//!
//! **Threads.** The traits are blocking; quinn is async. Every connection waits with
//! `block_on` on a current-thread tokio runtime, so while a flow waits its own thread runs
//! the endpoint and connection drivers: a message crosses no thread on its way. A client
//! connection has its own UDP socket, endpoint and runtime. The server's listener has one
//! endpoint (one UDP socket) and one runtime, shared by all the connections it accepts, so
//! the flows of one test with `--parallel N` share one server socket and take turns driving
//! it (tokio lets one `block_on` drive at a time; the others are woken by it). A background
//! thread per runtime drives it while no flow does (acknowledgements, retransmissions and
//! closes must go on while a pattern is busy with its control connection); it holds the
//! runtime only after `IDLE_GRACE` (2 ms, in [`engine`]) without a flow in it and gives it
//! back at once.
//!
//! **Ending.** `shutdown_write` finishes the stream and waits until the peer has
//! acknowledged every byte of it. Dropping a connection finishes the stream as closing a TCP
//! socket sends a FIN; the connection is then closed (code 0) in the background once the
//! peer has acknowledged everything, or after the write timeout.
//!
//! **Files.** [`tls`] hands quinn the TLS configurations and the announced endpoint (both
//! shared with grpc's `--tls`, in `transport::tls`), [`engine`] the runtime the flows drive, [`listener`] and [`client`] set up the two ends of a
//! connection, and [`connection`] is the data path.

mod client;
mod connection;
pub(super) mod engine;
mod listener;
#[cfg(test)]
mod loopback_tests;
mod tls;

use std::net::{IpAddr, SocketAddr};
use std::os::fd::AsFd;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};
use quinn::{IdleTimeout, VarInt};
use socket2::{Domain, Protocol, SockRef, Socket, Type};

use super::{
    sockopt, Capabilities, Connection, Cookie, Listener, SocketOptions, Transport, TransportConfig,
};
use tls::{Identity, Trust};

/// Application close codes.
const CLOSE_DONE: u32 = 0;
const CLOSE_BAD_COOKIE: u32 = 1;
/// The byte with which the server admits a connection that presented the right cookie.
const ADMITTED: u8 = 0xa5;
/// How long a new connection may take from its first packet to presenting its cookie.
const COOKIE_WAIT: Duration = Duration::from_secs(5);

/// Flow-control windows. On loopback one stream moves a few Gbit/s at most with a round
/// trip of tens of microseconds, so these never limit it; on a long fat network 16 MiB per
/// stream is 1.3 Gbit/s at 100 ms. quinn's defaults (1.25 MB per stream) would cap a single
/// stream well below what a path of a few ms carries.
const STREAM_RECEIVE_WINDOW: u32 = 16 << 20;
const CONNECTION_RECEIVE_WINDOW: u32 = 32 << 20;
/// Bytes written but not yet acknowledged that quinn keeps per connection; a `send` blocks
/// beyond that. Like a TCP send buffer, it is also what a sender's clock may run ahead of
/// the receiver by: 4 MiB, the ceiling Linux gives an autotuned TCP send buffer by default
/// (net.ipv4.tcp_wmem), so that sender-side figures of both are comparable. (With 32 MiB a
/// 2 s stream over a 100 Mbit/s lab link reported 148 Mbit/s on the sender's clock.)
const SEND_WINDOW: u64 = 4 << 20;

pub struct Quic {
    identity: Option<Identity>,
    trust: Option<Trust>,
}

impl Quic {
    /// Reads the certificate files this side was given, so that a bad file is an error
    /// before any test starts.
    pub fn new(config: &TransportConfig) -> Result<Quic> {
        let super::tls::Credentials { identity, trust } = super::tls::Credentials::load(config)?;
        Ok(Quic { identity, trust })
    }
}

impl Transport for Quic {
    fn name(&self) -> &'static str {
        "quic"
    }
    fn capabilities(&self) -> Capabilities {
        Capabilities {
            reliable: true,
            message_boundaries: false,
            max_message: u64::MAX,
            tcp_options: false,
            host_local: false,
            syscall_batching: false,
            rcvlowat: false,
        }
    }

    fn listen(&self, local: IpAddr, peer: IpAddr) -> Result<Box<dyn Listener>> {
        let identity = match &self.identity {
            Some(id) => id.clone_identity(),
            None => tls::self_signed()?,
        };
        Ok(Box::new(listener::QuicListener::open(
            identity, local, peer,
        )?))
    }

    fn connect(
        &self,
        control: SocketAddr,
        endpoint: &str,
        opts: &SocketOptions,
        cookie: &Cookie,
        timeout: Duration,
    ) -> Result<Box<dyn Connection>> {
        let conn = client::connect(
            self.trust.as_ref(),
            control,
            endpoint,
            opts,
            cookie,
            timeout,
        )?;
        Ok(Box::new(conn))
    }
}

/// The QUIC parameters both ends use; `idle` is None on the server (the client's applies).
fn transport_config(idle: Option<Duration>, server: bool) -> Arc<quinn::TransportConfig> {
    let mut t = quinn::TransportConfig::default();
    t.stream_receive_window(VarInt::from_u32(STREAM_RECEIVE_WINDOW))
        .receive_window(VarInt::from_u32(CONNECTION_RECEIVE_WINDOW))
        .send_window(SEND_WINDOW)
        .max_concurrent_uni_streams(VarInt::from_u32(0))
        // The client opens the one stream; the server opens none.
        .max_concurrent_bidi_streams(VarInt::from_u32(u32::from(server)))
        .datagram_receive_buffer_size(None)
        .max_idle_timeout(
            idle.map(|d| {
                IdleTimeout::try_from(d).unwrap_or_else(|_| IdleTimeout::from(VarInt::MAX))
            }),
        );
    Arc::new(t)
}

/// A UDP socket bound to `addr`, non-blocking, with the requested buffer sizes.
/// A bound, non-blocking UDP socket for an endpoint. With `only_from`, the kernel drops every
/// datagram from another address before quinn can read it: quinn answers some packets on its
/// own (a Version Negotiation for an unknown version, a stateless reset), before the listener's
/// check of the peer runs, and those answers went to whatever source address a stranger wrote.
fn udp_socket(addr: SocketAddr, opts: &SocketOptions, only_from: Option<IpAddr>) -> Result<Socket> {
    let sock = Socket::new(Domain::for_address(addr), Type::DGRAM, Some(Protocol::UDP))
        .context("creating a UDP socket")?;
    if let Some(peer) = only_from {
        // Before bind: nothing can be queued from anyone else in between.
        crate::sys::filter::only_from(sock.as_fd(), peer)
            .context("filtering the QUIC data socket to the control peer's address")?;
    }
    sockopt::apply(&SockRef::from(&sock), opts, false)?;
    sock.bind(&addr.into())
        .with_context(|| format!("binding a UDP socket to {addr}"))?;
    sock.set_nonblocking(true)?;
    Ok(sock)
}
