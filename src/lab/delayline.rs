//! wirebench's delay line: the emulated link itself. A process in the middle namespace
//! forwards every Ethernet frame between the two hosts' links after the time a real link
//! would take: its queue, its wire at the link's rate ([`super::link::Wire`]), and the
//! propagation delay with jitter.
//!
//! Each direction is one thread: it receives frames from one packet socket, passes each to the
//! wire model (which drops it when the queue is full, or gives the time its last bit leaves
//! the wire), stamps it with its release time (that time + delay + uniform jitter), and sends
//! it out of the other packet socket when the time comes. Without jitter release times only
//! grow, so a FIFO keeps the frames in order; with jitter a heap releases them by time and
//! they may be reordered, as on a real path with varying delay. The virtio-net header on both
//! sockets carries GSO super-frames and partial checksums through unchanged, so one frame can
//! be 64 KiB of TCP; it crosses the wire in the time of all its segments and arrives whole
//! when its last segment would have (as a receiver's GRO would hand it up).
//!
//! The thread sleeps until shortly before the next release and spins the last stretch, so
//! that frames leave on time; how late each one left is counted (`late_*`), so that `lab
//! status` shows whether the host kept up with the emulation.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};
use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use super::config::DirectionConfig;
use super::framing::Framing;
use super::link::{self, QueueLimit, Wire};
use crate::sys::packet;

/// Most frame bytes one direction holds at once, queued and in flight (a bound on memory, not
/// part of the emulated link: 1 Gbit/s for 0.5 s). Frames beyond it are counted apart.
const MEMORY_LIMIT: usize = 64 << 20;
/// Sleep until shortly before a release, then spin: a sleeping thread wakes tens of
/// microseconds late on a VM, which at 1 Gbit/s is several frames' wire time. How shortly
/// follows how late the thread's own sleeps end ([`SpinAhead`]), between these bounds.
const SPIN_AHEAD_MIN: Duration = Duration::from_micros(50);
const SPIN_AHEAD_MAX: Duration = Duration::from_micros(250);

/// How long before a release the delay line stops sleeping: twice the latest oversleep of
/// its own timed waits (at once when it grows), easing back to [`SPIN_AHEAD_MIN`] by a
/// 64th at each spin.
///
/// An idle VM wakes its halted vCPU late: with a fixed 50 us a quiet host's ping-pong frames
/// left 6 to 50 us late on average and 1% to 3% of them over 100 us late, which lengthened
/// a 4 ms round trip by up to 2%; spinning the last 200 us brought that to 1 us and 0 to 3
/// frames in 800, at 8% of a CPU instead of 3% in an idle 10 Mbit/s ping-pong. But a fixed
/// 200 us spins without a break once frames leave less than 200 us apart, and a real-time
/// thread that never sleeps is throttled by the kernel for 50 ms each second
/// (`sched_rt_runtime_us`): a UDP stream at 120 Mbit/s into 100 Mbit/s had 905 of 17 790
/// frames late, the latest by 47 ms. Busy, a thread's sleeps end on time, and the spin
/// eases back to where it sleeps between frames.
#[derive(Debug, Clone, Copy)]
struct SpinAhead(Duration);

impl SpinAhead {
    fn get(self) -> Duration {
        self.0
    }

    /// A timed wait of `asked` took `took`.
    fn slept(&mut self, asked: Duration, took: Duration) {
        let target = (took.saturating_sub(asked) * 2).clamp(SPIN_AHEAD_MIN, SPIN_AHEAD_MAX);
        if target > self.0 {
            self.0 = target;
        } else {
            self.spun();
        }
    }

