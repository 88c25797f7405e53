//! gRPC: RPC with serialisation on the field's standard stack, tonic (HTTP/2 by hyper and
//! h2, over TCP) with protobuf messages by prost, as Müller et al. put Sun RPC/XDR beside
//! raw ATM, TCP sockets and PVM in one table.
//!
//! **Service.** `wirebench.v1.Echo` (proto/wirebench_echo.proto, for other implementations):
//! `Call(Payload) returns (Payload)`, `Upload(stream Payload) returns (UploadSummary)` and
//! `Download(Payload) returns (stream Payload)`. The messages are written by hand with prost's
//! derive and the service with tonic's generic client and server, so no protoc is needed.
//! A message of n application bytes carries them in the encoding the client chose
//! (`--encoding bytes|doubles|records`, see [`wire`]); the server answers each call in the
//! encoding it came in, so the two ends agree without being told.
//!
//! **Mapping.** One data connection is one HTTP/2 connection (a tonic channel). pingpong and
//! rr: a unary `Call` per transaction, the request carrying the response size it asks for;
//! crr: a new connection per call (crr connects anew per transaction anyway); stream: one
//! client-streaming `Upload` (client to server), or one server-streaming `Download`
//! (server to client). The pattern says which before it starts ([`Shape`]).
//!
//! **Blocking bridge.** On the client, `send` starts a call without waiting for its answer
//! (at most [`MAX_IN_FLIGHT`] at once) and `recv` returns the oldest outstanding call's
//! answer, so calls can be pipelined and answers come in the order asked, as bytes do over
//! TCP; with `set_nonblocking(true)` `recv` says WouldBlock while the oldest is not back. On
//! the server, `recv` returns the next request and `send` answers the oldest unanswered one.
//! Like quic's, every connection runs its side of tonic on a current-thread tokio runtime
//! that the flow's own thread drives while it waits (the listener's runtime is shared by the
//! connections it accepted), so a call crosses no thread on either end.
//!
//! **Admission.** The data listener drops TCP connections from any address other than the
//! control peer's before any HTTP/2. A new connection's first call is a hello with the test's
//! cookie (metadata `wb-cookie`, and `wb-hello`); the server answers it once `accept` took
//! the connection for that cookie, PERMISSION_DENIED for another cookie. Every later call
//! presents the cookie again, and a wrong one (or none) is refused with PERMISSION_DENIED.
//!
//! **Serialisation.** Every message's encode and decode is timed apart from the call, on both
//! ends (see [`codec`]); [`Connection::serialisation`] reads them.
//!
//! **TLS.** With `--tls` the client asks for TLS in the test; the server's listener then runs
//! TLS 1.3 (rustls on ring, ALPN "h2") on every accepted TCP connection before HTTP/2, with
//! `--tls-cert`/`--tls-key` or the self-signed certificate, and announces `PORT/sha256=HEX`
//! as quic does; the client pins exactly that certificate, or verifies it against `--tls-ca`
//! for the server's IP address. A connection's setup figure then includes the TLS handshake
//! (1 RTT more than TCP and HTTP/2 alone). `serve --grpc-echo` is plaintext.
//!
//! **Options.** TCP_NODELAY on both ends, as gRPC stacks set it. HTTP/2 flow-control windows
//! of 16 MiB per stream and 32 MiB per connection (h2's 64 KiB default would cap a stream
//! at 64 KiB per round trip); messages of up to [`MAX_MESSAGE`] application bytes.
//!
//! **Guards.** The data port judges every call by the cookie in its headers before a byte of
//! its body is read, and decodes no more than the point's largest message needs
//! ([`decoding_limit`]), each call reserving that much of its connection's share
//! ([`TEST_CONNECTION_DECODING`]) first; connections are capped. `serve --grpc-echo` has
//! caps of its own that bound all it holds ([`ECHO_HELD_BOUND`]): answers, messages,
//! streams, connections, windows, a deadline for silent connections and keep-alive pings.

