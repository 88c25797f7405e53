//! Draws figures as SVG with plotters: line charts with optional log axes, shaded bands,
//! error bars and reference lines; heatmaps with a colour bar; and grouped bar charts. A
//! figure is described as data ([`Chart`], [`Heatmap`], [`Bars`]) by [`super::series`] and
//! [`super::study_figures`], so what is plotted can be tested apart from how it is drawn.

use std::ops::Range;

use anyhow::{bail, Result};
use plotters::coord::ranged1d::{AsRangedCoord, SegmentValue, ValueFormatter};
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use crate::units::format_bytes;

/// Pixel size of every figure: wide enough for a legend beside the curves, and the aspect of
/// a figure in a two-column paper.
pub const WIDTH: u32 = 860;
pub const HEIGHT: u32 = 500;

/// plotters writes SVG text at 1/1.24 of the size asked for: the sizes below come out
/// between 13 and 19 px.
const FONT: &str = "sans-serif";

/// Okabe and Ito's palette: distinguishable with the common colour-vision deficiencies and
/// in greyscale print (yellow left out: it vanishes on white).
const PALETTE: [RGBColor; 7] = [
    RGBColor(0, 114, 178),
    RGBColor(213, 94, 0),
    RGBColor(0, 158, 115),
    RGBColor(204, 121, 167),
    RGBColor(230, 159, 0),
    RGBColor(86, 180, 233),
    RGBColor(0, 0, 0),
];

fn colour(i: usize) -> RGBColor {
    PALETTE[i % PALETTE.len()]
}

