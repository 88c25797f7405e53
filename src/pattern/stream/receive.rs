//! The receiving side of a stream: byte streams read (or discarded in the kernel with
//! MSG_TRUNC) until end of stream; datagrams received one per call, batched with recvmmsg, or
//! coalesced by the kernel (UDP GRO), and accounted by sequence number (raw Ethernet messages
//! take the datagram path too).
//!
//! With interval reports, a receiver whose reads block keeps time: a byte stream's socket gets
//! a read timeout of [`STALL_CHECK`] for the timed phase (a datagram receiver polls at most
//! that long), so that an interval with nothing read is reported on time, with 0 bytes; a
//! byte stream still fails once nothing arrived for `--io-timeout`.

use std::io;
use std::sync::atomic::Ordering;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use super::intervals::IntervalClock;
use super::loss::Jitter;
#[cfg(doc)]
use super::STALL_CHECK;
use super::{
    busy_poll, gave_up_waiting, rate, stall_check, EndSignal, IntervalEvent, LossStats, RecvPlan,
    StreamStats, DATAGRAM_HEADER, DRAIN_IDLE, LOWAT_HOLD, POLL,
};
use crate::pattern::{nanos, CpuMeter, DataChannel, RcvLowat, Role};
use crate::stats::SeqTracker;
use crate::sys::fastpath::{self, Batch};

/// Largest datagram a receive must hold.
const MAX_DATAGRAM: usize = 65_536;

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
    let mut stats = StreamStats {
        role: Some(Role::Receiver),
        ..StreamStats::default()
    };
    busy_poll(ch, plan.fast.busy_poll_us, &mut stats);
    let waiting_since = Instant::now();
    let live = live.map(|tx| (tx, stream, Role::Receiver));
    if ch.capabilities().reliable {
        ch.set_read_timeout(io_timeout)?;
        receive_bytes(ch, plan, end, &mut stats, live, waiting_since, io_timeout)?;
    } else {
        // Interval reports must not wait a whole POLL for a datagram that does not come.
        ch.set_read_timeout(match plan.interval {
            Some(_) => POLL.min(stall_check(plan.interval)),
            None => POLL,
        })?;
        receive_datagrams(ch, plan, end, &mut stats, live, waiting_since)?;
    }
    stats.tcp_info = ch.connection().tcp_info();
    stats.frames = ch.connection().link_counters();
    stats.bits_per_s = rate(stats.bytes_timed, stats.elapsed_ns);
    stats.cpu = cpu.stop();
    Ok(stats)
}

/// How a byte-stream receiver takes bytes from the kernel.
#[derive(Clone, Copy, PartialEq, Eq)]
enum ByteReader {
    Read,
    /// MSG_TRUNC: TCP drops the bytes in the kernel, none are copied.
    Discard,
}

impl ByteReader {
    /// One read. Waiting too long is an error that [`gave_up_waiting`] knows: the read timeout on a
    /// blocking socket; on a spinning one, the channel's poll running out (Read) or at once
    /// (Discard), so that the caller keeps its clock.
    #[inline]
    fn read(self, ch: &mut DataChannel, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            ByteReader::Read => ch.recv_some(buf),
            ByteReader::Discard => loop {
                let Some(fd) = ch.connection().socket_fd() else {
                    return Err(io::Error::other("no socket descriptor"));
                };
                match fastpath::recv_trunc(fd, buf, buf.len()) {
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock && !ch.spinning() => {
                        return Err(io::Error::new(
                            io::ErrorKind::TimedOut,
                            "no data within the timeout",
                        ))
                    }
                    r => return r,
                }
            },
        }
    }
}

type Live<'a> = Option<(&'a mpsc::Sender<IntervalEvent>, u32, Role)>;

/// The SO_RCVLOWAT a TCP receiver picks by itself: the bytes that arrive in [`LOWAT_HOLD`] at
/// `bytes_per_s`, at most one read. None below two bytes, where it would change nothing.
pub(super) fn auto_rcvlowat(bytes_per_s: f64, read_size: usize) -> Option<u64> {
    let b = (bytes_per_s * LOWAT_HOLD.as_secs_f64()).min(read_size as f64) as u64;
    (b >= 2).then_some(b)
}

