//! Patterns: what traffic a test makes and how it is timed. Each pattern is written once
//! against [`DataChannel`] and the transport traits; none names a concrete transport.
//!
//! - `pingpong` and `rr` share the request/response engine in [`exchange`];
//! - `stream` is one-way bulk transfer in [`stream`];
//! - `crr` opens a connection per transaction, in [`crr`];
//! - `rr --arrivals` sends on a schedule that does not wait for replies, in [`openloop`].

pub mod channel;
pub mod crr;
pub mod exchange;
pub mod openloop;
pub mod path;
pub mod stream;
pub mod think;

use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

pub use crate::model::socket::{CpuTime, FastPaths, RcvLowat};
pub use crate::model::vocab::{Arrivals, Direction, PatternKind, Role};
pub use crate::model::OpenLoopSettings;
pub use channel::DataChannel;

/// The largest datagram a receiver reads: reading more than a datagram holds gains nothing,
/// so a datagram receiver's buffer is this size whatever is asked below it.
pub const DATAGRAM_READ: u64 = 65_536;

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
