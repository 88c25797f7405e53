//! A line chart drawn: curves, bands, error bars, reference lines and invalid points.
//!
//! Each on linear or log axes, with the legend's entries; where the legend goes when the chart
//! leaves it open is legend.rs's job.

use anyhow::{bail, Result};
use plotters::coord::ranged1d::{AsRangedCoord, ValueFormatter};
use plotters::prelude::*;

use super::axes::{fmt_log_tick, fmt_tick, log_base, range_of, usable};
use super::figure::{Axis, Chart, LegendAt, Line, Scale, Ticks};
use super::legend::best_corner;
use super::stroke::{swatch, Dash, Stroke, SWATCH, SWATCH_AREA};
use super::style::{series_colour, title_size, FONT};
use super::svg::Area;

/// Draws `c` on `root`; an error when no point of it has a place on its axes.
pub(super) fn draw_chart(root: &Area, c: &Chart) -> Result<()> {
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
    for &(x, y) in c.invalid.iter().chain(&c.regressions) {
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

/// The red of a regression's marker: no palette colour, so that a page (or a test) tells
/// the marks apart from the curves' points.
pub const REGRESSION_INK: RGBColor = RGBColor(200, 0, 0);

/// The grey of a style key's swatch: it explains a dash pattern, whatever the colour.
const KEY_INK: RGBColor = RGBColor(90, 90, 90);

/// How a curve is drawn, for its line, its markers and its legend swatch alike.
pub(super) fn line_stroke(l: &Line, sequential: Option<usize>) -> Stroke {
    Stroke {
        colour: series_colour(l.colour, sequential),
        width: 2,
        dash: if l.dashed { Dash::Dashed } else { Dash::Solid },
        marker: l.markers,
    }
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
        // Clock times are wider than numbers: fewer of them keep apart.
        .x_labels(if matches!(c.x.ticks, Ticks::Utc { .. }) {
            6
        } else {
            10
        })
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
            anno.label(b.label.as_str()).legend(move |(x, y)| {
                Rectangle::new([(x, y - 5), (x + SWATCH, y + 5)], fill.filled())
            });
        }
    }
    let x_range = chart.as_coord_spec().get_x_range();
    for h in &c.hlines {
        let stroke = Stroke {
            colour: series_colour(h.colour, c.sequential_colours),
            width: 2,
            dash: Dash::Dotted,
            marker: false,
        };
        chart
            .draw_series(LineSeries::new(
                vec![(x_range.start, h.y), (x_range.end, h.y)],
                stroke.line_style(),
            ))?
            .label(h.label.as_str())
            .legend(move |p| swatch!(p, stroke));
    }
    for l in &c.lines {
        let pts: Vec<(f64, f64)> = l.points.iter().copied().filter(keep).collect();
        if pts.is_empty() {
            continue;
        }
        let stroke = line_stroke(l, c.sequential_colours);
        let anno = chart.draw_series(LineSeries::new(pts.clone(), stroke.line_style()))?;
        // A curve without a name is explained by the style keys and the other curves.
        if !l.label.is_empty() {
            anno.label(l.label.as_str())
                .legend(move |p| swatch!(p, stroke));
        }
        if stroke.marker {
            chart.draw_series(
                pts.iter()
                    .map(|&p| Circle::new(p, 3, stroke.marker_style())),
            )?;
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
            .legend(move |(x, y)| Cross::new((x + SWATCH / 2, y), 5, grey.stroke_width(2)));
    }
    if !c.regressions.is_empty() {
        let pts: Vec<(f64, f64)> = c.regressions.iter().copied().filter(keep).collect();
        chart
            .draw_series(
                pts.iter()
                    .map(|&p| TriangleMarker::new(p, 7, REGRESSION_INK.filled())),
            )?
            .label("regression found (listed below)")
            .legend(move |(x, y)| {
                TriangleMarker::new((x + SWATCH / 2, y), 7, REGRESSION_INK.filled())
            });
    }
    for k in &c.style_keys {
        let stroke = Stroke {
            colour: KEY_INK,
            width: 2,
            dash: if k.dashed { Dash::Dashed } else { Dash::Solid },
            marker: false,
        };
        chart
            .draw_series(std::iter::empty::<Circle<(f64, f64), i32>>())?
            .label(k.label.as_str())
            .legend(move |p| swatch!(p, stroke));
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
        .legend_area_size(SWATCH_AREA)
        .label_font((FONT, 17))
        .background_style(WHITE.mix(0.9))
        .border_style(RGBColor(160, 160, 160))
        .draw()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::super::figure::{Band, Figure, HLine, Ticks};
    use super::super::svg::render_svg;
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
            regressions: vec![],
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

    /// The labels of a rendered chart's texts, in order.
    fn texts(svg: &str) -> Vec<&str> {
        let lines: Vec<&str> = svg.lines().collect();
        lines
            .windows(2)
            .filter(|w| w[0].starts_with("<text"))
            .map(|w| w[1])
            .collect()
    }

    #[test]
    fn a_log_axis_over_decades_is_labelled_at_decades() {
        let points: Vec<(f64, f64)> = (0..=6)
            .map(|k| (16384.0 * 2f64.powi(k), 0.5 * 10f64.powf(f64::from(k) / 2.0)))
            .collect();
        let ys: Vec<f64> = points.iter().map(|p| p.1).collect();
        let mut y = axis("throughput (Mbit/s)", Scale::Linear, Ticks::Number);
        y.scale = super::super::axes::auto_scale(ys, true);
        assert_eq!(y.scale, Scale::Log);
        let chart = Chart {
            title: "Throughput against send buffer".into(),
            x: axis("send buffer (bytes)", Scale::Log, Ticks::Bytes),
            y,
            bands: vec![],
            lines: vec![Line {
                label: "receiver".into(),
                colour: 0,
                dashed: false,
                markers: true,
                points,
            }],
            hlines: vec![],
            legend: LegendAt::UpperLeft,
            error_bars: vec![],
            invalid: vec![],
            regressions: vec![],
            style_keys: vec![],
            sequential_colours: None,
        };
        let svg = render_svg(&Figure::Chart(chart)).unwrap();
        let labels = texts(&svg);
        for decade in ["1", "10", "100"] {
            assert!(labels.contains(&decade), "no tick {decade}: {labels:?}");
        }
        // Only 1, 2 and 5 times a power of ten are labelled.
        for crowded in ["3", "30", "40", "300"] {
            assert!(!labels.contains(&crowded), "tick {crowded}: {labels:?}");
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
            regressions: vec![],
            style_keys: vec![],
            sequential_colours: None,
        };
        assert!(render_svg(&Figure::Chart(chart)).is_err());
    }
}
