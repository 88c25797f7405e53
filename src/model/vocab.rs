//! The names every layer shares: which transport, which pattern, which way, which role, which
//! congestion control. Each is a plain value that a run document, the control protocol and
//! the command line spell alike; what a name opens or does lives with its layer.

use anyhow::{bail, Result};
use serde::{Deserialize, Serialize};

/// A transport, as `--transport` names it and as run documents and the control protocol
/// carry it (lowercase: "tcp", "udp", ...).
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Hash,
    PartialOrd,
    Ord,
    Serialize,
    Deserialize,
    clap::ValueEnum,
    schemars::JsonSchema,
)]
#[serde(rename_all = "lowercase")]
#[value(rename_all = "lower")]
pub enum TransportKind {
    /// TCP byte streams.
    Tcp,
    /// UDP datagrams.
    Udp,
    /// Unix-domain stream sockets (client and server on one host).
    Unix,
    /// Multipath TCP.
    Mptcp,
    /// QUIC streams (quinn), over UDP.
    Quic,
    /// Raw Ethernet frames of wirebench's own EtherType (needs root or CAP_NET_RAW).
    Raw,
    /// MPI point-to-point calls between two ranks (`wirebench mpi` only).
    Mpi,
    /// gRPC calls (tonic, protobuf by prost) over HTTP/2 over TCP.
    Grpc,
}

/// How a gRPC message carries its application bytes (`--encoding`): the serialisation a
/// call pays for. A message of n bytes carries n bytes as one `bytes` field, n/8 doubles as
/// a packed `repeated double` (XDR's array of doubles), or n/32 records of four small
/// fields; the n mod 8 (or 32) bytes left over travel as raw bytes beside them.
#[derive(
    Debug,
    Clone,
    Copy,
    Default,
    PartialEq,
    Eq,
    Hash,
    Serialize,
    Deserialize,
    clap::ValueEnum,
    schemars::JsonSchema,
)]
#[serde(rename_all = "lowercase")]
#[value(rename_all = "lower")]
pub enum Encoding {
    /// One `bytes` field: framing, no per-value work.
    #[default]
    Bytes,
    /// A packed `repeated double`, 8 bytes a value.
    Doubles,
    /// `repeated Record`, 32 bytes a record (uint32, double, fixed64, 12-character string).
    Records,
}

impl Encoding {
    pub fn name(self) -> &'static str {
        match self {
            Encoding::Bytes => "bytes",
            Encoding::Doubles => "doubles",
            Encoding::Records => "records",
        }
    }

    /// Application bytes of one value: a message of n bytes carries n / unit values.
    pub fn unit(self) -> usize {
        match self {
            Encoding::Bytes => 1,
            Encoding::Doubles => 8,
            Encoding::Records => 32,
        }
    }
}

impl std::fmt::Display for Encoding {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// Where a transport sits in the stack, for comparisons across layers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Layer {
    /// Lower numbers are lower layers.
    pub rank: u32,
    pub what: &'static str,
}

/// The names of the transports a server carries, for messages: "tcp, udp, ...".
pub fn names() -> String {
    TransportKind::SERVED
        .iter()
        .map(|k| k.name())
        .collect::<Vec<_>>()
        .join(", ")
}

impl std::fmt::Display for TransportKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for TransportKind {
    type Err = anyhow::Error;
    fn from_str(s: &str) -> Result<TransportKind> {
        TransportKind::from_name(s)
    }
}

#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum, schemars::JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum PatternKind {
    /// Echo: n bytes there, n bytes back; one-way latency = RTT/2.
    Pingpong,
    /// One-way bulk transfer; sender and receiver rates.
    Stream,
    /// Request/response transactions with separate sizes.
    Rr,
    /// A new connection for every request/response transaction.
    Crr,
}

impl PatternKind {
    pub fn name(self) -> &'static str {
        match self {
            PatternKind::Pingpong => "pingpong",
            PatternKind::Stream => "stream",
            PatternKind::Rr => "rr",
            PatternKind::Crr => "crr",
        }
    }
}

impl std::fmt::Display for PatternKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// When an exchange's requests leave. Closed loop (`closed`, the default): each request once
/// the reply to the one before it came, so a slow server slows the load it is offered and hides
/// its queue ("coordinated omission", Gil Tene; wrk2 sends on a schedule for this reason).
/// Open loop: on a schedule that does not wait for replies, `fixed` (evenly spaced) or
/// `poisson` (exponential gaps from a seeded generator), latency counted from each request's
/// scheduled send.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum, schemars::JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum Arrivals {
    /// The next request leaves when the reply to the last one came.
    Closed,
    /// Evenly spaced, 1/rate apart.
    Fixed,
    /// Exponential gaps of mean 1/rate (a Poisson process), from a seeded generator.
    Poisson,
}