    /// The thread spun instead of sleeping (or woke on time).
    fn spun(&mut self) {
        self.0 = (self.0 - (self.0 - SPIN_AHEAD_MIN) / 64).max(SPIN_AHEAD_MIN);
    }
}
/// The longest the delay line runs without a sleep of at least [`REST`], and that rest.
///
/// A real-time thread that runs 950 ms of a second is stopped by the kernel for the rest of
/// it (`sched_rt_runtime_us`, 5% left to others): a raw sender flooding a 130 Mbit/s link at
/// 30 times its rate kept the line reading without a break, and 764 of 16 089 frames left
/// late, the latest by 44 ms. Resting 60 us after every 800 us awake (7%) keeps it under the
/// kernel's bound, and a frame that falls due in a rest leaves under 100 us late, within
/// what counts as on time. Frames that arrive meanwhile wait in the socket with their
/// kernel arrival stamps.
const AWAKE_MAX: Duration = Duration::from_micros(800);
const REST: Duration = Duration::from_micros(60);

/// A frame released later than this after its time counts as late.
const LATE: Duration = Duration::from_micros(100);
/// Largest frame accepted (a GSO super-frame plus its header).
const MAX_FRAME: usize = 256 << 10;
/// How long an idle direction sleeps before looking again.
const IDLE: Duration = Duration::from_millis(100);

/// Counters of one direction, shared with the thread that reports them.
#[derive(Debug, Default)]
pub struct Counters {
    pub frames_in: AtomicU64,
    pub segments_in: AtomicU64,
    pub frames_out: AtomicU64,
    pub segments_out: AtomicU64,
    pub bytes_out: AtomicU64,
    pub wire_bytes_out: AtomicU64,
    pub cells_out: AtomicU64,
    pub dropped_queue_full: AtomicU64,
    pub dropped_queue_segments: AtomicU64,
    pub dropped_queue_udp_segments: AtomicU64,
    pub dropped_queue_tcp_segments: AtomicU64,
    pub dropped_send: AtomicU64,
    pub dropped_memory: AtomicU64,
    pub queue_peak_bytes: AtomicU64,
    pub late_frames: AtomicU64,
    pub late_max_ns: AtomicU64,
    pub late_sum_ns: AtomicU64,
    pub late_window_sum_ns: AtomicU64,
}

/// One direction's counters at one moment. Fields absent in files of older wirebench read 0.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct CountersSnapshot {
    /// Frames taken from the sending host's link (a GSO super-frame is one frame).
    pub frames_in: u64,
    /// The segments those frames stand for (what a real link would have carried).
    pub segments_in: u64,
    /// Frames handed to the receiving host's link.
    pub frames_out: u64,
    pub segments_out: u64,
    /// Frame bytes handed on (as the kernel holds a frame: GSO super-frames once).
    pub bytes_out: u64,
    /// Bytes the emulated wire carried: every segment with its headers.
    pub wire_bytes_out: u64,
    /// ATM cells the emulated wire carried (an `atm-aal5` or `atm-aal34` link; 0 otherwise).
    pub cells_out: u64,
    /// Frames (and their segments) dropped because the queue in front of the wire was full.
    pub dropped_queue_full: u64,
    pub dropped_queue_segments: u64,
    /// Of those segments, the UDP ones and the TCP ones (a UDP test's loss and its control
    /// connection's retransmissions apart).
    pub dropped_queue_udp_segments: u64,
    pub dropped_queue_tcp_segments: u64,
    /// Frames the receiving host's link refused.
    pub dropped_send: u64,
    /// Frames dropped because the delay line held its memory bound (not link behaviour).
    pub dropped_memory: u64,
    /// The most wire bytes the queue held.
    pub queue_peak_bytes: u64,
    /// Frames released more than 100 us after their time, the largest and the summed lateness.
    pub late_frames: u64,
    pub late_max_ns: u64,
    pub late_sum_ns: u64,
    /// The largest lateness in each window of the link's round-trip hold (the least time a
    /// frame's effect takes to come back to this direction: both directions' delay minus
    /// jitter), summed over the windows (see [`CausalWindows`]). None from a delay line of an
    /// older wirebench.
    pub late_window_sum_ns: Option<u64>,
}

