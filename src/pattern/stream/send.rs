//! The sending side of a stream: byte streams through write, sendfile or MSG_ZEROCOPY;
//! datagrams one per call, batched with sendmmsg, or segmented by the kernel (UDP GSO).
//!
//! A paced sender paces its warm-up too, on the timed phase's schedule (see the `stream`
//! module). A byte-stream sender keeps time while its writes cannot complete: on a blocking
//! socket the write timeout is [`super::STALL_CHECK`] for the timed phase, a write that times
//! out is progress not made yet, and the loop records the intervals due and looks at its
//! deadline before it tries again; only when no byte moved for `--io-timeout` does it fail.

use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::sync::atomic::AtomicBool;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use super::intervals::{reserved_bytes, IntervalClock};
use super::{
    aborted, busy_poll, gave_up_waiting, rate, stall_check, stopped, IntervalEvent, Pace, SendPlan,
    StreamStats, ABORT_CHECK, DATAGRAM_HEADER,
};
use crate::model::socket::SentSegments;
use crate::pattern::channel::timed_out;
use crate::pattern::{nanos, payload, CpuMeter, DataChannel, Role};
use crate::sys::fastpath::{self, Batch, ZerocopyCompletions, UDP_MAX_SEGMENTS};
use crate::transport::Capabilities;

/// Bytes of each write of a byte-stream sender.
fn byte_write_size(plan: &SendPlan) -> usize {
    plan.write_size.max(1)
}

/// Bytes of each datagram: the write size, and at least the header it carries.
fn datagram_size(plan: &SendPlan) -> usize {
    plan.write_size.max(DATAGRAM_HEADER)
}

/// Datagrams of `size` bytes one UDP GSO send carries: as many as one send of 64 KiB holds.
fn gso_segments(size: usize) -> usize {
    UDP_MAX_SEGMENTS.min(65_000 / size.max(1))
}

/// What a stream sender following `plan` over a transport with `caps` allocates at most,
/// bytes, from the sizes its own buffers are made with: on a byte stream its payload (and
/// sendfile's copy of it in a memory file), on datagrams the warm-up datagram beside the
/// largest writer it may choose (a batch or a GSO send, each filled from one model datagram);
/// and its interval reports. An upper bound: a fast path that falls back holds less. A server
/// charges each of its sending streams this (control/budget.rs).
pub fn sender_footprint(plan: &SendPlan, caps: &Capabilities) -> u64 {
    let reports = reserved_bytes(plan.interval, plan.stop.duration);
    let buffers = if caps.reliable {
        let w = byte_write_size(plan) as u64;
        if plan.fast.sendfile {
            w.saturating_mul(2)
        } else {
            w
        }
    } else {
        let size = datagram_size(plan);
        let one = size as u64;
        let gso = if plan.fast.gso && gso_segments(size) > 1 {
            ((gso_segments(size) * size) as u64).saturating_add(one)
        } else {
            0
        };
        let batch = match plan.fast.batch.max(1) as usize {
            1 => 0,
            n => Batch::footprint(n, size).saturating_add(one),
        };
        one.saturating_add(one.max(gso).max(batch))
    };
    buffers.saturating_add(reports)
}

/// Refusals by the sender's own kernel (no buffer space), counted apart from network loss.
fn is_send_failure(e: &io::Error) -> bool {
    e.raw_os_error() == Some(libc::ENOBUFS) || gave_up_waiting(e)
}

/// Whether a byte-stream sender still moves: when its last byte went, so that a write the
/// kernel had no room for is progress not made yet, and only `--io-timeout` without a byte
/// taken fails the test.
struct StallWatch {
    moved_at: Instant,
    limit: std::time::Duration,
}

impl StallWatch {
    /// The outcome of one write at `now`: the bytes taken (0 when the kernel had no room, see
    /// [`gave_up_waiting`]), or the error that ends the test.
    #[inline]
    fn taken(&mut self, r: io::Result<usize>, now: Instant) -> io::Result<usize> {
        let n = match r {
            Ok(n) => n,
            Err(e) if gave_up_waiting(&e) => 0,
            Err(e) => return Err(e),
        };
        if n > 0 {
            self.moved_at = now;
        } else if now.saturating_duration_since(self.moved_at) >= self.limit {
            return Err(timed_out());
        }
        Ok(n)
    }

