//! Draws figures as SVG with plotters: line charts with optional log axes, shaded bands and
//! reference lines, and heatmaps. A figure is described as data ([`Chart`], [`Heatmap`]) by
//! [`super::series`], so what is plotted can be tested apart from how it is drawn.

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
}

/// A value for every combination of two swept parameters.
#[derive(Debug, Clone, PartialEq)]
pub struct Heatmap {
    pub title: String,
    pub x_label: String,
    pub y_label: String,
    /// Column and row parameter values, in bytes (0 = autotuning), increasing.
    pub x_values: Vec<u64>,
    pub y_values: Vec<u64>,
    /// (column, row, value); a missing combination stays blank.
    pub cells: Vec<(usize, usize, f64)>,
    /// What the colour means, with its unit.
    pub value_label: String,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Figure {
    Chart(Chart),
    Heatmap(Heatmap),
}

impl Figure {
    pub fn title(&self) -> &str {
        match self {
            Figure::Chart(c) => &c.title,
            Figure::Heatmap(h) => &h.title,
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
    ys.extend(c.hlines.iter().map(|h| h.y));
    let (Some(xr), Some(yr)) = (range_of(&xs, &c.x), range_of(&ys, &c.y)) else {
        bail!("nothing to plot in '{}'", c.title);
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
        let fill = colour(b.colour).mix(0.18);
        chart
            .draw_series(std::iter::once(Polygon::new(poly, fill.filled())))?
            .label(b.label.as_str())
            .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 22, y + 5)], fill.filled()));
    }
    let x_range = chart.as_coord_spec().get_x_range();
    for h in &c.hlines {
        let col = colour(h.colour);
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
        let col = colour(l.colour);
        let style = col.stroke_width(2);
        let (dashed, markers) = (l.dashed, l.markers);
        let anno = if dashed {
            chart.draw_series(DashedLineSeries::new(pts.clone(), 8, 5, style))?
        } else {
            chart.draw_series(LineSeries::new(pts.clone(), style))?
        };
        anno.label(l.label.as_str())
            .legend(move |p| legend_mark!(p, col, dashed, markers));
        if markers {
            chart.draw_series(pts.iter().map(|&p| Circle::new(p, 3, col.filled())))?;
        }
    }
    chart
        .configure_series_labels()
        .position(match c.legend {
            LegendAt::UpperLeft => SeriesLabelPosition::UpperLeft,
            LegendAt::UpperRight => SeriesLabelPosition::UpperRight,
            LegendAt::LowerRight => SeriesLabelPosition::LowerRight,
        })
        .margin(10)
        .legend_area_size(30)
        .label_font((FONT, 17))
        .background_style(WHITE.mix(0.9))
        .border_style(RGBColor(160, 160, 160))
        .draw()?;
    Ok(())
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

fn draw_heatmap(root: &Area, h: &Heatmap) -> Result<()> {
    let values: Vec<f64> = h
        .cells
        .iter()
        .map(|c| c.2)
        .filter(|v| v.is_finite())
        .collect();
    let (Some(lo), Some(hi)) = (
        values.iter().copied().reduce(f64::min),
        values.iter().copied().reduce(f64::max),
    ) else {
        bail!("nothing to plot in '{}'", h.title);
    };
    let span = if hi > lo { hi - lo } else { 1.0 };
    let (main, bar) = root.split_horizontally(WIDTH - 130);
    let (nx, ny) = (h.x_values.len() as i32, h.y_values.len() as i32);
    let mut chart = ChartBuilder::on(&main)
        .caption(&h.title, (FONT, title_size(&h.title)))
        .margin(14)
        .x_label_area_size(58)
        .y_label_area_size(88)
        // plotters' integer ranges include their end: 0..n-1 has n segments.
        .build_cartesian_2d(
            (0..(nx - 1).max(0)).into_segmented(),
            (0..(ny - 1).max(0)).into_segmented(),
        )?;
    let label = |values: &[u64], v: &SegmentValue<i32>| match v {
        SegmentValue::CenterOf(i) => values
            .get(*i as usize)
            .map(|b| fmt_bytes_param(*b))
            .unwrap_or_default(),
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
        .label_style((FONT, 17))
        .axis_desc_style((FONT, 19))
        .draw()?;
    let cell_text = (FONT, 16)
        .into_font()
        .into_text_style(&main)
        .pos(Pos::new(HPos::Center, VPos::Center));
    for &(i, j, v) in &h.cells {
        if !v.is_finite() {
            continue;
        }
        let t = (v - lo) / span;
        let (i, j) = (i as i32, j as i32);
        chart.draw_series(std::iter::once(Rectangle::new(
            [
                (SegmentValue::Exact(i), SegmentValue::Exact(j)),
                (SegmentValue::Exact(i + 1), SegmentValue::Exact(j + 1)),
            ],
            viridis(t).filled(),
        )))?;
        let ink = if t > 0.6 { BLACK } else { WHITE };
        chart.draw_series(std::iter::once(Text::new(
            fmt_num(v),
            (SegmentValue::CenterOf(i), SegmentValue::CenterOf(j)),
            cell_text.color(&ink),
        )))?;
    }

    // The colour bar: the scale of the cells, with the unit as its title.
    let mut scale = ChartBuilder::on(&bar)
        .margin_top(54)
        .margin_bottom(64)
        .margin_right(8)
        .y_label_area_size(70)
        .build_cartesian_2d(0f64..1f64, lo..(if hi > lo { hi } else { lo + 1.0 }))?;
    let v_fmt = |v: &f64| fmt_num(*v);
    scale
        .configure_mesh()
        .disable_mesh()
        .disable_x_axis()
        .y_labels(6)
        .y_label_formatter(&v_fmt)
        .y_desc(h.value_label.as_str())
        .label_style((FONT, 16))
        .axis_desc_style((FONT, 17))
        .draw()?;
    const STEPS: usize = 64;
    scale.draw_series((0..STEPS).map(|k| {
        let a = lo + span * k as f64 / STEPS as f64;
        let b = lo + span * (k + 1) as f64 / STEPS as f64;
        Rectangle::new(
            [(0.0, a), (1.0, b)],
            viridis(k as f64 / (STEPS - 1) as f64).filled(),
        )
    }))?;
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
        };
        assert!(render_svg(&Figure::Chart(chart)).is_err());
    }

    #[test]
    fn a_heatmap_renders_cells_and_scale() {
        let h = Heatmap {
            title: "buffers".into(),
            x_label: "send buffer (bytes)".into(),
            y_label: "receive buffer (bytes)".into(),
            x_values: vec![0, 65536],
            y_values: vec![1024, 4096],
            cells: vec![(0, 0, 1.0), (1, 0, 2.0), (0, 1, 3.0), (1, 1, 4.5)],
            value_label: "throughput (Mbit/s)".into(),
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
}
