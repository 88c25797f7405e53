//! The QPS-against-latency curve of open-loop rr runs (`--arrivals`, `--rate` swept): the
//! latency percentiles from each request's scheduled send against the rate the server
//! achieved, on a log latency axis, as wrk2 and the load-latency curves of the tail-latency
//! studies draw it. Where the curve turns up is the capacity: past it the queue, not the
//! service, sets the latency.

use crate::figures::plots::{Axis, Chart, Figure, LegendAt, Line, Scale, Ticks};
use crate::model::{LatencyResult, OpenLoopResult};

use super::curves::{label, valid_latency};
use super::Run;

/// A percentile's value in a latency point, ns.
type Percentile = fn(&LatencyResult) -> u64;

/// The percentiles drawn: their name (as their sample floors are named) and value.
const PERCENTILES: [(&str, Percentile); 3] = [
    ("p50", |l| l.rtt.median_ns),
    ("p99", |l| l.rtt.p99_ns),
    ("p99.9", |l| l.rtt.p999_ns),
];

/// Latency (p50, p99, p99.9 from the scheduled send, µs, log axis) against the achieved
/// rate (replies per second), one curve per percentile and run; None without an open-loop
/// point. A point whose latency is not valid is left out, and so is a percentile below its
/// sample floor.
pub fn qps(runs: &[Run]) -> Option<Figure> {
    let mut lines = Vec::new();
    let mut samples = 0u64;
    let mut points = 0usize;
    for (r, run) in runs.iter().enumerate() {
        let pts: Vec<(&LatencyResult, &OpenLoopResult)> = run
            .report
            .points
            .iter()
            .filter_map(|p| {
                let l = valid_latency(p)?;
                Some((l, l.open_loop.as_ref()?))
            })
            .collect();
        points += pts.len();
        samples += pts.iter().map(|(l, _)| l.rtt.samples).sum::<u64>();
        for (k, (name, value)) in PERCENTILES.iter().enumerate() {
            let curve: Vec<(f64, f64)> = pts
                .iter()
                .filter(|(l, _)| !l.percentile_validity(name).is_invalid())
                .map(|(l, o)| (o.achieved_per_s, value(l) as f64 / 1e3))
                .filter(|(x, y)| *x > 0.0 && *y > 0.0)
                .collect();
            if curve.is_empty() {
                continue;
            }
            lines.push(Line {
                label: label(runs, run, "", name),
                colour: r * PERCENTILES.len() + k,
                dashed: k > 0,
                markers: true,
                points: curve,
            });
        }
    }
    if lines.is_empty() {
        return None;
    }
    Some(Figure::Chart(Chart {
        title: format!(
            "Latency against achieved rate, open loop (client side, {samples} replies over {points} points)"
        ),
        x: Axis {
            label: "achieved rate (replies per second)".into(),
            scale: Scale::Linear,
            ticks: Ticks::Number,
            from_zero: true,
        },
        y: Axis {
            label: "latency from the scheduled send (µs, log)".into(),
            scale: Scale::Log,
            ticks: Ticks::Number,
            from_zero: false,
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
