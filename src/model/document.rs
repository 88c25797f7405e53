//! The result document: what `--json` prints and what every other output is rendered from.
//! Field names carry their units, one system throughout: times in nanoseconds (`_ns`; integers
//! where the figure is a measured duration, which an `Instant` difference gives exactly, and
//! floats where it is a statistic such as a mean), rates in bits per second (decimal,
//! `_bits_per_s`), sizes in bytes, counts as counts (`transactions_per_s` is a count per
//! second). The exceptions, each with its reason at the field: netperf's service demand
//! (`*_us_per_kib`, `*_us_per_transaction`), the kernel's TCP_INFO times (`*_rtt_us`) and the
//! SO_BUSY_POLL setting (`busy_poll_us`). No NaN or infinity ever appears: unknown is null.
//! Documents of earlier schema versions are brought to this one by [`super::upgrade`].

use serde::{Deserialize, Serialize};

use super::host::Environment;
use super::socket::{CpuTime, EffectiveOptions};
use super::stream::{LinkCounters, LossStats, StreamStats};
use super::{PointKey, Swept};
use crate::stats::validity::{self, Timed};
use crate::stats::{LatencySummary, MeanCi, SweepMetrics, Validity};

pub const SCHEMA: &str = "wirebench.run";
pub const SCHEMA_VERSION: u32 = 2;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct RunDocument {
    pub schema: String,
    pub schema_version: u32,
    pub wirebench_version: String,
    pub started_at: String,
    pub finished_at: Option<String>,
    pub command: Vec<String>,
    pub pattern: super::vocab::PatternKind,
    pub transport: super::vocab::TransportKind,
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
    pub lab: Option<super::lab::LabState>,
    /// False when the run stopped early; `points` holds what was measured before that.
    pub complete: bool,
    pub error: Option<String>,
    /// How many points the run set out to measure (its sweep's size), so that an incomplete
    /// run can say how much of it is missing ("3 of 7 planned points"). Absent from
    /// documents written before wirebench recorded it, and from meshes (whose pairs are
    /// counted in `mesh`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub planned_points: Option<u32>,
    /// Points that stand out from both neighbours along a swept axis (a peak or a dip of the
    /// headline by more than [`ANOMALY_THRESHOLD`]): worth a second look, or a re-run with
    /// more repetitions. Absent from documents of runs without any.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub anomalies: Vec<Anomaly>,
    /// The user's name for the run (`--label`), kept with it in the results database. Absent
    /// from documents of runs without one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label: Option<String>,
    /// A mesh run (`wirebench mesh`): every ordered pair of ranks with its points, and the
    /// latency and bandwidth matrices. `points` is then empty. Absent from other runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mesh: Option<super::mesh::MeshResult>,
}

impl RunDocument {
    /// "3 of 7 planned points measured": what an incomplete run holds, with the planned
    /// total when the document records it.
    pub fn points_of_planned(&self) -> String {
        points_of_planned(self.points.len() as u64, self.planned_points.map(u64::from))
    }

    /// Fills in the verdicts on its figures that a document written before wirebench judged
    /// them lacks, from the counts every document stored (timed bytes, calls and seconds of
    /// each stream side, samples of each latency point, the sweep's sizes). Verdicts already
    /// there are kept: they are what the run printed. Only a repeated point's earlier runs
    /// cannot be judged (their figures were not kept): its headline stays unjudged (null)
    /// unless the last run's figures are invalid.
    pub fn fill_validity(&mut self) {
        for p in &mut self.points {
            if let Some(l) = &mut p.latency {
                if !l.validity.is_judged() {
                    l.validity = validity::latency(l.rtt.samples);
                }
            }
            if let Some(StreamResult { streams, totals }) = &mut p.stream {
                for pair in streams.iter_mut() {
                    if !pair.sender.validity.is_judged() || !pair.receiver.validity.is_judged() {
                        pair.judge(self.transport);
                    }
                }
                for t in totals.iter_mut() {
                    if t.sender_valid.is_none() || t.receiver_valid.is_none() {
                        let mine: Vec<&StreamPair> = streams
                            .iter()
                            .filter(|p| p.direction == t.direction)
                            .collect();
                        t.judge_from(&mine);
                    }
                }
            }
            if !p.headline.validity.is_judged() {
                let last = p.figures_validity();
                if p.runs <= 1 {
                    p.headline.validity = last;
                } else if last.is_invalid() {
                    p.headline.validity = Validity::invalid(format!(
                        "run {} of {}: {}",
                        p.runs,
                        p.runs,
                        last.reason()
                    ));
                }
            }
        }
        for g in &mut self.sweep_metrics {
            let largest = self
                .points
                .iter()
                .filter(|p| p.latency.is_some() && g.holds(&p.key))
                .map(|p| p.key.size)
                .max();
            g.metrics.fill_validity(largest);
        }
    }
}

