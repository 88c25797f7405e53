//! Tests one figure of a pair of points between the runs and judges it against the margin.
//!
//! Welch's t on the per-run values, its confidence interval against the equivalence margin.

use crate::stats::between_runs::{self, Judgement, NoTest};
use crate::stats::validity;

use super::figures::Figure;
use super::{Change, Test, Verdict};

/// The change of figure `fa` of point `point` in run A to the same figure `fb` in run B: in
/// percent, tested between the runs at `confidence` when both sides kept per-run values, and
/// judged against `margin_percent`.
pub(super) fn judge(
    point: String,
    fa: &Figure,
    fb: &Figure,
    confidence: f64,
    margin_percent: f64,
) -> Change {
    let percent = if fa.value != 0.0 {
        (fb.value - fa.value) / fa.value.abs() * 100.0
    } else {
        f64::NAN
    };
    let tested = match (&fa.runs, &fb.runs) {
        (Some(ra), Some(rb)) => {
            between_runs::test(ra, rb, confidence).map(|t| (t, ra.len(), rb.len()))
        }
        _ => Err(NoTest::NotPositive),
    };
    let test = match (&tested, &fa.runs, &fb.runs) {
        (Ok((t, na, nb)), _, _) => Test::Runs {
            p_value: t.p_value,
            ci_low_percent: t.ci_low_percent,
            ci_high_percent: t.ci_high_percent,
            runs_a: *na,
            runs_b: *nb,
        },
        (Err(NoTest::OneRun), _, _) => Test::Untested {
            reason: "one run on a side: cannot tell; use --repeat 3 or more",
        },
        (Err(NoTest::NotPositive), Some(_), Some(_)) => Test::Untested {
            reason: "a run's figure is zero or not finite",
        },
        _ => Test::Untested {
            reason: "not kept per run",
        },
    };
    let invalid = validity::all([("A".into(), &fa.validity), ("B".into(), &fb.validity)]);
    let verdict = match &tested {
        _ if invalid.is_invalid() => Verdict::Invalid,
        Err(NoTest::OneRun) => Verdict::CannotTell,
        Err(NoTest::NotPositive) => Verdict::Untested,
        Ok((t, _, _)) => match between_runs::judge(t, margin_percent, fa.higher_is_better) {
            Judgement::Worse => Verdict::Worse,
            Judgement::Better => Verdict::Better,
            Judgement::Equivalent => Verdict::Equivalent,
            Judgement::Inconclusive => Verdict::Inconclusive,
        },
    };
    Change {
        point,
        figure: fa.name,
        a: fa.value,
        b: fb.value,
        percent,
        higher_is_better: fa.higher_is_better,
        test,
        verdict,
        invalid: invalid.invalid_reason,
        a_invalid: fa.validity.is_invalid(),
        b_invalid: fb.validity.is_invalid(),
    }
}

#[cfg(test)]
mod tests {
    use crate::model::RunDocument;
    use crate::output::compare_runs::{cannot_tell, compare, failures, format, Verdict};
    use crate::stats::between_runs::DEFAULT_MARGIN_PERCENT as DEFAULT_MARGIN;
    use crate::store::db::tests::report;

    /// `r` as if measured `factors.len()` times, each run's headline the point's times a factor.
    fn repeated(mut r: RunDocument, factors: &[f64]) -> RunDocument {
        for p in &mut r.points {
            let v = p.headline.values[0];
            p.runs = factors.len() as u32;
            p.headline.values = factors.iter().map(|f| v * f).collect();
        }
        r
    }

    /// With repeated runs each side, a change is judged on its interval against the margin:
    /// 50 % slower is worse and fails the gate; 1 % slower with a tight interval is the same
    /// within 5 %; the other way round, better never fails a gate.
    #[test]
    fn repeated_runs_are_judged_on_their_interval_against_the_margin() {
        let spread = [0.99, 1.0, 1.01];
        let a = repeated(report("pingpong", 1, 20_000.0), &spread);
        let b = repeated(report("pingpong", 1, 30_000.0), &spread);
        let c = compare(&a, &b, false, DEFAULT_MARGIN).unwrap();
        let ch = &c.changes[0];
        assert_eq!(ch.verdict, Verdict::Worse, "{ch:?}");
        let (low, high) = ch.worse_interval().unwrap();
        assert!(low > 45.0 && high < 55.0, "{low} {high}");
        assert_eq!(failures(&c, 5.0).len(), 1);
        // A gate above the interval's low end lets it pass.
        assert!(failures(&c, 60.0).is_empty());
        let back = compare(&b, &a, false, DEFAULT_MARGIN).unwrap();
        assert_eq!(back.changes[0].verdict, Verdict::Better);
        assert!(failures(&back, 0.0).is_empty());

        let near = repeated(report("pingpong", 1, 20_200.0), &spread);
        let c = compare(&a, &near, false, DEFAULT_MARGIN).unwrap();
        assert_eq!(c.changes[0].verdict, Verdict::Equivalent, "{c:?}");
        assert!(failures(&c, 0.0).is_empty());
        // Without a margin that interval (-1.3 % to +3.3 %) holds no change either way, and
        // a 1 % change measured with a tighter spread is one the interval shows.
        let c = compare(&a, &near, false, 0.0).unwrap();
        assert_eq!(c.changes[0].verdict, Verdict::Inconclusive, "{c:?}");
        let tight = [0.999, 1.0, 1.001];
        let a = repeated(report("pingpong", 1, 20_000.0), &tight);
        let near = repeated(report("pingpong", 1, 20_200.0), &tight);
        let c = compare(&a, &near, false, 0.0).unwrap();
        assert_eq!(c.changes[0].verdict, Verdict::Worse, "{c:?}");
        let text = format(&c, 1, 2, &a, &near);
        assert!(text.contains("WORSE beyond the ±0% margin"), "{text}");
        assert!(compare(&a, &b, false, -1.0).is_err());
    }

    #[test]
    fn a_figure_that_is_not_valid_is_not_compared_and_does_not_pass_a_gate() {
        let a = report("pingpong", 2, 20_000.0);
        let mut b = report("pingpong", 2, 30_000.0);
        // B's first point rests on 12 samples: not a measurement.
        let l = b.points[0].latency.as_mut().unwrap();
        l.rtt.samples = 12;
        l.validity = crate::stats::validity::latency(12);
        let c = compare(&a, &b, false, DEFAULT_MARGIN).unwrap();
        let first = &c.changes[0];
        assert_eq!(first.verdict, Verdict::Invalid);
        assert!(!first.a_invalid && first.b_invalid);
        assert_eq!(
            first.invalid.as_deref(),
            Some("B: 12 samples: below the floor of 30 for a mean and its confidence interval")
        );
        // The other point is measured once on each side: nothing tells a change from the
        // difference between two runs, so it is not judged and does not fail a gate.
        assert_eq!(c.changes[1].verdict, Verdict::CannotTell);
        // 50 % worse: the invalid one fails a 5 % gate, because nothing says it is not.
        assert_eq!(failures(&c, 5.0).len(), 1);
        assert_eq!(cannot_tell(&c), 1);
        let text = format(&c, 1, 2, &a, &b);
        assert!(
            text.contains("15.000! ") && text.contains("NOT VALID: B: 12 samples"),
            "{text}"
        );
        assert!(text.contains("# 1 figure(s) NOT VALID in A or B"), "{text}");
    }
}
