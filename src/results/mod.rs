//! Results kept after a run: an SQLite history of every run, HTML reports and single figures
//! with plots, and honest comparisons of two runs.
//!
//! [`db`] stores whole result documents ([`crate::report::model::RunReport`]) with a few
//! indexed columns; [`save`] writes a run into it while it is measured (and into a
//! [`recovery`] file when the database cannot take it); [`history`] lists,
//! shows, exports and imports runs; [`series`] turns results into plottable data, which
//! [`plots`] draws as SVG (and [`png`] rasterises) and [`report`] assembles into one HTML
//! file; [`compare`] matches the points of two runs and tests each difference ([`welch`]).
//! A study's matrix of runs comes as a [`grid::StudyGrid`], which [`study_figures`] turns
//! into heatmaps, curves and bars and [`study_page`] into one HTML page or figure files.

pub mod between_runs;
pub mod compare;
pub mod db;
pub mod distribution;
pub mod grid;
pub mod history;
pub mod load_figures;
pub mod mesh_figures;
pub mod migrations;
pub mod plots;
pub mod png;
pub mod recovery;
pub mod report;
pub mod save;
pub mod series;
pub mod study_figures;
pub mod study_page;
pub mod summary;
pub mod trace_figures;
pub mod welch;
