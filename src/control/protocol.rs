//! The control protocol: versioned messages that negotiate a test, separate from the data
//! plane. Client and server exchange these over one TCP connection:
//!
//! ```text
//! client                         server
//! Hello            ->
//!                  [<- Challenge; Auth ->: a server with a pre-shared key, see auth.rs]
//!                  <-  Welcome (version, environment, limits)  or Error
//! Open(TestSpec)   ->
//!                  <-  Opened (data endpoint, cookie)      or Error
//! for each point:
//!   Point(PointSpec) ->
//!                    <-  PointAccepted                     or Error
//!   (client opens the data connections)
//!   Connected        ->
//!                    <-  Go (server socket options)        or Error
//!   (data moves; each sending side reports when it is done)
//!   [SendDone]       ->            <- [SendDone]
//!   EndPoint         ->
//!                    <-  PointResult
//! Bye              ->
//! ```
//!
//! Which message may come when, what is answered and what refused is decided by the two
//! sides' state machines in machine/; client.rs and server.rs only carry their frames.

use serde::{Deserialize, Serialize};

use crate::env::Environment;
use crate::pattern::exchange::ResponderStats;
use crate::pattern::stream::{Pace, StreamStats};
use crate::pattern::{CpuTime, Direction, PatternKind};
use crate::transport::{EffectiveOptions, SocketOptions};

use super::limits::Limits;
use super::refusal::{Refusal, RefusalKind, ServerRefusal};

/// Identifies a wirebench control connection.
pub const MAGIC: &str = "wirebench";
/// Bumped on any incompatible change of these messages. 2: the reports' times in
/// nanoseconds (`elapsed_ns`, `user_ns`, `jitter_ns`, intervals' `start_ns` and `end_ns`).
/// 3: a refusal (`error`) names its kind and, when busy, may say when to try again (`kind`,
/// `retry_after_ms`).
///
/// Each side refuses a peer of another version in one line that names both versions: the
/// server answers the hello with an `invalid` refusal (which a client before 3 reads too: it
/// ignores the fields it does not know), the client refuses a Welcome of another version. A
/// server before 3 refuses a hello of 3 with its own line, without a kind.
pub const PROTOCOL_VERSION: u32 = 3;

/// What a test is: fixed for all its points.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TestSpec {
    pub pattern: PatternKind,
    pub transport: crate::transport::TransportKind,
    /// Parallel streams (stream), or parallel request/response connections (pingpong, rr).
    pub streams: u32,
    pub direction: Direction,
    /// Busy-poll receives on the server's data sockets.
    pub spin: bool,
    /// CPUs to pin the server's data threads to, round robin.
    pub server_cpus: Vec<usize>,
    /// Interval reports on the server side, milliseconds.
    pub interval_ms: Option<u64>,
    /// Transactions in flight (rr).
    pub burst: u32,
    /// Fast paths both sides use where their role allows.
    pub fast: crate::pattern::FastPaths,
    /// Data connections go to the control port itself (opening with a data prefix and the
    /// cookie) instead of ports of their own, so that one forwarded port (a relay, a proxy,
    /// a NAT rule) carries the whole test. TCP only.
    #[serde(default)]
    pub one_port: bool,
    /// Exchanges (pingpong, rr): requests and responses are written in calls of at most this
    /// many bytes, by both ends, so that the two directions split alike (None: one call per
    /// message). A server older than this field writes its responses whole.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub write_size: Option<u64>,
    /// Exchanges: how long the requester waits before each timed transaction, nanoseconds
    /// (the client's own business: a server ignores it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub think_ns: Option<u64>,
    /// Exchanges over a byte stream: every message of the test goes with its length, in this
    /// many bytes, before it (0: none, as always before). A run whose sizes include 0 asks
    /// for it, so that a 0-byte message is a real exchange and every point of the run is
    /// framed alike. A server older than this field refuses such a run (sizes of 0).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub length_prefix: u32,
    /// rr: requests on a schedule (`--arrivals`), each point at its own rate (the client's
    /// own business: the responder answers as ever, and a server ignores it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub open_loop: Option<crate::pattern::OpenLoopSettings>,
    /// grpc: the data connections speak HTTP/2 over TLS 1.3 (`--tls`); the server announces
    /// its certificate's fingerprint with the port. A server older than this field ignores
    /// it and announces a plain port, which the client refuses.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub tls: bool,
    /// pingpong, rr (one in flight): path timing (`--path-timing`): the responder stamps the
    /// requests the requester stamps and reports their records with its point result. A
    /// server older than this field ignores it and reports none (the client then says so).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub path_timing: bool,
}

