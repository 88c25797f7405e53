//! The comparison as the table `wirebench compare` prints, with its summary and notes.

use crate::model::RunDocument;

use super::{Comparison, Test, Verdict};

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
