//! The figure of latency under load (`run --load ... --plot FILE`, `results plot --kind
//! under-load`): the round trips over time, idle and loaded, each from its own timed start.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};

use super::plots::{Axis, Chart, Figure, LegendAt, Line, Scale, Ticks};
use crate::report::load::{LatencyFigures, UnderLoad};
use crate::report::model::{PointResult, RunReport};

/// The round trips of `u` against time: one line per phase (idle, loaded); None without any.
pub fn rtt_over_time(u: &UnderLoad, title: &str) -> Option<Figure> {
    let line = |label: &str, colour: usize, f: &LatencyFigures| Line {
        label: format!(
            "{label}: p50 {:.3} ms, p99 {:.3} ms, {:.0} RPM ({})",
            f.p50_ns as f64 / 1e6,
            f.p99_ns as f64 / 1e6,
            f.rpm,
            shown(f.series.every, f.samples)
        ),
        colour,
        dashed: false,
        markers: true,
        points: f
            .series
            .points
            .iter()
            .map(|&(t, rtt)| (t as f64 / 1e9, rtt as f64 / 1e6))
            .collect(),
    };
    let mut lines = Vec::new();
    if let Some(idle) = &u.idle {
        lines.push(line("idle", 0, idle));
    }
    lines.push(line("loaded", 1, &u.loaded));
    lines.retain(|l| !l.points.is_empty());
    if lines.is_empty() {
        return None;
    }
    Some(Figure::Chart(Chart {
        title: title.to_owned(),
        x: Axis {
            label: "time since the phase's timed start (s)".into(),
            scale: Scale::Linear,
            ticks: Ticks::Number,
            from_zero: true,
        },
        y: Axis {
            label: "round-trip time (ms)".into(),
            scale: Scale::Linear,
            ticks: Ticks::Number,
            from_zero: true,
        },
        bands: Vec::new(),
        lines,
        hlines: Vec::new(),
        legend: LegendAt::Best,
        error_bars: Vec::new(),
        invalid: Vec::new(),
        style_keys: Vec::new(),
        sequential_colours: None,
    }))
}

/// Which round trips a line shows.
fn shown(every: u64, samples: u64) -> String {
    match every {
        1 => format!("all {samples} round trips"),
        n => format!("1 in {n} of {samples} round trips"),
    }
}

/// The title of a point's figure: what was measured, under which load.
pub fn title(r: &RunReport, p: &PointResult) -> String {
    let load = p.load.as_ref().map(|l| l.spec.as_str()).unwrap_or("load");
    format!(
        "{} over {}, {} B: round trips idle and under {load}",
        r.pattern, r.transport, p.key.size
    )
}

/// Writes the figure of every point measured under load to `path` (.svg or .png); several
/// points to FILE-pN.EXT. The files written.
pub fn write(r: &RunReport, path: &Path) -> Result<Vec<PathBuf>> {
    let png = match path.extension().and_then(|e| e.to_str()) {
        Some(e) if e.eq_ignore_ascii_case("svg") => false,
        Some(e) if e.eq_ignore_ascii_case("png") => true,
        _ => bail!(
            "--plot {}: the file name must end in .svg or .png",
            path.display()
        ),
    };
    let points: Vec<(&PointResult, &UnderLoad)> = r
        .points
        .iter()
        .filter_map(|p| p.under_load.as_ref().map(|u| (p, u)))
        .collect();
    let mut written = Vec::new();
    for (p, u) in &points {
        let Some(figure) = rtt_over_time(u, &title(r, p)) else {
            continue;
        };
        let file = if points.len() == 1 {
            path.to_path_buf()
        } else {
            numbered(path, p.index + 1)
        };
        let svg = super::plots::render_svg(&figure)?;
        let bytes = if png {
            super::png::svg_to_png(&svg)?
        } else {
            svg.into_bytes()
        };
        std::fs::write(&file, bytes).with_context(|| format!("writing {}", file.display()))?;
        written.push(file);
    }
    Ok(written)
}

/// FILE.EXT as FILE-pN.EXT.
fn numbered(path: &Path, n: usize) -> PathBuf {
    let stem = path.file_stem().and_then(|s| s.to_str()).unwrap_or("plot");
    let ext = path.extension().and_then(|s| s.to_str()).unwrap_or("svg");
    path.with_file_name(format!("{stem}-p{n}.{ext}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::load::{RttSeries, RPM_STATISTIC};

    fn phase(points: Vec<(u64, u64)>) -> LatencyFigures {
        LatencyFigures {
            samples: points.len() as u64,
            p50_ns: 1_000_000,
            p90_ns: 2_000_000,
            p99_ns: 3_000_000,
            max_ns: 4_000_000,
            rpm: 60_000.0,
            valid: true,
            series: RttSeries { every: 1, points },
        }
    }

    #[test]
    fn idle_and_loaded_are_two_lines_in_seconds_and_milliseconds() {
        let u = UnderLoad {
            idle: Some(phase(vec![(0, 1_000_000), (500_000_000, 2_000_000)])),
            loaded: phase(vec![(1_000_000_000, 20_000_000)]),
            rpm_statistic: RPM_STATISTIC.into(),
        };
        let Some(Figure::Chart(c)) = rtt_over_time(&u, "t") else {
            panic!("a chart");
        };
        assert_eq!(c.lines.len(), 2);
        assert_eq!(c.lines[0].points, vec![(0.0, 1.0), (0.5, 2.0)]);
        assert_eq!(c.lines[1].points, vec![(1.0, 20.0)]);
        assert!(c.lines[1].label.starts_with("loaded: p50 1.000 ms"));
        // Drawn without error.
        super::super::plots::render_svg(&Figure::Chart(c)).unwrap();
        let empty = UnderLoad {
            idle: None,
            loaded: phase(Vec::new()),
            rpm_statistic: RPM_STATISTIC.into(),
        };
        assert!(rtt_over_time(&empty, "t").is_none());
        assert_eq!(
            numbered(Path::new("/tmp/x.svg"), 3),
            PathBuf::from("/tmp/x-p3.svg")
        );
    }
}