impl Counters {
    pub fn snapshot(&self) -> CountersSnapshot {
        let l = |a: &AtomicU64| a.load(Ordering::Relaxed);
        CountersSnapshot {
            frames_in: l(&self.frames_in),
            segments_in: l(&self.segments_in),
            frames_out: l(&self.frames_out),
            segments_out: l(&self.segments_out),
            bytes_out: l(&self.bytes_out),
            wire_bytes_out: l(&self.wire_bytes_out),
            cells_out: l(&self.cells_out),
            dropped_queue_full: l(&self.dropped_queue_full),
            dropped_queue_segments: l(&self.dropped_queue_segments),
            dropped_queue_udp_segments: l(&self.dropped_queue_udp_segments),
            dropped_queue_tcp_segments: l(&self.dropped_queue_tcp_segments),
            dropped_send: l(&self.dropped_send),
            dropped_memory: l(&self.dropped_memory),
            queue_peak_bytes: l(&self.queue_peak_bytes),
            late_frames: l(&self.late_frames),
            late_max_ns: l(&self.late_max_ns),
            late_sum_ns: l(&self.late_sum_ns),
            late_window_sum_ns: Some(l(&self.late_window_sum_ns)),
        }
    }
}

impl CountersSnapshot {
    /// Mean lateness of a released frame, nanoseconds.
    pub fn late_mean_ns(&self) -> f64 {
        if self.frames_out + self.dropped_send == 0 {
            0.0
        } else {
            self.late_sum_ns as f64 / (self.frames_out + self.dropped_send) as f64
        }
    }
}

/// The lateness a chain of cause and effect through the link can carry: the largest lateness
/// in each window of `window` on the release clock, summed.
///
/// A frame released L late moves what its receiver does next by at most L, and so every
/// frame that answer causes, and so on: a round trip's end moves by at most the latenesses
/// summed along its chain of causes (a frame released, the answer it caused in the other
/// direction, the frame that answer caused here...). A frame's own schedule follows from its
/// arrival and the schedule of the frames before it, never from how late those left, so only
/// the frames of the chain add their own lateness. Two frames of one chain in one direction
/// are released at least the round-trip hold apart (each crossing holds a frame at least
/// its direction's delay minus jitter), so at most one falls in each window: a chain in this
/// direction carries at most this sum. Summing every frame's lateness instead counted the
/// few microseconds each of a message's frames leaves late as if each lengthened a round
/// trip, when only the message's last frame does.
#[derive(Debug, Default)]
struct CausalWindows {
    window_ns: u64,
    current: u64,
    max_ns: u64,
}

impl CausalWindows {
    fn new(window: Duration) -> CausalWindows {
        CausalWindows {
            window_ns: window.as_nanos() as u64,
            current: u64::MAX,
            max_ns: 0,
        }
    }

    /// Makes the window no longer than `window`.
    fn shrink_to(&mut self, window: Duration) {
        self.window_ns = self.window_ns.min(window.as_nanos() as u64);
    }

    /// A frame released at `at_ns` (on the line's own clock, frames in order) `late_ns` late:
    /// what the sum grows by.
    fn released(&mut self, at_ns: u64, late_ns: u64) -> u64 {
        // Without a hold a frame's effect can come straight back: every frame is its own window.
        let index = at_ns.checked_div(self.window_ns).unwrap_or(at_ns);
        if index != self.current || self.window_ns == 0 {
            self.current = index;
            self.max_ns = 0;
        }
        let grew = late_ns.saturating_sub(self.max_ns);
        self.max_ns = self.max_ns.max(late_ns);
        grew
    }
}

struct Held {
    release: Instant,
    seq: u64,
    segments: u64,
    wire_bytes: u64,
    cells: u64,
    frame: Vec<u8>,
}

