//! One-way bulk transfer (nttcp, netperf TCP_STREAM, iperf). The sender and the receiver each
//! time their own side over their own clock; neither figure is ever copied into the other.
//!
//! The timed phase has one definition on both sides: it runs from the first byte or datagram
//! past the warm-up (the first `warmup` writes) to the last one, and nothing that befalls the
//! warm-up lies in it on either side.
//!
//! Byte streams: the sender makes its warm-up writes and then, where the kernel tells what the
//! peer acknowledged (TCP_INFO: TCP, MPTCP), waits until all of them are acknowledged; its
//! clock starts with its first timed write. The receiver's clock starts with the first read
//! that holds a byte past the warm-up; the bytes of that read, and those already queued when
//! it returns, arrived before its clock started and are not counted. A stall of the warm-up
//! bytes in flight (400 ms on a lab link whose 8 KiB window was smaller than one 9000-byte
//! segment) thus lies before both phases. Before, the sender's clock started when its warm-up
//! writes returned and the receiver's after the stall: the same 701 440 bytes read 11.05
//! Mbit/s at the sender and 64.96 at the receiver. Where the sender cannot see what was
//! acknowledged (QUIC, Unix sockets), its clock starts when its warm-up writes return.
//!
//! On unreliable transports (UDP, and raw Ethernet, whose messages take the same sender and
//! receiver paths) every datagram carries a sequence number and a send timestamp; the warm-up
//! datagrams are numbered `0..warmup`, and the receiver starts its clock on the first datagram
//! whose number is `warmup` or more, whenever that arrives: a warm-up datagram that comes late
//! or out of order is never timed, and its arrival never starts the clock. The receiver's
//! phase runs from that datagram's arrival to the last timed one's, both the kernel's arrival
//! stamps (SO_TIMESTAMPNS on the socket, on a raw transport's packet socket for the frame that
//! completes a message), not the reads' times (see [`arrival`]).
//!
//! A paced sender (`--rate`) paces its warm-up on the same schedule as its timed phase, which
//! begins where the warm-up's last step ends. Were the warm-up let out back to back, it would
//! queue at a bottleneck slower than the sender; the first timed datagram would then arrive
//! late, behind that queue, and the timed ones after it at the link's rate while the queue
//! drained, so the receiver's span would be short and its rate high (seen in a lab: 144.8
//! Mbit/s received from a sender paced at 140.0 over a 150 Mbit/s link; 139.99 without
//! warm-up).
//!
//! Both sides keep time while the data path is stalled (see [`STALL_CHECK`]): interval reports
//! come on their period, with 0 bytes when nothing moved, and the sender's timed phase ends at
//! its deadline even when a write cannot complete.
//!
//! The sender's rate counts the bytes handed to the transport over its timed phase; on TCP
//! some of them may still sit in its socket buffer when the phase ends. Where the kernel keeps
//! TCP_INFO, the sender also reports the bytes the peer acknowledged over the same phase
//! (`bytes_acked_timed`, `acked_bits_per_s`): on a 100 Mbit/s link a 2 s stream's sender rate
//! read 101.3 Mbit/s, the bytes left in its buffer counted as sent.

mod arrival;
#[cfg(test)]
mod clock_tests;
mod intervals;
#[cfg(test)]
mod link_tests;
mod loss;
mod receive;
mod send;

use std::sync::atomic::{AtomicBool, AtomicU64};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use super::{FastPaths, StopAt};
pub use crate::model::stream::{Interval, IntervalEvent, LossStats, StreamStats};

#[cfg(test)]
pub(crate) use intervals::first_edge_after;
pub use receive::{receiver_footprint, run_receiver};
pub use send::{run_sender, sender_footprint};

/// Header of a datagram on an unreliable transport: sequence number and send time (ns since
/// the sender's start; only differences are used, so the clocks need not agree).
pub const DATAGRAM_HEADER: usize = 16;

/// How often an idle unreliable receiver wakes up to look at the end signal.
const POLL: Duration = Duration::from_millis(50);

/// After the sender is done, an unreliable receiver stops once nothing arrived for this long
/// (datagrams still queued on a slow link keep it going).
pub const DRAIN_IDLE: Duration = Duration::from_millis(500);

/// The longest a blocked write or read of a byte-stream socket waits before the loop looks at
/// its clock again (SO_SNDTIMEO, SO_RCVTIMEO), while a deadline or interval reports need it: so
/// an interval report or the end of the timed phase comes about this late at most when the
/// data path is stalled (a full socket buffer, a delayed-ACK stall); the kernel rounds it up to
/// its clock tick (reports came up to 8 ms late on a small two-CPU virtual machine). The timeout
/// fires only when the call has waited this long, so while data moves it costs nothing; a sender
/// bound by a slow link makes at most one extra call per this period. `--io-timeout` still fails a
/// side once nothing moved for that long. Shorter intervals than this shorten it.
pub const STALL_CHECK: Duration = Duration::from_millis(5);

