//! What a run with `--load` reports beside its figures: the background load actually
//! achieved, and for exchanges the latency idle against loaded.

use serde::{Deserialize, Serialize};

/// The background load of a point's last run, as the load's receiver (the server) counted it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct LoadResult {
    /// `--load` as given ("udp:30M", "tcp:4", "30%").
    pub spec: String,
    /// "udp" or "tcp".
    pub transport: String,
    pub streams: u32,
    /// UDP: the payload rate the load was held at, bit/s (a share of the lab link resolved to
    /// its rate). Null for TCP load, which runs as fast as the path lets it.
    pub target_bits_per_s: Option<f64>,
    /// Payload bits the receiver counted over the load's whole time (every interval, the
    /// short control exchanges between UDP intervals included), per second.
    pub achieved_bits_per_s: f64,
    /// UDP: datagrams sent and lost over the whole load (from the receiver's sequence
    /// numbers); null for TCP.
    pub datagrams_sent: Option<u64>,
    pub datagrams_lost: Option<u64>,
    /// From the first load interval's start to the last one's end, nanoseconds.
    pub elapsed_ns: u64,
    /// How much of `elapsed_ns` the load's senders were sending, nanoseconds: the rest is
    /// the gaps between UDP intervals (the control exchange, the receiver's wait for
    /// stragglers), or a TCP load's connection setup and end.
    pub sending_ns: u64,
    /// Whether load ran over the whole measured phase: begun before the measured test opened
    /// its connections, ended after its last transaction. False: the figures were partly
    /// taken without load.
    pub covered: bool,
    /// Interval by interval: what the sender was paced at and what the receiver counted.
    pub intervals: Vec<LoadInterval>,
}

/// One interval of the load.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct LoadInterval {
    /// Since the load's first interval began, nanoseconds.
    pub start_ns: u64,
    pub end_ns: u64,
    /// UDP: the rate the closed-loop pacer set for this interval, bit/s of payload.
    pub paced_bits_per_s: Option<f64>,
    /// Payload bits the receiver counted in the interval, per second of it.
    pub received_bits_per_s: f64,
    pub received_bytes: u64,
    /// UDP: datagrams lost in the interval.
    pub lost: Option<u64>,
    /// UDP: how long the sender was sending in the interval, nanoseconds (the rest of it is
    /// the gap to the next interval).
    pub sending_ns: Option<u64>,
}

/// Latency idle against loaded (pingpong, rr with `--load`): round-trip times.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct UnderLoad {
    /// The same point measured first without load. Null with `--load-only`.
    pub idle: Option<LatencyFigures>,
    pub loaded: LatencyFigures,
    /// How RPM is computed: "60 s / trimmed mean of RTT (slowest 5% left out), as
    /// draft-ietf-ippm-responsiveness".
    pub rpm_statistic: String,
}

/// Round-trip percentiles of one phase and its responsiveness.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct LatencyFigures {
    pub samples: u64,
    pub p50_ns: u64,
    pub p90_ns: u64,
    pub p99_ns: u64,
    pub max_ns: u64,
    /// Round trips per minute: 60 s / the trimmed mean of the round-trip times.
    pub rpm: f64,
    /// Whether there were enough samples for the percentiles to be a measurement
    /// (stats::validity's floor for latency).
    pub valid: bool,
    /// The round trips over time, for the time-series plot.
    pub series: RttSeries,
}

/// Round trips over time: every `every`-th of them (all connections', in order of their
/// start), at most [`MAX_PLOTTED`].
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct RttSeries {
    pub every: u64,
    /// (start of the round trip since the phase's timed start, round-trip time), ns.
    pub points: Vec<(u64, u64)>,
}

/// Most round trips a phase's series keeps for the plot.
pub const MAX_PLOTTED: usize = 2000;

impl RttSeries {
    /// Every k-th of `samples` (sorted by time here), k the smallest that keeps at most
    /// [`MAX_PLOTTED`].
    pub fn thinned(mut samples: Vec<(u64, u64)>) -> RttSeries {
        samples.sort_unstable();
        let every = samples.len().div_ceil(MAX_PLOTTED).max(1);
        RttSeries {
            every: every as u64,
            points: samples.into_iter().step_by(every).collect(),
        }
    }
}

impl LatencyFigures {
    /// The figures of the round trips `rtt` recorded; None without any.
    pub fn of(rtt: &crate::stats::LatencyRecorder, series: RttSeries) -> Option<LatencyFigures> {
        let s = rtt.summary(0.95)?;
        let trimmed = crate::stats::responsiveness::trimmed_mean_ns(rtt.histogram())?;
        Some(LatencyFigures {
            samples: s.samples,
            p50_ns: s.median_ns,
            p90_ns: s.p90_ns,
            p99_ns: s.p99_ns,
            max_ns: s.max_ns,
            rpm: crate::stats::responsiveness::rpm(trimmed),
            valid: !crate::stats::validity::latency(s.samples).is_invalid(),
            series,
        })
    }
}