/// serde: a zero count is left out of the document.
fn is_zero_u32(v: &u32) -> bool {
    *v == 0
}

/// "3 of 7 planned points measured", or for a result that does not record its planned total
/// (written before wirebench recorded it) "3 points measured (the planned total is not
/// recorded)".
pub fn points_of_planned(measured: u64, planned: Option<u64>) -> String {
    let noun = |n: u64| if n == 1 { "point" } else { "points" };
    match planned {
        Some(p) => format!("{measured} of {p} planned {} measured", noun(p)),
        None => format!(
            "{measured} {} measured (the planned total is not recorded)",
            noun(measured)
        ),
    }
}

impl PointResult {
    /// The verdict on the figures the point's headline comes from, in its last run: the
    /// latency point (pingpong, rr, crr) or every receiver's rate (stream).
    pub fn figures_validity(&self) -> Validity {
        match (&self.latency, &self.stream) {
            (Some(l), _) => l.validity.clone(),
            (None, Some(s)) => s.receivers_validity(),
            (None, None) => Validity::default(),
        }
    }
}

impl SweepGroup {
    /// Whether a point with `key` belongs to this group (same buffers and algorithm, any size).
    pub fn holds(&self, key: &PointKey) -> bool {
        (
            key.sndbuf,
            key.rcvbuf,
            key.server_sndbuf,
            key.server_rcvbuf,
            key.cc,
        ) == (
            self.sndbuf,
            self.rcvbuf,
            self.server_sndbuf,
            self.server_rcvbuf,
            self.cc,
        )
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
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

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Settings {
    pub streams: u32,
    pub direction: super::vocab::Direction,
    pub burst: u32,
    pub warmup: u64,
    /// The timed phase's length asked for (-d), nanoseconds.
    pub duration_ns: Option<u64>,
    pub bytes: Option<u64>,
    pub iterations: Option<u64>,
    pub rate: Option<crate::units::Rate>,
    /// Writes or datagrams per pacing step (--pace-burst); 1 in runs saved before it existed.
    #[serde(default = "one")]
    pub pace_burst: u32,
    /// Interval reports asked for (-i), nanoseconds apart.
    pub interval_ns: Option<u64>,
    /// pingpong, rr: each message written in calls of at most this many bytes, on both ends
    /// (--write-size). Absent: one call per message.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub write_size: Option<u64>,
    /// pingpong, rr: the wait asked for before each timed transaction (--think), nanoseconds.
    /// Absent: none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub think_ns: Option<u64>,
    /// pingpong, rr over a byte stream whose sizes include 0: every message of the run went
    /// with its length in this many bytes before it, so that a 0-byte message is a real
    /// exchange and all points are framed alike. Sizes, byte counts and rates count the
    /// messages' own bytes, without the prefix. Absent (0): messages were not framed.
    #[serde(default, skip_serializing_if = "is_zero_u32")]
    pub length_prefix_bytes: u32,
    /// pingpong, rr: when requests leave: "closed" (each once the reply to the last one came),
    /// or on a schedule, "fixed" or "poisson" (`--arrivals`; see `open_loop`). Absent from
    /// other patterns and from documents written before it (those exchanges were closed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arrivals: Option<super::vocab::Arrivals>,
    /// rr with open-loop arrivals: the schedule's seed and in-flight bound. Absent otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub open_loop: Option<OpenLoopSettings>,
    /// TCP_NODELAY on the data connections: asked for (--nodelay), or chosen by wirebench for a
    /// bulk TCP stream (`nodelay_auto`).
    pub nodelay: bool,
    /// wirebench turned Nagle's algorithm off by itself: a TCP stream whose writes are all
    /// 64 KiB or more, with the socket buffers left to the kernel, sent with an algorithm
    /// that has TCP pace itself (BBR) (--nagle keeps it on).
    /// Absent: it did not (documents of before it could are read as absent).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub nodelay_auto: bool,
    /// The congestion control of every point (--cc NAME); null without one and when --cc
    /// names several (a sweep: each point's `key.cc`, and `swept.cc`).
    pub cc: Option<String>,
    pub mss: Option<u32>,
    pub spin: bool,
    pub client_cpus: Vec<usize>,
    pub server_cpus: Vec<usize>,
    pub confidence: f64,
    pub repeat: u32,
    pub until_ci: Option<f64>,
    pub max_repeat: u32,
    /// Longest wait for any one read or write, nanoseconds.
    pub io_timeout_ns: u64,
    /// How long an unreliable transport's response is awaited before it counts as lost,
    /// nanoseconds.
    pub loss_timeout_ns: u64,
    /// Fast paths asked for; what actually ran is in each stream's `io_path` and `fallbacks`.
    #[serde(default)]
    pub fast: super::socket::FastPaths,
    /// grpc: how the messages carried their bytes (--encoding). Absent for other transports.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub encoding: Option<super::vocab::Encoding>,
    /// grpc: whether HTTP/2 ran over TLS 1.3 (--tls). Absent for other transports (quic
    /// always encrypts).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls: Option<bool>,
    /// pingpong, rr: each round trip split into stages by the kernels' stamps
    /// (--path-timing; each point's `path_timing`). Absent: not asked for.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub path_timing: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
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
    /// The kernels' network counters that changed over the point (last run), on both ends,
    /// and the lab link's drops. Absent from documents written before they were read, and
    /// where neither end read them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub counters: Option<PointCounters>,
    /// What share of each host's CPU time went where over the point (last run): the whole
    /// host, softirq and system apart, next to `cpu`'s data threads alone.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host_cpu: Option<HostCpu>,
    /// Where each direction's lost messages (or TCP's dropped segments) were lost, from
    /// `counters`. Absent without counters.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub loss_attribution: Vec<super::host::LossAttribution>,
    /// With --trace: the last run's segment-flow trace, its cost and its pcap file. Absent
    /// without --trace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trace: Option<super::trace::TraceSummary>,
    /// With --load: the background load the last run achieved beside its figures. Absent
    /// without --load.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub load: Option<super::load::LoadResult>,
    /// pingpong, rr with --load: round-trip percentiles and RPM idle against loaded (last
    /// run). Absent without --load.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub under_load: Option<super::load::UnderLoad>,
    /// stream with --compete: each flow's share and Jain's fairness index (last run). Absent
    /// without --compete.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fairness: Option<super::fairness::FairnessResult>,
    /// grpc: encode and decode times per message on both ends (last run). Absent for other
    /// transports.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rpc: Option<super::rpc::RpcResult>,
    /// With --path-timing (pingpong, rr): where the round trip's time went, stage by stage,
    /// from the kernels' time stamps (last run). Absent without --path-timing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path_timing: Option<super::path::PathTiming>,
}

/// The network counters of a point, each end's read on its own host around its side of the
/// point.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct PointCounters {
    pub client: Option<super::host::HostCounters>,
    /// Null when the server did not send its own (an older server), or when it runs on the
    /// client's host (`same_host`), whose counters are the client's.
    pub server: Option<super::host::HostCounters>,
    /// Client and server are in one network namespace (loopback): `client` holds both ends'
    /// counters, once.
    pub same_host: bool,
    /// The lab link's drops over the point, when the run crossed a lab.
    pub lab: Option<super::lab::LabCounters>,
}

/// Shares of each host's CPU time over a point.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct HostCpu {
    pub client: Option<super::host::CpuShare>,
    /// Null from an older server, or on one host (`same_host`: `client` is both ends').
    pub server: Option<super::host::CpuShare>,
    pub same_host: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Headline {
    pub name: String,
    pub unit: String,
    pub values: Vec<f64>,
    /// Mean and confidence interval over the runs (half-width null with one run).
    pub over_runs: Option<MeanCi>,
    /// With --until-ci: whether the interval reached the target before --max-repeat; never
    /// true when a run's value is not valid.
    pub target_met: Option<bool>,
    /// Whether every run's value is a measurement (`valid`), or which runs' are not and why
    /// (`invalid_reason`); `over_runs` then stands on figures that are not results.
    #[serde(flatten)]
    pub validity: Validity,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
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
    /// The shortest connection's timed phase in the last run, nanoseconds: with
    /// `transactions`, the basis of `transactions_per_s`. Null in results written before this
    /// field existed.
    #[serde(default)]
    pub elapsed_ns: Option<u64>,
    /// With `--think`: the waits between transactions and the time without them. The other
    /// figures keep the raw time (`elapsed_ns` and `transactions_per_s` include the waits; no
    /// RTT does). Absent from runs without think time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub think: Option<ThinkResult>,
    /// With open-loop arrivals (`--arrivals`, rr): offered against achieved rate and the
    /// counts of the schedule. `rtt` then holds each request's latency from its *scheduled*
    /// send (queueing included), `transactions` the replies, `transactions_per_s` the achieved
    /// rate. Absent from closed-loop points.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub open_loop: Option<OpenLoopResult>,
    /// Each percentile of `rtt` that wirebench prints (p50, p90, p99, p99.9, p99.99) with
    /// the samples it needs (10 / (1 - p), so that 10 observations lie beyond it), how many
    /// lie beyond it, and whether it is a measurement: a percentile below its floor is marked,
    /// not the point (its mean stands on its own floor). Absent from documents written before.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub percentiles: Vec<PercentileNote>,
    /// Whether the point's figures stand on enough samples and agree with the physics the
    /// run knows (`valid`), or why not.
    #[serde(flatten)]
    pub validity: Validity,
}

/// One printed percentile of a latency point and its sample floor.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct PercentileNote {
    /// "p50", "p90", "p99", "p99.9", "p99.99".
    pub name: String,
    /// The fewest samples it stands on: 10 / (1 - p).
    pub samples_needed: u64,
    /// Observations beyond it (above it), of the point's samples.
    pub beyond: u64,
    #[serde(flatten)]
    pub validity: Validity,
}

