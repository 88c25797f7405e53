//! Regressions found by the agent itself: after each run, a test's latest runs (the recent
//! window) against the runs before them (the baseline window), with the statistics `compare`
//! uses (Welch's interval of recent / baseline on the runs' headline figures, judged against
//! an equivalence margin): a change is a regression only when its whole interval lies beyond
//! the threshold on the worse side, so equal windows, or noise, never are.

use crate::agent::config::Regression;
use crate::stats::between_runs::{judge, test, Judgement};

/// What the comparison found.
#[derive(Debug, Clone, PartialEq)]
pub struct Comparison {
    pub judgement: Judgement,
    /// Geometric means of the windows, in the figure's unit.
    pub baseline: f64,
    pub recent: f64,
    /// Interval of (recent / baseline - 1), percent.
    pub ci_low_percent: f64,
    pub ci_high_percent: f64,
}

impl Comparison {
    pub fn regressed(&self) -> bool {
        self.judgement == Judgement::Worse
    }

    /// The change of the geometric means, percent.
    pub fn change_percent(&self) -> f64 {
        (self.recent / self.baseline - 1.0) * 100.0
    }
}

/// Compares the newest `recent_runs` figures of `newest_first` with the `baseline_runs`
/// before them; None until both windows are full, or when a figure is not positive.
pub fn compare(
    newest_first: &[f64],
    config: &Regression,
    higher_is_better: bool,
) -> Option<Comparison> {
    if newest_first.len() < config.recent_runs + config.baseline_runs {
        return None;
    }
    let recent = &newest_first[..config.recent_runs];
    let baseline = &newest_first[config.recent_runs..config.recent_runs + config.baseline_runs];
    let t = test(baseline, recent, config.confidence).ok()?;
    Some(Comparison {
        judgement: judge(&t, config.threshold_percent, higher_is_better),
        baseline: geometric_mean(baseline),
        recent: geometric_mean(recent),
        ci_low_percent: t.ci_low_percent,
        ci_high_percent: t.ci_high_percent,
    })
}

fn geometric_mean(v: &[f64]) -> f64 {
    (v.iter().map(|x| x.ln()).sum::<f64>() / v.len() as f64).exp()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config() -> Regression {
        Regression {
            baseline_runs: 10,
            recent_runs: 5,
            threshold_percent: 10.0,
            confidence: 0.95,
        }
    }

    /// Figures around `level` with a few percent of deterministic noise.
    fn noisy(level: f64, n: usize, seed: u64) -> Vec<f64> {
        let mut rng = fastrand::Rng::with_seed(seed);
        (0..n)
            .map(|_| level * (1.0 + (rng.f64() - 0.5) * 0.06))
            .collect()
    }

    #[test]
    fn nothing_until_both_windows_are_full() {
        assert_eq!(compare(&[1.0; 14], &config(), false), None);
        assert!(compare(&[1.0; 15], &config(), false).is_some());
    }

    #[test]
    fn equal_windows_are_never_a_regression() {
        let c = compare(&[30e-6; 15], &config(), false).unwrap();
        assert_eq!(c.judgement, Judgement::Equivalent);
        assert!(!c.regressed());
        for seed in 0..200 {
            let v = noisy(30e-6, 15, seed);
            for higher in [false, true] {
                let c = compare(&v, &config(), higher).unwrap();
                assert!(!c.regressed(), "seed {seed}: {c:?}");
            }
        }
    }

    #[test]
    fn a_clear_change_the_worse_way_is_one_and_the_better_way_is_not() {
        // Newest first: recent latencies 50% higher than the baseline.
        let mut v = noisy(45e-6, 5, 1);
        v.extend(noisy(30e-6, 10, 2));
        let c = compare(&v, &config(), false).unwrap();
        assert!(c.regressed(), "{c:?}");
        assert!(c.ci_low_percent > 10.0, "{c:?}");
        assert!((c.change_percent() - 50.0).abs() < 10.0, "{c:?}");
        // The same figures as a throughput (higher is better): better, not a regression.
        let c = compare(&v, &config(), true).unwrap();
        assert_eq!(c.judgement, Judgement::Better);
        // A change inside the threshold is not one.
        let mut v = noisy(31.5e-6, 5, 3);
        v.extend(noisy(30e-6, 10, 4));
        assert!(!compare(&v, &config(), false).unwrap().regressed());
    }
}
