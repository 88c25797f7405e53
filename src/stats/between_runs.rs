//! The test `compare` judges a change with: between RUNS, never between the samples of one
//! run, with an equivalence margin below which no change is called worse or better.
//!
//! Why on runs: the samples of one run (round trips, intervals) are autocorrelated and
//! heavy-tailed, and two runs of the same command differ by more than their samples' spread
//! explains (the host, the caches, the scheduler change between runs). A t-test on the samples
//! of one run each treats thousands of correlated samples as independent and finds a
//! "significant" difference between any two runs (p = 6.6e-177 for the same command twice).
//! Independent repetitions are what a difference between configurations must stand out from,
//! as Kalibera and Jones argue in "Rigorous Benchmarking in Reasonable Time".
//!
//! Why Welch's t on the logarithms of the per-run figures: each run's figure (a mean over
//! thousands of samples, or bytes over a phase) is close to normal by the central limit
//! theorem even when its samples are heavy-tailed, so a t-test on a few runs holds its level
//! (the simulation below checks it on autocorrelated, heavy-tailed series); its variation
//! from run to run is multiplicative (a rate or a time), and the margin is stated as a ratio,
//! so the test runs on ln(figure) and its interval is one of B / A. A rank test
//! (Mann-Whitney) cannot reach p < 0.1 with three runs a side, the usual `--repeat 3`.
//!
//! Why a margin: with enough runs any difference, however small, becomes significant; a
//! regression gate must ask whether a change matters, which is an equivalence question
//! (Schuirmann's two one-sided tests, "A comparison of the two one-sided tests procedure and
//! the power approach for assessing the equivalence of average bioavailability"). A change is
//! called worse or better only when its whole confidence interval lies beyond the margin.

use super::welch::{welch, Sample};
use crate::stats::ci::t_quantile;

/// Default equivalence margin, in percent: 5 %. Two runs of the same command on a quiet
/// host differ by a few percent (CPU frequency, placement of the threads, the page cache),
/// and a change smaller than that is not one a benchmark can promise to see.
pub const DEFAULT_MARGIN_PERCENT: f64 = 5.0;

/// The runs needed on each side for a test: two give a standard deviation.
pub const MIN_RUNS: usize = 2;

/// What the runs of A and B say about B / A.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RunsTest {
    /// Two-sided p-value of "the (geometric) means are equal", Welch on ln(value).
    pub p_value: f64,
    /// Confidence interval of (B / A - 1), in percent.
    pub ci_low_percent: f64,
    pub ci_high_percent: f64,
}

/// Why no test: one run on a side, or figures a logarithm cannot take.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NoTest {
    /// Fewer than [`MIN_RUNS`] runs on a side.
    OneRun,
    /// A value is zero, negative or not finite.
    NotPositive,
}

fn log_sample(values: &[f64]) -> Result<Sample, NoTest> {
    if values.len() < MIN_RUNS {
        return Err(NoTest::OneRun);
    }
    if values.iter().any(|v| !v.is_finite() || *v <= 0.0) {
        return Err(NoTest::NotPositive);
    }
    let n = values.len() as f64;
    let logs: Vec<f64> = values.iter().map(|v| v.ln()).collect();
    let mean = logs.iter().sum::<f64>() / n;
    let var = logs.iter().map(|l| (l - mean) * (l - mean)).sum::<f64>() / (n - 1.0);
    Ok(Sample {
        mean,
        stddev: var.sqrt(),
        n: values.len() as u64,
    })
}

/// Welch's test and interval of B / A on the per-run figures `a` and `b` at `confidence`.
pub fn test(a: &[f64], b: &[f64], confidence: f64) -> Result<RunsTest, NoTest> {
    let (la, lb) = (log_sample(a)?, log_sample(b)?);
    let w = welch(la, lb).ok_or(NoTest::NotPositive)?;
    let diff = lb.mean - la.mean;
    let se = (la.stddev * la.stddev / la.n as f64 + lb.stddev * lb.stddev / lb.n as f64).sqrt();
    let half = if se == 0.0 {
        0.0
    } else {
        se * t_quantile(confidence, w.df).ok_or(NoTest::NotPositive)?
    };
    Ok(RunsTest {
        p_value: w.p_value,
        ci_low_percent: ((diff - half).exp() - 1.0) * 100.0,
        ci_high_percent: ((diff + half).exp() - 1.0) * 100.0,
    })
}