/// A call that gave up waiting and took or gave nothing: a blocking socket's timeout, or a
/// spinning socket's WouldBlock. Progress not made yet, not a failure.
#[inline]
pub(super) fn gave_up_waiting(e: &std::io::Error) -> bool {
    matches!(
        e.kind(),
        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
    )
}

/// The wait of [`STALL_CHECK`] for interval reports every `interval` (at least 1 ms).
pub(super) fn stall_check(interval: Option<Duration>) -> Duration {
    interval
        .map_or(STALL_CHECK, |i| i.min(STALL_CHECK))
        .max(Duration::from_millis(1))
}

/// The longest a TCP receiver's automatic SO_RCVLOWAT lets arrived bytes wait for their read
/// (see [`crate::pattern::RcvLowat::Auto`]): far below any interval report's length.
pub const LOWAT_HOLD: Duration = Duration::from_millis(1);

/// Pacing of the sender: one write (or datagram) every `interval_ns` on average, let out
/// `burst` at a time at the start of each `burst * interval_ns` step.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Pace {
    pub interval_ns: f64,
    /// Absent in documents of clients before --pace-burst: one at a time.
    #[serde(default = "one")]
    pub burst: u64,
}

fn one() -> u64 {
    1
}

/// Largest --pace-burst the client takes and a server accepts: a bound on what a peer may ask,
/// far above any useful burst (a GSO frame holds at most 64 datagrams).
pub const MAX_PACE_BURST: u32 = 65_536;

impl Pace {
    /// Nanoseconds after the start at which write `k` (0-based) may leave: the start of its
    /// burst's step.
    #[inline]
    pub fn due_ns(&self, k: u64) -> f64 {
        let b = self.burst.max(1);
        ((k / b) * b) as f64 * self.interval_ns
    }

    /// Nanoseconds after the start at which the step holding write `k - 1` ends: a sender
    /// that made `k` writes on schedule owns its time up to there.
    #[inline]
    pub fn end_ns(&self, k: u64) -> f64 {
        let b = self.burst.max(1);
        (k.div_ceil(b) * b) as f64 * self.interval_ns
    }

    /// How many writes have been let out `elapsed_ns` after the start: every write of each
    /// step begun.
    #[inline]
    pub fn released(&self, elapsed_ns: f64) -> u64 {
        let b = self.burst.max(1);
        let step = self.interval_ns * b as f64;
        if step <= 0.0 {
            return u64::MAX;
        }
        ((elapsed_ns / step) as u64 + 1).saturating_mul(b)
    }
}

#[derive(Debug, Clone)]
pub struct SendPlan<'a> {
    pub write_size: usize,
    pub stop: StopAt,
    pub warmup: u64,
    pub pace: Option<Pace>,
    pub interval: Option<Duration>,
    pub fast: FastPaths,
    /// Set by the control thread when the test is torn down (its peer left, a server's limit
    /// was reached): the sender stops at its next write or within [`ABORT_CHECK`] of a paced
    /// wait, whatever its stop condition says.
    pub abort: Option<&'a AtomicBool>,
    /// One of several parallel streams: its interval edges lie on the host's grid, shared
    /// with its siblings, so that their sum is taken without cutting an interval.
    pub align_intervals: bool,
}

/// The longest a paced sender sleeps before it looks at its abort flag again.
pub const ABORT_CHECK: Duration = Duration::from_millis(50);

/// The error of a sender or receiver stopped by its control thread.
pub(crate) fn stopped() -> std::io::Error {
    std::io::Error::new(
        std::io::ErrorKind::Interrupted,
        "stopped: the test was ended on the control connection",
    )
}

/// Whether the control thread has torn the test down.
#[inline]
pub(crate) fn aborted(flag: Option<&AtomicBool>) -> bool {
    flag.is_some_and(|f| f.load(std::sync::atomic::Ordering::Relaxed))
}

#[derive(Debug, Clone)]
pub struct RecvPlan {
    pub read_size: usize,
    /// Bytes (reliable) or datagrams (unreliable) of warm-up to skip.
    pub warmup_bytes: u64,
    pub warmup_datagrams: u64,
    pub interval: Option<Duration>,
    /// The sender's timed duration, when it has one: the receiver reserves its interval
    /// reports from it before its clock starts.
    pub expected: Option<Duration>,
    pub fast: FastPaths,
    /// A socket buffer is fixed on either end (see `PointSpec::buffers_fixed`): the automatic
    /// wake-up threshold stays off.
    pub buffers_fixed: bool,
    /// One of several parallel streams (see [`SendPlan::align_intervals`]).
    pub align_intervals: bool,
}