    /// Nothing could move before a pacing slot at `due`: waiting for it is not a stall.
    #[inline]
    fn waited_until(&mut self, due: Instant) {
        self.moved_at = self.moved_at.max(due);
    }
}

/// `Instant` `ns` nanoseconds after `t`.
#[inline]
fn after(t: Instant, ns: f64) -> Instant {
    t + Duration::from_nanos(ns as u64)
}

/// When warm-up write (or datagram) `i` may leave, `warm_start` being the warm-up's start: on
/// the timed phase's schedule when paced, at once otherwise (None).
#[inline]
fn warmup_slot(pace: Option<Pace>, warm_start: Instant, i: u64) -> Option<Instant> {
    pace.map(|p| after(warm_start, p.due_ns(i)))
}

/// When the timed phase of a paced sender begins after `warmup` paced writes: where the step
/// of the last warm-up write ends, so that the two phases are one schedule and no step lets
/// out more than its burst. None when unpaced: the timed phase begins when the warm-up ends.
fn timed_start(pace: Option<Pace>, warm_start: Instant, warmup: u64) -> Option<Instant> {
    pace.map(|p| after(warm_start, p.end_ns(warmup)))
}

/// Waits for the timed phase's start when the sender is paced; returns the start.
fn begin_timed(plan: &SendPlan, warm_start: Instant) -> io::Result<Instant> {
    let now = Instant::now();
    Ok(match timed_start(plan.pace, warm_start, plan.warmup) {
        Some(due) if due > now => {
            wait_until(due, now, plan.abort)?;
            due
        }
        _ => now,
    })
}

/// Sleeps for most of the wait and spins the last stretch, so pacing is exact without
/// burning a core at low rates (the kernel's default timer slack is 50 us). Sleeps at most
/// [`ABORT_CHECK`] at a time and fails with [`stopped`] once `abort` is set: a sender paced
/// at one write a day must not outlive its test (it held a server's slot after its client
/// was killed).
#[inline]
fn wait_until(due: Instant, now: Instant, abort: Option<&AtomicBool>) -> io::Result<()> {
    if due <= now {
        return Ok(());
    }
    let mut left = due - now;
    while left > Duration::from_micros(100) {
        if aborted(abort) {
            return Err(stopped());
        }
        std::thread::sleep((left - Duration::from_micros(60)).min(ABORT_CHECK));
        left = due.saturating_duration_since(Instant::now());
    }
    while Instant::now() < due {
        std::hint::spin_loop();
    }
    Ok(())
}

/// How often a byte-stream sender looks whether its warm-up has been acknowledged.
const DELIVERY_CHECK: Duration = Duration::from_micros(50);

/// Waits until the peer has acknowledged `bytes_acked` bytes in all (TCP_INFO), so that the
/// timed phase begins once the warm-up has been delivered. A warm-up that stalls in flight
/// (a window smaller than a segment, a lost segment waiting for its retransmission) then
/// stalls neither side's phase: the receiver's clock starts with the first timed byte, and
/// the sender's with the first timed write, made after this wait (see the `stream` module).
/// Fails as a stalled write would once nothing more was acknowledged for `io_timeout`.
fn wait_delivered(
    ch: &DataChannel,
    bytes_acked: u64,
    io_timeout: Duration,
    abort: Option<&AtomicBool>,
) -> io::Result<()> {
    let mut seen = 0;
    let mut moved_at = Instant::now();
    loop {
        let Some(acked) = ch.connection().tcp_info().map(|t| t.bytes_acked) else {
            return Ok(());
        };
        if acked >= bytes_acked {
            return Ok(());
        }
        if aborted(abort) {
            return Err(stopped());
        }
        let now = Instant::now();
        if acked > seen {
            seen = acked;
            moved_at = now;
        } else if now.saturating_duration_since(moved_at) >= io_timeout {
            return Err(timed_out());
        }
        std::thread::sleep(DELIVERY_CHECK);
    }
}

