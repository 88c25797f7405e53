//! The latency distribution of one point per run: a histogram or the cumulative distribution.

use crate::figures::plots::{Axis, Chart, Figure, LegendAt, Line, Scale, Ticks};

use super::curves::{latency_axis_label, latency_factor, pattern_of, scale_for};
use super::points::{point_of, short_point};
use super::Run;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DistributionKind {
    Histogram,
    Cdf,
}

/// The latency distribution of one point per run: a histogram (share of samples per bin,
/// drawn as steps) or the cumulative distribution.
pub fn distribution(runs: &[Run], index: Option<usize>, kind: DistributionKind) -> Option<Figure> {
    let pattern = pattern_of(runs);
    if pattern == "stream" {
        return None;
    }
    let f = latency_factor(pattern);
    let mut lines = Vec::new();
    let mut titles = Vec::new();
    for (colour, run) in runs.iter().enumerate() {
        let Some(p) = point_of(run.report, index) else {
            continue;
        };
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
    let at = if titles.len() == 1 {
        format!(" at {}", titles[0])
    } else {
        String::new()
    };
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
        style_keys: Vec::new(),
        sequential_colours: None,
    }))
}