/// Sets the stream's wake-up threshold (see [`RcvLowat`]) after warm-up and records what the
/// kernel holds, or why none was set. Spinning receivers never sleep, so they need none.
fn wake_threshold(
    ch: &DataChannel,
    plan: &RecvPlan,
    warmup_rate: Option<f64>,
    stats: &mut StreamStats,
) {
    let (want, auto) = match plan.fast.rcvlowat {
        RcvLowat::Off => return,
        RcvLowat::Bytes(b) => (Some(b), false),
        RcvLowat::Auto if plan.buffers_fixed => return,
        RcvLowat::Auto => (
            warmup_rate.and_then(|r| auto_rcvlowat(r, plan.read_size)),
            true,
        ),
    };
    let supported = ch.capabilities().rcvlowat;
    // Where the automatic threshold does not apply there is nothing to report: it was not
    // asked for.
    let Some(want) = want else { return };
    if (auto && !supported) || ch.spinning() {
        return;
    }
    let result = match ch.connection().socket_fd() {
        Some(fd) if supported => fastpath::set_rcvlowat(fd, want),
        _ => Err(io::Error::other("only for TCP streams")),
    };
    match result {
        Ok(held) => stats.rcvlowat_bytes = Some(held),
        Err(e) => stats.fallbacks.push(format!("SO_RCVLOWAT: {e}")),
    }
}

fn receive_bytes(
    ch: &mut DataChannel,
    plan: &RecvPlan,
    end: &EndSignal,
    stats: &mut StreamStats,
    live: Live<'_>,
    waiting_since: Instant,
    io_timeout: Duration,
) -> io::Result<()> {
    let reader = if plan.fast.skip_rx_copy {
        if ch.capabilities().tcp_options && ch.connection().socket_fd().is_some() {
            ByteReader::Discard
        } else {
            stats
                .fallbacks
                .push("MSG_TRUNC: only TCP discards stream data in the kernel".into());
            ByteReader::Read
        }
    } else {
        ByteReader::Read
    };
    stats.io_path = match reader {
        ByteReader::Read => "read",
        ByteReader::Discard => "recv MSG_TRUNC (no copy)",
    }
    .into();
    let mut buf = vec![0u8; plan.read_size.max(1)];
    let mut total: u64 = 0;
    // Warm-up and the read that completes it; the reads after the first one give its rate.
    let mut first: Option<(Instant, u64)> = None;
    let mut moved_at = waiting_since;
    loop {
        // Torn down by the control thread (the peer left, a server's limit was reached): a
        // peer that keeps sending would keep this loop going forever otherwise.
        if end.abort.load(Ordering::Relaxed) {
            return Err(super::stopped());
        }
        let n = match reader.read(ch, &mut buf) {
            Ok(n) => n as u64,
            // A spinning MSG_TRUNC read that found nothing: poll again, up to --io-timeout.
            Err(e) if ch.spinning() && gave_up_waiting(&e) && moved_at.elapsed() < io_timeout => {
                continue
            }
            Err(e) => return Err(e),
        };
        moved_at = Instant::now();
        if n == 0 {
            stats.bytes_total = total;
            return Ok(());
        }
        if first.is_none() {
            let now = Instant::now();
            stats.first_op_ns = Some(nanos(waiting_since, now));
            first = Some((now, n));
        }
        total += n;
        end.received.store(total, Ordering::Relaxed);
        if total >= plan.warmup_bytes {
            break;
        }
    }
    let warmup_rate = first.and_then(|(at, n)| {
        let secs = at.elapsed().as_secs_f64();
        (total > n && secs > 0.0).then(|| (total - n) as f64 / secs)
    });
    wake_threshold(ch, plan, warmup_rate, stats);
    // Bytes already waiting in the socket when the clock would start arrived before it:
    // counted as warm-up, they would have the receiver's rate run ahead of the link (by up to
    // a millisecond of data under SO_RCVLOWAT, seen as 100.05% of a lab link's goodput).
    match read_already_queued(ch, reader, &mut buf)? {
        Some(n) => total += n,
        None => {
            stats.bytes_total = total;
            return Ok(());
        }
    }
    let lead = ch.connection().arrival_lead();
    let mut tail = Tail::new(lead, plan.read_size);
    // Interval reports on a socket: a blocked read gives up after STALL_CHECK (set once), so
    // that the loop records the intervals due; --io-timeout is then kept here.
    let short = plan.interval.is_some() && ch.connection().socket_fd().is_some();
    if short {
        ch.set_read_timeout(stall_check(plan.interval))?;
    }
    let start = Instant::now();
    let mut intervals = IntervalClock::new(plan.interval, None, start, live);
    intervals.start_at(start);
    intervals.baseline(ch.connection().tcp_info(), false);
    let mut bytes: u64 = 0;
    let mut reads: u64 = 0;
    let mut last = start;
    loop {
        if end.abort.load(Ordering::Relaxed) {
            return Err(super::stopped());
        }
        let n = match reader.read(ch, &mut buf) {
            Ok(n) => n,
            // Nothing within the short timeout (or a spinning poll): record the intervals due;
            // fail only once nothing came for --io-timeout.
            Err(e) if (short || ch.spinning()) && gave_up_waiting(&e) => {
                let now = Instant::now();
                if now.saturating_duration_since(last) >= io_timeout {
                    return Err(e);
                }
                if intervals.due(now) {
                    intervals.record(now, bytes, reads, ch);
                }
                continue;
            }
            Err(e) => return Err(e),
        };
        if n == 0 {
            break;
        }
        last = Instant::now();
        bytes += n as u64;
        reads += 1;
        end.received.store(total + bytes, Ordering::Relaxed);
        tail.push(last, bytes, reads);
        if intervals.due(last) {
            intervals.record(last, bytes, reads, ch);
        }
    }
    stats.bytes_total = total + bytes;
    let (end, timed, timed_reads) = match tail.cut(lead) {
        Some((end, b, r)) if b > 0 => {
            intervals.finish_earlier(end, b, r, ch);
            (end, b, r)
        }
        _ => {
            intervals.close_at(last, bytes, reads, ch);
            (last, bytes, reads)
        }
    };
    stats.bytes_timed = timed;
    stats.untimed_tail_bytes = bytes - timed;
    stats.messages_timed = timed_reads;
    stats.phase_start_ns = super::monotonic_ns(start);
    stats.elapsed_ns = nanos(start, end);
    stats.intervals = intervals.out;
    Ok(())
}

