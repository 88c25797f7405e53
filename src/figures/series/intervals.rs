//! Time series of one point's interval reports: throughput, congestion window or RTT over time.

use crate::figures::plots::{auto_scale, Axis, Band, Chart, Figure, LegendAt, Line, Scale, Ticks};
use crate::model::{PointResult, RunDocument};

use super::curves::MBIT_AXIS;
use super::points::short_point;
use super::Run;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IntervalKind {
    Throughput,
    Cwnd,
    Rtt,
}

/// Points of a run that have interval reports.
pub fn points_with_intervals(r: &RunDocument) -> Vec<&PointResult> {
    r.points
        .iter()
        .filter(|p| {
            p.stream.as_ref().is_some_and(|s| {
                s.streams
                    .iter()
                    .any(|st| !st.sender.intervals.is_empty() || !st.receiver.intervals.is_empty())
            })
        })
        .collect()
}

/// A time series of one point's interval reports: each side's throughput, or the sender
/// kernel's congestion window or smoothed RTT (TCP_INFO), per stream.
pub fn intervals(run: &Run, p: &PointResult, kind: IntervalKind) -> Option<Figure> {
    let s = p.stream.as_ref()?;
    let mut lines = Vec::new();
    let mut bands = Vec::new();
    let many = s.streams.len() > 1;
    for (colour, st) in s.streams.iter().enumerate() {
        let name = if many {
            format!("stream {} ", st.index)
        } else {
            String::new()
        };
        match kind {
            IntervalKind::Throughput => {
                for (side, stats, dashed) in [
                    ("sender", &st.sender, true),
                    ("receiver", &st.receiver, false),
                ] {
                    let points: Vec<(f64, f64)> = stats
                        .intervals
                        .iter()
                        .map(|iv| (iv.end_ns as f64 / 1e9, iv.bits_per_s / 1e6))
                        .collect();
                    if !points.is_empty() {
                        lines.push(Line {
                            label: format!("{name}{side}"),
                            colour,
                            dashed,
                            markers: points.len() <= 60,
                            points,
                        });
                    }
                }
            }
            IntervalKind::Cwnd | IntervalKind::Rtt => {
                let infos: Vec<(f64, crate::model::socket::TcpInfo)> = st
                    .sender
                    .intervals
                    .iter()
                    .filter_map(|iv| Some((iv.end_ns as f64 / 1e9, iv.tcp_info?)))
                    .collect();
                if infos.is_empty() {
                    continue;
                }
                let points: Vec<(f64, f64)> = infos
                    .iter()
                    .map(|(t, i)| match kind {
                        IntervalKind::Cwnd => (*t, f64::from(i.snd_cwnd)),
                        // In µs, as every other latency of the report.
                        _ => (*t, f64::from(i.rtt_us)),
                    })
                    .collect();
                if kind == IntervalKind::Rtt {
                    bands.push(Band {
                        label: format!("{name}rtt ± rttvar"),
                        colour,
                        points: infos
                            .iter()
                            .map(|(t, i)| {
                                let (rtt, var) = (f64::from(i.rtt_us), f64::from(i.rttvar_us));
                                (*t, (rtt - var).max(0.0), rtt + var)
                            })
                            .collect(),
                    });
                }
                lines.push(Line {
                    label: format!(
                        "{name}{}",
                        if kind == IntervalKind::Cwnd {
                            "cwnd"
                        } else {
                            "smoothed rtt"
                        }
                    ),
                    colour,
                    dashed: false,
                    markers: points.len() <= 60,
                    points,
                });
            }
        }
    }
    if lines.is_empty() {
        return None;
    }
    let at = short_point(run.report, p);
    // Rates and windows span decades in slow start or a stall; an RTT stays linear.
    let y_scale = if kind == IntervalKind::Rtt {
        Scale::Linear
    } else {
        auto_scale(
            lines.iter().flat_map(|l| l.points.iter().map(|p| p.1)),
            true,
        )
    };
    let (title, y) = match kind {
        IntervalKind::Throughput => (
            format!("Run {}: throughput over time, {at}", run.name()),
            MBIT_AXIS,
        ),
        IntervalKind::Cwnd => (
            format!("Run {}: congestion window, {at}", run.name()),
            "congestion window, TCP_INFO (segments)",
        ),
        IntervalKind::Rtt => (
            format!("Run {}: round-trip time, {at}", run.name()),
            "kernel's smoothed RTT, TCP_INFO (µs)",
        ),
    };
    Some(Figure::Chart(Chart {
        title,
        x: Axis {
            label: "time since the side's timed phase began (s)".into(),
            scale: Scale::Linear,
            ticks: Ticks::Number,
            from_zero: true,
        },
        y: Axis {
            label: y.into(),
            scale: y_scale,
            ticks: Ticks::Number,
            from_zero: true,
        },
        bands,
        lines,
        hlines: Vec::new(),
        legend: LegendAt::LowerRight,
        error_bars: Vec::new(),
        invalid: Vec::new(),
        regressions: vec![],
        style_keys: Vec::new(),
        sequential_colours: None,
    }))
}