/// How long a sender waits at its end for acknowledgements that do not come before it reads
/// its final count anyway (marked not settled).
const SETTLE_STALL: Duration = Duration::from_secs(1);
/// How often it looks (after the timed phase: the cost is not measured).
const SETTLE_CHECK: Duration = Duration::from_millis(1);

/// A TCP sender's final count of the segments it sent (TCP_INFO), read after its shutdown
/// once the peer has acknowledged everything, the FIN included: nothing is sent on the
/// connection after that but pure ACKs (unless the peer sends data), so the data count is
/// final. The receiver reads to the end of the stream meanwhile, so the wait ends about when
/// its read does. Gives up (not settled) when nothing more is acknowledged for
/// [`SETTLE_STALL`], the connection is closed, or the test is torn down.
fn final_count(ch: &DataChannel, abort: Option<&AtomicBool>) -> Option<SentSegments> {
    /// `TCP_CLOSE` (include/net/tcp_states.h): reset or fully closed.
    const TCP_CLOSE: u8 = 7;
    let fd = ch.connection().socket_fd()?;
    let mut acked = 0;
    let mut moved_at = Instant::now();
    loop {
        let t = crate::sys::tcp_info(fd)?;
        let settled = t.unacked == 0 && t.notsent_bytes == 0;
        if settled
            || t.state[0] == TCP_CLOSE
            || aborted(abort)
            || moved_at.elapsed() >= SETTLE_STALL
        {
            return Some(SentSegments {
                data_segs_out: u64::from(t.data_segs_out),
                segs_out: u64::from(t.segs_out),
                total_retrans: t.total_retrans,
                snd_mss: t.snd_mss,
                settled,
            });
        }
        if t.bytes_acked > acked {
            acked = t.bytes_acked;
            moved_at = Instant::now();
        }
        std::thread::sleep(SETTLE_CHECK);
    }
}

/// Where the timed phase stands: shared by both senders.
struct Progress {
    start: Instant,
    deadline: Option<Instant>,
    bytes: u64,
    messages: u64,
    /// Pacing slots used: writes completed (byte streams) or datagrams attempted.
    attempts: u64,
    byte_limit: u64,
    iter_limit: u64,
}

/// The interval clock of a sender's timed phase.
fn sender_intervals<'a>(
    plan: &SendPlan,
    start: Instant,
    stream: u32,
    live: Option<&'a mpsc::Sender<IntervalEvent>>,
) -> IntervalClock<'a> {
    IntervalClock::new(
        plan.interval,
        plan.stop.duration,
        start,
        live.map(|tx| (tx, stream, Role::Sender)),
    )
    .aligned(plan.align_intervals)
}

impl Progress {
    /// Whether the timed phase goes on at `now`: no limit reached yet.
    #[inline]
    fn more(&self, now: Instant) -> bool {
        self.bytes < self.byte_limit
            && self.attempts < self.iter_limit
            && self.deadline.is_none_or(|d| now < d)
    }

    fn new(plan: &SendPlan, start: Instant) -> Progress {
        Progress {
            start,
            deadline: plan.stop.deadline(start),
            bytes: 0,
            messages: 0,
            attempts: 0,
            byte_limit: plan.stop.bytes.unwrap_or(u64::MAX),
            iter_limit: plan.stop.iterations.unwrap_or(u64::MAX),
        }
    }

    /// The time write (or datagram) `k` may leave: the start of its pacing step.
    #[inline]
    fn slot(&self, plan: &SendPlan, k: u64) -> Option<Instant> {
        plan.pace
            .map(|p| self.start + Duration::from_nanos(p.due_ns(k) as u64))
    }

