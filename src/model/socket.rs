//! What the kernel says about a data socket and the threads that used it: the options it
//! applied, its TCP state, the fast paths asked for, and the CPU time spent.

use serde::{Deserialize, Serialize};

/// The part of the kernel's `struct tcp_info` that a benchmark user asks for.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(default)]
pub struct TcpInfo {
    /// Smoothed round-trip time, microseconds (kernel's estimate). The three TCP_INFO times
    /// stay in the kernel's microseconds: it keeps them in whole microseconds, and
    /// nanoseconds would claim a resolution they do not have.
    pub rtt_us: u32,
    /// Round-trip time variance, microseconds (the kernel's unit, see `rtt_us`).
    pub rttvar_us: u32,
    /// Congestion window, in segments.
    pub snd_cwnd: u32,
    /// Sender maximum segment size, bytes.
    pub snd_mss: u32,
    /// Retransmitted segments over the connection's lifetime.
    pub total_retrans: u32,
    /// Segments sent but not yet acknowledged.
    pub unacked: u32,
    /// Unacknowledged segments times the MSS: an upper bound on bytes in flight.
    pub unacked_bytes: u64,
    /// The kernel's delivery-rate estimate, bits per second (decimal).
    pub delivery_rate_bits_per_s: u64,
    /// Path MTU as the kernel sees it, bytes.
    pub pmtu: u32,
    /// Bytes written by the application but not yet sent.
    pub notsent_bytes: u32,
    /// Bytes acknowledged by the peer over the connection's lifetime.
    pub bytes_acked: u64,
    /// Bytes received over the connection's lifetime.
    pub bytes_received: u64,
    /// The receive window the peer last advertised, bytes (0 on kernels before 5.4).
    pub snd_wnd: u32,
    /// Smallest RTT the kernel has seen, microseconds (the kernel's unit, see `rtt_us`).
    pub min_rtt_us: u32,
    /// The rate the kernel paces this connection at, bits per second (decimal); 0 where it
    /// sets none. BBR paces by itself (an hrtimer, without an fq qdisc); other algorithms'
    /// rate is applied only by fq.
    pub pacing_rate_bits_per_s: u64,
    /// Time the connection had data to send or unacknowledged, microseconds, over its
    /// lifetime (the kernel's "busy" chrono). The kernel counts these three in jiffies:
    /// whole milliseconds at HZ=1000, coarser below.
    pub busy_time_us: u64,
    /// Of that, time the receiver's window held the sender back, microseconds.
    pub rwnd_limited_us: u64,
    /// Of that, time the send buffer held the sender back: it was full, so the application's
    /// writes waited (a buffer too small for the path), microseconds.
    pub sndbuf_limited_us: u64,
}

/// A TCP sender's own count of what it sent on a data connection (TCP_INFO), read after it
/// shut its side down, once the peer had acknowledged everything (or nothing more was
/// acknowledged for a second): the count a segment trace is checked against.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(default)]
pub struct SentSegments {
    /// `tcpi_data_segs_out`: segments with payload, counted in MSS-sized segments (a GSO/TSO
    /// super-segment counts as many as it will be cut into), retransmissions included.
    pub data_segs_out: u64,
    /// `tcpi_segs_out`: every segment, pure ACKs, SYN and FIN included, counted the same way.
    pub segs_out: u64,
    /// `tcpi_total_retrans` at that moment.
    pub total_retrans: u32,
    /// `tcpi_snd_mss`: the payload of a full segment (options taken off), bytes.
    pub snd_mss: u32,
    /// Whether everything sent, the FIN included, was acknowledged when the count was read:
    /// only then is it the connection's final count.
    pub settled: bool,
}

/// What the kernel reports after the options were applied, next to what was requested.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct EffectiveOptions {
    /// Requested SO_SNDBUF in bytes (0 = autotuning).
    pub sndbuf_requested: u64,
    /// SO_SNDBUF as getsockopt reports it, bytes (Linux doubles a request for its bookkeeping).
    pub sndbuf_bytes: Option<u64>,
    pub rcvbuf_requested: u64,
    pub rcvbuf_bytes: Option<u64>,
    pub nodelay: Option<bool>,
    pub cc: Option<String>,
    pub mss_bytes: Option<u32>,
    /// Client side: wall time from starting to connect until the connection could carry
    /// data (handshakes and the test cookie included), nanoseconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub setup_ns: Option<u64>,
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
    /// After warm-up, wake at as many bytes as arrive in the stream pattern's `LOWAT_HOLD` at the
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
