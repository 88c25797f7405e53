//! Line charts against the swept parameter: throughput, latency and NetPIPE's signature.
//!
//! Latency with a band from the median to the 99th percentile; the signature is throughput
//! against transfer time.

use crate::figures::plots::{auto_scale, Axis, Band, Chart, Figure, LegendAt, Line, Ticks};
use crate::model::PointResult;

use super::curves::{
    curves, label, latency_axis_label, latency_factor, pattern_of, scale_for, valid_latency,
    x_axis, Side, MBIT_AXIS,
};
use super::param::{groups, x_param, Param};
use super::Run;

/// Throughput against message size (or the swept buffer): sender and receiver for streams,
/// 2n/RTT for ping-pong, request plus response payload for rr and crr.
pub fn throughput(runs: &[Run]) -> Option<Figure> {
    let pattern = pattern_of(runs);
    let x = x_param(runs);
    let (lines, hlines) = if pattern == "stream" {
        let dirs = ["client_to_server", "server_to_client"];
        let both = runs.iter().any(|r| {
            r.report.points.iter().any(|p| {
                p.stream.as_ref().is_some_and(|s| {
                    dirs.iter()
                        .all(|d| s.totals.iter().any(|t| t.direction == *d))
                })
            })
        });
        let total = |dir: &'static str, sender: bool| {
            move |p: &PointResult| -> Option<f64> {
                let t = p
                    .stream
                    .as_ref()?
                    .totals
                    .iter()
                    .find(|t| t.direction == dir)?;
                // A rate that is not a measurement is not drawn (the points table marks it).
                let verdict = if sender {
                    t.sender_validity()
                } else {
                    t.receiver_validity()
                };
                if verdict.is_invalid() {
                    return None;
                }
                Some(
                    if sender {
                        t.sender_bits_per_s
                    } else {
                        t.receiver_bits_per_s
                    } / 1e6,
                )
            }
        };
        let (c2s_s, c2s_r, s2c_s, s2c_r) = (
            total(dirs[0], true),
            total(dirs[0], false),
            total(dirs[1], true),
            total(dirs[1], false),
        );
        let mut sides: Vec<Side> = Vec::new();
        if both {
            sides.push(("client to server, sender", true, &c2s_s));
            sides.push(("client to server, receiver", false, &c2s_r));
            sides.push(("server to client, sender", true, &s2c_s));
            sides.push(("server to client, receiver", false, &s2c_r));
            curves(runs, x, &sides)
        } else {
            // One direction per run: whichever it has.
            let sender = |p: &PointResult| c2s_s(p).or_else(|| s2c_s(p));
            let receiver = |p: &PointResult| c2s_r(p).or_else(|| s2c_r(p));
            sides.push(("sender", true, &sender));
            sides.push(("receiver", false, &receiver));
            curves(runs, x, &sides)
        }
    } else {
        let what = if pattern == "pingpong" {
            "2n/RTT"
        } else {
            "request + response payload"
        };
        let value = |p: &PointResult| Some(valid_latency(p)?.throughput_bits_per_s / 1e6);
        curves(runs, x, &[(what, false, &value)])
    };
    if lines.is_empty() && hlines.is_empty() {
        return None;
    }
    let ys = lines
        .iter()
        .flat_map(|l| l.points.iter().map(|p| p.1))
        .chain(hlines.iter().map(|h| h.y));
    Some(Figure::Chart(Chart {
        title: format!("Throughput against {}", x.name(pattern)),
        x: x_axis(runs, x, &lines),
        y: Axis {
            label: MBIT_AXIS.into(),
            scale: auto_scale(ys, true),
            ticks: Ticks::Number,
            from_zero: true,
        },
        bands: Vec::new(),
        lines,
        hlines,
        legend: LegendAt::UpperLeft,
        error_bars: Vec::new(),
        invalid: Vec::new(),
        regressions: vec![],
        style_keys: Vec::new(),
        sequential_colours: None,
    }))
}

