//! The part of the result document that a mesh run adds (`wirebench mesh` under mpirun): the
//! ranks, the rounds they were measured in, every ordered pair's points (each the figures
//! `wirebench run` gives between those two ranks) and the matrices drawn from them.

use serde::{Deserialize, Serialize};

use super::host::Environment;
use super::PointKey;
use crate::model::{PointResult, SweepGroup};
use crate::stats::{MeanCi, Validity};

/// Every pair of a mesh run, and its matrices.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct MeshResult {
    /// The ranks of the job, in rank order.
    pub ranks: Vec<MeshRank>,
    /// The rounds in the order they ran. Within a round no rank is in two pairs; the pairs of
    /// a round were measured at the same time, the rounds one after another.
    pub rounds: Vec<Vec<MeshPairId>>,
    /// One pair at a time (`--serial`): every round holds one pair.
    pub serial: bool,
    /// Every scheduled ordered pair, in the order of `rounds`.
    pub pairs: Vec<MeshPair>,
    /// One matrix set per point of the plan (per message size, buffer size...), in plan order.
    pub matrices: Vec<MeshMatrix>,
}

/// One rank of a mesh: where its server listened and what it runs on.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct MeshRank {
    pub rank: usize,
    /// Its wirebench server's control address (HOST:PORT): the data goes to this host.
    pub address: String,
    /// The network namespace its data threads ran in (`--netns-from-rank`); null: the one
    /// the process started in.
    pub netns: Option<String>,
    pub environment: Environment,
}

/// An ordered pair: the client rank measures against the server rank's server.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    Serialize,
    Deserialize,
    schemars::JsonSchema,
)]
pub struct MeshPairId {
    pub client: usize,
    pub server: usize,
}

/// One ordered pair's measurement: what `wirebench run --to SERVER` on the client rank gives.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct MeshPair {
    pub client: usize,
    pub server: usize,
    /// Index into `rounds`.
    pub round: usize,
    pub started_at: Option<String>,
    pub finished_at: Option<String>,
    /// The points measured, as in a run's `points`.
    pub points: Vec<PointResult>,
    /// t0, r_max and n_1/2 of a ping-pong size sweep, as in a run's `sweep_metrics`.
    pub sweep_metrics: Vec<SweepGroup>,
    /// False when the pair stopped early or never started; `error` says why.
    pub complete: bool,
    pub error: Option<String>,
}

/// The matrices of one point of the plan: a cell per measured ordered pair.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct MeshMatrix {
    pub key: PointKey,
    pub request_size: u64,
    pub response_size: u64,
    /// pingpong, rr, crr.
    pub latency: Option<LatencyMatrix>,
    /// stream.
    pub bandwidth: Option<BandwidthMatrix>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct LatencyMatrix {
    /// "one_way" (pingpong: RTT/2, percentiles included) or "round_trip" (rr, crr: a
    /// transaction's time).
    pub kind: String,
    /// Level of every cell's `ci_ns` as a fraction (0.95).
    pub confidence: f64,
    pub cells: Vec<LatencyCell>,
}

/// A cell of a mesh matrix: the ordered pair of ranks it is for.
pub trait PairCell {
    /// (from, to): the rows and columns of the matrix.
    fn pair(&self) -> (usize, usize);
}

impl PairCell for LatencyCell {
    fn pair(&self) -> (usize, usize) {
        (self.from, self.to)
    }
}

impl PairCell for BandwidthCell {
    fn pair(&self) -> (usize, usize) {
        (self.from, self.to)
    }
}

/// The cell of `from` -> `to`, where that pair was measured.
pub fn cell_of<C: PairCell>(cells: &[C], from: usize, to: usize) -> Option<&C> {
    cells.iter().find(|c| c.pair() == (from, to))
}

/// The cells in the order of their pairs (by row, then column).
pub fn in_pair_order<C: PairCell>(cells: &[C]) -> Vec<&C> {
    let mut v: Vec<&C> = cells.iter().collect();
    v.sort_by_key(|c| c.pair());
    v
}

/// The latency of one ordered pair (client `from`, server `to`) at one point, nanoseconds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct LatencyCell {
    pub from: usize,
    pub to: usize,
    pub mean_ns: f64,
    /// Half-width of the mean's confidence interval; null with fewer than 2 samples.
    pub ci_ns: Option<f64>,
    pub p50_ns: f64,
    pub p99_ns: f64,
    /// Whether `p99_ns` stands on enough samples (10 / (1 - 0.99) = 1000, the physics guard's
    /// percentile floor); null in documents written before this field.
    #[serde(default)]
    pub p99_valid: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub p99_invalid_reason: Option<String>,
    /// Timed transactions behind the figures, over every run of the point.
    pub samples: u64,
    /// Runs of the point (`--repeat`, `--until-ci`).
    pub runs: u32,
    #[serde(flatten)]
    pub validity: Validity,
}

impl LatencyCell {
    pub fn p99_validity(&self) -> Validity {
        Validity {
            valid: self.p99_valid,
            invalid_reason: self.p99_invalid_reason.clone(),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct BandwidthMatrix {
    pub cells: Vec<BandwidthCell>,
}

/// The rates of the data rank `from` sent to rank `to` at one point (last run), bit/s, with
/// their bases: a pair's direction total (see `DirectionTotal`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct BandwidthCell {
    pub from: usize,
    pub to: usize,
    /// The client rank of the pair it was measured in (the sender unless `--reverse`).
    pub client: usize,
    pub streams: u32,
    pub sender_bits_per_s: f64,
    pub receiver_bits_per_s: f64,
    pub sender_bytes_timed: u64,
    pub sender_elapsed_ns: u64,
    pub receiver_bytes_timed: u64,
    pub receiver_elapsed_ns: u64,
    pub sender_valid: Option<bool>,
    pub sender_invalid_reason: Option<String>,
    pub receiver_valid: Option<bool>,
    pub receiver_invalid_reason: Option<String>,
    /// The point's headline (receiver bit/s, summed over directions) over its runs: mean and
    /// interval. Null for a run of one.
    pub over_runs: Option<MeanCi>,
    pub runs: u32,
}

impl MeshMatrix {
    /// The point's size: both sizes of a request/response exchange, else the message or write.
    pub fn size_name(&self) -> String {
        if self.latency.is_none() || self.request_size == self.response_size {
            format!("{} B", self.key.size)
        } else {
            format!(
                "{} B request, {} B response",
                self.request_size, self.response_size
            )
        }
    }
}
