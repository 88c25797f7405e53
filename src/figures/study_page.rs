//! A study's results as one self-contained HTML page (inline SVG, the run report's styles),
//! and its figures as single SVG and PNG files.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

use super::grid::{FigureKey, StudyGrid};
use super::html_report::{esc, CHECK_SCRIPT, STYLE};
use super::plots::render_svg;
use super::png::svg_to_png;
use super::study_figures::{automatic, counter_table, StudyFigure, DIGITS};
use crate::units::DisplayUnit;

#[derive(Debug, Clone, PartialEq)]
pub struct PageOptions {
    /// Include the figures [`automatic`] chooses for the grid.
    pub automatic: bool,
    /// Figures asked for besides, after the automatic ones.
    pub extra: Vec<StudyFigure>,
    /// A paragraph under the title, e.g. the study file and when it ran.
    pub intro: Option<String>,
}

impl Default for PageOptions {
    fn default() -> PageOptions {
        PageOptions {
            automatic: true,
            extra: Vec::new(),
            intro: None,
        }
    }
}

fn axes_table(grid: &StudyGrid) -> String {
    let mut s = String::from(
        "<table><tr><th>axis</th><th>unit</th><th>values, in the study's order</th></tr>\n",
    );
    for a in &grid.axes {
        s.push_str(&format!(
            "<tr><td>{}</td><td>{}</td><td>{}</td></tr>\n",
            esc(&a.name),
            esc(if a.unit.is_empty() { "-" } else { &a.unit }),
            esc(&a
                .values
                .iter()
                .map(|v| v.label.as_str())
                .collect::<Vec<_>>()
                .join(", ")),
        ));
    }
    s.push_str("</table>\n");
    s
}

/// The unit a figure is written in all over the table: from its largest valid mean.
fn key_unit(grid: &StudyGrid, key: &FigureKey) -> Option<DisplayUnit> {
    let figs: Vec<_> = grid.cells.iter().filter_map(|c| c.figure(key)).collect();
    let max = figs
        .iter()
        .filter(|f| f.valid && f.mean.is_finite())
        .map(|f| f.mean.abs())
        .fold(0.0, f64::max);
    Some(super::measured_unit(&figs.first()?.unit, max))
}

/// Every point with every figure: mean [CI] (repetitions); "not valid" instead of a plain
/// value for a figure that is not a measurement.
fn values_table(grid: &StudyGrid) -> String {
    let keys = grid.figure_keys();
    let units: Vec<Option<DisplayUnit>> = keys.iter().map(|k| key_unit(grid, k)).collect();
    let mut s = String::from("<table><tr><th>point</th>");
    for (k, u) in keys.iter().zip(&units) {
        let unit = u.as_ref().map(|u| u.name.as_str()).unwrap_or("");
        s.push_str(&format!(
            "<th>{} ({}), mean [CI] (runs)</th>",
            esc(&k.describe()),
            esc(unit)
        ));
    }
    s.push_str("<th>flagged</th></tr>\n");
    for c in &grid.cells {
        s.push_str(&format!("<tr><td>{}</td>", esc(&grid.describe_cell(c))));
        for (k, u) in keys.iter().zip(&units) {
            let (Some(f), Some(u)) = (c.figure(k), u) else {
                s.push_str("<td>-</td>");
                continue;
            };
            let ci =
                f.ci.map(|(l, h)| format!(" [{} to {}]", u.number(l, DIGITS), u.number(h, DIGITS)))
                    .unwrap_or_default();
            if f.valid {
                s.push_str(&format!(
                    "<td class=\"n\">{}{} ({})</td>",
                    u.number(f.mean, DIGITS),
                    esc(&ci),
                    f.samples
                ));
            } else {
                s.push_str(&format!(
                    "<td class=\"n warn\">not valid: {}{} ({})</td>",
                    u.number(f.mean, DIGITS),
                    esc(&ci),
                    f.samples
                ));
            }
        }
        s.push_str(&format!(
            "<td class=\"warn\">{}</td></tr>\n",
            esc(c.anomaly.as_deref().unwrap_or(""))
        ));
    }
    s.push_str("</table>\n");
    s
}