impl PartialEq for Held {
    fn eq(&self, o: &Self) -> bool {
        (self.release, self.seq) == (o.release, o.seq)
    }
}
impl Eq for Held {}
impl PartialOrd for Held {
    fn partial_cmp(&self, o: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Held {
    fn cmp(&self, o: &Self) -> std::cmp::Ordering {
        (self.release, self.seq).cmp(&(o.release, o.seq))
    }
}

/// Frames waiting for their release time.
enum Queue {
    Fifo(VecDeque<Held>),
    ByTime(BinaryHeap<Reverse<Held>>),
}

impl Queue {
    fn next_release(&self) -> Option<Instant> {
        match self {
            Queue::Fifo(q) => q.front().map(|h| h.release),
            Queue::ByTime(h) => h.peek().map(|r| r.0.release),
        }
    }
    fn pop(&mut self) -> Option<Held> {
        match self {
            Queue::Fifo(q) => q.pop_front(),
            Queue::ByTime(h) => h.pop().map(|r| r.0),
        }
    }
    fn push(&mut self, h: Held) {
        match self {
            Queue::Fifo(q) => q.push_back(h),
            Queue::ByTime(q) => q.push(Reverse(h)),
        }
    }
    /// The queue as a heap by release time (frames held without jitter, then `lab set` gave
    /// the link some): the FIFO's order no longer follows release times.
    fn into_by_time(self) -> Queue {
        match self {
            Queue::Fifo(q) => Queue::ByTime(q.into_iter().map(Reverse).collect()),
            heap => heap,
        }
    }
}

/// Reuses frame buffers by size class, so that a steady flow allocates nothing and small
/// frames do not pin large buffers.
#[derive(Default)]
struct Pool {
    classes: [Vec<Vec<u8>>; 3],
}

impl Pool {
    fn class(len: usize) -> usize {
        match len {
            0..=4096 => 0,
            4097..=16384 => 1,
            _ => 2,
        }
    }
    fn take(&mut self, len: usize) -> Vec<u8> {
        let c = Self::class(len);
        let mut v = self.classes[c]
            .pop()
            .unwrap_or_else(|| Vec::with_capacity([4096, 16384, MAX_FRAME][c]));
        v.clear();
        v
    }
    fn give(&mut self, v: Vec<u8>) {
        let c = Self::class(v.capacity());
        if self.classes[c].len() < 65_536 {
            self.classes[c].push(v);
        }
    }
}

/// A small, fast generator for jitter (xorshift64*); quality is ample for uniform delays.
struct Rng(u64);

impl Rng {
    fn new() -> Rng {
        let mut b = [0u8; 8];
        let _ = getrandom::fill(&mut b);
        Rng(u64::from_le_bytes(b) | 1)
    }
    fn next_f64(&mut self) -> f64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        (self.0.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 11) as f64 / (1u64 << 53) as f64
    }
}

fn hold_time(delay: Duration, jitter: Duration, rng: &mut Rng) -> Duration {
    if jitter.is_zero() {
        return delay;
    }
    let j = jitter.as_secs_f64();
    let d = delay.as_secs_f64() + (rng.next_f64() * 2.0 - 1.0) * j;
    Duration::from_secs_f64(d.max(0.0))
}

/// A direction's delay and jitter as they are now: `lab set` changes them while the lab is
/// up (the delay-line process stores what the lab's state file says; its forwarding thread
/// reads them for every frame it takes in). Frames already held keep the release time they
/// were given, as frames in flight on a real path keep theirs when its route changes.
#[derive(Debug, Default)]
pub struct LiveHold {
    delay_ns: AtomicU64,
    jitter_ns: AtomicU64,
}

impl LiveHold {
    pub fn new(cfg: &DirectionConfig) -> LiveHold {
        let h = LiveHold::default();
        h.set(cfg);
        h
    }

    /// Takes `cfg`'s delay and jitter; whether they changed.
    pub fn set(&self, cfg: &DirectionConfig) -> bool {
        let ns = |d: Duration| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX);
        let d = self.delay_ns.swap(ns(cfg.delay), Ordering::Relaxed);
        let j = self.jitter_ns.swap(ns(cfg.jitter), Ordering::Relaxed);
        (d, j) != (ns(cfg.delay), ns(cfg.jitter))
    }

    /// (delay, jitter).
    pub fn get(&self) -> (Duration, Duration) {
        (
            Duration::from_nanos(self.delay_ns.load(Ordering::Relaxed)),
            Duration::from_nanos(self.jitter_ns.load(Ordering::Relaxed)),
        )
    }

