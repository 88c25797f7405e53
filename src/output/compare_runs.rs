//! `wirebench compare A B`: the points two runs have in common, the change of each figure in
//! percent, and whether it is a change at all: judged between the RUNS of each side (`run
//! --repeat N` keeps every run's headline), with a confidence interval of B / A against an
//! equivalence margin ([`between_runs`]). With one run on a side nothing can tell a change
//! from the difference between two runs of the same command, and the verdict says so.

use anyhow::{bail, Result};

use crate::figures::series::describe_point;
use crate::model::{PointResult, RunDocument};
use crate::stats::between_runs::{self, Judgement, NoTest};
use crate::stats::validity::{self, Validity};

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

/// One figure of one point: its value and what can be tested about it.
struct Figure {
    name: &'static str,
    higher_is_better: bool,
    /// Value shown, in display units.
    value: f64,
    /// The figure in every run (any unit proportional to the value's), when kept per run.
    runs: Option<Vec<f64>>,
    /// The verdict on the figure the value comes from.
    validity: Validity,
}

fn mean_of_runs(p: &PointResult) -> Option<f64> {
    let v = &p.headline.values;
    (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64)
}

/// The figures of a point. `repeated` says whether both points have two runs or more, so
/// that the mean of the runs is shown; the same basis is used on both sides.
fn figures(pattern: &str, p: &PointResult, repeated: bool) -> Vec<Figure> {
    let mut out = Vec::new();
    let runs = Some(p.headline.values.clone());
    match pattern {
        "pingpong" => {
            if repeated {
                if let Some(m) = mean_of_runs(p) {
                    out.push(Figure {
                        name: "one-way latency, mean of runs (us)",
                        higher_is_better: false,
                        value: m / 1e3,
                        runs,
                        validity: p.headline.validity.clone(),
                    });
                }
            } else if let Some(l) = p.latency.as_ref() {
                out.push(Figure {
                    name: "one-way latency, RTT/2 mean (us)",
                    higher_is_better: false,
                    value: l.rtt.mean_ns / 2e3,
                    runs,
                    validity: p.figures_validity(),
                });
            }
        }
        "rr" | "crr" => {
            let Some(l) = p.latency.as_ref() else {
                return out;
            };
            out.push(Figure {
                name: "transactions per second (1/s)",
                higher_is_better: true,
                value: if repeated {
                    mean_of_runs(p).unwrap_or(l.transactions_per_s)
                } else {
                    l.transactions_per_s
                },
                runs,
                validity: if repeated {
                    p.headline.validity.clone()
                } else {
                    l.validity.clone()
                },
            });
            // The round trips are merged over the runs: no per-run figure to test. Per
            // connection it is the inverse of the transactions per second, tested above.
            out.push(Figure {
                name: "transaction round trip, mean (us)",
                higher_is_better: false,
                value: l.rtt.mean_ns / 1e3,
                runs: None,
                validity: l.validity.clone(),
            });
        }
        _ => {
            let Some(s) = p.stream.as_ref() else {
                return out;
            };
            let receiver: f64 = s.totals.iter().map(|t| t.receiver_bits_per_s).sum();
            out.push(Figure {
                name: "receiver throughput (Mbit/s)",
                higher_is_better: true,
                value: if repeated {
                    mean_of_runs(p).unwrap_or(receiver) / 1e6
                } else {
                    receiver / 1e6
                },
                runs,
                validity: if repeated {
                    p.headline.validity.clone()
                } else {
                    s.receivers_validity()
                },
            });
        }
    }
    out
}

fn same_point(a: &PointResult, b: &PointResult) -> bool {
    a.key == b.key && a.request_size == b.request_size && a.response_size == b.response_size
}

/// Settings that say how figures were summarised, not what was measured: a comparison across
/// them is still one measurement against another.
const STATISTICAL: [&str; 4] = ["confidence", "repeat", "until_ci", "max_repeat"];

