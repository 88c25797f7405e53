//! Latency distributions for histogram and CDF plots: the HDR histogram rebinned into a few
//! log-spaced bins, so that the result document stays small while the shape survives.

use hdrhistogram::Histogram;

use crate::model::LatencyBin;

/// Bins per decade: each bin is 12 % wide, coarse enough for a readable histogram, fine
/// enough that the CDF's steps stay below what the eye resolves on a log axis.
pub const BINS_PER_DECADE: f64 = 20.0;

/// The non-empty bins of `hist`, lowest first. Each recorded HDR bucket (0.1 % wide) goes
/// to the bin holding its middle value, so a bucket straddling a bin edge is counted once.
pub fn log_bins(hist: &Histogram<u64>) -> Vec<LatencyBin> {
    let mut bins: Vec<LatencyBin> = Vec::new();
    for v in hist.iter_recorded() {
        let middle = hist.median_equivalent(v.value_iterated_to()).max(1) as f64;
        let k = (middle.log10() * BINS_PER_DECADE).floor();
        let low_ns = 10f64.powf(k / BINS_PER_DECADE);
        let count = v.count_at_value();
        match bins.last_mut() {
            Some(last) if last.low_ns == low_ns => last.count += count,
            _ => bins.push(LatencyBin {
                low_ns,
                high_ns: 10f64.powf((k + 1.0) / BINS_PER_DECADE),
                count,
            }),
        }
    }
    bins
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::LatencyRecorder;

    #[test]
    fn bins_cover_every_sample_once_in_order() {
        let mut rec = LatencyRecorder::new();
        for v in 1..=20_000u64 {
            rec.record(v * 37);
        }
        rec.record(5_000_000_000);
        let bins = log_bins(rec.histogram());
        assert_eq!(bins.iter().map(|b| b.count).sum::<u64>(), 20_001);
        for w in bins.windows(2) {
            assert!(w[0].high_ns <= w[1].low_ns * (1.0 + 1e-12), "{w:?}");
        }
        for b in &bins {
            let ratio = b.high_ns / b.low_ns;
            assert!((ratio - 10f64.powf(1.0 / BINS_PER_DECADE)).abs() < 1e-9);
        }
        // 37 ns falls in [35.48, 39.81); 5 s in [3.98e9, 5.01e9) with a single sample.
        assert!(bins[0].low_ns <= 37.0 && 37.0 < bins[0].high_ns);
        let last = bins.last().unwrap();
        assert_eq!(last.count, 1);
        assert!(last.low_ns <= 5e9 && 5e9 < last.high_ns);
    }

    #[test]
    fn empty_histogram_has_no_bins() {
        assert!(log_bins(LatencyRecorder::new().histogram()).is_empty());
    }
}