    /// The least time a frame is held: delay minus jitter.
    fn least(&self) -> Duration {
        let (d, j) = self.get();
        d.saturating_sub(j)
    }
}

/// The delay and jitter of a direction and of its reverse, shared with the process that
/// changes them (see [`LiveHold`]).
#[derive(Debug, Clone)]
pub struct Holds {
    pub own: Arc<LiveHold>,
    pub reverse: Arc<LiveHold>,
}

/// When a frame taken in is released: `computed` (its time off the wire plus its hold),
/// except that without jitter no frame leaves before one taken in earlier (`last`). A link
/// whose delay `lab set` shortened does not let new frames overtake those still held at the
/// longer delay: a FIFO link holds its order, and the delay line's FIFO queue relies on it.
fn release_at(computed: Instant, last: Option<Instant>, jitter: Duration) -> Instant {
    match last {
        Some(l) if jitter.is_zero() && l > computed => l,
        _ => computed,
    }
}

/// The GSO size a frame's virtio-net header announces (0: not a GSO frame).
fn gso_size(vnet: &[u8]) -> u16 {
    const GSO_NONE: u8 = 0;
    match vnet {
        [_, gso_type, _, _, lo, hi, ..] if *gso_type & 0x7f != GSO_NONE => {
            u16::from_le_bytes([*lo, *hi])
        }
        _ => 0,
    }
}

/// The link a direction emulates: its settings (its delay and jitter as they are now, and
/// its other direction's for the round-trip hold of [`CausalWindows`], are in [`Holds`]), its
/// MTU and its wire's framing.
#[derive(Debug, Clone, Copy)]
pub struct Direction {
    pub cfg: DirectionConfig,
    pub mtu: u64,
    pub framing: Framing,
}

