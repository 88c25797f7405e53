//! The latency distribution of one point per run: a histogram, the cumulative distribution,
//! or latency by percentile on a "nines" axis.

use crate::figures::plots::{
    auto_scale, nines_x, Axis, Chart, Figure, LegendAt, Line, Scale, Ticks,
};

use super::curves::{latency_axis_label, latency_factor, pattern_of, scale_for};
use super::points::{point_of, short_point};
use super::Run;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DistributionKind {
    Histogram,
    Cdf,
    /// Latency against percentile as HdrHistogram plots it: the percentile on a log axis of
    /// nines (90%, 99%, 99.9%, ...), where the CDF's tail is squeezed against 1.
    Percentiles,
}

/// The runs' points a distribution figure leaves out, one line each: "run #7 at size 64 B:
/// <why>". A point whose latency the run judged not valid (too few samples, a timed phase below
/// its floor) has a distribution that is not a measurement: it is not drawn, as the other
/// figures do not draw its mean, and the figure's caption says so with these lines.
pub fn distribution_left_out(runs: &[Run], index: Option<usize>) -> Vec<String> {
    if pattern_of(runs) == "stream" {
        return Vec::new();
    }
    runs.iter()
        .filter_map(|run| {
            let p = point_of(run.report, index)?;
            let v = &p.latency.as_ref()?.validity;
            v.is_invalid().then(|| {
                format!(
                    "{} at {}: {}",
                    run.name(),
                    short_point(run.report, p),
                    v.reason()
                )
            })
        })
        .collect()
}

/// The latency distribution of one point per run: a histogram (share of samples per bin,
/// drawn as steps), the cumulative distribution, or the latency by percentile. A point whose
/// latency is not valid is left out (see [`distribution_left_out`]), and the title counts it.
pub fn distribution(runs: &[Run], index: Option<usize>, kind: DistributionKind) -> Option<Figure> {
    let pattern = pattern_of(runs);
    if pattern == "stream" {
        return None;
    }
    let f = latency_factor(pattern);
    let mut lines = Vec::new();
    let mut titles = Vec::new();
    let mut left_out = 0;
    for (colour, run) in runs.iter().enumerate() {
        let Some(p) = point_of(run.report, index) else {
            continue;
        };
        if p.latency.as_ref().is_some_and(|l| l.validity.is_invalid()) {
            left_out += 1;
            continue;
        }
        let bins = &p.latency.as_ref()?.distribution;
        let total: u64 = bins.iter().map(|b| b.count).sum();
        if total == 0 {
            continue;
        }
        let mut points = Vec::new();
        match kind {
            DistributionKind::Histogram => {
                let mut prev_high: Option<f64> = None;
                for b in bins {
                    let share = b.count as f64 / total as f64 * 100.0;
                    let (lo, hi) = (b.low_ns * f, b.high_ns * f);
                    match prev_high {
                        Some(ph) if (lo - ph).abs() > ph * 1e-9 => {
                            points.push((ph, 0.0));
                            points.push((lo, 0.0));
                        }
                        None => points.push((lo, 0.0)),
                        _ => {}
                    }
                    points.push((lo, share));
                    points.push((hi, share));
                    prev_high = Some(hi);
                }
                if let Some(ph) = prev_high {
                    points.push((ph, 0.0));
                }
            }
            DistributionKind::Percentiles => points = by_percentile(bins, total, f),
            DistributionKind::Cdf => {
                let mut seen = 0u64;
                points.push((bins[0].low_ns * f, 0.0));
                for b in bins {
                    seen += b.count;
                    points.push((b.high_ns * f, seen as f64 / total as f64));
                }
            }
        }
        let what = short_point(run.report, p);
        titles.push(what.clone());
        lines.push(Line {
            label: if runs.len() > 1 {
                format!("{} at {what}, {total} samples", run.name())
            } else {
                format!("{what}, {total} samples")
            },
            colour,
            dashed: false,
            markers: false,
            points,
        });
    }
    if lines.is_empty() {
        return None;
    }
    titles.dedup();
    let mut at = if titles.len() == 1 {
        format!(" at {}", titles[0])
    } else {
        String::new()
    };
    // The figure alone (`plot`) says that it is not all the runs; the report's caption
    // names the points and why.
    if left_out > 0 {
        at.push_str(&format!(" ({left_out} not valid, left out)"));
    }
    let (title, y_label, legend) = match kind {
        DistributionKind::Histogram => (
            format!("Latency histogram{at}"),
            "share of samples per bin (%), 20 bins per decade",
            LegendAt::UpperRight,
        ),
        DistributionKind::Cdf => (
            format!("Latency distribution (CDF){at}"),
            "fraction of samples at or below",
            LegendAt::LowerRight,
        ),
        DistributionKind::Percentiles => {
            return Some(Figure::Chart(percentile_chart(
                format!("Latency by percentile{at}"),
                pattern,
                lines,
            )));
        }
    };
    Some(Figure::Chart(Chart {
        title,
        x: Axis {
            label: latency_axis_label(pattern).into(),
            scale: scale_for(lines.iter().flat_map(|l| l.points.iter().map(|p| p.0)), 3.0),
            ticks: Ticks::Number,
            from_zero: false,
        },
        y: Axis {
            label: y_label.into(),
            scale: Scale::Linear,
            ticks: Ticks::Number,
            from_zero: true,
        },
        bands: Vec::new(),
        lines,
        hlines: Vec::new(),
        legend,
        error_bars: Vec::new(),
        invalid: Vec::new(),
        regressions: vec![],
        style_keys: Vec::new(),
        sequential_colours: None,
    }))
}