    /// A paced sender owns one pacing slot per write: its phase ends where the step of its
    /// last write does, so that a sender on schedule reports exactly the configured rate.
    fn end(&self, plan: &SendPlan, now: Instant) -> Instant {
        plan.pace.map_or(now, |p| {
            now.max(self.start + Duration::from_nanos(p.end_ns(self.attempts) as u64))
        })
    }
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
    let reliable = ch.capabilities().reliable;
    let mut stats = StreamStats {
        role: Some(Role::Sender),
        ..StreamStats::default()
    };
    busy_poll(ch, plan.fast.busy_poll_us, &mut stats);
    ch.expect(crate::transport::Shape::Send);
    let (start, end) = if reliable {
        send_bytes(ch, plan, stream, live, &mut stats)?
    } else {
        send_datagrams(ch, plan, stream, live, &mut stats)?
    };
    stats.tcp_info = ch.connection().tcp_info();
    if reliable {
        ch.shutdown_write()?;
        if ch.capabilities().tcp_options {
            stats.sent_segments = final_count(ch, plan.abort);
        }
    }
    // On the host's clock, after the timed phase: the senders of one direction are put on one
    // time line with it (report::span).
    stats.phase_start_ns = super::monotonic_ns(start);
    stats.elapsed_ns = nanos(start, end);
    stats.bits_per_s = rate(stats.bytes_timed, stats.elapsed_ns);
    stats.acked_bits_per_s = stats.bytes_acked_timed.map(|b| rate(b, stats.elapsed_ns));
    stats.cpu = cpu.stop();
    Ok(stats)
}

/// How a byte-stream sender hands bytes to the kernel.
enum ByteWriter {
    Write,
    Sendfile(OwnedFd),
    Zerocopy(ZerocopyCompletions),
}

impl ByteWriter {
    fn choose(
        ch: &DataChannel,
        plan: &SendPlan,
        buf: &[u8],
        stats: &mut StreamStats,
    ) -> ByteWriter {
        let fd = ch.connection().socket_fd();
        if plan.fast.sendfile {
            match fd
                .ok_or_else(|| io::Error::other("no socket descriptor"))
                .and_then(|_| fastpath::payload_file(buf))
            {
                Ok(file) => return ByteWriter::Sendfile(file),
                Err(e) => stats.fallbacks.push(format!("sendfile: {e}")),
            }
        }
        if plan.fast.zerocopy {
            let r = if ch.capabilities().tcp_options {
                fd.ok_or_else(|| io::Error::other("no socket descriptor"))
                    .and_then(fastpath::enable_zerocopy)
            } else {
                Err(io::Error::other("MSG_ZEROCOPY is for TCP"))
            };
            match r {
                Ok(()) => return ByteWriter::Zerocopy(ZerocopyCompletions::default()),
                Err(e) => stats.fallbacks.push(format!("MSG_ZEROCOPY: {e}")),
            }
        }
        ByteWriter::Write
    }

    fn name(&self) -> &'static str {
        match self {
            ByteWriter::Write => "write",
            ByteWriter::Sendfile(_) => "sendfile",
            ByteWriter::Zerocopy(_) => "MSG_ZEROCOPY",
        }
    }

    /// One call; Ok(n) bytes taken. When the kernel has no room (a spinning socket's
    /// WouldBlock, a blocking one's write timeout) it returns that error, see [`gave_up_waiting`]: the
    /// caller keeps its clock and tries again.
    #[inline]
    fn write(&mut self, ch: &mut DataChannel, buf: &[u8]) -> io::Result<usize> {
        match self {
            ByteWriter::Write => ch.send_once(buf),
            ByteWriter::Sendfile(file) => loop {
                let Some(fd) = ch.connection().socket_fd() else {
                    return Err(io::Error::other("no socket descriptor"));
                };
                match fastpath::sendfile(fd, file.as_fd(), buf.len()) {
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                    r => return r,
                }
            },
            ByteWriter::Zerocopy(done) => loop {
                let Some(fd) = ch.connection().socket_fd() else {
                    return Err(io::Error::other("no socket descriptor"));
                };
                match fastpath::send_zerocopy(fd, buf) {
                    // Too many sends awaiting completion (optmem limit): collect some.
                    Err(e) if e.raw_os_error() == Some(libc::ENOBUFS) => {
                        let before = done.completed;
                        fastpath::reap_zerocopy(fd, done)?;
                        if done.completed == before {
                            std::thread::sleep(Duration::from_micros(20));
                        }
                    }
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                    r => return r,
                }
            },
        }
    }

    /// Collects completions now and then, so that the kernel's queue of them stays short.
    #[inline]
    fn tend(&mut self, ch: &DataChannel, calls: u64) -> io::Result<()> {
        if let ByteWriter::Zerocopy(done) = self {
            if calls.is_multiple_of(32) {
                if let Some(fd) = ch.connection().socket_fd() {
                    fastpath::reap_zerocopy(fd, done)?;
                }
            }
        }
        Ok(())
    }

    /// Waits briefly for the last completions and reports them.
    fn finish(&mut self, ch: &DataChannel, calls: u64, stats: &mut StreamStats) {
        if let ByteWriter::Zerocopy(done) = self {
            if let Some(fd) = ch.connection().socket_fd() {
                let until = Instant::now() + Duration::from_millis(500);
                while done.completed < calls && Instant::now() < until {
                    if fastpath::reap_zerocopy(fd, done).is_err() {
                        break;
                    }
                    std::thread::sleep(Duration::from_millis(1));
                }
            }
            stats.zerocopy_completed = Some(done.completed);
            stats.zerocopy_copied = Some(done.copied);
        }
    }
}

