//! Where a run's results go as they are produced: the trait the runner writes to, defined
//! here by its producer as ripgrep's searcher defines its `Sink`; the table, CSV, JSON and
//! results-database outputs implement it. It sees the result document only, never the plan,
//! so a stored run is printed again through the same sinks.

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use crate::model::stream::IntervalEvent;
use crate::model::{PointResult, RunDocument};

/// A single point expected to take this long (seconds) or longer shows its time so far: a
/// run that says nothing for longer looks hung.
pub const LONG_POINT_S: f64 = 5.0;

/// Prints interval reports from the thread that receives them.
pub type IntervalPrinter = Box<dyn FnMut(&IntervalEvent) -> anyhow::Result<()> + Send>;

/// Where results go as they are produced. Every method that writes returns the write's
/// failure (a full disk, a closed file); a closed stdout is not one (see [`Output`]).
pub trait Sink {
    /// Once the session is open and the server's environment is known.
    fn begin(&mut self, report: &RunDocument) -> anyhow::Result<()>;
    /// After each point.
    fn point(&mut self, report: &RunDocument, point: &PointResult) -> anyhow::Result<()>;
    /// At the end, complete or not.
    fn finish(&mut self, report: &RunDocument) -> anyhow::Result<()>;
    /// Before `begin`, when the run is saved: its id in the results database, for outputs
    /// that name the run.
    fn saved_as(&mut self, _id: i64) {}
    fn wants_intervals(&self) -> bool {
        false
    }
    fn interval_printer(&self) -> IntervalPrinter {
        Box::new(|_| Ok(()))
    }
    /// A progress bar on stderr for sweeps, and for a single point expected to take
    /// `seconds` of at least [`LONG_POINT_S`] a line with its time so far (unless its interval
    /// lines show it going); hidden when stderr is not a terminal.
    fn progress(&self, points: u64, seconds: Option<f64>) -> ProgressBar {
        if points < 2 {
            return match seconds {
                Some(s) if s >= LONG_POINT_S && !self.wants_intervals() => {
                    let bar = ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr());
                    if let Ok(style) =
                        ProgressStyle::with_template("{spinner} 1 point: {elapsed} of about {msg}")
                    {
                        bar.set_style(style);
                    }
                    bar.set_message(crate::units::format_clock(s));
                    bar.enable_steady_tick(std::time::Duration::from_millis(500));
                    bar
                }
                _ => ProgressBar::hidden(),
            };
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