/// Told to a receiver by its control thread: the sender finished, having sent `sent` timed
/// datagrams; or the test is being torn down (`abort`).
#[derive(Debug, Default)]
pub struct EndSignal {
    pub done: AtomicBool,
    pub sent_datagrams: AtomicU64,
    pub abort: AtomicBool,
    /// Bytes the receiver has read so far, warm-up included (one relaxed store per read),
    /// for a server that holds its clients to a bit rate; a responder keeps its bytes both
    /// ways here.
    pub received: AtomicU64,
}

/// Applies `--busy-poll` (SO_BUSY_POLL) to the stream's socket, or records why it could not.
fn busy_poll(ch: &super::DataChannel, us: Option<u32>, stats: &mut StreamStats) {
    let Some(us) = us else { return };
    let result = match ch.connection().socket_fd() {
        Some(fd) => crate::sys::fastpath::set_busy_poll(fd, us).map_err(|e| e.to_string()),
        None => Err("no socket descriptor".into()),
    };
    if let Err(e) = result {
        stats.fallbacks.push(format!("SO_BUSY_POLL: {e}"));
    }
}

/// `at` on CLOCK_MONOTONIC (the clock `Instant` reads on Linux), in ns: a stamp that other
/// threads and processes of the host can compare with theirs.
///
/// Both are the one clock, so their offset is read once per process (the closer of two
/// reads of `Instant` around the clock's) and every thread maps by it: parallel streams put
/// their interval grid on these values, and two reads per call would let a preemption
/// between them move one stream's grid by the time it was off the CPU.
pub(crate) fn monotonic_ns(at: Instant) -> Option<u64> {
    static ANCHOR: std::sync::OnceLock<Option<(Instant, u64)>> = std::sync::OnceLock::new();
    let (anchor, anchor_ns) = (*ANCHOR.get_or_init(|| {
        let read = || -> Option<(Duration, Instant, u64)> {
            let a = Instant::now();
            let ts = nix::time::clock_gettime(nix::time::ClockId::CLOCK_MONOTONIC).ok()?;
            let b = Instant::now();
            let ns = u64::try_from(ts.tv_sec()).ok()? * 1_000_000_000
                + u64::try_from(ts.tv_nsec()).ok()?;
            let width = b.duration_since(a);
            Some((width, a + width / 2, ns))
        };
        (0..4)
            .filter_map(|_| read())
            .min_by_key(|r| r.0)
            .map(|(_, at, ns)| (at, ns))
    }))?;
    if at >= anchor {
        anchor_ns.checked_add(u64::try_from(at.duration_since(anchor).as_nanos()).ok()?)
    } else {
        anchor_ns.checked_sub(u64::try_from(anchor.duration_since(at).as_nanos()).ok()?)
    }
}

/// Bits per second from bytes over nanoseconds.
fn rate(bytes: u64, ns: u64) -> f64 {
    if ns > 0 {
        bytes as f64 * 8.0 / (ns as f64 / 1e9)
    } else {
        0.0
    }
}

#[cfg(test)]
mod tests {
    use super::Pace;

    #[test]
    fn a_burst_leaves_at_the_start_of_its_step_and_owns_the_whole_step() {
        let one = Pace {
            interval_ns: 100.0,
            burst: 1,
        };
        assert_eq!((one.due_ns(3), one.end_ns(3)), (300.0, 300.0));
        assert_eq!(one.released(0.0), 1);
        assert_eq!(one.released(250.0), 3);
        let four = Pace {
            interval_ns: 100.0,
            burst: 4,
        };
        // Writes 0-3 leave at 0, 4-7 at 400.
        assert_eq!(four.due_ns(3), 0.0);
        assert_eq!(four.due_ns(4), 400.0);
        assert_eq!(four.due_ns(7), 400.0);
        // Five writes made: the second step is begun, so its time is theirs.
        assert_eq!(four.end_ns(5), 800.0);
        assert_eq!(four.end_ns(8), 800.0);
        assert_eq!(four.released(0.0), 4);
        assert_eq!(four.released(399.0), 4);
        assert_eq!(four.released(400.0), 8);
        // Same average rate: 8 writes over 800 ns either way.
        assert_eq!(four.end_ns(8), one.end_ns(8));
        // A zero interval (no pacing to speak of) lets everything out.
        let zero = Pace {
            interval_ns: 0.0,
            burst: 4,
        };
        assert_eq!(zero.released(0.0), u64::MAX);
    }

    #[test]
    fn a_pace_from_a_client_before_bursts_is_one_at_a_time() {
        let p: Pace = serde_json::from_str(r#"{"interval_ns": 50.0}"#).unwrap();
        assert_eq!(p.burst, 1);
    }
}