impl Arrivals {
    pub fn name(self) -> &'static str {
        match self {
            Arrivals::Closed => "closed",
            Arrivals::Fixed => "fixed",
            Arrivals::Poisson => "poisson",
        }
    }
}

impl std::fmt::Display for Arrivals {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// Which way a stream test's data flows, seen from the client.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Direction {
    /// Client sends, server receives.
    Forward,
    /// Server sends over connections the client opened.
    Reverse,
    /// Both at once, on separate connections.
    Bidir,
}

impl Direction {
    /// As run documents spell it.
    pub fn name(self) -> &'static str {
        match self {
            Direction::Forward => "forward",
            Direction::Reverse => "reverse",
            Direction::Bidir => "bidir",
        }
    }
}

impl std::fmt::Display for Direction {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// What one side does on one data connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    Sender,
    Receiver,
    Requester,
    Responder,
}

/// Longest congestion-control name the kernel takes: TCP_CA_NAME_MAX is 16 bytes with the NUL.
pub const CC_NAME_MAX: usize = 15;

/// A congestion-control algorithm's name held in place, so that a sweep point's key that
/// names one stays a plain `Copy` value. Written and read as its text.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct CcName {
    len: u8,
    bytes: [u8; CC_NAME_MAX],
}

impl CcName {
    /// None when the name is empty or longer than the kernel takes.
    pub fn new(name: &str) -> Option<CcName> {
        let len = name.len();
        if len == 0 || len > CC_NAME_MAX {
            return None;
        }
        let mut bytes = [0u8; CC_NAME_MAX];
        bytes[..len].copy_from_slice(name.as_bytes());
        Some(CcName {
            len: len as u8,
            bytes,
        })
    }

    pub fn as_str(&self) -> &str {
        // Always the bytes of a whole `&str` (see `new`).
        std::str::from_utf8(&self.bytes[..usize::from(self.len)]).unwrap_or("")
    }
}

impl std::fmt::Display for CcName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::fmt::Debug for CcName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:?}", self.as_str())
    }
}

impl Serialize for CcName {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for CcName {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<CcName, D::Error> {
        let name = String::deserialize(d)?;
        CcName::new(&name).ok_or_else(|| {
            serde::de::Error::custom(format!(
                "congestion control name of {} bytes: names have 1 to {CC_NAME_MAX}",
                name.len()
            ))
        })
    }
}

impl TransportKind {
    /// Every transport a wirebench server carries (`mpi` runs between MPI ranks instead).
    pub const SERVED: [TransportKind; 7] = [
        TransportKind::Tcp,
        TransportKind::Udp,
        TransportKind::Unix,
        TransportKind::Mptcp,
        TransportKind::Quic,
        TransportKind::Raw,
        TransportKind::Grpc,
    ];

    pub fn name(self) -> &'static str {
        match self {
            TransportKind::Tcp => "tcp",
            TransportKind::Udp => "udp",
            TransportKind::Unix => "unix",
            TransportKind::Mptcp => "mptcp",
            TransportKind::Quic => "quic",
            TransportKind::Raw => "raw",
            TransportKind::Mpi => "mpi",
            TransportKind::Grpc => "grpc",
        }
    }

    pub fn layer(self) -> Layer {
        let (rank, what) = match self {
            TransportKind::Raw => (0, "link: Ethernet frames"),
            TransportKind::Unix => (1, "local IPC, no network stack"),
            TransportKind::Udp => (2, "IP datagrams"),
            TransportKind::Tcp => (3, "IP byte stream"),
            TransportKind::Mptcp => (3, "IP byte stream, multipath"),
            TransportKind::Quic => (4, "user-space stream over UDP"),
            TransportKind::Mpi => (5, "message passing library"),
            TransportKind::Grpc => (5, "RPC: protobuf over HTTP/2 over TCP"),
        };
        Layer { rank, what }
    }

    /// The name of a stream side's calls: datagrams on UDP, messages on raw links, else
    /// writes (sender) and reads (receiver).
    pub fn call_noun(self, sender: bool) -> &'static str {
        match (self, sender) {
            (TransportKind::Udp, _) => "datagram",
            (TransportKind::Raw | TransportKind::Grpc, _) => "message",
            (_, true) => "write",
            (_, false) => "read",
        }
    }

    /// Looks a transport up by name; an unknown one is an error listing the known ones.
    pub fn from_name(name: &str) -> Result<TransportKind> {
        match TransportKind::SERVED
            .iter()
            .chain([TransportKind::Mpi].iter())
            .find(|k| k.name() == name)
        {
            Some(&k) => Ok(k),
            None => bail!("unknown transport '{name}' (available: {})", names()),
        }
    }
}
