//! The result document: what `--json` prints and what every other output is rendered from.
//! Field names carry their units; rates are bits per second (decimal), sizes bytes, times
//! nanoseconds (`_ns`) or seconds (`_s`). No NaN or infinity ever appears: unknown is null.

use serde::{Deserialize, Serialize};

use crate::env::Environment;
use crate::pattern::stream::{LossStats, StreamStats};
use crate::pattern::CpuTime;
use crate::plan::{PointKey, Swept};
use crate::stats::{LatencySummary, MeanCi, SweepMetrics};
use crate::transport::{EffectiveOptions, LinkCounters};

pub const SCHEMA: &str = "wirebench.run";
pub const SCHEMA_VERSION: u32 = 1;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunReport {
    pub schema: String,
    pub schema_version: u32,
    pub wirebench_version: String,
    pub started_at: String,
    pub finished_at: Option<String>,
    pub command: Vec<String>,
    pub pattern: String,
    pub transport: String,
    pub server: ServerInfo,
    pub client_environment: Environment,
    pub server_environment: Option<Environment>,
    pub settings: Settings,
    pub swept: Swept,
    pub points: Vec<PointResult>,
    /// Derived metrics of the message-size sweep (pingpong), one group per combination of the
    /// other swept parameters.
    pub sweep_metrics: Vec<SweepGroup>,
    /// The emulated link the run crossed (`wirebench lab run`), with its theoretical goodput.
    pub lab: Option<crate::lab::LabState>,
    /// False when the run stopped early; `points` holds what was measured before that.
    pub complete: bool,
    pub error: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ServerInfo {
    pub address: Option<String>,
    /// True when `run` started its own server on loopback.
    pub self_hosted: bool,
    /// Data connections went to the control port (`--one-port`, or chosen because a relay,
    /// proxy or NAT was seen in the path).
    #[serde(default)]
    pub one_port: bool,
    /// Set when the server saw the control connection come from another address than this
    /// side's own: a relay, proxy or NAT is in the path.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub middlebox: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Settings {
    pub streams: u32,
    pub direction: String,
    pub burst: u32,
    pub warmup: u64,
    pub duration_s: Option<f64>,
    pub bytes: Option<u64>,
    pub iterations: Option<u64>,
    pub rate: Option<String>,
    /// Writes or datagrams per pacing step (--pace-burst); 1 in runs saved before it existed.
    #[serde(default = "one")]
    pub pace_burst: u32,
    pub interval_s: Option<f64>,
    pub nodelay: bool,
    pub cc: Option<String>,
    pub mss: Option<u32>,
    pub spin: bool,
    pub client_cpus: Vec<usize>,
    pub server_cpus: Vec<usize>,
    pub confidence: f64,
    pub repeat: u32,
    pub until_ci: Option<f64>,
    pub max_repeat: u32,
    pub io_timeout_s: f64,
    pub loss_timeout_s: f64,
    /// Fast paths asked for; what actually ran is in each stream's `io_path` and `fallbacks`.
    #[serde(default)]
    pub fast: crate::pattern::FastPaths,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PointResult {
    pub index: usize,
    pub key: PointKey,
    pub request_size: u64,
    pub response_size: u64,
    pub read_size: u64,
    /// Runs of this point that were measured.
    pub runs: u32,
    /// The point's headline figure in every run: one-way latency (pingpong, ns), transactions/s
    /// (rr, crr) or receiver throughput (stream, bit/s).
    pub headline: Headline,
    pub latency: Option<LatencyResult>,
    pub stream: Option<StreamResult>,
    pub cpu: CpuResult,
    pub socket: SocketReport,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Headline {
    pub name: String,
    pub unit: String,
    pub values: Vec<f64>,
    /// Mean and confidence interval over the runs (half-width null with one run).
    pub over_runs: Option<MeanCi>,
    /// With --until-ci: whether the interval reached the target before --max-repeat.
    pub target_met: Option<bool>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LatencyResult {
    /// Round-trip (transaction) time of every timed transaction, merged over runs and
    /// connections.
    pub rtt: LatencySummary,
    /// pingpong: RTT/2, the one-way message time.
    pub one_way_mean_ns: Option<f64>,
    pub one_way_ci_ns: Option<f64>,
    /// pingpong: 2n / mean RTT; rr: (request + response) bytes per second; bits/s.
    pub throughput_bits_per_s: f64,
    pub transactions: u64,
    /// Timed transactions per second (sum over connections), computed over each connection's
    /// timed phase.
    pub transactions_per_s: f64,
    /// Unreliable transports: transactions whose response never came.
    pub lost: u64,
    pub stale: u64,
    /// Round-trip time of the very first (warm-up) transaction.
    pub first_ns: Option<u64>,
    /// crr: connection setup time alone.
    pub setup: Option<LatencySummary>,
    /// Distribution of `rtt` for histogram and CDF plots: the non-empty bins of 20 per decade,
    /// in increasing order. Empty in results written before this field existed.
    #[serde(default)]
    pub distribution: Vec<LatencyBin>,
}

/// One bin of a latency distribution: `count` round trips took `low_ns <= t < high_ns`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct LatencyBin {
    pub low_ns: f64,
    pub high_ns: f64,
    pub count: u64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StreamResult {
    pub streams: Vec<StreamPair>,
    pub totals: Vec<DirectionTotal>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StreamPair {
    pub index: u32,
    /// "client_to_server" or "server_to_client".
    pub direction: String,
    pub sender: StreamStats,
    pub receiver: StreamStats,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DirectionTotal {
    pub direction: String,
    pub streams: u32,
    /// Sum over streams of each sender's bytes / its own timed phase: bytes handed to the
    /// transport, some of which may still have been in the sender's socket buffer at its end.
    pub sender_bits_per_s: f64,
    /// Where every sender's kernel keeps TCP_INFO (TCP, MPTCP): sum over streams of the bytes
    /// the peer acknowledged over each sender's timed phase / that phase. Null otherwise and
    /// in results written before this field existed.
    #[serde(default)]
    pub acked_bits_per_s: Option<f64>,
    /// Sum over streams of each receiver's bytes / its own timed phase.
    pub receiver_bits_per_s: f64,
    pub bytes_sent: u64,
    pub bytes_received: u64,
    pub send_failures: u64,
    pub loss: Option<LossStats>,
    /// The receivers' link-level frames (raw), summed over the streams; null for transports
    /// without numbered frames and in results written before this field existed.
    #[serde(default)]
    pub frames: Option<LinkCounters>,
    /// TCP retransmissions seen by the senders' kernels.
    pub retransmits: Option<u64>,
    /// Over a lab link: the goodput its rate allows for this transport and message size.
    pub theoretical_goodput_bits_per_s: Option<f64>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CpuResult {
    /// CPU time (user + system) of the client's data threads, last run.
    pub client: CpuTime,
    pub server: CpuTime,
    /// Service demand: CPU microseconds per KiB moved (sent plus received by that side).
    pub client_us_per_kib: Option<f64>,
    pub server_us_per_kib: Option<f64>,
    /// Exchanges: CPU microseconds per transaction.
    pub client_us_per_transaction: Option<f64>,
    pub server_us_per_transaction: Option<f64>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SocketReport {
    pub client: Vec<EffectiveOptions>,
    pub server: Vec<EffectiveOptions>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SweepGroup {
    /// The non-size parameters shared by this group's points.
    pub sndbuf: u64,
    pub rcvbuf: u64,
    pub server_sndbuf: u64,
    pub server_rcvbuf: u64,
    pub metrics: SweepMetrics,
}

fn one() -> u32 {
    1
}
