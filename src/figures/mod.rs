//! Figures and pages drawn from result documents: [`series`] turns runs into plottable data,
//! which [`plots`] draws as SVG (and [`png`] rasterises) and [`html_report`] assembles into
//! the one HTML file of `wirebench report`; the figures of `run --plot` under load or
//! competition ([`load_figures`]), of a mesh ([`mesh_figures`]) and of a segment trace
//! ([`trace_figures`]). A study's matrix of runs comes as a [`grid::StudyGrid`], which
//! [`study_figures`] turns into heatmaps, curves and bars and [`study_page`] into one HTML
//! page or figure files.

pub mod grid;
pub mod html_report;
pub mod load_figures;
pub mod mesh_figures;
pub mod plots;
pub mod png;
pub mod series;
pub mod study_figures;
pub mod study_page;
pub mod trace_figures;
