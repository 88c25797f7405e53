//! What a stream with `--compete` reports: each flow's receiver bytes and share, and Jain's
//! fairness index over the whole point and interval by interval.
//!
//! On one clock: each flow's receivers stamp the start of their timed phase on the server
//! host's CLOCK_MONOTONIC (`phase_start_ns`), so every interval of every flow is placed on one
//! time line. Rates, shares and Jain's index are taken over the **common span**, the time
//! every flow was in its timed phase, and per interval over the measured stream's interval
//! bounds within it: flows compared over the same time, which cannot add up to more than the
//! path carried then. (Each flow counted from its own start, as before, compared periods that
//! did not overlap: 19.35 + 31.30 = 50.65 Mbit/s over a link whose TCP goodput is 47.82.) A
//! flow's interval cut by a bound counts pro rata of its overlap, its bytes taken as even over
//! it (the intervals are the finest record there is): the error is at most the bytes of the
//! cut intervals at each bound. Without the stamps (an older server), intervals are matched
//! by number as before and `common_span` is null.

use serde::{Deserialize, Serialize};

use super::stream::StreamStats;
use crate::stats::fairness::{jain, shares};
use crate::units::format_seconds;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct FairnessResult {
    /// The measured stream first, then each `--compete` flow in the order given.
    pub flows: Vec<FlowShare>,
    /// Jain's index of the flows' receiver rates over their timed phases; null when nothing
    /// moved.
    pub jain: Option<f64>,
    /// Interval by interval: the measured stream's intervals within the common span (without
    /// it, matched by number, each flow counted from its own receiver's timed start).
    pub intervals: Vec<FairnessInterval>,
    /// The time every flow was in its timed phase, ns since the measured stream's receiver's
    /// timed start; the flows' bytes, rates and shares are over it. Null when the flows'
    /// phases could not be put on one clock or did not overlap.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub common_span: Option<CommonSpan>,
    /// Whether the flows' rates, shares and Jain's index compare one period: invalid when
    /// they could not be put on one clock (each flow over its own phase, periods that need
    /// not overlap, so their sum can exceed the link), with the reason.
    #[serde(flatten, default)]
    pub validity: crate::stats::Validity,
}

#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct CommonSpan {
    pub start_ns: u64,
    pub end_ns: u64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct FlowShare {
    /// Transport and congestion control ("tcp:bbr"; "tcp" for the kernel's default).
    pub flow: String,
    /// Bytes the flow's receivers counted in the common span (without one, in their own
    /// timed phases).
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
    /// The interval's bounds, ns since the measured stream's receiver's timed start.
    pub start_ns: u64,
    pub end_ns: u64,
    /// Each flow's receiver rate between these bounds, bit/s (without a common span: in its
    /// own interval of this number, 0 where a flow had no such interval).
    pub bits_per_s: Vec<f64>,
    pub shares: Vec<Option<f64>>,
    pub jain: Option<f64>,
    /// Whether the flows' rates in this interval can all be true: invalid, with the reason,
    /// when they add up to more than the link could deliver in it (the physics guard).
    #[serde(flatten, default)]
    pub validity: crate::stats::Validity,
}

fn rate(bytes: u64, ns: u64) -> f64 {
    if ns == 0 {
        0.0
    } else {
        bytes as f64 * 8e9 / ns as f64
    }
}

/// One interval of one receiver on the host's clock: (start, end, bytes).
type Placed = (u64, u64, u64);

/// A flow's intervals on the host's clock; None when a receiver has no stamp.
fn placed(rx: &[StreamStats]) -> Option<Vec<Placed>> {
    let mut out = Vec::new();
    for s in rx {
        let at = s.phase_start_ns?;
        out.extend(
            s.intervals
                .iter()
                .map(|i| (at + i.start_ns, at + i.end_ns, i.bytes)),
        );
    }
    Some(out)
}