/// Reads what a byte-stream socket holds already (FIONREAD), before the receiver's clock
/// starts: the bytes read, or None at end of stream. Looks again a few times for what arrived
/// meanwhile; bytes that arrive after that are the timed phase's. Nothing without a socket.
fn read_already_queued(
    ch: &mut DataChannel,
    reader: ByteReader,
    buf: &mut [u8],
) -> io::Result<Option<u64>> {
    let mut total = 0;
    for _ in 0..4 {
        let Some(fd) = ch.connection().socket_fd() else {
            break;
        };
        let mut queued = crate::sys::bytes_queued(fd).unwrap_or(0);
        if queued == 0 {
            break;
        }
        while queued > 0 {
            let k = (queued as usize).min(buf.len());
            let n = reader.read(ch, &mut buf[..k])? as u64;
            if n == 0 {
                return Ok(None);
            }
            total += n;
            queued = queued.saturating_sub(n);
        }
    }
    Ok(Some(total))
}

/// The newest reads of a byte stream, to end the timed phase `lead` bytes before the last
/// one (see [`crate::transport::Connection::arrival_lead`]). Sized before the timed loop;
/// a push is one store.
struct Tail {
    /// (time, bytes so far, reads so far) after each of the newest reads, oldest overwritten.
    ring: Vec<(Instant, u64, u64)>,
    pushed: usize,
}

impl Tail {
    /// Reads kept at most: enough for a 16 MiB lead in reads of 256 bytes.
    const MAX: usize = 1 << 16;

    fn new(lead: u64, read_size: usize) -> Tail {
        let n = if lead == 0 {
            0
        } else {
            (lead / read_size.max(1) as u64 + 2).min(Tail::MAX as u64) as usize
        };
        Tail {
            ring: Vec::with_capacity(n),
            pushed: 0,
        }
    }

    #[inline]
    fn push(&mut self, at: Instant, bytes: u64, reads: u64) {
        let cap = self.ring.capacity();
        if cap == 0 {
            return;
        }
        if self.ring.len() < cap {
            self.ring.push((at, bytes, reads));
        } else {
            self.ring[self.pushed % cap] = (at, bytes, reads);
        }
        self.pushed += 1;
    }

