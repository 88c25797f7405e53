//! How a study figure scales and labels its axes and values.
//!
//! The unit of its values, log or linear axes, axis titles with units, colours for many series,
//! and the held axes in its title.

use crate::figures::grid::{FigureKey, GridAxis, GridCell, StudyGrid};
use crate::figures::plots::Scale;
use crate::units::DisplayUnit;

/// Significant digits of a value written in a heatmap cell or a table.
pub const DIGITS: u32 = 3;

/// A curve's x axis is logarithmic when its values span more than this factor: study
/// sweeps of sizes, windows and delays are geometric.
pub const X_LOG_RATIO: f64 = 10.0;

/// The same for an axis of bytes, as the run report draws size and buffer sweeps: from a
/// factor of 4 on (1K to 8K reads better on powers of two).
pub const BYTES_LOG_RATIO: f64 = 3.5;

/// A value axis is logarithmic when its values span more than two decades.
pub const Y_LOG_RATIO: f64 = 100.0;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum LogChoice {
    /// Log when the values span more than the axis's ratio ([`X_LOG_RATIO`], [`Y_LOG_RATIO`]).
    #[default]
    Auto,
    Linear,
    Log,
}

/// Log scale when every value is positive and they span more than `ratio`.
pub fn log_wanted(values: &[f64], ratio: f64) -> bool {
    let vs: Vec<f64> = values.iter().copied().filter(|v| v.is_finite()).collect();
    let lo = vs.iter().copied().reduce(f64::min);
    let hi = vs.iter().copied().reduce(f64::max);
    match (lo, hi) {
        (Some(lo), Some(hi)) => lo > 0.0 && hi / lo > ratio,
        _ => false,
    }
}

/// The scale of an axis: as chosen, or log where [`log_wanted`] says so.
pub(super) fn scale(choice: LogChoice, values: &[f64], ratio: f64) -> Scale {
    match choice {
        LogChoice::Log => Scale::Log,
        LogChoice::Linear => Scale::Linear,
        LogChoice::Auto if log_wanted(values, ratio) => Scale::Log,
        LogChoice::Auto => Scale::Linear,
    }
}

/// An axis as a figure labels it: "window (bytes)", "rate (Mbit/s)", "cc".
pub(super) fn axis_title(axis: &GridAxis, unit: &DisplayUnit) -> String {
    if unit.name.is_empty() {
        axis.name.clone()
    } else {
        format!("{} ({})", axis.name, unit.name)
    }
}

/// The unit an axis's numbers are shown in, chosen from its largest value.
pub(super) fn axis_unit(axis: &GridAxis) -> DisplayUnit {
    let max = axis
        .values
        .iter()
        .filter_map(|v| v.number)
        .map(f64::abs)
        .fold(0.0, f64::max);
    DisplayUnit::for_values(&axis.unit, max)
}

/// Colours for `n` series: the palette's 7 distinct ones while they suffice, else ordered
/// colours along a sequential scale (a study axis's values are ordered).
pub(super) fn sequential(n: usize) -> Option<usize> {
    (n > 7).then_some(n)
}

/// The unit a figure is shown in over the cells given: chosen from the largest valid mean.
pub(super) fn figure_unit<'a>(
    names: impl Fn(&FigureKey) -> bool,
    cells: impl Iterator<Item = &'a GridCell>,
) -> Option<DisplayUnit> {
    let mut base: Option<String> = None;
    let mut max = 0.0f64;
    for c in cells {
        for f in &c.figures {
            let key = FigureKey {
                name: f.name.clone(),
                side: f.side.clone(),
            };
            if !names(&key) {
                continue;
            }
            base.get_or_insert_with(|| f.unit.clone());
            if f.valid && f.mean.is_finite() {
                max = max.max(f.mean.abs());
            }
        }
    }
    base.map(|b| crate::figures::measured_unit(&b, max))
}

/// A title with the held axes after it: "... (write_size 8K, path lan)".
pub(super) fn with_fixed(title: String, grid: &StudyGrid, fixed: &[(usize, usize)]) -> String {
    let f = grid.describe_fixed(fixed);
    if f.is_empty() {
        title
    } else {
        format!("{title} ({f})")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_log_decision_follows_the_span() {
        assert!(!log_wanted(&[1.0, 100.0], Y_LOG_RATIO));
        assert!(log_wanted(&[1.0, 100.1], Y_LOG_RATIO));
        assert!(
            !log_wanted(&[0.0, 1e6], Y_LOG_RATIO),
            "zero has no place on a log axis"
        );
        assert!(!log_wanted(&[f64::NAN], Y_LOG_RATIO));
        assert!(log_wanted(&[4096.0, 65536.0], X_LOG_RATIO));
        assert!(!log_wanted(&[1.0, 8.0], X_LOG_RATIO));
        assert_eq!(scale(LogChoice::Log, &[1.0, 2.0], Y_LOG_RATIO), Scale::Log);
        assert_eq!(
            scale(LogChoice::Linear, &[1.0, 1e9], Y_LOG_RATIO),
            Scale::Linear
        );
    }
}
