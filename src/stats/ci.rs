//! Student-t confidence intervals of a mean.

use serde::{Deserialize, Serialize};
use statrs::distribution::{ContinuousCDF, Normal, StudentsT};

/// Degrees of freedom from which the t quantile comes from the Cornish-Fisher
/// expansion instead of statrs.
///
/// statrs 0.19 inverts the regularised incomplete beta function, which loses
/// accuracy past roughly 1e4 degrees of freedom (relative error 1e-6 at 1e5,
/// 6e-5 at 1e6, and completely wrong answers at 1e7), and latency runs easily
/// collect millions of samples. Between 200 and 1e4 degrees of freedom both
/// methods agree to about 1e-12, so the switch point is not critical; 1000
/// keeps a wide margin on both sides.
const CORNISH_FISHER_MIN_DF: f64 = 1000.0;

/// Two-sided Student-t quantile t_{(1+c)/2, df}.
pub(crate) fn t_quantile(confidence: f64, df: f64) -> Option<f64> {
    let valid = confidence > 0.0 && confidence < 1.0 && df > 0.0 && df.is_finite();
    if !valid {
        return None;
    }
    let p = (1.0 + confidence) / 2.0;
    // (1 + c) / 2 rounds to exactly 1.0 for c within an ulp of 1, where the
    // quantile is infinite; statrs also asserts on its input range.
    if p <= 0.5 || p >= 1.0 {
        return None;
    }
    let t = if df >= CORNISH_FISHER_MIN_DF {
        cornish_fisher_t(p, df)?
    } else {
        StudentsT::new(0.0, 1.0, df).ok()?.inverse_cdf(p)
    };
    t.is_finite().then_some(t)
}

/// Student-t quantile by the Cornish-Fisher expansion around the normal
/// quantile (Abramowitz & Stegun 26.7.5), accurate to ~1e-13 relative for
/// df >= 1000 at any practical confidence level.
fn cornish_fisher_t(p: f64, df: f64) -> Option<f64> {
    let z = Normal::new(0.0, 1.0).ok()?.inverse_cdf(p);
    let z2 = z * z;
    let g1 = z * (z2 + 1.0) / 4.0;
    let g2 = z * ((5.0 * z2 + 16.0) * z2 + 3.0) / 96.0;
    let g3 = z * (((3.0 * z2 + 19.0) * z2 + 17.0) * z2 - 15.0) / 384.0;
    let g4 = z * ((((79.0 * z2 + 776.0) * z2 + 1482.0) * z2 - 1920.0) * z2 - 945.0) / 92160.0;
    let inv = 1.0 / df;
    Some(z + inv * (g1 + inv * (g2 + inv * (g3 + inv * g4))))
}

/// Half-width of the two-sided Student-t confidence interval of a mean:
/// `t_{(1+c)/2, n-1} * stddev / sqrt(n)`.
///
/// `stddev` is the sample standard deviation (n-1 denominator) and
/// `confidence` a fraction such as 0.95. Returns `None` when `n < 2`, when
/// `stddev` is negative or not finite, or when `confidence` is not strictly
/// between 0 and 1.
pub fn student_t_half_width(stddev: f64, n: u64, confidence: f64) -> Option<f64> {
    if n < 2 || !stddev.is_finite() || stddev < 0.0 {
        return None;
    }
    let nf = n as f64;
    let t = t_quantile(confidence, nf - 1.0)?;
    let hw = t * stddev / nf.sqrt();
    hw.is_finite().then_some(hw)
}

/// Mean of a set of samples with its Student-t confidence interval.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct MeanCi {
    pub n: u64,
    pub mean: f64,
    /// Sample standard deviation (n-1 denominator); 0 when n = 1.
    pub stddev: f64,
    /// Confidence level as a fraction, e.g. 0.95.
    pub confidence: f64,
    /// `None` when n < 2 or the confidence level is invalid.
    pub half_width: Option<f64>,
}

impl MeanCi {
    /// Returns `None` when `xs` is empty, when any value is not finite, or
    /// when the moments overflow `f64`.
    pub fn from_samples(xs: &[f64], confidence: f64) -> Option<MeanCi> {
        if xs.is_empty() || xs.iter().any(|x| !x.is_finite()) {
            return None;
        }
        // Two passes: an incremental mean cannot overflow where a plain sum
        // of large values would, and centring before squaring avoids the
        // cancellation of the textbook sum-of-squares formula.
        let mut mean = 0.0;
        for (i, &x) in xs.iter().enumerate() {
            mean += (x - mean) / (i as f64 + 1.0);
        }
        let m2: f64 = xs.iter().map(|&x| (x - mean) * (x - mean)).sum();
        let n = xs.len() as u64;
        let stddev = if n > 1 {
            (m2 / (n - 1) as f64).sqrt()
        } else {
            0.0
        };
        if !mean.is_finite() || !stddev.is_finite() {
            return None;
        }
        Some(MeanCi {
            n,
            mean,
            stddev,
            confidence,
            half_width: student_t_half_width(stddev, n, confidence),
        })
    }

