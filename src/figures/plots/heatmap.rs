//! A heatmap drawn: cells coloured along viridis with their values, and the colour bar.
//!
//! A cell that is not a valid measurement is hatched grey, a flagged one outlined.

use anyhow::{bail, Result};
use plotters::coord::ranged1d::{AsRangedCoord, SegmentValue, ValueFormatter};
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use super::axes::fmt_log_tick;
use super::figure::{Heatmap, Ticks};
use super::numbers::fmt_num;
use super::style::{
    hatch_lines, outline, title_size, viridis, FONT, HATCH, INVALID_FILL, OUTLINE, WIDTH,
};
use super::svg::Area;

/// The cells' text size: smaller when many columns or long texts leave little room.
fn cell_font(cell_px: i32, longest: usize) -> u32 {
    let fit = f64::from(cell_px) / (longest.max(1) as f64 * 0.62) * 1.24;
    fit.clamp(10.0, 17.0) as u32
}

/// Draws `h` on `root`, the colour bar at its right; an error without one valid value.
pub(super) fn draw_heatmap(root: &Area, h: &Heatmap) -> Result<()> {
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

#[cfg(test)]
mod tests {
    use super::super::figure::{Figure, HeatCell};
    use super::super::svg::render_svg;
    use super::*;

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
}