fn is_zero(v: &u32) -> bool {
    *v == 0
}

/// One point of a sweep: sizes, stop condition and the server's socket options.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PointSpec {
    /// Ping-pong message size, rr/crr request size, stream write size: bytes.
    pub request_size: u64,
    /// Ping-pong: equal to request_size; rr/crr response size: bytes.
    pub response_size: u64,
    /// Stream receive size per read call: bytes.
    pub read_size: u64,
    pub duration_ms: Option<u64>,
    /// Stream: bytes per sending stream.
    pub bytes: Option<u64>,
    /// Stream: writes per sending stream; exchanges: transactions per connection.
    pub iterations: Option<u64>,
    pub warmup: u64,
    /// Pacing of each sending stream.
    pub pace: Option<Pace>,
    pub server_socket: SocketOptions,
    /// Some socket buffer of this point is fixed, on either end (SO_SNDBUF or SO_RCVBUF): the
    /// point studies TCP under small buffers, so the receivers keep the kernel's wake-ups.
    #[serde(default)]
    pub buffers_fixed: bool,
    /// rr with open-loop arrivals: the offered rate, requests per second over all connections
    /// (the client's own business: a server ignores it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate_per_s: Option<u64>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
pub enum ClientMessage {
    Hello {
        magic: String,
        protocol: u32,
        version: String,
        /// The client's nonce, hex: present when the client holds a pre-shared key. Absent,
        /// the hello is what it always was, so a keyless exchange is unchanged.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        nonce: Option<String>,
    },
    /// The answer to the server's Challenge: HMAC of both nonces under the key, hex.
    Auth {
        proof: String,
    },
    Open {
        spec: TestSpec,
    },
    Point {
        spec: PointSpec,
    },
    Connected,
    /// The client's sending streams are done; datagrams sent per sending stream.
    SendDone {
        sent: Vec<u64>,
    },
    EndPoint,
    Bye,
}

// Welcome (environment, limits, the key's proof) is sent once per session and never kept in a
// collection: boxing it would buy nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ServerMessage {
    Welcome {
        protocol: u32,
        version: String,
        environment: Environment,
        limits: Limits,
        /// The address the server sees this control connection come from. When it is not
        /// the client's own, something (a relay, a proxy, NAT) sits in the path.
        #[serde(default)]
        client_seen_as: Option<String>,
        /// A server with a pre-shared key proves it holds it too (after the client has).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        proof: Option<String>,
    },
    /// A server with a pre-shared key asks the client to prove it holds it: the server's
    /// nonce, hex.
    Challenge {
        nonce: String,
    },
    Opened {
        endpoint: String,
        /// Absent after a key exchange: both sides derive the cookie, nobody sends it.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        cookie: Option<String>,
    },
    PointAccepted,
    Go {
        socket: Vec<EffectiveOptions>,
    },
    SendDone {
        sent: Vec<u64>,
    },
    PointResult {
        report: ServerMeasurement,
    },
    /// The server refuses the request, or ends the test: the session is over unless the
    /// request was a point whose own fields were out of bounds.
    Error {
        /// What kind of refusal (see refusal.rs). Absent from servers before protocol 3, and
        /// read as absent when it is a kind this side does not know.
        #[serde(
            default,
            skip_serializing_if = "Option::is_none",
            deserialize_with = "known_kind"
        )]
        kind: Option<RefusalKind>,
        message: String,
        /// Busy: milliseconds until the server expects to have room, when it can tell.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        retry_after_ms: Option<u64>,
    },
}

/// A refusal's kind, or None for one this side does not know (a newer server's): the
/// refusal's line still reaches the user, rather than a complaint about the message.
fn known_kind<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<RefusalKind>, D::Error> {
    let v = Option::<serde_json::Value>::deserialize(d)?;
    Ok(v.and_then(|v| serde_json::from_value(v).ok()))
}

impl From<Refusal> for ServerMessage {
    fn from(r: Refusal) -> ServerMessage {
        ServerMessage::Error {
            kind: Some(r.kind),
            message: r.message,
            // Rounded up: a client that waits the hint to the millisecond must not come back
            // a fraction of one too early.
            retry_after_ms: r
                .retry_after
                .map(|d| u64::try_from(d.as_nanos().div_ceil(1_000_000)).unwrap_or(u64::MAX)),
        }
    }
}