    /// The newest read after which at least `lead` bytes were still to come: the end of the
    /// timed phase. None without a lead; the oldest read kept when the lead reaches further
    /// back than the ring (or than the timed phase: then nothing is left to time).
    fn cut(&self, lead: u64) -> Option<(Instant, u64, u64)> {
        let newest = self.ring.iter().max_by_key(|e| e.2)?;
        let target = newest.1.checked_sub(lead)?;
        self.ring
            .iter()
            .filter(|e| e.1 <= target)
            .max_by_key(|e| e.2)
            .or_else(|| self.ring.iter().min_by_key(|e| e.2))
            .copied()
    }
}

/// Everything the receiver learns from the datagrams, one at a time.
struct DatagramCounter {
    warmup: u64,
    epoch: Instant,
    waiting_since: Instant,
    seqs: SeqTracker,
    jitter: Jitter,
    start: Option<Instant>,
    total: u64,
    bytes: u64,
    datagrams: u64,
    last: Instant,
    first_op_ns: Option<u64>,
}

impl DatagramCounter {
    /// `head` holds at least the datagram's header; `len` is the datagram's full length.
    #[inline]
    fn on_datagram(
        &mut self,
        head: &[u8],
        len: usize,
        now: Instant,
        intervals: &mut IntervalClock<'_>,
        ch: &DataChannel,
    ) {
        if len < DATAGRAM_HEADER || head.len() < DATAGRAM_HEADER {
            return; // a runt: not ours
        }
        if self.total == 0 {
            self.first_op_ns = Some(nanos(self.waiting_since, now));
        }
        self.total += len as u64;
        let seq = u64::from_le_bytes(head[..8].try_into().unwrap_or([0; 8]));
        let sent_ns = u64::from_le_bytes(head[8..16].try_into().unwrap_or([0; 8]));
        if seq < self.warmup {
            return;
        }
        self.seqs.observe(seq - self.warmup);
        self.jitter.observe(sent_ns, nanos(self.epoch, now));
        if self.start.is_none() {
            // The first timed datagram starts the clock and is not counted.
            self.start = Some(now);
            intervals.start_at(now);
            return;
        }
        self.bytes += len as u64;
        self.datagrams += 1;
        self.last = now;
        if intervals.due(now) {
            intervals.record(now, self.bytes, self.datagrams, ch);
        }
    }
}

/// How a datagram receiver takes datagrams from the kernel.
enum DatagramReader {
    Single(Vec<u8>),
    Batch(Batch),
    Gro(Vec<u8>),
    /// MSG_TRUNC: copy only the header, learn the length.
    HeaderOnly,
}

impl DatagramReader {
    fn choose(ch: &DataChannel, plan: &RecvPlan, stats: &mut StreamStats) -> DatagramReader {
        let size = MAX_DATAGRAM.max(plan.read_size);
        let Some(fd) = ch.connection().socket_fd() else {
            return DatagramReader::Single(vec![0; size]);
        };
        if plan.fast.gro {
            match fastpath::enable_udp_gro(fd) {
                Ok(()) => return DatagramReader::Gro(vec![0; size]),
                Err(e) => stats.fallbacks.push(format!("UDP GRO: {e}")),
            }
        }
        if plan.fast.skip_rx_copy {
            return DatagramReader::HeaderOnly;
        }
        if plan.fast.batch > 1 {
            match Batch::new(plan.fast.batch as usize, size) {
                Ok(b) => return DatagramReader::Batch(b),
                Err(e) => stats.fallbacks.push(format!("recvmmsg: {e}")),
            }
        }
        DatagramReader::Single(vec![0; size])
    }

    fn name(&self) -> String {
        match self {
            DatagramReader::Single(_) => "recv".into(),
            DatagramReader::Batch(b) => format!("recvmmsg x{}", b.count()),
            DatagramReader::Gro(_) => "UDP GRO".into(),
            DatagramReader::HeaderOnly => "recv MSG_TRUNC (header only)".into(),
        }
    }

