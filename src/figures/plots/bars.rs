//! A grouped bar chart drawn: a group per value, a bar per series, with their error bars.
//!
//! A bar that is not a valid measurement is hatched grey, a flagged one outlined.

use std::ops::Range;

use anyhow::{bail, Result};
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use super::figure::Bars;
use super::numbers::fmt_num;
use super::style::{hatch_lines, outline, series_colour, title_size, FONT, HATCH, INVALID_FILL};
use super::svg::Area;

/// Bars' value range: from 0 (or the lowest negative value) to the highest bar or error bar;
/// stacked, to the highest sum of a group's parts (and down to its lowest negative sum).
fn bars_range(b: &Bars) -> Option<Range<f64>> {
    let values: Vec<f64> = if b.stacked {
        (0..b.groups.len())
            .flat_map(|g| {
                let parts = b
                    .series
                    .iter()
                    .filter_map(|s| s.bars.get(g).and_then(Option::as_ref))
                    .map(|bar| bar.value)
                    .filter(|v| v.is_finite());
                let up: f64 = parts.clone().filter(|v| *v > 0.0).sum();
                let down: f64 = parts.filter(|v| *v < 0.0).sum();
                [up, down]
            })
            .collect()
    } else {
        b.series
            .iter()
            .flat_map(|s| s.bars.iter().flatten())
            .flat_map(|bar| {
                let (l, h) = bar.ci.unwrap_or((bar.value, bar.value));
                [bar.value, l, h]
            })
            .filter(|v| v.is_finite())
            .collect()
    };
    if b.series.iter().all(|s| s.bars.iter().all(Option::is_none)) {
        return None;
    }
    let lo = values.iter().copied().reduce(f64::min)?.min(0.0);
    let hi = values.iter().copied().reduce(f64::max)?.max(0.0);
    let hi = if hi > lo { hi } else { lo + 1.0 };
    // Room above the highest bar for the legend in the upper right: about a 14th of the
    // height per entry. Stacked bars have their legend beside them (see `x_span`).
    let legend = if b.stacked {
        0.05
    } else {
        0.1 + 0.075 * b.series.len() as f64
    };
    Some(lo..hi + (hi - lo) * legend)
}

/// Where each bar of series `k` is drawn: per group, its left and right edge and its two
/// ends. Side by side, each group uses 80% of its width; stacked, a part starts where the
/// parts before it in the group ended (positive parts upwards, negative ones downwards).
fn bar_rects(b: &Bars, base: f64) -> Vec<Vec<Option<[f64; 4]>>> {
    let n = b.series.len().max(1) as f64;
    let width = 0.8 / n;
    let mut up = vec![0.0; b.groups.len()];
    let mut down = vec![0.0; b.groups.len()];
    b.series
        .iter()
        .enumerate()
        .map(|(k, s)| {
            s.bars
                .iter()
                .enumerate()
                .map(|(g, bar)| {
                    let bar = bar.as_ref().filter(|bar| bar.value.is_finite())?;
                    if !b.stacked {
                        let left = g as f64 + 0.1 + width * k as f64;
                        return Some([left, left + width * 0.92, base, bar.value]);
                    }
                    let (at, end) = match (up.get_mut(g), down.get_mut(g)) {
                        (Some(u), Some(d)) => {
                            let cum = if bar.value >= 0.0 { u } else { d };
                            let at = *cum;
                            *cum += bar.value;
                            (at, *cum)
                        }
                        _ => return None,
                    };
                    Some([g as f64 + 0.1, g as f64 + 0.9, at, end])
                })
                .collect()
        })
        .collect()
}

/// The x range the groups are drawn in: one unit a group; stacked bars leave a third of
/// the width on the right for their legend, which as tall as the parts are many would
/// otherwise cover the highest bars.
fn x_span(b: &Bars) -> f64 {
    let groups = b.groups.len().max(1) as f64;
    if b.stacked {
        groups * 1.5
    } else {
        groups
    }
}

