//! Derived metrics of a ping-pong message-size sweep: latency t0, peak
//! throughput r_max, half-performance length n_1/2, and Hockney's linear
//! model one_way(n) = t0 + n / r_inf.

use serde::{Deserialize, Serialize};

use super::validity::MIN_FIT_SIZES;

/// One measured message size of a ping-pong sweep.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct SweepPoint {
    /// Message size in bytes.
    pub size: u64,
    /// Mean one-way time (RTT / 2) in nanoseconds.
    pub one_way_ns: f64,
    /// Confidence-interval half-width of `one_way_ns`, in nanoseconds.
    pub one_way_ci_ns: Option<f64>,
}

/// Least-squares fit of one_way(n) = t0 + n / r_inf, as fitted. It is kept for inspection
/// whatever it came out as; whether it is a result is [`SweepMetrics::fit_valid`].
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct HockneyFit {
    /// Intercept in nanoseconds. Can come out negative when the data are far from linear:
    /// the fit is then not valid (see [`judge_fit`]).
    pub t0_ns: f64,
    /// Asymptotic throughput, 1 / slope, in bits per second; negative when the slope is.
    pub r_inf_bits_per_s: f64,
    /// Hockney's half-performance length r_inf * t0.
    pub n_half_bytes: f64,
    /// Coefficient of determination of the fit (1 = exactly linear).
    pub r_squared: f64,
    /// Number of distinct sizes the fit used.
    pub points: usize,
}

/// Metrics derived from a sweep. Throughput is n / one_way(n) = 2n / RTT(n).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SweepMetrics {
    /// Number of distinct message sizes with a usable time.
    pub points: usize,
    /// One-way time of the smallest message, in nanoseconds.
    pub t0_ns: f64,
    /// Confidence-interval half-width of `t0_ns`, nanoseconds.
    pub t0_ci_ns: Option<f64>,
    pub t0_size: u64,
    /// Highest observed throughput, bits per second.
    pub r_max_bits_per_s: f64,
    /// (low, high) throughput at `r_max_size` from the one-way CI bounds;
    /// `None` without a CI or when the CI reaches down to zero time (the
    /// upper bound would be infinite).
    pub r_max_ci_bits_per_s: Option<(f64, f64)>,
    pub r_max_size: u64,
    /// Size at which throughput first reaches r_max / 2, linearly
    /// interpolated in throughput between the two bracketing sizes; `None`
    /// when r_max is 0 (only empty messages).
    pub n_half_bytes: Option<f64>,
    /// The smallest size already reaches r_max / 2, so `n_half_bytes` is
    /// that size and the true n_1/2 is at most that.
    pub n_half_at_smallest: bool,
    /// The largest size the metrics were derived from. Null in documents written before it
    /// existed, until [`SweepMetrics::fill_validity`] sets it from the points.
    #[serde(default)]
    pub largest_size: Option<u64>,
    /// r_max was reached at the largest size: the throughput was still rising at the end of
    /// the sweep, so r_max is a lower bound and n_1/2 only an estimate against it.
    #[serde(default)]
    pub r_max_at_largest: Option<bool>,
    /// What `r_max_at_largest` means for the figures, in words; null when the curve flattened.
    #[serde(default)]
    pub r_max_note: Option<String>,
    /// Why n_1/2 is a bound or an estimate rather than the size itself; null when it is.
    #[serde(default)]
    pub n_half_note: Option<String>,
    /// The Hockney fit as computed, valid or not (null when not computable at all: fewer than
    /// 2 sizes, or a slope of exactly 0, which has no r_inf).
    pub fit: Option<HockneyFit>,
    /// Whether `fit` is a result (see [`judge_fit`]). Null only in documents written before
    /// fits were judged, until [`SweepMetrics::fill_validity`] judges them.
    #[serde(default)]
    pub fit_valid: Option<bool>,
    /// Why there is no valid fit; null when there is one.
    #[serde(default)]
    pub fit_invalid_reason: Option<String>,
    /// Sizes measured but left out of these metrics because their figures are not valid
    /// (too few samples), with the reason.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub left_out: Vec<LeftOut>,
}

/// A measured size that the metrics do not use.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct LeftOut {
    pub size: u64,
    pub reason: String,
}