/// Latency against message size: the mean, the median and a band from the median to the
/// 99th percentile.
pub fn latency(runs: &[Run]) -> Option<Figure> {
    let pattern = pattern_of(runs);
    if pattern == "stream" {
        return None;
    }
    let x = x_param(runs);
    let f = latency_factor(pattern);
    let mean = move |p: &PointResult| Some(valid_latency(p)?.rtt.mean_ns * f);
    let median = move |p: &PointResult| Some(valid_latency(p)?.rtt.median_ns as f64 * f);
    let (mut lines, hlines) = curves(
        runs,
        x,
        &[("mean", false, &mean), ("median", true, &median)],
    );
    // Bands: same runs, groups and colours as the curves.
    let mut bands = Vec::new();
    let mut colour = 0;
    for run in runs {
        for g in groups(run.report, x) {
            let points: Vec<(f64, f64, f64)> = g
                .points
                .iter()
                .filter(|p| x == Param::Size || x.of(&p.key) > 0)
                .filter_map(|p| {
                    let r = &valid_latency(p)?.rtt;
                    Some((
                        x.of(&p.key) as f64,
                        r.median_ns as f64 * f,
                        r.p99_ns as f64 * f,
                    ))
                })
                .collect();
            if !points.is_empty() {
                bands.push(Band {
                    label: label(runs, run, &g.label, "p50 to p99"),
                    colour,
                    points,
                });
            }
            colour += 1;
        }
    }
    // Medians are dashed and without markers, so that means stand out.
    for l in &mut lines {
        if l.dashed {
            l.markers = false;
        }
    }
    if lines.is_empty() {
        return None;
    }
    let ys = bands
        .iter()
        .flat_map(|b| b.points.iter().flat_map(|p| [p.1, p.2]))
        .chain(lines.iter().flat_map(|l| l.points.iter().map(|p| p.1)));
    Some(Figure::Chart(Chart {
        title: format!("Latency against {}", x.name(pattern)),
        x: x_axis(runs, x, &lines),
        y: Axis {
            label: latency_axis_label(pattern).into(),
            scale: auto_scale(ys, false),
            ticks: Ticks::Number,
            from_zero: true,
        },
        bands,
        lines,
        hlines,
        legend: LegendAt::UpperLeft,
        error_bars: Vec::new(),
        invalid: Vec::new(),
        regressions: vec![],
        style_keys: Vec::new(),
        sequential_colours: None,
    }))
}

/// NetPIPE's signature graph: throughput against the time one transfer takes (ping-pong).
pub fn signature(runs: &[Run]) -> Option<Figure> {
    if pattern_of(runs) != "pingpong" {
        return None;
    }
    let mut lines = Vec::new();
    let mut colour = 0;
    for run in runs {
        for g in groups(run.report, Param::Size) {
            let points: Vec<(f64, f64)> = g
                .points
                .iter()
                .filter_map(|p| {
                    let l = valid_latency(p)?;
                    Some((l.one_way_mean_ns? / 1e3, l.throughput_bits_per_s / 1e6))
                })
                .collect();
            if !points.is_empty() {
                lines.push(Line {
                    label: label(runs, run, &g.label, "2n/RTT"),
                    colour,
                    dashed: false,
                    markers: true,
                    points,
                });
            }
            colour += 1;
        }
    }
    if lines.is_empty() {
        return None;
    }
    let ys = lines.iter().flat_map(|l| l.points.iter().map(|p| p.1));
    Some(Figure::Chart(Chart {
        title: "NetPIPE signature: throughput against transfer time".into(),
        x: Axis {
            label: "transfer time, RTT/2 (µs)".into(),
            scale: scale_for(lines.iter().flat_map(|l| l.points.iter().map(|p| p.0)), 2.0),
            ticks: Ticks::Number,
            from_zero: false,
        },
        y: Axis {
            label: MBIT_AXIS.into(),
            scale: auto_scale(ys, true),
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
    }))
}
