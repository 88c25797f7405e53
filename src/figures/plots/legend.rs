//! Where a line chart's legend goes when it is asked for the best corner.
//!
//! The corner whose box hides the fewest drawn points, or, when each hides some, room made
//! above the data.

use std::ops::Range;

use super::axes::usable;
use super::figure::{Chart, LegendAt, Scale};
use super::style::{HEIGHT, WIDTH};

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
pub(super) fn best_corner(c: &Chart, xr: &Range<f64>, yr: Range<f64>) -> (LegendAt, Range<f64>) {
    let labels: Vec<&str> = c
        .lines
        .iter()
        .map(|l| l.label.as_str())
        .chain(c.bands.iter().map(|b| b.label.as_str()))
        .chain(c.hlines.iter().map(|h| h.label.as_str()))
        .chain(c.style_keys.iter().map(|k| k.label.as_str()))
        .chain((!c.invalid.is_empty()).then_some("not valid (listed apart)"))
        .chain((!c.regressions.is_empty()).then_some("regression found (listed below)"))
        .filter(|l| !l.is_empty())
        .collect();
    let longest = labels.iter().map(|l| l.chars().count()).max().unwrap_or(0) as f64;
    // Box and its 10 px margin, as fractions of the plotting area.
    let w = (68.0 + longest * 9.0) / PLOT_W;
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
    for p in &c.regressions {
        along(vec![*p]);
    }
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

#[cfg(test)]
mod tests {
    use super::super::figure::{Axis, Figure, Line, Ticks};
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
            regressions: vec![],
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