fn send_bytes(
    ch: &mut DataChannel,
    plan: &SendPlan,
    stream: u32,
    live: Option<&mpsc::Sender<IntervalEvent>>,
    stats: &mut StreamStats,
) -> io::Result<(Instant, Instant)> {
    let write_size = byte_write_size(plan);
    let buf = payload(write_size);
    let mut writer = ByteWriter::choose(ch, plan, &buf, stats);
    stats.io_path = writer.name().into();
    let io_timeout = ch.io_timeout();
    // Calls that took bytes: each is one MSG_ZEROCOPY completion to wait for.
    let mut calls: u64 = 0;

    // Warm-up: whole writes, so that the receiver can count warm-up bytes exactly; paced on
    // the timed phase's schedule. The socket keeps its --io-timeout here.
    let acked_before = ch.connection().tcp_info().map(|t| t.bytes_acked);
    let warm_start = Instant::now();
    let mut watch = StallWatch {
        moved_at: warm_start,
        limit: io_timeout,
    };
    for i in 0..plan.warmup {
        if aborted(plan.abort) {
            return Err(stopped());
        }
        if let Some(due) = warmup_slot(plan.pace, warm_start, i) {
            wait_until(due, Instant::now(), plan.abort)?;
            watch.waited_until(due);
        }
        let t = Instant::now();
        let mut off = 0;
        while off < write_size {
            let r = writer.write(ch, &buf[off..]);
            let n = watch.taken(r, Instant::now())?;
            if n > 0 {
                off += n;
                calls += 1;
            }
        }
        if i == 0 {
            stats.first_op_ns = Some(nanos(t, Instant::now()));
        }
        stats.bytes_total += write_size as u64;
    }

    if let Some(base) = acked_before {
        wait_delivered(ch, base + stats.bytes_total, io_timeout, plan.abort)?;
    }

    // A blocking write waits at most STALL_CHECK in the timed phase, when a deadline or
    // interval reports need the loop to look at its clock (set once, not per write).
    let short = !ch.spinning()
        && ch.connection().socket_fd().is_some()
        && (plan.stop.duration.is_some() || plan.interval.is_some());
    if short {
        ch.set_write_timeout(stall_check(plan.interval))?;
    }
    // Everything that allocates or asks the kernel is done before the clock starts.
    let mut intervals = sender_intervals(plan, warm_start, stream, live);
    let acked_from = ch.connection().tcp_info();
    intervals.baseline(acked_from, true);
    let start = begin_timed(plan, warm_start)?;
    intervals.start_at(start);
    let mut p = Progress::new(plan, start);
    let byte_limit = p.byte_limit;
    let mut now = start;
    watch.moved_at = start;
    // The write in progress: `off` of its `len` bytes taken. A write counts (as a message and
    // a pacing slot) once all its bytes are taken.
    let (mut off, mut len) = (0usize, 0usize);
    while p.more(now) {
        if aborted(plan.abort) {
            return Err(stopped());
        }
        if off == len {
            if let Some(due) = p.slot(plan, p.attempts) {
                // The next write would fall after the end of the test: the test is over.
                if p.deadline.is_some_and(|d| due >= d) {
                    break;
                }
                wait_until(due, now, plan.abort)?;
                watch.waited_until(due);
            }
            len = (byte_limit - p.bytes).min(write_size as u64) as usize;
            off = 0;
        }
        let r = writer.write(ch, &buf[off..len]);
        now = Instant::now();
        // Nothing taken: record the intervals due and look at the deadline, then try again.
        let n = watch.taken(r, now)?;
        if n > 0 {
            calls += 1;
            writer.tend(ch, calls)?;
            off += n;
            p.bytes += n as u64;
            if off == len {
                p.attempts += 1;
                p.messages += 1;
            }
        }
        if intervals.due(now) {
            intervals.record(now, p.bytes, p.messages, ch);
        }
    }
    let acked_to = ch.connection().tcp_info();
    let end = p.end(plan, now);
    intervals.finish(end, p.bytes, p.messages, ch);
    if short {
        ch.set_write_timeout(io_timeout)?;
    }
    writer.finish(ch, calls, stats);
    if let (Some(a), Some(b)) = (acked_from, acked_to) {
        stats.bytes_acked_timed = Some(b.bytes_acked.saturating_sub(a.bytes_acked));
    }
    stats.bytes_total += p.bytes;
    stats.bytes_timed = p.bytes;
    stats.messages_timed = p.messages;
    stats.intervals = intervals.out;
    Ok((start, end))
}

