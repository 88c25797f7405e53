//! A direction's total over parallel streams (`-P N`) on one clock.
//!
//! Each stream times its own phase, and the streams of one direction do not start or end
//! together (a connection's warm-up, a thread's wake-up). Summing each stream's bytes over its
//! own phase adds rates of periods that do not overlap: two streams that had the link in turn
//! each read the link's rate, and their sum twice it. The streams of one side of a direction
//! run on one host and stamp the start of their phases on its CLOCK_MONOTONIC
//! (`phase_start_ns`), so they are put on one time line and the total is taken over one window:
//!
//! - **common**: the span every stream was in its timed phase, from the latest start to the
//!   earliest end, with each stream's bytes in it taken from its intervals (`-i`), an interval
//!   cut by a bound counted pro rata of its overlap (its bytes taken as even over it: the error
//!   is at most the bytes of the cut intervals at the two bounds, the same cut as `--compete`'s
//!   common span). What all streams delivered while all were running, over that time: the
//!   rate the path sustained for them together.
//! - **union**: where a stream has no intervals (no `-i`) or the phases share no time, every
//!   timed byte over the span from the earliest start to the latest end. Every timed byte was
//!   counted within its own stream's phase, and every phase lies within that one window, so the
//!   bytes crossed the link within it: the total can be no more than the link carried over it
//!   (whereas a common span without intervals would need the bytes inside it, which are not
//!   known). It may read below the link when the phases are staggered, never above it.
//!
//! A single stream, and streams without stamps (results from an older peer), keep the sum of
//! each stream over its own phase (no span).

use serde::{Deserialize, Serialize};

use crate::pattern::stream::{Interval, StreamStats};

/// How a direction's total over several streams was taken (see the module).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum SpanMethod {
    /// The time every stream was in its timed phase; bytes cut from the intervals.
    Common,
    /// From the earliest start to the latest end; every timed byte.
    Union,
}

/// The window a direction's total was taken over, on the clock of that side's host.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct TotalSpan {
    pub method: SpanMethod,
    /// Bounds, ns since the earliest of the streams' timed starts on this side.
    pub start_ns: u64,
    pub end_ns: u64,
    /// Bytes the streams counted within it, summed (cut intervals pro rata, rounded).
    pub bytes: u64,
}

impl TotalSpan {
    pub fn seconds(&self) -> f64 {
        self.end_ns.saturating_sub(self.start_ns) as f64 / 1e9
    }

    /// The span in one phrase, for the table: "common span 0.498 s (from 2.1 ms after the
    /// first start)".
    pub fn phrase(&self) -> String {
        let what = match self.method {
            SpanMethod::Common => "common span (latest start to earliest end)",
            SpanMethod::Union => "union span (earliest start to latest end)",
        };
        format!(
            "{what} {:.3} s, from {:.1} ms after the first start",
            self.seconds(),
            self.start_ns as f64 / 1e6
        )
    }
}

/// One interval of a direction's total on one clock (iperf3's `[SUM]` row, but with every
/// stream's bytes taken over the same bounds): the first stream's interval bounds within the
/// common span, each stream's intervals cut at them pro rata.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SumInterval {
    /// Bounds, ns since the earliest of the streams' timed starts (as the span's).
    pub start_ns: u64,
    pub end_ns: u64,
    /// The streams' bytes between the bounds, summed (rounded).
    pub bytes: u64,
    pub bits_per_s: f64,
    /// Whether the sum can be true: invalid, with the reason, when it is more than the link
    /// could deliver in the interval (the physics guard).
    #[serde(flatten, default)]
    pub validity: crate::stats::Validity,
}

/// A total over one window: its span and each stream's bytes in it (in the order given), and
/// over a common span the sum interval by interval.
#[derive(Debug, Clone, PartialEq)]
pub struct Spanned {
    pub span: TotalSpan,
    pub per_stream_bytes: Vec<f64>,
    pub intervals: Vec<SumInterval>,
}

impl Spanned {
    pub fn bits_per_s(&self) -> f64 {
        rate(self.per_stream_bytes.iter().sum(), self.span.seconds())
    }