/// Draws `b` on `root`; an error without one bar.
pub(super) fn draw_bars(root: &Area, b: &Bars) -> Result<()> {
    let Some(yr) = bars_range(b) else {
        bail!("nothing to plot in '{}'", b.title);
    };
    let groups = b.groups.len().max(1);
    let mut chart = ChartBuilder::on(root)
        .caption(&b.title, (FONT, title_size(&b.title)))
        .margin(14)
        .x_label_area_size(58)
        .y_label_area_size(88)
        .build_cartesian_2d(0f64..x_span(b), yr.clone())?;
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
    let base = if yr.start < 0.0 { 0.0 } else { yr.start };
    let rects = bar_rects(b, base);
    let mut drawn: Vec<(&super::figure::BarSeries, &Vec<Option<[f64; 4]>>)> =
        b.series.iter().zip(&rects).collect();
    if b.stacked {
        // The legend lists the parts top down, as the stack shows them.
        drawn.reverse();
    }
    for (s, rects) in drawn {
        let col = series_colour(s.colour, b.sequential_colours);
        let anno = chart.draw_series(s.bars.iter().zip(rects).filter_map(|(bar, r)| {
            let (bar, r) = (bar.as_ref()?, r.as_ref()?);
            let fill = if bar.invalid { INVALID_FILL } else { col };
            Some(Rectangle::new([(r[0], r[2]), (r[1], r[3])], fill.filled()))
        }))?;
        anno.label(s.label.as_str())
            .legend(move |(x, y)| Rectangle::new([(x, y - 6), (x + 22, y + 6)], col.filled()));
        for (bar, r) in s.bars.iter().zip(rects) {
            let (Some(bar), Some(r)) = (bar, r) else {
                continue;
            };
            let (a, z) = (
                chart.backend_coord(&(r[0], r[3])),
                chart.backend_coord(&(r[1], r[2])),
            );
            let (top, bottom) = (a.1.min(z.1), a.1.max(z.1));
            if bar.invalid {
                for [s, e] in hatch_lines(a.0, top, z.0, bottom) {
                    root.draw(&PathElement::new(vec![s, e], HATCH.stroke_width(1)))?;
                }
            }
            if b.stacked && !bar.outlined {
                // A thin white edge between parts whose colours lie close on the scale.
                outline(root, (a.0, top), (z.0, bottom), WHITE, 1)?;
            }
            if bar.outlined {
                // Black: vermilion is also a bar colour.
                outline(root, (a.0 + 1, top + 1), (z.0 - 1, bottom - 1), BLACK, 3)?;
            }
            let ci = bar
                .ci
                .filter(|(l, h)| !b.stacked && l.is_finite() && h.is_finite());
            if let Some((l, h)) = ci {
                let x = (r[0] + r[1]) / 2.0;
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
    use super::super::figure::{Bar, BarSeries};
    use super::*;

    fn bar(value: f64) -> Option<Bar> {
        Some(Bar {
            value,
            ci: None,
            invalid: false,
            outlined: false,
        })
    }

    /// Stacked, each part starts where the group's parts before it ended (a missing part
    /// takes no room) and the range reaches the highest sum; side by side, each bar its own.
    #[test]
    fn stacked_parts_start_where_the_parts_before_them_end() {
        let mut b = Bars {
            title: "t".into(),
            x_label: "x".into(),
            y_label: "y".into(),
            groups: vec!["a".into(), "b".into()],
            series: vec![
                BarSeries {
                    label: "first".into(),
                    colour: 0,
                    bars: vec![bar(2.0), None],
                },
                BarSeries {
                    label: "second".into(),
                    colour: 1,
                    bars: vec![bar(3.0), bar(4.0)],
                },
            ],
            sequential_colours: None,
            stacked: true,
        };
        let r = bar_rects(&b, 0.0);
        assert_eq!(r[0], [Some([0.1, 0.9, 0.0, 2.0]), None]);
        assert_eq!(
            r[1],
            [Some([0.1, 0.9, 2.0, 5.0]), Some([1.1, 1.9, 0.0, 4.0])]
        );
        let range = bars_range(&b).unwrap();
        assert_eq!((range.start, range.end), (0.0, 5.0 * 1.05));
        assert!(
            super::super::render_svg(&super::super::Figure::Bars(b.clone()))
                .unwrap()
                .contains("second")
        );
        b.stacked = false;
        let r = bar_rects(&b, 0.0);
        assert_eq!(r[1][1], Some([1.5, 1.5 + 0.4 * 0.92, 0.0, 4.0]));
    }
}
