//! Responsiveness in round trips per minute (RPM), as draft-ietf-ippm-responsiveness
//! computes it: 60 seconds over a trimmed mean of the round-trip times, the slowest 5% of
//! samples left out (the draft's TM). The draft weights several kinds of probe (connection
//! setup, TLS, and requests on the loaded connections); wirebench has one kind, the pattern's
//! own round trip, so its RPM is 60 s / TM(RTT).

use hdrhistogram::Histogram;

/// Share of the slowest samples the trimmed mean leaves out.
pub const TRIMMED_SHARE_PERCENT: u64 = 5;

/// How many of `n` samples the trimmed mean keeps: all but the slowest 5% (rounded down, so
/// that fewer than 20 samples keep them all).
pub fn kept_samples(n: u64) -> u64 {
    n - n * TRIMMED_SHARE_PERCENT / 100
}

/// The mean of the fastest [`kept_samples`] of the recorded round trips, nanoseconds; None
/// without samples. Values come from the histogram (exact below 2048 ns, within 0.1% above).
pub fn trimmed_mean_ns(hist: &Histogram<u64>) -> Option<f64> {
    let n = hist.len();
    if n == 0 {
        return None;
    }
    let keep = kept_samples(n);
    let (mut taken, mut sum) = (0u64, 0f64);
    for v in hist.iter_recorded() {
        if taken == keep {
            break;
        }
        let c = v.count_at_value().min(keep - taken);
        sum += hist.median_equivalent(v.value_iterated_to()) as f64 * c as f64;
        taken += c;
    }
    Some(sum / keep as f64)
}

/// Round trips per minute for a round-trip time in nanoseconds.
pub fn rpm(rtt_ns: f64) -> f64 {
    60e9 / rtt_ns
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hist(values: &[(u64, u64)]) -> Histogram<u64> {
        let mut h = Histogram::new_with_bounds(1, 3_600_000_000_000, 3).unwrap();
        for &(v, n) in values {
            h.record_n(v, n).unwrap();
        }
        h
    }

    #[test]
    fn the_slowest_five_percent_are_left_out() {
        // 95 round trips of 1 us and 5 of 2 us: the trimmed mean is 1 us, 60 million RPM.
        let h = hist(&[(1000, 95), (2000, 5)]);
        assert_eq!(trimmed_mean_ns(&h), Some(1000.0));
        assert_eq!(rpm(1000.0), 60_000_000.0);
        // One slow sample among 100 is left out; among 19 it stays in.
        let h = hist(&[(1000, 98), (2000, 2)]);
        assert_eq!(trimmed_mean_ns(&h), Some(1000.0));
        let h = hist(&[(1000, 10), (1900, 9)]);
        assert_eq!(
            trimmed_mean_ns(&h),
            Some((1000.0 * 10.0 + 1900.0 * 9.0) / 19.0)
        );
    }

    #[test]
    fn a_sample_bucket_is_split_where_the_trim_falls() {
        // 40 samples keep 38: 30 of 1000 and 8 of the 10 at 1500.
        let h = hist(&[(1000, 30), (1500, 10)]);
        assert_eq!(kept_samples(40), 38);
        assert_eq!(trimmed_mean_ns(&h), Some((30_000.0 + 8.0 * 1500.0) / 38.0));
    }

    #[test]
    fn rpm_of_common_round_trips() {
        assert_eq!(rpm(100e6), 600.0, "100 ms: 600 round trips a minute");
        assert_eq!(rpm(1e9), 60.0);
        assert_eq!(trimmed_mean_ns(&hist(&[])), None);
    }
}