impl SweepMetrics {
    /// The fit, only when it is a valid result.
    pub fn valid_fit(&self) -> Option<&HockneyFit> {
        self.fit.as_ref().filter(|_| self.fit_valid == Some(true))
    }

    /// The reason there is no valid fit, for tables: "no valid fit: <reason>".
    pub fn fit_reason(&self) -> String {
        self.fit_invalid_reason
            .clone()
            .unwrap_or_else(|| "not judged".into())
    }

    /// Fills in the judgements a document written before they existed lacks, from what it
    /// stored: `largest` is the largest size among the group's points.
    pub fn fill_validity(&mut self, largest: Option<u64>) {
        if self.fit_valid.is_none() {
            let reason = judge_fit(self.fit.as_ref(), self.points).err();
            self.fit_valid = Some(reason.is_none());
            self.fit_invalid_reason = reason;
        }
        if self.largest_size.is_none() {
            self.largest_size = largest;
        }
        if self.r_max_at_largest.is_none() {
            if let Some(largest) = self.largest_size {
                let (at, r_note, n_note) = flattening(
                    self.r_max_bits_per_s,
                    self.r_max_size,
                    largest,
                    self.n_half_bytes.is_some(),
                    self.n_half_at_smallest,
                );
                self.r_max_at_largest = Some(at);
                self.r_max_note = r_note;
                if self.n_half_note.is_none() {
                    self.n_half_note = n_note;
                }
            }
        }
    }
}

/// Whether a fit is a result, or why not: it needs [`MIN_FIT_SIZES`] sizes, a positive slope
/// (time growing with size: r_inf > 0), and a positive intercept t0 (a message takes time;
/// with r_inf > 0 that also makes n_1/2 = r_inf * t0 positive).
pub fn judge_fit(fit: Option<&HockneyFit>, sizes: usize) -> Result<(), String> {
    if sizes < MIN_FIT_SIZES {
        return Err(format!(
            "{sizes} size{} measured, a fit needs at least {MIN_FIT_SIZES}",
            if sizes == 1 { "" } else { "s" }
        ));
    }
    let Some(f) = fit else {
        return Err("the one-way time does not grow with size (fitted slope 0 or less)".into());
    };
    let finite = [f.t0_ns, f.r_inf_bits_per_s, f.n_half_bytes, f.r_squared]
        .iter()
        .all(|v| v.is_finite());
    if !finite {
        return Err("the fit is not finite".into());
    }
    if f.r_inf_bits_per_s <= 0.0 {
        return Err("the one-way time does not grow with size (fitted slope 0 or less)".into());
    }
    if f.t0_ns <= 0.0 || f.n_half_bytes <= 0.0 {
        return Err(
            "the fitted t0 is not positive (nor, then, n_1/2 = r_inf*t0): the one-way times are not a line t0 + n/r_inf over these sizes"
                .into(),
        );
    }
    Ok(())
}

/// Whether r_max was reached at the largest size, and what that means for r_max and n_1/2
/// in words; the n_1/2 note also covers n_1/2 reached at the smallest size.
fn flattening(
    r_max: f64,
    r_max_size: u64,
    largest: u64,
    has_n_half: bool,
    n_half_at_smallest: bool,
) -> (bool, Option<String>, Option<String>) {
    let at = r_max > 0.0 && r_max_size == largest;
    let r_note = at.then(|| {
        format!(
            "r_max at the largest size ({largest} B): the curve had not flattened, r_max is a lower bound"
        )
    });
    let n_note = if !has_n_half {
        None
    } else if n_half_at_smallest {
        Some("already reached at the smallest size: n_1/2 is at most that".to_owned())
    } else if at {
        Some(
            "an estimate against r_max, which is a lower bound: the true n_1/2 is likely larger"
                .to_owned(),
        )
    } else {
        None
    };
    (at, r_note, n_note)
}

/// One distinct size after merging repeated measurements.
#[derive(Debug, Clone, Copy)]
struct Merged {
    size: u64,
    one_way_ns: f64,
    ci_ns: Option<f64>,
}

/// Bits per second from bytes in nanoseconds.
fn bits_per_s(size: u64, ns: f64) -> f64 {
    size as f64 * 8e9 / ns
}

impl Merged {
    fn throughput(&self) -> f64 {
        bits_per_s(self.size, self.one_way_ns)
    }
}

