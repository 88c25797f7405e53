//! Latency recording: an HDR histogram for percentiles plus exact streaming
//! moments, because bucketed values would bias the mean and its CI.

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

use super::ci::student_t_half_width;

/// Lowest value the histogram distinguishes, in nanoseconds.
const HIST_LOW_NS: u64 = 1;
/// One hour: any latency beyond this is a hang, not a measurement worth
/// resolving, and a fixed bound keeps the histogram from ever reallocating.
const HIST_HIGH_NS: u64 = 3_600_000_000_000;
/// Three significant figures bound the percentile error to 0.1 %.
const HIST_SIGFIG: u8 = 3;

/// Records latencies in nanoseconds without allocating on the hot path.
#[derive(Debug, Clone)]
pub struct LatencyRecorder {
    hist: Histogram<u64>,
    count: u64,
    min: u64,
    max: u64,
    mean: f64,
    /// Sum of squared deviations from the running mean (Welford's M2).
    m2: f64,
}

/// Summary of recorded latencies; all times in nanoseconds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct LatencySummary {
    pub samples: u64,
    /// Exact.
    pub min_ns: u64,
    /// Exact (not derived from histogram buckets).
    pub mean_ns: f64,
    /// From the histogram (within 0.1 %), clamped to `[min_ns, max_ns]`.
    pub median_ns: u64,
    /// Exact.
    pub max_ns: u64,
    /// Exact sample standard deviation (n-1 denominator); 0 when n = 1.
    pub stddev_ns: f64,
    pub p90_ns: u64,
    pub p99_ns: u64,
    pub p999_ns: u64,
    pub p9999_ns: u64,
    /// Confidence level of `ci_half_width_ns` as a fraction (0.95).
    pub confidence: f64,
    /// Student-t half-width of the mean; `None` when fewer than 2 samples or
    /// the confidence level is not strictly between 0 and 1.
    pub ci_half_width_ns: Option<f64>,
}

impl Default for LatencyRecorder {
    fn default() -> Self {
        Self::new()
    }
}

impl LatencyRecorder {
    /// Allocates the whole histogram up front (about 300 KiB) so that
    /// `record` never allocates.
    pub fn new() -> Self {
        // The bounds are compile-time constants that satisfy every
        // precondition of `new_with_bounds`, so this cannot fail at run time.
        #[allow(clippy::expect_used, reason = "constant bounds, valid as said above")]
        let hist = Histogram::new_with_bounds(HIST_LOW_NS, HIST_HIGH_NS, HIST_SIGFIG)
            .expect("constant histogram bounds are valid");
        LatencyRecorder {
            hist,
            count: 0,
            min: u64::MAX,
            max: 0,
            mean: 0.0,
            m2: 0.0,
        }
    }

    /// Records one latency. O(1), never allocates.
    ///
    /// The histogram stores 0 as 1 ns and clamps values above one hour to one
    /// hour; the exact min, max, mean and stddev use the value as given.
    #[inline]
    pub fn record(&mut self, ns: u64) {
        self.hist
            .saturating_record(ns.clamp(HIST_LOW_NS, HIST_HIGH_NS));
        self.count = self.count.saturating_add(1);
        self.min = self.min.min(ns);
        self.max = self.max.max(ns);
        let x = ns as f64;
        let delta = x - self.mean;
        self.mean += delta / self.count as f64;
        self.m2 += delta * (x - self.mean);
    }

    /// Number of recorded samples.
    pub fn count(&self) -> u64 {
        self.count
    }

    /// Adds the samples of `other` to this recorder, as if every sample had
    /// been recorded here.
    pub fn merge(&mut self, other: &LatencyRecorder) {
        if other.count == 0 {
            return;
        }
        // Both histograms come from `new()` with identical bounds, so adding
        // cannot fail; should it ever, the exact moments below remain right
        // and only the percentiles would miss `other`.
        let _ = self.hist.add(&other.hist);
        if self.count == 0 {
            self.count = other.count;
            self.min = other.min;
            self.max = other.max;
            self.mean = other.mean;
            self.m2 = other.m2;
            return;
        }
        // Chan et al.'s parallel combination of Welford accumulators.
        let na = self.count as f64;
        let nb = other.count as f64;
        let n = na + nb;
        let delta = other.mean - self.mean;
        self.mean += delta * (nb / n);
        self.m2 += other.m2 + delta * delta * (na * nb / n);
        self.count = self.count.saturating_add(other.count);
        self.min = self.min.min(other.min);
        self.max = self.max.max(other.max);
    }

    /// Forgets all samples, keeping the allocation.
    pub fn clear(&mut self) {
        self.hist.reset();
        self.count = 0;
        self.min = u64::MAX;
        self.max = 0;
        self.mean = 0.0;
        self.m2 = 0.0;
    }

    /// The underlying histogram (0 stored as 1 ns, values clamped to 1 hour).
    pub fn histogram(&self) -> &Histogram<u64> {
        &self.hist
    }

