//! The progress line of a long command on stderr (`app`, `compare-transports`, `mesh` on rank
//! 0): what it is doing, step k of n and, once some of its work is done, the time left. Drawn
//! only when stderr is a terminal, so that no pipe, log or `--json` output ever holds it; its
//! text and its estimate are pure functions of their inputs ([`text`], [`eta`]).

use std::io::IsTerminal;
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// Where a command stands, as the progress line says it.
#[derive(Debug, Clone, PartialEq)]
pub struct Status<'a> {
    /// The command, e.g. "app jacobi".
    pub what: &'a str,
    /// The step under way, counting from 1, of `steps`.
    pub step: u64,
    pub steps: u64,
    /// What the step does, e.g. "n=256, repetition 3 of 10".
    pub doing: &'a str,
    /// The work of the steps finished and of all of them, in any one unit (steps, points,
    /// estimated operations): the time left is the time so far scaled by what remains.
    pub done_work: f64,
    pub total_work: f64,
    pub elapsed: Duration,
}

/// The time left when `done_work` of `total_work` took `elapsed`, assuming the rest goes at
/// the same pace; None before any work is done or when the totals make no sense.
pub fn eta(done_work: f64, total_work: f64, elapsed: Duration) -> Option<Duration> {
    if done_work.is_nan() || done_work <= 0.0 || !total_work.is_finite() || total_work < done_work {
        return None;
    }
    let left = elapsed.as_secs_f64() * (total_work - done_work) / done_work;
    Duration::try_from_secs_f64(left).ok()
}

/// The progress line: "app jacobi: 3/20 n=256, repetition 1 of 10, 1 min 5 s elapsed, ~4 min 20 s left".
pub fn text(s: &Status) -> String {
    let mut out = format!("{}: {}/{}", s.what, s.step, s.steps);
    if !s.doing.is_empty() {
        out.push(' ');
        out.push_str(s.doing);
    }
    out.push_str(&format!(
        ", {} elapsed",
        crate::units::format_clock(s.elapsed.as_secs_f64())
    ));
    if let Some(left) = eta(s.done_work, s.total_work, s.elapsed) {
        out.push_str(&format!(
            ", ~{} left",
            crate::units::format_clock(left.as_secs_f64())
        ));
    }
    out
}

/// A command's progress line: hidden unless asked for and stderr is a terminal.
pub struct Progress {
    bar: Option<ProgressBar>,
    started: Instant,
    what: String,
    steps: u64,
    total_work: f64,
    done_work: f64,
}

impl Progress {
    /// `steps` steps of `total_work` in all; drawn when `show` and stderr is a terminal.
    pub fn new(what: &str, steps: u64, total_work: f64, show: bool) -> Progress {
        let bar = (show && std::io::stderr().is_terminal()).then(|| {
            let bar = ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr());
            if let Ok(style) = ProgressStyle::with_template("{spinner} {wide_msg}") {
                bar.set_style(style);
            }
            // The spinner turns between steps, which may each take minutes.
            bar.enable_steady_tick(Duration::from_millis(500));
            bar
        });
        Progress {
            bar,
            started: Instant::now(),
            what: what.to_owned(),
            steps,
            total_work,
            done_work: 0.0,
        }
    }

    /// Step `step` (from 1) begins, doing `doing`.
    pub fn step(&self, step: u64, doing: &str) {
        let Some(bar) = &self.bar else {
            return;
        };
        bar.set_message(text(&Status {
            what: &self.what,
            step,
            steps: self.steps,
            doing,
            done_work: self.done_work,
            total_work: self.total_work,
            elapsed: self.started.elapsed(),
        }));
    }

    /// `work` more of the total is done.
    pub fn done(&mut self, work: f64) {
        self.done_work += work;
    }

    /// Clears the line.
    pub fn finish(&self) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        self.finish();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_time_left_scales_the_time_so_far_by_the_work_left() {
        let s = Duration::from_secs;
        assert_eq!(eta(1.0, 4.0, s(10)), Some(s(30)));
        assert_eq!(eta(3.0, 4.0, s(30)), Some(s(10)));
        assert_eq!(eta(4.0, 4.0, s(30)), Some(s(0)));
        // Weighed work: a first point of 1 unit in 2 s, 99 units to go.
        assert_eq!(eta(1.0, 100.0, s(2)), Some(s(198)));
        // Nothing done yet, or totals that make no sense: no estimate.
        assert_eq!(eta(0.0, 4.0, s(10)), None);
        assert_eq!(eta(5.0, 4.0, s(10)), None);
        assert_eq!(eta(f64::NAN, 4.0, s(10)), None);
        assert_eq!(eta(1.0, f64::INFINITY, s(10)), None);
    }

    #[test]
    fn the_line_says_the_step_what_it_does_and_the_time_left_once_known() {
        let mut st = Status {
            what: "app jacobi",
            step: 1,
            steps: 22,
            doing: "n=64, repetition 1 of 11",
            done_work: 0.0,
            total_work: 22.0,
            elapsed: Duration::from_millis(300),
        };
        assert_eq!(
            text(&st),
            "app jacobi: 1/22 n=64, repetition 1 of 11, 0 s elapsed"
        );
        st.step = 12;
        st.doing = "n=256, repetition 1 of 11";
        st.done_work = 11.0;
        st.elapsed = Duration::from_secs(65);
        assert_eq!(
            text(&st),
            "app jacobi: 12/22 n=256, repetition 1 of 11, 1 min 5 s elapsed, ~1 min 5 s left"
        );
        st.doing = "";
        assert_eq!(
            text(&st),
            "app jacobi: 12/22, 1 min 5 s elapsed, ~1 min 5 s left"
        );
    }

    #[test]
    fn a_hidden_line_counts_and_draws_nothing() {
        let mut p = Progress::new("x", 3, 3.0, false);
        assert!(p.bar.is_none());
        p.step(1, "a");
        p.done(1.0);
        assert_eq!(p.done_work, 1.0);
        p.finish();
    }
}
