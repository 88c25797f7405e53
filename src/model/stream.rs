//! What one side of a data connection counted: bytes, messages and time of its timed phase,
//! its interval reports, datagram loss and a raw link's frame counts.

use serde::{Deserialize, Serialize};

use super::socket::{CpuTime, SentSegments, TcpInfo};
use super::vocab::Role;

/// One interval report.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Interval {
    /// Nanoseconds since this side's timed phase began.
    pub start_ns: u64,
    pub end_ns: u64,
    pub bytes: u64,
    pub messages: u64,
    /// Rate over this interval, bits per second (decimal).
    pub bits_per_s: f64,
    /// The kernel's TCP state at the end of the interval (TCP only).
    pub tcp_info: Option<TcpInfo>,
    /// Segments retransmitted during the interval (TCP only).
    pub retransmits: Option<u32>,
    /// Sender, where the kernel keeps TCP_INFO: bytes the peer acknowledged during the interval
    /// (the change of `tcpi_bytes_acked`). Absent in documents written before it existed.
    #[serde(default)]
    pub acked_bytes: Option<u64>,
}

impl Interval {
    /// The rate the peer acknowledged at over this interval (sender, TCP_INFO), bits/s.
    pub fn acked_bits_per_s(&self) -> Option<f64> {
        self.acked_bytes
            .map(|b| rate(b, self.end_ns.saturating_sub(self.start_ns)))
    }
}

/// Receiver-side accounting of datagrams.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct LossStats {
    /// Timed datagrams the sender sent successfully.
    pub sent: u64,
    /// Distinct timed datagrams received.
    pub received: u64,
    /// sent - received.
    pub lost: u64,
    /// lost / sent.
    pub loss_ratio: f64,
    pub duplicated: u64,
    /// Datagrams that arrived after one with a higher sequence number.
    pub reordered: u64,
    /// RFC 3550 interarrival jitter, nanoseconds (a smoothed estimate, hence not integral).
    pub jitter_ns: f64,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(default)]
pub struct StreamStats {
    pub role: Option<Role>,
    /// grpc: this end's serialisation times over the stream, warm-up included. Absent for
    /// other transports.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub serialisation: Option<super::rpc::Serialisation>,
    /// All bytes moved, warm-up included.
    pub bytes_total: u64,
    /// Bytes moved inside the timed phase.
    pub bytes_timed: u64,
    /// Writes (sender) or reads (receiver) in the timed phase; datagrams for message transports.
    pub messages_timed: u64,
    /// Length of the timed phase on this side's clock, nanoseconds.
    pub elapsed_ns: u64,
    /// bytes_timed * 8 / elapsed_ns, per second; 0 when nothing was timed. A sender's bytes are those
    /// handed to the transport: some may still be in its socket buffer when its phase ends.
    pub bits_per_s: f64,
    /// Sender, where the kernel keeps TCP_INFO (TCP, MPTCP): bytes the peer acknowledged over
    /// the sender's timed phase (`tcpi_bytes_acked` at its end minus at its start). The
    /// warm-up is all acknowledged before the phase begins; timed bytes not yet acknowledged
    /// at its end do not count. None for other transports and in documents written before it
    /// existed.
    pub bytes_acked_timed: Option<u64>,
    /// bytes_acked_timed * 8 / elapsed_ns, per second: the rate the peer acknowledged at.
    pub acked_bits_per_s: Option<f64>,
    /// Duration of the first write (sender) or the wait for the first byte (receiver), ns.
    pub first_op_ns: Option<u64>,
    /// Sends the kernel refused for lack of buffer (ENOBUFS, EAGAIN): not network loss.
    pub send_failures: u64,
    /// Receiver: bytes read at the very end and left out of the timed phase, because that
    /// much may have arrived ahead of the count when the clock started (a window of posted
    /// receives, see `Connection::arrival_lead`), or because their arrival is not known apart
    /// from the last stamped datagram's (UDP GRO). 0 for other sockets.
    pub untimed_tail_bytes: u64,
    pub loss: Option<LossStats>,
    /// Receiver, on a transport that numbers its own frames (raw): the frames of the whole
    /// connection, warm-up included, read after the timed phase.
    pub frames: Option<LinkCounters>,
    pub intervals: Vec<Interval>,
    pub tcp_info: Option<TcpInfo>,
    /// TCP sender: what the kernel counted sending on the connection, read at its end (see
    /// [`SentSegments`]); what `--trace` checks its capture against. Absent for other
    /// transports and from peers that do not report it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sent_segments: Option<SentSegments>,
    pub cpu: CpuTime,
    /// How the bytes moved through the kernel, e.g. "write", "sendmmsg x16", "MSG_ZEROCOPY".
    pub io_path: String,
    /// TCP receiver: the SO_RCVLOWAT the kernel held for the timed phase (bytes queued before
    /// a blocking read is woken); None where the kernel's default of one byte applied.
    pub rcvlowat_bytes: Option<u64>,
    /// Fast paths that were asked for but could not run, and why.
    pub fallbacks: Vec<String>,
    /// MSG_ZEROCOPY: sends completed, and how many the kernel copied after all.
    pub zerocopy_completed: Option<u64>,
    pub zerocopy_copied: Option<u64>,
    /// CLOCK_MONOTONIC at the start of this side's timed phase, ns. Receivers on one host (a
    /// server's competing flows, a direction's `-P` streams) share that clock, and so do the
    /// senders of one direction: their phases and intervals are put on one time line with it.
    /// None from an older peer (and for senders, from one before it stamped them).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub phase_start_ns: Option<u64>,
}

/// The receive side's account of one connection's link-level frames, from the connection's
/// first frame on (warm-up included), for transports whose frames carry a sequence number.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(default)]
pub struct LinkCounters {
    /// Distinct frames accepted for this connection.
    pub received: u64,
    /// Gaps in the frame sequence: highest number seen + 1 - received. Frames lost after the
    /// last one that arrived leave no gap and are not counted.
    pub lost: u64,
    /// lost / (received + lost); 0 without frames.
    pub loss_ratio: f64,
    /// Frames that arrived after one with a higher sequence number.
    pub reordered: u64,
    pub duplicated: u64,
    /// Frames of multi-frame messages dropped on arrival because a frame of a later message
    /// had already come: their message had been given up. (A late one-frame message is whole
    /// and is delivered, counted as reordered.)
    pub late: u64,
    /// Messages dropped whole because reassembly could not complete them: a frame of another
    /// message came (or the counters were read) while one of theirs was still missing.
    pub messages_incomplete: u64,
}

impl LinkCounters {
    /// These counts with `loss_ratio` computed from them.
    pub fn with_loss_ratio(mut self) -> LinkCounters {
        let all = self.received + self.lost;
        self.loss_ratio = if all > 0 {
            self.lost as f64 / all as f64
        } else {
            0.0
        };
        self
    }

    /// The sum of these counts and `other`'s, with the loss ratio of the sum.
    pub fn plus(&self, other: &LinkCounters) -> LinkCounters {
        LinkCounters {
            received: self.received + other.received,
            lost: self.lost + other.lost,
            loss_ratio: 0.0,
            reordered: self.reordered + other.reordered,
            duplicated: self.duplicated + other.duplicated,
            late: self.late + other.late,
            messages_incomplete: self.messages_incomplete + other.messages_incomplete,
        }
        .with_loss_ratio()
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

/// An interval as it goes to a live display.
#[derive(Debug, Clone, Copy)]
pub struct IntervalEvent {
    pub stream: u32,
    pub role: Role,
    pub interval: Interval,
}
