//! The figures of `run --plot FILE`: with --load, the round trips over time, idle and
//! loaded, each from its own timed start; with --compete, each flow's receiver rate over
//! time, and Jain's fairness index over time.

use std::path::{Path, PathBuf};

use anyhow::{bail, Result};

use super::plots::{auto_scale, Axis, Chart, Figure, LegendAt, Line, Scale, Ticks};
use crate::model::fairness::FairnessResult;
use crate::model::load::{LatencyFigures, UnderLoad};
use crate::model::{PointResult, RunDocument};

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
        regressions: vec![],
        style_keys: Vec::new(),
        sequential_colours: None,
    }))
}

fn seconds_axis() -> Axis {
    Axis {
        label: "time since the measured stream's timed start (s)".into(),
        scale: Scale::Linear,
        ticks: Ticks::Number,
        from_zero: true,
    }
}

fn chart(title: String, x: Axis, y: Axis, lines: Vec<Line>) -> Figure {
    Figure::Chart(Chart {
        title,
        x,
        y,
        bands: Vec::new(),
        lines,
        hlines: Vec::new(),
        legend: LegendAt::Best,
        error_bars: Vec::new(),
        invalid: Vec::new(),
        regressions: vec![],
        style_keys: Vec::new(),
        sequential_colours: None,
    })
}

/// Each competing flow's receiver rate per interval (at the interval's end), and Jain's
/// index per interval; None without intervals.
pub fn fairness(f: &FairnessResult, title: &str) -> Option<(Figure, Figure)> {
    if f.intervals.is_empty() {
        return None;
    }
    let at = |i: &crate::model::fairness::FairnessInterval| i.end_ns as f64 / 1e9;
    let rates: Vec<Line> = f
        .flows
        .iter()
        .enumerate()
        .map(|(k, flow)| Line {
            label: format!(
                "{}{}: share {}",
                flow.flow,
                if k == 0 { " (measured)" } else { "" },
                flow.share
                    .map(|s| format!("{:.1}%", s * 100.0))
                    .unwrap_or_else(|| "-".into())
            ),
            colour: k,
            dashed: false,
            markers: true,
            points: f
                .intervals
                .iter()
                .map(|i| (at(i), i.bits_per_s.get(k).copied().unwrap_or(0.0) / 1e6))
                .collect(),
        })
        .collect();
    let jain = Line {
        label: format!(
            "Jain's index ({} overall)",
            f.jain
                .map(|j| format!("{j:.3}"))
                .unwrap_or_else(|| "-".into())
        ),
        colour: 0,
        dashed: false,
        markers: true,
        points: f
            .intervals
            .iter()
            .filter_map(|i| i.jain.map(|j| (at(i), j)))
            .collect(),
    };
    let number = |label: &str| Axis {
        label: label.into(),
        scale: Scale::Linear,
        ticks: Ticks::Number,
        from_zero: true,
    };
    Some((
        chart(
            format!("{title}: each flow's rate"),
            seconds_axis(),
            Axis {
                // A starved flow's rate may be decades below the others'.
                scale: auto_scale(
                    rates.iter().flat_map(|l| l.points.iter().map(|p| p.1)),
                    true,
                ),
                ..number("receiver rate per interval (Mbit/s)")
            },
            rates,
        ),
        chart(
            format!("{title}: Jain's fairness index"),
            seconds_axis(),
            number("Jain's fairness index (1: equal shares)"),
            vec![jain],
        ),
    ))
}

/// Which round trips a line shows.
fn shown(every: u64, samples: u64) -> String {
    match every {
        1 => format!("all {samples} round trips"),
        n => format!("1 in {n} of {samples} round trips"),
    }
}

/// The title of a point's figure: what was measured, under which load.
pub fn title(r: &RunDocument, p: &PointResult) -> String {
    let load = p.load.as_ref().map(|l| l.spec.as_str()).unwrap_or("load");
    format!(
        "{} over {}, {} B: round trips idle and under {load}",
        r.pattern, r.transport, p.key.size
    )
}

/// Whether `path` is to be a PNG (else an SVG); a name ending in neither is refused.
fn is_png(path: &Path) -> Result<bool> {
    match path.extension().and_then(|e| e.to_str()) {
        Some(e) if e.eq_ignore_ascii_case("svg") => Ok(false),
        Some(e) if e.eq_ignore_ascii_case("png") => Ok(true),
        _ => bail!(
            "--plot {}: the file name must end in .svg or .png",
            path.display()
        ),
    }
}

