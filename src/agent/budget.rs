//! The agent's budgets, measured: its own CPU share and the bytes its runs moved, each over
//! the last minute (a sliding window, so that one long run does not hold the agent for long
//! and a burst of short ones is seen).

use std::collections::VecDeque;
use std::time::{Duration, Instant};

/// The window the budgets are averaged over.
pub const WINDOW: Duration = Duration::from_secs(60);

/// CPU time (user plus system) of the whole process so far, seconds: the agent and the runs
/// it measures in its threads.
pub fn process_cpu_seconds() -> f64 {
    use nix::sys::resource::{getrusage, UsageWho};
    match getrusage(UsageWho::RUSAGE_SELF) {
        Ok(u) => seconds(u.user_time()) + seconds(u.system_time()),
        Err(_) => 0.0,
    }
}

fn seconds(t: nix::sys::time::TimeVal) -> f64 {
    t.tv_sec() as f64 + t.tv_usec() as f64 * 1e-6
}

pub struct Meter {
    cpu_budget_percent: Option<f64>,
    traffic_budget_bytes_per_s: Option<f64>,
    cpu: VecDeque<(Instant, f64)>,
    traffic: VecDeque<(Instant, u64)>,
}

impl Meter {
    pub fn new(cpu_budget_percent: Option<f64>, traffic_budget_bytes_per_s: Option<f64>) -> Meter {
        Meter {
            cpu_budget_percent,
            traffic_budget_bytes_per_s,
            cpu: VecDeque::new(),
            traffic: VecDeque::new(),
        }
    }

    /// Reads the process's CPU time now.
    pub fn sample(&mut self, now: Instant) {
        self.sample_with(now, process_cpu_seconds());
    }

    pub fn sample_with(&mut self, now: Instant, cpu_seconds: f64) {
        self.cpu.push_back((now, cpu_seconds));
        // Keep one sample older than the window, as its start.
        while self.cpu.len() > 2 && self.cpu[1].0 + WINDOW <= now {
            self.cpu.pop_front();
        }
    }

    /// A run that ended at `now` moved `bytes`.
    pub fn moved(&mut self, now: Instant, bytes: u64) {
        self.traffic.push_back((now, bytes));
        while self
            .traffic
            .front()
            .is_some_and(|(t, _)| *t + WINDOW <= now)
        {
            self.traffic.pop_front();
        }
    }

    /// The CPU share over the window, percent of one CPU; None before a second of samples.
    pub fn cpu_percent(&self) -> Option<f64> {
        let (first, last) = (self.cpu.front()?, self.cpu.back()?);
        let span = last.0.duration_since(first.0).as_secs_f64();
        if span < 1.0 {
            return None;
        }
        Some((last.1 - first.1) / span * 100.0)
    }

    /// Bytes per second over the window (a minute, however long the agent has run: a
    /// burst at start is not divided by a shorter time and so does not look larger).
    pub fn traffic_bytes_per_s(&self) -> f64 {
        self.traffic.iter().map(|(_, b)| *b as f64).sum::<f64>() / WINDOW.as_secs_f64()
    }

    pub fn cpu_exceeded(&self) -> bool {
        match (self.cpu_budget_percent, self.cpu_percent()) {
            (Some(budget), Some(p)) => p > budget,
            _ => false,
        }
    }

    pub fn traffic_exceeded(&self) -> bool {
        self.traffic_budget_bytes_per_s
            .is_some_and(|b| self.traffic_bytes_per_s() > b)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cpu_share_is_over_the_last_minute() {
        let t0 = Instant::now();
        let at = |s: u64| t0 + Duration::from_secs(s);
        let mut m = Meter::new(Some(5.0), None);
        m.sample_with(at(0), 10.0);
        assert_eq!(m.cpu_percent(), None);
        assert!(!m.cpu_exceeded());
        // 6 s of CPU in 60 s: 10%.
        m.sample_with(at(60), 16.0);
        assert!((m.cpu_percent().unwrap() - 10.0).abs() < 1e-9);
        assert!(m.cpu_exceeded());
        // Idle for the next minutes: the old minute leaves the window.
        m.sample_with(at(120), 16.0);
        m.sample_with(at(180), 16.0);
        assert_eq!(m.cpu_percent(), Some(0.0));
        assert!(!m.cpu_exceeded());
    }

    #[test]
    fn traffic_is_bytes_over_the_last_minute() {
        let t0 = Instant::now();
        let at = |s: u64| t0 + Duration::from_secs(s);
        let mut m = Meter::new(None, Some(1000.0));
        m.moved(at(0), 30_000);
        assert_eq!(m.traffic_bytes_per_s(), 500.0);
        assert!(!m.traffic_exceeded());
        m.moved(at(30), 60_000);
        assert!(m.traffic_exceeded());
        m.moved(at(61), 0);
        assert_eq!(m.traffic_bytes_per_s(), 1000.0);
        assert!(!m.traffic_exceeded(), "at the budget, not above it");
    }
}
