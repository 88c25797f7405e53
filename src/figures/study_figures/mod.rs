//! A study grid's figures as data, and which of them a grid gets by itself.
//!
//! Heatmaps of two axes, curves against a numeric axis, bars per group, and the counter
//! deltas per point. Drawing is [`super::plots`]' job, the page [`super::study_page`]'s.
//!
//! Axes a figure does not show are held at one value each: a figure per combination of
//! them, never an average, because the points of two paths or two congestion controls are
//! different conditions, not repetitions.

mod automatic;
mod bars;
mod counters;
mod curves;
mod heatmap;
mod scales;

pub use automatic::{automatic, FigureKind, StudyFigure, MAX_COMBINATIONS};
pub use bars::bars;
pub use counters::{counter_table, CounterTable};
pub use curves::{curves, slice_curves, CiStyle, CurveOptions};
pub use heatmap::heatmap;
pub use scales::{log_wanted, LogChoice, BYTES_LOG_RATIO, DIGITS, X_LOG_RATIO, Y_LOG_RATIO};

#[cfg(test)]
pub(crate) mod tests {
    use crate::figures::grid::{CellFigure, GridAxis, GridCell, StudyGrid};

    /// Two categorical axes, congestion control by path: one figure with a receiver side, the
    /// last point of the second congestion control not a valid measurement.
    pub(crate) fn cc_path_study() -> StudyGrid {
        let mut cells = Vec::new();
        for cc in 0..2 {
            for path in 0..3 {
                let mean = 1e8 * (1 + cc + 2 * path) as f64;
                cells.push(GridCell {
                    coords: vec![cc, path],
                    figures: vec![CellFigure {
                        name: "throughput".into(),
                        side: Some("receiver".into()),
                        unit: "bit/s".into(),
                        mean,
                        ci: Some((mean - 1e7, mean + 1e7)),
                        samples: 5,
                        valid: !(cc == 1 && path == 2),
                    }],
                    counters: vec![("retransmits".into(), (cc * path) as i64)],
                    anomaly: None,
                });
            }
        }
        StudyGrid {
            title: "cc by path".into(),
            axes: vec![
                GridAxis::categorical("cc", &["cubic", "bbr"]),
                GridAxis::categorical("path", &["lan", "wan-50ms", "lossy"]),
            ],
            cells,
        }
    }
}