/// Where a change's interval lies against the margin.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Judgement {
    /// The whole interval is worse than the margin.
    Worse,
    /// The whole interval is better than the margin.
    Better,
    /// The whole interval is inside ±margin: no change that matters.
    Equivalent,
    /// The interval reaches beyond the margin on at least one side without lying beyond it.
    Inconclusive,
}

/// Judges `t` with `margin_percent`: `higher_is_better` says which way is worse.
pub fn judge(t: &RunsTest, margin_percent: f64, higher_is_better: bool) -> Judgement {
    // The interval of "how much worse", in percent of A.
    let (worse_low, worse_high) = worse_interval(t, higher_is_better);
    if worse_low > margin_percent {
        Judgement::Worse
    } else if worse_high < -margin_percent {
        Judgement::Better
    } else if worse_low >= -margin_percent && worse_high <= margin_percent {
        Judgement::Equivalent
    } else {
        Judgement::Inconclusive
    }
}

/// The confidence interval of how much worse B is than A, in percent of A (negative:
/// better), as the change column reads: for a figure where higher is better, B / A = 0.9 is
/// 10 % worse.
pub fn worse_interval(t: &RunsTest, higher_is_better: bool) -> (f64, f64) {
    if higher_is_better {
        (-t.ci_high_percent, -t.ci_low_percent)
    } else {
        (t.ci_low_percent, t.ci_high_percent)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One run's figure: the mean of `len` samples of an AR(1) series x_t = phi x_{t-1} + e_t
    /// around `level`, whose innovations are heavy-tailed (Student's t with 3 degrees of
    /// freedom: finite variance, infinite kurtosis), as round trips and interval rates are.
    fn run_figure(rng: &mut fastrand::Rng, level: f64, phi: f64, len: usize) -> f64 {
        let normal = |rng: &mut fastrand::Rng| {
            // Box-Muller.
            let (u, v) = (1.0 - rng.f64(), rng.f64());
            (-2.0 * u.ln()).sqrt() * (2.0 * std::f64::consts::PI * v).cos()
        };
        let t3 = |rng: &mut fastrand::Rng| {
            let z = normal(rng);
            let chi2: f64 = (0..3).map(|_| normal(rng).powi(2)).sum();
            z / (chi2 / 3.0).sqrt()
        };
        let mut x = 0.0;
        let mut sum = 0.0;
        for _ in 0..len {
            x = phi * x + t3(rng);
            sum += level * (1.0 + 0.02 * x);
        }
        sum / len as f64
    }

    /// Per-run figures of one side: each run also moves by a run-level factor (the host
    /// between runs), drawn from the same distribution for A and B.
    fn side(rng: &mut fastrand::Rng, runs: usize) -> Vec<f64> {
        (0..runs)
            .map(|_| {
                let between = 1.0 + 0.03 * (rng.f64() - 0.5) * 2.0;
                run_figure(rng, 100.0 * between, 0.9, 400)
            })
            .collect()
    }

    /// Identical pairs (A and B drawn alike): the share called "worse" is at most the test's
    /// one-sided level without a margin, and none with the default margin. Seeded: the count
    /// is the same on every machine, so the test cannot flake.
    #[test]
    fn identical_runs_are_called_worse_at_most_at_the_stated_level() {
        let confidence = 0.95;
        for runs in [3, 5] {
            let mut rng = fastrand::Rng::with_seed(25 + runs as u64);
            let pairs = 1000;
            let (mut worse_no_margin, mut worse_margin, mut any_margin) = (0, 0, 0);
            for _ in 0..pairs {
                let (a, b) = (side(&mut rng, runs), side(&mut rng, runs));
                let t = test(&a, &b, confidence).unwrap();
                for higher_is_better in [false, true] {
                    if judge(&t, 0.0, higher_is_better) == Judgement::Worse {
                        worse_no_margin += 1;
                    }
                    let j = judge(&t, DEFAULT_MARGIN_PERCENT, higher_is_better);
                    if j == Judgement::Worse {
                        worse_margin += 1;
                    }
                    if matches!(j, Judgement::Worse | Judgement::Better) {
                        any_margin += 1;
                    }
                }
            }
            eprintln!(
                "{runs} runs a side, {} judgements of identical pairs: worse without a margin {worse_no_margin}, with the default margin {worse_margin}",
                2 * pairs
            );
            // Each of the 2 000 judgements is "worse" with probability (1 - c) / 2 = 2.5 %
            // when the test holds its level: 50 expected; 5 % would be 100.
            let level = (1.0 - confidence) / 2.0;
            let rate = worse_no_margin as f64 / (2 * pairs) as f64;
            assert!(
                rate <= level * 1.3,
                "{runs} runs: {worse_no_margin} of {} identical pairs called worse ({rate})",
                2 * pairs
            );
            assert_eq!(worse_margin, 0, "{runs} runs: worse within the margin");
            assert_eq!(any_margin, 0, "{runs} runs: a verdict within the margin");
        }
    }

    /// What the old test did: Welch on the samples of one run each. On the same series it
    /// calls most identical pairs significantly different, which is why it is gone.
    #[test]
    fn a_test_on_the_samples_of_one_run_each_calls_noise_significant() {
        let mut rng = fastrand::Rng::with_seed(11);
        let series = |rng: &mut fastrand::Rng| -> Sample {
            let level = 100.0 * (1.0 + 0.03 * (rng.f64() - 0.5) * 2.0);
            let xs: Vec<f64> = (0..2000).map(|_| run_figure(rng, level, 0.9, 1)).collect();
            let n = xs.len() as f64;
            let mean = xs.iter().sum::<f64>() / n;
            let var = xs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1.0);
            Sample {
                mean,
                stddev: var.sqrt(),
                n: xs.len() as u64,
            }
        };
        let pairs = 200;
        let significant = (0..pairs)
            .filter(|_| {
                let (a, b) = (series(&mut rng), series(&mut rng));
                welch(a, b).unwrap().p_value < 0.05
            })
            .count();
        assert!(significant > pairs / 2, "{significant} of {pairs}");
    }

    #[test]
    fn a_real_change_beyond_the_margin_is_found_and_within_it_is_not() {
        let a = [100.0, 101.0, 99.0, 100.5, 99.5];
        // 20 % slower (latency: lower is better).
        let b: Vec<f64> = a.iter().map(|v| v * 1.2).collect();
        let t = test(&a, &b, 0.95).unwrap();
        assert!(t.ci_low_percent > 15.0 && t.ci_high_percent < 25.0, "{t:?}");
        assert_eq!(judge(&t, 5.0, false), Judgement::Worse);
        // As a throughput, the same ratio is better.
        assert_eq!(judge(&t, 5.0, true), Judgement::Better);
        // 2 % with a tight interval: significant, but inside the margin.
        let c: Vec<f64> = a.iter().map(|v| v * 1.02).collect();
        let t = test(&a, &c, 0.95).unwrap();
        assert!(t.p_value < 0.05, "{t:?}");
        assert_eq!(judge(&t, 5.0, false), Judgement::Equivalent);
        // 6 % with an interval reaching below the margin: inconclusive.
        let d = [106.0, 112.0, 100.0, 108.0, 104.0];
        let t = test(&a, &d, 0.95).unwrap();
        assert_eq!(judge(&t, 5.0, false), Judgement::Inconclusive, "{t:?}");
    }

    #[test]
    fn one_run_or_a_value_without_logarithm_is_no_test() {
        assert_eq!(test(&[1.0], &[1.0, 2.0], 0.95), Err(NoTest::OneRun));
        assert_eq!(test(&[1.0, 2.0], &[], 0.95), Err(NoTest::OneRun));
        assert_eq!(
            test(&[0.0, 2.0], &[1.0, 2.0], 0.95),
            Err(NoTest::NotPositive)
        );
        // No spread on either side: the interval is the ratio itself.
        let t = test(&[2.0, 2.0], &[3.0, 3.0], 0.95).unwrap();
        assert!((t.ci_low_percent - 50.0).abs() < 1e-9 && (t.ci_high_percent - 50.0).abs() < 1e-9);
    }

    #[test]
    fn the_worse_interval_of_a_throughput_is_its_change_negated() {
        let t = RunsTest {
            p_value: 0.0,
            ci_low_percent: -20.0,
            ci_high_percent: -10.0,
        };
        // B / A in [0.8, 0.9]: 10 % to 20 % worse as a throughput, better as a latency.
        assert_eq!(worse_interval(&t, true), (10.0, 20.0));
        assert_eq!(worse_interval(&t, false), (-20.0, -10.0));
    }
}