/// Latency against percentile, as steps: the samples of a bin reach its upper edge, from the
/// percentile below the bin to the one above it. The last sample's percentile, 1 - 1/n, ends
/// the curve: 100% has no place on the axis.
fn by_percentile(bins: &[crate::model::LatencyBin], total: u64, f: f64) -> Vec<(f64, f64)> {
    let last = 1.0 - 1.0 / total as f64;
    let mut points = Vec::new();
    let mut seen = 0u64;
    for b in bins.iter().filter(|b| b.count > 0) {
        let below = (seen as f64 / total as f64).min(last);
        seen += b.count;
        let above = (seen as f64 / total as f64).min(last);
        points.push((nines_x(below), b.high_ns * f));
        if above > below {
            points.push((nines_x(above), b.high_ns * f));
        }
    }
    points
}

fn percentile_chart(title: String, pattern: &str, lines: Vec<Line>) -> Chart {
    let ys = lines.iter().flat_map(|l| l.points.iter().map(|p| p.1));
    Chart {
        title,
        x: Axis {
            label: "percentile".into(),
            scale: Scale::Log,
            ticks: Ticks::Nines,
            from_zero: false,
        },
        y: Axis {
            label: latency_axis_label(pattern).into(),
            scale: auto_scale(ys, false),
            ticks: Ticks::Number,
            from_zero: true,
        },
        bands: Vec::new(),
        lines,
        hlines: Vec::new(),
        legend: LegendAt::UpperLeft,
        error_bars: Vec::new(),
        invalid: Vec::new(),
        regressions: vec![],
        style_keys: Vec::new(),
        sequential_colours: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::figures::plots::render_svg;
    use crate::model::LatencyBin;

    /// 10 000 round trips: 9900 within 20 us, 90 within 200, 9 within 2 ms, one at 20 ms.
    fn bins() -> Vec<LatencyBin> {
        [
            (10e3, 20e3, 9900),
            (100e3, 200e3, 90),
            (1e6, 2e6, 9),
            (10e6, 20e6, 1),
        ]
        .iter()
        .map(|&(low_ns, high_ns, count)| LatencyBin {
            low_ns,
            high_ns,
            count,
        })
        .collect()
    }

    #[test]
    fn percentiles_go_on_a_nines_axis() {
        let mut r = crate::store::db::tests::report("rr", 1, 15_000.0);
        if let Some(l) = r.points[0].latency.as_mut() {
            l.distribution = bins();
        }
        let runs = [Run { id: 7, report: &r }];
        let Some(Figure::Chart(c)) = distribution(&runs, None, DistributionKind::Percentiles)
        else {
            panic!("no percentile figure");
        };
        assert_eq!((c.x.scale, c.x.ticks), (Scale::Log, Ticks::Nines));
        let pts = &c.lines[0].points;
        // p99 is the second bin's lowest percentile, p99.9 its highest: 200 us at x = 1000.
        let at = |x: f64| -> Vec<f64> {
            pts.iter()
                .filter(|p| (p.0 - x).abs() < 1e-6 * x)
                .map(|p| p.1)
                .collect()
        };
        assert_eq!(at(1.0), [20.0]);
        assert_eq!(at(100.0), [20.0, 200.0]);
        assert_eq!(at(1000.0), [200.0, 2000.0]);
        // p99.99 of 10 000 is the last but one sample; the last, at 20 ms, ends the curve.
        assert_eq!(at(10000.0), [2000.0, 20000.0]);
        assert_eq!(pts.last().map(|p| p.1), Some(20000.0));
        let svg = render_svg(&Figure::Chart(c)).unwrap();
        for tick in ["\n0%\n", "\n90%\n", "\n99%\n", "\n99.9%\n", "\n99.99%\n"] {
            assert!(svg.contains(tick), "no tick {tick}");
        }
    }

    /// Two runs of one point, the second's latency not valid (5 samples): each distribution
    /// draws the first alone, its title counts the one left out, and the note for the
    /// caption names it with the reason.
    #[test]
    fn a_distribution_that_is_not_valid_is_left_out_and_said_to_be() {
        let mut valid = crate::store::db::tests::report("rr", 1, 15_000.0);
        if let Some(l) = valid.points[0].latency.as_mut() {
            l.distribution = bins();
        }
        let mut invalid = valid.clone();
        let why = crate::stats::validity::latency(5);
        assert!(why.is_invalid());
        if let Some(l) = invalid.points[0].latency.as_mut() {
            l.rtt.samples = 5;
            l.validity = why.clone();
        }
        let runs = [
            Run {
                id: 1,
                report: &valid,
            },
            Run {
                id: 2,
                report: &invalid,
            },
        ];
        for kind in [
            DistributionKind::Histogram,
            DistributionKind::Cdf,
            DistributionKind::Percentiles,
        ] {
            let Some(Figure::Chart(c)) = distribution(&runs, None, kind) else {
                panic!("no {kind:?} figure");
            };
            assert_eq!(c.lines.len(), 1, "{kind:?}");
            assert!(
                c.lines[0].label.starts_with("#1 at "),
                "{}",
                c.lines[0].label
            );
            assert!(c.title.ends_with(" (1 not valid, left out)"), "{}", c.title);
            let svg = render_svg(&Figure::Chart(c)).unwrap();
            assert!(svg.contains("#1 at size 1, 10000 samples"), "{kind:?}");
            assert!(!svg.contains("#2 at"), "{kind:?}");
        }
        let notes = distribution_left_out(&runs, None);
        assert_eq!(notes, [format!("#2 at size 1: {}", why.reason())]);
        // Nothing is left out when every point is valid.
        assert!(distribution_left_out(&runs[..1], None).is_empty());
    }
}
