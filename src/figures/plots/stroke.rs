//! The one stroke a series is drawn with, which its line and its legend swatch both take, so
//! that a legend entry cannot differ from the curve it names.
//!
//! plotters draws only solid strokes, and its own dashed series as separate short paths that
//! no legend reproduces. A dashed stroke is therefore drawn as one path with an opacity no
//! other mark uses, which [`dash_patterns`] rewrites into an SVG `stroke-dasharray` once the
//! figure is drawn: the line and its swatch get the same pattern from the same value.

use plotters::prelude::*;

/// A line's dash pattern.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Dash {
    Solid,
    /// 8 px on, 5 px off: a second side or statistic of the same series (sender, median).
    Dashed,
    /// 3 px on, 4 px off: a reference line (the rate with an autotuned buffer).
    Dotted,
}

impl Dash {
    /// The opacity that marks the pattern in the SVG until [`dash_patterns`] rewrites it, and
    /// the SVG `stroke-dasharray`.
    fn marker(self) -> Option<(f64, &'static str)> {
        match self {
            Dash::Solid => None,
            Dash::Dashed => Some((0.99921, "8 5")),
            Dash::Dotted => Some((0.99931, "3 4")),
        }
    }
}

/// How a series is drawn: colour, width, dash pattern and whether its points have markers.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct Stroke {
    pub colour: RGBColor,
    pub width: u32,
    pub dash: Dash,
    pub marker: bool,
}

impl Stroke {
    /// The line's style for plotters, the dash pattern carried by the opacity.
    pub fn line_style(&self) -> ShapeStyle {
        let alpha = self.dash.marker().map_or(1.0, |m| m.0);
        self.colour.mix(alpha).stroke_width(self.width)
    }

    /// The marker drawn at each point (and in the middle of the swatch).
    pub fn marker_style(&self) -> ShapeStyle {
        self.colour.filled()
    }
}

/// Length of a legend swatch in pixels: two dashes and a gap of [`Dash::Dashed`] beside the
/// marker in its middle. The legend's text starts after [`SWATCH_AREA`].
pub(super) const SWATCH: i32 = 30;
pub(super) const SWATCH_AREA: u32 = 36;

/// A legend swatch: a line of the series' stroke and, when the series has markers, one in its
/// middle. A macro rather than a function: the element's type names the backend's lifetime.
macro_rules! swatch {
    ($at:expr, $stroke:expr) => {{
        let s: $crate::figures::plots::stroke::Stroke = $stroke;
        let marker = if s.marker {
            s.marker_style()
        } else {
            TRANSPARENT.filled()
        };
        EmptyElement::at($at)
            + PathElement::new(
                vec![(0, 0), ($crate::figures::plots::stroke::SWATCH, 0)],
                s.line_style(),
            )
            + Circle::new(($crate::figures::plots::stroke::SWATCH / 2, 0), 3, marker)
    }};
}
pub(super) use swatch;

/// Rewrites the opacities that mark dashed strokes into `stroke-dasharray`s.
pub(super) fn dash_patterns(svg: String) -> String {
    [Dash::Dashed, Dash::Dotted]
        .into_iter()
        .filter_map(Dash::marker)
        .fold(svg, |svg, (alpha, pattern)| {
            svg.replace(
                &format!("opacity=\"{alpha}\""),
                &format!("opacity=\"1\" stroke-dasharray=\"{pattern}\""),
            )
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dashed_strokes_become_dash_arrays() {
        let s = Stroke {
            colour: RGBColor(1, 2, 3),
            width: 2,
            dash: Dash::Dashed,
            marker: false,
        };
        let opacity = format!("opacity=\"{}\"", s.line_style().color.3);
        let svg = dash_patterns(format!("<polyline {opacity} stroke=\"#010203\"/>"));
        assert_eq!(
            svg,
            "<polyline opacity=\"1\" stroke-dasharray=\"8 5\" stroke=\"#010203\"/>"
        );
        let solid = Stroke {
            dash: Dash::Solid,
            ..s
        };
        assert_eq!(solid.line_style().color.3, 1.0);
    }
}
