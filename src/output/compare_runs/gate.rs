//! The `--fail-if-worse` gate: which changes fail it, and how many could not be told.

use super::{Change, Comparison, Verdict};

/// The changes that trip `--fail-if-worse THRESHOLD`: a change judged worse (its whole
/// confidence interval beyond the margin) whose interval also lies wholly beyond the
/// threshold; and a figure that is not valid in A or B and reads worse by more than the
/// threshold (a difference that stands on figures that are not measurements is not waved
/// through). A change that could not be told (one run on a side), was not tested, or is
/// inconclusive or equivalent never fails the gate: the gate fails on shown regressions only.
pub fn failures(c: &Comparison, threshold_percent: f64) -> Vec<&Change> {
    c.changes
        .iter()
        .filter(|ch| match ch.verdict {
            Verdict::Worse => ch
                .worse_interval()
                .is_some_and(|(low, _)| low > threshold_percent),
            Verdict::Invalid => ch.worse_percent() > threshold_percent,
            _ => false,
        })
        .collect()
}

/// The changes that could not be told (one run on a side): named by the gate, which does not
/// fail on them.
pub fn cannot_tell(c: &Comparison) -> usize {
    c.changes
        .iter()
        .filter(|ch| ch.verdict == Verdict::CannotTell)
        .count()
}

#[cfg(test)]
mod tests {
    use crate::output::compare_runs::{compare, failures, format, Verdict};
    use crate::stats::between_runs::DEFAULT_MARGIN_PERCENT as DEFAULT_MARGIN;
    use crate::store::db::tests::report;

    /// The same document twice, one run each: no verdict, and said why, with what to do.
    #[test]
    fn one_run_each_cannot_tell_and_does_not_fail_the_gate() {
        let a = report("pingpong", 2, 20_000.0);
        let b = report("pingpong", 2, 40_000.0);
        let c = compare(&a, &b, false, DEFAULT_MARGIN).unwrap();
        assert!(c.changes.iter().all(|ch| ch.verdict == Verdict::CannotTell));
        assert!(failures(&c, 0.0).is_empty());
        let text = format(&c, 1, 2, &a, &b);
        assert!(
            text.contains("one run on a side: cannot tell; use --repeat 3 or more"),
            "{text}"
        );
        assert!(text.contains("2 cannot tell (one run on a side)"), "{text}");
    }
}