mod answer;
mod client;
mod codec;
mod io;
#[cfg(test)]
mod loopback_tests;
mod server;
pub(crate) mod wire;

use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use anyhow::{anyhow, bail, Result};

use super::tls;
use super::{
    Capabilities, Connection, Cookie, Listener, Shape, SocketOptions, Transport, TransportConfig,
};
use crate::model::vocab::Encoding;

/// The largest message, application bytes. Its encoding may take more on the wire (records:
/// about 1.3 times), under the decoders' limit [`MAX_DECODED`].
pub const MAX_MESSAGE: u64 = 64 << 20;
/// The ALPN protocol of HTTP/2 over TLS (RFC 9113), which gRPC over TLS announces.
const ALPN_H2: &[u8] = b"h2";
/// tonic's limit on an encoded message, both ends (its default is 4 MiB).
const MAX_DECODED: usize = 192 << 20;
/// Calls a client connection keeps outstanding at most.
pub const MAX_IN_FLIGHT: usize = 1024;
/// HTTP/2 streams a server connection takes at once: every outstanding call, and the hello.
const MAX_STREAMS: u32 = MAX_IN_FLIGHT as u32 + 8;
const STREAM_WINDOW: u32 = 16 << 20;
const CONNECTION_WINDOW: u32 = 32 << 20;
/// Upload messages a client may queue ahead of the HTTP/2 stream.
const UPLOAD_QUEUE: usize = 64;
/// Requests a server connection queues for its flow before the calls wait.
const REQUEST_QUEUE: usize = MAX_IN_FLIGHT + 8;
/// The data port's guards against a client of the test's own address (only the control
/// peer's address reaches it; see SECURITY.md). Its windows stay the throughput's (above): a
/// connection's unread data in HTTP/2 is at most [`CONNECTION_WINDOW`].
///
/// Connections at once; more are closed at accept. Above the streams a test may have
/// (`serve --max-streams`, 128 by default), with room for crr's connection per call.
const TEST_MAX_CONNECTIONS: usize = 1024;
/// Encoded bytes one connection's calls may be decoding at once: each call reserves its
/// decoding limit (the point's, see [`decoding_limit`]) before its body is read, so a point
/// of small messages keeps every call it pipelines and one of 64 MiB decodes one at a time.
const TEST_CONNECTION_DECODING: usize = MAX_DECODED;
/// A hello carries an empty message: its decoding limit.
const HELLO_MAX_DECODED: usize = 1 << 10;
/// What the encodings add to a message's application bytes on the wire (records: 41 bytes
/// per 32), with the fields' keys and lengths: the margin over a point's message size.
const DECODING_MARGIN: usize = 64 << 10;

/// The encoded size a point's calls may decode: its largest message in the largest
/// encoding (3/2 of the application bytes covers records' 41/32), plus the keys and
/// lengths, never above [`MAX_DECODED`].
fn decoding_limit(message: u64) -> usize {
    let app = usize::try_from(message).unwrap_or(usize::MAX);
    app.saturating_add(app / 2)
        .saturating_add(DECODING_MARGIN)
        .min(MAX_DECODED)
}