/// Forwards frames from `rx` to `tx` through the emulated link `link`, forever (until an I/O
/// error other than a dropped frame).
pub fn forward(
    rx: &OwnedFd,
    tx: &OwnedFd,
    link: Direction,
    holds: Holds,
    counters: Arc<Counters>,
) -> io::Result<()> {
    let Direction { cfg, mtu, framing } = link;
    let _ = crate::sys::precise_timers();
    // The delay line's lateness is the link's: ahead of ordinary load on the host.
    let _ = crate::sys::realtime_priority(10);
    // Frames are stamped by the kernel as they arrive, so that a delay line that was busy or
    // descheduled still puts each frame on the wire at the time it arrived.
    let stamped = crate::sys::rx_timestamps(rx.as_fd(), true).is_ok();
    let mut cmsg = nix::cmsg_space!(nix::sys::time::TimeSpec);
    let mut scratch = vec![0u8; MAX_FRAME];
    let mut queue = if cfg.jitter.is_zero() {
        Queue::Fifo(VecDeque::with_capacity(4096))
    } else {
        Queue::ByTime(BinaryHeap::with_capacity(4096))
    };
    let limit = cfg
        .effective_queue(mtu)
        .unwrap_or(QueueLimit::Bytes(u64::MAX));
    let mut wire = Wire::new(cfg.rate_bits_per_s, limit);
    let epoch = Instant::now();
    let mut pool = Pool::default();
    let mut rng = Rng::new();
    let mut held = 0usize;
    let mut seq = 0u64;
    let mut spin_ahead = SpinAhead(SPIN_AHEAD_MIN);
    let round_trip_hold = || holds.own.least() + holds.reverse.least();
    let mut windows = CausalWindows::new(round_trip_hold());
    let mut last_release: Option<Instant> = None;
    let mut awake_since = Instant::now();
    loop {
        // Release everything that is due.
        let now = Instant::now();
        while queue.next_release().is_some_and(|r| r <= now) {
            let Some(h) = queue.pop() else { break };
            held -= h.frame.len();
            let released = Instant::now();
            let late = released.saturating_duration_since(h.release);
            match packet::send(tx.as_fd(), &h.frame) {
                Ok(_) => {
                    counters.frames_out.fetch_add(1, Ordering::Relaxed);
                    counters
                        .segments_out
                        .fetch_add(h.segments, Ordering::Relaxed);
                    counters.bytes_out.fetch_add(
                        (h.frame.len() - packet::VNET_HDR_LEN) as u64,
                        Ordering::Relaxed,
                    );
                    counters
                        .wire_bytes_out
                        .fetch_add(h.wire_bytes, Ordering::Relaxed);
                    counters.cells_out.fetch_add(h.cells, Ordering::Relaxed);
                }
                // The receiving link refused it (ENOBUFS) or it does not fit: the frame is
                // dropped, as a router would drop it.
                Err(_) => {
                    counters.dropped_send.fetch_add(1, Ordering::Relaxed);
                }
            }
            let late_ns = late.as_nanos() as u64;
            counters.late_sum_ns.fetch_add(late_ns, Ordering::Relaxed);
            counters.late_max_ns.fetch_max(late_ns, Ordering::Relaxed);
            let at_ns = released.saturating_duration_since(epoch).as_nanos() as u64;
            counters
                .late_window_sum_ns
                .fetch_add(windows.released(at_ns, late_ns), Ordering::Relaxed);
            if late > LATE {
                counters.late_frames.fetch_add(1, Ordering::Relaxed);
            }
            pool.give(h.frame);
        }
        // Sleep until shortly before the next release or until the next frame, whichever is
        // first; closer than that, go round again (spin) so the release is on time.
        if awake_since.elapsed() > AWAKE_MAX {
            std::thread::sleep(REST);
            awake_since = Instant::now();
        }
        let wait = queue
            .next_release()
            .map(|r| r.saturating_duration_since(Instant::now()))
            .unwrap_or(IDLE);
        if wait > spin_ahead.get() {
            let asked = wait - spin_ahead.get();
            let t = Instant::now();
            let timed_out = !crate::sys::wait_readable_precise(rx.as_fd(), asked)?;
            let took = t.elapsed();
            if timed_out {
                spin_ahead.slept(asked, took);
            }
            if took >= REST {
                awake_since = Instant::now();
            }
        } else {
            spin_ahead.spun();
        }
        // Take in what has arrived, until a release falls due: a sender that floods the link
        // (an unpaced UDP or raw sender offers it many times its rate) refills the socket as
        // fast as it is read, and a loop that read until it was empty held every release
        // back behind it (13 517 of 13 542 frames released late on a quiet host, three UDP
        // streams into 30.9 Mbit/s). Frames read later keep their kernel arrival stamps, so
        // each is still admitted to the wire at the time it arrived.
        loop {
            if queue.next_release().is_some_and(|r| r <= Instant::now()) {
                break;
            }
            let received = if stamped {
                crate::sys::recv_stamped(rx.as_fd(), &mut scratch, &mut cmsg)
            } else {
                packet::recv(rx.as_fd(), &mut scratch).map(|n| (n, None))
            };
            match received {
                Ok((n, _)) if n > scratch.len() || n <= packet::VNET_HDR_LEN => {
                    counters.dropped_memory.fetch_add(1, Ordering::Relaxed);
                }
                Ok((n, stamp)) => {
                    let arrived = crate::sys::arrival_instant(stamp);
                    let (vnet, frame) = scratch[..n].split_at(packet::VNET_HDR_LEN);
                    let link::WireSize {
                        bytes: wire_bytes,
                        segments,
                        cells,
                    } = link::wire_size(frame, gso_size(vnet), framing);
                    counters.frames_in.fetch_add(1, Ordering::Relaxed);
                    counters.segments_in.fetch_add(segments, Ordering::Relaxed);
                    if held + n > MEMORY_LIMIT {
                        counters.dropped_memory.fetch_add(1, Ordering::Relaxed);
                        continue;
                    }
                    let now_ns = arrived.saturating_duration_since(epoch).as_nanos() as f64;
                    let Some(off_wire_ns) = wire.admit(now_ns, wire_bytes, segments) else {
                        counters.dropped_queue_full.fetch_add(1, Ordering::Relaxed);
                        counters
                            .dropped_queue_segments
                            .fetch_add(segments, Ordering::Relaxed);
                        match link::ipv4_protocol(frame) {
                            Some(17) => &counters.dropped_queue_udp_segments,
                            Some(6) => &counters.dropped_queue_tcp_segments,
                            _ => continue,
                        }
                        .fetch_add(segments, Ordering::Relaxed);
                        continue;
                    };
                    counters
                        .queue_peak_bytes
                        .fetch_max(wire.peak_bytes, Ordering::Relaxed);
                    let off_wire = epoch + Duration::from_nanos(off_wire_ns.ceil() as u64);
                    let mut frame_buf = pool.take(n);
                    frame_buf.extend_from_slice(&scratch[..n]);
                    held += n;
                    seq += 1;
                    let (delay, jitter) = holds.own.get();
                    if !jitter.is_zero() && matches!(queue, Queue::Fifo(_)) {
                        queue = std::mem::replace(&mut queue, Queue::Fifo(VecDeque::new()))
                            .into_by_time();
                    }
                    // A shorter hold (`lab set`) shortens the windows at once; a longer one
                    // would leave frames held at the old, shorter hold in windows too long
                    // for them, so the windows never grow (the sum only errs high).
                    windows.shrink_to(round_trip_hold());
                    let release = release_at(
                        off_wire + hold_time(delay, jitter, &mut rng),
                        last_release,
                        jitter,
                    );
                    last_release = Some(last_release.map_or(release, |l| l.max(release)));
                    queue.push(Held {
                        release,
                        seq,
                        segments,
                        wire_bytes,
                        cells,
                        frame: frame_buf,
                    });
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_spin_follows_the_oversleep_up_at_once_and_down_slowly() {
        let us = Duration::from_micros;
        let mut s = SpinAhead(SPIN_AHEAD_MIN);
        // Woken on time: stays at the floor.
        s.slept(us(1000), us(1010));
        assert_eq!(s.get(), SPIN_AHEAD_MIN);
        // 90 us late: twice that at once; 300 us late: the ceiling.
        s.slept(us(1000), us(1090));
        assert_eq!(s.get(), us(180));
        s.slept(us(1000), us(1300));
        assert_eq!(s.get(), SPIN_AHEAD_MAX);
        // Frames closer together than the spin: it eases back to the floor, so the thread
        // sleeps again between them (a real-time thread that never sleeps is throttled).
        for _ in 0..1000 {
            s.spun();
        }
        assert!(s.get() < us(52), "{:?}", s.get());
        assert!(s.get() >= SPIN_AHEAD_MIN);
    }

    #[test]
    fn a_window_of_the_round_trip_hold_counts_its_latest_frame_once() {
        // 2 ms round-trip hold: frames at 0.1, 0.5 and 1.9 ms fall in one window, 2.1 ms in
        // the next.
        let mut w = CausalWindows::new(Duration::from_millis(2));
        let sum: u64 = [(100_000, 30_000), (500_000, 50_000), (1_900_000, 10_000)]
            .iter()
            .map(|&(at, late)| w.released(at, late))
            .sum();
        assert_eq!(sum, 50_000);
        assert_eq!(w.released(2_100_000, 20_000), 20_000);
        assert_eq!(w.released(2_200_000, 25_000), 5_000);
        // No hold: each frame is its own window, every lateness counts.
        let mut w = CausalWindows::new(Duration::ZERO);
        let sum: u64 = [(10, 7), (10, 8), (11, 9)]
            .iter()
            .map(|&(at, late)| w.released(at, late))
            .sum();
        assert_eq!(sum, 24);
    }

    #[test]
    fn jitter_stays_within_bounds_and_is_centred() {
        let cfg = DirectionConfig {
            rate_bits_per_s: None,
            delay: Duration::from_millis(10),
            jitter: Duration::from_millis(2),
            loss: 0.0,
            queue: None,
            rate_name: None,
        };
        let mut rng = Rng::new();
        let n = 100_000;
        let mut sum = 0.0;
        for _ in 0..n {
            let d = hold_time(cfg.delay, cfg.jitter, &mut rng).as_secs_f64();
            assert!((0.008..=0.012).contains(&d), "{d}");
            sum += d;
        }
        // Mean of a uniform +/-2 ms around 10 ms; 5 standard errors is 0.018 ms.
        assert!((sum / n as f64 - 0.010).abs() < 0.000_02);
    }

    #[test]
    fn a_shortened_delay_never_lets_a_frame_overtake_one_held_longer() {
        let t = Instant::now();
        let ms = Duration::from_millis;
        // Held at 40 ms until t+45; a frame after `lab set --delay 10ms` would leave at t+15.
        assert_eq!(
            release_at(t + ms(15), Some(t + ms(45)), Duration::ZERO),
            t + ms(45)
        );
        // Later anyway, or with jitter (which reorders on purpose): its own time.
        assert_eq!(
            release_at(t + ms(50), Some(t + ms(45)), Duration::ZERO),
            t + ms(50)
        );
        assert_eq!(release_at(t + ms(15), Some(t + ms(45)), ms(1)), t + ms(15));
        assert_eq!(release_at(t + ms(15), None, Duration::ZERO), t + ms(15));
    }

    #[test]
    fn a_live_hold_takes_new_settings_and_says_whether_they_changed() {
        let mut cfg = DirectionConfig {
            delay: Duration::from_millis(10),
            ..DirectionConfig::default()
        };
        let h = LiveHold::new(&cfg);
        assert_eq!(h.get(), (Duration::from_millis(10), Duration::ZERO));
        assert!(!h.set(&cfg));
        cfg.delay = Duration::from_millis(40);
        cfg.jitter = Duration::from_millis(5);
        assert!(h.set(&cfg));
        assert_eq!(
            h.get(),
            (Duration::from_millis(40), Duration::from_millis(5))
        );
        assert_eq!(h.least(), Duration::from_millis(35));
        // The causal windows follow a shorter round-trip hold, never a longer one.
        let mut w = CausalWindows::new(Duration::from_millis(20));
        w.shrink_to(Duration::from_millis(70));
        assert_eq!(w.window_ns, 20_000_000);
        w.shrink_to(Duration::from_millis(2));
        assert_eq!(w.window_ns, 2_000_000);
    }

    #[test]
    fn a_fifo_turned_heap_keeps_every_frame_in_release_order() {
        let t = Instant::now();
        let mut q = Queue::Fifo(VecDeque::new());
        for (ms, seq) in [(1, 0), (3, 1), (5, 2)] {
            q.push(Held {
                release: t + Duration::from_millis(ms),
                seq,
                segments: 1,
                wire_bytes: 0,
                cells: 0,
                frame: Vec::new(),
            });
        }
        let mut q = q.into_by_time();
        // A jittered frame due before the last of them.
        q.push(Held {
            release: t + Duration::from_millis(2),
            seq: 3,
            segments: 1,
            wire_bytes: 0,
            cells: 0,
            frame: Vec::new(),
        });
        let order: Vec<u64> = std::iter::from_fn(|| q.pop().map(|h| h.seq)).collect();
        assert_eq!(order, [0, 3, 1, 2]);
    }

    #[test]
    fn heap_releases_by_time_then_arrival() {
        let t = Instant::now();
        let mut q = Queue::ByTime(BinaryHeap::new());
        for (ms, seq) in [(5, 1), (1, 2), (5, 0), (3, 3)] {
            q.push(Held {
                release: t + Duration::from_millis(ms),
                seq,
                segments: 1,
                wire_bytes: 0,
                cells: 0,
                frame: Vec::new(),
            });
        }
        let order: Vec<u64> = std::iter::from_fn(|| q.pop().map(|h| h.seq)).collect();
        assert_eq!(order, [2, 3, 0, 1]);
    }
}