/// Every leaf of a JSON value by its dotted path ("fast.zerocopy"), in key order.
fn leaves(
    prefix: &str,
    v: &serde_json::Value,
    out: &mut std::collections::BTreeMap<String, serde_json::Value>,
) {
    match v {
        serde_json::Value::Object(map) => {
            for (k, v) in map {
                let name = if prefix.is_empty() {
                    k.clone()
                } else {
                    format!("{prefix}.{k}")
                };
                leaves(&name, v, out);
            }
        }
        other => {
            out.insert(prefix.to_owned(), other.clone());
        }
    }
}

/// What a run was measured with, as dotted paths: the transport, every setting of the run but
/// how its statistics were gathered, the one-port path and middlebox, and the lab link. Hosts,
/// addresses and times are left out: they are what a comparison is usually for.
fn measured_with(r: &RunDocument) -> std::collections::BTreeMap<String, serde_json::Value> {
    let mut settings = serde_json::to_value(&r.settings).unwrap_or_default();
    if let Some(map) = settings.as_object_mut() {
        map.retain(|k, _| !STATISTICAL.contains(&k.as_str()));
        map.insert("transport".into(), serde_json::json!(r.transport));
        map.insert(
            "server".into(),
            serde_json::json!({"one_port": r.server.one_port, "middlebox": r.server.middlebox}),
        );
        map.insert(
            "lab".into(),
            serde_json::to_value(r.lab.as_ref().map(|l| &l.config)).unwrap_or_default(),
        );
    }
    let mut out = std::collections::BTreeMap::new();
    leaves("", &settings, &mut out);
    out
}

/// The settings in which two runs differ, as "name: A -> B" (see [`measured_with`]).
pub fn setting_differences(a: &RunDocument, b: &RunDocument) -> Vec<String> {
    let (ma, mb) = (measured_with(a), measured_with(b));
    let null = serde_json::Value::Null;
    let mut names: Vec<&String> = ma.keys().chain(mb.keys()).collect();
    names.sort();
    names.dedup();
    names
        .into_iter()
        .filter_map(|name| {
            let (va, vb) = (ma.get(name).unwrap_or(&null), mb.get(name).unwrap_or(&null));
            (va != vb).then(|| format!("{name}: {va} -> {vb}"))
        })
        .collect()
}

/// Compares run B with run A point by point. Runs that differ in a setting (one with
/// `--nodelay`, one without) are refused unless `allow_different`: their difference is the
/// setting's, and calling it better or worse would judge a change that was not made.
pub fn compare(
    a: &RunDocument,
    b: &RunDocument,
    allow_different: bool,
    margin_percent: f64,
) -> Result<Comparison> {
    if a.pattern != b.pattern {
        bail!(
            "run A measured {} and run B {}: only runs of the same pattern compare",
            a.pattern,
            b.pattern
        );
    }
    if !(margin_percent.is_finite() && margin_percent >= 0.0) {
        bail!("the margin must be a percentage of 0 or more, not {margin_percent}");
    }
    let different_settings = setting_differences(a, b);
    if !different_settings.is_empty() && !allow_different {
        bail!(
            "runs A and B were measured with different settings ({}): their difference is the settings', not a change's; add --allow-different to compare them anyway",
            different_settings.join("; ")
        );
    }
    let confidence = a.settings.confidence.max(b.settings.confidence);
    let mut changes = Vec::new();
    let mut only_in_a = Vec::new();
    for pa in &a.points {
        let Some(pb) = b.points.iter().find(|pb| same_point(pa, pb)) else {
            only_in_a.push(describe_point(a, pa));
            continue;
        };
        let repeated = pa.runs >= 2 && pb.runs >= 2;
        let fb = figures(b.pattern.name(), pb, repeated);
        for fa in figures(a.pattern.name(), pa, repeated) {
            let Some(fb) = fb.iter().find(|f| f.name == fa.name) else {
                continue;
            };
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
                Ok((t, _, _)) => {
                    match between_runs::judge(t, margin_percent, fa.higher_is_better) {
                        Judgement::Worse => Verdict::Worse,
                        Judgement::Better => Verdict::Better,
                        Judgement::Equivalent => Verdict::Equivalent,
                        Judgement::Inconclusive => Verdict::Inconclusive,
                    }
                }
            };
            changes.push(Change {
                point: describe_point(a, pa),
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
            });
        }
    }
    let only_in_b = b
        .points
        .iter()
        .filter(|pb| !a.points.iter().any(|pa| same_point(pa, pb)))
        .map(|pb| describe_point(b, pb))
        .collect();
    if changes.is_empty() {
        bail!("runs A and B have no point in common to compare");
    }
    Ok(Comparison {
        changes,
        different_settings,
        confidence,
        margin_percent,
        only_in_a,
        only_in_b,
    })
}

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

