//! A direction's total over parallel streams (`-P N`) on one clock.
//!
//! Each stream times its own phase, and the streams of one direction do not start or end
//! together (a connection's warm-up, a thread's wake-up). Summing each stream's bytes over its
//! own phase adds rates of periods that do not overlap: two streams that had the link in turn
//! each read the link's rate, and their sum twice it. The streams of one side of a direction
//! run on one host and stamp the start of their phases on its CLOCK_MONOTONIC
//! (`phase_start_ns`), so they are put on one time line and the total is taken over one window:
//!
//! - **common**: within the time every stream was in its timed phase (latest start to earliest
//!   end), with each stream's bytes in it taken from its intervals (`-i`), an interval cut by a
//!   bound counted pro rata of its overlap. The bounds are chosen so that no cut interval holds
//!   a change of the stream's rate (see [`common_bounds`]): parallel streams put their interval
//!   edges on one grid of the host's clock, so the bounds fall on edges of every stream, give
//!   or take one message or read. What all streams delivered while all were running, over that
//!   time: the rate the path sustained for them together.
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

use super::stream::{Interval, StreamStats};
use crate::units::format_seconds;

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

    /// The span in one phrase, for the table: "common span (...) 498.0 ms, from 2.10 ms after
    /// the first start".
    pub fn phrase(&self) -> String {
        let what = match self.method {
            SpanMethod::Common => "common span (all streams running, between interval edges)",
            SpanMethod::Union => "union span (earliest start to latest end)",
        };
        format!(
            "{what} {}, from {} after the first start",
            format_seconds(self.seconds()),
            format_seconds(self.start_ns as f64 / 1e9)
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
        if let Some((start, end)) = common_bounds(&placed).filter(|(s, e)| e > s) {
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

/// The common span's bounds on the host's clock (each stream's intervals as (start, end,
/// bytes)): within the time every stream was in its phase, from the latest start `lo` to the
/// earliest end `hi`, the widest whose bounds cut no interval across a change of rate; None
/// when there is none.
///
/// Between `lo` and `hi` no stream starts or ends, so a stream's rate changes only at the
/// starts and ends of the others, all outside. An interval that lies within [`lo`, `hi`] may
/// be cut pro rata ([`between`]) without error; one that straddles `lo` or `hi` may not: it
/// holds bytes from before another stream joined (or after one left), at another share of
/// the link, and spread evenly they would count bytes that were not there (three UDP streams
/// on a 30.9 Mbit/s lab link summed to 27.0 Mbit/s over a goodput of 24.8, cut at `lo`). So
/// each bound is the first (last) of `lo` (`hi`) and the streams' interval edges at which
/// every stream has either an edge or an interval that does not straddle `lo` or `hi`.
/// Parallel streams put their edges on one grid of the host's clock, each recorded at the
/// first message or read after the grid point: the start is then the latest of the streams'
/// edges at the first grid point after `lo`, the end the earliest at the last before `hi`,
/// and what is cut pro rata is one message or read's wait for the others. Without a grid the
/// bounds lie one interval inside, at most.
pub(crate) fn common_bounds(placed: &[Vec<(u64, u64, u64)>]) -> Option<(u64, u64)> {
    let lo = placed.iter().filter_map(|p| p.first().map(|i| i.0)).max()?;
    let hi = placed.iter().filter_map(|p| p.last().map(|i| i.1)).min()?;
    if hi <= lo {
        return None;
    }
    // Each stream's intervals are in time order: the one that holds `c` strictly inside, if
    // any, is the first that ends after it.
    let clean = |c: u64| {
        placed.iter().all(|p| {
            p.get(p.partition_point(|i| i.1 <= c))
                .filter(|i| i.0 < c)
                .is_none_or(|&(a, b, _)| a >= lo && b <= hi)
        })
    };
    let mut candidates: Vec<u64> = placed
        .iter()
        .flat_map(|p| p.iter().flat_map(|i| [i.0, i.1]))
        .filter(|&c| c > lo && c < hi)
        .chain([lo, hi])
        .collect();
    candidates.sort_unstable();
    candidates.dedup();
    let start = candidates.iter().copied().find(|&c| clean(c))?;
    let end = candidates
        .iter()
        .rev()
        .copied()
        .find(|&c| c > start && clean(c))?;
    Some((start, end))
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
    /// Where the streams' host clock stands at their time 0: a multiple of every interval
    /// used below (50, 100, 225 and 370 ms), so that the grid of aligned intervals falls on
    /// multiples of them from time 0.
    const BASE_MS: u64 = 999_000_000;

    /// Interval bounds (ms since the phase's start) of a phase [`at_ms`, `at_ms + len_ms`) in
    /// intervals of `every_ms`: on the host's grid (`aligned`, the first edge at the first
    /// multiple at least half an interval on) or from the phase's own start; a last stub
    /// under half an interval joins the one before, as the interval clock does.
    fn bounds(at_ms: u64, len_ms: u64, every_ms: u64, aligned: bool) -> Vec<(u64, u64)> {
        let first = if aligned {
            crate::pattern::stream::first_edge_after(BASE_MS + at_ms, every_ms)
        } else {
            every_ms
        };
        let mut edges = vec![0];
        let mut e = first;
        while e < len_ms {
            edges.push(e);
            e += every_ms;
        }
        if edges.len() > 1 && len_ms - edges[edges.len() - 1] < every_ms / 2 {
            edges.pop();
        }
        edges.push(len_ms);
        edges.windows(2).map(|w| (w[0], w[1])).collect()
    }

    fn interval(start_ms: u64, end_ms: u64, bytes: u64) -> Interval {
        Interval {
            start_ns: start_ms * MS,
            end_ns: end_ms * MS,
            bytes,
            messages: 1,
            bits_per_s: bytes as f64 * 8e3 / (end_ms - start_ms) as f64,
            tcp_info: None,
            retransmits: None,
            acked_bytes: None,
        }
    }

    fn stats(at_ms: u64, len_ms: u64, intervals: Vec<Interval>, bytes: u64) -> StreamStats {
        StreamStats {
            bytes_timed: bytes,
            elapsed_ns: len_ms * MS,
            bits_per_s: bytes as f64 * 8e3 / len_ms as f64,
            phase_start_ns: Some((BASE_MS + at_ms) * MS),
            intervals,
            ..StreamStats::default()
        }
    }

    /// A stream that read `mbit` Mbit/s for `len_ms` from `at_ms` on the host's clock, in
    /// intervals of `every_ms` on the host's grid (none when 0).
    fn stream(at_ms: u64, len_ms: u64, mbit: u64, every_ms: u64) -> StreamStats {
        let per_ms = mbit * 1_000_000 / 8 / 1000;
        let intervals = if every_ms == 0 {
            Vec::new()
        } else {
            bounds(at_ms, len_ms, every_ms, true)
                .into_iter()
                .map(|(a, b)| interval(a, b, per_ms * (b - a)))
                .collect()
        };
        stats(at_ms, len_ms, intervals, per_ms * len_ms)
    }

    /// Streams sharing a link of `mbit` Mbit/s evenly while they run, each in `phases` (start,
    /// end in ms), with their intervals of `every_ms` counted exactly from that schedule.
    fn on_link(mbit: u64, phases: &[(u64, u64)], every_ms: u64, aligned: bool) -> Vec<StreamStats> {
        on_link_late(mbit, phases, every_ms, aligned, &vec![0; phases.len()])
    }

    /// As [`on_link`], each stream's interior edges recorded `late_ms[k]` after their grid
    /// point (the wait for its next message or read).
    fn on_link_late(
        mbit: u64,
        phases: &[(u64, u64)],
        every_ms: u64,
        aligned: bool,
        late_ms: &[u64],
    ) -> Vec<StreamStats> {
        let per_ms = mbit as f64 * 1e6 / 8.0 / 1e3;
        // Bytes of one stream over [a, b) ms (host time): its share, piece by piece.
        let bytes = |a: u64, b: u64| -> f64 {
            let mut cuts: Vec<u64> = phases.iter().flat_map(|p| [p.0, p.1]).collect();
            cuts.extend([a, b]);
            cuts.retain(|&c| c >= a && c <= b);
            cuts.sort_unstable();
            cuts.dedup();
            cuts.windows(2)
                .map(|w| {
                    let on = phases.iter().filter(|p| p.0 <= w[0] && w[1] <= p.1).count();
                    per_ms * (w[1] - w[0]) as f64 / on.max(1) as f64
                })
                .sum()
        };
        phases
            .iter()
            .zip(late_ms)
            .map(|(&(at, end), &late)| {
                let len = end - at;
                let shift = |x: u64| {
                    if x == 0 || x == len {
                        x
                    } else {
                        (x + late).min(len)
                    }
                };
                let intervals: Vec<Interval> = bounds(at, len, every_ms, aligned)
                    .into_iter()
                    .map(|(a, b)| (shift(a), shift(b)))
                    .filter(|(a, b)| b > a)
                    .map(|(a, b)| interval(a, b, bytes(at + a, at + b).round() as u64))
                    .collect();
                let total = intervals.iter().map(|i| i.bytes).sum();
                stats(at, end - at, intervals, total)
            })
            .collect()
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
        let s = on_link(100, &[(0, 500), (250, 750)], 50, true);
        let own: f64 = s[0].bits_per_s + s[1].bits_per_s;
        assert!((own - 150e6).abs() < 1.0, "{own}");
        let t = over_one_clock(&[&s[0], &s[1]], BYTES).unwrap();
        assert_eq!(t.span.method, SpanMethod::Common);
        assert_eq!((t.span.start_ns, t.span.end_ns), (250 * MS, 500 * MS));
        assert_eq!(t.span.bytes, 3_125_000);
        assert!((t.bits_per_s() - 100e6).abs() < 1.0, "{}", t.bits_per_s());
        let each = t.per_stream_bits_per_s();
        assert!((each[0] - 50e6).abs() < 1.0 && (each[1] - 50e6).abs() < 1.0);
    }

    /// The case that broke the old bounds (latest start to earliest end, cut pro rata): three
    /// UDP streams on a 30.9 Mbit/s lab link starting at 0, 33 and 136 ms, with 225 ms
    /// intervals. The earlier streams' first intervals hold their larger share from before the
    /// third stream joined; spread evenly and cut at its start they summed to 27.0 Mbit/s over
    /// a goodput of 24.8. From the first edge on, on the grid or not, the sum is the link's.
    #[test]
    fn a_stream_that_joins_late_does_not_lift_the_sum_above_the_link() {
        let phases = [(0, 740), (33, 741), (136, 834)];
        for aligned in [true, false] {
            let s = on_link(30, &phases, 225, aligned);
            let refs: Vec<&StreamStats> = s.iter().collect();
            let t = over_one_clock(&refs, BYTES).unwrap();
            assert_eq!(t.span.method, SpanMethod::Common);
            assert!(t.span.start_ns >= 136 * MS, "{:?}", t.span);
            let rel = t.bits_per_s() / 30e6 - 1.0;
            assert!(
                rel.abs() < 1e-6,
                "aligned {aligned}: {} ({rel})",
                t.bits_per_s()
            );
            for iv in &t.intervals {
                assert!((iv.bits_per_s / 30e6 - 1.0).abs() < 1e-6, "{iv:?}");
            }
            // What the old bounds gave: the third stream's start cuts the others' first
            // intervals, whose bytes came at a half share, not a third.
            let placed: Vec<Vec<(u64, u64, u64)>> = s
                .iter()
                .map(|x| {
                    let at = x.phase_start_ns.unwrap();
                    x.intervals
                        .iter()
                        .map(|i| (at + i.start_ns, at + i.end_ns, i.bytes))
                        .collect()
                })
                .collect();
            let (a, b) = ((BASE_MS + 136) * MS, (BASE_MS + 740) * MS);
            let old: f64 =
                placed.iter().map(|p| between(p, a, b)).sum::<f64>() * 8e9 / (b - a) as f64;
            assert!(old > 30.3e6, "aligned {aligned}: {old}");
        }
    }

    /// Edges on the grid are recorded at each stream's next message or read after the grid
    /// point, here 0, 3 and 9 ms late: the span starts at the first edge where no stream's
    /// interval that holds another's start is cut and ends likewise, and the sum is the
    /// link's. With two intervals to a phase, no such bounds: the union.
    #[test]
    fn edges_recorded_late_move_the_bounds_not_the_sum() {
        let phases = [(0, 740), (33, 741), (136, 834)];
        let s = on_link_late(30, &phases, 225, true, &[0, 3, 9]);
        let refs: Vec<&StreamStats> = s.iter().collect();
        let t = over_one_clock(&refs, BYTES).unwrap();
        assert_eq!(t.span.method, SpanMethod::Common);
        // Grid points at 225, 450 and 675 ms. At 225 the second stream's first interval (from
        // 33 ms, before the third joined) runs to 228: the span starts there (the third's
        // first interval, from its own start at 136, and the first's [225, 450) are cut,
        // each at one share throughout). At its end the first two's last intervals run to
        // 740 and 741, across the first's end: the span ends at 453, the second's edge.
        assert_eq!((t.span.start_ns, t.span.end_ns), (228 * MS, 453 * MS));
        assert!(
            (t.bits_per_s() / 30e6 - 1.0).abs() < 1e-6,
            "{}",
            t.bits_per_s()
        );
        // Three 1.44 Gbit/s TCP streams of 900 ms in 370 ms intervals (oracle seed
        // 1795770881798036900, scenario 150): one edge each inside the phase.
        let phases = [(0, 903), (0, 904), (1, 899)];
        let s = on_link_late(1440, &phases, 370, true, &[0, 1, 0]);
        let refs: Vec<&StreamStats> = s.iter().collect();
        let t = over_one_clock(&refs, BYTES).unwrap();
        assert_eq!(t.span.method, SpanMethod::Union);
        assert!(
            t.bits_per_s() <= 1440e6 * (1.0 + 1e-9),
            "{}",
            t.bits_per_s()
        );
    }

    /// The sum interval by interval: the first stream's bounds within the common span, each
    /// stream's intervals on the same grid.
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
        // b's first edge is at 100 (70 ms in), a's last at 300.
        assert_eq!(bounds, vec![(100, 200), (200, 300)]);
        // 80 Mbit/s each, 160 together, in every interval.
        for i in &t.intervals {
            assert!((i.bits_per_s - 160e6).abs() < 1.0, "{i:?}");
        }
        assert_eq!(
            t.intervals.iter().map(|i| i.bytes).sum::<u64>(),
            t.span.bytes
        );
        // Starting 20 ms before a grid point, c's first interval runs to the next one; the
        // span starts at the grid point all the same (c's rate is even within it), and ends
        // where a does, at a grid point c has too.
        let c = stream(80, 400, 80, 100);
        assert_eq!(c.intervals[0].end_ns / MS, 120);
        let t = over_one_clock(&[&a, &c], BYTES).unwrap();
        assert_eq!((t.span.start_ns / MS, t.span.end_ns / MS), (100, 400));
        assert_eq!(t.intervals[0].start_ns / MS, 100);
        assert_eq!(t.intervals[0].end_ns / MS, 200);
        // The union window has no intervals.
        let t = over_one_clock(&[&stream(0, 500, 100, 0), &stream(500, 500, 100, 0)], BYTES);
        assert!(t.unwrap().intervals.is_empty());
    }

    /// A bound inside an interval counts it pro rata; an interval clock without edges inside
    /// the phase, no stamp or one stream: no common span.
    #[test]
    fn cuts_pro_rata_and_declines_without_stamps() {
        let a = stream(0, 400, 80, 100);
        let b = stream(30, 400, 80, 100);
        let t = over_one_clock(&[&a, &b], BYTES).unwrap();
        assert_eq!((t.span.start_ns, t.span.end_ns), (100 * MS, 300 * MS));
        // 200 ms of each at 10 kB/ms.
        assert_eq!(t.span.bytes, 2 * 200 * 10_000);
        // b's edges from its own start (130, 230, 330): b's first interval, which starts at
        // the latest start, cut at 100, and a's last, which ends at the earliest end, at 330.
        let per_ms = 10_000;
        let own: Vec<Interval> = bounds(30, 400, 100, false)
            .into_iter()
            .map(|(x, y)| interval(x, y, per_ms * (y - x)))
            .collect();
        let b_own = stats(30, 400, own, per_ms * 400);
        let t = over_one_clock(&[&a, &b_own], BYTES).unwrap();
        assert_eq!((t.span.start_ns, t.span.end_ns), (100 * MS, 330 * MS));
        assert_eq!(t.span.bytes, 2 * 230 * 10_000);
        // One interval only (its last stub joined the first): the union.
        let short = stream(30, 100, 80, 100);
        assert_eq!(short.intervals.len(), 1);
        let t = over_one_clock(&[&a, &short], BYTES).unwrap();
        assert_eq!(t.span.method, SpanMethod::Union);
        assert!(over_one_clock(&[&a], BYTES).is_none());
        let mut old = b.clone();
        old.phase_start_ns = None;
        assert!(over_one_clock(&[&a, &old], BYTES).is_none());
        // Acknowledged bytes that the intervals do not carry: no common span, and no union
        // either when the sides do not count them.
        assert!(over_one_clock(&[&a, &b], ACKED).is_none());
    }
}
