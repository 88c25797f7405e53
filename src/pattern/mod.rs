//! Patterns: what traffic a test makes and how it is timed. Each pattern is written once
//! against [`DataChannel`] and the transport traits; none names a concrete transport.
//!
//! - `pingpong` and `rr` share the request/response engine in [`exchange`];
//! - `stream` is one-way bulk transfer in [`stream`];
//! - `crr` opens a connection per transaction, in [`crr`].

pub mod channel;
pub mod crr;
pub mod exchange;
pub mod stream;
pub mod think;

use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

pub use channel::DataChannel;

/// The largest datagram a receiver reads: reading more than a datagram holds gains nothing,
/// so a datagram receiver's buffer is this size whatever is asked below it.
pub const DATAGRAM_READ: u64 = 65_536;

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

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    Client,
    Server,
}

/// Number of data connections a point opens before it starts (crr opens its own).
pub fn connection_count(pattern: PatternKind, direction: Direction, streams: u32) -> u32 {
    match (pattern, direction) {
        (PatternKind::Crr, _) => 0,
        (PatternKind::Stream, Direction::Bidir) => 2 * streams,
        _ => streams,
    }
}

/// The role of `side` on data connection `index`. In a bidirectional stream the first
/// `streams` connections carry client-to-server data and the rest server-to-client.
pub fn role(
    side: Side,
    pattern: PatternKind,
    direction: Direction,
    streams: u32,
    index: u32,
) -> Role {
    let client_sends = match (pattern, direction) {
        (PatternKind::Stream, Direction::Forward) => true,
        (PatternKind::Stream, Direction::Reverse) => false,
        (PatternKind::Stream, Direction::Bidir) => index < streams,
        _ => {
            return match side {
                Side::Client => Role::Requester,
                Side::Server => Role::Responder,
            }
        }
    };
    match (side, client_sends) {
        (Side::Client, true) | (Side::Server, false) => Role::Sender,
        _ => Role::Receiver,
    }
}

/// Faster ways through the kernel, each asked for separately; what ran is reported per stream.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct FastPaths {
    /// TCP senders: MSG_ZEROCOPY with completion handling.
    pub zerocopy: bool,
    /// Byte-stream senders: sendfile from a memory file.
    pub sendfile: bool,
    /// Receivers: MSG_TRUNC, so the kernel drops TCP data without copying it (datagrams:
    /// only the sequence header is copied).
    pub skip_rx_copy: bool,
    /// Datagram streams: messages per sendmmsg/recvmmsg call (1 = one system call each).
    pub batch: u32,
    /// UDP senders: UDP_SEGMENT (GSO), one send for many datagrams.
    pub gso: bool,
    /// UDP receivers: UDP_GRO, one receive for many datagrams.
    pub gro: bool,
    /// SO_BUSY_POLL on data sockets, microseconds: a setting in the kernel's own unit (the
    /// socket option takes microseconds), not a measured figure, so it stays in them.
    pub busy_poll_us: Option<u32>,
    /// TCP stream receivers: how many queued bytes wake a blocking read (SO_RCVLOWAT). A
    /// document without it (an older client, a stored older run) meant the kernel's default.
    #[serde(default = "RcvLowat::off")]
    pub rcvlowat: RcvLowat,
}

/// When the kernel wakes a blocking TCP stream receiver. By default it wakes it for every
/// segment that arrives; on a fast path (loopback's 64 KiB segments, a NIC's GRO batches) each
/// wake-up is an inter-processor interrupt that the sending side's CPU pays for, and that
/// decides the throughput as much as the copies do.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum RcvLowat {
    /// After warm-up, wake at as many bytes as arrive in [`stream::LOWAT_HOLD`] at the
    /// warm-up's rate, at most one read's worth: never more than that long between arrival
    /// and read, so interval reports keep their resolution. No threshold without warm-up, nor
    /// when a socket buffer is fixed on either end: a small fixed buffer is a study of TCP's
    /// own dynamics (window over RTT, the delayed-ACK stall), which a reader woken less often
    /// changes (with 16 KiB send buffers, 23 Mbit/s became 6-10 Gbit/s on loopback), and a
    /// fixed receive buffer would lose the waiting bytes from the window being measured.
    #[default]
    Auto,
    /// The kernel's default: wake on every arrival.
    Off,
    /// Wake at this many bytes (the kernel caps it at half the largest receive buffer).
    Bytes(u64),
}