impl ServerMessage {
    /// The refusal this message is, if it is one.
    pub fn refusal(&self) -> Option<ServerRefusal> {
        match self {
            ServerMessage::Error {
                kind,
                message,
                retry_after_ms,
            } => Some(ServerRefusal {
                kind: *kind,
                message: message.clone(),
                retry_after: retry_after_ms.map(std::time::Duration::from_millis),
            }),
            _ => None,
        }
    }
}

/// The server's side of one point.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ServerMeasurement {
    /// Per data connection, in connection order (stream pattern).
    pub streams: Vec<StreamStats>,
    /// Per data connection (exchanges) or one (crr).
    pub responders: Vec<ResponderStats>,
    /// CPU time of the server's data threads.
    pub cpu: CpuTime,
    /// The server host's network counters and CPU shares over its side of the point, read
    /// outside the timed phase. Absent from older servers (and read as absent by older
    /// clients, which ignore fields they do not know).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instruments: Option<crate::instruments::HostInstruments>,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A refusal carries its kind and retry hint; an error without them (a server before
    /// protocol 3) and one of a kind this side does not know still decode, without a kind.
    #[test]
    fn a_refusal_names_its_kind_and_older_or_newer_ones_still_decode() {
        let busy = ServerMessage::from(
            Refusal::busy("server busy: 3 tests running, the limit is 3")
                .retry_after(Some(std::time::Duration::from_millis(1500))),
        );
        let text = serde_json::to_string(&busy).unwrap();
        assert_eq!(
            text,
            r#"{"type":"error","kind":"busy","message":"server busy: 3 tests running, the limit is 3","retry_after_ms":1500}"#
        );
        assert_eq!(serde_json::from_str::<ServerMessage>(&text).unwrap(), busy);
        // A hint is never rounded down: waiting it out must not come back early.
        let hint = ServerMessage::from(
            Refusal::busy("b").retry_after(Some(std::time::Duration::from_nanos(1_000_001))),
        );
        assert!(matches!(
            hint,
            ServerMessage::Error {
                retry_after_ms: Some(2),
                ..
            }
        ));
        let old: ServerMessage =
            serde_json::from_str(r#"{"type":"error","message":"access denied"}"#).unwrap();
        assert_eq!(
            old.refusal(),
            Some(ServerRefusal {
                kind: None,
                message: "access denied".into(),
                retry_after: None,
            })
        );
        let newer: ServerMessage = serde_json::from_str(
            r#"{"type":"error","kind":"on_fire","message":"m","retry_after_ms":5}"#,
        )
        .unwrap();
        let r = newer.refusal().unwrap();
        assert_eq!((r.kind, r.message.as_str()), (None, "m"));
        for (kind, wire) in [
            (RefusalKind::Busy, "busy"),
            (RefusalKind::Policy, "policy"),
            (RefusalKind::Invalid, "invalid"),
            (RefusalKind::NotAuthorised, "not_authorised"),
            (RefusalKind::Limit, "limit"),
            (RefusalKind::Internal, "internal"),
        ] {
            assert_eq!(serde_json::to_value(kind).unwrap(), wire);
        }
    }

    /// A point result without instruments is the message older peers send and read: the
    /// field is absent, not null; with them it round-trips.
    #[test]
    fn instruments_are_an_optional_field_of_the_point_result() {
        let plain = ServerMessage::PointResult {
            report: ServerMeasurement::default(),
        };
        let text = serde_json::to_string(&plain).unwrap();
        assert!(!text.contains("instruments"), "{text}");
        assert_eq!(serde_json::from_str::<ServerMessage>(&text).unwrap(), plain);
        let mut report = ServerMeasurement::default();
        let mut counters = crate::instruments::HostCounters::default();
        counters.kernel.insert("Udp.RcvbufErrors".into(), 300);
        report.instruments = Some(crate::instruments::HostInstruments {
            counters,
            cpu: None,
        });
        let full = ServerMessage::PointResult { report };
        let text = serde_json::to_string(&full).unwrap();
        assert!(text.contains("\"Udp.RcvbufErrors\":300"), "{text}");
        assert_eq!(serde_json::from_str::<ServerMessage>(&text).unwrap(), full);
    }
}