    /// Receives what is there (waiting at most the read timeout for the first datagram) and
    /// hands each datagram to `counter`. Ok(false) when the wait timed out.
    #[inline]
    fn receive(
        &mut self,
        ch: &mut DataChannel,
        counter: &mut DatagramCounter,
        intervals: &mut IntervalClock<'_>,
    ) -> io::Result<bool> {
        match self {
            DatagramReader::Single(buf) => match ch.recv_some(buf) {
                Ok(n) => {
                    counter.on_datagram(&buf[..n.min(buf.len())], n, Instant::now(), intervals, ch);
                    Ok(true)
                }
                Err(e) if gave_up_waiting(&e) => Ok(false),
                Err(e) => Err(e),
            },
            DatagramReader::HeaderOnly => {
                let mut head = [0u8; DATAGRAM_HEADER];
                let r = match ch.connection().socket_fd() {
                    Some(fd) => fastpath::recv_trunc(fd, &mut head, DATAGRAM_HEADER),
                    None => Err(io::Error::other("no socket descriptor")),
                };
                match r {
                    Ok(n) => {
                        counter.on_datagram(&head, n, Instant::now(), intervals, ch);
                        Ok(true)
                    }
                    Err(e) if gave_up_waiting(&e) || e.kind() == io::ErrorKind::Interrupted => {
                        Ok(false)
                    }
                    Err(e) => Err(e),
                }
            }
            DatagramReader::Batch(b) => {
                let r = match ch.connection().socket_fd() {
                    Some(fd) => b.recv(fd),
                    None => Err(io::Error::other("no socket descriptor")),
                };
                match r {
                    Ok(k) => {
                        let now = Instant::now();
                        for i in 0..k {
                            let len = b.received_len(i);
                            let buf = b.buffer(i);
                            let head = &buf[..len.min(buf.len())];
                            counter.on_datagram(head, len, now, intervals, ch);
                        }
                        Ok(true)
                    }
                    Err(e) if gave_up_waiting(&e) || e.kind() == io::ErrorKind::Interrupted => {
                        Ok(false)
                    }
                    Err(e) => Err(e),
                }
            }
            DatagramReader::Gro(buf) => {
                let r = match ch.connection().socket_fd() {
                    Some(fd) => fastpath::recv_gro(fd, buf),
                    None => Err(io::Error::other("no socket descriptor")),
                };
                match r {
                    Ok((n, segment)) => {
                        let now = Instant::now();
                        let seg = if segment == 0 { n.max(1) } else { segment };
                        for chunk in buf[..n].chunks(seg) {
                            counter.on_datagram(chunk, chunk.len(), now, intervals, ch);
                        }
                        Ok(true)
                    }
                    Err(e) if gave_up_waiting(&e) || e.kind() == io::ErrorKind::Interrupted => {
                        Ok(false)
                    }
                    Err(e) => Err(e),
                }
            }
        }
    }
}

/// Reads datagrams one at a time with the kernel's arrival stamps until the receiver's clock
/// has started, so that it starts when the first timed datagram arrived, not when this thread
/// got round to reading it: a receiver descheduled then (by a CPU hog, seen on the 2-CPU VM)
/// started late and counted the datagrams queued meanwhile over too short a phase, 0.05% above
/// a lab link's goodput. Warm-up datagrams are few, so the slow calls cost nothing that is
/// timed. Not for GRO, whose reads hold many datagrams, nor without a socket (raw messages).
struct StartStamper {
    buf: Vec<u8>,
    cmsg: Vec<u8>,
}

impl StartStamper {
    fn new(ch: &DataChannel, reader: &DatagramReader) -> Option<StartStamper> {
        if matches!(reader, DatagramReader::Gro(_)) {
            return None;
        }
        crate::sys::rx_timestamps(ch.connection().socket_fd()?, true).ok()?;
        Some(StartStamper {
            buf: vec![0; MAX_DATAGRAM],
            cmsg: nix::cmsg_space!(nix::sys::time::TimeSpec),
        })
    }