    /// Each stream's rate over the span, bits/s.
    pub fn per_stream_bits_per_s(&self) -> Vec<f64> {
        let s = self.span.seconds();
        self.per_stream_bytes.iter().map(|&b| rate(b, s)).collect()
    }
}

fn rate(bytes: f64, seconds: f64) -> f64 {
    if seconds > 0.0 {
        bytes * 8.0 / seconds
    } else {
        0.0
    }
}

/// What a side counts: its bytes in one interval and over its timed phase (the timed bytes, or
/// the bytes acknowledged); None where it does not count them.
pub type Counted = (
    fn(&Interval) -> Option<u64>,
    fn(&StreamStats) -> Option<u64>,
);

/// Timed bytes.
pub const BYTES: Counted = (|i| Some(i.bytes), |s| Some(s.bytes_timed));
/// Bytes the peer acknowledged (a TCP sender's TCP_INFO).
pub const ACKED: Counted = (|i| i.acked_bytes, |s| s.bytes_acked_timed);

/// The total of one side of a direction's streams on one clock (see the module); None for a
/// single stream, a stream without a stamp or counts, or phases of no length.
pub fn over_one_clock(sides: &[&StreamStats], counted: Counted) -> Option<Spanned> {
    if sides.len() < 2 {
        return None;
    }
    let (of_interval, of_side) = counted;
    let starts: Vec<u64> = sides
        .iter()
        .map(|s| s.phase_start_ns)
        .collect::<Option<_>>()?;
    let epoch = *starts.iter().min()?;
    // Each stream's intervals on the host's clock: (start, end, bytes).
    let placed: Option<Vec<Vec<(u64, u64, u64)>>> = sides
        .iter()
        .zip(&starts)
        .map(|(s, &at)| {
            if s.intervals.is_empty() {
                return None;
            }
            s.intervals
                .iter()
                .map(|i| Some((at + i.start_ns, at + i.end_ns, of_interval(i)?)))
                .collect()
        })
        .collect();
    if let Some(placed) = placed {
        let start = placed.iter().filter_map(|p| p.first().map(|i| i.0)).max()?;
        let end = placed.iter().filter_map(|p| p.last().map(|i| i.1)).min()?;
        if end > start {
            let intervals = edges(&placed[0], start, end)
                .windows(2)
                .map(|w| {
                    let bytes: f64 = placed.iter().map(|p| between(p, w[0], w[1])).sum();
                    SumInterval {
                        start_ns: w[0] - epoch,
                        end_ns: w[1] - epoch,
                        bytes: bytes.round() as u64,
                        bits_per_s: rate(bytes, (w[1] - w[0]) as f64 / 1e9),
                        validity: crate::stats::Validity::valid(),
                    }
                })
                .collect();
            return Some(with_bytes(Spanned {
                span: TotalSpan {
                    method: SpanMethod::Common,
                    start_ns: start - epoch,
                    end_ns: end - epoch,
                    bytes: 0,
                },
                per_stream_bytes: placed.iter().map(|p| between(p, start, end)).collect(),
                intervals,
            }));
        }
    }
    let end = sides
        .iter()
        .zip(&starts)
        .map(|(s, &at)| at + s.elapsed_ns)
        .max()?;
    if end <= epoch {
        return None;
    }
    let per_stream_bytes = sides
        .iter()
        .map(|s| of_side(s).map(|b| b as f64))
        .collect::<Option<Vec<f64>>>()?;
    Some(with_bytes(Spanned {
        span: TotalSpan {
            method: SpanMethod::Union,
            start_ns: 0,
            end_ns: end - epoch,
            bytes: 0,
        },
        per_stream_bytes,
        intervals: Vec::new(),
    }))
}

fn with_bytes(mut s: Spanned) -> Spanned {
    s.span.bytes = s.per_stream_bytes.iter().sum::<f64>().round() as u64;
    s
}

