//! Statistics for a measuring instrument: exact streaming moments, latency
//! percentiles, Student-t confidence intervals, ping-pong sweep metrics and the accounting of
//! sequence-numbered packets.
//!
//! Everything here returns `Option`/`Result` instead of panicking, because a
//! benchmark must never die while it is reporting what it measured.

pub mod anomaly;
pub mod between_runs;
pub mod ci;
pub mod fairness;
pub mod latency;
pub mod median;
pub mod overhead;
pub mod physics;
pub mod responsiveness;
pub mod seq;
pub mod sweep;
#[cfg(test)]
pub(crate) mod testutil;
pub mod validity;
pub mod welch;

pub use ci::{parse_confidence, student_t_half_width, MeanCi};
pub use latency::{LatencyRecorder, LatencySummary};
pub use median::median_interval;
pub use seq::SeqTracker;
pub use sweep::{HockneyFit, SweepMetrics, SweepPoint};
pub use validity::Validity;
