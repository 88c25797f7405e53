//! Interval reports: recorded by the timed loop without allocating, sent live if asked.

use std::sync::mpsc;
use std::time::{Duration, Instant};

use super::{rate, Interval, IntervalEvent};
use crate::pattern::{nanos, DataChannel, Role};

/// Intervals reserved for a phase of unknown length (a byte or iteration limit): 4096 of
/// 100 ms are almost 7 minutes.
pub(super) const UNKNOWN_SPAN: usize = 4096;

/// The most intervals a clock ever reserves: 1 Mi of them, however long the phase.
const MAX_RESERVED: usize = 1 << 20;

/// Intervals a clock reporting `every` reserves for a phase expected to last `expected`: its
/// whole length and a few more, [`UNKNOWN_SPAN`] when the length is not known, none without
/// reports.
fn reserved(every: Option<Duration>, expected: Option<Duration>) -> usize {
    let n = match (every, expected) {
        (Some(e), Some(d)) if !e.is_zero() => (d.as_secs_f64() / e.as_secs_f64()) as usize + 4,
        (Some(_), _) => UNKNOWN_SPAN,
        _ => 0,
    };
    n.min(MAX_RESERVED)
}

/// Bytes of the reports a clock made with the same `every` and `expected` reserves: a
/// stream's share of its footprint (see [`super::sender_footprint`]).
pub(super) fn reserved_bytes(every: Option<Duration>, expected: Option<Duration>) -> u64 {
    (reserved(every, expected) * std::mem::size_of::<Interval>()) as u64
}

/// Records intervals without allocating in the loop: the vector is sized up front, from the
/// phase's expected length, and never grows. Should the phase outlast that, the newest
/// interval takes in the rest (its span grows, its rate stays the bytes over that span).
pub(super) struct IntervalClock<'a> {
    pub(super) every: Option<Duration>,
    next: Instant,
    start: Instant,
    last_at: Instant,
    last_bytes: u64,
    last_messages: u64,
    last_retrans: u32,
    /// `tcpi_bytes_acked` at the start of the timed phase and at the last record: a sender's
    /// intervals say what the peer acknowledged in each (None: not tracked).
    acked_base: Option<u64>,
    last_acked: Option<u64>,
    pub(super) out: Vec<Interval>,
    live: Option<(&'a mpsc::Sender<IntervalEvent>, u32, Role)>,
    /// Interval edges on one grid of the host's clock (see [`first_edge_after`]).
    aligned: bool,
}

/// How long after a phase that starts at `start_ns` on the host's CLOCK_MONOTONIC its first
/// interval ends when the intervals of every stream on the host share one grid, the multiples
/// of `every_ns`: at the first grid point at least half an interval away (the first interval
/// is then between a half and one and a half intervals long, never a stub).
///
/// Parallel streams start their phases at different times. With edges of their own, the
/// direction's total over the time they all ran (`report::span`) must cut the intervals of
/// the earlier streams where the latest one starts, and a cut taken pro rata of an interval
/// whose rate changed when that stream joined counts bytes that were not there: three UDP
/// streams on a 30.9 Mbit/s lab link summed to 27.0 Mbit/s over a goodput of 24.8. On one
/// grid every stream has an edge within one message of the others' and nothing is cut.
pub(crate) fn first_edge_after(start_ns: u64, every_ns: u64) -> u64 {
    if every_ns == 0 {
        return 0;
    }
    let mut d = every_ns - start_ns % every_ns;
    if d < every_ns.div_ceil(2) {
        d += every_ns;
    }
    d
}

