//! What a comparison holds: each figure's change, how it was tested, and the verdict on it.

use crate::stats::between_runs;

/// How a figure's difference was tested (in JSON: `{"on": "runs", "p_value": ..., ...}` or
/// `{"on": "untested", "reason": ...}`).
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
#[serde(tag = "on", rename_all = "snake_case")]
pub enum Test {
    /// Welch's t-test on the logarithms of the per-run figures, and the confidence interval
    /// of B / A - 1 in percent that the verdict is judged on.
    Runs {
        p_value: f64,
        ci_low_percent: f64,
        ci_high_percent: f64,
        runs_a: usize,
        runs_b: usize,
    },
    /// No test possible; the reason.
    Untested { reason: &'static str },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// The whole confidence interval is worse than the margin.
    Worse,
    /// The whole confidence interval is better than the margin.
    Better,
    /// The whole confidence interval lies within ±margin: no change that matters.
    Equivalent,
    /// The interval reaches beyond the margin without lying beyond it: more runs would tell.
    Inconclusive,
    /// One run on a side (or both): the difference between two runs of the same command is
    /// not known, so no change can be told from it. Measure with `--repeat 3` or more.
    CannotTell,
    /// The figures differ (or not) but nothing was tested; the reason is in the test.
    Untested,
    /// A or B (or both) is not a valid measurement (see `stats::validity`): the difference
    /// means nothing. The reason is [`Change::invalid`].
    Invalid,
}

#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Change {
    /// The point, e.g. "64 B".
    pub point: String,
    /// The figure and its unit, e.g. "one-way latency, mean (us)".
    pub figure: &'static str,
    pub a: f64,
    pub b: f64,
    /// (b - a) / a in percent.
    pub percent: f64,
    /// Higher values are better (throughput, transactions) or worse (latency).
    pub higher_is_better: bool,
    pub test: Test,
    pub verdict: Verdict,
    /// Why A's or B's figure is not valid ("A: ...; B: ..."), when one is not.
    pub invalid: Option<String>,
    /// Which of the two is not valid.
    pub a_invalid: bool,
    pub b_invalid: bool,
}

impl Change {
    /// How much worse B is than A, in percent (negative when better).
    pub fn worse_percent(&self) -> f64 {
        if self.higher_is_better {
            -self.percent
        } else {
            self.percent
        }
    }

    /// The confidence interval of how much worse B is, in percent, when the runs were tested.
    pub fn worse_interval(&self) -> Option<(f64, f64)> {
        match self.test {
            Test::Runs {
                p_value,
                ci_low_percent,
                ci_high_percent,
                ..
            } => Some(between_runs::worse_interval(
                &between_runs::RunsTest {
                    p_value,
                    ci_low_percent,
                    ci_high_percent,
                },
                self.higher_is_better,
            )),
            Test::Untested { .. } => None,
        }
    }
}

#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Comparison {
    pub changes: Vec<Change>,
    /// The settings in which the runs differ ("nodelay: false -> true"); empty unless the
    /// comparison was asked for across them.
    pub different_settings: Vec<String>,
    /// Confidence level of the intervals (the higher of the two runs' levels).
    pub confidence: f64,
    /// The equivalence margin in percent: a change is worse or better only when its whole
    /// confidence interval lies beyond it.
    pub margin_percent: f64,
    pub only_in_a: Vec<String>,
    pub only_in_b: Vec<String>,
}