/// Computes the sweep metrics; `None` when no point has a finite, positive
/// one-way time.
///
/// Points may come in any order. Repeated sizes are averaged, and their CI
/// half-widths combined as sqrt(sum h_i^2) / k, i.e. treated as independent
/// estimates of the same mean; the merged CI is `None` if any repeat has none
/// (a NaN, infinite or negative CI counts as none).
pub fn derive(points: &[SweepPoint]) -> Option<SweepMetrics> {
    let merged = merge_sorted(points);
    let first = *merged.first()?;

    let mut peak = first;
    for p in &merged[1..] {
        // Strictly greater: on a tie the smaller size is the peak.
        if p.throughput() > peak.throughput() {
            peak = *p;
        }
    }
    let r_max = peak.throughput();
    let r_max_ci = peak.ci_ns.and_then(|h| {
        let (slow, fast) = (peak.one_way_ns + h, peak.one_way_ns - h);
        (h.is_finite() && h >= 0.0 && fast > 0.0)
            .then(|| (bits_per_s(peak.size, slow), bits_per_s(peak.size, fast)))
    });

    let (n_half, at_smallest) = n_half(&merged, r_max);
    let largest = merged[merged.len() - 1].size;
    let (at_largest, r_note, n_note) =
        flattening(r_max, peak.size, largest, n_half.is_some(), at_smallest);
    let fit = hockney_fit(&merged);
    let verdict = judge_fit(fit.as_ref(), merged.len()).err();

    Some(SweepMetrics {
        points: merged.len(),
        t0_ns: first.one_way_ns,
        t0_ci_ns: first.ci_ns,
        t0_size: first.size,
        r_max_bits_per_s: r_max,
        r_max_ci_bits_per_s: r_max_ci,
        r_max_size: peak.size,
        n_half_bytes: n_half,
        n_half_at_smallest: at_smallest,
        largest_size: Some(largest),
        r_max_at_largest: Some(at_largest),
        r_max_note: r_note,
        n_half_note: n_note,
        fit,
        fit_valid: Some(verdict.is_none()),
        fit_invalid_reason: verdict,
        left_out: Vec::new(),
    })
}

/// Drops unusable times, sorts by size and averages repeated sizes.
fn merge_sorted(points: &[SweepPoint]) -> Vec<Merged> {
    let mut valid: Vec<SweepPoint> = points
        .iter()
        .filter(|p| p.one_way_ns.is_finite() && p.one_way_ns > 0.0)
        .copied()
        .collect();
    valid.sort_by_key(|p| p.size);

    let mut merged = Vec::with_capacity(valid.len());
    for group in valid.chunk_by(|a, b| a.size == b.size) {
        let k = group.len() as f64;
        let mean = group.iter().map(|p| p.one_way_ns).sum::<f64>() / k;
        let ci = group
            .iter()
            .map(|p| {
                p.one_way_ci_ns
                    .filter(|h| h.is_finite() && *h >= 0.0)
                    .map(|h| h * h)
            })
            .sum::<Option<f64>>()
            .map(|sq| sq.sqrt() / k);
        merged.push(Merged {
            size: group[0].size,
            one_way_ns: mean,
            ci_ns: ci,
        });
    }
    merged
}

/// Returns (n_1/2, reached at the smallest size).
fn n_half(merged: &[Merged], r_max: f64) -> (Option<f64>, bool) {
    // Also catches NaN, which cannot occur for validated times.
    if r_max.is_nan() || r_max <= 0.0 {
        return (None, false);
    }
    let target = r_max / 2.0;
    let Some(i) = merged.iter().position(|p| p.throughput() >= target) else {
        // Unreachable: the peak itself reaches half of itself.
        return (None, false);
    };
    if i == 0 {
        return (Some(merged[0].size as f64), true);
    }
    let (lo, hi) = (merged[i - 1], merged[i]);
    let (r_lo, r_hi) = (lo.throughput(), hi.throughput());
    // r_lo < target <= r_hi, so the denominator is positive.
    let frac = (target - r_lo) / (r_hi - r_lo);
    let n = lo.size as f64 + frac * (hi.size - lo.size) as f64;
    (Some(n), false)
}

