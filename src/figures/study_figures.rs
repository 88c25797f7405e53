//! A study grid's figures as data: heatmaps of two axes, curves against a numeric axis, bars
//! per group, and the counter deltas per point; and which of them a grid gets by itself.
//! Drawing is [`super::plots`]' job, the page [`super::study_page`]'s.
//!
//! Axes a figure does not show are held at one value each: a figure per combination of
//! them, never an average, because the points of two paths or two congestion controls are
//! different conditions, not repetitions.

use super::grid::{FigureKey, Fixed, GridAxis, StudyGrid};
use super::plots::{
    Axis, Bar, BarSeries, Bars, Chart, ErrorBars, Figure, HeatCell, Heatmap, LegendAt, Line, Scale,
    StyleKey, Ticks,
};
use crate::units::DisplayUnit;

/// Significant digits of a value written in a heatmap cell or a table.
pub const DIGITS: u32 = 3;

/// Most figures of one kind per figure name: a grid of many further axes would otherwise
/// bury the page (the values table lists every point).
pub const MAX_COMBINATIONS: usize = 6;

/// A curve's x axis is logarithmic when its values span more than this factor: study
/// sweeps of sizes, windows and delays are geometric.
pub const X_LOG_RATIO: f64 = 10.0;

/// The same for an axis of bytes, as the run report draws size and buffer sweeps: from a
/// factor of 4 on (1K to 8K reads better on powers of two).
pub const BYTES_LOG_RATIO: f64 = 3.5;

