//! wirebench's own delay line, for kernels without netem: a middle namespace forwards every
//! Ethernet frame between the two hosts' links after holding it for the configured delay.
//!
//! Each direction is one thread: it receives frames from one packet socket, stamps each with
//! its release time (arrival + delay + uniform jitter), and sends it out of the other packet
//! socket when that time comes. Without jitter release times only grow, so a FIFO keeps the
//! frames in order; with jitter a heap releases them by time and they may be reordered, as on
//! a real path with varying delay. The virtio-net header on both sockets carries GSO
//! super-frames and partial checksums through unchanged, so one frame can be 64 KiB of TCP.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};
use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use super::config::DirectionConfig;
use crate::sys::packet;

/// Most bytes one direction holds at once (a router's buffer): 1 Gbit/s for 0.5 s.
const QUEUE_LIMIT: usize = 64 << 20;
/// Largest frame accepted (a GSO super-frame plus its header).
const MAX_FRAME: usize = 256 << 10;
/// How long an idle direction sleeps before looking again.
const IDLE: Duration = Duration::from_millis(100);

/// Counters of one direction, shared with the thread that reports them.
#[derive(Debug, Default)]
pub struct Counters {
    pub frames_in: AtomicU64,
    pub frames_out: AtomicU64,
    pub bytes_out: AtomicU64,
    pub dropped_queue_full: AtomicU64,
    pub dropped_send: AtomicU64,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CountersSnapshot {
    pub frames_in: u64,
    pub frames_out: u64,
    pub bytes_out: u64,
    pub dropped_queue_full: u64,
    pub dropped_send: u64,
}

impl Counters {
    pub fn snapshot(&self) -> CountersSnapshot {
        CountersSnapshot {
            frames_in: self.frames_in.load(Ordering::Relaxed),
            frames_out: self.frames_out.load(Ordering::Relaxed),
            bytes_out: self.bytes_out.load(Ordering::Relaxed),
            dropped_queue_full: self.dropped_queue_full.load(Ordering::Relaxed),
            dropped_send: self.dropped_send.load(Ordering::Relaxed),
        }
    }
}

struct Held {
    release: Instant,
    seq: u64,
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

fn hold_time(cfg: &DirectionConfig, rng: &mut Rng) -> Duration {
    if cfg.jitter.is_zero() {
        return cfg.delay;
    }
    let j = cfg.jitter.as_secs_f64();
    let d = cfg.delay.as_secs_f64() + (rng.next_f64() * 2.0 - 1.0) * j;
    Duration::from_secs_f64(d.max(0.0))
}

/// Forwards frames from `rx` to `tx` with the delay of `cfg`, forever (until an I/O error
/// other than a dropped frame).
pub fn forward(
    rx: &OwnedFd,
    tx: &OwnedFd,
    cfg: DirectionConfig,
    counters: Arc<Counters>,
) -> io::Result<()> {
    let _ = crate::sys::precise_timers();
    let mut scratch = vec![0u8; MAX_FRAME];
    let mut queue = if cfg.jitter.is_zero() {
        Queue::Fifo(VecDeque::with_capacity(4096))
    } else {
        Queue::ByTime(BinaryHeap::with_capacity(4096))
    };
    let mut pool = Pool::default();
    let mut rng = Rng::new();
    let mut queued = 0usize;
    let mut seq = 0u64;
    loop {
        // Release everything that is due.
        let now = Instant::now();
        while queue.next_release().is_some_and(|r| r <= now) {
            let Some(h) = queue.pop() else { break };
            queued -= h.frame.len();
            match packet::send(tx.as_fd(), &h.frame) {
                Ok(_) => {
                    counters.frames_out.fetch_add(1, Ordering::Relaxed);
                    counters.bytes_out.fetch_add(
                        (h.frame.len() - packet::VNET_HDR_LEN) as u64,
                        Ordering::Relaxed,
                    );
                }
                // The egress shaper's queue is full (ENOBUFS) or the frame does not fit:
                // the frame is dropped, as a router would drop it.
                Err(_) => {
                    counters.dropped_send.fetch_add(1, Ordering::Relaxed);
                }
            }
            pool.give(h.frame);
        }
        // Sleep until the next release or the next frame, whichever is first.
        let wait = queue
            .next_release()
            .map(|r| r.saturating_duration_since(Instant::now()))
            .unwrap_or(IDLE);
        if !wait.is_zero() {
            crate::sys::wait_readable_precise(rx.as_fd(), wait)?;
        }
        // Take in everything that has arrived.
        loop {
            match packet::recv(rx.as_fd(), &mut scratch) {
                Ok(n) if n > scratch.len() || n <= packet::VNET_HDR_LEN => {
                    counters.dropped_queue_full.fetch_add(1, Ordering::Relaxed);
                }
                Ok(n) => {
                    counters.frames_in.fetch_add(1, Ordering::Relaxed);
                    if queued + n > QUEUE_LIMIT {
                        counters.dropped_queue_full.fetch_add(1, Ordering::Relaxed);
                        continue;
                    }
                    let arrived = Instant::now();
                    let mut frame = pool.take(n);
                    frame.extend_from_slice(&scratch[..n]);
                    queued += n;
                    seq += 1;
                    queue.push(Held {
                        release: arrived + hold_time(&cfg, &mut rng),
                        seq,
                        frame,
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
    fn jitter_stays_within_bounds_and_is_centred() {
        let cfg = DirectionConfig {
            rate_bits_per_s: None,
            delay: Duration::from_millis(10),
            jitter: Duration::from_millis(2),
            loss: 0.0,
        };
        let mut rng = Rng::new();
        let n = 100_000;
        let mut sum = 0.0;
        for _ in 0..n {
            let d = hold_time(&cfg, &mut rng).as_secs_f64();
            assert!((0.008..=0.012).contains(&d), "{d}");
            sum += d;
        }
        // Mean of a uniform +/-2 ms around 10 ms; 5 standard errors is 0.018 ms.
        assert!((sum / n as f64 - 0.010).abs() < 0.000_02);
    }

    #[test]
    fn heap_releases_by_time_then_arrival() {
        let t = Instant::now();
        let mut q = Queue::ByTime(BinaryHeap::new());
        for (ms, seq) in [(5, 1), (1, 2), (5, 0), (3, 3)] {
            q.push(Held {
                release: t + Duration::from_millis(ms),
                seq,
                frame: Vec::new(),
            });
        }
        let order: Vec<u64> = std::iter::from_fn(|| q.pop().map(|h| h.seq)).collect();
        assert_eq!(order, [2, 3, 0, 1]);
    }
}