/// Series colours beyond the palette: `Some(n)` spreads colours 0..n along viridis (its
/// light yellow end left out: it vanishes on white), ordered as the series are.
fn series_colour(i: usize, sequential: Option<usize>) -> RGBColor {
    match sequential {
        Some(n) if n > 1 => viridis(i as f64 / (n - 1) as f64 * 0.85),
        _ => colour(i),
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scale {
    Linear,
    Log,
}

/// How tick labels are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ticks {
    Number,
    /// Binary suffixes (64K), log ticks on powers of two.
    Bytes,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Axis {
    /// With its unit, e.g. "message size (bytes)".
    pub label: String,
    pub scale: Scale,
    pub ticks: Ticks,
    /// A linear axis that starts at 0 (rates, counts), rather than at the data.
    pub from_zero: bool,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Line {
    pub label: String,
    pub colour: usize,
    pub dashed: bool,
    pub markers: bool,
    pub points: Vec<(f64, f64)>,
}

/// A shaded area between two curves, e.g. the 50th to 99th percentile.
#[derive(Debug, Clone, PartialEq)]
pub struct Band {
    pub label: String,
    pub colour: usize,
    /// (x, low, high).
    pub points: Vec<(f64, f64, f64)>,
}

/// A horizontal reference line, e.g. the rate with the kernel's buffer autotuning.
#[derive(Debug, Clone, PartialEq)]
pub struct HLine {
    pub label: String,
    pub colour: usize,
    pub y: f64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LegendAt {
    UpperLeft,
    UpperRight,
    LowerRight,
    LowerLeft,
    /// The corner where the legend covers the fewest drawn points.
    Best,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Chart {
    pub title: String,
    pub x: Axis,
    pub y: Axis,
    pub bands: Vec<Band>,
    pub lines: Vec<Line>,
    pub hlines: Vec<HLine>,
    pub legend: LegendAt,
    pub error_bars: Vec<ErrorBars>,
    /// Points whose figure is not a valid measurement: grey open markers, never on a curve.
    pub invalid: Vec<(f64, f64)>,
    pub style_keys: Vec<StyleKey>,
    /// `Some(n)`: n ordered colours along a sequential scale instead of the palette, for
    /// more series than the palette has colours.
    pub sequential_colours: Option<usize>,
}

/// Vertical error bars at curve points, e.g. a confidence interval over repetitions.
#[derive(Debug, Clone, PartialEq)]
pub struct ErrorBars {
    pub colour: usize,
    /// (x, low, high).
    pub points: Vec<(f64, f64, f64)>,
}

/// A legend entry that explains a line style rather than a curve: "sender (dashed)".
#[derive(Debug, Clone, PartialEq)]
pub struct StyleKey {
    pub label: String,
    pub dashed: bool,
}

/// A value for every combination of two parameters.
#[derive(Debug, Clone, PartialEq)]
pub struct Heatmap {
    pub title: String,
    pub x_label: String,
    pub y_label: String,
    /// Column and row names, in the order drawn (columns left to right, rows bottom to top).
    pub x_values: Vec<String>,
    pub y_values: Vec<String>,
    /// A missing combination stays blank.
    pub cells: Vec<HeatCell>,
    /// What the colour means, with its unit.
    pub value_label: String,
    /// Colours on a log scale (values spanning decades), else linear. Needs positive values.
    pub log_colour: bool,
}

#[derive(Debug, Clone, PartialEq)]
pub struct HeatCell {
    pub column: usize,
    pub row: usize,
    /// The coloured value; `None` for a figure that is not a valid measurement, drawn hatched
    /// grey and never as a value.
    pub value: Option<f64>,
    /// What the cell says: the value in the colour bar's unit.
    pub text: String,
    /// Outlined: the point was flagged as an anomaly.
    pub outlined: bool,
}

impl HeatCell {
    /// A valid cell showing its value as [`fmt_num`] writes it.
    pub fn plain(column: usize, row: usize, value: f64) -> HeatCell {
        HeatCell {
            column,
            row,
            value: Some(value),
            text: fmt_num(value),
            outlined: false,
        }
    }
}

impl Heatmap {
    /// The colour scale's range: the lowest and highest valid, finite value.
    pub fn colour_range(&self) -> Option<(f64, f64)> {
        let values = self
            .cells
            .iter()
            .filter_map(|c| c.value)
            .filter(|v| v.is_finite());
        let lo = values.clone().reduce(f64::min)?;
        let hi = values.reduce(f64::max)?;
        Some((lo, hi))
    }

    /// Where a value lies on the colour scale, 0 to 1.
    pub fn colour_position(&self, v: f64) -> f64 {
        let Some((lo, hi)) = self.colour_range() else {
            return 0.0;
        };
        if self.log_scale() {
            (v / lo).ln() / (hi / lo).ln()
        } else if hi > lo {
            (v - lo) / (hi - lo)
        } else {
            0.0
        }
    }

    fn log_scale(&self) -> bool {
        self.log_colour
            && self
                .colour_range()
                .is_some_and(|(lo, hi)| lo > 0.0 && hi > lo)
    }
}

/// Grouped bars: one group per value of one parameter, one bar per series in each group.
#[derive(Debug, Clone, PartialEq)]
pub struct Bars {
    pub title: String,
    /// Names the groups' parameter, under the group names.
    pub x_label: String,
    /// With its unit.
    pub y_label: String,
    pub groups: Vec<String>,
    pub series: Vec<BarSeries>,
    /// As [`Chart::sequential_colours`].
    pub sequential_colours: Option<usize>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct BarSeries {
    pub label: String,
    pub colour: usize,
    /// One per group; `None` where nothing was measured.
    pub bars: Vec<Option<Bar>>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Bar {
    pub value: f64,
    /// (low, high), drawn as an error bar.
    pub ci: Option<(f64, f64)>,
    /// Not a valid measurement: drawn hatched grey.
    pub invalid: bool,
    /// Flagged as an anomaly: outlined.
    pub outlined: bool,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Figure {
    Chart(Chart),
    Heatmap(Heatmap),
    Bars(Bars),
}

impl Figure {
    pub fn title(&self) -> &str {
        match self {
            Figure::Chart(c) => &c.title,
            Figure::Heatmap(h) => &h.title,
            Figure::Bars(b) => &b.title,
        }
    }
}

/// A number for a tick label or a table: at most 4 significant digits, no trailing zeros.
pub fn fmt_num(v: f64) -> String {
    if v == 0.0 || !v.is_finite() {
        return if v == 0.0 { "0".into() } else { "-".into() };
    }
    let a = v.abs();
    if !(1e-3..1e7).contains(&a) {
        return format!("{v:.2e}");
    }
    let decimals = (3 - a.log10().floor() as i32).max(0) as usize;
    let s = format!("{v:.decimals$}");
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_owned()
    } else {
        s
    }
}

/// A byte count for an axis or a cell: "auto" for 0 (kernel autotuning).
pub fn fmt_bytes_param(v: u64) -> String {
    if v == 0 {
        "auto".into()
    } else {
        format_bytes(v)
    }
}

/// On a log axis plotters puts ticks at every multiple of a power of ten (10, 20, ... 90);
/// labelling only 1, 2 and 5 times a power keeps the labels apart.
fn log_label_wanted(v: f64) -> bool {
    if v <= 0.0 || !v.is_finite() {
        return false;
    }
    let mantissa = v / 10f64.powf(v.log10().floor());
    [1.0, 2.0, 5.0, 10.0]
        .iter()
        .any(|m| (mantissa - m).abs() < 1e-6 * m)
}

fn fmt_log_tick(v: f64, ticks: Ticks) -> String {
    if ticks == Ticks::Number && !log_label_wanted(v) {
        return String::new();
    }
    fmt_tick(v, ticks)
}

fn fmt_tick(v: f64, ticks: Ticks) -> String {
    match ticks {
        Ticks::Number => fmt_num(v),
        Ticks::Bytes if (1.0..1.8e19).contains(&v) => format_bytes(v.round() as u64),
        Ticks::Bytes => fmt_num(v),
    }
}

/// A title's font size: smaller for long titles, so that they fit the figure's width.
fn title_size(title: &str) -> u32 {
    match title.chars().count() {
        0..=56 => 24,
        57..=70 => 21,
        _ => 18,
    }
}

/// Renders a figure as a standalone SVG document.
pub fn render_svg(fig: &Figure) -> Result<String> {
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (WIDTH, HEIGHT)).into_drawing_area();
        root.fill(&WHITE)?;
        match fig {
            Figure::Chart(c) => draw_chart(&root, c)?,
            Figure::Heatmap(h) => draw_heatmap(&root, h)?,
            Figure::Bars(b) => draw_bars(&root, b)?,
        }
        root.present()?;
    }
    Ok(svg)
}

type Area<'a> = DrawingArea<SVGBackend<'a>, Shift>;

fn usable(v: f64, scale: Scale) -> bool {
    v.is_finite() && (scale == Scale::Linear || v > 0.0)
}

/// The data range of one axis, padded; `None` without a single usable value.
fn range_of(values: &[f64], axis: &Axis) -> Option<Range<f64>> {
    let vs: Vec<f64> = values
        .iter()
        .copied()
        .filter(|v| usable(*v, axis.scale))
        .collect();
    let lo = vs.iter().copied().reduce(f64::min)?;
    let hi = vs.iter().copied().reduce(f64::max)?;
    Some(match axis.scale {
        Scale::Log => {
            let (lo, hi) = if hi / lo < 1.5 {
                (lo / 1.5, hi * 1.5)
            } else {
                (lo, hi)
            };
            lo / 1.15..hi * 1.15
        }
        Scale::Linear if axis.from_zero && lo >= 0.0 => 0.0..if hi > 0.0 { hi * 1.08 } else { 1.0 },
        Scale::Linear => {
            let pad = if hi > lo {
                (hi - lo) * 0.06
            } else {
                lo.abs().max(1.0) * 0.1
            };
            lo - pad..hi + pad
        }
    })
}

/// Log tick spacing: powers of two for bytes, spread to about eight labels; decades otherwise.
fn log_base(range: &Range<f64>, ticks: Ticks) -> f64 {
    match ticks {
        Ticks::Number => 10.0,
        Ticks::Bytes => {
            let octaves = (range.end / range.start).log2().max(1.0);
            2f64.powf((octaves / 8.0).ceil().max(1.0))
        }
    }
}

fn draw_chart(root: &Area, c: &Chart) -> Result<()> {
    let mut xs = Vec::new();
    let mut ys = Vec::new();
    for l in &c.lines {
        for &(x, y) in &l.points {
            if usable(x, c.x.scale) && usable(y, c.y.scale) {
                xs.push(x);
                ys.push(y);
            }
        }
    }
    for b in &c.bands {
        for &(x, lo, hi) in &b.points {
            if usable(x, c.x.scale) && usable(lo, c.y.scale) && usable(hi, c.y.scale) {
                xs.push(x);
                ys.extend([lo, hi]);
            }
        }
    }
    for e in &c.error_bars {
        for &(x, lo, hi) in &e.points {
            if usable(x, c.x.scale) && usable(lo, c.y.scale) && usable(hi, c.y.scale) {
                xs.push(x);
                ys.extend([lo, hi]);
            }
        }
    }
    for &(x, y) in &c.invalid {
        if usable(x, c.x.scale) && usable(y, c.y.scale) {
            xs.push(x);
            ys.push(y);
        }
    }
    ys.extend(c.hlines.iter().map(|h| h.y));
    let (Some(xr), Some(yr)) = (range_of(&xs, &c.x), range_of(&ys, &c.y)) else {
        bail!("nothing to plot in '{}'", c.title);
    };
    let resolved;
    let (c, yr) = if c.legend == LegendAt::Best {
        let (at, yr) = best_corner(c, &xr, yr);
        resolved = Chart {
            legend: at,
            ..c.clone()
        };
        (&resolved, yr)
    } else {
        (c, yr)
    };
    let (xb, yb) = (log_base(&xr, c.x.ticks), log_base(&yr, c.y.ticks));
    match (c.x.scale, c.y.scale) {
        (Scale::Linear, Scale::Linear) => plot(root, c, xr, yr),
        (Scale::Log, Scale::Linear) => plot(root, c, xr.log_scale().base(xb), yr),
        (Scale::Linear, Scale::Log) => plot(root, c, xr, yr.log_scale().base(yb)),
        (Scale::Log, Scale::Log) => plot(root, c, xr.log_scale().base(xb), yr.log_scale().base(yb)),
    }
}

/// A legend sample: a short line, dashed or solid, with the marker when the curve has them.
/// A macro rather than a function: the element's type names the backend's lifetime.
macro_rules! legend_mark {
    ($at:expr, $colour:expr, $dashed:expr, $markers:expr) => {{
        let style = $colour.stroke_width(2);
        let (first, second) = if $dashed {
            (vec![(0, 0), (8, 0)], vec![(13, 0), (22, 0)])
        } else {
            (vec![(0, 0), (22, 0)], vec![(22, 0), (22, 0)])
        };
        let marker = if $markers {
            $colour.filled()
        } else {
            TRANSPARENT.filled()
        };
        EmptyElement::at($at)
            + PathElement::new(first, style)
            + PathElement::new(second, style)
            + Circle::new((11, 0), 3, marker)
    }};
}

fn plot<X, Y>(root: &Area, c: &Chart, x: X, y: Y) -> Result<()>
where
    X: AsRangedCoord<Value = f64>,
    Y: AsRangedCoord<Value = f64>,
    X::CoordDescType: ValueFormatter<f64>,
    Y::CoordDescType: ValueFormatter<f64>,
{
    let mut chart = ChartBuilder::on(root)
        .caption(&c.title, (FONT, title_size(&c.title)))
        .margin(14)
        .x_label_area_size(58)
        .y_label_area_size(88)
        .build_cartesian_2d(x, y)?;
    let label = |v: f64, axis: &Axis| match axis.scale {
        Scale::Log => fmt_log_tick(v, axis.ticks),
        Scale::Linear => fmt_tick(v, axis.ticks),
    };
    let x_fmt = |v: &f64| label(*v, &c.x);
    let y_fmt = |v: &f64| label(*v, &c.y);
    chart
        .configure_mesh()
        .x_desc(c.x.label.as_str())
        .y_desc(c.y.label.as_str())
        .x_label_formatter(&x_fmt)
        .y_label_formatter(&y_fmt)
        .x_labels(10)
        .y_labels(8)
        .label_style((FONT, 17))
        .axis_desc_style((FONT, 19))
        .bold_line_style(RGBColor(215, 215, 215))
        .light_line_style(RGBColor(244, 244, 244))
        .max_light_lines(4)
        .draw()?;

    let keep = |&(x, y): &(f64, f64)| usable(x, c.x.scale) && usable(y, c.y.scale);
    for b in &c.bands {
        let pts: Vec<(f64, f64, f64)> = b
            .points
            .iter()
            .copied()
            .filter(|&(x, lo, hi)| keep(&(x, lo)) && keep(&(x, hi)))
            .collect();
        if pts.is_empty() {
            continue;
        }
        let mut poly: Vec<(f64, f64)> = pts.iter().map(|p| (p.0, p.2)).collect();
        poly.extend(pts.iter().rev().map(|p| (p.0, p.1)));
        let fill = series_colour(b.colour, c.sequential_colours).mix(0.18);
        let anno = chart.draw_series(std::iter::once(Polygon::new(poly, fill.filled())))?;
        if !b.label.is_empty() {
            anno.label(b.label.as_str())
                .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 22, y + 5)], fill.filled()));
        }
    }
    let x_range = chart.as_coord_spec().get_x_range();
    for h in &c.hlines {
        let col = series_colour(h.colour, c.sequential_colours);
        chart
            .draw_series(DashedLineSeries::new(
                vec![(x_range.start, h.y), (x_range.end, h.y)],
                3,
                4,
                col.stroke_width(1),
            ))?
            .label(h.label.as_str())
            .legend(move |p| legend_mark!(p, col, true, false));
    }
    for l in &c.lines {
        let pts: Vec<(f64, f64)> = l.points.iter().copied().filter(keep).collect();
        if pts.is_empty() {
            continue;
        }
        let col = series_colour(l.colour, c.sequential_colours);
        let style = col.stroke_width(2);
        let (dashed, markers) = (l.dashed, l.markers);
        let anno = if dashed {
            chart.draw_series(DashedLineSeries::new(pts.clone(), 8, 5, style))?
        } else {
            chart.draw_series(LineSeries::new(pts.clone(), style))?
        };
        // A curve without a name is explained by the style keys and the other curves.
        if !l.label.is_empty() {
            anno.label(l.label.as_str())
                .legend(move |p| legend_mark!(p, col, dashed, markers));
        }
        if markers {
            chart.draw_series(pts.iter().map(|&p| Circle::new(p, 3, col.filled())))?;
        }
    }
    for e in &c.error_bars {
        let style = series_colour(e.colour, c.sequential_colours).stroke_width(1);
        let pts: Vec<(f64, f64, f64)> = e
            .points
            .iter()
            .copied()
            .filter(|&(x, lo, hi)| keep(&(x, lo)) && keep(&(x, hi)))
            .collect();
        chart.draw_series(
            pts.iter()
                .map(|&(x, lo, hi)| PathElement::new(vec![(x, lo), (x, hi)], style)),
        )?;
        // Caps in pixels, so that they keep their width on a log axis.
        for end in [1, 2] {
            chart.draw_series(pts.iter().map(|p| {
                let at = (p.0, if end == 1 { p.1 } else { p.2 });
                EmptyElement::at(at) + PathElement::new(vec![(-4, 0), (4, 0)], style)
            }))?;
        }
    }
    if !c.invalid.is_empty() {
        let grey = RGBColor(120, 120, 120);
        let pts: Vec<(f64, f64)> = c.invalid.iter().copied().filter(keep).collect();
        chart
            .draw_series(pts.iter().map(|&p| Cross::new(p, 5, grey.stroke_width(2))))?
            .label("not valid (listed apart)")
            .legend(move |(x, y)| Cross::new((x + 11, y), 5, grey.stroke_width(2)));
    }
    for k in &c.style_keys {
        let ink = RGBColor(90, 90, 90);
        let dashed = k.dashed;
        chart
            .draw_series(std::iter::empty::<Circle<(f64, f64), i32>>())?
            .label(k.label.as_str())
            .legend(move |p| legend_mark!(p, ink, dashed, false));
    }
    let position = match c.legend {
        LegendAt::UpperLeft => SeriesLabelPosition::UpperLeft,
        LegendAt::UpperRight => SeriesLabelPosition::UpperRight,
        LegendAt::LowerRight => SeriesLabelPosition::LowerRight,
        LegendAt::LowerLeft => SeriesLabelPosition::LowerLeft,
        // Resolved by draw_chart.
        LegendAt::Best => SeriesLabelPosition::UpperLeft,
    };
    chart
        .configure_series_labels()
        .position(position)
        .margin(10)
        .legend_area_size(30)
        .label_font((FONT, 17))
        .background_style(WHITE.mix(0.9))
        .border_style(RGBColor(160, 160, 160))
        .draw()?;
    Ok(())
}

/// The plotting area of a chart in pixels, roughly: the figure less the caption, the label
/// areas and the margins.
const PLOT_W: f64 = (WIDTH - 88 - 28) as f64;
const PLOT_H: f64 = (HEIGHT - 58 - 28 - 40) as f64;

/// Where a value lies along an axis's range, 0 to 1.
fn fraction(v: f64, r: &Range<f64>, scale: Scale) -> f64 {
    match scale {
        Scale::Log => (v / r.start).ln() / (r.end / r.start).ln(),
        Scale::Linear => (v - r.start) / (r.end - r.start),
    }
}

/// The legend's corner for [`LegendAt::Best`]: the corner whose box (estimated from the
/// entries) covers the fewest samples along the curves, bands, error bars and reference
/// lines. When every corner covers some, the y range is raised so that the legend fits
/// above all data in the upper corner that covered fewer. Returns the corner and the y
/// range to draw.
fn best_corner(c: &Chart, xr: &Range<f64>, yr: Range<f64>) -> (LegendAt, Range<f64>) {
    let labels: Vec<&str> = c
        .lines
        .iter()
        .map(|l| l.label.as_str())
        .chain(c.bands.iter().map(|b| b.label.as_str()))
        .chain(c.hlines.iter().map(|h| h.label.as_str()))
        .chain(c.style_keys.iter().map(|k| k.label.as_str()))
        .chain((!c.invalid.is_empty()).then_some("not valid (listed apart)"))
        .filter(|l| !l.is_empty())
        .collect();
    let longest = labels.iter().map(|l| l.chars().count()).max().unwrap_or(0) as f64;
    // Box and its 10 px margin, as fractions of the plotting area.
    let w = (62.0 + longest * 9.0) / PLOT_W;
    let h = (30.0 + labels.len() as f64 * 23.0) / PLOT_H;
    let mut samples: Vec<(f64, f64)> = Vec::new();
    let keep = |p: &(f64, f64)| usable(p.0, c.x.scale) && usable(p.1, c.y.scale);
    let norm = |p: (f64, f64)| (fraction(p.0, xr, c.x.scale), fraction(p.1, &yr, c.y.scale));
    let mut along = |pts: Vec<(f64, f64)>| {
        let n: Vec<(f64, f64)> = pts.into_iter().filter(keep).map(norm).collect();
        samples.extend(n.iter().copied());
        for pair in n.windows(2) {
            let (a, b) = (pair[0], pair[1]);
            samples.extend((1..16).map(|k| {
                let t = f64::from(k) / 16.0;
                (a.0 + (b.0 - a.0) * t, a.1 + (b.1 - a.1) * t)
            }));
        }
    };
    for l in &c.lines {
        along(l.points.clone());
    }
    for b in &c.bands {
        along(b.points.iter().map(|p| (p.0, p.1)).collect());
        along(b.points.iter().map(|p| (p.0, p.2)).collect());
    }
    for e in &c.error_bars {
        for p in &e.points {
            along(vec![(p.0, p.1), (p.0, p.2)]);
        }
    }
    along(c.invalid.clone());
    for hl in &c.hlines {
        along(vec![(xr.start, hl.y), (xr.end, hl.y)]);
    }
    let count = |left: bool, upper: bool| {
        samples
            .iter()
            .filter(|(x, y)| {
                (if left { *x <= w } else { *x >= 1.0 - w })
                    && (if upper { *y >= 1.0 - h } else { *y <= h })
            })
            .count()
    };
    let corners = [
        (LegendAt::UpperLeft, count(true, true)),
        (LegendAt::UpperRight, count(false, true)),
        (LegendAt::LowerRight, count(false, false)),
        (LegendAt::LowerLeft, count(true, false)),
    ];
    if let Some((at, 0)) = corners.iter().copied().find(|c| c.1 == 0) {
        return (at, yr);
    }
    let at = if corners[0].1 <= corners[1].1 {
        LegendAt::UpperLeft
    } else {
        LegendAt::UpperRight
    };
    // The data keep the lower 1 - h of the height.
    let keep_share = (1.0 - h).max(0.4);
    let top = match c.y.scale {
        Scale::Log => yr.start * (yr.end / yr.start).powf(1.0 / keep_share),
        Scale::Linear => yr.start + (yr.end - yr.start) / keep_share,
    };
    (at, yr.start..top)
}

/// Viridis at nine stops, interpolated: perceptually uniform and readable in greyscale.
fn viridis(t: f64) -> RGBColor {
    const STOPS: [(u8, u8, u8); 9] = [
        (68, 1, 84),
        (71, 44, 122),
        (59, 81, 139),
        (44, 113, 142),
        (33, 144, 141),
        (39, 173, 129),
        (92, 200, 99),
        (170, 220, 50),
        (253, 231, 37),
    ];
    let t = if t.is_finite() {
        t.clamp(0.0, 1.0)
    } else {
        0.0
    };
    let pos = t * (STOPS.len() - 1) as f64;
    let i = (pos.floor() as usize).min(STOPS.len() - 2);
    let f = pos - i as f64;
    let mix = |a: u8, b: u8| (f64::from(a) + (f64::from(b) - f64::from(a)) * f).round() as u8;
    let (a, b) = (STOPS[i], STOPS[i + 1]);
    RGBColor(mix(a.0, b.0), mix(a.1, b.1), mix(a.2, b.2))
}

/// Vermilion: an outline no viridis colour is confused with.
const OUTLINE: RGBColor = RGBColor(213, 94, 0);
const INVALID_FILL: RGBColor = RGBColor(225, 225, 225);
const HATCH: RGBColor = RGBColor(140, 140, 140);

/// A rectangle's outline in pixels. A path, because plotters' SVG rectangles drop the
/// stroke width.
fn outline(root: &Area, a: (i32, i32), b: (i32, i32), ink: RGBColor, width: u32) -> Result<()> {
    let corners = vec![(a.0, a.1), (b.0, a.1), (b.0, b.1), (a.0, b.1), (a.0, a.1)];
    root.draw(&PathElement::new(corners, ink.stroke_width(width)))?;
    Ok(())
}

/// Diagonal hatching of a pixel rectangle: lines x + y = d every 7 px, cut to the rectangle.
fn hatch_lines(x0: i32, y0: i32, x1: i32, y1: i32) -> Vec<[(i32, i32); 2]> {
    let (w, h) = (x1 - x0, y1 - y0);
    (1..)
        .map(|k| k * 7)
        .take_while(|d| *d < w + h)
        .map(|d| {
            [
                (x0 + d.min(w), y0 + d - d.min(w)),
                (x0 + d - d.min(h), y0 + d.min(h)),
            ]
        })
        .collect()
}

/// The cells' text size: smaller when many columns or long texts leave little room.
fn cell_font(cell_px: i32, longest: usize) -> u32 {
    let fit = f64::from(cell_px) / (longest.max(1) as f64 * 0.62) * 1.24;
    fit.clamp(10.0, 17.0) as u32
}

fn draw_heatmap(root: &Area, h: &Heatmap) -> Result<()> {
    let Some((lo, hi)) = h.colour_range() else {
        bail!("nothing to plot in '{}': no valid value", h.title);
    };
    let (main, bar) = root.split_horizontally(WIDTH - 130);
    let (nx, ny) = (h.x_values.len() as i32, h.y_values.len() as i32);
    let mut chart = ChartBuilder::on(&main)
        .caption(&h.title, (FONT, title_size(&h.title)))
        .margin(14)
        .x_label_area_size(58)
        .y_label_area_size(96)
        // plotters' integer ranges include their end: 0..n-1 has n segments.
        .build_cartesian_2d(
            (0..(nx - 1).max(0)).into_segmented(),
            (0..(ny - 1).max(0)).into_segmented(),
        )?;
    let label = |values: &[String], v: &SegmentValue<i32>| match v {
        SegmentValue::CenterOf(i) => values.get(*i as usize).cloned().unwrap_or_default(),
        _ => String::new(),
    };
    let x_fmt = |v: &SegmentValue<i32>| label(&h.x_values, v);
    let y_fmt = |v: &SegmentValue<i32>| label(&h.y_values, v);
    chart
        .configure_mesh()
        .disable_mesh()
        .x_desc(h.x_label.as_str())
        .y_desc(h.y_label.as_str())
        .x_labels(h.x_values.len() + 1)
        .y_labels(h.y_values.len() + 1)
        .x_label_formatter(&x_fmt)
        .y_label_formatter(&y_fmt)
        .label_style((FONT, if nx > 9 { 14 } else { 17 }))
        .axis_desc_style((FONT, 19))
        .draw()?;
    // Pixel corners of every cell, for the hatching and outlines drawn on the root area.
    let corners: Vec<Vec<(i32, i32)>> = (0..=nx)
        .map(|i| {
            (0..=ny)
                .map(|j| chart.backend_coord(&(SegmentValue::Exact(i), SegmentValue::Exact(j))))
                .collect()
        })
        .collect();
    let px = |i: i32, j: i32| corners[i as usize][j as usize];
    let (p0, p1) = (px(0, 0), px(1, 1));
    let longest = h
        .cells
        .iter()
        .map(|c| c.text.chars().count())
        .max()
        .unwrap_or(1);
    let cell_text = (FONT, cell_font((p1.0 - p0.0).abs(), longest))
        .into_font()
        .into_text_style(&main)
        .pos(Pos::new(HPos::Center, VPos::Center));
    for c in &h.cells {
        let (i, j) = (c.column as i32, c.row as i32);
        if i >= nx || j >= ny {
            continue;
        }
        let cell = [
            (SegmentValue::Exact(i), SegmentValue::Exact(j)),
            (SegmentValue::Exact(i + 1), SegmentValue::Exact(j + 1)),
        ];
        let centre = (SegmentValue::CenterOf(i), SegmentValue::CenterOf(j));
        match c.value.filter(|v| v.is_finite()) {
            Some(v) => {
                let t = h.colour_position(v);
                chart.draw_series(std::iter::once(Rectangle::new(
                    cell.clone(),
                    viridis(t).filled(),
                )))?;
                let ink = if t > 0.55 { BLACK } else { WHITE };
                chart.draw_series(std::iter::once(Text::new(
                    c.text.clone(),
                    centre,
                    cell_text.color(&ink),
                )))?;
            }
            None => {
                chart.draw_series(std::iter::once(Rectangle::new(
                    cell.clone(),
                    INVALID_FILL.filled(),
                )))?;
                let (a, b) = (px(i, j + 1), px(i + 1, j));
                for [s, e] in hatch_lines(a.0, a.1, b.0, b.1) {
                    root.draw(&PathElement::new(vec![s, e], HATCH.stroke_width(1)))?;
                }
            }
        }
        if c.outlined {
            let (a, b) = (px(i, j + 1), px(i + 1, j));
            outline(root, (a.0 + 3, a.1 + 3), (b.0 - 3, b.1 - 3), OUTLINE, 4)?;
        }
    }

    // The colour bar: the scale of the cells, with the unit as its title.
    let top = if hi > lo { hi } else { lo + 1.0 };
    if h.log_scale() {
        colour_bar(&bar, h, (lo..top).log_scale(), |k| lo * (hi / lo).powf(k))
    } else {
        colour_bar(&bar, h, lo..top, |k| lo + (top - lo) * k)
    }
}

/// The colour bar of a heatmap on `area`: `at(k)` is the value at fraction k of the scale.
fn colour_bar<Y>(area: &Area, h: &Heatmap, y: Y, at: impl Fn(f64) -> f64) -> Result<()>
where
    Y: AsRangedCoord<Value = f64>,
    Y::CoordDescType: ValueFormatter<f64>,
{
    let mut scale = ChartBuilder::on(area)
        .margin_top(54)
        .margin_bottom(64)
        .margin_right(8)
        .y_label_area_size(70)
        .build_cartesian_2d(0f64..1f64, y)?;
    let v_fmt = |v: &f64| {
        if h.log_scale() {
            fmt_log_tick(*v, Ticks::Number)
        } else {
            fmt_num(*v)
        }
    };
    scale
        .configure_mesh()
        .disable_mesh()
        .disable_x_axis()
        .y_labels(6)
        .y_label_formatter(&v_fmt)
        .y_desc(if h.log_scale() {
            format!("{}, log scale", h.value_label)
        } else {
            h.value_label.clone()
        })
        .label_style((FONT, 16))
        .axis_desc_style((FONT, 17))
        .draw()?;
    const STEPS: usize = 64;
    scale.draw_series((0..STEPS).map(|k| {
        let (a, b) = (
            at(k as f64 / STEPS as f64),
            at((k + 1) as f64 / STEPS as f64),
        );
        Rectangle::new(
            [(0.0, a), (1.0, b)],
            viridis(k as f64 / (STEPS - 1) as f64).filled(),
        )
    }))?;
    Ok(())
}

/// Bars' value range: from 0 (or the lowest negative value) to the highest bar or error bar.
fn bars_range(b: &Bars) -> Option<Range<f64>> {
    let values: Vec<f64> = b
        .series
        .iter()
        .flat_map(|s| s.bars.iter().flatten())
        .flat_map(|bar| {
            let (l, h) = bar.ci.unwrap_or((bar.value, bar.value));
            [bar.value, l, h]
        })
        .filter(|v| v.is_finite())
        .collect();
    let lo = values.iter().copied().reduce(f64::min)?.min(0.0);
    let hi = values.iter().copied().reduce(f64::max)?.max(0.0);
    let hi = if hi > lo { hi } else { lo + 1.0 };
    // Room above the highest bar for the legend in the upper right: about a 14th of the
    // height per entry.
    let legend = 0.1 + 0.075 * b.series.len() as f64;
    Some(lo..hi + (hi - lo) * legend)
}

fn draw_bars(root: &Area, b: &Bars) -> Result<()> {
    let Some(yr) = bars_range(b) else {
        bail!("nothing to plot in '{}'", b.title);
    };
    let groups = b.groups.len().max(1);
    let mut chart = ChartBuilder::on(root)
        .caption(&b.title, (FONT, title_size(&b.title)))
        .margin(14)
        .x_label_area_size(58)
        .y_label_area_size(88)
        .build_cartesian_2d(0f64..groups as f64, yr.clone())?;
    let y_fmt = |v: &f64| fmt_num(*v);
    // Group names are written under each group below, not at plotters' own tick places.
    let no_label = |_: &f64| String::new();
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_desc(b.x_label.as_str())
        .y_desc(b.y_label.as_str())
        .x_labels(0)
        .x_label_formatter(&no_label)
        .y_label_formatter(&y_fmt)
        .y_labels(8)
        .label_style((FONT, 17))
        .axis_desc_style((FONT, 19))
        .bold_line_style(RGBColor(215, 215, 215))
        .light_line_style(RGBColor(244, 244, 244))
        .max_light_lines(4)
        .draw()?;
    let n = b.series.len().max(1) as f64;
    // Each group uses 80% of its width, the bars side by side.
    let width = 0.8 / n;
    let base = if yr.start < 0.0 { 0.0 } else { yr.start };
    for (k, s) in b.series.iter().enumerate() {
        let col = series_colour(s.colour, b.sequential_colours);
        let left = |g: usize| g as f64 + 0.1 + width * k as f64;
        let anno = chart.draw_series(s.bars.iter().enumerate().filter_map(|(g, bar)| {
            let bar = bar.as_ref()?;
            let fill = if bar.invalid { INVALID_FILL } else { col };
            Some(Rectangle::new(
                [(left(g), base), (left(g) + width * 0.92, bar.value)],
                fill.filled(),
            ))
        }))?;
        anno.label(s.label.as_str())
            .legend(move |(x, y)| Rectangle::new([(x, y - 6), (x + 22, y + 6)], col.filled()));
        for (g, bar) in s.bars.iter().enumerate() {
            let Some(bar) = bar else { continue };
            let (a, z) = (
                chart.backend_coord(&(left(g), bar.value)),
                chart.backend_coord(&(left(g) + width * 0.92, base)),
            );
            let (top, bottom) = (a.1.min(z.1), a.1.max(z.1));
            if bar.invalid {
                for [s, e] in hatch_lines(a.0, top, z.0, bottom) {
                    root.draw(&PathElement::new(vec![s, e], HATCH.stroke_width(1)))?;
                }
            }
            if bar.outlined {
                // Black: vermilion is also a bar colour.
                outline(root, (a.0 + 1, top + 1), (z.0 - 1, bottom - 1), BLACK, 3)?;
            }
            if let Some((l, h)) = bar.ci.filter(|(l, h)| l.is_finite() && h.is_finite()) {
                let x = left(g) + width * 0.46;
                let ink = BLACK.stroke_width(1);
                chart.draw_series(std::iter::once(PathElement::new(vec![(x, l), (x, h)], ink)))?;
                for y in [l, h] {
                    chart.draw_series(std::iter::once(
                        EmptyElement::at((x, y)) + PathElement::new(vec![(-4, 0), (4, 0)], ink),
                    ))?;
                }
            }
        }
    }
    let group_text = (FONT, if groups > 6 { 14 } else { 17 })
        .into_font()
        .into_text_style(root)
        .pos(Pos::new(HPos::Center, VPos::Top));
    for (g, name) in b.groups.iter().enumerate() {
        let at = chart.backend_coord(&(g as f64 + 0.5, yr.start));
        root.draw(&Text::new(
            name.clone(),
            (at.0, at.1 + 8),
            group_text.clone(),
        ))?;
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperRight)
        .margin(10)
        .legend_area_size(30)
        .label_font((FONT, 17))
        .background_style(WHITE.mix(0.9))
        .border_style(RGBColor(160, 160, 160))
        .draw()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn axis(label: &str, scale: Scale, ticks: Ticks) -> Axis {
        Axis {
            label: label.into(),
            scale,
            ticks,
            from_zero: true,
        }
    }

    #[test]
    fn numbers_read_well() {
        assert_eq!(fmt_num(0.0), "0");
        assert_eq!(fmt_num(1.0), "1");
        assert_eq!(fmt_num(34.62), "34.62");
        assert_eq!(fmt_num(40797.31), "40797");
        assert_eq!(fmt_num(0.2345), "0.2345");
        assert_eq!(fmt_num(1.5e9), "1.50e9");
        assert_eq!(fmt_tick(65536.0, Ticks::Bytes), "64K");
        assert_eq!(fmt_bytes_param(0), "auto");
        assert_eq!(fmt_log_tick(20.0, Ticks::Number), "20");
        assert_eq!(fmt_log_tick(30.0, Ticks::Number), "");
        assert_eq!(fmt_log_tick(0.5, Ticks::Number), "0.5");
        assert_eq!(fmt_log_tick(1000.0, Ticks::Number), "1000");
    }

    #[test]
    fn a_chart_renders_labels_legend_and_log_ticks() {
        let chart = Chart {
            title: "Throughput against message size".into(),
            x: axis("message size (bytes)", Scale::Log, Ticks::Bytes),
            y: axis("throughput (Mbit/s)", Scale::Linear, Ticks::Number),
            bands: vec![Band {
                label: "p50–p99".into(),
                colour: 0,
                points: vec![(1.0, 1.0, 2.0), (1024.0, 3.0, 5.0)],
            }],
            lines: vec![
                Line {
                    label: "receiver".into(),
                    colour: 0,
                    dashed: false,
                    markers: true,
                    points: vec![(1.0, 1.0), (64.0, 10.0), (4096.0, 100.0), (0.0, 5.0)],
                },
                Line {
                    label: "sender <&>".into(),
                    colour: 1,
                    dashed: true,
                    markers: false,
                    points: vec![(1.0, 1.5), (4096.0, 110.0)],
                },
            ],
            hlines: vec![HLine {
                label: "autotuning".into(),
                colour: 2,
                y: 50.0,
            }],
            legend: LegendAt::UpperLeft,
            error_bars: vec![],
            invalid: vec![],
            style_keys: vec![],
            sequential_colours: None,
        };
        let svg = render_svg(&Figure::Chart(chart)).unwrap();
        assert!(svg.starts_with("<svg"), "{}", &svg[..100]);
        for text in [
            "message size (bytes)",
            "throughput (Mbit/s)",
            "receiver",
            "sender &lt;&amp;&gt;",
            "autotuning",
            "\n64\n",
            "\n1K\n",
        ] {
            assert!(svg.contains(text), "missing {text}");
        }
    }

    #[test]
    fn nothing_to_plot_is_an_error_not_a_panic() {
        let chart = Chart {
            title: "empty".into(),
            x: axis("x", Scale::Log, Ticks::Number),
            y: axis("y", Scale::Log, Ticks::Number),
            bands: vec![],
            lines: vec![Line {
                label: "zeros".into(),
                colour: 0,
                dashed: false,
                markers: false,
                points: vec![(0.0, 0.0), (f64::NAN, 1.0)],
            }],
            hlines: vec![],
            legend: LegendAt::UpperLeft,
            error_bars: vec![],
            invalid: vec![],
            style_keys: vec![],
            sequential_colours: None,
        };
        assert!(render_svg(&Figure::Chart(chart)).is_err());
    }

    #[test]
    fn a_heatmap_renders_cells_and_scale() {
        let h = Heatmap {
            title: "buffers".into(),
            x_label: "send buffer (bytes)".into(),
            y_label: "receive buffer (bytes)".into(),
            x_values: vec!["auto".into(), "64K".into()],
            y_values: vec!["1K".into(), "4K".into()],
            cells: vec![
                HeatCell::plain(0, 0, 1.0),
                HeatCell::plain(1, 0, 2.0),
                HeatCell::plain(0, 1, 3.0),
                HeatCell::plain(1, 1, 4.5),
            ],
            value_label: "throughput (Mbit/s)".into(),
            log_colour: false,
        };
        let svg = render_svg(&Figure::Heatmap(h)).unwrap();
        for text in [
            "\nauto\n",
            "\n64K\n",
            "\n4K\n",
            "\n4.5\n",
            "throughput (Mbit/s)",
        ] {
            assert!(svg.contains(text), "missing {text}");
        }
        assert!(viridis(0.0) == RGBColor(68, 1, 84) && viridis(1.0) == RGBColor(253, 231, 37));
    }

    fn lines_chart(lines: Vec<Vec<(f64, f64)>>) -> Chart {
        Chart {
            title: "t".into(),
            x: axis("x", Scale::Linear, Ticks::Number),
            y: axis("y", Scale::Linear, Ticks::Number),
            bands: vec![],
            lines: lines
                .into_iter()
                .enumerate()
                .map(|(i, points)| Line {
                    label: format!("curve {i}"),
                    colour: i,
                    dashed: false,
                    markers: true,
                    points,
                })
                .collect(),
            hlines: vec![],
            legend: LegendAt::Best,
            error_bars: vec![],
            invalid: vec![],
            style_keys: vec![],
            sequential_colours: None,
        }
    }

    #[test]
    fn the_best_legend_corner_is_one_without_data_or_above_it() {
        // A rising diagonal leaves the upper left free.
        let c = lines_chart(vec![vec![(0.0, 0.0), (1.0, 1.0)]]);
        assert_eq!(
            best_corner(&c, &(0.0..1.0), 0.0..1.0),
            (LegendAt::UpperLeft, 0.0..1.0)
        );
        // A falling one leaves the upper right free.
        let c = lines_chart(vec![vec![(0.0, 1.0), (1.0, 0.0)]]);
        assert_eq!(
            best_corner(&c, &(0.0..1.0), 0.0..1.0).0,
            LegendAt::UpperRight
        );
        // Flat lines along the top and the bottom cover every corner: the range is raised.
        let c = lines_chart(vec![
            vec![(0.0, 1.0), (1.0, 1.0)],
            vec![(0.0, 0.0), (1.0, 0.0)],
        ]);
        let (at, yr) = best_corner(&c, &(0.0..1.0), 0.0..1.0);
        assert_eq!(at, LegendAt::UpperLeft);
        assert!(yr.start == 0.0 && yr.end > 1.2, "{yr:?}");
        assert!(render_svg(&Figure::Chart(c)).unwrap().contains("curve 1"));
    }
}