impl<'a> IntervalClock<'a> {
    pub(super) fn new(
        every: Option<Duration>,
        expected: Option<Duration>,
        start: Instant,
        live: Option<(&'a mpsc::Sender<IntervalEvent>, u32, Role)>,
    ) -> Self {
        IntervalClock {
            every,
            next: every.map(|e| start + e).unwrap_or(start),
            start,
            last_at: start,
            last_bytes: 0,
            last_messages: 0,
            last_retrans: 0,
            acked_base: None,
            last_acked: None,
            out: Vec::with_capacity(reserved(every, expected)),
            live,
            aligned: false,
        }
    }

    /// Puts the interval edges on the host's grid of [`first_edge_after`] (parallel streams).
    pub(super) fn aligned(mut self, on: bool) -> Self {
        self.aligned = on;
        self
    }

    /// The kernel's TCP state at the start of the timed phase: each interval's retransmits and
    /// (for a sender, `acked`) acknowledged bytes are counted from it, so that nothing of the
    /// warm-up lands in the first interval.
    pub(super) fn baseline(&mut self, info: Option<crate::model::socket::TcpInfo>, acked: bool) {
        if let Some(t) = info {
            self.last_retrans = t.total_retrans;
            if acked {
                self.acked_base = Some(t.bytes_acked);
                self.last_acked = Some(t.bytes_acked);
            }
        }
    }

    /// Bytes acknowledged since the last record, by `info`, and the new mark.
    fn acked_since(
        &self,
        info: Option<crate::model::socket::TcpInfo>,
    ) -> (Option<u64>, Option<u64>) {
        match (self.last_acked, info) {
            (Some(last), Some(t)) => (
                Some(t.bytes_acked.saturating_sub(last)),
                Some(t.bytes_acked),
            ),
            _ => (None, self.last_acked),
        }
    }

    #[inline]
    pub(super) fn due(&self, now: Instant) -> bool {
        self.every.is_some() && now >= self.next
    }

    /// The interval from the last record to `now`, with the kernel's state then; moves the
    /// marks to `now`.
    fn measure(&mut self, now: Instant, bytes: u64, messages: u64, ch: &DataChannel) -> Interval {
        let tcp_info = ch.connection().tcp_info();
        let retransmits = tcp_info.map(|t| t.total_retrans.saturating_sub(self.last_retrans));
        if let Some(t) = tcp_info {
            self.last_retrans = t.total_retrans;
        }
        let (acked_bytes, mark) = self.acked_since(tcp_info);
        self.last_acked = mark;
        let iv = Interval {
            start_ns: nanos(self.start, self.last_at),
            end_ns: nanos(self.start, now),
            bytes: bytes - self.last_bytes,
            messages: messages - self.last_messages,
            bits_per_s: rate(bytes - self.last_bytes, nanos(self.last_at, now)),
            tcp_info,
            retransmits,
            acked_bytes,
        };
        self.last_at = now;
        self.last_bytes = bytes;
        self.last_messages = messages;
        iv
    }

    /// Extends the newest interval by `iv`, which follows it.
    fn merge_into_last(&mut self, iv: &Interval) {
        let Some(prev) = self.out.last_mut() else {
            return;
        };
        if let (Some(n), Some(r)) = (iv.retransmits, prev.retransmits.as_mut()) {
            *r += n;
        }
        if let (Some(a), Some(p)) = (iv.acked_bytes, prev.acked_bytes.as_mut()) {
            *p += a;
        }
        prev.tcp_info = iv.tcp_info.or(prev.tcp_info);
        prev.bytes += iv.bytes;
        prev.messages += iv.messages;
        prev.end_ns = iv.end_ns;
        prev.bits_per_s = rate(prev.bytes, prev.end_ns.saturating_sub(prev.start_ns));
    }

    /// Where an interval that `now` finds due ends: `now`, or on the host's grid the last grid
    /// point at or before it.
    ///
    /// A due interval is recorded at the first message (or read) after its grid point: every
    /// other byte it holds came before that point, so on the grid it ends there, give or take
    /// that one message or read. Parallel streams' edges are then the same instants, and their
    /// sum is taken between them without cutting any interval (`report::span`); ended at
    /// `now`, each stream's edge would lie its own wait after the point, and a sum cut at one
    /// stream's edge would spread another's interval evenly over a wait in which it received
    /// nothing.
    fn edge(&self, now: Instant) -> Instant {
        match self.every {
            Some(e) if self.aligned && now >= self.next && !e.is_zero() => {
                let periods = now.duration_since(self.next).as_nanos() / e.as_nanos();
                let periods = u32::try_from(periods).unwrap_or(u32::MAX);
                self.next + e * periods
            }
            _ => now,
        }
    }

    /// Records the interval that `now` finds due (ending at [`IntervalClock::edge`]) and sends
    /// it to a live display. The list never grows: once the reserve is used up, the newest
    /// stored interval takes it in.
    pub(super) fn record(&mut self, now: Instant, bytes: u64, messages: u64, ch: &DataChannel) {
        let end = self.edge(now);
        self.record_until(end, now, bytes, messages, ch);
    }

    fn record_until(
        &mut self,
        end: Instant,
        now: Instant,
        bytes: u64,
        messages: u64,
        ch: &DataChannel,
    ) {
        let iv = self.measure(end, bytes, messages, ch);
        if self.out.len() < self.out.capacity() {
            self.out.push(iv);
        } else {
            self.merge_into_last(&iv);
        }
        if let Some((tx, stream, role)) = self.live {
            let _ = tx.send(IntervalEvent {
                stream,
                role,
                interval: iv,
            });
        }
        if let Some(e) = self.every {
            while self.next <= now {
                self.next += e;
            }
        }
    }

    /// Closes the last, partial interval. A stub shorter than half an interval is folded into
    /// the previous one rather than printed as a rate over a few microseconds.
    pub(super) fn finish(&mut self, now: Instant, bytes: u64, messages: u64, ch: &DataChannel) {
        let Some(every) = self.every else { return };
        if now <= self.last_at {
            return;
        }
        let stub = now.saturating_duration_since(self.last_at) < every / 2;
        if !stub || self.out.is_empty() {
            self.record_until(now, now, bytes, messages, ch);
            return;
        }
        let iv = self.measure(now, bytes, messages, ch);
        self.merge_into_last(&iv);
    }
    /// Ends the intervals at `end`, before the newest ones (the receiver's cool-down, see
    /// [`crate::transport::Connection::arrival_lead`]): intervals ending later are dropped and
    /// the last one is closed at `end` with `bytes` and `messages` counted up to then.
    pub(super) fn finish_earlier(
        &mut self,
        end: Instant,
        bytes: u64,
        messages: u64,
        ch: &DataChannel,
    ) {
        let end_ns = nanos(self.start, end);
        while self.out.last().is_some_and(|iv| iv.end_ns > end_ns) {
            self.out.pop();
        }
        self.last_bytes = self.out.iter().map(|iv| iv.bytes).sum();
        self.last_messages = self.out.iter().map(|iv| iv.messages).sum();
        if let Some(base) = self.acked_base {
            let kept: u64 = self.out.iter().filter_map(|iv| iv.acked_bytes).sum();
            self.last_acked = Some(base + kept);
        }
        self.last_at = self.out.last().map_or(self.start, |iv| {
            self.start + Duration::from_nanos(iv.end_ns)
        });
        self.finish(end, bytes, messages, ch);
    }

    /// Closes the intervals at `last`, the timed phase's last byte or datagram: intervals
    /// recorded after it (in the silence before the end of the stream was known) lie beyond
    /// the phase and go.
    pub(super) fn close_at(&mut self, last: Instant, bytes: u64, messages: u64, ch: &DataChannel) {
        if self.last_at > last {
            self.finish_earlier(last, bytes, messages, ch);
        } else {
            self.finish(last, bytes, messages, ch);
        }
    }

    pub(super) fn start_at(&mut self, start: Instant) {
        self.start = start;
        self.last_at = start;
        if let Some(e) = self.every {
            let every_ns = u64::try_from(e.as_nanos()).unwrap_or(u64::MAX);
            let first = match super::monotonic_ns(start) {
                Some(at) if self.aligned => Duration::from_nanos(first_edge_after(at, every_ns)),
                _ => e,
            };
            self.next = start + first;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_interval_list_is_reserved_before_the_phase_and_never_grows_in_it() {
        // 10 ms intervals over an expected 100 ms: 14 reserved. A phase that runs 100 times
        // longer records into them without a single allocation; the newest takes in the rest,
        // and every byte and the whole span stay accounted for.
        let ch = super::super::clock_tests::idle_channel();
        let ms = Duration::from_millis(1);
        let t0 = Instant::now();
        let (tx, rx) = mpsc::channel();
        let live = Some((&tx, 0, Role::Sender));
        let mut c = IntervalClock::new(Some(10 * ms), Some(100 * ms), t0, live);
        c.start_at(t0);
        let reserved = c.out.capacity();
        assert!(reserved >= 14);
        for k in 1..=1000u64 {
            let now = t0 + 10 * ms * k as u32;
            assert!(c.due(now));
            c.record(now, k * 100, k, &ch);
            assert_eq!(c.out.capacity(), reserved, "grew at record {k}");
        }
        c.finish(t0 + 10_005 * ms, 100_000, 1000, &ch);
        assert_eq!(c.out.capacity(), reserved);
        assert_eq!(c.out.len(), reserved);
        assert_eq!(c.out.iter().map(|iv| iv.bytes).sum::<u64>(), 100_000);
        let last = c.out.last().unwrap();
        assert_eq!(last.end_ns, 10_005_000_000);
        // A live display still gets every period's report.
        assert_eq!(rx.try_iter().count(), 1001);
        // The folded interval's rate is its bytes over its whole span.
        let span = last.end_ns - last.start_ns;
        assert!((last.bits_per_s - last.bytes as f64 * 8e9 / span as f64).abs() < 1e-6);
        // Without a known length, a fixed reserve.
        let c = IntervalClock::new(Some(10 * ms), None, t0, None);
        assert!(c.out.capacity() >= UNKNOWN_SPAN);
    }

    #[test]
    fn aligned_streams_share_their_interval_edges_and_the_first_is_never_a_stub() {
        let every = 225_000_000;
        // Phases starting anywhere end their first interval on a multiple of the interval,
        // half an interval to one and a half after their start.
        for start in [
            0,
            1,
            112_499_999,
            112_500_000,
            224_999_999,
            9 * every + 7,
            30_000_000,
        ] {
            let d = first_edge_after(start, every);
            assert_eq!((start + d) % every, 0, "start {start}");
            assert!(
                d >= every / 2 && d < every + every / 2 + 1,
                "start {start}: {d}"
            );
        }
        assert_eq!(first_edge_after(0, every), every);
        assert_eq!(first_edge_after(100_000_000, every), 125_000_000);
        assert_eq!(first_edge_after(200_000_000, every), 250_000_000);
        assert_eq!(first_edge_after(5, 0), 0);
        // Two clocks on one host, started 136 ms apart, record at the same instants.
        let ch = super::super::clock_tests::idle_channel();
        let e = Duration::from_nanos(every);
        let t0 = Instant::now();
        let mut a = IntervalClock::new(Some(e), Some(e * 4), t0, None).aligned(true);
        let mut b = IntervalClock::new(Some(e), Some(e * 4), t0, None).aligned(true);
        a.start_at(t0);
        b.start_at(t0 + Duration::from_millis(136));
        let edges = |c: &mut IntervalClock<'_>| {
            let mut at = Vec::new();
            let mut now = c.start;
            while at.len() < 3 {
                now += Duration::from_micros(250);
                if c.due(now) {
                    c.record(now, 0, 0, &ch);
                    at.push(now);
                }
            }
            at
        };
        let (ea, eb) = (edges(&mut a), edges(&mut b));
        // b's first edge is a's first or second: after it, they share every edge.
        assert!(ea[..2].contains(&eb[0]), "{ea:?} {eb:?}");
        assert!(ea.iter().filter(|x| eb.contains(x)).count() >= 2);
        // Each interval ends on the grid point, not at the step (up to 250 us later) that
        // found it due (within the microsecond of reading the two clocks for the grid).
        for c in [&a, &b] {
            let at = super::super::monotonic_ns(c.start).unwrap();
            for iv in &c.out {
                let off = (at + iv.end_ns) % every;
                assert!(off.min(every - off) < 20_000, "{iv:?}: {off}");
            }
        }
        // A silence across two grid points: the interval ends at the later one.
        let mut c = IntervalClock::new(Some(e), Some(e * 8), t0, None).aligned(true);
        c.start_at(t0);
        let first = c.next;
        c.record(first + e + e / 3, 1, 1, &ch);
        assert_eq!(c.out[0].end_ns, nanos(t0, first + e));
        assert_eq!(c.next, first + 2 * e);
        // Unaligned, each clock's edges are its own.
        let mut c = IntervalClock::new(Some(e), None, t0, None);
        c.start_at(t0 + Duration::from_millis(136));
        assert_eq!(c.next, t0 + Duration::from_millis(136) + e);
    }
}