/// The points with a figure that is not valid, and the flagged points, as two lists.
fn exceptions(grid: &StudyGrid) -> String {
    let mut invalid = Vec::new();
    let mut flagged = Vec::new();
    for c in &grid.cells {
        let bad: Vec<String> = c
            .figures
            .iter()
            .filter(|f| !f.valid)
            .map(|f| {
                FigureKey {
                    name: f.name.clone(),
                    side: f.side.clone(),
                }
                .describe()
            })
            .collect();
        if !bad.is_empty() {
            invalid.push(format!("{}: {}", grid.describe_cell(c), bad.join("; ")));
        }
        if let Some(a) = &c.anomaly {
            flagged.push(format!("{}: {a}", grid.describe_cell(c)));
        }
    }
    let list = |items: &[String]| {
        let mut s = String::from("<ul>\n");
        for i in items {
            s.push_str(&format!("<li>{}</li>\n", esc(i)));
        }
        s.push_str("</ul>\n");
        s
    };
    let mut s = String::new();
    if !invalid.is_empty() {
        s.push_str(&format!(
            "<h2>Not valid</h2>\n<p class=\"warn\">{} point(s) have a figure that is not a valid measurement; figures show them hatched or as grey crosses, never as values.</p>\n{}",
            invalid.len(),
            list(&invalid)
        ));
    }
    if !flagged.is_empty() {
        s.push_str(&format!(
            "<h2>Anomalies</h2>\n<p>Outlined in the figures.</p>\n{}",
            list(&flagged)
        ));
    }
    s
}

/// The figures of a page: the automatic ones (if asked for) and the extra ones.
fn figures_of(grid: &StudyGrid, options: &PageOptions) -> Vec<StudyFigure> {
    let mut figs = if options.automatic {
        automatic(grid)
    } else {
        Vec::new()
    };
    figs.extend(options.extra.iter().cloned());
    figs
}

/// The study page: axes, figures, points that are not valid or flagged, every value, and
/// the counter deltas. A figure that cannot be drawn is named, not fatal.
pub fn study_html(grid: &StudyGrid, options: &PageOptions) -> String {
    let mut html = format!(
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>wirebench study: {t}</title>\n<style>{STYLE}</style>\n</head>\n<body>\n<h1>wirebench study: {t}</h1>\n<p>Generated by wirebench {} at {}. {} point(s). Units: measured times in µs; rates of payload in Mbit/s = 10<sup>6</sup> bit/s, or Gbit/s = 10<sup>9</sup> bit/s for a figure whose largest value reaches 10 Gbit/s (one unit per column and per figure, its header or axis says which); sizes in bytes (K = 1024); the axes' settings as the study file gives them; CI = confidence interval over the repetitions.</p>\n",
        env!("CARGO_PKG_VERSION"),
        esc(&crate::env::now_rfc3339()),
        grid.cells.len(),
        t = esc(&grid.title),
    );
    if let Some(intro) = &options.intro {
        html.push_str(&format!("<p>{}</p>\n", esc(intro)));
    }
    html.push_str("<h2>Axes</h2>\n");
    html.push_str(&axes_table(grid));
    html.push_str("<h2>Figures</h2>\n");
    let figs = figures_of(grid, options);
    if figs.is_empty() {
        html.push_str("<p class=\"warn\">No figure: the study has no axis with more than one measured value.</p>\n");
    }
    for (n, f) in figs.iter().enumerate() {
        match render_svg(&f.figure) {
            Ok(svg) => html.push_str(&format!(
                "<figure>\n{svg}\n<figcaption>Figure {}. {}</figcaption>\n</figure>\n",
                n + 1,
                esc(&f.caption)
            )),
            Err(e) => html.push_str(&format!(
                "<p class=\"warn\">Figure {} ({}) not drawn: {}</p>\n",
                n + 1,
                esc(f.figure.title()),
                esc(&e.to_string())
            )),
        }
    }
    html.push_str(&exceptions(grid));
    html.push_str("<h2>Values</h2>\n");
    html.push_str(&values_table(grid));
    html.push_str("<h2>Counter deltas</h2>\n");
    match counter_table(grid) {
        Some(t) => html.push_str(&t.to_html()),
        None => html.push_str("<p>No counter changed at any point.</p>\n"),
    }
    html.push_str(CHECK_SCRIPT);
    html.push_str("\n</body>\n</html>\n");
    html
}

/// A file name from a title: lower-case letters and digits, the rest as single dashes.
fn slug(title: &str) -> String {
    let mut s = String::new();
    for c in title.chars() {
        if c.is_ascii_alphanumeric() {
            s.push(c.to_ascii_lowercase());
        } else if !s.ends_with('-') {
            s.push('-');
        }
    }
    let s = s.trim_matches('-');
    s.chars()
        .take(60)
        .collect::<String>()
        .trim_end_matches('-')
        .to_owned()
}

