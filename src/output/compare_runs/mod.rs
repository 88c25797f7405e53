//! `wirebench compare A B`: the change of each figure two runs have in common, and its verdict.
//!
//! The points two runs have in common, the change of each figure in percent, and whether it is
//! a change at all: judged between the RUNS of each side (`run --repeat N` keeps every run's
//! headline), with a confidence interval of B / A against an equivalence margin
//! ([`between_runs`](crate::stats::between_runs)). With one run on a side nothing can tell a
//! change from the difference between two runs of the same command, and the verdict says so.
//!
//! A file per job: what a comparison holds (`change`), which figures of a point are compared
//! (`figures`), the settings two runs differ in (`settings`), pairing the points two runs have
//! in common (`pairing`), testing and judging each figure of a pair (`judge`), the
//! `--fail-if-worse` gate (`gate`) and the table it prints as (`render`).

mod change;
mod figures;
mod gate;
mod judge;
mod pairing;
mod render;
mod settings;

pub use change::{Change, Comparison, Test, Verdict};
pub use gate::{cannot_tell, failures};
pub use pairing::compare;
pub use render::{format, render};
pub use settings::setting_differences;
