//! One-way bulk transfer (nttcp, netperf TCP_STREAM, iperf). The sender and the receiver each
//! time their own side over their own clock; neither figure is ever copied into the other.
//!
//! Warm-up: the first `warmup` writes are not timed. The receiver's clock starts with the read
//! that completes the warm-up bytes (or with the first read when there is no warm-up), and the
//! bytes of that read are not counted, since they arrived before its clock started.
//! On unreliable transports every datagram carries a sequence number and a send timestamp.

use std::io;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use super::{nanos, payload, CpuMeter, CpuTime, DataChannel, Role, StopAt};
use crate::sys::TcpInfo;

/// Header of a datagram on an unreliable transport: sequence number and send time (ns since
/// the sender's start; only differences are used, so the clocks need not agree).
pub const DATAGRAM_HEADER: usize = 16;

/// How often an idle unreliable receiver wakes up to look at the end signal.
const POLL: Duration = Duration::from_millis(50);

/// After the sender is done, an unreliable receiver stops once nothing arrived for this long
/// (datagrams still queued on a slow link keep it going).
pub const DRAIN_IDLE: Duration = Duration::from_millis(500);

/// Pacing of the sender: one write every `interval_ns`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Pace {
    pub interval_ns: f64,
}

#[derive(Debug, Clone)]
pub struct SendPlan {
    pub write_size: usize,
    pub stop: StopAt,
    pub warmup: u64,
    pub pace: Option<Pace>,
    pub interval: Option<Duration>,
}

#[derive(Debug, Clone)]
pub struct RecvPlan {
    pub read_size: usize,
    /// Bytes (reliable) or datagrams (unreliable) of warm-up to skip.
    pub warmup_bytes: u64,
    pub warmup_datagrams: u64,
    pub interval: Option<Duration>,
}

/// Told to a receiver by its control thread: the sender finished, having sent `sent` timed
/// datagrams; or the test is being torn down (`abort`).
#[derive(Debug, Default)]
pub struct EndSignal {
    pub done: AtomicBool,
    pub sent_datagrams: AtomicU64,
    pub abort: AtomicBool,
}

/// One interval report.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Interval {
    /// Seconds since this side's timed phase began.
    pub start_s: f64,
    pub end_s: f64,
    pub bytes: u64,
    pub messages: u64,
    /// Rate over this interval, bits per second (decimal).
    pub bits_per_s: f64,
    /// The kernel's TCP state at the end of the interval (TCP only).
    pub tcp_info: Option<TcpInfo>,
    /// Segments retransmitted during the interval (TCP only).
    pub retransmits: Option<u32>,
}

/// An interval as it goes to a live display.
#[derive(Debug, Clone, Copy)]
pub struct IntervalEvent {
    pub stream: u32,
    pub role: Role,
    pub interval: Interval,
}

/// Receiver-side accounting of datagrams.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct LossStats {
    /// Timed datagrams the sender sent successfully.
    pub sent: u64,
    /// Distinct timed datagrams received.
    pub received: u64,
    /// sent - received.
    pub lost: u64,
    /// lost / sent.
    pub loss_ratio: f64,
    pub duplicated: u64,
    /// Datagrams that arrived after one with a higher sequence number.
    pub reordered: u64,
    /// RFC 3550 interarrival jitter, seconds.
    pub jitter_s: f64,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct StreamStats {
    pub role: Option<Role>,
    /// All bytes moved, warm-up included.
    pub bytes_total: u64,
    /// Bytes moved inside the timed phase.
    pub bytes_timed: u64,
    /// Writes (sender) or reads (receiver) in the timed phase; datagrams for message transports.
    pub messages_timed: u64,
    /// Length of the timed phase on this side's clock, seconds.
    pub elapsed_s: f64,
    /// bytes_timed * 8 / elapsed_s; 0 when nothing was timed.
    pub bits_per_s: f64,
    /// Duration of the first write (sender) or the wait for the first byte (receiver), ns.
    pub first_op_ns: Option<u64>,
    /// Sends the kernel refused for lack of buffer (ENOBUFS, EAGAIN): not network loss.
    pub send_failures: u64,
    pub loss: Option<LossStats>,
    pub intervals: Vec<Interval>,
    pub tcp_info: Option<TcpInfo>,
    pub cpu: CpuTime,
}

fn rate(bytes: u64, secs: f64) -> f64 {
    if secs > 0.0 {
        bytes as f64 * 8.0 / secs
    } else {
        0.0
    }
}