impl LatencyResult {
    /// The verdict on the percentile `name` ("p99"); valid when not judged.
    pub fn percentile_validity(&self, name: &str) -> Validity {
        self.percentiles
            .iter()
            .find(|p| p.name == name)
            .map_or_else(Validity::default, |p| p.validity.clone())
    }

    /// The percentiles below their sample floor, by name, with the samples each needs: "p99.9
    /// (needs 10000) p99.99 (needs 100000)"; empty when every one stands (no comma, for CSV
    /// readers that split on it).
    pub fn invalid_percentiles(&self) -> String {
        self.percentiles
            .iter()
            .filter(|p| p.validity.is_invalid())
            .map(|p| format!("{} (needs {})", p.name, p.samples_needed))
            .collect::<Vec<_>>()
            .join(" ")
    }
}

/// Think time of an exchange point (`--think`), last run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ThinkResult {
    /// The wait asked for before each timed transaction, nanoseconds.
    pub asked_ns: u64,
    /// Waits made by the connection whose timed phase is `elapsed_ns` (one per timed
    /// transaction, lost ones included).
    pub waits: u64,
    /// Their measured length, summed, nanoseconds: each wait ends when the next transaction's
    /// clock starts, so it holds the sleep's overshoot too.
    pub waited_ns: u64,
    /// `elapsed_ns - waited_ns`: that connection's timed phase without thinking.
    pub corrected_elapsed_ns: u64,
    /// Timed transactions per second on each connection's time without thinking, summed over
    /// connections: the rate the exchange itself sustained.
    pub corrected_transactions_per_s: f64,
}