/// How a datagram sender hands datagrams to the kernel.
enum DatagramWriter {
    /// One send per datagram.
    Single(Vec<u8>),
    /// sendmmsg over prepared buffers.
    Batch(Batch),
    /// One send of many datagrams that the kernel segments (UDP_SEGMENT).
    Gso { buf: Vec<u8>, segments: usize },
}

impl DatagramWriter {
    fn choose(
        ch: &DataChannel,
        plan: &SendPlan,
        size: usize,
        stats: &mut StreamStats,
    ) -> DatagramWriter {
        let fd = ch.connection().socket_fd();
        if plan.fast.gso {
            let segments = gso_segments(size);
            let r = match (fd, u16::try_from(size)) {
                (Some(fd), Ok(s)) if segments > 1 => fastpath::set_udp_segment(fd, s),
                (None, _) => Err(io::Error::other("no socket descriptor")),
                _ => Err(io::Error::other("datagrams too large to segment")),
            };
            match r {
                Ok(()) => {
                    let one = payload(size);
                    return DatagramWriter::Gso {
                        buf: one.repeat(segments),
                        segments,
                    };
                }
                Err(e) => stats.fallbacks.push(format!("UDP GSO: {e}")),
            }
        }
        let batch = plan.fast.batch.max(1) as usize;
        if batch > 1 {
            match fd.map(|_| Batch::new(batch, size)) {
                Some(Ok(mut b)) => {
                    let one = payload(size);
                    for i in 0..b.count() {
                        b.buffer(i).copy_from_slice(&one);
                    }
                    return DatagramWriter::Batch(b);
                }
                Some(Err(e)) => stats.fallbacks.push(format!("sendmmsg: {e}")),
                None => stats
                    .fallbacks
                    .push("sendmmsg: no socket descriptor".into()),
            }
        }
        DatagramWriter::Single(payload(size))
    }

    fn name(&self) -> String {
        match self {
            DatagramWriter::Single(_) => "send".into(),
            DatagramWriter::Batch(b) => format!("sendmmsg x{}", b.count()),
            DatagramWriter::Gso { segments, .. } => format!("UDP GSO x{segments}"),
        }
    }

    /// Bytes its buffers hold.
    #[cfg(test)]
    fn allocated(&self) -> u64 {
        match self {
            DatagramWriter::Single(buf) | DatagramWriter::Gso { buf, .. } => buf.capacity() as u64,
            DatagramWriter::Batch(b) => b.allocated(),
        }
    }

    fn max_per_call(&self) -> usize {
        match self {
            DatagramWriter::Single(_) => 1,
            DatagramWriter::Batch(b) => b.count(),
            DatagramWriter::Gso { segments, .. } => *segments,
        }
    }

