//! Turns saved results into figures: which values go on which axis, with which label and unit.
//! Drawing is [`super::plots`]' job.
//!
//! The figures of one call describe runs of one pattern: a latency and a throughput are not
//! put on the same axis.
//!
//! A file per figure family: line charts against the swept parameter (`sweep`), latency
//! distributions of one point (`distribution`), heatmaps of two swept parameters (`heatmap`)
//! and time series of interval reports (`intervals`), the QPS-against-latency curve of open-loop runs (`qps`), and the stacked stages of
//! `--path-timing` (`path`). What they share: how a run is named
//! (`run`), the swept parameters and the curves they split a run into (`param`), curves and
//! axes (`curves`), and picking and naming a point (`points`).

mod curves;
mod distribution;
mod heatmap;
mod intervals;
mod param;
pub(crate) mod path;
mod points;
mod qps;
mod run;
mod sweep;

pub use curves::invalid_points;
pub use distribution::{distribution, distribution_left_out, DistributionKind};
pub use heatmap::{heatmaps, MAX_HEATMAPS};
pub use intervals::{intervals, points_with_intervals, IntervalKind};
pub use param::{x_param, Param};
pub use path::{path, path_points};
pub use points::{describe_point, point_of, short_point};
pub use qps::qps;
pub use run::Run;
pub use sweep::{latency, signature, throughput};