/// Each automatic figure of the grid as SVG and PNG, named as it is written:
/// "01-heatmap-throughput-receiver-by-window-and-write-size.svg" and so on, in order.
pub fn figure_files(grid: &StudyGrid) -> Result<Vec<(String, Vec<u8>)>> {
    let mut files = Vec::new();
    for (n, f) in automatic(grid).iter().enumerate() {
        let svg =
            render_svg(&f.figure).with_context(|| format!("drawing \"{}\"", f.figure.title()))?;
        let stem = format!("{:02}-{}-{}", n + 1, f.kind.name(), slug(f.figure.title()));
        let png = svg_to_png(&svg)?;
        files.push((format!("{stem}.svg"), svg.into_bytes()));
        files.push((format!("{stem}.png"), png));
    }
    Ok(files)
}

/// Writes [`figure_files`] into `dir` (created if missing) by the rules of
/// [`crate::outfile`]; returns the files written, in order.
pub fn write_figures(grid: &StudyGrid, dir: &Path, force: bool) -> Result<Vec<PathBuf>> {
    crate::outfile::OutDir::open(dir, force)?.write_files(&figure_files(grid)?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::figures::grid::tests::window_study;

    #[test]
    fn slugs_are_plain_file_names() {
        assert_eq!(
            slug("throughput, receiver by window and write_size (path lan)"),
            "throughput-receiver-by-window-and-write-size-path-lan"
        );
        assert_eq!(slug("<µs>"), "s");
        assert_eq!(slug("a".repeat(80).as_str()).len(), 60);
    }

    #[test]
    fn the_page_has_figures_values_exceptions_and_counters() {
        let mut g = window_study();
        g.title = "Window <&> write size".into();
        g.cells[0].figures[1].valid = false;
        g.cells[3].anomaly = Some("60% above both neighbours".into());
        let html = study_html(&g, &PageOptions::default());
        assert!(html.contains("<h1>wirebench study: Window &lt;&amp;&gt; write size</h1>"));
        assert_eq!(html.matches("<figure>").count(), 6);
        assert!(!html.contains("not drawn"));
        assert!(html.contains("<li>window 4K, write_size 1K, path lan: throughput, receiver</li>"));
        assert!(
            html.contains("<li>window 4K, write_size 8K, path wan: 60% above both neighbours</li>")
        );
        assert!(html.contains("<td class=\"n warn\">not valid: 4.19 [3.98 to 4.4] (3)</td>"));
        assert!(html.contains("<th>retransmits</th>"));
        assert!(html.contains("data-figures"));
    }

    /// Every figure kind drawn to SVG and PNG through `write_figures`. With
    /// WIREBENCH_FIGURE_EXAMPLES=DIR set, one PNG of each kind is also copied to
    /// DIR/fig-KIND.png for a person to look at.
    #[test]
    fn every_figure_kind_draws_to_svg_and_png() {
        let mut g = window_study();
        g.cells[0].figures[1].valid = false;
        g.cells[4].anomaly = Some("flagged".into());
        let dir = tempfile::tempdir().unwrap();
        let files = write_figures(&g, dir.path(), false).unwrap();
        assert_eq!(files.len(), 12, "{files:?}");
        let first = std::fs::read_to_string(&files[0]).unwrap();
        assert!(files[0]
            .ends_with("01-heatmap-throughput-receiver-by-window-and-write-size-path-lan.svg"));
        for text in [
            "window (bytes)",
            "write_size (bytes)",
            "throughput, receiver (Gbit/s)",
            ">268<",
            ">64K<",
        ] {
            let t = text.trim_matches(|c| c == '>' || c == '<');
            assert!(first.contains(t), "heatmap SVG lacks {text}");
        }
        let curve = std::fs::read_to_string(&files[4]).unwrap();
        for text in [
            "write_size 8K",
            "sender (dashed)",
            "receiver (solid)",
            "not valid (listed apart)",
            "throughput (Gbit/s)",
        ] {
            assert!(curve.contains(text), "curves SVG lacks {text}");
        }
        for f in files
            .iter()
            .filter(|f| f.extension().is_some_and(|e| e == "png"))
        {
            let bytes = std::fs::read(f).unwrap();
            assert_eq!(&bytes[1..4], b"PNG", "{}", f.display());
        }

        let mut cc = crate::figures::study_figures::tests::cc_path_study();
        cc.cells[1].anomaly = Some("flagged".into());
        let bars = write_figures(&cc, &dir.path().join("bars"), false).unwrap();
        assert_eq!(bars.len(), 2);
        let svg = std::fs::read_to_string(&bars[0]).unwrap();
        for text in [
            "wan-50ms",
            "cc bbr",
            "throughput, receiver (Mbit/s)",
            "path",
        ] {
            assert!(svg.contains(text), "bars SVG lacks {text}");
        }

        if let Some(out) = std::env::var_os("WIREBENCH_FIGURE_EXAMPLES") {
            let out = PathBuf::from(out);
            for (from, kind) in [
                (&files[1], "heatmap"),
                (&files[3], "heatmap-log"),
                (&files[5], "curves"),
                (&files[9], "curves-2"),
                (&bars[1], "bars"),
            ] {
                std::fs::copy(from, out.join(format!("fig-{kind}.png"))).unwrap();
            }
        }
    }

    /// The shape of the 1995 ATM study: 7 windows by 9 user data sizes, one figure without
    /// sides; and 5 congestion controls by 4 long-named paths. Each draws without error;
    /// with WIREBENCH_FIGURE_EXAMPLES set, their PNGs are kept for a person to look at.
    #[test]
    fn large_grids_draw() {
        use crate::figures::grid::{CellFigure, GridAxis, GridCell};
        let windows: Vec<(String, f64)> = [4096u64, 8192, 16384, 24576, 32768, 40960, 52428]
            .iter()
            .map(|w| (crate::units::format_bytes(*w), *w as f64))
            .collect();
        let sizes: Vec<(String, f64)> = (0..9)
            .map(|k| 512u64 << (k / 2) | if k % 2 == 1 { 256 << (k / 2) } else { 0 })
            .map(|n| (crate::units::format_bytes(n), n as f64))
            .collect();
        fn refs(v: &[(String, f64)]) -> Vec<(&str, f64)> {
            v.iter().map(|(l, n)| (l.as_str(), *n)).collect()
        }
        let mut cells = Vec::new();
        for (w, (_, wn)) in windows.iter().enumerate() {
            for (z, (_, zn)) in sizes.iter().enumerate() {
                let mean = 1.4e8 * (wn / 52428.0).sqrt() * (zn / 12288.0).powf(0.3);
                cells.push(GridCell {
                    coords: vec![w, z],
                    figures: vec![CellFigure {
                        name: "throughput".into(),
                        side: None,
                        unit: "bit/s".into(),
                        mean,
                        ci: Some((mean * 0.97, mean * 1.03)),
                        samples: 5,
                        valid: !(w == 3 && z == 4),
                    }],
                    counters: vec![],
                    anomaly: (w == 5 && z == 2).then(|| "flagged".into()),
                });
            }
        }
        let atm = StudyGrid {
            title: "ATM windows".into(),
            axes: vec![
                GridAxis::numeric("window", "bytes", &refs(&windows)),
                GridAxis::numeric("user data size", "bytes", &refs(&sizes)),
            ],
            cells,
        };
        let dir = tempfile::tempdir().unwrap();
        let files = write_figures(&atm, dir.path(), false).unwrap();
        assert_eq!(files.len(), 6);
        let ccs = ["cubic", "bbr", "reno", "vegas", "westwood"];
        let paths = ["lan", "wan-50ms", "wan-50ms-1%-loss", "satellite-600ms"];
        let mut cells = Vec::new();
        for c in 0..ccs.len() {
            for p in 0..paths.len() {
                let mean = 9.4e8 / (1 + p * (c + 1)) as f64;
                cells.push(GridCell {
                    coords: vec![c, p],
                    figures: vec![CellFigure {
                        name: "throughput".into(),
                        side: Some("receiver".into()),
                        unit: "bit/s".into(),
                        mean,
                        ci: Some((mean * 0.9, mean * 1.1)),
                        samples: 5,
                        valid: true,
                    }],
                    counters: vec![("retransmits".into(), (c * p) as i64)],
                    anomaly: None,
                });
            }
        }
        let cc = StudyGrid {
            title: "cc by path".into(),
            axes: vec![
                GridAxis::categorical("cc", &ccs),
                GridAxis::categorical("path", &paths),
            ],
            cells,
        };
        let bars = write_figures(&cc, &dir.path().join("cc"), false).unwrap();
        assert_eq!(bars.len(), 2);
        if let Some(out) = std::env::var_os("WIREBENCH_FIGURE_EXAMPLES") {
            let out = PathBuf::from(out);
            for (from, kind) in [
                (&files[1], "heatmap-big"),
                (&files[3], "curves-big"),
                (&bars[1], "bars-big"),
            ] {
                std::fs::copy(from, out.join(format!("fig-{kind}.png"))).unwrap();
            }
        }
    }
}