/// `serve --grpc-echo`'s guards. It has no control connection, so no test budget covers it:
/// these caps alone bound what its clients can make it hold. The bound, [`ECHO_HELD_BOUND`]:
/// a stream holds one message at most, the request being decoded (tonic reserves its
/// declared length, refused above [`ECHO_MAX_MESSAGE`]) or an echo of it waiting for the
/// peer's window (an answer of `response_size` bytes is made a chunk at a time as the window
/// takes it, see `answer.rs`: it holds one chunk and h2's send buffer); a connection adds the HTTP/2 data not yet read by a stream (its
/// window); connections are capped. One message more is decoded at a time (the service
/// runs on one thread), which records' expansion makes up to 3 times its size.
///
/// The largest message the echo decodes, encoded bytes: gRPC's own default, which every
/// gRPC client assumes unless told otherwise.
const ECHO_MAX_MESSAGE: usize = 4 << 20;
/// The largest answer a Call may ask for (`response_size`), application bytes: in every
/// encoding (records: 41 bytes per 32) it stays under [`ECHO_MAX_MESSAGE`]. Larger is
/// refused with RESOURCE_EXHAUSTED before anything is allocated.
pub const ECHO_MAX_RESPONSE: i64 = 3 << 20;
/// Streams (calls) one connection may have open, and handlers running, at once.
const ECHO_MAX_STREAMS: u32 = 4;
/// Connections at once; more are closed at accept, before any HTTP/2.
const ECHO_MAX_CONNECTIONS: usize = 12;
/// Connections at once from one address: a quarter, so that one client holding idle
/// connections that answer every ping cannot take the echo from everyone else.
const ECHO_MAX_PER_ADDRESS: usize = ECHO_MAX_CONNECTIONS / 4;
/// HTTP/2 windows: enough for a message's round trip on a LAN, small beside the messages.
const ECHO_STREAM_WINDOW: u32 = 1 << 20;
const ECHO_CONNECTION_WINDOW: u32 = 2 << 20;
/// What all echo clients together can make the service hold:
/// 12 x (4 x 4 MiB + 2 MiB) + 3 x 4 MiB = 228 MiB, under 256 MiB.
pub const ECHO_HELD_BOUND: usize = ECHO_MAX_CONNECTIONS
    * (ECHO_MAX_STREAMS as usize * ECHO_MAX_MESSAGE + ECHO_CONNECTION_WINDOW as usize)
    + 3 * ECHO_MAX_MESSAGE;
const _: () = assert!(ECHO_HELD_BOUND < 256 << 20);
/// The echo's caps as its log line states them: connections, calls per connection, message
/// and answer bytes.
pub const ECHO_CAPS: (usize, u32, usize, i64) = (
    ECHO_MAX_CONNECTIONS,
    ECHO_MAX_STREAMS,
    ECHO_MAX_MESSAGE,
    ECHO_MAX_RESPONSE,
);
/// A connection that sends nothing this long (no HTTP/2 preface, no frame, no answer to a
/// ping) is closed. Longer than a keep-alive round ([`ECHO_KEEPALIVE`] plus its timeout),
/// so a live client has always sent a ping's answer within it.
const ECHO_SILENCE: Duration = Duration::from_secs(45);
/// Every this long without frames from the client the service pings it; an answer missing
/// for as long closes the connection (a client that reads nothing cannot answer).
const ECHO_KEEPALIVE: Duration = Duration::from_secs(20);
/// No call holds a stream longer (an Upload included).
const ECHO_CALL_TIMEOUT: Duration = Duration::from_secs(300);
/// HTTP/2 limits on both listeners: the frame size is h2's minimum and default; the header
/// list (gRPC's metadata) is small; streams a client opens and resets before they are
/// accepted are few (CVE-2023-44487's rapid reset).
const MAX_FRAME: u32 = 16 << 10;
const MAX_HEADER_LIST: u32 = 16 << 10;
const MAX_PENDING_RESETS: usize = 20;

/// Metadata keys.
const COOKIE_KEY: &str = "wb-cookie";
const HELLO_KEY: &str = "wb-hello";
/// How long a hello may wait for the server's flow to accept its connection.
const HELLO_WAIT: Duration = Duration::from_secs(10);

pub struct Grpc {
    encoding: Encoding,
    /// HTTP/2 over TLS 1.3 (`--tls`): the server's identity, the client's trust.
    tls: Option<tls::Credentials>,
}

impl Grpc {
    pub fn new(config: &TransportConfig) -> Result<Grpc> {
        // Read when the transport is opened, so that a bad file is an error before any test.
        let tls = if config.tls {
            Some(tls::Credentials::load(config)?)
        } else {
            None
        };
        Ok(Grpc {
            encoding: config.encoding,
            tls,
        })
    }
}