/// How [`LatencyFigures::rpm`] is computed, for the report.
pub const RPM_STATISTIC: &str =
    "60 s / trimmed mean of the round-trip times (slowest 5% left out), as draft-ietf-ippm-responsiveness";

impl LoadResult {
    /// The load for the table: target, achieved, loss, and whether it covered the test.
    pub fn line(&self) -> String {
        let mbit = crate::units::mbit;
        let target = self
            .target_bits_per_s
            .map(|t| format!(" (target {} Mbit/s, closed-loop paced)", mbit(t)))
            .unwrap_or_else(|| format!(" ({} stream{})", self.streams, plural(self.streams)));
        let loss = match (self.datagrams_sent, self.datagrams_lost) {
            (Some(sent), Some(lost)) => format!(", {lost} of {sent} datagrams lost"),
            _ => String::new(),
        };
        let covered = if self.covered {
            ""
        } else {
            "; NOT running over the whole measured phase"
        };
        let sending = if self.elapsed_ns > 0 {
            format!(
                ", sending {:.0}% of the time",
                self.sending_ns as f64 / self.elapsed_ns as f64 * 100.0
            )
        } else {
            String::new()
        };
        format!(
            "load {} {}: receiver got {} Mbit/s{target} over {} interval{}{sending}{loss}{covered}",
            self.spec,
            self.transport,
            mbit(self.achieved_bits_per_s),
            self.intervals.len(),
            plural(self.intervals.len() as u32),
        )
    }
}

fn plural(n: u32) -> &'static str {
    if n == 1 {
        ""
    } else {
        "s"
    }
}

impl UnderLoad {
    /// Idle and loaded round trips for the table, a line each.
    pub fn lines(&self) -> Vec<String> {
        use crate::units::format_us;
        let line = |phase: &str, f: &LatencyFigures| {
            format!(
                "RTT {phase:<6} p50 {} p90 {} p99 {} max {} ({} samples{}), {:.0} RPM",
                format_us(f.p50_ns as f64),
                format_us(f.p90_ns as f64),
                format_us(f.p99_ns as f64),
                format_us(f.max_ns as f64),
                f.samples,
                if f.valid { "" } else { ", too few" },
                f.rpm
            )
        };
        let mut out = Vec::new();
        if let Some(idle) = &self.idle {
            out.push(line("idle", idle));
        }
        out.push(line("loaded", &self.loaded));
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn figures(p50: u64, rpm: f64) -> LatencyFigures {
        LatencyFigures {
            samples: 1000,
            p50_ns: p50,
            p90_ns: p50 * 2,
            p99_ns: p50 * 3,
            max_ns: p50 * 4,
            rpm,
            valid: true,
            series: RttSeries::default(),
        }
    }

    #[test]
    fn the_table_says_target_achieved_loss_and_cover() {
        let mut l = LoadResult {
            spec: "30%".into(),
            transport: "udp".into(),
            streams: 1,
            target_bits_per_s: Some(3e6),
            achieved_bits_per_s: 2.9e6,
            datagrams_sent: Some(1000),
            datagrams_lost: Some(12),
            elapsed_ns: 2_000_000_000,
            sending_ns: 1_800_000_000,
            covered: true,
            intervals: Vec::new(),
        };
        assert_eq!(
            l.line(),
            "load 30% udp: receiver got 2.90 Mbit/s (target 3.00 Mbit/s, closed-loop paced) over 0 intervals, sending 90% of the time, 12 of 1000 datagrams lost"
        );
        l.covered = false;
        assert!(l
            .line()
            .ends_with("; NOT running over the whole measured phase"));
    }

    #[test]
    fn a_series_keeps_every_kth_round_trip_in_time_order() {
        let few: Vec<(u64, u64)> = (0..10).rev().map(|t| (t, t * 10)).collect();
        let s = RttSeries::thinned(few);
        assert_eq!(s.every, 1);
        assert_eq!(s.points.first(), Some(&(0, 0)));
        assert_eq!(s.points.len(), 10);
        let many: Vec<(u64, u64)> = (0..4001).map(|t| (t, 1)).collect();
        let s = RttSeries::thinned(many);
        assert_eq!(s.every, 3);
        assert_eq!(s.points.len(), 1334);
        assert_eq!(s.points[1], (3, 1));
        assert_eq!(RttSeries::thinned(Vec::new()).points.len(), 0);
    }

    #[test]
    fn idle_and_loaded_are_a_line_each() {
        let u = UnderLoad {
            idle: Some(figures(100_000, 600_000.0)),
            loaded: figures(50_000_000, 1200.0),
            rpm_statistic: RPM_STATISTIC.into(),
        };
        let lines = u.lines();
        assert_eq!(lines.len(), 2);
        assert!(
            lines[0].starts_with(
                "RTT idle   p50 100.00 us p90 200.00 us p99 300.00 us max 400.00 us (1000 samples)"
            ),
            "{}",
            lines[0]
        );
        assert!(lines[1].ends_with("1200 RPM"), "{}", lines[1]);
    }
}