fn fmt_p(p: f64) -> String {
    if p == 0.0 {
        "0".into()
    } else if p < 1e-3 {
        format!("{p:.1e}")
    } else {
        format!("{p:.3}")
    }
}

/// The comparison as a table with a summary line.
pub fn format(c: &Comparison, a_id: i64, b_id: i64, a: &RunDocument, b: &RunDocument) -> String {
    let mut out = format!(
        "# compare run {a_id} (A, baseline: {} over {}, {}) with run {b_id} (B: {} over {}, {})\n",
        a.pattern, a.transport, a.started_at, b.pattern, b.transport, b.started_at
    );
    if !c.different_settings.is_empty() {
        out.push_str(&format!(
            "# the runs differ in settings (--allow-different): {}; a change below is the settings' as much as anything's\n",
            c.different_settings.join("; ")
        ));
    }
    let conf = (c.confidence * 100.0).round();
    let margin = c.margin_percent;
    out.push_str(&format!(
        "# change = (B - A) / A; tested between runs (Welch's t on the per-run figures), with the {conf}% confidence interval of the change; worse or better only when the whole interval lies beyond the ±{margin}% margin (--margin); worse = higher latency or lower throughput/transactions\n"
    ));
    out.push_str(&format!(
        "{:<18} {:<36} {:>14} {:>14} {:>9} {:>19} {:>9} {:>5} {}\n",
        "point",
        "figure",
        "A",
        "B",
        "change",
        format!("{conf}% CI"),
        "p-value",
        "runs",
        "verdict"
    ));
    for ch in &c.changes {
        let (ci, p, runs) = match &ch.test {
            Test::Runs {
                p_value,
                ci_low_percent,
                ci_high_percent,
                runs_a,
                runs_b,
            } => (
                format!("{ci_low_percent:+.2}..{ci_high_percent:+.2}%"),
                fmt_p(*p_value),
                format!("{runs_a}/{runs_b}"),
            ),
            Test::Untested { reason: _ } => ("-".into(), "-".into(), "-".into()),
        };
        let verdict = match (&ch.verdict, &ch.test) {
            (Verdict::Worse, _) => format!("WORSE beyond the ±{margin}% margin"),
            (Verdict::Better, _) => format!("better beyond the ±{margin}% margin"),
            (Verdict::Equivalent, _) => format!("same within ±{margin}%"),
            (Verdict::Inconclusive, _) => {
                format!("inconclusive: the interval reaches past ±{margin}%; more runs tell")
            }
            (_, Test::Untested { reason: why })
                if matches!(ch.verdict, Verdict::CannotTell | Verdict::Untested) =>
            {
                if ch.verdict == Verdict::CannotTell {
                    (*why).to_owned()
                } else {
                    format!("untested: {why}")
                }
            }
            (Verdict::CannotTell | Verdict::Untested, _) => "untested".to_owned(),
            (Verdict::Invalid, _) => format!(
                "NOT VALID: {}",
                ch.invalid.as_deref().unwrap_or("a figure is not valid")
            ),
        };
        // "!" after a figure that is not valid, as in the run's own table.
        let mark = |invalid: bool| if invalid { "!" } else { " " };
        out.push_str(&format!(
            "{:<18} {:<36} {:>14} {:>14} {:>8}% {:>19} {:>9} {:>5} {}\n",
            ch.point,
            ch.figure,
            format!("{:.3}{}", ch.a, mark(ch.a_invalid)),
            format!("{:.3}{}", ch.b, mark(ch.b_invalid)),
            if ch.percent.is_finite() {
                format!("{:+.2}", ch.percent)
            } else {
                "-".into()
            },
            ci,
            p,
            runs,
            verdict
        ));
    }
    let count = |v: Verdict| c.changes.iter().filter(|ch| ch.verdict == v).count();
    out.push_str(&format!(
        "# {} figures: {} worse, {} better, {} the same within ±{margin}%, {} inconclusive, {} cannot tell (one run on a side), {} untested\n",
        c.changes.len(),
        count(Verdict::Worse),
        count(Verdict::Better),
        count(Verdict::Equivalent),
        count(Verdict::Inconclusive),
        count(Verdict::CannotTell),
        count(Verdict::Untested)
    ));
    if count(Verdict::CannotTell) > 0 {
        out.push_str(
            "# one run on a side: two runs of the same command differ by more than their samples show, so a change cannot be told from one run each; measure both with --repeat 3 or more (--fail-if-worse does not fail on these)\n",
        );
    }
    if count(Verdict::Invalid) > 0 {
        out.push_str(&format!(
            "# {} figure(s) NOT VALID in A or B (below the floors of a measurement: see the verdict), not compared\n",
            count(Verdict::Invalid)
        ));
    }
    for (which, list) in [("A", &c.only_in_a), ("B", &c.only_in_b)] {
        if !list.is_empty() {
            out.push_str(&format!(
                "# only in {which}, not compared: {}\n",
                list.join("; ")
            ));
        }
    }
    for (which, r) in [("A", a), ("B", b)] {
        if !r.complete {
            out.push_str(&format!(
                "# note: run {which} is incomplete: {}\n",
                r.points_of_planned()
            ));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
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

    /// `--nodelay` against none is a different experiment, not a change: refused with the
    /// setting named, and compared only when asked, with the difference above the table.
    #[test]
    fn runs_with_different_settings_are_not_judged_unless_asked() {
        let a = report("pingpong", 2, 20_000.0);
        let mut b = report("pingpong", 2, 30_000.0);
        b.settings.nodelay = !a.settings.nodelay;
        b.settings.fast.zerocopy = true;
        b.settings.repeat = a.settings.repeat + 2; // how statistics were gathered: not a setting
        let e = compare(&a, &b, false, DEFAULT_MARGIN)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("nodelay: false -> true") && e.contains("fast.zerocopy: false -> true"),
            "{e}"
        );
        assert!(!e.contains("repeat"), "{e}");
        assert!(e.contains("--allow-different"), "{e}");
        let c = compare(&a, &b, true, DEFAULT_MARGIN).unwrap();
        assert_eq!(
            c.different_settings,
            vec!["fast.zerocopy: false -> true", "nodelay: false -> true"]
        );
        let text = format(&c, 1, 2, &a, &b);
        assert!(
            text.contains("# the runs differ in settings (--allow-different): fast.zerocopy"),
            "{text}"
        );
        // The same settings: nothing to allow.
        assert!(compare(&a, &a, false, DEFAULT_MARGIN)
            .unwrap()
            .different_settings
            .is_empty());
    }

    /// A congestion-control sweep is an axis, not a setting: two sweeps over the same
    /// algorithms compare point by point, each algorithm's against its own, and a point of an
    /// algorithm only one run measured is listed as such.
    #[test]
    fn a_congestion_control_sweep_is_an_axis_not_a_setting_difference() {
        use crate::model::vocab::CcName;
        let sweep = |names: [&str; 2], rtt: f64| {
            let mut r = report("pingpong", 2, rtt);
            r.swept.cc = true;
            r.settings.cc = None;
            for (p, name) in r.points.iter_mut().zip(names) {
                p.key.size = 64;
                p.key.cc = CcName::new(name);
            }
            r
        };
        let a = sweep(["cubic", "reno"], 20_000.0);
        let b = sweep(["cubic", "bbr"], 20_000.0);
        let c = compare(&a, &b, false, DEFAULT_MARGIN).unwrap();
        assert!(c.different_settings.is_empty());
        assert!(c.changes.iter().all(|ch| ch.point.contains("cc cubic")));
        assert_eq!(c.only_in_a.len(), 1, "{:?}", c.only_in_a);
        assert!(c.only_in_a[0].contains("cc reno"), "{:?}", c.only_in_a);
        assert!(c.only_in_b[0].contains("cc bbr"), "{:?}", c.only_in_b);
    }
}
