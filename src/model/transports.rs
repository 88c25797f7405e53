//! The document of `wirebench compare-transports`: per transport the one-way time of the
//! smallest message (t0), the highest throughput (r_max) and the half-performance size
//! (n_1/2), each a mean over independent runs with its interval, and each against a baseline
//! transport, as Table 1 of Lin, Hsieh, Du et al., "Distributed network computing over local
//! ATM networks", compares raw ATM, TCP sockets, PVM and Sun RPC.

use serde::Serialize;

use super::vocab::TransportKind;
use crate::stats::ci::MeanCi;

#[derive(Debug, Clone, Serialize)]
pub struct Estimate {
    pub mean: f64,
    pub ci_half_width: Option<f64>,
    pub runs: usize,
}

impl Estimate {
    pub fn of(xs: &[f64], confidence: f64) -> Option<Estimate> {
        let m = MeanCi::from_samples(xs, confidence)?;
        Some(Estimate {
            mean: m.mean,
            ci_half_width: m.half_width,
            runs: xs.len(),
        })
    }
}

/// Each transport's figures against the baseline's.
#[derive(Debug, Clone, Serialize)]
pub struct Overhead {
    /// t0 minus the baseline's t0, nanoseconds.
    pub t0_extra_ns: f64,
    pub t0_ratio: f64,
    pub r_max_ratio: f64,
    pub n_half_ratio: Option<f64>,
}

#[derive(Debug, Clone, Serialize)]
pub struct TransportRow {
    /// What the row is called: the entry as given (`routed=tcp@HOST:PORT`'s `routed`), or the
    /// transport's name.
    pub entry: String,
    pub transport: TransportKind,
    /// The server this row measured through when it is not the comparison's own (a relay in
    /// the path), HOST:PORT; null for the comparison's server.
    pub via: Option<String>,
    pub layer: String,
    /// The ids of this transport's sweeps in the results database, one per run (none with
    /// --no-save): `show`, `report` and `compare` take them.
    pub saved_runs: Vec<i64>,
    /// Sizes measured for this transport, bytes.
    pub sizes: Vec<u64>,
    /// One-way time (RTT/2) of the smallest message, nanoseconds.
    pub t0_ns: Option<Estimate>,
    pub t0_size: Option<u64>,
    /// Highest throughput of the sweep, bits per second (size / one-way time).
    pub r_max_bits_per_s: Option<Estimate>,
    /// Size at which r_max was reached in the most runs, bytes.
    pub r_max_size: Option<u64>,
    /// Size reaching r_max / 2, bytes (interpolated).
    pub n_half_bytes: Option<Estimate>,
    /// r_max was reached at the largest size in at least one run: the curve had not
    /// flattened, so r_max is a lower bound and n_1/2 only an estimate against it.
    pub r_max_at_largest: bool,
    /// The same in words (with how many runs), null when every run's curve flattened.
    pub r_max_note: Option<String>,
    /// Hockney fit t(n) = t0 + n / r_inf, averaged over the runs that have one, valid or not:
    /// for inspection; it is a result only when `fit_valid`.
    /// t0 in nanoseconds, r_inf in bits per second.
    pub fit_t0_ns: Option<f64>,
    pub fit_r_inf_bits_per_s: Option<f64>,
    /// Every run's fit is valid (see `stats::sweep::judge_fit`).
    pub fit_valid: bool,
    /// Why not, naming the first run whose fit is not valid.
    pub fit_invalid_reason: Option<String>,
    pub overhead: Option<Overhead>,
    /// Why this transport has no figures, if it has none.
    pub error: Option<String>,
    /// grpc: the encoding its messages carried, and the share of a call's round trip spent
    /// serialising (client encode + server decode + server encode + client decode over the
    /// mean round trip, warm-up included) at the smallest and the largest size, over the runs.
    /// Null for other transports.
    pub serialisation: Option<SerialisationShare>,
}

/// What serialisation took of a grpc entry's round trips, at both ends of its sweep.
#[derive(Debug, Clone, Serialize)]
pub struct SerialisationShare {
    pub encoding: super::vocab::Encoding,
    pub smallest_size: u64,
    /// Shares (0 to 1) over the runs.
    pub at_smallest: Option<Estimate>,
    pub largest_size: u64,
    pub at_largest: Option<Estimate>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Comparison {
    pub schema: &'static str,
    pub schema_version: u32,
    pub server: Option<String>,
    /// The timed phase of each size, nanoseconds.
    pub duration_per_size_ns: u64,
    pub runs: u32,
    pub confidence: f64,
    /// The entry the others are compared with.
    pub baseline: Option<String>,
    pub transports: Vec<TransportRow>,
    /// Entries by t0, lowest first, in groups: the entries of one group are within noise of
    /// each other (their confidence intervals overlap, or chain by overlaps), so they are not
    /// ranked against one another. Entries without a t0 interval are left out.
    pub t0_order: Vec<Vec<String>>,
    /// Entries by r_max, highest first, grouped the same way.
    pub r_max_order: Vec<Vec<String>>,
    pub client_environment: super::host::Environment,
}