/// Ordinary least squares of one-way time against size, as fitted: `None` only when it
/// cannot be computed (fewer than 2 sizes, a slope of exactly 0, anything not finite).
fn hockney_fit(merged: &[Merged]) -> Option<HockneyFit> {
    if merged.len() < 2 {
        return None;
    }
    let k = merged.len() as f64;
    let x_mean = merged.iter().map(|p| p.size as f64).sum::<f64>() / k;
    let y_mean = merged.iter().map(|p| p.one_way_ns).sum::<f64>() / k;
    // Centred sums: raw sums of n^2 reach 1e13 and more for megabyte sizes
    // and would cancel catastrophically against the mean.
    let (mut sxx, mut sxy, mut syy) = (0.0, 0.0, 0.0);
    for p in merged {
        let dx = p.size as f64 - x_mean;
        let dy = p.one_way_ns - y_mean;
        sxx += dx * dx;
        sxy += dx * dy;
        syy += dy * dy;
    }
    let slope = sxy / sxx;
    if !slope.is_finite() || slope == 0.0 {
        return None;
    }
    let t0 = y_mean - slope * x_mean;
    let ss_res: f64 = merged
        .iter()
        .map(|p| {
            let r = p.one_way_ns - (t0 + slope * p.size as f64);
            r * r
        })
        .sum();
    // A non-zero slope implies syy > 0.
    let r_squared = 1.0 - ss_res / syy;
    // The slope is nanoseconds per byte: 1 / slope is bytes per nanosecond.
    let fit = HockneyFit {
        t0_ns: t0,
        r_inf_bits_per_s: 8e9 / slope,
        n_half_bytes: t0 / slope,
        r_squared,
        points: merged.len(),
    };
    let finite = [
        fit.t0_ns,
        fit.r_inf_bits_per_s,
        fit.n_half_bytes,
        fit.r_squared,
    ]
    .iter()
    .all(|v| v.is_finite());
    finite.then_some(fit)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::testutil::assert_rel;

    fn pt(size: u64, one_way_ns: f64) -> SweepPoint {
        SweepPoint {
            size,
            one_way_ns,
            one_way_ci_ns: None,
        }
    }

    /// one_way(n) = 50 us + n / (100 MB/s) at n = 1, 2, 4, ..., 4 MiB.
    fn hockney_points() -> Vec<SweepPoint> {
        (0..23)
            .map(|k| {
                let n = 1u64 << k;
                pt(n, 50e3 + n as f64 * 10.0)
            })
            .collect()
    }

    #[test]
    fn exact_hockney_curve() {
        let m = derive(&hockney_points()).unwrap();
        assert_eq!(m.points, 23);
        assert_eq!(m.t0_size, 1);
        assert_rel(m.t0_ns, 50e3 + 10.0, 1e-15);

        let fit = m.fit.unwrap();
        assert_eq!(fit.points, 23);
        assert_rel(fit.t0_ns, 50e3, 1e-9);
        assert_rel(fit.r_inf_bits_per_s, 8e8, 1e-9);
        assert_rel(fit.n_half_bytes, 5000.0, 1e-9);
        assert_rel(fit.r_squared, 1.0, 1e-9);

        // throughput(n) = 1e8 * n / (5000 + n) grows with n, so the peak is
        // at 4 MiB: 1e8 * 4194304 / 4199304 = 99_880_932.6497915.
        assert_eq!(m.r_max_size, 4_194_304);
        assert_rel(m.r_max_bits_per_s, 8.0 * 99_880_932.649_791_5, 1e-12);
        assert!(m.r_max_bits_per_s < 8e8);

        // Half of r_max is 49_940_466.32; throughput at 4096 is
        // 1e8 * 4096 / 9096 = 45_030_782.76 and at 8192 is
        // 1e8 * 8192 / 13192 = 62_098_241.36, so
        // n_1/2 = 4096 + 4096 * (49_940_466.32 - 45_030_782.76)
        //                     / (62_098_241.36 - 45_030_782.76)
        //       = 576777617408 / 109356875 (exact rational arithmetic)
        //       = 5274.269380941984.
        // It overshoots the true 4988 because throughput is concave in n.
        assert!(!m.n_half_at_smallest);
        assert_rel(
            m.n_half_bytes.unwrap(),
            576_777_617_408.0 / 109_356_875.0,
            1e-12,
        );
        assert_eq!(m.t0_ci_ns, None);
        assert_eq!(m.r_max_ci_bits_per_s, None);

        // A linear one-way time is what the fit is for: valid.
        assert_eq!(m.fit_valid, Some(true));
        assert_eq!(m.fit_invalid_reason, None);
        assert_eq!(m.valid_fit(), m.fit.as_ref());
        // But its throughput rises to the very end: r_max is a lower bound.
        assert_eq!(m.largest_size, Some(4_194_304));
        assert_eq!(m.r_max_at_largest, Some(true));
        assert_eq!(
            m.r_max_note.as_deref(),
            Some("r_max at the largest size (4194304 B): the curve had not flattened, r_max is a lower bound")
        );
        assert_eq!(
            m.n_half_note.as_deref(),
            Some("an estimate against r_max, which is a lower bound: the true n_1/2 is likely larger")
        );
    }

    /// A sweep from 0 bytes (PVM's timings started there): the 0-byte point is t0 itself
    /// and a throughput of 0, and nothing divides by its size.
    #[test]
    fn a_sweep_from_0_bytes_fits_and_its_0_point_is_t0() {
        let pts: Vec<SweepPoint> = [0u64, 64, 1024, 16_384, 65_536]
            .iter()
            .map(|&n| pt(n, 50e3 + n as f64 * 10.0))
            .collect();
        let m = derive(&pts).unwrap();
        assert_eq!((m.points, m.t0_size), (5, 0));
        assert_rel(m.t0_ns, 50e3, 1e-15);
        let fit = m.fit.unwrap();
        assert_eq!(fit.points, 5);
        assert_rel(fit.t0_ns, 50e3, 1e-9);
        assert_rel(fit.r_inf_bits_per_s, 8e8, 1e-9);
        assert_rel(fit.n_half_bytes, 5000.0, 1e-9);
        assert_eq!(m.fit_valid, Some(true));
        assert_eq!(m.r_max_size, 65_536);
        assert_rel(
            m.r_max_bits_per_s,
            65_536.0 * 8e9 / (50e3 + 655_360.0),
            1e-12,
        );
        // Half of r_max lies between 1 KiB and 16 KiB; the 0 B point (throughput 0) is below.
        let half = m.n_half_bytes.unwrap();
        assert!(
            half.is_finite() && half > 1024.0 && half < 16_384.0,
            "{half}"
        );
        assert!(!m.n_half_at_smallest);
    }

    #[test]
    fn a_curve_that_flattened_is_not_flagged() {
        // Throughput n / t: 1 MB/s at 1 B, 1e3/1e-5 = 100 MB/s at 1000 B, 4000/2e-5 = 200 MB/s
        // at 4000 B, then 8000/5e-5 = 160 MB/s at 8000 B: the peak is before the end.
        let m = derive(&[
            pt(1, 1000.0),
            pt(1000, 10000.0),
            pt(4000, 20000.0),
            pt(8000, 50000.0),
        ])
        .unwrap();
        assert_eq!(m.r_max_size, 4000);
        assert_rel(m.r_max_bits_per_s, 16e8, 1e-12);
        assert_eq!(m.largest_size, Some(8000));
        assert_eq!(m.r_max_at_largest, Some(false));
        assert_eq!(m.r_max_note, None);
        // Half of 2e8 is 1e8, reached exactly at 1000 B (1 B gives 1e6).
        assert_rel(m.n_half_bytes.unwrap(), 1000.0, 1e-12);
        assert_eq!(m.n_half_note, None);
    }

    #[test]
    fn a_fit_with_a_negative_t0_is_refused_and_kept_for_inspection() {
        // Sizes 1000, 2000, 3000 B taking 1, 3, 5 us: the line through them is
        // t(n) = -1 us + n * 2 ns/B exactly (x mean 2000, y mean 3 us, Sxx = 2e6,
        // Sxy = 4e-3, slope 2e-9 s/B), so r_inf = 5e8 B/s and n_1/2 = r_inf * t0 = -500 B:
        // a message that takes negative time, which is what `run pingpong --size
        // 1..10M:*1.2 -d 50ms` printed as t0 = -12.03 us.
        let m = derive(&[pt(1000, 1000.0), pt(2000, 3000.0), pt(3000, 5000.0)]).unwrap();
        let fit = m.fit.unwrap();
        assert_rel(fit.t0_ns, -1e3, 1e-9);
        assert_rel(fit.r_inf_bits_per_s, 40e8, 1e-12);
        assert_rel(fit.n_half_bytes, -500.0, 1e-9);
        assert_rel(fit.r_squared, 1.0, 1e-12);
        assert_eq!(fit.points, 3);
        assert_eq!(m.fit_valid, Some(false));
        assert_eq!(m.valid_fit(), None);
        assert_eq!(
            m.fit_invalid_reason.as_deref(),
            Some("the fitted t0 is not positive (nor, then, n_1/2 = r_inf*t0): the one-way times are not a line t0 + n/r_inf over these sizes")
        );
        // Throughput 1e9, 6.67e8, 6e8 B/s: the peak at the smallest size, so flattened.
        assert_eq!((m.r_max_size, m.r_max_at_largest), (1000, Some(false)));
    }

    #[test]
    fn unsorted_input_gives_the_same_metrics() {
        let sorted = hockney_points();
        let mut shuffled = sorted.clone();
        shuffled.reverse();
        shuffled.swap(3, 17);
        shuffled.swap(0, 11);
        assert_eq!(derive(&shuffled), derive(&sorted));
        let m = derive(&shuffled).unwrap();
        assert_eq!(m.t0_size, 1);
        assert_eq!(m.r_max_size, 4_194_304);
    }

    #[test]
    fn single_point() {
        let m = derive(&[SweepPoint {
            size: 1000,
            one_way_ns: 10000.0,
            one_way_ci_ns: Some(2000.0),
        }])
        .unwrap();
        assert_eq!(m.points, 1);
        assert_eq!((m.t0_size, m.t0_ns, m.t0_ci_ns), (1000, 1e4, Some(2e3)));
        assert_eq!(m.r_max_size, 1000);
        assert_rel(m.r_max_bits_per_s, 8e8, 1e-15);
        // 1000 / 12 us and 1000 / 8 us.
        let (lo, hi) = m.r_max_ci_bits_per_s.unwrap();
        assert_rel(lo, 8.0 * 1000.0 / 12e-6, 1e-12);
        assert_rel(hi, 8.0 * 1000.0 / 8e-6, 1e-12);
        assert_eq!(m.n_half_bytes, Some(1000.0));
        assert!(m.n_half_at_smallest);
        assert_eq!(
            m.n_half_note.as_deref(),
            Some("already reached at the smallest size: n_1/2 is at most that")
        );
        assert_eq!(m.fit, None);
        assert_eq!(m.fit_valid, Some(false));
        assert_eq!(
            m.fit_invalid_reason.as_deref(),
            Some("1 size measured, a fit needs at least 3")
        );
        // One size shows no curve at all, let alone a flat one.
        assert_eq!(m.r_max_at_largest, Some(true));
    }

    #[test]
    fn two_points_have_no_valid_fit() {
        // The line through two points: t0 = 10 us - 1 * 1e-5/999 s, exact, R^2 = 1, and
        // meaningless; kept for inspection only.
        let m = derive(&[pt(1, 10000.0), pt(1000, 20000.0)]).unwrap();
        assert_eq!(m.points, 2);
        let fit = m.fit.unwrap();
        assert_rel(fit.r_inf_bits_per_s, 8.0 * 999.0 / 1e-5, 1e-9);
        assert_eq!(fit.points, 2);
        assert_eq!(m.fit_valid, Some(false));
        assert_eq!(
            m.fit_invalid_reason.as_deref(),
            Some("2 sizes measured, a fit needs at least 3")
        );
        assert_eq!(m.valid_fit(), None);
    }

    #[test]
    fn flat_curve() {
        // Constant time: throughput grows linearly, so interpolation is
        // exact and n_1/2 is half the largest size; the slope is 0: no fit.
        let pts: Vec<SweepPoint> = [64u64, 128, 256, 512, 1024]
            .iter()
            .map(|&n| pt(n, 2000.0))
            .collect();
        let m = derive(&pts).unwrap();
        assert_eq!(m.r_max_size, 1024);
        assert_rel(m.r_max_bits_per_s, 8.0 * 1024.0 / 2e-6, 1e-15);
        assert_rel(m.n_half_bytes.unwrap(), 512.0, 1e-12);
        assert!(!m.n_half_at_smallest);
        assert_eq!(m.fit, None);
        assert_eq!(m.fit_valid, Some(false));
        assert_eq!(
            m.fit_invalid_reason.as_deref(),
            Some("the one-way time does not grow with size (fitted slope 0 or less)")
        );
        assert_eq!(m.r_max_at_largest, Some(true));
    }

    #[test]
    fn decreasing_times_have_no_valid_fit() {
        let m = derive(&[pt(1, 30000.0), pt(2, 20000.0), pt(3, 10000.0)]).unwrap();
        // Slope -1e-5 s/B: r_inf = -1e5 B/s, kept as fitted, refused.
        assert_rel(m.fit.unwrap().r_inf_bits_per_s, -8e5, 1e-9);
        assert_eq!(m.fit_valid, Some(false));
        assert_eq!(
            m.fit_invalid_reason.as_deref(),
            Some("the one-way time does not grow with size (fitted slope 0 or less)")
        );
        // Throughput 1/3e-5, 2/2e-5, 3/1e-5: peak at 3 is 3e5, half 1.5e5;
        // 33_333 at 1 and 100_000 at 2 are below, so n_1/2 lies between
        // 2 and 3: 2 + (150_000 - 100_000) / (300_000 - 100_000) = 2.25.
        assert_eq!(m.r_max_size, 3);
        assert_rel(m.n_half_bytes.unwrap(), 2.25, 1e-12);
    }

    #[test]
    fn first_crossing_counts_not_a_later_one() {
        // Throughput 1e5, 6e5, 1e5, 1e6 at sizes 1, 2, 3, 10: half the peak
        // (5e5) is first crossed between 1 and 2, again between 3 and 10;
        // the first: 1 + (5e5 - 1e5) / (6e5 - 1e5) = 1.8.
        let m = derive(&[
            pt(1, 10000.0),
            pt(2, 2e9 / 6e5),
            pt(3, 30000.0),
            pt(10, 10000.0),
        ])
        .unwrap();
        assert_eq!(m.r_max_size, 10);
        assert_rel(m.n_half_bytes.unwrap(), 1.8, 1e-12);
    }

    #[test]
    fn peak_tie_picks_the_smaller_size() {
        let m = derive(&[pt(100, 1000.0), pt(200, 2000.0), pt(50, 1000.0)]).unwrap();
        assert_eq!(m.r_max_size, 100);
        // 50 B gives 5e7 = r_max / 2 exactly: reached at the smallest size.
        assert_eq!(m.n_half_bytes, Some(50.0));
        assert!(m.n_half_at_smallest);
    }

    #[test]
    fn invalid_times_are_ignored() {
        let m = derive(&[
            pt(1, f64::NAN),
            pt(2, 0.0),
            pt(3, -1000.0),
            pt(4, f64::INFINITY),
            pt(8, 1000.0),
        ])
        .unwrap();
        assert_eq!(m.points, 1);
        assert_eq!(m.t0_size, 8);
        assert_eq!(derive(&[pt(1, f64::NAN)]), None);
        assert_eq!(derive(&[]), None);
    }

    #[test]
    fn repeated_sizes_are_averaged() {
        let m = derive(&[
            SweepPoint {
                size: 8,
                one_way_ns: 1000.0,
                one_way_ci_ns: Some(30.0),
            },
            pt(16, 4000.0),
            SweepPoint {
                size: 8,
                one_way_ns: 3000.0,
                one_way_ci_ns: Some(40.0),
            },
        ])
        .unwrap();
        assert_eq!(m.points, 2);
        assert_eq!(m.t0_size, 8);
        assert_rel(m.t0_ns, 2e3, 1e-15);
        // sqrt(3^2 + 4^2) / 2 = 2.5 (times 1e-8).
        assert_rel(m.t0_ci_ns.unwrap(), 25.0, 1e-12);
        // 8 / 2 us = 16 / 4 us = 4e6: a tie, so the smaller size is the peak.
        assert_eq!(m.r_max_size, 8);

        let no_ci = derive(&[
            SweepPoint {
                size: 8,
                one_way_ns: 1000.0,
                one_way_ci_ns: Some(30.0),
            },
            pt(8, 3000.0),
        ])
        .unwrap();
        assert_eq!(no_ci.t0_ci_ns, None);

        let bad_ci = derive(&[SweepPoint {
            size: 8,
            one_way_ns: 1000.0,
            one_way_ci_ns: Some(f64::NAN),
        }])
        .unwrap();
        assert_eq!(bad_ci.t0_ci_ns, None);
        assert_eq!(bad_ci.r_max_ci_bits_per_s, None);
    }

    #[test]
    fn wide_ci_has_no_throughput_interval() {
        let m = derive(&[SweepPoint {
            size: 100,
            one_way_ns: 1000.0,
            one_way_ci_ns: Some(1000.0),
        }])
        .unwrap();
        assert_eq!(m.r_max_ci_bits_per_s, None);
    }

    #[test]
    fn zero_byte_messages() {
        // Only empty messages: latency is meaningful, throughput is not.
        let only_zero = derive(&[pt(0, 1000.0)]).unwrap();
        assert_eq!(only_zero.t0_size, 0);
        assert_eq!(only_zero.r_max_bits_per_s, 0.0);
        assert_eq!(only_zero.n_half_bytes, None);
        assert!(!only_zero.n_half_at_smallest);

        // A 0-byte point sets t0 and anchors the interpolation at 0.
        let m = derive(&[pt(0, 1000.0), pt(100, 1000.0)]).unwrap();
        assert_eq!((m.t0_size, m.t0_ns), (0, 1e3));
        assert_rel(m.n_half_bytes.unwrap(), 50.0, 1e-12);
    }

    #[test]
    fn noisy_fit_by_hand() {
        // x = 0, 1, 2, 3 with y = 1, 3, 2, 4 (microseconds):
        // x mean 1.5, y mean 2.5; Sxx = 5, Sxy = 4, Syy = 5;
        // slope 0.8, intercept 2.5 - 1.2 = 1.3;
        // residuals -0.3, 0.9, -0.9, 0.3: SSres = 1.8; R^2 = 1 - 1.8/5 = 0.64.
        let pts: Vec<SweepPoint> = [(0, 1.0), (1, 3.0), (2, 2.0), (3, 4.0)]
            .iter()
            .map(|&(n, us)| pt(n, us * 1e3))
            .collect();
        let fit = derive(&pts).unwrap().fit.unwrap();
        assert_rel(fit.t0_ns, 1.3e3, 1e-12);
        assert_rel(fit.r_inf_bits_per_s, 8.0 / 0.8e-6, 1e-12);
        assert_rel(fit.n_half_bytes, 1.3 / 0.8, 1e-12);
        assert_rel(fit.r_squared, 0.64, 1e-12);
        assert_eq!(fit.points, 4);
    }

    #[test]
    fn documents_from_before_the_judgements_are_judged_when_read() {
        // A sweep_metrics object as wirebench wrote it before fits were judged: a fit with a
        // negative t0 (the README's example printed t0 = -0.02 us, n_1/2 = -66 B).
        let old = serde_json::json!({
            "points": 12, "t0_ns": 3.4e4, "t0_ci_ns": 1e2, "t0_size": 1,
            "r_max_bits_per_s": 4.08e10, "r_max_ci_bits_per_s": null, "r_max_size": 4194304,
            "n_half_bytes": 109843.0, "n_half_at_smallest": false,
            "fit": {"t0_ns": -20.0, "r_inf_bits_per_s": 2.64e10, "n_half_bytes": -66.0,
                    "r_squared": 0.99, "points": 12}
        });
        let mut m: SweepMetrics = serde_json::from_value(old).unwrap();
        assert_eq!(
            (m.fit_valid, m.r_max_at_largest, m.largest_size),
            (None, None, None)
        );
        m.fill_validity(Some(4194304));
        assert_eq!(m.fit_valid, Some(false));
        assert!(m
            .fit_invalid_reason
            .unwrap()
            .starts_with("the fitted t0 is not positive"));
        assert_eq!(m.r_max_at_largest, Some(true));
        assert!(m.r_max_note.unwrap().contains("r_max is a lower bound"));
        assert!(m
            .n_half_note
            .unwrap()
            .starts_with("an estimate against r_max"));
        // An old document without a fit and with three sizes or more had a non-positive slope.
        let mut none: SweepMetrics = serde_json::from_value(serde_json::json!({
            "points": 3, "t0_ns": 1e4, "t0_ci_ns": null, "t0_size": 1,
            "r_max_bits_per_s": 8e5, "r_max_ci_bits_per_s": null, "r_max_size": 2,
            "n_half_bytes": 1.5, "n_half_at_smallest": false, "fit": null
        }))
        .unwrap();
        none.fill_validity(Some(3));
        assert_eq!(none.fit_valid, Some(false));
        assert_eq!(none.r_max_at_largest, Some(false));
    }
}
