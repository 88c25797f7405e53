//! The look every figure shares: size, font, colours, and the marks of invalid or flagged values.

use anyhow::Result;
use plotters::prelude::*;

use super::svg::Area;

/// Pixel size of every figure: wide enough for a legend beside the curves, and the aspect of
/// a figure in a two-column paper.
pub const WIDTH: u32 = 860;
pub const HEIGHT: u32 = 500;

/// plotters writes SVG text at 1/1.24 of the size asked for: the sizes below come out
/// between 13 and 19 px.
pub(super) const FONT: &str = "sans-serif";

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
pub(super) fn series_colour(i: usize, sequential: Option<usize>) -> RGBColor {
    match sequential {
        Some(n) if n > 1 => viridis(i as f64 / (n - 1) as f64 * 0.85),
        _ => colour(i),
    }
}

/// A title's font size: smaller for long titles, so that they fit the figure's width.
pub(super) fn title_size(title: &str) -> u32 {
    match title.chars().count() {
        0..=56 => 24,
        57..=70 => 21,
        _ => 18,
    }
}

/// Viridis at nine stops, interpolated: perceptually uniform and readable in greyscale.
pub(super) fn viridis(t: f64) -> RGBColor {
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
pub(super) const OUTLINE: RGBColor = RGBColor(213, 94, 0);
pub(super) const INVALID_FILL: RGBColor = RGBColor(225, 225, 225);
pub(super) const HATCH: RGBColor = RGBColor(140, 140, 140);

/// A rectangle's outline in pixels. A path, because plotters' SVG rectangles drop the
/// stroke width.
pub(super) fn outline(
    root: &Area,
    a: (i32, i32),
    b: (i32, i32),
    ink: RGBColor,
    width: u32,
) -> Result<()> {
    let corners = vec![(a.0, a.1), (b.0, a.1), (b.0, b.1), (a.0, b.1), (a.0, a.1)];
    root.draw(&PathElement::new(corners, ink.stroke_width(width)))?;
    Ok(())
}

/// Diagonal hatching of a pixel rectangle: lines x + y = d every 7 px, cut to the rectangle.
pub(super) fn hatch_lines(x0: i32, y0: i32, x1: i32, y1: i32) -> Vec<[(i32, i32); 2]> {
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
