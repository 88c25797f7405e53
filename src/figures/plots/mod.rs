//! Figures drawn as SVG with plotters: line charts, heatmaps and grouped bar charts.
//!
//! Line charts have optional log axes, shaded bands, error bars and reference lines; heatmaps
//! a colour bar. A figure is described as data ([`Chart`], [`Heatmap`], [`Bars`]) by
//! [`super::series`] and [`super::study_figures`], so what is plotted can be tested apart from
//! how it is drawn.

mod axes;
mod bars;
mod figure;
mod heatmap;
mod legend;
#[cfg(test)]
mod legend_strokes;
mod line_chart;
mod numbers;
mod stroke;
mod style;
mod svg;

pub use axes::{auto_scale, LOG_RATIO};
pub use figure::nines_x;
pub use figure::{
    Axis, Band, Bar, BarSeries, Bars, Chart, ErrorBars, Figure, HLine, HeatCell, Heatmap, LegendAt,
    Line, Scale, StyleKey, Ticks,
};
pub use numbers::{fmt_bytes_param, fmt_num};
pub use style::{HEIGHT, WIDTH};
pub use svg::render_svg;