/// rr's open-loop schedule, the same for every point.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct OpenLoopSettings {
    /// "fixed" or "poisson".
    pub arrivals: super::vocab::Arrivals,
    /// Seed of the Poisson gaps (connection i uses seed + i); the same seed gives the same
    /// schedule.
    pub seed: u64,
    /// Most requests unanswered at once per connection (`--max-in-flight`).
    pub max_in_flight: u32,
}

/// An open-loop point (`--arrivals`), last run, summed over its connections.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct OpenLoopResult {
    /// "fixed" or "poisson".
    pub arrivals: super::vocab::Arrivals,
    /// The rate asked for, requests per second over all connections.
    pub offered_per_s: f64,
    /// The rate the schedule held: requests scheduled over the schedule's span, summed over
    /// connections (a Poisson draw differs from `offered_per_s` by chance).
    pub scheduled_per_s: f64,
    /// Replies per second: each connection's replies over its time from the schedule's start
    /// to its last reply, summed.
    pub achieved_per_s: f64,
    /// Requests the schedules held.
    pub scheduled: u64,
    /// Requests written whole.
    pub sent: u64,
    /// Replies read within the point: the samples of the latency.
    pub received: u64,
    /// Requests sent and not answered when the point ended (replies are awaited after the last
    /// scheduled send as long as the schedule lasted, at least 1 s, at most --io-timeout).
    pub outstanding: u64,
    /// Requests scheduled but never sent: the in-flight bound held them to the end.
    pub unsent: u64,
    /// Requests that came due while `max_in_flight` were unanswered and so left late (their
    /// latency still counts from the schedule).
    pub bound_waits: u64,
    /// From each request's actual send to its reply: the service part of the latency, without
    /// the wait for the in-flight bound or the socket. Null without replies.
    pub service: Option<LatencySummary>,
    /// Why the point did not keep up with its offered load, when it did not: fewer replies than
    /// requests scheduled, or an achieved rate below the scheduled one. The load exceeded what
    /// the path and server answered, and `rtt` holds the queue that built. Absent when it kept
    /// up.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub overload: Option<String>,
}

