//! `wirebench compare A B`: the points two runs have in common, the change of each figure in
//! percent, and whether it is significant by Welch's t-test — on the per-run values when both
//! points were repeated, else on the round-trip samples' summary statistics.

use anyhow::{bail, Result};

use super::series::describe_point;
use super::welch::{welch, Sample};
use crate::report::model::{PointResult, RunReport};
use crate::stats::validity::{self, Validity};

/// How a figure's difference was tested (in JSON: `{"on": "runs", "p_value": ...}`,
/// `{"on": "samples", ...}` or `{"on": "untested", "reason": ...}`).
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
#[serde(tag = "on", rename_all = "snake_case")]
pub enum Test {
    /// Welch's t-test on the per-run headline values (both points repeated).
    Runs { p_value: f64 },
    /// Welch's t-test on the mean, standard deviation and count of the round-trip samples.
    Samples { p_value: f64 },
    /// No test possible; the reason.
    Untested { reason: &'static str },
}

impl Test {
    fn p_value(&self) -> Option<f64> {
        match self {
            Test::Runs { p_value } | Test::Samples { p_value } => Some(*p_value),
            Test::Untested { .. } => None,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    Worse,
    Better,
    /// The difference is within what chance explains at the confidence level.
    NotSignificant,
    /// The figures differ (or not) but nothing says whether by chance.
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
}

#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Comparison {
    pub changes: Vec<Change>,
    /// The settings in which the runs differ ("nodelay: false -> true"); empty unless the
    /// comparison was asked for across them.
    pub different_settings: Vec<String>,
    /// Confidence level of the tests (the higher of the two runs' levels).
    pub confidence: f64,
    pub only_in_a: Vec<String>,
    pub only_in_b: Vec<String>,
}

/// One figure of one point: its value and what can be tested about it.
struct Figure {
    name: &'static str,
    higher_is_better: bool,
    /// Value shown, in display units, and the samples tested (in any unit proportional).
    value: f64,
    sample: Option<(Sample, bool)>,
    /// The verdict on the figure the value comes from.
    validity: Validity,
}

fn over_runs(p: &PointResult) -> Option<Sample> {
    let m = p.headline.over_runs.as_ref()?;
    (m.n >= 2).then_some(Sample {
        mean: m.mean,
        stddev: m.stddev,
        n: m.n,
    })
}

fn rtt_samples(p: &PointResult) -> Option<Sample> {
    let r = &p.latency.as_ref()?.rtt;
    Some(Sample {
        mean: r.mean_ns,
        stddev: r.stddev_ns,
        n: r.samples,
    })
}

/// The figures of a point. `repeated` says whether both points have two runs or more, so
/// that per-run values can be tested; the same basis is used on both sides.
fn figures(pattern: &str, p: &PointResult, repeated: bool) -> Vec<Figure> {
    let mut out = Vec::new();
    match pattern {
        "pingpong" => {
            if repeated {
                if let Some(s) = over_runs(p) {
                    out.push(Figure {
                        name: "one-way latency, mean of runs (us)",
                        higher_is_better: false,
                        value: s.mean / 1e3,
                        sample: Some((s, true)),
                        validity: p.headline.validity.clone(),
                    });
                }
            } else if let Some(s) = rtt_samples(p) {
                out.push(Figure {
                    name: "one-way latency, RTT/2 mean (us)",
                    higher_is_better: false,
                    value: s.mean / 2e3,
                    sample: Some((s, false)),
                    validity: p.figures_validity(),
                });
            }
        }
        "rr" | "crr" => {
            let Some(l) = p.latency.as_ref() else {
                return out;
            };
            // Per connection, transactions per second are the inverse of the mean round trip,
            // so without repeated runs the round-trip samples test both figures.
            out.push(Figure {
                name: "transactions per second (1/s)",
                higher_is_better: true,
                value: if repeated {
                    over_runs(p).map_or(l.transactions_per_s, |s| s.mean)
                } else {
                    l.transactions_per_s
                },
                sample: if repeated {
                    over_runs(p).map(|s| (s, true))
                } else {
                    rtt_samples(p).map(|s| (s, false))
                },
                validity: if repeated {
                    p.headline.validity.clone()
                } else {
                    l.validity.clone()
                },
            });
            out.push(Figure {
                name: "transaction round trip, mean (us)",
                higher_is_better: false,
                value: l.rtt.mean_ns / 1e3,
                sample: rtt_samples(p).map(|s| (s, false)),
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
                    over_runs(p).map_or(receiver, |s| s.mean) / 1e6
                } else {
                    receiver / 1e6
                },
                sample: if repeated {
                    over_runs(p).map(|s| (s, true))
                } else {
                    None
                },
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
fn measured_with(r: &RunReport) -> std::collections::BTreeMap<String, serde_json::Value> {
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
pub fn setting_differences(a: &RunReport, b: &RunReport) -> Vec<String> {
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
pub fn compare(a: &RunReport, b: &RunReport, allow_different: bool) -> Result<Comparison> {
    if a.pattern != b.pattern {
        bail!(
            "run A measured {} and run B {}: only runs of the same pattern compare",
            a.pattern,
            b.pattern
        );
    }
    let different_settings = setting_differences(a, b);
    if !different_settings.is_empty() && !allow_different {
        bail!(
            "runs A and B were measured with different settings ({}): their difference is the settings', not a change's; add --allow-different to compare them anyway",
            different_settings.join("; ")
        );
    }
    let confidence = a.settings.confidence.max(b.settings.confidence);
    let alpha = 1.0 - confidence;
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
            let test = match (fa.sample, fb.sample) {
                (Some((sa, runs)), Some((sb, _))) => match welch(sa, sb) {
                    Some(w) if runs => Test::Runs { p_value: w.p_value },
                    Some(w) => Test::Samples { p_value: w.p_value },
                    None => Test::Untested {
                        reason: "too few samples",
                    },
                },
                _ if !repeated => Test::Untested {
                    reason: "one run: measure with --repeat 3 or more",
                },
                _ => Test::Untested {
                    reason: "no spread recorded",
                },
            };
            let worse = if fa.higher_is_better {
                fb.value < fa.value
            } else {
                fb.value > fa.value
            };
            let invalid = validity::all([("A".into(), &fa.validity), ("B".into(), &fb.validity)]);
            let verdict = match test.p_value() {
                _ if invalid.is_invalid() => Verdict::Invalid,
                None => Verdict::Untested,
                Some(p) if p < alpha && worse => Verdict::Worse,
                Some(p) if p < alpha && fb.value != fa.value => Verdict::Better,
                Some(_) => Verdict::NotSignificant,
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
        only_in_a,
        only_in_b,
    })
}

/// The changes that trip `--fail-if-worse`: worse by more than `threshold_percent`, and either
/// significantly so, untested, or not valid (a difference nothing shows to be chance, or
/// that stands on figures that are not measurements, is not waved through).
pub fn failures(c: &Comparison, threshold_percent: f64) -> Vec<&Change> {
    c.changes
        .iter()
        .filter(|ch| {
            ch.worse_percent() > threshold_percent
                && matches!(
                    ch.verdict,
                    Verdict::Worse | Verdict::Untested | Verdict::Invalid
                )
        })
        .collect()
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
pub fn format(c: &Comparison, a_id: i64, b_id: i64, a: &RunReport, b: &RunReport) -> String {
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
    out.push_str(&format!(
        "# change = (B - A) / A; Welch's t-test, significant when p < {:.2} ({}% confidence); worse = higher latency or lower throughput/transactions\n",
        1.0 - c.confidence,
        (c.confidence * 100.0).round()
    ));
    out.push_str(&format!(
        "{:<18} {:<36} {:>14} {:>14} {:>9} {:>9} {:<8} {}\n",
        "point", "figure", "A", "B", "change", "p-value", "test on", "verdict"
    ));
    for ch in &c.changes {
        let (p, basis) = match &ch.test {
            Test::Runs { p_value } => (fmt_p(*p_value), "runs"),
            Test::Samples { p_value } => (fmt_p(*p_value), "samples"),
            Test::Untested { reason: _ } => ("-".into(), "-"),
        };
        let verdict = match (&ch.verdict, &ch.test) {
            (Verdict::Worse, _) => "WORSE (significant)".to_owned(),
            (Verdict::Better, _) => "better (significant)".to_owned(),
            (Verdict::NotSignificant, _) => "no significant change".to_owned(),
            (Verdict::Untested, Test::Untested { reason: why }) => format!("untested: {why}"),
            (Verdict::Untested, _) => "untested".to_owned(),
            (Verdict::Invalid, _) => format!(
                "NOT VALID: {}",
                ch.invalid.as_deref().unwrap_or("a figure is not valid")
            ),
        };
        // "!" after a figure that is not valid, as in the run's own table.
        let mark = |invalid: bool| if invalid { "!" } else { " " };
        out.push_str(&format!(
            "{:<18} {:<36} {:>14} {:>14} {:>8}% {:>9} {:<8} {}\n",
            ch.point,
            ch.figure,
            format!("{:.3}{}", ch.a, mark(ch.a_invalid)),
            format!("{:.3}{}", ch.b, mark(ch.b_invalid)),
            if ch.percent.is_finite() {
                format!("{:+.2}", ch.percent)
            } else {
                "-".into()
            },
            p,
            basis,
            verdict
        ));
    }
    let count = |v: Verdict| c.changes.iter().filter(|ch| ch.verdict == v).count();
    out.push_str(&format!(
        "# {} figures: {} worse, {} better, {} without significant change, {} untested\n",
        c.changes.len(),
        count(Verdict::Worse),
        count(Verdict::Better),
        count(Verdict::NotSignificant),
        count(Verdict::Untested)
    ));
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
            out.push_str(&format!("# note: run {which} is incomplete\n"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::results::db::tests::report;

    #[test]
    fn a_figure_that_is_not_valid_is_not_compared_and_does_not_pass_a_gate() {
        let a = report("pingpong", 2, 20_000.0);
        let mut b = report("pingpong", 2, 30_000.0);
        // B's first point rests on 12 samples: not a measurement.
        let l = b.points[0].latency.as_mut().unwrap();
        l.rtt.samples = 12;
        l.validity = crate::stats::validity::latency(12);
        let c = compare(&a, &b, false).unwrap();
        let first = &c.changes[0];
        assert_eq!(first.verdict, Verdict::Invalid);
        assert!(!first.a_invalid && first.b_invalid);
        assert_eq!(
            first.invalid.as_deref(),
            Some("B: 12 samples: below the floor of 30 for a mean and its confidence interval")
        );
        // The other point is measured on both sides and tested as before.
        assert_eq!(c.changes[1].verdict, Verdict::Worse);
        // 50 % worse: both fail a 5 % gate, the invalid one because nothing says it is not.
        assert_eq!(failures(&c, 5.0).len(), 2);
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
        let e = compare(&a, &b, false).unwrap_err().to_string();
        assert!(
            e.contains("nodelay: false -> true") && e.contains("fast.zerocopy: false -> true"),
            "{e}"
        );
        assert!(!e.contains("repeat"), "{e}");
        assert!(e.contains("--allow-different"), "{e}");
        let c = compare(&a, &b, true).unwrap();
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
        assert!(compare(&a, &a, false)
            .unwrap()
            .different_settings
            .is_empty());
    }

    /// A congestion-control sweep is an axis, not a setting: two sweeps over the same
    /// algorithms compare point by point, each algorithm's against its own, and a point of an
    /// algorithm only one run measured is listed as such.
    #[test]
    fn a_congestion_control_sweep_is_an_axis_not_a_setting_difference() {
        use crate::transport::sockopt::CcName;
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
        let c = compare(&a, &b, false).unwrap();
        assert!(c.different_settings.is_empty());
        assert!(c.changes.iter().all(|ch| ch.point.contains("cc cubic")));
        assert_eq!(c.only_in_a.len(), 1, "{:?}", c.only_in_a);
        assert!(c.only_in_a[0].contains("cc reno"), "{:?}", c.only_in_a);
        assert!(c.only_in_b[0].contains("cc bbr"), "{:?}", c.only_in_b);
    }
}