/// Refuses, before a run of `points` points measures, a `--plot` it could not write: a name
/// that is neither .svg nor .png, or any file [`write`] may write there that
/// [`crate::outfile`] would refuse.
pub fn check(path: &Path, points: usize, force: bool) -> Result<()> {
    is_png(path)?;
    let jain = suffixed(path, "jain");
    let mut files = vec![path.to_path_buf(), jain.clone()];
    if points > 1 {
        for n in 1..=points {
            files.push(numbered(path, n));
            files.push(numbered(&jain, n));
        }
    }
    for f in files {
        crate::outfile::check(&f, force)?;
    }
    Ok(())
}

/// Writes the figure of every point measured under load to `path` (.svg or .png); several
/// points to FILE-pN.EXT; all drawn and checked before the first is written, by the rules of
/// [`crate::outfile`] (`force`: replace regular files). The files written.
pub fn write(r: &RunDocument, path: &Path, force: bool) -> Result<Vec<PathBuf>> {
    let png = is_png(path)?;
    let mut figures: Vec<(usize, PathBuf, Figure)> = Vec::new();
    for p in &r.points {
        if let Some(figure) = p
            .under_load
            .as_ref()
            .and_then(|u| rtt_over_time(u, &title(r, p)))
        {
            figures.push((p.index, path.to_path_buf(), figure));
        }
        let flows = format!(
            "{} over {}, {} B, competing flows",
            r.pattern, r.transport, p.key.size
        );
        if let Some((rates, jain)) = p.fairness.as_ref().and_then(|f| fairness(f, &flows)) {
            figures.push((p.index, path.to_path_buf(), rates));
            figures.push((p.index, suffixed(path, "jain"), jain));
        }
    }
    let several = figures.iter().any(|f| f.0 != figures[0].0);
    let mut files = Vec::new();
    for (index, file, figure) in figures {
        let file = if several {
            numbered(&file, index + 1)
        } else {
            file
        };
        let svg = super::plots::render_svg(&figure)?;
        let bytes = if png {
            super::png::svg_to_png(&svg)?
        } else {
            svg.into_bytes()
        };
        files.push((file, bytes));
    }
    crate::outfile::write_files(&files, force)?;
    Ok(files.into_iter().map(|(f, _)| f).collect())
}

/// FILE.EXT as FILE-pN.EXT.
fn numbered(path: &Path, n: usize) -> PathBuf {
    suffixed(path, &format!("p{n}"))
}

/// FILE.EXT as FILE-SUFFIX.EXT.
fn suffixed(path: &Path, suffix: &str) -> PathBuf {
    let stem = path.file_stem().and_then(|s| s.to_str()).unwrap_or("plot");
    let ext = path.extension().and_then(|s| s.to_str()).unwrap_or("svg");
    path.with_file_name(format!("{stem}-{suffix}.{ext}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::load::{RttSeries, RPM_STATISTIC};

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

    #[test]
    fn competing_flows_are_a_line_each_and_jain_a_figure_of_its_own() {
        use crate::model::fairness::{FairnessInterval, FlowShare};
        let flow = |name: &str, share: f64| FlowShare {
            flow: name.into(),
            bytes: 0,
            bytes_all: 0,
            bits_per_s: 0.0,
            share: Some(share),
        };
        let f = FairnessResult {
            flows: vec![flow("tcp:cubic", 0.75), flow("tcp:bbr", 0.25)],
            jain: Some(0.8),
            intervals: vec![FairnessInterval {
                start_ns: 0,
                end_ns: 500_000_000,
                bits_per_s: vec![3e6, 1e6],
                shares: vec![Some(0.75), Some(0.25)],
                jain: Some(0.8),
                validity: Default::default(),
            }],
            common_span: None,
            validity: Default::default(),
        };
        let Some((Figure::Chart(rates), Figure::Chart(jain))) = fairness(&f, "t") else {
            panic!("two charts");
        };
        assert_eq!(rates.lines.len(), 2);
        assert_eq!(rates.lines[0].points, vec![(0.5, 3.0)]);
        assert_eq!(rates.lines[1].label, "tcp:bbr: share 25.0%");
        assert_eq!(jain.lines[0].points, vec![(0.5, 0.8)]);
        assert_eq!(
            suffixed(Path::new("f.png"), "jain"),
            PathBuf::from("f-jain.png")
        );
        let none = FairnessResult {
            intervals: Vec::new(),
            ..f
        };
        assert!(fairness(&none, "t").is_none());
    }
}
