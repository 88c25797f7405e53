//! What a stream with `--compete` reports: each flow's receiver bytes and share, and Jain's
//! fairness index over the whole point and interval by interval.

use serde::{Deserialize, Serialize};

use crate::pattern::stream::StreamStats;
use crate::stats::fairness::{jain, shares};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct FairnessResult {
    /// The measured stream first, then each `--compete` flow in the order given.
    pub flows: Vec<FlowShare>,
    /// Jain's index of the flows' receiver rates over their timed phases; null when nothing
    /// moved.
    pub jain: Option<f64>,
    /// Interval by interval (matched by number: each flow counts from its own receiver's
    /// timed start).
    pub intervals: Vec<FairnessInterval>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct FlowShare {
    /// Transport and congestion control ("tcp:bbr"; "tcp" for the kernel's default).
    pub flow: String,
    /// Bytes the flow's receivers counted in their timed phases.
    pub bytes: u64,
    /// Every byte the flow's receivers got, warm-up and untimed tail included: what crossed
    /// the path.
    pub bytes_all: u64,
    pub bits_per_s: f64,
    /// Share of all flows' rates (0 to 1); null when nothing moved.
    pub share: Option<f64>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct FairnessInterval {
    /// The measured stream's interval bounds, ns since its receiver's timed start.
    pub start_ns: u64,
    pub end_ns: u64,
    /// Each flow's receiver rate in its own interval of this number, bit/s (0 where a flow
    /// had no such interval).
    pub bits_per_s: Vec<f64>,
    pub shares: Vec<Option<f64>>,
    pub jain: Option<f64>,
}

fn rate(bytes: u64, ns: u64) -> f64 {
    if ns == 0 {
        0.0
    } else {
        bytes as f64 * 8e9 / ns as f64
    }
}

impl FairnessResult {
    /// From each flow's label and its receivers' statistics.
    pub fn of(flows: &[(String, Vec<StreamStats>)]) -> FairnessResult {
        let totals: Vec<(u64, u64, f64)> = flows
            .iter()
            .map(|(_, rx)| {
                (
                    rx.iter().map(|s| s.bytes_timed).sum(),
                    rx.iter().map(|s| s.bytes_total).sum(),
                    rx.iter().map(|s| s.bits_per_s).sum(),
                )
            })
            .collect();
        let rates: Vec<f64> = totals.iter().map(|t| t.2).collect();
        let overall = shares(&rates);
        let n = flows
            .iter()
            .flat_map(|(_, rx)| rx.iter().map(|s| s.intervals.len()))
            .max()
            .unwrap_or(0);
        let intervals = (0..n)
            .map(|k| {
                let bits: Vec<f64> = flows
                    .iter()
                    .map(|(_, rx)| {
                        rx.iter()
                            .filter_map(|s| s.intervals.get(k))
                            .map(|i| rate(i.bytes, i.end_ns.saturating_sub(i.start_ns)))
                            .sum()
                    })
                    .collect();
                let bounds = flows
                    .iter()
                    .flat_map(|(_, rx)| rx.iter().filter_map(|s| s.intervals.get(k)))
                    .next()
                    .map(|i| (i.start_ns, i.end_ns))
                    .unwrap_or((0, 0));
                FairnessInterval {
                    start_ns: bounds.0,
                    end_ns: bounds.1,
                    shares: shares(&bits),
                    jain: jain(&bits),
                    bits_per_s: bits,
                }
            })
            .collect();
        FairnessResult {
            flows: flows
                .iter()
                .zip(&totals)
                .zip(overall)
                .map(
                    |(((label, _), &(bytes, bytes_all, bits)), share)| FlowShare {
                        flow: label.clone(),
                        bytes,
                        bytes_all,
                        bits_per_s: bits,
                        share,
                    },
                )
                .collect(),
            jain: jain(&rates),
            intervals,
        }
    }

    /// For the table: each flow's rate and share, and the index overall and its lowest.
    pub fn lines(&self) -> Vec<String> {
        let mut out: Vec<String> = self
            .flows
            .iter()
            .enumerate()
            .map(|(i, f)| {
                format!(
                    "flow {} {}{}: {} Mbit/s received, share {}",
                    i + 1,
                    f.flow,
                    if i == 0 { " (measured)" } else { "" },
                    super::mbit(f.bits_per_s),
                    f.share
                        .map(|s| format!("{:.1}%", s * 100.0))
                        .unwrap_or_else(|| "-".into())
                )
            })
            .collect();
        let lowest = self
            .intervals
            .iter()
            .filter_map(|i| i.jain)
            .min_by(f64::total_cmp);
        out.push(format!(
            "Jain's fairness index {} overall{}",
            self.jain
                .map(|j| format!("{j:.3}"))
                .unwrap_or_else(|| "-".into()),
            lowest
                .map(|l| format!(", lowest {l:.3} over {} intervals", self.intervals.len()))
                .unwrap_or_default()
        ));
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pattern::stream::Interval;

    fn receiver(intervals: &[u64]) -> StreamStats {
        let iv: Vec<Interval> = intervals
            .iter()
            .enumerate()
            .map(|(k, &bytes)| Interval {
                start_ns: k as u64 * 1_000_000_000,
                end_ns: (k as u64 + 1) * 1_000_000_000,
                bytes,
                messages: 0,
                bits_per_s: 0.0,
                tcp_info: None,
                retransmits: None,
                acked_bytes: None,
            })
            .collect();
        let bytes: u64 = intervals.iter().sum();
        StreamStats {
            bytes_timed: bytes,
            bytes_total: bytes + 10,
            elapsed_ns: intervals.len() as u64 * 1_000_000_000,
            bits_per_s: rate(bytes, intervals.len() as u64 * 1_000_000_000),
            intervals: iv,
            ..StreamStats::default()
        }
    }

    #[test]
    fn shares_and_indices_per_interval_and_overall() {
        let flows = vec![
            ("tcp:cubic".to_owned(), vec![receiver(&[100, 300])]),
            ("tcp:bbr".to_owned(), vec![receiver(&[100, 100])]),
        ];
        let f = FairnessResult::of(&flows);
        assert_eq!(f.flows[0].bytes, 400);
        assert_eq!(f.flows[1].bytes, 200);
        assert_eq!(f.flows[1].bytes_all, 210);
        assert_eq!(f.flows[0].bits_per_s, 1600.0);
        assert_eq!(f.flows[1].share, Some(1.0 / 3.0));
        // (1600 + 800)^2 / (2 * (1600^2 + 800^2)) = 0.9
        assert_eq!(f.jain, Some(0.9));
        assert_eq!(f.intervals.len(), 2);
        assert_eq!(f.intervals[0].jain, Some(1.0));
        assert_eq!(f.intervals[0].shares, vec![Some(0.5), Some(0.5)]);
        // 2400 and 800 bit/s: (3200)^2 / (2 * (2400^2 + 800^2)) = 0.8
        assert_eq!(f.intervals[1].jain, Some(0.8));
        assert_eq!(f.intervals[1].bits_per_s, vec![2400.0, 800.0]);
        let lines = f.lines();
        assert_eq!(lines.len(), 3);
        assert!(
            lines[2].starts_with("Jain's fairness index 0.900 overall, lowest 0.800"),
            "{}",
            lines[2]
        );
    }

    #[test]
    fn a_flow_with_fewer_intervals_counts_as_zero_there() {
        let flows = vec![
            ("tcp".to_owned(), vec![receiver(&[100, 100])]),
            ("quic".to_owned(), vec![receiver(&[100])]),
        ];
        let f = FairnessResult::of(&flows);
        assert_eq!(f.intervals[1].bits_per_s, vec![800.0, 0.0]);
        assert_eq!(f.intervals[1].jain, Some(0.5));
    }
}