/// One bin of a latency distribution: `count` round trips took `low_ns <= t < high_ns`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct LatencyBin {
    pub low_ns: f64,
    pub high_ns: f64,
    pub count: u64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct StreamResult {
    pub streams: Vec<StreamPair>,
    pub totals: Vec<DirectionTotal>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct StreamPair {
    pub index: u32,
    /// "client_to_server" or "server_to_client".
    pub direction: String,
    pub sender: SideStats,
    pub receiver: SideStats,
}

/// One side of a stream: what it measured, and next to it (`valid`, `invalid_reason`)
/// whether its rate is a measurement. Reads and derefs as the [`StreamStats`] it holds.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SideStats {
    #[serde(flatten)]
    pub stats: StreamStats,
    #[serde(flatten)]
    pub validity: Validity,
    /// What the rate counts when that is not what crossed the path, said beside it rather
    /// than as a verdict on it: a sender above the lab link's line rate (beyond what its
    /// socket buffer holds) counts bytes handed to its socket, which its own host dropped or
    /// buffered (the physics guard). Absent otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

impl SideStats {
    /// The basis of this side's rate.
    pub fn timed(&self) -> Timed {
        Timed {
            bytes: self.stats.bytes_timed,
            messages: self.stats.messages_timed,
            seconds: self.stats.elapsed_ns as f64 / 1e9,
        }
    }
}

impl std::ops::Deref for SideStats {
    type Target = StreamStats;
    fn deref(&self) -> &StreamStats {
        &self.stats
    }
}

impl std::ops::DerefMut for SideStats {
    fn deref_mut(&mut self) -> &mut StreamStats {
        &mut self.stats
    }
}

impl StreamPair {
    /// Pairs a sender and a receiver and judges both rates: each against the floors of
    /// [`crate::stats::validity`], and each against the other side's timed phase.
    pub fn judged(
        index: u32,
        direction: String,
        sender: StreamStats,
        receiver: StreamStats,
        transport: super::vocab::TransportKind,
    ) -> StreamPair {
        let mut pair = StreamPair {
            index,
            direction,
            sender: SideStats {
                stats: sender,
                validity: Validity::default(),
                note: None,
            },
            receiver: SideStats {
                stats: receiver,
                validity: Validity::default(),
                note: None,
            },
        };
        pair.judge(transport);
        pair
    }

    /// (Re)judges both sides from their counts.
    pub fn judge(&mut self, transport: super::vocab::TransportKind) {
        let (s, r) = (self.sender.timed(), self.receiver.timed());
        self.sender.validity =
            validity::rate(s, transport.call_noun(true), Some(("receiver", r.seconds)));
        self.receiver.validity =
            validity::rate(r, transport.call_noun(false), Some(("sender", s.seconds)));
    }
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct DirectionTotal {
    pub direction: String,
    pub streams: u32,
    /// Bytes handed to the transport, some of which may still have been in the sender's
    /// socket buffer at its end, per second. One stream: its bytes over its own timed phase.
    /// Several (`-P`), their phases stamped on one clock: the bytes of all streams within one
    /// window, `sender_span`, over it (see `report::span`); without stamps (an older peer),
    /// the sum over streams of each one's bytes over its own phase.
    pub sender_bits_per_s: f64,
    /// Where every sender's kernel keeps TCP_INFO (TCP, MPTCP): the bytes the peer
    /// acknowledged, per second, taken as `sender_bits_per_s` is (over `sender_span` when it
    /// is given and the intervals carry them, else the sum over each sender's own phase).
    /// Null otherwise and in results written before this field existed.
    #[serde(default)]
    pub acked_bits_per_s: Option<f64>,
    /// Bytes read per second: one stream, over its receiver's timed phase; several, over
    /// `receiver_span` (as `sender_bits_per_s`).
    pub receiver_bits_per_s: f64,
    /// Several streams on one clock: the window `sender_bits_per_s` is over ("common": the
    /// time every sender was in its timed phase, bytes cut from the intervals pro rata;
    /// "union": earliest start to latest end, every timed byte), its bounds in ns since the
    /// earliest sender's timed start, and the bytes within it. Absent for one stream and for
    /// streams without stamps (each over its own phase, summed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sender_span: Option<crate::model::span::TotalSpan>,
    /// The same for `receiver_bits_per_s`, on the receivers' host's clock.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub receiver_span: Option<crate::model::span::TotalSpan>,
    /// Several streams with intervals (`-i`) over a common span: the receivers' sum interval
    /// by interval, every stream over the same bounds (the first stream's), each with its
    /// verdict. Empty otherwise.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub receiver_intervals: Vec<crate::model::span::SumInterval>,
    /// The basis of the two rates: timed bytes and writes/reads (datagrams) summed over the
    /// streams, and the shortest of the streams' timed phases in nanoseconds. 0 in results
    /// written before these fields existed, until they are read (then filled in from the
    /// streams).
    #[serde(default)]
    pub sender_bytes_timed: u64,
    #[serde(default)]
    pub sender_messages_timed: u64,
    #[serde(default)]
    pub sender_elapsed_ns: u64,
    #[serde(default)]
    pub receiver_bytes_timed: u64,
    #[serde(default)]
    pub receiver_messages_timed: u64,
    #[serde(default)]
    pub receiver_elapsed_ns: u64,
    /// Whether `sender_bits_per_s` is a measurement: valid only when every stream's sender
    /// rate is; otherwise the streams' reasons.
    #[serde(default)]
    pub sender_valid: Option<bool>,
    #[serde(default)]
    pub sender_invalid_reason: Option<String>,
    /// The same for `receiver_bits_per_s`.
    #[serde(default)]
    pub receiver_valid: Option<bool>,
    #[serde(default)]
    pub receiver_invalid_reason: Option<String>,
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

impl DirectionTotal {
    pub fn sender_validity(&self) -> Validity {
        Validity {
            valid: self.sender_valid,
            invalid_reason: self.sender_invalid_reason.clone(),
        }
    }

    pub fn receiver_validity(&self) -> Validity {
        Validity {
            valid: self.receiver_valid,
            invalid_reason: self.receiver_invalid_reason.clone(),
        }
    }

    /// Sets the basis and the verdicts of both sums from this direction's streams.
    pub fn judge_from(&mut self, streams: &[&StreamPair]) {
        let several = streams.len() > 1;
        let label = |p: &StreamPair| {
            if several {
                format!("stream {}", p.index)
            } else {
                String::new()
            }
        };
        let shortest =
            |f: &dyn Fn(&StreamPair) -> u64| streams.iter().map(|p| f(p)).min().unwrap_or(0);
        self.sender_bytes_timed = streams.iter().map(|p| p.sender.bytes_timed).sum();
        self.sender_messages_timed = streams.iter().map(|p| p.sender.messages_timed).sum();
        self.sender_elapsed_ns = shortest(&|p| p.sender.elapsed_ns);
        self.receiver_bytes_timed = streams.iter().map(|p| p.receiver.bytes_timed).sum();
        self.receiver_messages_timed = streams.iter().map(|p| p.receiver.messages_timed).sum();
        self.receiver_elapsed_ns = shortest(&|p| p.receiver.elapsed_ns);
        let s = validity::all(streams.iter().map(|p| (label(p), &p.sender.validity)));
        let r = validity::all(streams.iter().map(|p| (label(p), &p.receiver.validity)));
        (self.sender_valid, self.sender_invalid_reason) = (s.valid, s.invalid_reason);
        (self.receiver_valid, self.receiver_invalid_reason) = (r.valid, r.invalid_reason);
    }
}

impl StreamResult {
    /// The share of messages lost over every direction that counts them (UDP, raw): lost /
    /// sent summed over the directions; None when none counted a message sent.
    pub fn loss_share(&self) -> Option<f64> {
        let (sent, lost) = self
            .totals
            .iter()
            .filter_map(|t| t.loss.as_ref())
            .fold((0u64, 0u64), |(a, b), l| (a + l.sent, b + l.lost));
        (sent > 0).then(|| lost as f64 / sent as f64)
    }

    /// Every receiver's rate in it, all directions: what a stream point's headline sums.
    pub fn receivers_validity(&self) -> Validity {
        let several = self.streams.len() > 1;
        validity::all(self.streams.iter().map(|p| {
            (
                if several {
                    format!("stream {} receiver", p.index)
                } else {
                    "receiver".to_owned()
                },
                &p.receiver.validity,
            )
        }))
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct CpuResult {
    /// CPU time (user + system) of the client's data threads, last run.
    pub client: CpuTime,
    pub server: CpuTime,
    /// Service demand: CPU microseconds per KiB moved (sent plus received by that side). In
    /// microseconds, not nanoseconds, because this is netperf's unit of service demand, the
    /// one its readers compare it with.
    pub client_us_per_kib: Option<f64>,
    pub server_us_per_kib: Option<f64>,
    /// Exchanges: CPU microseconds per transaction (netperf's unit, as above).
    pub client_us_per_transaction: Option<f64>,
    pub server_us_per_transaction: Option<f64>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SocketReport {
    pub client: Vec<EffectiveOptions>,
    pub server: Vec<EffectiveOptions>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SweepGroup {
    /// The non-size parameters shared by this group's points.
    pub sndbuf: u64,
    pub rcvbuf: u64,
    pub server_sndbuf: u64,
    pub server_rcvbuf: u64,
    /// The algorithm of the group's points in a congestion-control sweep; absent otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<String>")]
    pub cc: Option<super::vocab::CcName>,
    pub metrics: SweepMetrics,
}

fn one() -> u32 {
    1
}

/// How far a point's headline must stand above (or below) both neighbours along an axis to
/// be flagged: 50%. The source studies' anomalies (REFERENCES.md) were factors (a window's peak,
/// Nagle's 40 ms bands, a collapse near 1 KB), while 100 ms points on a shared two-CPU VM differ by
/// 20-30% from their neighbours by chance alone (measured: a "dip" of 32% at 64 B in a smooth
/// sweep).
pub const ANOMALY_THRESHOLD: f64 = 0.5;

/// A point whose headline is a peak or a dip along one swept axis (see [`RunDocument::anomalies`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Anomaly {
    /// The swept axis: "size", "sndbuf", "rcvbuf", "server_sndbuf" or "server_rcvbuf".
    pub axis: String,
    /// Index of the point in `points`.
    pub point: usize,
    /// Its headline (mean over runs), in the headline's unit.
    pub value: f64,
    /// (value - previous) / previous, the previous being the nearest valid point before its
    /// band (a band is up to three neighbouring points flagged together) along the axis with
    /// every other parameter the same, and not flagged itself; null for the first point of
    /// the axis (judged on its one side, see `stats::anomaly`).
    pub vs_previous: Option<f64>,
    /// (value - next) / next, the next being the nearest valid point after its band; null for
    /// the last point of the axis.
    pub vs_next: Option<f64>,
}

/// The verdict on every figure of a point's row: its latency point, both sums of each stream
/// direction, and the headline over runs.
pub fn point_validity(p: &PointResult) -> Validity {
    let mut parts: Vec<(String, Validity)> = Vec::new();
    if let Some(l) = &p.latency {
        parts.push((String::new(), l.validity.clone()));
    }
    if let Some(s) = &p.stream {
        let dir = |t: &DirectionTotal| {
            if s.totals.len() > 1 {
                format!("{} ", t.direction)
            } else {
                String::new()
            }
        };
        for t in &s.totals {
            parts.push((format!("{}sender", dir(t)), t.sender_validity()));
            parts.push((format!("{}receiver", dir(t)), t.receiver_validity()));
        }
    }
    if p.runs > 1 {
        parts.push(("over runs".into(), p.headline.validity.clone()));
    }
    crate::stats::validity::all(parts.iter().map(|(l, v)| (l.clone(), v)))
}

/// The document's JSON text, as `--json`, `--output`, the results database and `export` all
/// write it: one encoder, so what is stored is what was printed.
pub fn to_json(report: &RunDocument) -> serde_json::Result<String> {
    serde_json::to_string_pretty(report)
}