    /// Stamps datagram `i` of the next call with its sequence number and the send time.
    #[inline]
    fn stamp(&mut self, i: usize, size: usize, seq: u64, sent_ns: u64) {
        let b: &mut [u8] = match self {
            DatagramWriter::Single(buf) => buf,
            DatagramWriter::Batch(batch) => batch.buffer(i),
            DatagramWriter::Gso { buf, .. } => &mut buf[i * size..(i + 1) * size],
        };
        b[..8].copy_from_slice(&seq.to_le_bytes());
        b[8..16].copy_from_slice(&sent_ns.to_le_bytes());
    }

    /// Sends the first `n` stamped datagrams; returns how many the kernel took.
    #[inline]
    fn send(&mut self, ch: &mut DataChannel, n: usize, size: usize) -> io::Result<usize> {
        match self {
            DatagramWriter::Single(buf) => ch.send_some(buf).map(|_| 1),
            DatagramWriter::Batch(b) => loop {
                let Some(fd) = ch.connection().socket_fd() else {
                    return Err(io::Error::other("no socket descriptor"));
                };
                match b.send(fd, n) {
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock && ch.spinning() => {}
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                    r => return r,
                }
            },
            DatagramWriter::Gso { buf, .. } => ch.send_some(&buf[..n * size]).map(|_| n),
        }
    }
}

