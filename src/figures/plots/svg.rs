//! The SVG backend: a figure drawn into a standalone SVG document.

use anyhow::Result;
use plotters::coord::Shift;
use plotters::prelude::*;

use super::bars::draw_bars;
use super::figure::Figure;
use super::heatmap::draw_heatmap;
use super::line_chart::draw_chart;
use super::stroke::dash_patterns;
use super::style::{HEIGHT, WIDTH};

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
    Ok(dash_patterns(svg))
}

/// The drawing area every figure is drawn on.
pub(super) type Area<'a> = DrawingArea<SVGBackend<'a>, Shift>;