/// A value axis is logarithmic when its values span more than two decades.
pub const Y_LOG_RATIO: f64 = 100.0;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum LogChoice {
    /// Log when the values span more than the axis's ratio ([`X_LOG_RATIO`], [`Y_LOG_RATIO`]).
    #[default]
    Auto,
    Linear,
    Log,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum CiStyle {
    /// Error bars at each point.
    #[default]
    Bars,
    /// A shaded band along the curve.
    Band,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CurveOptions {
    pub x_log: LogChoice,
    pub y_log: LogChoice,
    pub ci: CiStyle,
}

/// Log scale when every value is positive and they span more than `ratio`.
pub fn log_wanted(values: &[f64], ratio: f64) -> bool {
    let vs: Vec<f64> = values.iter().copied().filter(|v| v.is_finite()).collect();
    let lo = vs.iter().copied().reduce(f64::min);
    let hi = vs.iter().copied().reduce(f64::max);
    match (lo, hi) {
        (Some(lo), Some(hi)) => lo > 0.0 && hi / lo > ratio,
        _ => false,
    }
}

fn scale(choice: LogChoice, values: &[f64], ratio: f64) -> Scale {
    match choice {
        LogChoice::Log => Scale::Log,
        LogChoice::Linear => Scale::Linear,
        LogChoice::Auto if log_wanted(values, ratio) => Scale::Log,
        LogChoice::Auto => Scale::Linear,
    }
}

/// An axis as a figure labels it: "window (bytes)", "rate (Mbit/s)", "cc".
fn axis_title(axis: &GridAxis, unit: &DisplayUnit) -> String {
    if unit.name.is_empty() {
        axis.name.clone()
    } else {
        format!("{} ({})", axis.name, unit.name)
    }
}

fn axis_unit(axis: &GridAxis) -> DisplayUnit {
    let max = axis
        .values
        .iter()
        .filter_map(|v| v.number)
        .map(f64::abs)
        .fold(0.0, f64::max);
    DisplayUnit::for_values(&axis.unit, max)
}

/// Colours for `n` series: the palette's 7 distinct ones while they suffice, else ordered
/// colours along a sequential scale (a study axis's values are ordered).
fn sequential(n: usize) -> Option<usize> {
    (n > 7).then_some(n)
}

/// The unit a figure is shown in over the cells given: chosen from the largest valid mean.
fn figure_unit<'a>(
    names: impl Fn(&FigureKey) -> bool,
    cells: impl Iterator<Item = &'a super::grid::GridCell>,
) -> Option<DisplayUnit> {
    let mut base: Option<String> = None;
    let mut max = 0.0f64;
    for c in cells {
        for f in &c.figures {
            let key = FigureKey {
                name: f.name.clone(),
                side: f.side.clone(),
            };
            if !names(&key) {
                continue;
            }
            base.get_or_insert_with(|| f.unit.clone());
            if f.valid && f.mean.is_finite() {
                max = max.max(f.mean.abs());
            }
        }
    }
    base.map(|b| DisplayUnit::for_values(&b, max))
}

fn with_fixed(title: String, grid: &StudyGrid, fixed: &[(usize, usize)]) -> String {
    let f = grid.describe_fixed(fixed);
    if f.is_empty() {
        title
    } else {
        format!("{title} ({f})")
    }
}

/// A heatmap of one figure over axes `x` (columns) and `y` (rows), the other axes at `fixed`.
/// Invalid figures are hatched without a value, flagged points outlined; the colour scale
/// spans the valid values only.
pub fn heatmap(
    grid: &StudyGrid,
    key: &FigureKey,
    x: usize,
    y: usize,
    fixed: &[(usize, usize)],
) -> Option<Heatmap> {
    let (xa, ya) = (grid.axes.get(x)?, grid.axes.get(y)?);
    let mut found = Vec::new();
    for i in 0..xa.values.len() {
        for j in 0..ya.values.len() {
            if let Some(c) = grid.cell_at(&[(x, i), (y, j)], fixed) {
                if let Some(f) = c.figure(key) {
                    found.push((i, j, c, f));
                }
            }
        }
    }
    let unit = figure_unit(|k| k == key, found.iter().map(|t| t.2))?;
    let cells: Vec<HeatCell> = found
        .iter()
        .map(|&(i, j, c, f)| HeatCell {
            column: i,
            row: j,
            value: (f.valid && f.mean.is_finite()).then(|| f.mean / unit.divisor),
            text: if f.valid {
                unit.number(f.mean, DIGITS)
            } else {
                String::new()
            },
            outlined: c.anomaly.is_some(),
        })
        .collect();
    if cells.iter().all(|c| c.value.is_none()) {
        return None;
    }
    let (xu, yu) = (axis_unit(xa), axis_unit(ya));
    let values: Vec<f64> = cells.iter().filter_map(|c| c.value).collect();
    Some(Heatmap {
        title: with_fixed(
            format!("{} by {} and {}", key.describe(), xa.name, ya.name),
            grid,
            fixed,
        ),
        x_label: axis_title(xa, &xu),
        y_label: axis_title(ya, &yu),
        x_values: xa.values.iter().map(|v| v.label.clone()).collect(),
        y_values: ya.values.iter().map(|v| v.label.clone()).collect(),
        cells,
        value_label: format!("{} ({})", key.describe(), unit.name),
        log_colour: log_wanted(&values, Y_LOG_RATIO),
    })
}

/// Curves of one figure against the numeric axis `x`: one colour per value of `series` (if
/// given), every side of the figure (sender dashed, receiver solid), the other axes at
/// `fixed`. Invalid points are grey crosses off the curves; CIs are error bars or bands.
pub fn curves(
    grid: &StudyGrid,
    name: &str,
    x: usize,
    series: Option<usize>,
    fixed: &[(usize, usize)],
    opts: CurveOptions,
) -> Option<Chart> {
    let xa = grid.axes.get(x).filter(|a| a.is_numeric())?;
    let sides = grid.sides_of(name);
    let series_values: Vec<Option<usize>> = match series {
        Some(s) => (0..grid.axes.get(s)?.values.len()).map(Some).collect(),
        None => vec![None],
    };
    let xu = axis_unit(xa);
    let in_slice = |i: usize, sv: Option<usize>| {
        let mut free = vec![(x, i)];
        if let (Some(s), Some(v)) = (series, sv) {
            free.push((s, v));
        }
        grid.cell_at(&free, fixed)
    };
    let slice_cells: Vec<_> = series_values
        .iter()
        .flat_map(|sv| (0..xa.values.len()).filter_map(move |i| in_slice(i, *sv)))
        .collect();
    let unit = figure_unit(|k| k.name == name, slice_cells.into_iter())?;
    let mut lines = Vec::new();
    let mut error_bars = Vec::new();
    let mut bands = Vec::new();
    let mut invalid = Vec::new();
    for (colour, sv) in series_values.iter().enumerate() {
        let mut named = false;
        for side in &sides {
            let key = FigureKey {
                name: name.into(),
                side: side.clone(),
            };
            let mut points = Vec::new();
            let mut errors = Vec::new();
            for (i, v) in xa.values.iter().enumerate() {
                let Some(f) = in_slice(i, *sv).and_then(|c| c.figure(&key)) else {
                    continue;
                };
                let xv = v.number.unwrap_or(f64::NAN) / xu.divisor;
                let yv = f.mean / unit.divisor;
                if !f.valid {
                    invalid.push((xv, yv));
                    continue;
                }
                points.push((xv, yv));
                if let Some((lo, hi)) = f.ci {
                    errors.push((xv, lo / unit.divisor, hi / unit.divisor));
                }
            }
            if points.is_empty() {
                continue;
            }
            // One legend entry per colour; the style keys say which side is which.
            let label = match (series, sv) {
                (Some(s), Some(v)) if !named => {
                    format!("{} {}", grid.axes[s].name, grid.axes[s].values[*v].label)
                }
                (None, _) if !named && sides.len() == 1 => key.describe(),
                _ => String::new(),
            };
            named = named || !label.is_empty();
            lines.push(Line {
                label,
                colour,
                dashed: side.as_deref() == Some("sender"),
                markers: true,
                points,
            });
            if !errors.is_empty() {
                match opts.ci {
                    CiStyle::Bars => error_bars.push(ErrorBars {
                        colour,
                        points: errors,
                    }),
                    CiStyle::Band => bands.push(super::plots::Band {
                        label: String::new(),
                        colour,
                        points: errors,
                    }),
                }
            }
        }
    }
    if lines.is_empty() {
        return None;
    }
    let style_keys = if sides.len() > 1 {
        sides
            .iter()
            .map(|s| {
                let dashed = s.as_deref() == Some("sender");
                StyleKey {
                    label: format!(
                        "{} ({})",
                        s.as_deref().unwrap_or(name),
                        if dashed { "dashed" } else { "solid" }
                    ),
                    dashed,
                }
            })
            .collect()
    } else {
        Vec::new()
    };
    let xs: Vec<f64> = lines
        .iter()
        .flat_map(|l| l.points.iter().map(|p| p.0))
        .collect();
    let ys: Vec<f64> = lines
        .iter()
        .flat_map(|l| l.points.iter().map(|p| p.1))
        .collect();
    let per = series
        .map(|s| format!(", per {}", grid.axes[s].name))
        .unwrap_or_default();
    Some(Chart {
        title: with_fixed(format!("{name} against {}{per}", xa.name), grid, fixed),
        x: Axis {
            label: axis_title(xa, &xu),
            scale: scale(
                opts.x_log,
                &xs,
                if xa.unit == "bytes" {
                    BYTES_LOG_RATIO
                } else {
                    X_LOG_RATIO
                },
            ),
            ticks: if xa.unit == "bytes" {
                Ticks::Bytes
            } else {
                Ticks::Number
            },
            from_zero: false,
        },
        y: Axis {
            label: format!("{name} ({})", unit.name),
            scale: scale(opts.y_log, &ys, Y_LOG_RATIO),
            ticks: Ticks::Number,
            from_zero: true,
        },
        bands,
        lines,
        hlines: Vec::new(),
        legend: LegendAt::Best,
        error_bars,
        invalid,
        style_keys,
        sequential_colours: sequential(series_values.len()),
    })
}

/// One slice of the grid as curves, named as a person asks for it: "throughput against
/// window at write_size 8K" is `slice_curves(g, "throughput", "window", None,
/// &[("write_size", "8K")], ..)`. Axes with one value need not be named; any other axis
/// that is neither `x`, `series` nor fixed is an error, because its points would be mixed.
pub fn slice_curves(
    grid: &StudyGrid,
    name: &str,
    x: &str,
    series: Option<&str>,
    fixed: &[(&str, &str)],
    opts: CurveOptions,
) -> Result<Chart, String> {
    let xi = grid.axis_index(x).ok_or_else(|| {
        format!(
            "no axis \"{x}\" in the study; its axes: {}",
            grid.axis_names()
        )
    })?;
    if !grid.axes[xi].is_numeric() {
        return Err(format!(
            "axis \"{x}\" is not numeric: curves need numbers on the x axis (bars show it)"
        ));
    }
    let si = series
        .map(|s| {
            grid.axis_index(s).ok_or_else(|| {
                format!(
                    "no axis \"{s}\" in the study; its axes: {}",
                    grid.axis_names()
                )
            })
        })
        .transpose()?;
    let mut held = grid.resolve_fixed(fixed)?;
    for (a, axis) in grid.axes.iter().enumerate() {
        if a == xi || Some(a) == si || held.iter().any(|h| h.0 == a) {
            continue;
        }
        if axis.values.len() == 1 {
            held.push((a, 0));
        } else {
            return Err(format!(
                "axis \"{}\" is neither the x axis, the curves' axis nor fixed: give one of its values",
                axis.name
            ));
        }
    }
    held.sort();
    curves(grid, name, xi, si, &held, opts)
        .ok_or_else(|| format!("no measured \"{name}\" in that slice of the study"))
}

/// Bars of one figure: a group per value of `groups`, a bar per value of `bars` (or one bar
/// per group without), the other axes at `fixed`; error bars from the CIs.
pub fn bars(
    grid: &StudyGrid,
    key: &FigureKey,
    groups: usize,
    bars: Option<usize>,
    fixed: &[(usize, usize)],
) -> Option<Bars> {
    let ga = grid.axes.get(groups)?;
    let bar_values: Vec<Option<usize>> = match bars {
        Some(b) => (0..grid.axes.get(b)?.values.len()).map(Some).collect(),
        None => vec![None],
    };
    let at = |g: usize, bv: Option<usize>| {
        let mut free = vec![(groups, g)];
        if let (Some(b), Some(v)) = (bars, bv) {
            free.push((b, v));
        }
        grid.cell_at(&free, fixed)
    };
    let cells: Vec<_> = bar_values
        .iter()
        .flat_map(|bv| (0..ga.values.len()).filter_map(move |g| at(g, *bv)))
        .collect();
    let unit = figure_unit(|k| k == key, cells.into_iter())?;
    let mut series = Vec::new();
    for (colour, bv) in bar_values.iter().enumerate() {
        let values: Vec<Option<Bar>> = (0..ga.values.len())
            .map(|g| {
                let c = at(g, *bv)?;
                let f = c.figure(key)?;
                Some(Bar {
                    value: f.mean / unit.divisor,
                    ci: f
                        .ci
                        .filter(|_| f.valid)
                        .map(|(l, h)| (l / unit.divisor, h / unit.divisor)),
                    invalid: !f.valid,
                    outlined: c.anomaly.is_some(),
                })
            })
            .collect();
        if values.iter().all(Option::is_none) {
            continue;
        }
        series.push(BarSeries {
            label: match (bars, bv) {
                (Some(b), Some(v)) => {
                    format!("{} {}", grid.axes[b].name, grid.axes[b].values[*v].label)
                }
                _ => key.describe(),
            },
            colour,
            bars: values,
        });
    }
    if series.is_empty() {
        return None;
    }
    let by = bars
        .map(|b| format!(" and {}", grid.axes[b].name))
        .unwrap_or_default();
    Some(Bars {
        title: with_fixed(
            format!("{} by {}{by}", key.describe(), ga.name),
            grid,
            fixed,
        ),
        x_label: ga.name.clone(),
        y_label: format!("{} ({})", key.describe(), unit.name),
        groups: ga.values.iter().map(|v| v.label.clone()).collect(),
        sequential_colours: sequential(bar_values.len()),
        series,
    })
}

/// The counter deltas of every point: columns are the counters that changed anywhere.
#[derive(Debug, Clone, PartialEq)]
pub struct CounterTable {
    pub columns: Vec<String>,
    /// (the point's coordinates, a delta per column; `None` where the point has none).
    pub rows: Vec<(String, Vec<Option<i64>>)>,
}

pub fn counter_table(grid: &StudyGrid) -> Option<CounterTable> {
    let mut columns: Vec<String> = Vec::new();
    for (name, delta) in grid.cells.iter().flat_map(|c| &c.counters) {
        if *delta != 0 && !columns.contains(name) {
            columns.push(name.clone());
        }
    }
    if columns.is_empty() {
        return None;
    }
    let rows = grid
        .cells
        .iter()
        .map(|c| {
            let deltas = columns
                .iter()
                .map(|col| c.counters.iter().find(|(n, _)| n == col).map(|(_, d)| *d))
                .collect();
            (grid.describe_cell(c), deltas)
        })
        .collect();
    Some(CounterTable { columns, rows })
}

impl CounterTable {
    /// Plain text for a terminal: aligned columns, "-" where a point has no such counter.
    /// Names pass through [`crate::text::printable`]: they come from a study file.
    pub fn to_text(&self) -> String {
        let safe = |s: &str| crate::text::printable(s).into_owned();
        let table = CounterTable {
            columns: self.columns.iter().map(|c| safe(c)).collect(),
            rows: self
                .rows
                .iter()
                .map(|(n, d)| (safe(n), d.clone()))
                .collect(),
        };
        table.aligned()
    }

    fn aligned(&self) -> String {
        let cell = |d: &Option<i64>| d.map_or("-".to_owned(), |d| d.to_string());
        let mut widths: Vec<usize> = std::iter::once(
            self.rows
                .iter()
                .map(|r| r.0.chars().count())
                .max()
                .unwrap_or(0)
                .max(5),
        )
        .chain(self.columns.iter().map(|c| c.chars().count()))
        .collect();
        for (_, ds) in &self.rows {
            for (k, d) in ds.iter().enumerate() {
                widths[k + 1] = widths[k + 1].max(cell(d).len());
            }
        }
        let mut out = format!("{:<w$}", "point", w = widths[0]);
        for (k, c) in self.columns.iter().enumerate() {
            out.push_str(&format!("  {:>w$}", c, w = widths[k + 1]));
        }
        out.push('\n');
        for (name, ds) in &self.rows {
            out.push_str(&format!("{:<w$}", name, w = widths[0]));
            for (k, d) in ds.iter().enumerate() {
                out.push_str(&format!("  {:>w$}", cell(d), w = widths[k + 1]));
            }
            out.push('\n');
        }
        out
    }

    pub fn to_html(&self) -> String {
        use super::html_report::esc;
        let mut s = String::from("<table><tr><th>point</th>");
        for c in &self.columns {
            s.push_str(&format!("<th>{}</th>", esc(c)));
        }
        s.push_str("</tr>\n");
        for (name, ds) in &self.rows {
            s.push_str(&format!("<tr><td>{}</td>", esc(name)));
            for d in ds {
                s.push_str(&format!(
                    "<td class=\"n\">{}</td>",
                    d.map_or("-".to_owned(), |d| d.to_string())
                ));
            }
            s.push_str("</tr>\n");
        }
        s.push_str("</table>\n");
        s
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FigureKind {
    Heatmap,
    Curves,
    Bars,
}

impl FigureKind {
    pub fn name(self) -> &'static str {
        match self {
            FigureKind::Heatmap => "heatmap",
            FigureKind::Curves => "curves",
            FigureKind::Bars => "bars",
        }
    }
}

/// A figure of a study page, with its caption.
#[derive(Debug, Clone, PartialEq)]
pub struct StudyFigure {
    pub kind: FigureKind,
    pub figure: Figure,
    pub caption: String,
}

const HEATMAP_CAPTION: &str = "Each cell is one point, its value in the colour bar's unit. Hatched grey: the figure is not a valid measurement (listed below); outlined: the point was flagged as an anomaly.";
const CURVES_CAPTION: &str = "Mean over repetitions with its confidence interval; sender dashed, receiver solid. Grey crosses: not valid measurements, kept off the curves (listed below).";
const BARS_CAPTION: &str = "Mean over repetitions with its confidence interval. Hatched grey: not a valid measurement (listed below); outlined: flagged as an anomaly.";

/// The side a heatmap or a bar chart shows of a figure with several: the receiver's (what
/// arrived), else the first.
fn primary_key(grid: &StudyGrid, name: &str) -> FigureKey {
    let sides = grid.sides_of(name);
    let side = sides
        .iter()
        .find(|s| s.as_deref() == Some("receiver"))
        .or_else(|| sides.first())
        .cloned()
        .flatten();
    FigureKey {
        name: name.into(),
        side,
    }
}

/// The figures a grid gets by itself, per figure name, over the axes with more than one
/// value: two numeric axes give a heatmap of the first two and curves along each of them;
/// a categorical axis among the first two gives bars (groups per the categorical axis) and,
/// with a numeric axis of 3 or more values, curves along it; a single axis gives curves
/// (numeric) or bars. Further axes are held at each combination (at most
/// [`MAX_COMBINATIONS`] figures of a kind).
pub fn automatic(grid: &StudyGrid) -> Vec<StudyFigure> {
    let active: Vec<usize> = (0..grid.axes.len())
        .filter(|&a| grid.axes[a].values.len() > 1)
        .collect();
    let numeric: Vec<usize> = active
        .iter()
        .copied()
        .filter(|&a| grid.axes[a].is_numeric())
        .collect();
    let categorical: Vec<usize> = active
        .iter()
        .copied()
        .filter(|&a| !grid.axes[a].is_numeric())
        .collect();
    let opts = CurveOptions::default();
    let mut names: Vec<String> = Vec::new();
    for k in grid.figure_keys() {
        if !names.contains(&k.name) {
            names.push(k.name);
        }
    }
    let mut out = Vec::new();
    let mut push = |kind: FigureKind, figure: Option<Figure>| {
        if let Some(figure) = figure {
            let caption = match kind {
                FigureKind::Heatmap => HEATMAP_CAPTION,
                FigureKind::Curves => CURVES_CAPTION,
                FigureKind::Bars => BARS_CAPTION,
            };
            out.push(StudyFigure {
                kind,
                figure,
                caption: caption.into(),
            });
        }
    };
    for name in &names {
        let key = primary_key(grid, name);
        let combos = |shown: &[usize]| {
            let mut c = grid.fixed_combinations(shown);
            c.truncate(MAX_COMBINATIONS);
            c
        };
        let curves_along = |x: usize, series: Option<usize>| -> Vec<Option<Figure>> {
            let shown: Vec<usize> = std::iter::once(x).chain(series).collect();
            combos(&shown)
                .iter()
                .map(|f: &Fixed| curves(grid, name, x, series, f, opts).map(Figure::Chart))
                .collect()
        };
        match active.as_slice() {
            [] => {}
            [a] if grid.axes[*a].is_numeric() => {
                for f in curves_along(*a, None) {
                    push(FigureKind::Curves, f);
                }
            }
            [a] => {
                for f in combos(&[*a]) {
                    push(
                        FigureKind::Bars,
                        bars(grid, &key, *a, None, &f).map(Figure::Bars),
                    );
                }
            }
            _ if numeric.len() >= 2 => {
                let (x, y) = (numeric[0], numeric[1]);
                for f in combos(&[x, y]) {
                    push(
                        FigureKind::Heatmap,
                        heatmap(grid, &key, x, y, &f).map(Figure::Heatmap),
                    );
                }
                for (x, s) in [(x, y), (y, x)] {
                    for f in curves_along(x, Some(s)) {
                        push(FigureKind::Curves, f);
                    }
                }
            }
            [a, b, ..] => {
                // The groups are the categorical one of the two (the second if both are).
                let (groups, each) = if !grid.axes[*b].is_numeric() {
                    (*b, *a)
                } else {
                    (*a, *b)
                };
                for f in combos(&[groups, each]) {
                    push(
                        FigureKind::Bars,
                        bars(grid, &key, groups, Some(each), &f).map(Figure::Bars),
                    );
                }
                if let Some(&x) = numeric.iter().find(|&&n| grid.axes[n].values.len() >= 3) {
                    for f in curves_along(x, categorical.first().copied()) {
                        push(FigureKind::Curves, f);
                    }
                }
            }
        }
    }
    out
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::figures::grid::tests::window_study;
    use crate::figures::grid::{CellFigure, GridAxis, GridCell};
    use crate::figures::plots::render_svg;

    const LAN: (usize, usize) = (2, 0);
    const WAN: (usize, usize) = (2, 1);

    #[test]
    fn the_log_decision_follows_the_span() {
        assert!(!log_wanted(&[1.0, 100.0], Y_LOG_RATIO));
        assert!(log_wanted(&[1.0, 100.1], Y_LOG_RATIO));
        assert!(
            !log_wanted(&[0.0, 1e6], Y_LOG_RATIO),
            "zero has no place on a log axis"
        );
        assert!(!log_wanted(&[f64::NAN], Y_LOG_RATIO));
        assert!(log_wanted(&[4096.0, 65536.0], X_LOG_RATIO));
        assert!(!log_wanted(&[1.0, 8.0], X_LOG_RATIO));
        assert_eq!(scale(LogChoice::Log, &[1.0, 2.0], Y_LOG_RATIO), Scale::Log);
        assert_eq!(
            scale(LogChoice::Linear, &[1.0, 1e9], Y_LOG_RATIO),
            Scale::Linear
        );
    }

    #[test]
    fn a_heatmap_holds_every_cell_of_its_slice_in_one_unit() {
        let g = window_study();
        let key = FigureKey::new("throughput", Some("receiver"));
        let h = heatmap(&g, &key, 0, 1, &[WAN]).unwrap();
        assert_eq!(h.x_values, ["4K", "16K", "64K"]);
        assert_eq!(h.y_values, ["1K", "8K"]);
        assert_eq!(h.x_label, "window (bytes)");
        // 64K * 8K * 1000 / 2 = 268 Gbit/s: the largest value picks Gbit/s for all.
        assert_eq!(h.value_label, "throughput, receiver (Gbit/s)");
        assert_eq!(
            h.title,
            "throughput, receiver by window and write_size (path wan)"
        );
        assert_eq!(h.cells.len(), 6);
        let c = h
            .cells
            .iter()
            .find(|c| c.column == 2 && c.row == 1)
            .unwrap();
        assert_eq!(c.value, Some(65536.0 * 8192.0 * 1000.0 / 2.0 / 1e9));
        assert_eq!(c.text, "268");
        let c = h
            .cells
            .iter()
            .find(|c| c.column == 0 && c.row == 0)
            .unwrap();
        assert_eq!(c.text, "2.1");
        assert_eq!(
            h.colour_range(),
            Some((
                4096.0 * 1024.0 * 500.0 / 1e9,
                65536.0 * 8192.0 * 500.0 / 1e9
            ))
        );
        // 2.1 to 268: more than two decades, so the colours are on a log scale.
        assert!(h.log_colour);
        assert_eq!(h.colour_position(h.colour_range().unwrap().0), 0.0);
        assert_eq!(h.colour_position(h.colour_range().unwrap().1), 1.0);
        // 16K x 8K is 2^(2+3) = 32 times the lowest, of 2^7 = 128: position 5/7.
        let mid = 16384.0 * 8192.0 * 500.0 / 1e9;
        assert!((h.colour_position(mid) - 5.0 / 7.0).abs() < 1e-12);
        // One write size: 4K to 64K windows span 16x, a linear colour scale.
        let h = heatmap(&g, &key, 0, 2, &[(1, 0)]).unwrap();
        assert!(!h.log_colour);
        assert_eq!(h.y_values, ["lan", "wan"]);
        assert_eq!(h.y_label, "path");
    }

    #[test]
    fn invalid_cells_have_no_value_and_stay_off_the_colour_scale() {
        let mut g = window_study();
        for c in &mut g.cells {
            if c.coords == vec![2, 1, 0] {
                c.figures[1].valid = false;
                c.figures[1].mean = 1e15;
            }
            if c.coords == vec![0, 0, 0] {
                c.anomaly = Some("50% below both neighbours".into());
            }
        }
        let key = FigureKey::new("throughput", Some("receiver"));
        let h = heatmap(&g, &key, 0, 1, &[LAN]).unwrap();
        let bad = h
            .cells
            .iter()
            .find(|c| c.column == 2 && c.row == 1)
            .unwrap();
        assert_eq!((bad.value, bad.text.as_str()), (None, ""));
        assert_eq!(h.cells.iter().filter(|c| c.outlined).count(), 1);
        // The highest valid value now is 16K * 8K * 1000.
        assert_eq!(h.colour_range().unwrap().1, 16384.0 * 8192.0 * 1000.0 / 1e9);
        let svg = render_svg(&Figure::Heatmap(h)).unwrap();
        assert!(svg.contains("throughput, receiver (Gbit/s)"));
    }

    #[test]
    fn curves_have_a_colour_per_series_value_and_a_style_per_side() {
        let g = window_study();
        let c = curves(
            &g,
            "throughput",
            0,
            Some(1),
            &[LAN],
            CurveOptions::default(),
        )
        .unwrap();
        assert_eq!(
            c.title,
            "throughput against window, per write_size (path lan)"
        );
        assert_eq!(c.lines.len(), 4);
        let labels: Vec<&str> = c.lines.iter().map(|l| l.label.as_str()).collect();
        assert_eq!(labels, ["write_size 1K", "", "write_size 8K", ""]);
        let dashed: Vec<bool> = c.lines.iter().map(|l| l.dashed).collect();
        assert_eq!(dashed, [true, false, true, false]);
        assert_eq!(
            c.style_keys
                .iter()
                .map(|k| k.label.as_str())
                .collect::<Vec<_>>(),
            ["sender (dashed)", "receiver (solid)"]
        );
        // Receiver of write size 8K: x in bytes, y in the figure's unit (Gbit/s).
        assert_eq!(
            c.lines[3].points,
            vec![
                (4096.0, 4096.0 * 8192.0 * 1000.0 / 1e9),
                (16384.0, 16384.0 * 8192.0 * 1000.0 / 1e9),
                (65536.0, 65536.0 * 8192.0 * 1000.0 / 1e9),
            ]
        );
        assert_eq!(c.error_bars.len(), 4);
        assert_eq!(c.x.scale, Scale::Log, "4K to 64K spans 16x");
        assert_eq!(c.x.ticks, Ticks::Bytes);
        // 4.19 to 545 Gbit/s: more than two decades.
        assert_eq!(c.y.scale, Scale::Log);
        assert_eq!(c.y.label, "throughput (Gbit/s)");
        let linear = CurveOptions {
            y_log: LogChoice::Linear,
            ..CurveOptions::default()
        };
        let c = curves(&g, "throughput", 0, Some(1), &[LAN], linear).unwrap();
        assert_eq!(c.y.scale, Scale::Linear);
        // Write sizes 1K to 8K: bytes from a factor of 4 on are drawn on a log axis.
        let c = curves(&g, "throughput", 1, Some(0), &[LAN], linear).unwrap();
        assert_eq!(c.x.scale, Scale::Log);
        assert_eq!(c.legend, LegendAt::Best);
    }

    #[test]
    fn a_slice_at_a_fixed_write_size_is_one_curve_pair() {
        let g = window_study();
        let c = slice_curves(
            &g,
            "throughput",
            "window",
            None,
            &[("write_size", "8K"), ("path", "lan")],
            CurveOptions::default(),
        )
        .unwrap();
        assert_eq!(
            c.title,
            "throughput against window (write_size 8K, path lan)"
        );
        assert_eq!(c.lines.len(), 2);
        assert_eq!(
            c.lines[1].points[0],
            (4096.0, 4096.0 * 8192.0 * 1000.0 / 1e9)
        );
        let e = slice_curves(
            &g,
            "throughput",
            "window",
            None,
            &[("write_size", "8K")],
            CurveOptions::default(),
        )
        .unwrap_err();
        assert_eq!(
            e,
            "axis \"path\" is neither the x axis, the curves' axis nor fixed: give one of its values"
        );
        let e =
            slice_curves(&g, "throughput", "path", None, &[], CurveOptions::default()).unwrap_err();
        assert!(e.contains("not numeric"), "{e}");
    }

    #[test]
    fn invalid_points_are_off_the_curves() {
        let mut g = window_study();
        g.cells[0].figures[1].valid = false; // window 4K, write 1K, lan, receiver
        let c = curves(
            &g,
            "throughput",
            0,
            Some(1),
            &[LAN],
            CurveOptions::default(),
        )
        .unwrap();
        assert_eq!(c.invalid, vec![(4096.0, 4096.0 * 1024.0 * 1000.0 / 1e9)]);
        assert_eq!(c.lines[1].points.len(), 2);
        assert_eq!(c.error_bars[1].points.len(), 2);
    }

    pub(crate) fn cc_path_study() -> StudyGrid {
        let mut cells = Vec::new();
        for cc in 0..2 {
            for path in 0..3 {
                let mean = 1e8 * (1 + cc + 2 * path) as f64;
                cells.push(GridCell {
                    coords: vec![cc, path],
                    figures: vec![CellFigure {
                        name: "throughput".into(),
                        side: Some("receiver".into()),
                        unit: "bit/s".into(),
                        mean,
                        ci: Some((mean - 1e7, mean + 1e7)),
                        samples: 5,
                        valid: !(cc == 1 && path == 2),
                    }],
                    counters: vec![("retransmits".into(), (cc * path) as i64)],
                    anomaly: None,
                });
            }
        }
        StudyGrid {
            title: "cc by path".into(),
            axes: vec![
                GridAxis::categorical("cc", &["cubic", "bbr"]),
                GridAxis::categorical("path", &["lan", "wan-50ms", "lossy"]),
            ],
            cells,
        }
    }

    #[test]
    fn bars_group_by_one_axis_with_a_bar_per_value_of_the_other() {
        let g = cc_path_study();
        let key = FigureKey::new("throughput", Some("receiver"));
        let b = bars(&g, &key, 1, Some(0), &[]).unwrap();
        assert_eq!(b.groups, ["lan", "wan-50ms", "lossy"]);
        assert_eq!(b.series.len(), 2);
        assert_eq!(b.series[1].label, "cc bbr");
        assert_eq!(b.y_label, "throughput, receiver (Mbit/s)");
        let bar = b.series[1].bars[1].as_ref().unwrap();
        assert_eq!((bar.value, bar.ci), (400.0, Some((390.0, 410.0))));
        let bad = b.series[1].bars[2].as_ref().unwrap();
        assert!(bad.invalid && bad.ci.is_none());
    }

    #[test]
    fn counters_show_the_columns_that_changed() {
        let t = counter_table(&window_study()).unwrap();
        assert_eq!(t.columns, ["retransmits"]);
        assert_eq!(t.rows.len(), 12);
        assert_eq!(
            t.rows[1],
            ("window 4K, write_size 1K, path wan".into(), vec![Some(3)])
        );
        let text = t.to_text();
        assert_eq!(text.lines().count(), 13);
        // The widest point, "window 16K, write_size 1K, path lan", is 35 characters.
        let header = format!("point{}  retransmits\n", " ".repeat(30));
        assert!(text.starts_with(&header), "{text}");
        let row = format!("\nwindow 4K, write_size 1K, path wan{}3\n", " ".repeat(13));
        assert!(text.contains(&row), "{text}");
        assert!(t.to_html().contains("<td class=\"n\">3</td>"));
        let odd = CounterTable {
            columns: vec!["drops\u{1b}[2J".into()],
            rows: vec![("p".into(), vec![None])],
        };
        let shown = odd.to_text();
        assert!(!shown.contains('\u{1b}'), "{shown}");
        assert_eq!(
            shown,
            format!("point  drops\\u{{1b}}[2J\np    {}-\n", " ".repeat(15))
        );
        let mut g = window_study();
        for c in &mut g.cells {
            c.counters.retain(|(n, _)| n == "drops");
        }
        assert_eq!(counter_table(&g), None);
    }

    #[test]
    fn a_grid_gets_the_figures_its_axes_call_for() {
        let kinds = |g: &StudyGrid| automatic(g).iter().map(|f| f.kind).collect::<Vec<_>>();
        use FigureKind::*;
        // Two numeric axes and a path: a heatmap and curves both ways, per path.
        assert_eq!(
            kinds(&window_study()),
            [Heatmap, Heatmap, Curves, Curves, Curves, Curves]
        );
        // Two categorical axes: bars.
        let figs = automatic(&cc_path_study());
        assert_eq!(figs.len(), 1);
        let Figure::Bars(b) = &figs[0].figure else {
            panic!("not bars")
        };
        assert_eq!(b.groups, ["lan", "wan-50ms", "lossy"]);
        // One numeric axis: a curve.
        let mut g = window_study();
        g.axes.truncate(1);
        g.cells.retain(|c| c.coords[1] == 0 && c.coords[2] == 0);
        for c in &mut g.cells {
            c.coords.truncate(1);
        }
        assert_eq!(kinds(&g), [Curves]);
    }
}
