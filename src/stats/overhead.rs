//! What timing costs: a clock read and a histogram record, measured on this machine, so that
//! a result can be read against the cost of taking it.

use std::hint::black_box;
use std::time::Instant;

use serde::{Deserialize, Serialize};

use super::LatencyRecorder;

#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Overhead {
    /// One `Instant::now()` (CLOCK_MONOTONIC through the vDSO), nanoseconds.
    pub clock_read_ns: f64,
    /// One `LatencyRecorder::record` (HDR histogram plus running moments), nanoseconds.
    pub record_ns: f64,
    /// What one timed sample adds: two clock reads and one record, nanoseconds.
    pub sample_ns: f64,
    /// Iterations each figure is averaged over.
    pub iterations: u64,
}

/// Measures the cost of a sample by timing `iterations` of each operation.
pub fn measure(iterations: u64) -> Overhead {
    let n = iterations.max(1);
    let t0 = Instant::now();
    for _ in 0..n {
        black_box(Instant::now());
    }
    let clock_read_ns = t0.elapsed().as_nanos() as f64 / n as f64;

    let mut rec = LatencyRecorder::new();
    // Values spread over several magnitudes touch many buckets, as real latencies do.
    let values: Vec<u64> = (0..1024u64).map(|i| 1_000 + i * i * 37).collect();
    let t0 = Instant::now();
    for i in 0..n {
        rec.record(black_box(values[(i & 1023) as usize]));
    }
    let record_ns = t0.elapsed().as_nanos() as f64 / n as f64;
    black_box(rec.count());
    Overhead {
        clock_read_ns,
        record_ns,
        sample_ns: 2.0 * clock_read_ns + record_ns,
        iterations: n,
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn overhead_is_measured_and_finite() {
        let o = super::measure(10_000);
        assert!(o.clock_read_ns > 0.0 && o.clock_read_ns.is_finite());
        assert!(o.record_ns > 0.0 && o.record_ns.is_finite());
        assert!((o.sample_ns - (2.0 * o.clock_read_ns + o.record_ns)).abs() < 1e-9);
    }
}
