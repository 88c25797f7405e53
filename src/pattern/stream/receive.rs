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

use super::arrival::StampClock;
use super::intervals::{reserved_bytes, IntervalClock};
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
use crate::transport::Capabilities;

/// A byte-stream receiver's buffer: one read.
fn byte_buffer(plan: &RecvPlan) -> Vec<u8> {
    vec![0u8; plan.read_size.max(1)]
}

/// Bytes of each of a datagram receiver's buffers: a whole datagram, whatever smaller read is
/// asked (a shorter buffer would cut the datagram).
fn datagram_buffer_size(plan: &RecvPlan) -> usize {
    usize::try_from(crate::pattern::DATAGRAM_READ)
        .unwrap_or(usize::MAX)
        .max(plan.read_size)
}

/// The control buffer a receive takes the kernel's arrival stamp in.
fn stamp_buffer() -> Vec<u8> {
    nix::cmsg_space!(nix::sys::time::TimeSpec)
}

/// What a stream receiver following `plan` over a transport with `caps` allocates at most,
/// bytes, from the sizes its own buffers are made with: a byte stream's read buffer; on
/// datagrams the largest reader it may choose (a batch of datagram buffers, or one buffer and
/// its stamp's); and its interval reports. An upper bound: a fast path that falls back holds
/// less. Not counted: the ring of newest reads a connection with an arrival lead keeps (`Tail`),
/// which only MPI's connections have, and no server runs those. A server charges each of its
/// receiving streams this (control/budget.rs).
pub fn receiver_footprint(plan: &RecvPlan, caps: &Capabilities) -> u64 {
    let reports = reserved_bytes(plan.interval, receiver_span(plan));
    let buffers = if caps.reliable {
        plan.read_size.max(1) as u64
    } else {
        let size = datagram_buffer_size(plan);
        // Made and dropped to count it: a few dozen bytes, counted as the receiver makes them.
        let single = (size as u64).saturating_add(stamp_buffer().capacity() as u64);
        match plan.fast.batch.max(1) as usize {
            1 => single,
            n => single.max(Batch::footprint(n, size)),
        }
    };
    buffers.saturating_add(reports)
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
    let mut stats = StreamStats {
        role: Some(Role::Receiver),
        ..StreamStats::default()
    };
    busy_poll(ch, plan.fast.busy_poll_us, &mut stats);
    ch.expect(crate::transport::Shape::Receive);
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
    let mut buf = byte_buffer(plan);
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
        // The first read that holds a timed byte starts the clock (see the module's doc):
        // a read that ends the warm-up exactly is followed by one more.
        if total > plan.warmup_bytes {
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
    // Everything that allocates or asks the kernel is done before the clock starts.
    let mut intervals = IntervalClock::new(plan.interval, receiver_span(plan), moved_at, live)
        .aligned(plan.align_intervals);
    intervals.baseline(ch.connection().tcp_info(), false);
    let start = Instant::now();
    intervals.start_at(start);
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

/// How long a receiver's timed phase may run, to reserve its interval reports up front: the
/// sender's duration, twice over, and the drain of what its buffers still hold after that
/// (an interval list that is full takes the rest into its newest interval).
fn receiver_span(plan: &RecvPlan) -> Option<Duration> {
    plan.expected.map(|d| d * 2 + DRAIN_IDLE)
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
    /// Reads the ring holds at most (0: no lead, nothing kept), fixed when it is made: not
    /// the vector's capacity, which the allocator may round up.
    size: usize,
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
            size: n,
            pushed: 0,
        }
    }

    #[inline]
    fn push(&mut self, at: Instant, bytes: u64, reads: u64) {
        if self.size == 0 {
            return;
        }
        if self.ring.len() < self.size {
            self.ring.push((at, bytes, reads));
        } else {
            self.ring[self.pushed % self.size] = (at, bytes, reads);
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
    /// Timed bytes and datagrams counted so far.
    bytes: u64,
    datagrams: u64,
    /// The arrival of the last datagram whose arrival is known (see [`Arrival`]), and the
    /// counts up to and including it: the end of the timed phase and what it holds.
    last: Instant,
    timed_bytes: u64,
    timed_datagrams: u64,
    /// The datagrams coalesced with the one that started the clock are not counted: they
    /// may have arrived before it (see [`Arrival::Within`]).
    skip_coalesced: bool,
    /// Whether the clock's start or its end came from a read without a kernel stamp.
    unstamped_ends: bool,
    first_op_ns: Option<u64>,
}

/// When a datagram arrived, as the kernel tells it.
#[derive(Clone, Copy)]
enum Arrival {
    /// At this instant: its own kernel stamp (or, without one, its read).
    At(Instant, bool),
    /// Coalesced by the kernel (UDP GRO) after the read's first datagram, which carries the
    /// read's only stamp: somewhere about that time, before or after. It is counted but never
    /// starts or ends the timed phase.
    Within(Instant),
}

impl DatagramCounter {
    fn new(warmup: u64, epoch: Instant, waiting_since: Instant) -> DatagramCounter {
        DatagramCounter {
            warmup,
            epoch,
            waiting_since,
            seqs: SeqTracker::new(),
            jitter: Jitter::default(),
            start: None,
            total: 0,
            bytes: 0,
            datagrams: 0,
            last: epoch,
            timed_bytes: 0,
            timed_datagrams: 0,
            skip_coalesced: false,
            unstamped_ends: false,
            first_op_ns: None,
        }
    }

    /// `head` holds at least the datagram's header; `len` is the datagram's full length.
    #[inline]
    fn on_datagram(
        &mut self,
        head: &[u8],
        len: usize,
        arrival: Arrival,
        intervals: &mut IntervalClock<'_>,
        ch: &DataChannel,
    ) {
        if len < DATAGRAM_HEADER || head.len() < DATAGRAM_HEADER {
            return; // a runt: not ours
        }
        let (at, exact, stamped) = match arrival {
            Arrival::At(t, stamped) => (t, true, stamped),
            Arrival::Within(t) => (t, false, true),
        };
        if self.total == 0 {
            self.first_op_ns = Some(nanos(self.waiting_since, at.max(self.waiting_since)));
        }
        self.total += len as u64;
        let seq = u64::from_le_bytes(head[..8].try_into().unwrap_or([0; 8]));
        let sent_ns = u64::from_le_bytes(head[8..16].try_into().unwrap_or([0; 8]));
        if seq < self.warmup {
            return;
        }
        self.seqs.observe(seq - self.warmup);
        self.jitter.observe(sent_ns, nanos(self.epoch, at));
        if self.start.is_none() {
            // The first timed datagram starts the clock and is not counted, nor are those
            // the kernel coalesced with it.
            self.start = Some(at);
            self.last = at;
            self.skip_coalesced = true;
            self.unstamped_ends = !stamped;
            intervals.start_at(at);
            return;
        }
        if !exact && self.skip_coalesced {
            return;
        }
        self.skip_coalesced = false;
        self.bytes += len as u64;
        self.datagrams += 1;
        if exact {
            self.last = at;
            self.timed_bytes = self.bytes;
            self.timed_datagrams = self.datagrams;
            if !stamped {
                self.unstamped_ends = true;
            }
            if intervals.due(at) {
                intervals.record(at, self.bytes, self.datagrams, ch);
            }
        }
    }
}

/// How a datagram receiver takes datagrams from the kernel. Each comes with the kernel's
/// arrival stamp where the socket gives one (see [`StampClock`]).
enum DatagramReader {
    /// One datagram per call: with its stamp (recvmsg) on a socket, through the connection
    /// (which may stamp its own frames, as raw does) otherwise.
    Single(Vec<u8>, Vec<u8>),
    Batch(Batch),
    Gro(Vec<u8>),
    /// MSG_TRUNC: copy only the header, learn the length.
    HeaderOnly(Vec<u8>),
}

impl DatagramReader {
    fn choose(ch: &DataChannel, plan: &RecvPlan, stats: &mut StreamStats) -> DatagramReader {
        let size = datagram_buffer_size(plan);
        let cmsg = stamp_buffer;
        let Some(fd) = ch.connection().socket_fd() else {
            return DatagramReader::Single(vec![0; size], cmsg());
        };
        if let Err(e) = crate::sys::rx_timestamps(fd, true) {
            stats.fallbacks.push(format!(
                "SO_TIMESTAMPNS: {e}; the phase is timed when datagrams are read"
            ));
        }
        if plan.fast.gro {
            match fastpath::enable_udp_gro(fd) {
                Ok(()) => return DatagramReader::Gro(vec![0; size]),
                Err(e) => stats.fallbacks.push(format!("UDP GRO: {e}")),
            }
        }
        if plan.fast.skip_rx_copy {
            return DatagramReader::HeaderOnly(cmsg());
        }
        if plan.fast.batch > 1 {
            match Batch::new(plan.fast.batch as usize, size) {
                Ok(b) => return DatagramReader::Batch(b),
                Err(e) => stats.fallbacks.push(format!("recvmmsg: {e}")),
            }
        }
        DatagramReader::Single(vec![0; size], cmsg())
    }

    /// Bytes its buffers hold.
    #[cfg(test)]
    fn allocated(&self) -> u64 {
        match self {
            DatagramReader::Single(buf, cmsg) => (buf.capacity() + cmsg.capacity()) as u64,
            DatagramReader::Batch(b) => b.allocated(),
            DatagramReader::Gro(buf) | DatagramReader::HeaderOnly(buf) => buf.capacity() as u64,
        }
    }

    fn name(&self) -> String {
        match self {
            DatagramReader::Single(..) => "recv".into(),
            DatagramReader::Batch(b) => format!("recvmmsg x{}", b.count()),
            DatagramReader::Gro(_) => "UDP GRO".into(),
            DatagramReader::HeaderOnly(_) => "recv MSG_TRUNC (header only)".into(),
        }
    }

    /// Receives what is there (waiting at most the read timeout for the first datagram) and
    /// hands each datagram to `counter` at its arrival. Ok(false) when the wait timed out.
    #[inline]
    fn receive(
        &mut self,
        ch: &mut DataChannel,
        clock: &mut StampClock,
        counter: &mut DatagramCounter,
        intervals: &mut IntervalClock<'_>,
    ) -> io::Result<bool> {
        let fd = ch.connection().socket_fd();
        let r = match (self, fd) {
            (DatagramReader::Single(buf, cmsg), Some(fd)) => {
                crate::sys::recv_stamped(fd, buf, cmsg).map(|(n, stamp)| {
                    let at = clock.map(stamp, Instant::now());
                    let head = &buf[..n.min(buf.len())];
                    counter.on_datagram(head, n, Arrival::At(at, stamp.is_some()), intervals, ch);
                })
            }
            (DatagramReader::Single(buf, _), None) => ch.recv_some(buf).map(|n| {
                let stamp = ch.connection().arrival_stamp();
                let at = clock.map(stamp, Instant::now());
                let head = &buf[..n.min(buf.len())];
                counter.on_datagram(head, n, Arrival::At(at, stamp.is_some()), intervals, ch);
            }),
            (DatagramReader::HeaderOnly(cmsg), Some(fd)) => {
                let mut head = [0u8; DATAGRAM_HEADER];
                crate::sys::recv_stamped(fd, &mut head, cmsg).map(|(n, stamp)| {
                    let at = clock.map(stamp, Instant::now());
                    counter.on_datagram(&head, n, Arrival::At(at, stamp.is_some()), intervals, ch);
                })
            }
            (DatagramReader::Batch(b), Some(fd)) => b.recv(fd).map(|k| {
                let now = Instant::now();
                for i in 0..k {
                    let stamp = b.stamp(i);
                    let at = clock.map(stamp, now);
                    let len = b.received_len(i);
                    let buf = b.buffer(i);
                    let head = &buf[..len.min(buf.len())];
                    counter.on_datagram(head, len, Arrival::At(at, stamp.is_some()), intervals, ch);
                }
            }),
            (DatagramReader::Gro(buf), Some(fd)) => {
                fastpath::recv_gro(fd, buf).map(|(n, segment, stamp)| {
                    let at = clock.map(stamp, Instant::now());
                    let seg = if segment == 0 { n.max(1) } else { segment };
                    for (i, chunk) in buf[..n].chunks(seg).enumerate() {
                        let arrival = if i == 0 {
                            Arrival::At(at, stamp.is_some())
                        } else {
                            Arrival::Within(at)
                        };
                        counter.on_datagram(chunk, chunk.len(), arrival, intervals, ch);
                    }
                })
            }
            (_, None) => Err(io::Error::other("no socket descriptor")),
        };
        match r {
            Ok(()) => Ok(true),
            Err(e) if gave_up_waiting(&e) || e.kind() == io::ErrorKind::Interrupted => Ok(false),
            Err(e) => Err(e),
        }
    }
}

/// Receives datagrams until the sender is done and all are in (or [`DRAIN_IDLE`] of silence).
/// The timed phase runs from the first timed datagram's kernel arrival stamp to the last's
/// (see [`StampClock`]), whenever this thread got round to reading them: a receiver held off
/// its CPU while its socket buffer filled neither starts nor ends late. Its start counts no
/// bytes (they arrived before it); with UDP GRO, whose reads carry one stamp for many
/// datagrams, the datagrams coalesced with the first are not counted and those coalesced
/// after the last stamped one are left out of the phase (`untimed_tail_bytes`), so that an
/// unknown order within one read can only lower the rate, never raise it.
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
    let mut counter = DatagramCounter::new(plan.warmup_datagrams, epoch, waiting_since);
    let mut intervals = IntervalClock::new(plan.interval, receiver_span(plan), epoch, live)
        .aligned(plan.align_intervals);
    let mut clock = StampClock::new();
    let mut last_arrival = epoch;
    loop {
        let before = counter.total;
        reader.receive(ch, &mut clock, &mut counter, &mut intervals)?;
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
    intervals.close_at(last, counter.timed_bytes, counter.timed_datagrams, ch);
    if counter.unstamped_ends && ch.connection().socket_fd().is_some() {
        stats
            .fallbacks
            .push("arrival stamps: the kernel gave none; the phase is timed at reads".into());
    }
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
    stats.bytes_timed = counter.timed_bytes;
    stats.untimed_tail_bytes = counter.bytes - counter.timed_bytes;
    stats.messages_timed = counter.timed_datagrams;
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

    fn datagram(seq: u64) -> [u8; 100] {
        let mut d = [0u8; 100];
        d[..8].copy_from_slice(&seq.to_le_bytes());
        d
    }

    #[test]
    fn coalesced_datagrams_neither_start_nor_end_the_phase() {
        // UDP GRO: one stamp per read of many datagrams, the first's. Read 1 holds warm-up 0
        // and timed 1, 2: 1 starts the clock at the read's stamp, 2 may have arrived before
        // it and is not counted. Read 2 (3, 4, 5) is counted; read 3 (6, 7): 6 at its stamp
        // ends the phase, 7 may have come after it and is left out as the untimed tail.
        let ch = super::super::clock_tests::idle_channel();
        let t0 = Instant::now();
        let ms = Duration::from_millis(1);
        let mut iv = IntervalClock::new(None, None, t0, None);
        let mut c = DatagramCounter::new(1, t0, t0);
        let reads = [(0u64..3, 1u32), (3..6, 5), (6..8, 9)];
        for (seqs, at_ms) in reads {
            let at = t0 + at_ms * ms;
            for (i, seq) in seqs.enumerate() {
                let arrival = if i == 0 {
                    Arrival::At(at, true)
                } else {
                    Arrival::Within(at)
                };
                c.on_datagram(&datagram(seq), 100, arrival, &mut iv, &ch);
            }
        }
        assert_eq!(c.start, Some(t0 + ms));
        assert_eq!(c.last, t0 + 9 * ms);
        assert_eq!((c.timed_bytes, c.timed_datagrams), (400, 4));
        assert_eq!(c.bytes - c.timed_bytes, 100);
        assert_eq!(c.seqs.unique, 7);
        assert!(!c.unstamped_ends);
    }

    #[test]
    fn the_tail_ring_keeps_its_explicit_size() {
        // A lead of 1000 bytes in reads of 500: 4 reads kept, whatever the allocator gave.
        let t0 = Instant::now();
        let mut tail = Tail::new(1000, 500);
        assert_eq!(tail.size, 4);
        for k in 1..=10u64 {
            tail.push(t0 + Duration::from_millis(k), k * 500, k);
        }
        assert_eq!(tail.ring.len(), 4);
        // The newest read holds 5000 bytes; 1000 before it, the read after 4000 ends the phase.
        let (at, bytes, reads) = tail.cut(1000).unwrap();
        assert_eq!((at, bytes, reads), (t0 + Duration::from_millis(8), 4000, 8));
        assert!(Tail::new(0, 500).cut(0).is_none());
    }

    #[test]
    fn a_receiver_reserves_its_intervals_for_twice_the_senders_duration_and_the_drain() {
        let plan = RecvPlan {
            read_size: 1,
            warmup_bytes: 0,
            warmup_datagrams: 0,
            interval: Some(Duration::from_millis(100)),
            expected: Some(Duration::from_secs(3)),
            fast: crate::pattern::FastPaths::default(),
            buffers_fixed: false,
            align_intervals: false,
        };
        assert_eq!(
            receiver_span(&plan),
            Some(Duration::from_secs(6) + DRAIN_IDLE)
        );
    }

    fn recv_plan(read_size: usize, batch: u32, expected: Option<Duration>) -> RecvPlan {
        RecvPlan {
            read_size,
            warmup_bytes: 0,
            warmup_datagrams: 0,
            interval: Some(Duration::from_millis(10)),
            expected,
            fast: crate::pattern::FastPaths {
                batch,
                ..crate::pattern::FastPaths::default()
            },
            buffers_fixed: false,
            align_intervals: false,
        }
    }

    /// Bytes the interval reports of `plan`'s receiver reserve, as its loop makes them.
    fn reports(plan: &RecvPlan) -> u64 {
        let clock = IntervalClock::new(plan.interval, receiver_span(plan), Instant::now(), None);
        (clock.out.capacity() * std::mem::size_of::<super::super::Interval>()) as u64
    }

    /// What a receiver makes (its reader or read buffer, its reports) is what its footprint
    /// says: exactly for the largest reader it may choose, within it when a fast path fell back
    /// for want of a socket.
    #[test]
    fn a_receivers_footprint_holds_the_buffers_it_makes() {
        use crate::transport::mem::{BYTES, DATAGRAMS};
        let ch = super::super::clock_tests::idle_channel();
        for read in [1000, 65_536, 200_000] {
            for expected in [Some(Duration::from_secs(2)), None] {
                let single = recv_plan(read, 1, expected);
                let mut stats = StreamStats::default();
                let reader = DatagramReader::choose(&ch, &single, &mut stats);
                assert_eq!(
                    reader.allocated() + reports(&single),
                    receiver_footprint(&single, &DATAGRAMS)
                );
                // A batch, with a socket: its buffers; without one it falls back to one.
                let batched = recv_plan(read, 32, expected);
                let reader = DatagramReader::choose(&ch, &batched, &mut stats);
                let footprint = receiver_footprint(&batched, &DATAGRAMS);
                assert!(reader.allocated() + reports(&batched) <= footprint);
                let batch = Batch::new(32, datagram_buffer_size(&batched)).unwrap();
                assert_eq!(batch.allocated() + reports(&batched), footprint);
                let bytes = recv_plan(read, 1, expected);
                assert_eq!(
                    byte_buffer(&bytes).capacity() as u64 + reports(&bytes),
                    receiver_footprint(&bytes, &BYTES)
                );
            }
        }
    }
}
