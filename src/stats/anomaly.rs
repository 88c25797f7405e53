//! Points of a sweep that stand out from both neighbours: a peak or a dip along one axis (the
//! peak at a 4 KiB window with 2 KiB writes and the drop at 8 KiB with 7 KiB writes of
//! [Moldeklev et al. n.d.], the Nagle bands of [Local ATM computing n.d.], the collapse near
//! 1 KB of [Müller et al. 1997]; see REFERENCES.md). A smooth curve, rising or falling, has
//! none; a point above both neighbours, or below both, by more than the threshold is flagged.
//!
//! Three shapes are not anomalies, or need their own rule:
//! - a step (a level change: the curve rises to a plateau and stays there) is not a peak of
//!   the plateau against the level before it: a band is at most [`MAX_BAND`] points wide, so
//!   a plateau of fifteen sizes between a low first point and a dip is not called a band of
//!   peaks (it was, and the dip after it went unseen);
//! - after a flagged band, the next point is judged against the last point before the band,
//!   not against the band, so a dip right after a peak is still seen and the curve's way back
//!   is not called a dip;
//! - an end point has one neighbour. Along every axis wirebench sweeps (message sizes, socket
//!   buffers, windows) its figures grow with the axis or level off: a message takes longer
//!   as it grows, a rate climbs from the small sizes' per-message costs to its level. At an
//!   end only a point against that is flagged: a first point above the level after it, or a
//!   last point below the level before it (a collapse at the largest size), and only when
//!   the two points on its side agree with each other (a level, not a trend) and it stands
//!   out by the threshold twice over (a factor (1 + t)^2 up, (1 - t)^2 down): one side is
//!   half the evidence.

/// The widest band of neighbouring points that is flagged together: the Nagle bands of
/// [Local ATM computing n.d.] are two or three message sizes wide; a wider "band" is a level, not
/// an excursion from it.
pub const MAX_BAND: usize = 3;

/// One point that differs from both of its neighbours in the same direction.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Outlier {
    /// Index into the values given.
    pub index: usize,
    /// (value - previous) / previous, the previous being the nearest measured value before
    /// its band (not flagged itself); `None` for the first point.
    pub vs_previous: Option<f64>,
    /// (value - next) / next, the next being the nearest measured value after its band;
    /// `None` for the last point.
    pub vs_next: Option<f64>,
}

fn rel(v: f64, to: f64) -> f64 {
    (v - to) / to
}

