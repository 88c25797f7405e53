//! Welch's unequal-variance t-test on summary statistics (mean, standard deviation, count),
//! which is all a stored result keeps of its samples.

use statrs::function::beta::beta_reg;
use statrs::function::erf::erfc;

/// Degrees of freedom above which the p-value comes from the normal distribution.
///
/// statrs' regularised incomplete beta function, which gives the t tail, loses accuracy
/// when its first parameter (df / 2) reaches the millions, as latency samples easily do;
/// from 1e5 degrees of freedom the t and normal two-sided tails differ by less than 1e-4 of
/// the p-value for |t| < 6, far below what a comparison reports.
const NORMAL_MIN_DF: f64 = 1e5;

/// Summary statistics of one group of samples.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Sample {
    pub mean: f64,
    /// Sample standard deviation (n-1 denominator).
    pub stddev: f64,
    pub n: u64,
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Welch {
    /// (mean of b - mean of a) / standard error; infinite when both groups have no spread
    /// and different means.
    pub t: f64,
    /// Welch-Satterthwaite degrees of freedom.
    pub df: f64,
    /// Two-sided p-value of "the means are equal".
    pub p_value: f64,
}

/// Two-sided p-value of Student's t with `df` degrees of freedom: I_{df/(df+t^2)}(df/2, 1/2).
fn two_sided_p(t: f64, df: f64) -> Option<f64> {
    let p = if df >= NORMAL_MIN_DF {
        erfc(t.abs() / std::f64::consts::SQRT_2)
    } else {
        beta_reg(df / 2.0, 0.5, df / (df + t * t))
    };
    (p.is_finite() && (0.0..=1.0).contains(&p)).then_some(p)
}

/// Tests whether `a` and `b` have the same mean. `None` when a group has fewer than two
/// samples or a statistic is not finite: then nothing can be said about significance.
pub fn welch(a: Sample, b: Sample) -> Option<Welch> {
    let valid =
        |s: &Sample| s.n >= 2 && s.mean.is_finite() && s.stddev.is_finite() && s.stddev >= 0.0;
    if !valid(&a) || !valid(&b) {
        return None;
    }
    let (na, nb) = (a.n as f64, b.n as f64);
    let (va, vb) = (a.stddev * a.stddev / na, b.stddev * b.stddev / nb);
    let se2 = va + vb;
    let diff = b.mean - a.mean;
    if se2 == 0.0 {
        // No spread at all: identical means are equal, different ones certainly differ.
        let df = na + nb - 2.0;
        return Some(if diff == 0.0 {
            Welch {
                t: 0.0,
                df,
                p_value: 1.0,
            }
        } else {
            Welch {
                t: f64::INFINITY.copysign(diff),
                df,
                p_value: 0.0,
            }
        });
    }
    let t = diff / se2.sqrt();
    let df = se2 * se2 / (va * va / (na - 1.0) + vb * vb / (nb - 1.0));
    if !t.is_finite() || !df.is_finite() || df <= 0.0 {
        return None;
    }
    Some(Welch {
        t,
        df,
        p_value: two_sided_p(t, df)?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::testutil::assert_rel;

    #[test]
    fn tail_matches_high_precision_reference() {
        // mpmath, 40 digits: betainc(df/2, 1/2, 0, df/(df+t^2), regularized=True).
        let reference = [
            (2.0, 10.0, 0.073_388_034_770_740_37),
            (2.5, 1e3, 0.012_578_567_801_090_797),
            (3.0, 1e4, 0.002_706_448_189_997_666),
            (2.0, 1e5, 0.045_502_963_457_506_46),
            (3.5, 1e6, 0.000_465_278_393_681_035),
            (1.0, 1e7, 0.317_310_532_059_985_95),
            (4.0, 3.3, 0.023_412_152_287_569_63),
        ];
        for (t, df, p) in reference {
            assert_rel(two_sided_p(t, df).unwrap(), p, 1e-4);
            assert_rel(two_sided_p(-t, df).unwrap(), p, 1e-4);
        }
    }

    #[test]
    fn welch_by_hand() {
        // a: 27.5 ± 1.5 (n=10), b: 29.0 ± 2.0 (n=12).
        // va = 2.25/10 = 0.225, vb = 4/12 = 0.3333; se = sqrt(0.5583) = 0.74722
        // t = 1.5 / 0.74722 = 2.007449
        // df = 0.5583^2 / (0.225^2/9 + 0.3333^2/11) = 19.82296
        let w = welch(
            Sample {
                mean: 27.5,
                stddev: 1.5,
                n: 10,
            },
            Sample {
                mean: 29.0,
                stddev: 2.0,
                n: 12,
            },
        )
        .unwrap();
        assert_rel(w.t, 2.007_448_815_354_617, 1e-12);
        assert_rel(w.df, 19.822_962_665_596_146, 1e-12);
        // mpmath: the two-sided tail at that t and df.
        assert_rel(w.p_value, 0.058_530_229_941_618_38, 1e-9);
    }

    #[test]
    fn degenerate_groups() {
        let s = |mean, stddev, n| Sample { mean, stddev, n };
        assert_eq!(welch(s(1.0, 1.0, 1), s(1.0, 1.0, 5)), None);
        assert_eq!(welch(s(f64::NAN, 1.0, 3), s(1.0, 1.0, 5)), None);
        assert_eq!(welch(s(1.0, -1.0, 3), s(1.0, 1.0, 5)), None);
        let same = welch(s(5.0, 0.0, 3), s(5.0, 0.0, 4)).unwrap();
        assert_eq!(same.p_value, 1.0);
        let differ = welch(s(5.0, 0.0, 3), s(6.0, 0.0, 4)).unwrap();
        assert_eq!(differ.p_value, 0.0);
        assert!(differ.t > 0.0);
        let equal_means = welch(s(5.0, 1.0, 30), s(5.0, 2.0, 40)).unwrap();
        assert_eq!(equal_means.t, 0.0);
        assert_rel(equal_means.p_value, 1.0, 1e-12);
    }
}