/// Records intervals without allocating in the loop: the vector is sized up front.
struct IntervalClock<'a> {
    every: Option<Duration>,
    next: Instant,
    start: Instant,
    last_at: Instant,
    last_bytes: u64,
    last_messages: u64,
    last_retrans: u32,
    out: Vec<Interval>,
    live: Option<(&'a mpsc::Sender<IntervalEvent>, u32, Role)>,
}

impl<'a> IntervalClock<'a> {
    fn new(
        every: Option<Duration>,
        expected: Option<Duration>,
        start: Instant,
        live: Option<(&'a mpsc::Sender<IntervalEvent>, u32, Role)>,
    ) -> Self {
        let cap = match (every, expected) {
            (Some(e), Some(d)) if !e.is_zero() => (d.as_secs_f64() / e.as_secs_f64()) as usize + 4,
            (Some(_), None) => 64,
            _ => 0,
        };
        IntervalClock {
            every,
            next: every.map(|e| start + e).unwrap_or(start),
            start,
            last_at: start,
            last_bytes: 0,
            last_messages: 0,
            last_retrans: 0,
            out: Vec::with_capacity(cap.min(1 << 20)),
            live,
        }
    }

    #[inline]
    fn due(&self, now: Instant) -> bool {
        self.every.is_some() && now >= self.next
    }

    fn record(&mut self, now: Instant, bytes: u64, messages: u64, ch: &DataChannel) {
        let tcp_info = ch.connection().tcp_info();
        let retransmits = tcp_info.map(|t| t.total_retrans.saturating_sub(self.last_retrans));
        if let Some(t) = tcp_info {
            self.last_retrans = t.total_retrans;
        }
        let secs = now.saturating_duration_since(self.last_at).as_secs_f64();
        let iv = Interval {
            start_s: self
                .last_at
                .saturating_duration_since(self.start)
                .as_secs_f64(),
            end_s: now.saturating_duration_since(self.start).as_secs_f64(),
            bytes: bytes - self.last_bytes,
            messages: messages - self.last_messages,
            bits_per_s: rate(bytes - self.last_bytes, secs),
            tcp_info,
            retransmits,
        };
        self.out.push(iv);
        if let Some((tx, stream, role)) = self.live {
            let _ = tx.send(IntervalEvent {
                stream,
                role,
                interval: iv,
            });
        }
        self.last_at = now;
        self.last_bytes = bytes;
        self.last_messages = messages;
        if let Some(e) = self.every {
            while self.next <= now {
                self.next += e;
            }
        }
    }

    /// Closes the last, partial interval. A stub shorter than half an interval is folded into
    /// the previous one rather than printed as a rate over a few microseconds.
    fn finish(&mut self, now: Instant, bytes: u64, messages: u64, ch: &DataChannel) {
        let Some(every) = self.every else { return };
        if now <= self.last_at {
            return;
        }
        let stub = now.saturating_duration_since(self.last_at) < every / 2;
        match self.out.last_mut() {
            Some(prev) if stub => {
                prev.bytes += bytes - self.last_bytes;
                prev.messages += messages - self.last_messages;
                prev.end_s = now.saturating_duration_since(self.start).as_secs_f64();
                prev.bits_per_s = rate(prev.bytes, prev.end_s - prev.start_s);
                self.last_at = now;
                self.last_bytes = bytes;
                self.last_messages = messages;
            }
            _ => self.record(now, bytes, messages, ch),
        }
    }

    fn start_at(&mut self, start: Instant) {
        self.start = start;
        self.last_at = start;
        if let Some(e) = self.every {
            self.next = start + e;
        }
    }
}

fn is_send_failure(e: &io::Error) -> bool {
    e.raw_os_error() == Some(libc::ENOBUFS)
        || matches!(
            e.kind(),
            io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
        )
}

/// Sends until the plan's stop condition, then signals end of data (on byte streams).
/// `stream` and `live` label live interval reports.
pub fn run_sender(
    ch: &mut DataChannel,
    plan: &SendPlan,
    stream: u32,
    live: Option<&mpsc::Sender<IntervalEvent>>,
) -> io::Result<StreamStats> {
    let cpu = CpuMeter::start();
    let caps = ch.capabilities();
    let tagged = !caps.reliable;
    let write_size = plan
        .write_size
        .max(if tagged { DATAGRAM_HEADER } else { 1 });
    let mut buf = payload(write_size);
    let epoch = Instant::now();
    let mut stats = StreamStats {
        role: Some(Role::Sender),
        ..StreamStats::default()
    };
    let mut seq: u64 = 0;

    // Warm-up: whole messages, so that the receiver can count warm-up bytes exactly.
    for i in 0..plan.warmup {
        if tagged {
            buf[..8].copy_from_slice(&seq.to_le_bytes());
            buf[8..16].copy_from_slice(&nanos(epoch, Instant::now()).to_le_bytes());
        }
        let t = Instant::now();
        match ch.send_message(&buf) {
            Ok(()) => {}
            Err(e) if tagged && is_send_failure(&e) => {}
            Err(e) => return Err(e),
        }
        if i == 0 {
            stats.first_op_ns = Some(nanos(t, Instant::now()));
        }
        seq += 1;
        stats.bytes_total += write_size as u64;
    }

    let start = Instant::now();
    let deadline = plan.stop.deadline(start);
    let byte_limit = plan.stop.bytes.unwrap_or(u64::MAX);
    let iter_limit = plan.stop.iterations.unwrap_or(u64::MAX);
    let mut intervals = IntervalClock::new(
        plan.interval,
        plan.stop.duration,
        start,
        live.map(|tx| (tx, stream, Role::Sender)),
    );
    let mut bytes: u64 = 0;
    let mut messages: u64 = 0;
    let mut attempts: u64 = 0;
    let mut now = start;
    while bytes < byte_limit && attempts < iter_limit && deadline.is_none_or(|d| now < d) {
        if let Some(p) = plan.pace {
            let due = start + Duration::from_nanos((attempts as f64 * p.interval_ns) as u64);
            // The next write would fall after the end of the test: the test is over.
            if deadline.is_some_and(|d| due >= d) {
                break;
            }
            wait_until(due, now);
        }
        let len = if tagged {
            write_size
        } else {
            (byte_limit - bytes).min(write_size as u64) as usize
        };
        if tagged {
            buf[..8].copy_from_slice(&seq.to_le_bytes());
            buf[8..16].copy_from_slice(&nanos(epoch, Instant::now()).to_le_bytes());
        }
        attempts += 1;
        match ch.send_some(&buf[..len]) {
            Ok(n) => {
                bytes += n as u64;
                messages += 1;
                seq += 1;
            }
            Err(e) if tagged && is_send_failure(&e) => stats.send_failures += 1,
            Err(e) => return Err(e),
        }
        now = Instant::now();
        if intervals.due(now) {
            intervals.record(now, bytes, messages, ch);
        }
    }
    // A paced sender owns one pacing slot per write: its phase ends where the last slot does,
    // so that a sender on schedule reports exactly the configured rate.
    let end = match plan.pace {
        Some(p) => now.max(start + Duration::from_nanos((attempts as f64 * p.interval_ns) as u64)),
        None => now,
    };
    intervals.finish(end, bytes, messages, ch);
    stats.tcp_info = ch.connection().tcp_info();
    if caps.reliable {
        ch.shutdown_write()?;
    }
    stats.bytes_total += bytes;
    stats.bytes_timed = bytes;
    stats.messages_timed = messages;
    stats.elapsed_s = end.saturating_duration_since(start).as_secs_f64();
    stats.bits_per_s = rate(bytes, stats.elapsed_s);
    stats.intervals = intervals.out;
    stats.cpu = cpu.stop();
    Ok(stats)
}

/// Sleeps for most of the wait and spins the last stretch, so pacing is exact without
/// burning a core at low rates.
#[inline]
fn wait_until(due: Instant, now: Instant) {
    if due <= now {
        return;
    }
    // Sleep until shortly before the slot (the kernel's default timer slack is 50 us), then
    // spin the rest: exact pacing without burning a core at low rates.
    let left = due - now;
    if left > Duration::from_micros(100) {
        std::thread::sleep(left - Duration::from_micros(60));
    }
    while Instant::now() < due {
        std::hint::spin_loop();
    }
}

/// Receives until end of data: EOF on a byte stream; on a datagram transport, the sender's
/// "done" signal plus either every datagram accounted for or [`DRAIN_IDLE`] of silence.
pub fn run_receiver(
    ch: &mut DataChannel,
    plan: &RecvPlan,
    end: &EndSignal,
    io_timeout: Duration,
    stream: u32,
    live: Option<&mpsc::Sender<IntervalEvent>>,
) -> io::Result<StreamStats> {
    let cpu = CpuMeter::start();
    let caps = ch.capabilities();
    let mut stats = StreamStats {
        role: Some(Role::Receiver),
        ..StreamStats::default()
    };
    let waiting_since = Instant::now();
    if caps.reliable {
        receive_bytes(
            ch,
            plan,
            &mut stats,
            io_timeout,
            stream,
            live,
            waiting_since,
        )?;
    } else {
        receive_datagrams(ch, plan, end, &mut stats, stream, live, waiting_since)?;
    }
    stats.tcp_info = ch.connection().tcp_info();
    stats.bits_per_s = rate(stats.bytes_timed, stats.elapsed_s);
    stats.cpu = cpu.stop();
    Ok(stats)
}

fn receive_bytes(
    ch: &mut DataChannel,
    plan: &RecvPlan,
    stats: &mut StreamStats,
    io_timeout: Duration,
    stream: u32,
    live: Option<&mpsc::Sender<IntervalEvent>>,
    waiting_since: Instant,
) -> io::Result<()> {
    ch.set_read_timeout(io_timeout)?;
    let mut buf = vec![0u8; plan.read_size.max(1)];
    let mut total: u64 = 0;
    // Warm-up and the read that completes it.
    loop {
        let n = ch.recv_some(&mut buf)? as u64;
        if n == 0 {
            stats.bytes_total = total;
            return Ok(());
        }
        if total == 0 {
            stats.first_op_ns = Some(nanos(waiting_since, Instant::now()));
        }
        total += n;
        if total >= plan.warmup_bytes {
            break;
        }
    }
    let start = Instant::now();
    let mut intervals = IntervalClock::new(
        plan.interval,
        None,
        start,
        live.map(|tx| (tx, stream, Role::Receiver)),
    );
    intervals.start_at(start);
    let mut bytes: u64 = 0;
    let mut reads: u64 = 0;
    let mut last = start;
    loop {
        let n = ch.recv_some(&mut buf)?;
        if n == 0 {
            break;
        }
        last = Instant::now();
        bytes += n as u64;
        reads += 1;
        if intervals.due(last) {
            intervals.record(last, bytes, reads, ch);
        }
    }
    intervals.finish(last, bytes, reads, ch);
    stats.bytes_total = total + bytes;
    stats.bytes_timed = bytes;
    stats.messages_timed = reads;
    stats.elapsed_s = last.saturating_duration_since(start).as_secs_f64();
    stats.intervals = intervals.out;
    Ok(())
}

fn receive_datagrams(
    ch: &mut DataChannel,
    plan: &RecvPlan,
    end: &EndSignal,
    stats: &mut StreamStats,
    stream: u32,
    live: Option<&mpsc::Sender<IntervalEvent>>,
    waiting_since: Instant,
) -> io::Result<()> {
    ch.set_read_timeout(POLL)?;
    let mut buf = vec![0u8; 65_536.max(plan.read_size)];
    let warmup = plan.warmup_datagrams;
    let mut seqs = SeqTracker::new();
    let epoch = Instant::now();
    let mut jitter = Jitter::default();
    let mut start: Option<Instant> = None;
    let mut intervals = IntervalClock::new(
        plan.interval,
        None,
        epoch,
        live.map(|tx| (tx, stream, Role::Receiver)),
    );
    let mut total: u64 = 0;
    let mut bytes: u64 = 0;
    let mut datagrams: u64 = 0;
    let mut last = epoch;
    let mut last_arrival = epoch;
    loop {
        let now;
        match ch.recv_some(&mut buf) {
            Ok(n) if n >= DATAGRAM_HEADER => {
                now = Instant::now();
                last_arrival = now;
                if total == 0 {
                    stats.first_op_ns = Some(nanos(waiting_since, now));
                }
                total += n as u64;
                let seq = u64::from_le_bytes(buf[..8].try_into().unwrap_or([0; 8]));
                let sent_ns = u64::from_le_bytes(buf[8..16].try_into().unwrap_or([0; 8]));
                if seq >= warmup {
                    seqs.observe(seq - warmup);
                    jitter.observe(sent_ns, nanos(epoch, now));
                    match start {
                        None => {
                            // The first timed datagram starts the clock and is not counted.
                            start = Some(now);
                            intervals.start_at(now);
                        }
                        Some(_) => {
                            bytes += n as u64;
                            datagrams += 1;
                            last = now;
                            if intervals.due(now) {
                                intervals.record(now, bytes, datagrams, ch);
                            }
                        }
                    }
                }
            }
            Ok(_) => {
                now = Instant::now(); // a runt: not ours
            }
            Err(e) if e.kind() == io::ErrorKind::TimedOut => {
                now = Instant::now();
            }
            Err(e) => return Err(e),
        }
        if end.abort.load(Ordering::Relaxed) {
            break;
        }
        if end.done.load(Ordering::Acquire) {
            let sent = end.sent_datagrams.load(Ordering::Acquire);
            if seqs.unique >= sent || now.saturating_duration_since(last_arrival) >= DRAIN_IDLE {
                break;
            }
        }
    }
    let start = start.unwrap_or(last);
    intervals.finish(last, bytes, datagrams, ch);
    let sent = end.sent_datagrams.load(Ordering::Acquire);
    let lost = sent.saturating_sub(seqs.unique);
    stats.loss = Some(LossStats {
        sent,
        received: seqs.unique,
        lost,
        loss_ratio: if sent > 0 {
            lost as f64 / sent as f64
        } else {
            0.0
        },
        duplicated: seqs.duplicated,
        reordered: seqs.reordered,
        jitter_s: jitter.value_ns / 1e9,
    });
    stats.bytes_total = total;
    stats.bytes_timed = bytes;
    stats.messages_timed = datagrams;
    stats.elapsed_s = last.saturating_duration_since(start).as_secs_f64();
    stats.intervals = intervals.out;
    Ok(())
}

/// RFC 3550 interarrival jitter: J += (|D| - J) / 16 over transit-time differences.
#[derive(Default)]
struct Jitter {
    prev_transit: Option<i128>,
    value_ns: f64,
}

impl Jitter {
    #[inline]
    fn observe(&mut self, sent_ns: u64, arrived_ns: u64) {
        let transit = arrived_ns as i128 - sent_ns as i128;
        if let Some(prev) = self.prev_transit {
            let d = (transit - prev).unsigned_abs() as f64;
            self.value_ns += (d - self.value_ns) / 16.0;
        }
        self.prev_transit = Some(transit);
    }
}

/// Counts distinct, duplicated and reordered sequence numbers in O(1) per datagram, with a
/// fixed sliding window of remembered numbers (no allocation after construction).
pub struct SeqTracker {
    bits: Vec<u64>,
    highest: Option<u64>,
    pub unique: u64,
    pub duplicated: u64,
    pub reordered: u64,
}

const WINDOW: u64 = 1 << 20;

impl Default for SeqTracker {
    fn default() -> Self {
        Self::new()
    }
}

impl SeqTracker {
    pub fn new() -> SeqTracker {
        SeqTracker {
            bits: vec![0; (WINDOW / 64) as usize],
            highest: None,
            unique: 0,
            duplicated: 0,
            reordered: 0,
        }
    }

