//! What the line charts share: curves per run, group and side, their axes, and valid values.

use crate::figures::plots::{Axis, HLine, Line, Scale, Ticks};
use crate::model::PointResult;

use super::param::{groups, Param};
use super::Run;

/// Log scale when the values span more than `ratio`; all must be positive.
pub(super) fn scale_for(values: impl Iterator<Item = f64>, ratio: f64) -> Scale {
    let vs: Vec<f64> = values.filter(|v| v.is_finite()).collect();
    let lo = vs.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = vs.iter().copied().fold(0.0, f64::max);
    if lo > 0.0 && hi / lo > ratio {
        Scale::Log
    } else {
        Scale::Linear
    }
}

/// A curve's legend: the run (when several are overlaid), its group and what it shows.
pub(super) fn label(runs: &[Run], run: &Run, group: &str, what: &str) -> String {
    let mut parts = Vec::new();
    if runs.len() > 1 {
        parts.push(run.name());
    }
    if !group.is_empty() {
        parts.push(group.to_owned());
    }
    if !what.is_empty() {
        parts.push(what.to_owned());
    }
    parts.join(" ")
}

/// A curve of a line chart: its legend, whether dashed, and the y value of a point.
pub(super) type Side<'f> = (&'f str, bool, &'f dyn Fn(&PointResult) -> Option<f64>);

pub(super) fn pattern_of<'a>(runs: &[Run<'a>]) -> &'a str {
    runs.first().map_or("", |r| r.report.pattern.name())
}

/// One curve per run, group and side: (x, y) for every point that has a value. A point of a
/// buffer sweep at 0 (autotuning) has no place on the axis and becomes a reference line.
pub(super) fn curves(runs: &[Run], x: Param, sides: &[Side]) -> (Vec<Line>, Vec<HLine>) {
    let mut lines = Vec::new();
    let mut hlines = Vec::new();
    let mut colour = 0;
    for run in runs {
        for g in groups(run.report, x) {
            for (what, dashed, value) in sides {
                let mut points = Vec::new();
                for p in &g.points {
                    let Some(y) = value(p) else { continue };
                    let xv = x.of(&p.key);
                    if xv == 0 && x != Param::Size {
                        // One reference line per curve pair: the receiver's (solid) side.
                        if *dashed {
                            continue;
                        }
                        hlines.push(HLine {
                            label: label(runs, run, &g.label, &format!("{what}, autotuned buffer")),
                            colour,
                            y,
                        });
                    } else {
                        points.push((xv as f64, y));
                    }
                }
                if !points.is_empty() {
                    lines.push(Line {
                        label: label(runs, run, &g.label, what),
                        colour,
                        dashed: *dashed,
                        markers: true,
                        points,
                    });
                }
            }
            colour += 1;
        }
    }
    (lines, hlines)
}

pub(super) fn x_axis(runs: &[Run], x: Param, lines: &[Line]) -> Axis {
    Axis {
        label: x.axis_label(pattern_of(runs)),
        // Byte sweeps are mostly geometric: a log axis from a factor of 4 on.
        scale: scale_for(lines.iter().flat_map(|l| l.points.iter().map(|p| p.0)), 3.5),
        ticks: Ticks::Bytes,
        from_zero: false,
    }
}

/// The throughput axis's title: Mbit/s are decimal, 10⁶ bit/s, written with a superscript
/// (figures are text in SVG and PNG alike, where "10^6" would print as typed).
pub(super) const MBIT_AXIS: &str = "throughput (Mbit/s = 10\u{2076} bit/s)";

/// Latency in microseconds as the table shows it: one-way (RTT/2) for ping-pong, the whole
/// transaction for rr and crr.
pub(super) fn latency_factor(pattern: &str) -> f64 {
    if pattern == "pingpong" {
        0.5e-3
    } else {
        1e-3
    }
}

pub(super) fn latency_axis_label(pattern: &str) -> &'static str {
    if pattern == "pingpong" {
        "one-way latency, RTT/2 (µs)"
    } else {
        "transaction round-trip time (µs)"
    }
}

/// A point's latency figures, unless they are not valid (too few samples): figures leave
/// those out, and the report's points table marks them.
pub(super) fn valid_latency(p: &PointResult) -> Option<&crate::model::LatencyResult> {
    p.latency.as_ref().filter(|l| !l.validity.is_invalid())
}

/// How many of the runs' points have a figure that is not valid, and so is not drawn.
pub fn invalid_points(runs: &[Run]) -> usize {
    runs.iter()
        .flat_map(|r| r.report.points.iter())
        .filter(|p| {
            p.latency.as_ref().is_some_and(|l| l.validity.is_invalid())
                || p.stream.as_ref().is_some_and(|s| {
                    s.totals.iter().any(|t| {
                        t.sender_validity().is_invalid() || t.receiver_validity().is_invalid()
                    })
                })
        })
        .count()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_throughput_axis_writes_its_power_as_a_superscript() {
        assert_eq!(MBIT_AXIS, "throughput (Mbit/s = 10⁶ bit/s)");
        assert!(!MBIT_AXIS.contains('^'));
    }
}
