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