impl RcvLowat {
    fn off() -> RcvLowat {
        RcvLowat::Off
    }
}

/// When a timed phase ends: whichever limit is reached first.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct StopAt {
    pub duration: Option<Duration>,
    pub bytes: Option<u64>,
    pub iterations: Option<u64>,
}

impl StopAt {
    pub fn deadline(&self, start: Instant) -> Option<Instant> {
        self.duration.map(|d| start + d)
    }

    /// Transactions allowed by the iteration and byte limits, when each moves `bytes_each`.
    pub fn transaction_limit(&self, bytes_each: u64) -> u64 {
        let by_bytes = self
            .bytes
            .map(|b| b.div_ceil(bytes_each.max(1)))
            .unwrap_or(u64::MAX);
        self.iterations.unwrap_or(u64::MAX).min(by_bytes)
    }
}

/// CPU time of the threads that moved the data (user and system), nanoseconds: the kernel
/// counts thread CPU time in whole nanoseconds, so integers keep it exactly.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct CpuTime {
    pub user_ns: u64,
    pub system_ns: u64,
}

impl CpuTime {
    pub fn total_ns(&self) -> u64 {
        self.user_ns.saturating_add(self.system_ns)
    }
    /// User plus system, seconds: for tables and service demand.
    pub fn total_s(&self) -> f64 {
        self.total_ns() as f64 / 1e9
    }
    pub fn add(&mut self, other: CpuTime) {
        self.user_ns = self.user_ns.saturating_add(other.user_ns);
        self.system_ns = self.system_ns.saturating_add(other.system_ns);
    }
}

/// Measures the calling thread's CPU time between `start` and `stop`.
pub struct CpuMeter {
    user: Duration,
    system: Duration,
}

impl CpuMeter {
    pub fn start() -> CpuMeter {
        let (user, system) = crate::sys::thread_cpu_time();
        CpuMeter { user, system }
    }
    pub fn stop(&self) -> CpuTime {
        let (u, s) = crate::sys::thread_cpu_time();
        CpuTime {
            user_ns: duration_ns(u.saturating_sub(self.user)),
            system_ns: duration_ns(s.saturating_sub(self.system)),
        }
    }
}

/// Sequence number tag carried in the first 8 bytes of messages on unreliable transports.
pub const TAG_LEN: usize = 8;

#[inline]
pub fn write_tag(buf: &mut [u8], seq: u64) {
    if buf.len() >= TAG_LEN {
        buf[..TAG_LEN].copy_from_slice(&seq.to_le_bytes());
    }
}

#[inline]
pub fn read_tag(buf: &[u8]) -> Option<u64> {
    buf.get(..TAG_LEN)
        .map(|b| u64::from_le_bytes(b.try_into().unwrap_or([0; 8])))
}

/// Nanoseconds between two instants, saturating, as recorded in histograms and as the run
/// document holds measured durations (an `Instant` difference is integral nanoseconds).
#[inline]
pub fn nanos(from: Instant, to: Instant) -> u64 {
    duration_ns(to.saturating_duration_since(from))
}

/// A duration in whole nanoseconds, saturating (see [`crate::units::whole_ns`]).
pub use crate::units::whole_ns as duration_ns;

/// Fills a payload with a fixed non-zero pattern, so that nothing compresses it to nothing.
pub fn payload(len: usize) -> Vec<u8> {
    (0..len).map(|i| (i % 251) as u8 ^ 0x5a).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_document_without_the_wake_up_threshold_meant_the_kernel_s_default() {
        let old = r#"{"zerocopy":false,"sendfile":false,"skip_rx_copy":false,"batch":1,
                      "gso":false,"gro":false,"busy_poll_us":null}"#;
        let fast: FastPaths = serde_json::from_str(old).unwrap();
        assert_eq!(fast.rcvlowat, RcvLowat::Off);
        let new = serde_json::to_string(&FastPaths {
            rcvlowat: RcvLowat::Bytes(65_536),
            ..fast
        })
        .unwrap();
        let back: FastPaths = serde_json::from_str(&new).unwrap();
        assert_eq!(back.rcvlowat, RcvLowat::Bytes(65_536));
    }
}
