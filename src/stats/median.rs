//! A median with its distribution-free confidence interval: the order statistics whose ranks
//! bracket n/2 by the binomial count's normal approximation (the sign test's interval), so
//! that no shape of the distribution is assumed.

/// z of a two-sided 95% interval.
const Z95: f64 = 1.959_963_984_540_054;

/// (low, median, high) of `sorted` (ascending): the median by nearest rank (rank ceil(n/2)),
/// the interval's ends the order statistics of ranks n/2 -/+ z sqrt(n)/2, rounded outwards
/// and clamped to the sample. None for an empty sample.
pub fn median_interval(sorted: &[u64]) -> Option<(u64, u64, u64)> {
    let n = sorted.len();
    if n == 0 {
        return None;
    }
    let half = n as f64 / 2.0;
    let spread = Z95 * (n as f64).sqrt() / 2.0;
    let lo_rank = ((half - spread).floor() as usize).clamp(1, n);
    let hi_rank = ((half + spread).ceil() as usize).clamp(1, n);
    let mid = n.div_ceil(2);
    Some((sorted[lo_rank - 1], sorted[mid - 1], sorted[hi_rank - 1]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_interval_brackets_the_median_by_order_statistics() {
        let v: Vec<u64> = (1..=100).collect();
        // 50 -/+ 9.8: ranks 40 and 60.
        assert_eq!(median_interval(&v), Some((40, 50, 60)));
        assert_eq!(median_interval(&[7]), Some((7, 7, 7)));
        assert_eq!(median_interval(&[]), None);
    }
}
