//! The physics of one direction of an emulated link, without any I/O: a bounded queue in front
//! of a wire that serialises frames at the link's rate. The delay line (`delayline.rs`) feeds
//! it the frames it receives and releases each one after the time this model gives plus the
//! propagation delay, so that the model can be tested with exact numbers.
//!
//! A frame that arrives at `now` starts on the wire when the wire is free (no earlier than
//! `now`) and its last bit leaves `wire_bytes * 8 / rate` later. Nothing accumulates while the
//! link is idle: unlike a token bucket (tbf), an idle link gives no credit, so every message
//! pays its wire time, however long the link was quiet before it.
//!
//! A frame counts as its wire bytes: the frame as the kernel holds it (Ethernet header 14 B,
//! IP and transport headers and payload; no preamble, FCS or inter-frame gap), the same framing
//! the goodput formulas of `goodput.rs` count. A GSO super-frame counts as the segments it
//! stands for, each with its own headers.

use std::collections::VecDeque;

use super::framing::{Framing, ETHERNET_HEADER};
pub use crate::model::lab::QueueLimit;

/// The default queue: 50 ms at the link's rate (a router buffer of common size), but at least
/// 100 full frames so that a slow link still holds a few GSO super-frames.
pub const DEFAULT_QUEUE_TIME_S: f64 = 0.050;
pub const DEFAULT_QUEUE_MIN_FRAMES: u64 = 100;

impl QueueLimit {
    /// `100p`, `100pkt` or `100packets` (segments); `64K`, `150000B`, `1M` (bytes, binary
    /// suffixes as every size in wirebench). A bare number is refused: it would be ambiguous.
    pub fn parse(s: &str) -> Result<QueueLimit, String> {
        let t = s.trim();
        let lower = t.to_ascii_lowercase();
        for suffix in ["packets", "pkts", "pkt", "p"] {
            if let Some(n) = lower.strip_suffix(suffix) {
                let n: u64 = n
                    .trim()
                    .parse()
                    .map_err(|_| format!("'{s}': a packet count is a whole number, e.g. 100p"))?;
                if n == 0 {
                    return Err(format!("'{s}': a queue holds at least one packet"));
                }
                return Ok(QueueLimit::Packets(n));
            }
        }
        if t.chars().all(|c| c.is_ascii_digit()) {
            return Err(format!(
                "'{s}': say packets (e.g. {t}p) or bytes (e.g. {t}B, 64K)"
            ));
        }
        let bytes = crate::units::parse_bytes(t)
            .or_else(|e| {
                t.strip_suffix(['B', 'b'])
                    .map_or(Err(e), crate::units::parse_bytes)
            })
            .map_err(|e| format!("'{s}': {e}"))?;
        if bytes < 64 {
            return Err(format!("'{s}': a queue holds at least 64 bytes"));
        }
        Ok(QueueLimit::Bytes(bytes))
    }

    /// The default for a link of `rate_bits_per_s` and `mtu`.
    pub fn default_for(rate_bits_per_s: f64, mtu: u64) -> QueueLimit {
        let by_time = (rate_bits_per_s / 8.0 * DEFAULT_QUEUE_TIME_S) as u64;
        QueueLimit::Bytes(by_time.max(DEFAULT_QUEUE_MIN_FRAMES * (mtu + ETHERNET_HEADER)))
    }

    pub fn describe(&self) -> String {
        match self {
            QueueLimit::Packets(n) => format!("{n} packets"),
            QueueLimit::Bytes(b) => format!("{b} bytes"),
        }
    }

    /// In packets of the MTU, for a queue that counts packets only (netem's `limit`).
    pub fn packets(&self, mtu: u64) -> u64 {
        match *self {
            QueueLimit::Packets(n) => n,
            QueueLimit::Bytes(b) => b.div_ceil(mtu + ETHERNET_HEADER).max(1),
        }
    }
}

/// What one frame costs the wire: its wire bytes under the link's framing, the segments it
/// stands for, and the ATM cells of those (0 on a framing without cells).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WireSize {
    pub bytes: u64,
    pub segments: u64,
    pub cells: u64,
}