impl FairnessResult {
    /// From each flow's label and its receivers' statistics: on one clock over the common
    /// span when every receiver stamped its phase (see the module), else each flow over its
    /// own phase.
    pub fn of(flows: &[(String, Vec<StreamStats>)]) -> FairnessResult {
        Self::on_one_clock(flows).unwrap_or_else(|| Self::each_on_its_own(flows))
    }

    fn on_one_clock(flows: &[(String, Vec<StreamStats>)]) -> Option<FairnessResult> {
        let placed: Vec<Vec<Placed>> = flows
            .iter()
            .map(|(_, rx)| placed(rx))
            .collect::<Option<_>>()?;
        if placed.iter().any(|p| p.is_empty()) {
            return None;
        }
        let start = placed
            .iter()
            .map(|p| p.iter().map(|i| i.0).min().unwrap_or(0))
            .max()?;
        let end = placed
            .iter()
            .map(|p| p.iter().map(|i| i.1).max().unwrap_or(0))
            .min()?;
        if end <= start {
            return None;
        }
        let epoch = placed[0].iter().map(|i| i.0).min()?;
        // The span's bounds as a -P sum's: the first and last interval edges where no
        // receiver's interval straddles another's start or end (one that does holds bytes from
        // before a flow joined or after one left, at another share of the link, and cut pro
        // rata it would count bytes that were not there). Each receiver's intervals apart, in
        // time order, as that needs.
        let receivers: Vec<Vec<Placed>> = flows
            .iter()
            .flat_map(|(_, rx)| rx.iter())
            .filter_map(|s| {
                let mut p = self::placed(std::slice::from_ref(s))?;
                p.sort_unstable();
                Some(p)
            })
            .filter(|p| !p.is_empty())
            .collect();
        let (start, end) = match super::span::common_bounds(&receivers) {
            Some((s, e)) if e > s => (s, e),
            // None that clean (intervals too coarse for the span): the span snapped inward to
            // the measured stream's own interval bounds, so that none of its intervals is cut
            // (the competing flows report finer ones, see plan::compete, whose cut is small);
            // a span too short to hold one whole interval stays as it is.
            _ => {
                let mut bounds: Vec<u64> = placed[0].iter().flat_map(|i| [i.0, i.1]).collect();
                bounds.sort_unstable();
                bounds.dedup();
                match (
                    bounds.iter().copied().find(|&b| b >= start),
                    bounds.iter().rev().copied().find(|&b| b <= end),
                ) {
                    (Some(s), Some(e)) if e > s => (s, e),
                    _ => (start, end),
                }
            }
        };
        // Bins: the measured stream's interval bounds within the span (as -P sums').
        let edges = super::span::edges(&placed[0], start, end);
        let span_ns = end - start;
        let totals: Vec<f64> = placed
            .iter()
            .map(|p| super::span::between(p, start, end))
            .collect();
        let rates: Vec<f64> = totals.iter().map(|b| b * 8e9 / span_ns as f64).collect();
        let overall = shares(&rates);
        let intervals = edges
            .windows(2)
            .map(|w| {
                let bits: Vec<f64> = placed
                    .iter()
                    .map(|p| super::span::between(p, w[0], w[1]) * 8e9 / (w[1] - w[0]) as f64)
                    .collect();
                FairnessInterval {
                    start_ns: w[0] - epoch,
                    end_ns: w[1] - epoch,
                    shares: shares(&bits),
                    jain: jain(&bits),
                    bits_per_s: bits,
                    validity: crate::stats::Validity::valid(),
                }
            })
            .collect();
        Some(FairnessResult {
            flows: flows
                .iter()
                .zip(&totals)
                .zip(&rates)
                .zip(overall)
                .map(|((((label, rx), &bytes), &bits), share)| FlowShare {
                    flow: label.clone(),
                    bytes: bytes.round() as u64,
                    bytes_all: rx.iter().map(|s| s.bytes_total).sum(),
                    bits_per_s: bits,
                    share,
                })
                .collect(),
            jain: jain(&rates),
            intervals,
            common_span: Some(CommonSpan {
                start_ns: start - epoch,
                end_ns: end - epoch,
            }),
            validity: crate::stats::Validity::valid(),
        })
    }