    /// One datagram, handed to `counter` at its kernel arrival time. Ok(false) when none came
    /// within the read timeout.
    fn receive(
        &mut self,
        ch: &DataChannel,
        counter: &mut DatagramCounter,
        intervals: &mut IntervalClock<'_>,
    ) -> io::Result<bool> {
        let Some(fd) = ch.connection().socket_fd() else {
            return Ok(false);
        };
        match crate::sys::recv_stamped(fd, &mut self.buf, &mut self.cmsg) {
            Ok((n, stamp)) => {
                let at = crate::sys::arrival_instant(stamp);
                counter.on_datagram(&self.buf[..n.min(self.buf.len())], n, at, intervals, ch);
                Ok(true)
            }
            Err(e) if gave_up_waiting(&e) || e.kind() == io::ErrorKind::Interrupted => Ok(false),
            Err(e) => Err(e),
        }
    }
}

fn receive_datagrams(
    ch: &mut DataChannel,
    plan: &RecvPlan,
    end: &EndSignal,
    stats: &mut StreamStats,
    live: Live<'_>,
    waiting_since: Instant,
) -> io::Result<()> {
    let mut reader = DatagramReader::choose(ch, plan, stats);
    stats.io_path = reader.name();
    let epoch = Instant::now();
    let mut counter = DatagramCounter {
        warmup: plan.warmup_datagrams,
        epoch,
        waiting_since,
        seqs: SeqTracker::new(),
        jitter: Jitter::default(),
        start: None,
        total: 0,
        bytes: 0,
        datagrams: 0,
        last: epoch,
        first_op_ns: None,
    };
    let mut intervals = IntervalClock::new(plan.interval, None, epoch, live);
    let mut last_arrival = epoch;
    let mut stamper = StartStamper::new(ch, &reader);
    loop {
        let before = counter.total;
        match stamper.as_mut() {
            Some(st) if counter.start.is_none() => st.receive(ch, &mut counter, &mut intervals)?,
            Some(_) => {
                // The clock has started: back to the fast path, the kernel's stamps off.
                if let Some(fd) = ch.connection().socket_fd() {
                    let _ = crate::sys::rx_timestamps(fd, false);
                }
                stamper = None;
                continue;
            }
            None => reader.receive(ch, &mut counter, &mut intervals)?,
        };
        let now = Instant::now();
        if counter.total != before {
            last_arrival = now;
            end.received.store(counter.total, Ordering::Relaxed);
        } else if counter.start.is_some() && intervals.due(now) && !end.done.load(Ordering::Relaxed)
        {
            // Nothing came while the sender is still sending: an interval of 0 bytes, on
            // time. (Once it is done, silence is the end of the stream, not a stall.)
            intervals.record(now, counter.bytes, counter.datagrams, ch);
        }
        if end.abort.load(Ordering::Relaxed) {
            break;
        }
        if end.done.load(Ordering::Acquire) {
            let sent = end.sent_datagrams.load(Ordering::Acquire);
            if counter.seqs.unique >= sent
                || now.saturating_duration_since(last_arrival) >= DRAIN_IDLE
            {
                break;
            }
        }
    }
    let last = counter.last;
    let start = counter.start.unwrap_or(last);
    intervals.close_at(last, counter.bytes, counter.datagrams, ch);
    let sent = end.sent_datagrams.load(Ordering::Acquire);
    let lost = sent.saturating_sub(counter.seqs.unique);
    stats.loss = Some(LossStats {
        sent,
        received: counter.seqs.unique,
        lost,
        loss_ratio: if sent > 0 {
            lost as f64 / sent as f64
        } else {
            0.0
        },
        duplicated: counter.seqs.duplicated,
        reordered: counter.seqs.reordered,
        jitter_ns: counter.jitter.value_ns,
    });
    stats.first_op_ns = counter.first_op_ns;
    stats.bytes_total = counter.total;
    stats.bytes_timed = counter.bytes;
    stats.messages_timed = counter.datagrams;
    stats.phase_start_ns = super::monotonic_ns(start);
    stats.elapsed_ns = nanos(start, last);
    stats.intervals = intervals.out;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn auto_rcvlowat_holds_at_most_one_millisecond_and_one_read() {
        // 3 GB/s (loopback): a millisecond is 3 MB, so one read's worth.
        assert_eq!(auto_rcvlowat(3e9, 131_072), Some(131_072));
        // 100 Mbit/s: a millisecond is 12 500 bytes.
        assert_eq!(auto_rcvlowat(12.5e6, 131_072), Some(12_500));
        // 1 kbit/s: nothing worth waiting for.
        assert_eq!(auto_rcvlowat(125.0, 131_072), None);
    }
}