    /// Half-width relative to the magnitude of the mean (0.02 = ±2 %).
    pub fn relative_half_width(&self) -> Option<f64> {
        if self.mean == 0.0 {
            return None;
        }
        let rel = self.half_width? / self.mean.abs();
        rel.is_finite().then_some(rel)
    }
}

/// Converts a command-line confidence level in percent to a fraction.
///
/// Only the conventional levels are accepted so that reports stay comparable
/// across runs and machines.
pub fn parse_confidence(level: u32) -> Result<f64, String> {
    match level {
        90 => Ok(0.90),
        95 => Ok(0.95),
        99 => Ok(0.99),
        other => Err(format!(
            "invalid confidence level \"{other}\": accepted levels are 90, 95 and 99 (percent)"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::testutil::assert_rel;

    /// Recovers t from the half-width of a unit standard deviation.
    fn t_of(n: u64, confidence: f64) -> f64 {
        student_t_half_width(1.0, n, confidence).unwrap() * (n as f64).sqrt()
    }

    #[test]
    fn t_quantiles_match_printed_table() {
        // Three-decimal values from a standard two-sided t table.
        let table = [
            (5, 0.95, 2.776),
            (10, 0.99, 3.250),
            (30, 0.90, 1.699),
            (2, 0.95, 12.706),
            (8, 0.95, 2.365),
            (4, 0.95, 3.182),
            (21, 0.95, 2.086),
            (121, 0.95, 1.980),
        ];
        for (n, c, t) in table {
            let got = t_of(n, c);
            assert!((got - t).abs() < 5e-4, "n={n} c={c}: got {got}, table {t}");
        }
    }

    #[test]
    fn t_quantiles_match_high_precision_reference() {
        // Reference values from mpmath (40 digits) root-finding on the
        // regularised incomplete beta form of the t CDF.
        let reference = [
            (5, 0.95, 2.776_445_105_197_793),
            (10, 0.99, 3.249_835_541_592_126),
            (30, 0.90, 1.699_127_026_533_497),
            (8, 0.95, 2.364_624_251_592_785),
            (2, 0.90, 6.313_751_514_675_037),
            (1000, 0.95, 1.962_341_461_133_45),
            (1001, 0.95, 1.962_339_080_826_408),
            (1_000_001, 0.95, 1.959_966_356_814_107),
            (1_000_000_001, 0.95, 1.959_963_986_912_325),
        ];
        for (n, c, t) in reference {
            assert_rel(t_of(n, c), t, 1e-10);
        }
    }

    #[test]
    fn both_quantile_methods_agree_at_the_switch() {
        for c in [0.5, 0.9, 0.95, 0.99, 0.999] {
            let p = (1.0 + c) / 2.0;
            for df in [999.0, 1000.0, 1001.0] {
                let statrs = StudentsT::new(0.0, 1.0, df).unwrap().inverse_cdf(p);
                assert_rel(cornish_fisher_t(p, df).unwrap(), statrs, 1e-11);
            }
        }
    }

    #[test]
    fn t_quantile_is_monotone_in_sample_count() {
        let mut prev = f64::INFINITY;
        for n in (2..5000).chain([10_000, 100_000, 10_000_000, u64::MAX]) {
            let t = t_of(n, 0.95);
            assert!(t < prev && t > 1.959_963, "n={n}: {t} after {prev}");
            prev = t;
        }
    }

    #[test]
    fn half_width_rejects_bad_inputs() {
        assert_eq!(student_t_half_width(1.0, 0, 0.95), None);
        assert_eq!(student_t_half_width(1.0, 1, 0.95), None);
        assert_eq!(student_t_half_width(f64::NAN, 5, 0.95), None);
        assert_eq!(student_t_half_width(f64::INFINITY, 5, 0.95), None);
        assert_eq!(student_t_half_width(-1.0, 5, 0.95), None);
        assert_eq!(student_t_half_width(1.0, 5, 0.0), None);
        assert_eq!(student_t_half_width(1.0, 5, 1.0), None);
        assert_eq!(student_t_half_width(1.0, 5, 95.0), None);
        assert_eq!(student_t_half_width(1.0, 5, -0.5), None);
        assert_eq!(student_t_half_width(1.0, 5, f64::NAN), None);
        // (1 + c) / 2 rounds to 1.0 here: the quantile would be infinite.
        assert_eq!(student_t_half_width(1.0, 5, 1.0 - f64::EPSILON / 2.0), None);
        assert_eq!(student_t_half_width(0.0, 5, 0.95), Some(0.0));
    }

    #[test]
    fn half_width_never_panics_over_a_grid() {
        for n in [2, 3, 10, 999, 1000, 1001, 1 << 40, u64::MAX] {
            for c in [1e-300, 1e-12, 0.5, 0.9999, 1.0 - 1e-12, 1.0 - 1e-15] {
                if let Some(h) = student_t_half_width(1.0, n, c) {
                    assert!(h.is_finite() && h >= 0.0);
                }
            }
        }
    }

    #[test]
    fn mean_ci_by_hand() {
        // xs = 2 4 4 4 5 5 7 9: sum 40, mean 5; squared deviations
        // 9 1 1 1 0 0 4 16 = 32; s^2 = 32/7; s = 2.138089935299395.
        // t_{0.975,7} = 2.3646242515927853 (table: 2.365).
        // half-width = 2.3646242515927853 * 2.138089935299395 / sqrt(8)
        //            = 1.787487918236211
        let ci = MeanCi::from_samples(&[2.0, 4.0, 4.0, 4.0, 5.0, 5.0, 7.0, 9.0], 0.95).unwrap();
        assert_eq!(ci.n, 8);
        assert_rel(ci.mean, 5.0, 1e-15);
        assert_rel(ci.stddev, 2.138_089_935_299_395, 1e-14);
        assert_rel(ci.half_width.unwrap(), 1.787_487_918_236_211, 1e-10);
        assert_rel(
            ci.relative_half_width().unwrap(),
            1.787_487_918_236_211 / 5.0,
            1e-10,
        );
        assert_eq!(ci.confidence, 0.95);
    }

    #[test]
    fn mean_ci_negative_mean_uses_magnitude() {
        let ci =
            MeanCi::from_samples(&[-2.0, -4.0, -4.0, -4.0, -5.0, -5.0, -7.0, -9.0], 0.95).unwrap();
        assert_rel(ci.mean, -5.0, 1e-15);
        assert_rel(
            ci.relative_half_width().unwrap(),
            1.787_487_918_236_211 / 5.0,
            1e-10,
        );
    }

    #[test]
    fn mean_ci_edge_cases() {
        assert_eq!(MeanCi::from_samples(&[], 0.95), None);
        assert_eq!(MeanCi::from_samples(&[1.0, f64::NAN], 0.95), None);
        assert_eq!(MeanCi::from_samples(&[1.0, f64::INFINITY], 0.95), None);
        assert_eq!(MeanCi::from_samples(&[f64::MAX, -f64::MAX], 0.95), None);

        let one = MeanCi::from_samples(&[3.5], 0.95).unwrap();
        assert_eq!((one.n, one.mean, one.stddev), (1, 3.5, 0.0));
        assert_eq!(one.half_width, None);
        assert_eq!(one.relative_half_width(), None);

        let zero_mean = MeanCi::from_samples(&[-1.0, 1.0], 0.95).unwrap();
        assert_eq!(zero_mean.mean, 0.0);
        assert!(zero_mean.half_width.is_some());
        assert_eq!(zero_mean.relative_half_width(), None);

        let bad_level = MeanCi::from_samples(&[1.0, 2.0], 1.5).unwrap();
        assert_eq!(bad_level.half_width, None);

        let constant = MeanCi::from_samples(&[7.0; 10], 0.99).unwrap();
        assert_eq!(constant.stddev, 0.0);
        assert_eq!(constant.half_width, Some(0.0));
    }

    #[test]
    fn confidence_levels() {
        assert_eq!(parse_confidence(90), Ok(0.90));
        assert_eq!(parse_confidence(95), Ok(0.95));
        assert_eq!(parse_confidence(99), Ok(0.99));
        for bad in [0, 1, 50, 94, 96, 100, 999, u32::MAX] {
            let err = parse_confidence(bad).unwrap_err();
            assert!(err.contains(&format!("\"{bad}\"")), "{err}");
            assert!(err.contains("90, 95 and 99"), "{err}");
            assert!(!err.contains('\n'));
        }
    }
}
