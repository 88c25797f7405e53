//! Points of a sweep that stand out from both neighbours: a peak or a dip along one axis (seed
//! 002's peak at a 4 KiB window with 2 KiB writes and its drop at 8 KiB with 7 KiB writes, seed
//! 001's Nagle bands, seed 000's collapse near 1 KB). A smooth curve, rising or falling, has
//! none; a point above both neighbours, or below both, by more than the threshold is flagged.

/// One point that differs from both of its neighbours in the same direction.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Outlier {
    /// Index into the values given.
    pub index: usize,
    /// (value - previous) / previous.
    pub vs_previous: f64,
    /// (value - next) / next.
    pub vs_next: f64,
}

/// The values (in axis order) that are above both neighbours, or below both, by more than
/// `threshold` (0.2 = 20%) relative to each. A band of neighbouring values that stands out
/// together (seed 001's Nagle bands: two or three message sizes at 40 ms between sizes at
/// 0.2 ms) counts too: each of its values is compared with the values just before and just
/// after the band. `None` marks a value that is not a measurement: it is skipped, and its
/// neighbours are compared with the nearest measured values instead. The ends have one
/// neighbour and are never flagged.
pub fn outliers(values: &[Option<f64>], threshold: f64) -> Vec<Outlier> {
    let measured: Vec<(usize, f64)> = values
        .iter()
        .enumerate()
        .filter_map(|(i, v)| v.filter(|x| x.is_finite() && *x > 0.0).map(|x| (i, x)))
        .collect();
    let n = measured.len();
    let mut out: Vec<Outlier> = Vec::new();
    let mut start = 1;
    while start + 1 < n {
        let prev = measured[start - 1].1;
        // The shortest band from `start` that stands out from the values around it.
        let band = (start..n - 1).find_map(|end| {
            let next = measured[end + 1].1;
            let band = &measured[start..=end];
            let peak = band
                .iter()
                .all(|(_, v)| (v - prev) / prev > threshold && (v - next) / next > threshold);
            let dip = band
                .iter()
                .all(|(_, v)| (v - prev) / prev < -threshold && (v - next) / next < -threshold);
            (peak || dip).then_some((end, next))
        });
        match band {
            Some((end, next)) => {
                out.extend(measured[start..=end].iter().map(|&(index, v)| Outlier {
                    index,
                    vs_previous: (v - prev) / prev,
                    vs_next: (v - next) / next,
                }));
                // The value after the band is its right neighbour: comparing the values
                // after it with the band itself would call the curve's way back a band too.
                start = end + 2;
            }
            None => start += 1,
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_peak_and_a_dip_are_flagged_and_a_smooth_curve_is_not() {
        let rising: Vec<Option<f64>> = [1.0, 2.0, 4.0, 8.0, 16.0].map(Some).to_vec();
        assert!(outliers(&rising, 0.2).is_empty());
        // Seed 002's shape: a peak at the third point, a drop at the fifth.
        let v = [10.0, 11.0, 20.0, 12.0, 6.0, 13.0].map(Some).to_vec();
        let o = outliers(&v, 0.2);
        assert_eq!(o.iter().map(|o| o.index).collect::<Vec<_>>(), vec![2, 4]);
        assert!((o[0].vs_previous - 9.0 / 11.0).abs() < 1e-12);
        assert!((o[0].vs_next - 8.0 / 12.0).abs() < 1e-12);
        assert!(o[1].vs_previous < -0.2 && o[1].vs_next < -0.2);
        // Within the threshold: noise, not an anomaly.
        let noisy = [10.0, 11.5, 10.2].map(Some).to_vec();
        assert!(outliers(&noisy, 0.2).is_empty());
    }

    #[test]
    fn a_band_that_stands_out_together_is_flagged_whole() {
        // Seed 001's Nagle band, as measured in the lab: one-way microseconds by size.
        let v = [106.3, 169.7, 44000.1, 44097.5, 472.7, 488.0]
            .map(Some)
            .to_vec();
        let o = outliers(&v, 0.3);
        assert_eq!(o.iter().map(|o| o.index).collect::<Vec<_>>(), vec![2, 3]);
        assert!((o[1].vs_previous - (44097.5 - 169.7) / 169.7).abs() < 1e-9);
        assert!((o[1].vs_next - (44097.5 - 472.7) / 472.7).abs() < 1e-9);
        // Seed 001's whole row: after the band the curve goes back and rises; only the band.
        let row = [
            106.3, 169.7, 44000.1, 44097.5, 472.7, 488.0, 531.9, 618.3, 823.0,
        ]
        .map(Some)
        .to_vec();
        assert_eq!(
            outliers(&row, 0.3)
                .iter()
                .map(|o| o.index)
                .collect::<Vec<_>>(),
            vec![2, 3]
        );
        // A step is not a band: what follows it stays high.
        let step = [1.0, 1.0, 5.0, 5.0, 5.0].map(Some).to_vec();
        assert!(outliers(&step, 0.3).is_empty());
        // A band of dips.
        let dips = [10.0, 1.0, 1.2, 11.0].map(Some).to_vec();
        assert_eq!(
            outliers(&dips, 0.3)
                .iter()
                .map(|o| o.index)
                .collect::<Vec<_>>(),
            vec![1, 2]
        );
    }

    #[test]
    fn values_that_are_not_measurements_are_skipped_not_compared() {
        let v = vec![Some(10.0), None, Some(30.0), Some(10.0), Some(f64::NAN)];
        let o = outliers(&v, 0.2);
        assert_eq!(o.len(), 1);
        assert_eq!(o[0].index, 2, "compared with 10 (index 0) and 10 (index 3)");
        assert!(outliers(&[Some(1.0), Some(5.0)], 0.2).is_empty());
    }
}