/// The bounds of the intervals a span [`start`, `end`) is cut into on one clock: `first`'s
/// interval bounds (start, end, bytes) within it, a stub of half an interval or shorter at
/// either end joined to its neighbour; the one binning of -P sums here and of competing
/// flows' intervals (`report::fairness`).
pub(crate) fn edges(first: &[(u64, u64, u64)], start: u64, end: u64) -> Vec<u64> {
    let mut bounds: Vec<u64> = first.iter().flat_map(|i| [i.0, i.1]).collect();
    bounds.sort_unstable();
    bounds.dedup();
    let period = first.first().map(|i| i.1 - i.0).unwrap_or(0);
    let mut edges: Vec<u64> = vec![start];
    edges.extend(bounds.iter().copied().filter(|&e| e > start && e < end));
    edges.push(end);
    if edges.len() > 2 && edges[1] - edges[0] <= period / 2 {
        edges.remove(1);
    }
    let n = edges.len();
    if n > 2 && edges[n - 1] - edges[n - 2] <= period / 2 {
        edges.remove(n - 2);
    }
    edges
}

/// Bytes of `intervals` (start, end, bytes on one clock) between `a` and `b`, an interval cut
/// by a bound pro rata: the one cut of -P sums here and of competing flows' common span
/// (`report::fairness`).
pub(crate) fn between(intervals: &[(u64, u64, u64)], a: u64, b: u64) -> f64 {
    intervals
        .iter()
        .map(|&(s, e, bytes)| {
            let overlap = e.min(b).saturating_sub(s.max(a));
            if e <= s {
                0.0
            } else {
                bytes as f64 * overlap as f64 / (e - s) as f64
            }
        })
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    /// A stream that read `mbit` Mbit/s for `len_ms` from `at_ms` on the host's clock, in
    /// intervals of `every_ms` (none when 0).
    fn stream(at_ms: u64, len_ms: u64, mbit: u64, every_ms: u64) -> StreamStats {
        let per_ms = mbit * 1_000_000 / 8 / 1000;
        let intervals = match len_ms.checked_div(every_ms) {
            None => Vec::new(),
            Some(n) => (0..n)
                .map(|k| Interval {
                    start_ns: k * every_ms * MS,
                    end_ns: (k + 1) * every_ms * MS,
                    bytes: per_ms * every_ms,
                    messages: 1,
                    bits_per_s: (mbit * 1_000_000) as f64,
                    tcp_info: None,
                    retransmits: None,
                    acked_bytes: None,
                })
                .collect(),
        };
        StreamStats {
            bytes_timed: per_ms * len_ms,
            elapsed_ns: len_ms * MS,
            bits_per_s: (mbit * 1_000_000) as f64,
            phase_start_ns: Some(1_000_000 * MS + at_ms * MS),
            intervals,
            ..StreamStats::default()
        }
    }

    /// Two streams that had a 100 Mbit/s link in turn, 500 ms each: each reads 100 over its
    /// own phase, 200 summed; the union window over both reads 100.
    #[test]
    fn streams_in_turn_add_up_to_the_link_not_twice_it() {
        let (a, b) = (stream(0, 500, 100, 0), stream(500, 500, 100, 0));
        let own: f64 = [&a, &b].iter().map(|s| s.bits_per_s).sum();
        assert_eq!(own, 200e6);
        let t = over_one_clock(&[&a, &b], BYTES).unwrap();
        assert_eq!(t.span.method, SpanMethod::Union);
        assert_eq!((t.span.start_ns, t.span.end_ns), (0, 1000 * MS));
        assert_eq!(t.span.bytes, 12_500_000);
        assert!((t.bits_per_s() - 100e6).abs() < 1.0, "{}", t.bits_per_s());
        // With intervals but no shared time: the same union window.
        let (a, b) = (stream(0, 500, 100, 100), stream(500, 500, 100, 100));
        let t = over_one_clock(&[&a, &b], BYTES).unwrap();
        assert_eq!(t.span.method, SpanMethod::Union);
        assert!((t.bits_per_s() - 100e6).abs() < 1.0);
    }

    /// Two streams on a 100 Mbit/s link, each 500 ms, offset by 250 ms: alone each had the
    /// link (100), together half each (50). Own phases: 75 + 75 = 150, above the link. The
    /// common span [250, 500) ms holds 50 + 50.
    #[test]
    fn offset_streams_over_their_common_span_stay_within_the_link() {
        let mut a = stream(0, 500, 100, 50);
        let mut b = stream(250, 500, 100, 50);
        // a: 100 then 50; b: 50 then 100, in 50 ms intervals.
        for (k, i) in a.intervals.iter_mut().enumerate() {
            if k >= 5 {
                i.bytes /= 2;
            }
        }
        for (k, i) in b.intervals.iter_mut().enumerate() {
            if k < 5 {
                i.bytes /= 2;
            }
        }
        for s in [&mut a, &mut b] {
            s.bytes_timed = s.intervals.iter().map(|i| i.bytes).sum();
            s.bits_per_s = s.bytes_timed as f64 * 8.0 / 0.5;
        }
        let own: f64 = a.bits_per_s + b.bits_per_s;
        assert!((own - 150e6).abs() < 1.0, "{own}");
        let t = over_one_clock(&[&a, &b], BYTES).unwrap();
        assert_eq!(t.span.method, SpanMethod::Common);
        assert_eq!((t.span.start_ns, t.span.end_ns), (250 * MS, 500 * MS));
        assert_eq!(t.span.bytes, 3_125_000);
        assert!((t.bits_per_s() - 100e6).abs() < 1.0, "{}", t.bits_per_s());
        let each = t.per_stream_bits_per_s();
        assert!((each[0] - 50e6).abs() < 1.0 && (each[1] - 50e6).abs() < 1.0);
    }

    /// The sum interval by interval on one clock: the first stream's bounds within the
    /// common span, a stub at the start joined to its neighbour, each stream cut pro rata.
    #[test]
    fn sums_interval_by_interval_over_the_first_streams_bounds() {
        let a = stream(0, 400, 80, 100);
        let b = stream(30, 400, 80, 100);
        let t = over_one_clock(&[&a, &b], BYTES).unwrap();
        let bounds: Vec<(u64, u64)> = t
            .intervals
            .iter()
            .map(|i| (i.start_ns / MS, i.end_ns / MS))
            .collect();
        // [30, 100) is a stub of 70 ms, more than half an interval: kept.
        assert_eq!(bounds, vec![(30, 100), (100, 200), (200, 300), (300, 400)]);
        // 80 Mbit/s each, 160 together, in every interval.
        for i in &t.intervals {
            assert!((i.bits_per_s - 160e6).abs() < 1.0, "{i:?}");
        }
        assert_eq!(
            t.intervals.iter().map(|i| i.bytes).sum::<u64>(),
            t.span.bytes
        );
        // A stub of 20 ms at the start joins the next interval.
        let c = stream(80, 400, 80, 100);
        let t = over_one_clock(&[&a, &c], BYTES).unwrap();
        assert_eq!(t.intervals[0].start_ns / MS, 80);
        assert_eq!(t.intervals[0].end_ns / MS, 200);
        // The union window has no intervals.
        let t = over_one_clock(&[&stream(0, 500, 100, 0), &stream(500, 500, 100, 0)], BYTES);
        assert!(t.unwrap().intervals.is_empty());
    }

    /// A bound inside an interval counts it pro rata; no stamp or one stream: no span.
    #[test]
    fn cuts_pro_rata_and_declines_without_stamps() {
        let a = stream(0, 400, 80, 100);
        let b = stream(30, 400, 80, 100);
        let t = over_one_clock(&[&a, &b], BYTES).unwrap();
        assert_eq!((t.span.start_ns, t.span.end_ns), (30 * MS, 400 * MS));
        // 370 ms of each at 10 kB/ms.
        assert_eq!(t.span.bytes, 2 * 370 * 10_000);
        assert!(over_one_clock(&[&a], BYTES).is_none());
        let mut old = b.clone();
        old.phase_start_ns = None;
        assert!(over_one_clock(&[&a, &old], BYTES).is_none());
        // Acknowledged bytes that the intervals do not carry: no common span, and no union
        // either when the sides do not count them.
        assert!(over_one_clock(&[&a, &b], ACKED).is_none());
    }
}