    /// Each flow over its own timed phase, intervals matched by number.
    fn each_on_its_own(flows: &[(String, Vec<StreamStats>)]) -> FairnessResult {
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
                    validity: crate::stats::Validity::invalid(
                        "no common clock: each flow's interval of this number covers its own time",
                    ),
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
            common_span: None,
            validity: crate::stats::Validity::invalid(
                "the flows' phases could not be put on one clock or did not overlap: each rate is over its own period, so their sum, shares and Jain's index compare different times",
            ),
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
                    crate::units::mbit(f.bits_per_s),
                    f.share
                        .map(|s| format!("{:.1}%", s * 100.0))
                        .unwrap_or_else(|| "-".into())
                )
            })
            .collect();
        out.push(match self.common_span {
            Some(c) => format!(
                "over the common span: {} that every flow was timed, from +{} to +{} of the measured stream's timed phase",
                format_seconds((c.end_ns - c.start_ns) as f64 / 1e9),
                format_seconds(c.start_ns as f64 / 1e9),
                format_seconds(c.end_ns as f64 / 1e9)
            ),
            None => "each flow over its own timed phase (no common clock): their rates may add up to more than the path carried".to_owned(),
        });
        if self.validity.is_invalid() {
            out.push(format!("not valid: {}", self.validity.reason()));
        }
        // The lowest index over the intervals whose rates can all be true (when none of the
        // figures is, over all, under the "not valid" line above).
        let whole = self.validity.is_invalid();
        let lowest = self
            .intervals
            .iter()
            .filter(|i| whole || !i.validity.is_invalid())
            .filter_map(|i| i.jain)
            .min_by(f64::total_cmp);
        let flagged: Vec<&FairnessInterval> = self
            .intervals
            .iter()
            .filter(|i| i.validity.is_invalid())
            .collect();
        out.push(format!(
            "Jain's fairness index {} overall{}",
            self.jain
                .map(|j| format!("{j:.3}"))
                .unwrap_or_else(|| "-".into()),
            lowest
                .map(|l| format!(
                    ", lowest {l:.3} over {} intervals",
                    if whole {
                        self.intervals.len()
                    } else {
                        self.intervals.len() - flagged.len()
                    }
                ))
                .unwrap_or_default()
        ));
        if let (Some(first), false) = (flagged.first(), whole) {
            out.push(format!(
                "{} of {} intervals not valid (first at +{}: {})",
                flagged.len(),
                self.intervals.len(),
                format_seconds(first.start_ns as f64 / 1e9),
                first.validity.reason()
            ));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::stream::Interval;

    fn receiver(intervals: &[u64]) -> StreamStats {
        receiver_every(1_000_000_000, intervals)
    }

    fn receiver_every(period: u64, intervals: &[u64]) -> StreamStats {
        let iv: Vec<Interval> = intervals
            .iter()
            .enumerate()
            .map(|(k, &bytes)| Interval {
                start_ns: k as u64 * period,
                end_ns: (k as u64 + 1) * period,
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
            elapsed_ns: intervals.len() as u64 * period,
            bits_per_s: rate(bytes, intervals.len() as u64 * period),
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
        assert_eq!(lines.len(), 5);
        assert!(
            lines[2].starts_with("each flow over its own timed phase"),
            "{}",
            lines[2]
        );
        assert!(
            lines[3].starts_with("not valid: the flows' phases could not be put on one clock"),
            "{}",
            lines[3]
        );
        assert!(
            lines[4].starts_with("Jain's fairness index 0.900 overall, lowest 0.800"),
            "{}",
            lines[4]
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

    fn stamped(at_s: f64, intervals: &[u64]) -> StreamStats {
        StreamStats {
            phase_start_ns: Some((at_s * 1e9) as u64 + 1_000_000_000_000),
            ..receiver(intervals)
        }
    }

    /// Competing flows once added up to more than the link. Here: a link of 100 B/s; flow A
    /// (measured, 1 s intervals) alone for its first half second, then B (0.5 s intervals) with it,
    /// 50 B/s each, then B alone for its last half second. Each over its own phase: 175 B in 3 s
    /// each, 116.7 B/s together on a 100 B/s link. On one clock, over the span they share snapped
    /// to A's bounds (1 s to 3 s): 100 B each, the link's 100 B/s exactly.
    #[test]
    fn flows_are_compared_over_the_span_they_share_on_one_clock() {
        let half = 500_000_000;
        let b = StreamStats {
            phase_start_ns: Some(1_000_000_000_000 + half),
            ..receiver_every(half, &[25, 25, 25, 25, 25, 50])
        };
        let flows = vec![
            ("tcp".to_owned(), vec![stamped(0.0, &[75, 50, 50])]),
            ("tcp:reno".to_owned(), vec![b]),
        ];
        let own = FairnessResult::each_on_its_own(&flows);
        let sum_own: f64 = own.flows.iter().map(|f| f.bits_per_s).sum();
        assert!((sum_own / 8.0 - 350.0 / 3.0).abs() < 1e-9, "{sum_own}");
        let f = FairnessResult::of(&flows);
        assert_eq!(
            f.common_span,
            Some(CommonSpan {
                start_ns: 1_000_000_000,
                end_ns: 3_000_000_000
            })
        );
        assert_eq!((f.flows[0].bytes, f.flows[1].bytes), (100, 100));
        let sum: f64 = f.flows.iter().map(|x| x.bits_per_s).sum();
        assert!((sum / 8.0 - 100.0).abs() < 1e-9, "{sum}");
        assert_eq!(f.jain, Some(1.0));
        let bounds: Vec<(u64, u64)> = f.intervals.iter().map(|i| (i.start_ns, i.end_ns)).collect();
        assert_eq!(
            bounds,
            vec![
                (1_000_000_000, 2_000_000_000),
                (2_000_000_000, 3_000_000_000)
            ]
        );
        assert_eq!(f.intervals[1].bits_per_s, vec![400.0, 400.0]);
        assert!(
            f.lines()[2].starts_with("over the common span: 2.000 s"),
            "{:?}",
            f.lines()
        );
        // Coarse competing intervals: B in 1 s intervals from 0.5 s. Cut at A's 3 s end, B's
        // last interval (25 B shared, then 50 B alone) read 37.5 B: 112.5 B in 1 s to 3 s, and
        // the two 106.25 B/s on a 100 B/s link. The span now ends at 2.5 s, where no interval
        // straddles an end: 75 B each in 1.5 s, the link's rate exactly.
        let coarse = vec![
            ("tcp".to_owned(), vec![stamped(0.0, &[75, 50, 50])]),
            ("tcp:reno".to_owned(), vec![stamped(0.5, &[50, 50, 75])]),
        ];
        let c = FairnessResult::of(&coarse);
        assert_eq!(
            c.common_span,
            Some(CommonSpan {
                start_ns: 1_000_000_000,
                end_ns: 2_500_000_000
            })
        );
        assert_eq!((c.flows[0].bytes, c.flows[1].bytes), (75, 75));
        let sum: f64 = c.flows.iter().map(|x| x.bits_per_s).sum();
        assert!((sum / 8.0 - 100.0).abs() < 1e-9, "{sum}");
        // Phases that do not overlap have no common span: each on its own, said so.
        let apart = vec![
            ("tcp".to_owned(), vec![stamped(0.0, &[10])]),
            ("quic".to_owned(), vec![stamped(5.0, &[10])]),
        ];
        assert_eq!(FairnessResult::of(&apart).common_span, None);
    }
}
