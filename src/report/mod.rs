//! Output: the result model and its renderings (table, CSV, JSON).

pub mod columns;
pub mod compare;
pub mod csv;
pub mod fairness;
pub mod json;
pub mod load;
pub mod mesh;
pub mod model;
pub mod output;
#[cfg(test)]
mod rendering_tests;
pub mod schema;
pub mod span;
pub mod summarize;
pub mod table;
pub mod upgrade;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use crate::pattern::stream::IntervalEvent;
use crate::plan::RunPlan;
use model::{PointResult, RunReport};

pub use output::Output;

/// Prints interval reports from the thread that receives them.
pub type IntervalPrinter = Box<dyn FnMut(&IntervalEvent) -> anyhow::Result<()> + Send>;

/// Where results go as they are produced. Every method that writes returns the write's
/// failure (a full disk, a closed file); a closed stdout is not one (see [`Output`]).
pub trait Sink {
    /// Once the session is open and the server's environment is known.
    fn begin(&mut self, report: &RunReport, plan: &RunPlan) -> anyhow::Result<()>;
    /// After each point.
    fn point(&mut self, report: &RunReport, point: &PointResult) -> anyhow::Result<()>;
    /// At the end, complete or not.
    fn finish(&mut self, report: &RunReport) -> anyhow::Result<()>;
    /// Before `begin`, when the run is saved: its id in the results database, for outputs
    /// that name the run.
    fn saved_as(&mut self, _id: i64) {}
    fn wants_intervals(&self) -> bool {
        false
    }
    fn interval_printer(&self) -> IntervalPrinter {
        Box::new(|_| Ok(()))
    }
    /// A progress bar on stderr for sweeps; hidden when stderr is not a terminal.
    fn progress(&self, points: u64) -> ProgressBar {
        if points < 2 {
            return ProgressBar::hidden();
        }
        let bar = ProgressBar::with_draw_target(Some(points), ProgressDrawTarget::stderr());
        if let Ok(style) = ProgressStyle::with_template(
            "{bar:30} {pos}/{len} points  {elapsed} elapsed, ~{eta} left",
        ) {
            bar.set_style(style);
        }
        bar
    }
}

/// Says once on stderr that stdout is gone (a closed pipe): the streaming outputs go on with
/// the run and its saving instead of failing it.
pub(crate) fn stdout_closed() {
    static WARNED: std::sync::Once = std::sync::Once::new();
    WARNED.call_once(|| eprintln!("wirebench: error: stdout closed; the run goes on"));
}

/// Formats bits/s as Mbit/s (decimal) for tables.
pub fn mbit(bits_per_s: f64) -> String {
    format!("{:.2}", bits_per_s / 1e6)
}

/// Formats nanoseconds as microseconds for tables.
pub fn us(ns: f64) -> String {
    format!("{:.2}", ns / 1e3)
}