/// What an Ethernet frame `frame` (from its first byte, the destination MAC) that the kernel
/// handed over with GSO size `gso_size` (0: not a GSO frame) costs a wire of `framing`. A GSO
/// frame of an IPv4 TCP or UDP packet is cut into segments of `gso_size` payload bytes, each
/// carrying the headers again and each framed on its own (its own cells, its own preamble).
pub fn wire_size(frame: &[u8], gso_size: u16, framing: Framing) -> WireSize {
    let len = frame.len() as u64;
    let l3 = |frame_len: u64| frame_len.saturating_sub(ETHERNET_HEADER);
    let one = |frame_len: u64| WireSize {
        bytes: framing.wire_bytes(l3(frame_len)),
        segments: 1,
        cells: framing.cells(l3(frame_len)),
    };
    if gso_size == 0 {
        return one(len);
    }
    let Some(headers) = ipv4_l4_headers(frame) else {
        return one(len);
    };
    let gso = u64::from(gso_size);
    let payload = len.saturating_sub(headers);
    let segments = payload.div_ceil(gso).max(1);
    let full = one(headers + gso);
    let last = one(headers + payload.saturating_sub((segments - 1) * gso));
    WireSize {
        bytes: (segments - 1) * full.bytes + last.bytes,
        segments,
        cells: (segments - 1) * full.cells + last.cells,
    }
}

/// The IPv4 protocol number of an Ethernet frame (6 TCP, 17 UDP); None when not IPv4.
pub fn ipv4_protocol(frame: &[u8]) -> Option<u8> {
    (frame.len() > 23 && frame[12..14] == [0x08, 0x00]).then(|| frame[23])
}

/// Length of the Ethernet, IPv4 and TCP or UDP headers of `frame`; None for anything else.
fn ipv4_l4_headers(frame: &[u8]) -> Option<u64> {
    const ETH: usize = ETHERNET_HEADER as usize;
    if frame.len() < ETH + 20 || frame[12..14] != [0x08, 0x00] {
        return None;
    }
    let ip = &frame[ETH..];
    let ihl = usize::from(ip[0] & 0x0f) * 4;
    let l4 = ip.get(ihl..)?;
    let l4_len = match ip[9] {
        6 => usize::from(*l4.get(12)? >> 4) * 4,
        17 => 8,
        _ => return None,
    };
    Some((ETH + ihl + l4_len) as u64)
}

/// One direction's queue and wire. Times are nanoseconds on the caller's clock.
#[derive(Debug)]
pub struct Wire {
    /// Bits per second; None: the wire takes no time (a delay-only link).
    rate_bits_per_s: Option<f64>,
    limit: QueueLimit,
    /// When the last admitted frame's last bit leaves.
    free_at_ns: f64,
    /// Frames not yet off the wire: (end, wire bytes, segments), oldest first.
    backlog: VecDeque<(f64, u64, u64)>,
    backlog_bytes: u64,
    backlog_segments: u64,
    /// The most wire bytes the queue ever held at an arrival, the arriving frame included.
    pub peak_bytes: u64,
}

impl Wire {
    pub fn new(rate_bits_per_s: Option<f64>, limit: QueueLimit) -> Wire {
        Wire {
            rate_bits_per_s,
            limit,
            free_at_ns: 0.0,
            backlog: VecDeque::with_capacity(1024),
            backlog_bytes: 0,
            backlog_segments: 0,
            peak_bytes: 0,
        }
    }

    /// Nanoseconds the wire needs for `bytes`.
    pub fn wire_ns(&self, bytes: u64) -> f64 {
        self.rate_bits_per_s
            .map_or(0.0, |r| bytes as f64 * 8.0 * 1e9 / r)
    }

