//! The comparison as the table `wirebench compare` prints, with its summary and notes.

use crate::model::RunDocument;
use crate::text::table::{comment, units_line, Column, Style, Table};

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

/// The comparison as a plain table with a summary line.
pub fn format(c: &Comparison, a_id: i64, b_id: i64, a: &RunDocument, b: &RunDocument) -> String {
    render(c, a_id, b_id, a, b, Style::Plain)
}

/// The comparison as a table with a summary line, plain or as Markdown.
pub fn render(
    c: &Comparison,
    a_id: i64,
    b_id: i64,
    a: &RunDocument,
    b: &RunDocument,
    style: Style,
) -> String {
    let mut out = comment(
        style,
        &format!(
            "compare run {a_id} (A, baseline: {} over {}, {}) with run {b_id} (B: {} over {}, {})",
            a.pattern, a.transport, a.started_at, b.pattern, b.transport, b.started_at
        ),
    );
    out.push_str(&units_line(
        style,
        "each figure's unit is in its name (times in us, rates in Mbit/s); change and its interval in %",
    ));
    if !c.different_settings.is_empty() {
        out.push_str(&comment(
            style,
            &format!(
                "the runs differ in settings (--allow-different): {}; a change below is the settings' as much as anything's",
                c.different_settings.join("; ")
            ),
        ));
    }
    let conf = (c.confidence * 100.0).round();
    let margin = c.margin_percent;
    out.push_str(&comment(
        style,
        &format!(
            "change = (B - A) / A; tested between runs (Welch's t on the per-run figures), with the {conf}% confidence interval of the change; worse or better only when the whole interval lies beyond the ±{margin}% margin (--margin); worse = higher latency or lower throughput/transactions"
        ),
    ));
    let mut t = Table::new(vec![
        Column::left("point"),
        Column::left("figure"),
        Column::right("A"),
        Column::right("B"),
        Column::right("change"),
        Column::right(format!("{conf}% CI")),
        Column::right("p-value"),
        Column::right("runs"),
        Column::left("verdict"),
    ]);
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
        let mark = |invalid: bool| if invalid { "!" } else { "" };
        t.row([
            ch.point.to_string(),
            ch.figure.to_string(),
            format!("{:.3}{}", ch.a, mark(ch.a_invalid)),
            format!("{:.3}{}", ch.b, mark(ch.b_invalid)),
            if ch.percent.is_finite() {
                format!("{:+.2}%", ch.percent)
            } else {
                "-".into()
            },
            ci,
            p,
            runs,
            verdict,
        ]);
    }
    out.push_str(&t.render(style));
    if style == Style::Markdown {
        out.push('\n');
    }
    let count = |v: Verdict| c.changes.iter().filter(|ch| ch.verdict == v).count();
    out.push_str(&comment(
        style,
        &format!(
            "{} figures: {} worse, {} better, {} the same within ±{margin}%, {} inconclusive, {} cannot tell (one run on a side), {} untested",
            c.changes.len(),
            count(Verdict::Worse),
            count(Verdict::Better),
            count(Verdict::Equivalent),
            count(Verdict::Inconclusive),
            count(Verdict::CannotTell),
            count(Verdict::Untested)
        ),
    ));
    if count(Verdict::CannotTell) > 0 {
        out.push_str(&comment(
            style,
            "one run on a side: two runs of the same command differ by more than their samples show, so a change cannot be told from one run each; measure both with --repeat 3 or more (--fail-if-worse does not fail on these)",
        ));
    }
    if count(Verdict::Invalid) > 0 {
        out.push_str(&comment(
            style,
            &format!(
                "{} figure(s) NOT VALID in A or B (below the floors of a measurement: see the verdict), not compared",
                count(Verdict::Invalid)
            ),
        ));
    }
    for (which, list) in [("A", &c.only_in_a), ("B", &c.only_in_b)] {
        if !list.is_empty() {
            out.push_str(&comment(
                style,
                &format!("only in {which}, not compared: {}", list.join("; ")),
            ));
        }
    }
    for (which, r) in [("A", a), ("B", b)] {
        if !r.complete {
            out.push_str(&comment(
                style,
                &format!("note: run {which} is incomplete: {}", r.points_of_planned()),
            ));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::super::Change;
    use super::*;
    use crate::store::db::tests::report;
    use crate::text::table::{check_aligned, Align};

    fn change(point: &str, figure: &'static str, a: f64, b: f64, verdict: Verdict) -> Change {
        Change {
            point: point.into(),
            figure,
            a,
            b,
            percent: (b - a) / a * 100.0,
            higher_is_better: false,
            test: Test::Runs {
                p_value: 1e-9,
                ci_low_percent: -0.5,
                ci_high_percent: 123456.25,
                runs_a: 3,
                runs_b: 12,
            },
            verdict,
            invalid: None,
            a_invalid: false,
            b_invalid: true,
        }
    }

    fn awkward() -> Comparison {
        let mut untested = change(
            "-",
            "receiver throughput (Mbit/s)",
            0.0,
            0.001,
            Verdict::Untested,
        );
        untested.test = Test::Untested {
            reason: "a run's figure is zero or not finite",
        };
        untested.percent = f64::NAN;
        Comparison {
            changes: vec![
                change(
                    "size=1",
                    "one-way latency, RTT/2 mean (us)",
                    12.5,
                    15.0,
                    Verdict::Worse,
                ),
                change(
                    "size=1048576, a forty-character label..",
                    "transactions per second (1/s)",
                    1.8e19,
                    2.5e-7,
                    Verdict::Better,
                ),
                change("naïve", "rtt", 1.0, 1.0, Verdict::Equivalent),
                untested,
            ],
            different_settings: Vec::new(),
            confidence: 0.95,
            margin_percent: 5.0,
            only_in_a: Vec::new(),
            only_in_b: Vec::new(),
        }
    }

    #[test]
    fn the_comparison_aligns_whatever_its_points_and_figures() {
        let doc = report("pingpong", 1, 20_000.0);
        let text = format(&awkward(), 1, 2, &doc, &doc);
        let table: String = text
            .lines()
            .filter(|l| !l.starts_with('#'))
            .map(|l| format!("{l}\n"))
            .collect();
        let aligns = [
            Align::Left,
            Align::Left,
            Align::Right,
            Align::Right,
            Align::Right,
            Align::Right,
            Align::Right,
            Align::Right,
            Align::Left,
        ];
        assert_eq!(check_aligned(&table, &aligns, ""), Ok(()), "{text}");
        assert_eq!(table.lines().count(), 5, "{text}");
        assert!(text.starts_with("# compare run 1"), "{text}");
        assert!(text.contains("\n# units: "), "{text}");
        assert!(text.contains("15.000!  "), "{text}");
    }

    #[test]
    fn the_comparison_as_markdown_has_every_cell() {
        let doc = report("pingpong", 1, 20_000.0);
        let text = render(&awkward(), 1, 2, &doc, &doc, Style::Markdown);
        let rows: Vec<&str> = text.lines().filter(|l| l.starts_with('|')).collect();
        assert_eq!(rows.len(), 6, "{text}");
        let cells = |l: &str| l.replace("\\|", "").matches('|').count();
        assert!(rows.iter().all(|l| cells(l) == 10), "{text}");
        assert!(!text.lines().any(|l| l.starts_with('#')), "{text}");
    }
}