fn send_datagrams(
    ch: &mut DataChannel,
    plan: &SendPlan,
    stream: u32,
    live: Option<&mpsc::Sender<IntervalEvent>>,
    stats: &mut StreamStats,
) -> io::Result<(Instant, Instant)> {
    let size = datagram_size(plan);
    let epoch = Instant::now();
    let mut seq: u64 = 0;

    // Warm-up: one datagram per call, numbered 0..warmup, paced on the timed phase's schedule
    // so that nothing of it is still queued at a bottleneck when the timed phase begins.
    let mut single = payload(size);
    let warm_start = Instant::now();
    for i in 0..plan.warmup {
        if aborted(plan.abort) {
            return Err(stopped());
        }
        if let Some(due) = warmup_slot(plan.pace, warm_start, i) {
            wait_until(due, Instant::now(), plan.abort)?;
        }
        single[..8].copy_from_slice(&seq.to_le_bytes());
        single[8..16].copy_from_slice(&nanos(epoch, Instant::now()).to_le_bytes());
        let t = Instant::now();
        match ch.send_some(&single) {
            Ok(_) => {}
            Err(e) if is_send_failure(&e) => {}
            Err(e) => return Err(e),
        }
        if i == 0 {
            stats.first_op_ns = Some(nanos(t, Instant::now()));
        }
        seq += 1;
        stats.bytes_total += size as u64;
    }

    let mut writer = DatagramWriter::choose(ch, plan, size, stats);
    stats.io_path = writer.name();
    let per_call = writer.max_per_call() as u64;
    let mut intervals = sender_intervals(plan, warm_start, stream, live);
    let start = begin_timed(plan, warm_start)?;
    intervals.start_at(start);
    let mut p = Progress::new(plan, start);
    let iter_limit = p.iter_limit;
    let mut now = start;
    while p.more(now) {
        if aborted(plan.abort) {
            return Err(stopped());
        }
        // How many datagrams to send now: as many as the call takes, or, when paced, as many
        // as the pacing steps begun have let out (one step's burst on schedule, more when
        // behind).
        let mut n = per_call.min(iter_limit - p.attempts);
        if let Some(next) = p.slot(plan, p.attempts) {
            if p.deadline.is_some_and(|d| next >= d) {
                break;
            }
            if next > now {
                wait_until(next, now, plan.abort)?;
                now = Instant::now();
            }
            let released = plan.pace.map_or(u64::MAX, |pc| {
                pc.released(now.saturating_duration_since(start).as_nanos() as f64)
            });
            n = n.min(released.saturating_sub(p.attempts).max(1));
        }
        let n = n as usize;
        let sent_ns = nanos(epoch, Instant::now());
        for i in 0..n {
            writer.stamp(i, size, seq + i as u64, sent_ns);
        }
        match writer.send(ch, n, size) {
            Ok(k) => {
                p.attempts += k as u64;
                p.bytes += (k * size) as u64;
                p.messages += k as u64;
                seq += k as u64;
            }
            Err(e) if is_send_failure(&e) => {
                // The kernel refused the call's datagrams (its buffers are full): they were
                // never sent, so they are counted apart from network loss.
                let refused = if matches!(writer, DatagramWriter::Gso { .. }) {
                    n
                } else {
                    1
                };
                stats.send_failures += refused as u64;
                p.attempts += refused as u64;
            }
            Err(e) => return Err(e),
        }
        now = Instant::now();
        if intervals.due(now) {
            intervals.record(now, p.bytes, p.messages, ch);
        }
    }
    let end = p.end(plan, now);
    intervals.finish(end, p.bytes, p.messages, ch);
    stats.bytes_total += p.bytes;
    stats.bytes_timed = p.bytes;
    stats.messages_timed = p.messages;
    stats.intervals = intervals.out;
    Ok((start, end))
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, Instant};

    use super::super::clock_tests::idle_channel;
    use super::*;
    use crate::pattern::{FastPaths, StopAt};
    use crate::transport::mem::{BYTES, DATAGRAMS};

    fn plan(write_size: usize, fast: FastPaths, duration: Option<Duration>) -> SendPlan<'static> {
        SendPlan {
            write_size,
            stop: StopAt {
                duration,
                bytes: duration.is_none().then_some(1 << 30),
                ..StopAt::default()
            },
            warmup: 0,
            pace: None,
            interval: Some(Duration::from_millis(100)),
            fast,
            abort: None,
            align_intervals: false,
        }
    }

    /// Bytes the interval reports of `plan`'s sender reserve, as its timed phase makes them.
    fn reports(plan: &SendPlan) -> u64 {
        let clock = sender_intervals(plan, Instant::now(), 0, None);
        (clock.out.capacity() * std::mem::size_of::<super::super::Interval>()) as u64
    }

    /// What a datagram sender makes (the warm-up datagram, the writer it chooses, its reports)
    /// is what its footprint says: exactly when it holds the largest writer it may choose, and
    /// within it when a fast path fell back for want of a socket.
    #[test]
    fn a_datagram_senders_footprint_holds_the_buffers_it_makes() {
        let ch = idle_channel();
        for (batch, gso) in [(1, false), (64, false), (1, true), (16, true)] {
            for duration in [Some(Duration::from_secs(3)), None] {
                let fast = FastPaths {
                    batch,
                    gso,
                    ..FastPaths::default()
                };
                let p = plan(1200, fast, duration);
                let size = datagram_size(&p);
                let footprint = sender_footprint(&p, &DATAGRAMS);
                let mut stats = StreamStats::default();
                // No socket under the in-memory channel: one send per datagram.
                let writer = DatagramWriter::choose(&ch, &p, size, &mut stats);
                let made = size as u64 + writer.allocated() + reports(&p);
                assert!(made <= footprint, "{batch} {gso}: {made} > {footprint}");
                // With a socket: the batch beside its model datagram, or the GSO send's.
                let batched = Batch::new(batch as usize, size).unwrap().allocated() + size as u64;
                let segmented = (gso_segments(size) * size + size) as u64;
                let largest = match (batch > 1, gso) {
                    (true, true) => batched.max(segmented),
                    (true, false) => batched,
                    (false, true) => segmented,
                    (false, false) => writer.allocated(),
                };
                assert_eq!(
                    size as u64 + largest + reports(&p),
                    footprint,
                    "{batch} {gso}"
                );
            }
        }
    }

    /// A byte-stream sender holds its payload, and with sendfile the memory file's copy of it.
    #[test]
    fn a_byte_senders_footprint_is_its_payload_and_sendfiles_copy() {
        let p = plan(
            128 << 10,
            FastPaths::default(),
            Some(Duration::from_secs(10)),
        );
        let payload = payload(byte_write_size(&p)).len() as u64;
        assert_eq!(sender_footprint(&p, &BYTES), payload + reports(&p));
        let file = plan(
            128 << 10,
            FastPaths {
                sendfile: true,
                ..FastPaths::default()
            },
            None,
        );
        assert_eq!(
            sender_footprint(&file, &BYTES),
            2 * payload + reports(&file)
        );
    }
}
