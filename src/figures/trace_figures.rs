//! The figures of a segment-flow trace (`wirebench trace plot`): segment size, bytes
//! outstanding and the advertised window against time, one line per connection, within an
//! optional time window.

use super::plots::{Axis, Chart, Figure, LegendAt, Line, Scale, Ticks};
use crate::trace::{Flow, FlowSeries};

/// Which series of a flow a figure draws.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TraceFigure {
    SegmentSize,
    Outstanding,
    Window,
}

impl TraceFigure {
    pub const ALL: [TraceFigure; 3] = [
        TraceFigure::SegmentSize,
        TraceFigure::Outstanding,
        TraceFigure::Window,
    ];

    /// The figure's file name part.
    pub fn name(self) -> &'static str {
        match self {
            TraceFigure::SegmentSize => "segment-size",
            TraceFigure::Outstanding => "outstanding",
            TraceFigure::Window => "window",
        }
    }

    fn title(self) -> &'static str {
        match self {
            TraceFigure::SegmentSize => "TCP segment size (payload per captured segment)",
            TraceFigure::Outstanding => "Bytes outstanding (snd_nxt - snd_una at the capture)",
            TraceFigure::Window => "Receive window the receiver advertised",
        }
    }

    fn series(self, s: &FlowSeries) -> &[(u64, u64)] {
        match self {
            TraceFigure::SegmentSize => &s.segment_size,
            TraceFigure::Outstanding => &s.outstanding,
            TraceFigure::Window => &s.window,
        }
    }
}

/// The figure `kind` of `flows` between `from_ns` and `to_ns` (nanoseconds since the
/// capture's first segment; None: its start, its end). None when nothing falls within.
pub fn figure(
    flows: &[Flow],
    kind: TraceFigure,
    from_ns: Option<u64>,
    to_ns: Option<u64>,
) -> Option<Figure> {
    let (from, to) = (from_ns.unwrap_or(0), to_ns.unwrap_or(u64::MAX));
    let lines: Vec<Line> = flows
        .iter()
        .enumerate()
        .filter_map(|(i, f)| {
            let points: Vec<(f64, f64)> = kind
                .series(&f.series)
                .iter()
                .filter(|&&(t, _)| (from..=to).contains(&t))
                .map(|&(t, v)| (t as f64 / 1e9, v as f64))
                .collect();
            (!points.is_empty()).then(|| Line {
                label: format!("{} -> {}", f.summary.sender, f.summary.receiver),
                colour: i,
                dashed: false,
                markers: points.len() <= 60,
                points,
            })
        })
        .collect();
    if lines.is_empty() {
        return None;
    }
    let mut title = kind.title().to_owned();
    if kind == TraceFigure::Window && flows.iter().any(|f| f.summary.window_shift.is_none()) {
        title.push_str(", unscaled");
    }
    Some(Figure::Chart(Chart {
        title,
        x: Axis {
            label: "time since the capture's first segment (s)".into(),
            scale: Scale::Linear,
            ticks: Ticks::Number,
            from_zero: false,
        },
        y: Axis {
            label: "bytes".into(),
            scale: Scale::Linear,
            ticks: Ticks::Bytes,
            from_zero: true,
        },
        bands: vec![],
        lines,
        hlines: vec![],
        legend: LegendAt::UpperRight,
        error_bars: vec![],
        invalid: vec![],
        regressions: vec![],
        style_keys: vec![],
        sequential_colours: None,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::trace::FlowSummary;

    fn flow() -> Flow {
        let summary: FlowSummary = serde_json::from_value(serde_json::json!({
            "sender": "a:1", "receiver": "b:2", "duration_ns": 0, "data_segments": 0,
            "data_bytes": 0, "retransmitted_segments": 0, "repeated_bytes": 0,
            "unique_data_bytes": 0, "acks": 0, "segments_per_ack": null, "bytes_per_ack": null,
            "mss": 0, "mss_from_syn": false, "sub_mss_segments": 0, "sub_mss_share": null,
            "window_shift": null, "delayed_acks": 0, "ack_baseline_ns": null,
            "median_gap_ns": null, "stops": 0, "stopped_ns": 0, "stop_threshold_ns": null
        }))
        .unwrap();
        Flow {
            summary,
            series: FlowSeries {
                segment_size: vec![(0, 100), (1_000_000_000, 200), (2_000_000_000, 300)],
                outstanding: vec![],
                window: vec![(5, 1000)],
            },
        }
    }

    /// The zoom window keeps the points within it, in seconds; an empty figure is None.
    #[test]
    fn the_window_selects_points_in_seconds() {
        let f = [flow()];
        let Some(Figure::Chart(c)) = figure(
            &f,
            TraceFigure::SegmentSize,
            Some(500_000_000),
            Some(2_000_000_000),
        ) else {
            panic!("a chart");
        };
        assert_eq!(c.lines[0].points, vec![(1.0, 200.0), (2.0, 300.0)]);
        assert_eq!(c.lines[0].label, "a:1 -> b:2");
        assert!(figure(&f, TraceFigure::Outstanding, None, None).is_none());
        let Some(Figure::Chart(w)) = figure(&f, TraceFigure::Window, None, None) else {
            panic!("a chart");
        };
        assert!(w.title.ends_with("unscaled"));
        assert!(super::super::plots::render_svg(&Figure::Chart(c)).is_ok());
    }
}
