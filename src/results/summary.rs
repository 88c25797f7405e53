//! The few figures that stand for a whole run in `history`: what a reader of a list of runs
//! wants to see before opening one.

use crate::report::model::RunReport;
use crate::report::{mbit, us};

/// Every field is `None` when the run has no such figure (or no point at all).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct RunHeadline {
    /// pingpong: one-way latency (RTT/2) of the smallest message; rr, crr: the lowest mean
    /// transaction round trip over the points. Nanoseconds.
    pub latency_ns: Option<f64>,
    /// Highest throughput over the points: 2n/RTT (pingpong), request plus response payload
    /// (rr, crr), receiver rate summed over streams and directions (stream). Bits per second.
    pub throughput_bits_per_s: Option<f64>,
    /// rr, crr: the highest transactions per second over the points.
    pub transactions_per_s: Option<f64>,
}

fn max(values: impl Iterator<Item = f64>) -> Option<f64> {
    values.filter(|v| v.is_finite()).reduce(f64::max)
}

fn min(values: impl Iterator<Item = f64>) -> Option<f64> {
    values.filter(|v| v.is_finite()).reduce(f64::min)
}

pub fn headline(r: &RunReport) -> RunHeadline {
    let latencies = || r.points.iter().filter_map(|p| p.latency.as_ref());
    match r.pattern.as_str() {
        "pingpong" => {
            // The smallest message's latency is t0, whether or not the run swept sizes.
            let smallest = r
                .points
                .iter()
                .filter(|p| p.latency.as_ref().and_then(|l| l.one_way_mean_ns).is_some())
                .min_by_key(|p| p.key.size);
            RunHeadline {
                latency_ns: smallest.and_then(|p| p.latency.as_ref()?.one_way_mean_ns),
                throughput_bits_per_s: max(latencies().map(|l| l.throughput_bits_per_s)),
                transactions_per_s: None,
            }
        }
        "rr" | "crr" => RunHeadline {
            latency_ns: min(latencies().map(|l| l.rtt.mean_ns)),
            throughput_bits_per_s: max(latencies().map(|l| l.throughput_bits_per_s)),
            transactions_per_s: max(latencies().map(|l| l.transactions_per_s)),
        },
        _ => RunHeadline {
            latency_ns: None,
            throughput_bits_per_s: max(r.points.iter().filter_map(|p| {
                let s = p.stream.as_ref()?;
                Some(s.totals.iter().map(|t| t.receiver_bits_per_s).sum())
            })),
            transactions_per_s: None,
        },
    }
}

/// One short phrase, e.g. "t0 34.62 us, r_max 40797.31 Mbit/s".
pub fn describe(pattern: &str, h: &RunHeadline) -> String {
    let lat = h.latency_ns.map(us);
    let bps = h.throughput_bits_per_s.map(mbit);
    let parts: Vec<String> = match pattern {
        "pingpong" => vec![
            lat.map(|v| format!("t0 {v} us")),
            bps.map(|v| format!("r_max {v} Mbit/s")),
        ],
        "rr" | "crr" => vec![
            h.transactions_per_s.map(|v| format!("peak {v:.1} txn/s")),
            lat.map(|v| format!("best rtt {v} us")),
        ],
        _ => vec![bps.map(|v| format!("peak receiver {v} Mbit/s"))],
    }
    .into_iter()
    .flatten()
    .collect();
    if parts.is_empty() {
        "no figures".into()
    } else {
        parts.join(", ")
    }
}