    #[inline]
    fn slot(seq: u64) -> (usize, u64) {
        let i = seq % WINDOW;
        ((i / 64) as usize, 1u64 << (i % 64))
    }

    #[inline]
    pub fn observe(&mut self, seq: u64) {
        match self.highest {
            Some(h) if seq > h => {
                // Forget the numbers that slide out of the window as it advances.
                let gap = seq - h;
                if gap >= WINDOW {
                    self.bits.iter_mut().for_each(|w| *w = 0);
                } else {
                    for s in h + 1..=seq {
                        let (w, b) = Self::slot(s);
                        self.bits[w] &= !b;
                    }
                }
                self.highest = Some(seq);
            }
            Some(h) if h - seq >= WINDOW => {
                // Too old to tell a duplicate from a late original: count it as late.
                self.unique += 1;
                self.reordered += 1;
                return;
            }
            Some(_) => {}
            None => self.highest = Some(seq),
        }
        let (w, b) = Self::slot(seq);
        if self.bits[w] & b != 0 {
            self.duplicated += 1;
            return;
        }
        self.bits[w] |= b;
        self.unique += 1;
        if self.highest.is_some_and(|h| seq < h) {
            self.reordered += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seq_tracker_counts_loss_duplicates_and_reordering() {
        let mut t = SeqTracker::new();
        for s in [0, 1, 3, 2, 2, 5, 4, 7] {
            t.observe(s);
        }
        assert_eq!(t.unique, 7); // 0..=7 without 6
        assert_eq!(t.duplicated, 1); // the second 2
        assert_eq!(t.reordered, 2); // 2 after 3, 4 after 5
    }

    #[test]
    fn seq_tracker_handles_large_gaps() {
        let mut t = SeqTracker::new();
        t.observe(0);
        t.observe(3 * WINDOW);
        t.observe(3 * WINDOW);
        assert_eq!((t.unique, t.duplicated), (2, 1));
    }

    #[test]
    fn jitter_of_constant_transit_is_zero_and_grows_with_variation() {
        let mut j = Jitter::default();
        for i in 0..100u64 {
            j.observe(i * 1000, i * 1000 + 500);
        }
        assert_eq!(j.value_ns, 0.0);
        j.observe(100_000, 100_000 + 500 + 1600);
        assert!((j.value_ns - 100.0).abs() < 1e-9);
    }
}