    /// A frame of `bytes` wire bytes and `segments` segments arrives at `now_ns`: the time its
    /// last bit leaves the wire, or None when the queue is full and it is dropped. A frame
    /// that finds the queue empty is always taken, however large, as a device with nothing to
    /// send takes it.
    pub fn admit(&mut self, now_ns: f64, bytes: u64, segments: u64) -> Option<f64> {
        if self.rate_bits_per_s.is_none() {
            return Some(now_ns);
        }
        while self.backlog.front().is_some_and(|f| f.0 <= now_ns) {
            if let Some((_, b, s)) = self.backlog.pop_front() {
                self.backlog_bytes -= b;
                self.backlog_segments -= s;
            }
        }
        let full = match self.limit {
            QueueLimit::Packets(n) => self.backlog_segments + segments > n,
            QueueLimit::Bytes(n) => self.backlog_bytes + bytes > n,
        };
        if full && !self.backlog.is_empty() {
            return None;
        }
        let start = self.free_at_ns.max(now_ns);
        let end = start + self.wire_ns(bytes);
        self.free_at_ns = end;
        self.backlog.push_back((end, bytes, segments));
        self.backlog_bytes += bytes;
        self.backlog_segments += segments;
        self.peak_bytes = self.peak_bytes.max(self.backlog_bytes);
        Some(end)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MBIT10: f64 = 10e6;

    #[test]
    fn a_frame_pays_its_wire_time_even_after_a_long_idle() {
        let mut w = Wire::new(Some(MBIT10), QueueLimit::Packets(100));
        // 1250 bytes at 10 Mbit/s: exactly 1 ms.
        assert_eq!(w.admit(0.0, 1250, 1), Some(1e6));
        // An hour of silence gives no credit: the next frame still takes 1 ms.
        let later = 3.6e12;
        assert_eq!(w.admit(later, 1250, 1), Some(later + 1e6));
    }

    #[test]
    fn back_to_back_frames_leave_one_wire_time_apart() {
        let mut w = Wire::new(Some(MBIT10), QueueLimit::Packets(100));
        let ends: Vec<f64> = (0..4).map(|_| w.admit(0.0, 1250, 1).unwrap()).collect();
        assert_eq!(ends, [1e6, 2e6, 3e6, 4e6]);
        // One arriving while the third is on the wire starts after the fourth.
        assert_eq!(w.admit(2.5e6, 1250, 1), Some(5e6));
    }

    #[test]
    fn a_full_queue_drops_and_an_empty_one_takes_anything() {
        let mut w = Wire::new(Some(MBIT10), QueueLimit::Packets(3));
        assert!(w.admit(0.0, 1250, 1).is_some());
        assert!(w.admit(0.0, 1250, 1).is_some());
        assert!(w.admit(0.0, 1250, 1).is_some());
        assert_eq!(w.admit(0.0, 1250, 1), None);
        // After the first frame left, there is room for one more.
        assert_eq!(w.admit(1e6, 1250, 1), Some(4e6));
        assert_eq!(w.admit(1e6, 1250, 1), None);
        // A 44-segment GSO frame is larger than the whole queue, but an empty queue takes it.
        let mut w = Wire::new(Some(MBIT10), QueueLimit::Packets(3));
        assert!(w.admit(0.0, 44 * 1442, 44).is_some());
        assert_eq!(w.admit(0.0, 1250, 1), None);

        let mut w = Wire::new(Some(MBIT10), QueueLimit::Bytes(3000));
        assert!(w.admit(0.0, 1500, 1).is_some());
        assert!(w.admit(0.0, 1500, 1).is_some());
        assert_eq!(w.admit(0.0, 1, 1), None);
        assert_eq!(w.peak_bytes, 3000);
    }

    #[test]
    fn overload_delivers_exactly_the_rate_and_drops_the_rest() {
        // 1514-byte frames offered at twice the rate of a 10 Mbit/s wire for 1 s, 10-packet
        // queue: the wire carries rate x time, everything else is dropped.
        let mut w = Wire::new(Some(MBIT10), QueueLimit::Packets(10));
        let frame_ns = w.wire_ns(1514);
        let (mut sent, mut dropped, mut last_end) = (0u64, 0u64, 0.0);
        let offered = (1e9 / (frame_ns / 2.0)) as u64;
        for i in 0..offered {
            match w.admit(i as f64 * frame_ns / 2.0, 1514, 1) {
                Some(end) => {
                    sent += 1;
                    last_end = end;
                }
                None => dropped += 1,
            }
        }
        assert_eq!(sent + dropped, offered);
        // The wire was never idle after the first frame: its last frame ends sent frame times in.
        assert!((last_end - sent as f64 * frame_ns).abs() < 1.0);
        // It carried what 1 s holds, plus the 10 still queued at the end, give or take one.
        let per_second = (1e9 / frame_ns) as u64;
        assert!(
            sent.abs_diff(per_second + 10) <= 1,
            "{sent} vs {per_second}"
        );
    }

    #[test]
    fn a_delay_only_link_takes_no_wire_time() {
        let mut w = Wire::new(None, QueueLimit::Packets(1));
        assert_eq!(w.admit(5.0, 64_000, 44), Some(5.0));
        assert_eq!(w.admit(5.0, 64_000, 44), Some(5.0));
    }

    fn frame(proto: u8, l4_header: &[u8], payload: usize) -> Vec<u8> {
        let mut f = vec![0u8; 12];
        f.extend([0x08, 0x00]);
        let mut ip = vec![0u8; 20];
        ip[0] = 0x45;
        ip[9] = proto;
        f.extend(ip);
        f.extend(l4_header);
        f.extend(std::iter::repeat_n(0u8, payload));
        f
    }

    #[test]
    fn a_gso_frame_counts_every_segment_with_its_headers() {
        // TCP with timestamps: 32-byte header (data offset 8), 66 header bytes per frame.
        let mut tcp = vec![0u8; 32];
        tcp[12] = 8 << 4;
        let f = frame(6, &tcp, 3 * 1448);
        let size = |f: &[u8], gso| {
            let w = wire_size(f, gso, Framing::Frame);
            (w.bytes, w.segments)
        };
        assert_eq!(size(&f, 1448), (3 * 1514, 3));
        // Not a GSO frame: the frame as it is.
        assert_eq!(size(&f, 0), (f.len() as u64, 1));
        // A last segment that is short.
        let f = frame(6, &tcp, 2 * 1448 + 100);
        assert_eq!(size(&f, 1448), (2 * 1514 + 166, 3));
        // UDP GSO: 46 datagrams of 1400 bytes, 42 header bytes each.
        let f = frame(17, &[0u8; 8], 46 * 1400);
        assert_eq!(size(&f, 1400), (46 * 1442, 46));
        assert_eq!(ipv4_protocol(&f), Some(17));
        // Something that is not IPv4 TCP or UDP counts as it is.
        let mut arp = frame(6, &tcp, 100);
        arp[12..14].copy_from_slice(&[0x08, 0x06]);
        assert_eq!(size(&arp, 1448), (arp.len() as u64, 1));
    }

    #[test]
    fn a_gso_frame_is_framed_segment_by_segment() {
        let mut tcp = vec![0u8; 32];
        tcp[12] = 8 << 4;
        // Two full 1500-byte IP packets (32 cells each) and a 152-byte one (8 + 152 + 8 =
        // 168: 4 cells): 68 cells.
        let f = frame(6, &tcp, 2 * 1448 + 100);
        let w = wire_size(&f, 1448, Framing::AtmAal5);
        assert_eq!((w.segments, w.cells, w.bytes), (3, 68, 68 * 53));
        // Ethernet: each segment with its FCS, preamble and gap.
        let w = wire_size(&f, 1448, Framing::Ethernet);
        assert_eq!(w.bytes, 2 * 1538 + (152 + 18 + 20));
        // One small UDP datagram: 28 + 20 = 48 IP bytes + 16: two cells.
        let f = frame(17, &[0u8; 8], 20);
        let w = wire_size(&f, 0, Framing::AtmAal5);
        assert_eq!((w.segments, w.cells, w.bytes), (1, 2, 106));
    }

    #[test]
    fn queue_limits_parse_with_units() {
        assert_eq!(QueueLimit::parse("100p"), Ok(QueueLimit::Packets(100)));
        assert_eq!(QueueLimit::parse("25pkt"), Ok(QueueLimit::Packets(25)));
        assert_eq!(QueueLimit::parse("64K"), Ok(QueueLimit::Bytes(65_536)));
        assert_eq!(QueueLimit::parse("150000B"), Ok(QueueLimit::Bytes(150_000)));
        assert!(QueueLimit::parse("100").unwrap_err().contains("packets"));
        assert!(QueueLimit::parse("0p").is_err());
        assert!(QueueLimit::parse("xp").is_err());
        assert!(QueueLimit::parse("10B").is_err());
        // 50 ms of 1 Gbit/s; 100 frames at 10 Mbit/s.
        assert_eq!(
            QueueLimit::default_for(1e9, 1500),
            QueueLimit::Bytes(6_250_000)
        );
        assert_eq!(
            QueueLimit::default_for(10e6, 1500),
            QueueLimit::Bytes(151_400)
        );
        assert_eq!(QueueLimit::Bytes(151_400).packets(1500), 100);
    }
}