    /// Summary at the given confidence level (a fraction, e.g. 0.95);
    /// `None` when nothing was recorded.
    pub fn summary(&self, confidence: f64) -> Option<LatencySummary> {
        if self.count == 0 {
            return None;
        }
        let stddev = if self.count > 1 {
            // Rounding can leave M2 a hair below zero for identical samples.
            (self.m2.max(0.0) / (self.count - 1) as f64).sqrt()
        } else {
            0.0
        };
        // A histogram quantile is the top of its bucket, which can lie above
        // the largest sample, or below the smallest when every sample
        // exceeded the one-hour clamp; the exact extremes are tighter bounds.
        // (max-then-min rather than `clamp`, which would panic on min > max.)
        let quantile = |q: f64| self.hist.value_at_quantile(q).max(self.min).min(self.max);
        Some(LatencySummary {
            samples: self.count,
            min_ns: self.min,
            mean_ns: self.mean,
            median_ns: quantile(0.5),
            max_ns: self.max,
            stddev_ns: stddev,
            p90_ns: quantile(0.9),
            p99_ns: quantile(0.99),
            p999_ns: quantile(0.999),
            p9999_ns: quantile(0.9999),
            confidence,
            ci_half_width_ns: student_t_half_width(stddev, self.count, confidence),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::testutil::assert_rel;

    fn recorder(values: &[u64]) -> LatencyRecorder {
        let mut r = LatencyRecorder::new();
        for &v in values {
            r.record(v);
        }
        r
    }

    #[test]
    fn empty_has_no_summary() {
        let r = LatencyRecorder::default();
        assert_eq!(r.count(), 0);
        assert_eq!(r.summary(0.95), None);
    }

    #[test]
    fn summary_by_hand() {
        // mean 250; deviations -150 -50 50 150, squares sum to 50000;
        // s = sqrt(50000 / 3) = 129.09944487358056;
        // t_{0.975,3} = 3.1824463052837096 (table: 3.182);
        // half-width = 3.1824463052837096 * 129.09944487358056 / 2
        //            = 205.4260256760522.
        let s = recorder(&[300, 100, 400, 200]).summary(0.95).unwrap();
        assert_eq!(s.samples, 4);
        assert_eq!(s.min_ns, 100);
        assert_eq!(s.max_ns, 400);
        assert_eq!(s.mean_ns, 250.0);
        assert_rel(s.stddev_ns, 129.099_444_873_580_56, 1e-14);
        assert_rel(s.ci_half_width_ns.unwrap(), 205.426_025_676_052_2, 1e-10);
        assert_eq!(s.confidence, 0.95);
        // Below 2048 ns the histogram resolves single nanoseconds, so the
        // quantiles are exact order statistics: rank ceil(q * 4).
        assert_eq!(s.median_ns, 200);
        assert_eq!(s.p90_ns, 400);
        assert_eq!(s.p99_ns, 400);
        assert_eq!(s.p999_ns, 400);
        assert_eq!(s.p9999_ns, 400);
    }

    #[test]
    fn percentiles_by_rank() {
        // 1..=10000 ns: the q-quantile is the sample of rank ceil(q * 10000),
        // which is the value itself, reported as the top of its bucket.
        let values: Vec<u64> = (1..=10_000).collect();
        let r = recorder(&values);
        let s = r.summary(0.99).unwrap();
        // Buckets are 4 ns wide in [4096, 8192) and 8 ns wide in [8192, 16384).
        assert_eq!(s.median_ns, 5_003); // rank 5000, bucket [5000, 5003]
        assert_eq!(s.p90_ns, 9_007); // rank 9000, bucket [9000, 9007]
        assert_eq!(s.p99_ns, 9_903); // rank 9900, bucket [9896, 9903]
        assert_eq!(s.p999_ns, 9_991); // rank 9990, bucket [9984, 9991]
        assert_eq!(s.p9999_ns, 9_999); // rank 9999, bucket [9992, 9999]
        assert_eq!(s.mean_ns, 5_000.5);
        // Variance of 1..=N with n-1 denominator is N(N+1)/12.
        assert_rel(s.stddev_ns, (10_000.0_f64 * 10_001.0 / 12.0).sqrt(), 1e-12);
    }

    #[test]
    fn single_sample() {
        let s = recorder(&[123_456]).summary(0.95).unwrap();
        assert_eq!((s.samples, s.min_ns, s.max_ns), (1, 123_456, 123_456));
        assert_eq!(s.mean_ns, 123_456.0);
        assert_eq!(s.stddev_ns, 0.0);
        assert_eq!(s.ci_half_width_ns, None);
        // The bucket holding 123456 tops out above it; the exact max wins.
        assert!(bucket_top(123_456) > 123_456);
        assert_eq!(s.median_ns, 123_456);
        assert_eq!(s.p9999_ns, 123_456);
    }

    fn bucket_top(v: u64) -> u64 {
        recorder(&[v]).histogram().highest_equivalent(v)
    }

    #[test]
    fn zero_and_overflow_are_clamped_only_in_the_histogram() {
        let r = recorder(&[0, 0, u64::MAX]);
        let h = r.histogram();
        assert_eq!(h.len(), 3);
        assert_eq!(h.min(), 1);
        assert!(h.max() >= HIST_HIGH_NS);
        assert_eq!(h.count_at(1), 2);

        let s = r.summary(0.95).unwrap();
        assert_eq!(s.min_ns, 0);
        assert_eq!(s.max_ns, u64::MAX);
        assert_rel(s.mean_ns, u64::MAX as f64 / 3.0, 1e-15);
        // Percentiles see the histogram's 1 ns stand-in for 0.
        assert_eq!(s.median_ns, 1);
        assert!(s.p9999_ns >= HIST_HIGH_NS);
        assert!(s.ci_half_width_ns.unwrap().is_finite());

        // All beyond the clamp: percentiles must not drop below the minimum.
        let s = recorder(&[2 * HIST_HIGH_NS, 3 * HIST_HIGH_NS])
            .summary(0.95)
            .unwrap();
        assert_eq!(s.median_ns, 2 * HIST_HIGH_NS);
        assert_eq!(s.p9999_ns, 2 * HIST_HIGH_NS);
    }

    #[test]
    fn all_zero_samples() {
        let s = recorder(&[0; 5]).summary(0.95).unwrap();
        assert_eq!((s.min_ns, s.max_ns, s.median_ns, s.p9999_ns), (0, 0, 0, 0));
        assert_eq!(s.mean_ns, 0.0);
        assert_eq!(s.stddev_ns, 0.0);
        assert_eq!(s.ci_half_width_ns, Some(0.0));
    }

    #[test]
    fn identical_samples_have_zero_stddev() {
        let s = recorder(&[1_000_003; 1000]).summary(0.95).unwrap();
        assert_eq!(s.mean_ns, 1_000_003.0);
        assert_eq!(s.stddev_ns, 0.0);
    }

    #[test]
    fn welford_is_stable_with_a_large_offset() {
        // The textbook sum-of-squares formula loses every digit here.
        let base = 1_000_000_000_000u64;
        let s = recorder(&[base + 4, base + 7, base + 13, base + 16])
            .summary(0.95)
            .unwrap();
        assert_eq!(s.mean_ns, (base + 10) as f64);
        // deviations -6 -3 3 6: sum of squares 90, s^2 = 30.
        assert_rel(s.stddev_ns, 30.0_f64.sqrt(), 1e-9);
    }

    #[test]
    fn merge_equals_recording_everything_in_one() {
        let a_vals = [5u64, 17, 1_000, 250_000, 3, 99_999_999];
        let b_vals = [42u64, 7_000_000, 12, 12, 12];
        let mut a = recorder(&a_vals);
        let b = recorder(&b_vals);
        a.merge(&b);
        let all: Vec<u64> = a_vals.iter().chain(&b_vals).copied().collect();
        let one = recorder(&all);

        let merged = a.summary(0.95).unwrap();
        let direct = one.summary(0.95).unwrap();
        assert_eq!(merged.samples, 11);
        assert_eq!(merged.min_ns, direct.min_ns);
        assert_eq!(merged.max_ns, direct.max_ns);
        assert_rel(merged.mean_ns, direct.mean_ns, 1e-14);
        assert_rel(merged.stddev_ns, direct.stddev_ns, 1e-12);
        assert_rel(
            merged.ci_half_width_ns.unwrap(),
            direct.ci_half_width_ns.unwrap(),
            1e-12,
        );
        assert_eq!(merged.median_ns, direct.median_ns);
        assert_eq!(merged.p99_ns, direct.p99_ns);
        assert_eq!(a.histogram(), one.histogram());
    }

    #[test]
    fn merge_with_empty_sides() {
        let mut empty = LatencyRecorder::new();
        let full = recorder(&[10, 20, 30]);
        empty.merge(&full);
        assert_eq!(empty.summary(0.9), full.summary(0.9));

        let mut full2 = full.clone();
        full2.merge(&LatencyRecorder::new());
        assert_eq!(full2.summary(0.9), full.summary(0.9));
    }

    #[test]
    fn clear_forgets_everything() {
        let mut r = recorder(&[10, 20, 30]);
        r.clear();
        assert_eq!(r.count(), 0);
        assert_eq!(r.summary(0.95), None);
        assert_eq!(r.histogram().len(), 0);
        r.record(7);
        let s = r.summary(0.95).unwrap();
        assert_eq!((s.min_ns, s.max_ns, s.mean_ns), (7, 7, 7.0));
    }

    #[test]
    fn invalid_confidence_only_drops_the_ci() {
        let s = recorder(&[1, 2, 3]).summary(1.5).unwrap();
        assert_eq!(s.ci_half_width_ns, None);
        assert_eq!(s.confidence, 1.5);
        assert_eq!(s.mean_ns, 2.0);
    }

    #[test]
    fn summary_round_trips_through_serde_value_types() {
        // Guards against a field being added without serde support.
        fn assert_serde<T: Serialize + for<'de> Deserialize<'de>>() {}
        assert_serde::<LatencySummary>();
    }
}