/// The values (in axis order) that are above both neighbours, or below both, by more than
/// `threshold` (0.2 = 20%) relative to each. A band of up to [`MAX_BAND`] neighbouring values that
/// stands out together ([Local ATM computing n.d.]'s Nagle bands: two or three sizes at 40 ms
/// between sizes at 0.2 ms) counts too: each of its values is compared with the values just before
/// and just after the band. `None` marks a value that is not a measurement: it is skipped, and its
/// neighbours are compared with the nearest measured values instead. The ends follow the stricter
/// rule of the module's documentation.
pub fn outliers(values: &[Option<f64>], threshold: f64) -> Vec<Outlier> {
    let measured: Vec<(usize, f64)> = values
        .iter()
        .enumerate()
        .filter_map(|(i, v)| v.filter(|x| x.is_finite() && *x > 0.0).map(|x| (i, x)))
        .collect();
    let n = measured.len();
    let mut out: Vec<Outlier> = Vec::new();
    if n < 3 {
        return out;
    }
    // The inner points; `prev` is the last measured point not flagged.
    let mut prev = 0;
    let mut start = 1;
    while start + 1 < n {
        let before = measured[prev].1;
        // The shortest band from `start` that stands out from the values around it.
        let band = (start..(start + MAX_BAND).min(n - 1)).find_map(|end| {
            let next = measured[end + 1].1;
            let band = &measured[start..=end];
            let peak = band
                .iter()
                .all(|(_, v)| rel(*v, before) > threshold && rel(*v, next) > threshold);
            let dip = band
                .iter()
                .all(|(_, v)| rel(*v, before) < -threshold && rel(*v, next) < -threshold);
            (peak || dip).then_some((end, next))
        });
        match band {
            Some((end, next)) => {
                out.extend(measured[start..=end].iter().map(|&(index, v)| Outlier {
                    index,
                    vs_previous: Some(rel(v, before)),
                    vs_next: Some(rel(v, next)),
                }));
                start = end + 1;
            }
            None => {
                prev = start;
                start += 1;
            }
        }
    }
    // The ends, against the level of the two points on their side that are not flagged.
    let level = |a: f64, b: f64| rel(a, b).abs() <= threshold;
    let (up, down) = (
        (1.0 + threshold).powi(2),
        (1.0 - threshold).max(0.0).powi(2),
    );
    let unflagged = |range: std::ops::Range<usize>| -> Vec<f64> {
        measured[range]
            .iter()
            .filter(|(i, _)| !out.iter().any(|o| o.index == *i))
            .map(|(_, v)| *v)
            .collect()
    };
    let (after, before) = (unflagged(1..n), unflagged(0..n - 1));
    let (first, last) = (measured[0].1, measured[n - 1].1);
    if let [next, next2, ..] = after[..] {
        if level(next, next2) && first > up * next {
            out.insert(
                0,
                Outlier {
                    index: measured[0].0,
                    vs_previous: None,
                    vs_next: Some(rel(first, next)),
                },
            );
        }
    }
    if let [.., prev2, prev1] = before[..] {
        if level(prev1, prev2) && last < down * prev1 {
            out.push(Outlier {
                index: measured[n - 1].0,
                vs_previous: Some(rel(last, prev1)),
                vs_next: None,
            });
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
        // [Moldeklev et al. n.d.]'s shape: a peak at the third point, a drop at the fifth.
        let v = [10.0, 11.0, 20.0, 12.0, 6.0, 13.0].map(Some).to_vec();
        let o = outliers(&v, 0.2);
        assert_eq!(o.iter().map(|o| o.index).collect::<Vec<_>>(), vec![2, 4]);
        assert!((o[0].vs_previous.unwrap() - 9.0 / 11.0).abs() < 1e-12);
        assert!((o[0].vs_next.unwrap() - 8.0 / 12.0).abs() < 1e-12);
        assert!(o[1].vs_previous.unwrap() < -0.2 && o[1].vs_next.unwrap() < -0.2);
        // Within the threshold: noise, not an anomaly.
        let noisy = [10.0, 11.5, 10.2].map(Some).to_vec();
        assert!(outliers(&noisy, 0.2).is_empty());
    }

    #[test]
    fn a_band_that_stands_out_together_is_flagged_whole() {
        // [Local ATM computing n.d.]'s Nagle band, as measured in the lab: one-way us by size.
        let v = [106.3, 169.7, 44000.1, 44097.5, 472.7, 488.0]
            .map(Some)
            .to_vec();
        let o = outliers(&v, 0.3);
        assert_eq!(o.iter().map(|o| o.index).collect::<Vec<_>>(), vec![2, 3]);
        assert!((o[1].vs_previous.unwrap() - (44097.5 - 169.7) / 169.7).abs() < 1e-9);
        assert!((o[1].vs_next.unwrap() - (44097.5 - 472.7) / 472.7).abs() < 1e-9);
        // The whole row: after the band the curve goes back and rises; only the band.
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

    fn flagged(v: &[f64], threshold: f64) -> Vec<usize> {
        let v: Vec<Option<f64>> = v.iter().copied().map(Some).collect();
        outliers(&v, threshold).iter().map(|o| o.index).collect()
    }

    /// A lab sweep on a loaded host (stream, 10..2000:+110 B messages, 16K window, receiver
    /// Mbit/s): a low first size, a plateau, the collapse 120 -> 17.0 -> 143 at
    /// 1770 B. The plateau was flagged as fifteen peaks (a band against the low first point
    /// and the dip) and the dip was skipped; only the dip is an anomaly.
    #[test]
    fn a_plateau_after_a_rise_is_not_flagged_and_the_dip_in_it_is() {
        let sweep = [
            9.8, 95.2, 118.4, 126.0, 131.7, 128.9, 134.2, 125.5, 136.8, 129.3, 133.0, 127.4, 138.1,
            124.6, 131.2, 120.0, 17.0, 143.0, 139.5,
        ];
        let v: Vec<Option<f64>> = sweep.iter().copied().map(Some).collect();
        let o = outliers(&v, 0.5);
        assert_eq!(o.len(), 1, "{o:?}");
        assert_eq!(o[0].index, 16, "1770 B is the 17th size");
        // Against its neighbours, not a band's edge.
        assert!((o[0].vs_previous.unwrap() - (17.0 - 120.0) / 120.0).abs() < 1e-12);
        assert!((o[0].vs_next.unwrap() - (17.0 - 143.0) / 143.0).abs() < 1e-12);
        // The plateau alone, and a rise to a level: nothing.
        assert!(flagged(&sweep[..16], 0.5).is_empty());
        assert!(flagged(&[5.0, 10.0, 100.0, 100.0, 100.0, 100.0, 100.0], 0.5).is_empty());
    }

    #[test]
    fn a_drop_at_the_last_size_is_flagged_and_a_falling_curve_is_not() {
        let mut sweep = vec![9.8, 95.2, 118.4, 126.0, 131.7, 128.9, 134.2];
        sweep.push(17.0);
        let v: Vec<Option<f64>> = sweep.iter().copied().map(Some).collect();
        let o = outliers(&v, 0.5);
        assert_eq!(o.len(), 1, "{o:?}");
        assert_eq!((o[0].index, o[0].vs_next), (7, None));
        assert!((o[0].vs_previous.unwrap() - (17.0 - 134.2) / 134.2).abs() < 1e-12);
        // One side is half the evidence: a halving at the end is not enough (it is inside).
        assert!(flagged(&[120.0, 130.0, 125.0, 60.0], 0.5).is_empty());
        assert_eq!(flagged(&[120.0, 130.0, 60.0, 125.0], 0.5), vec![2]);
        // A curve that falls all along ends low without an anomaly.
        assert!(flagged(&[100.0, 60.0, 30.0, 10.0], 0.5).is_empty());
        // At the first end only a point above the level after it is flagged: a low first
        // size is the climb from per-message costs.
        assert_eq!(flagged(&[500.0, 100.0, 105.0, 110.0], 0.5), vec![0]);
        assert!(flagged(&[5.0, 100.0, 105.0, 110.0], 0.5).is_empty());
    }

    /// A peak right before a dip: both seen, the dip against the level before the peak.
    #[test]
    fn a_dip_right_after_a_peak_is_seen() {
        let v = [100.0, 105.0, 400.0, 20.0, 110.0, 108.0];
        let o: Vec<Option<f64>> = v.iter().copied().map(Some).collect();
        let o = outliers(&o, 0.5);
        assert_eq!(o.iter().map(|o| o.index).collect::<Vec<_>>(), vec![2, 3]);
        assert!((o[1].vs_previous.unwrap() - (20.0 - 105.0) / 105.0).abs() < 1e-12);
        // A band wider than MAX_BAND is a level, not a band.
        assert!(flagged(&[10.0, 10.0, 50.0, 50.0, 50.0, 50.0, 10.0, 10.0], 0.5).is_empty());
        assert_eq!(
            flagged(&[10.0, 10.0, 50.0, 50.0, 50.0, 10.0, 10.0], 0.5),
            vec![2, 3, 4]
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