impl Transport for Grpc {
    fn name(&self) -> &'static str {
        "grpc"
    }
    fn capabilities(&self) -> Capabilities {
        Capabilities {
            reliable: true,
            message_boundaries: true,
            max_message: MAX_MESSAGE,
            tcp_options: false,
            host_local: false,
            syscall_batching: false,
            rcvlowat: false,
        }
    }
    fn listen(&self, local: IpAddr, peer: IpAddr) -> Result<Box<dyn Listener>> {
        let identity = match &self.tls {
            None => None,
            Some(tls::Credentials {
                identity: Some(id), ..
            }) => Some(id.clone_identity()),
            Some(_) => Some(tls::self_signed()?),
        };
        Ok(Box::new(server::GrpcListener::open(local, peer, identity)?))
    }
    fn connect(
        &self,
        control: SocketAddr,
        endpoint: &str,
        opts: &SocketOptions,
        cookie: &Cookie,
        timeout: Duration,
    ) -> Result<Box<dyn Connection>> {
        let (port, secure) = match &self.tls {
            None => {
                let port: u16 = endpoint.parse().map_err(|_| {
                    if endpoint.contains("/sha256=") {
                        anyhow!("the grpc server serves TLS, which this client did not ask for")
                    } else {
                        anyhow!(
                            "bad grpc data endpoint '{}' (a port)",
                            endpoint.escape_debug()
                        )
                    }
                })?;
                (port, None)
            }
            Some(side) => {
                if endpoint.parse::<u16>().is_ok() {
                    bail!(
                        "the grpc server announced no certificate (plain port {endpoint}): it serves no TLS; is it older than --tls?"
                    );
                }
                let (port, fingerprint) = tls::endpoint::parse_endpoint("grpc", endpoint)?;
                (
                    port,
                    Some(client::Secure {
                        trust: side.trust.as_ref(),
                        fingerprint,
                    }),
                )
            }
        };
        let addr = SocketAddr::new(control.ip(), port);
        Ok(Box::new(client::GrpcClient::connect(
            addr,
            opts,
            Some(cookie),
            self.encoding,
            secure,
            timeout,
        )?))
    }
}

pub use server::{serve_echo, EchoCounts};

/// A client connection to a gRPC echo service that is not a wirebench server (no control
/// connection, no cookie, no hello): `run --grpc-endpoint`.
pub fn connect_foreign(
    addr: SocketAddr,
    encoding: Encoding,
    timeout: Duration,
) -> Result<Box<dyn Connection>> {
    Ok(Box::new(client::GrpcClient::connect(
        addr,
        &SocketOptions::default(),
        None,
        encoding,
        None,
        timeout,
    )?))
}

/// The connection of a shape: what a client connection does until told otherwise.
fn default_shape() -> Shape {
    Shape::Exchange {
        response_size: None,
    }
}

#[cfg(test)]
mod limit_tests {
    use super::*;

    /// A point's limit covers its largest message in every encoding, and stops at the cap.
    #[test]
    fn the_decoding_limit_covers_the_points_messages_in_every_encoding() {
        for (n, enc) in [
            (1u64, Encoding::Records),
            (1000, Encoding::Doubles),
            (1 << 20, Encoding::Records),
            (1 << 20, Encoding::Bytes),
        ] {
            let app = super::wire::filler(n as usize);
            let p = super::wire::to_payload(&app, enc, i64::MAX);
            let encoded = prost::Message::encoded_len(&p);
            assert!(encoded <= decoding_limit(n), "{n} {enc}: {encoded}");
        }
        assert_eq!(decoding_limit(u64::MAX), MAX_DECODED);
        assert_eq!(decoding_limit(0), DECODING_MARGIN);
    }

    /// The largest answer the echo gives encodes under its own decoding limit.
    #[test]
    fn the_largest_echo_answer_fits_the_echo_message_limit() {
        let app = super::wire::filler(ECHO_MAX_RESPONSE as usize);
        for enc in [Encoding::Bytes, Encoding::Doubles, Encoding::Records] {
            let p = super::wire::to_payload(&app, enc, 0);
            assert!(prost::Message::encoded_len(&p) <= ECHO_MAX_MESSAGE, "{enc}");
        }
    }
}
