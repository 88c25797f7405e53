//! From a capture's TCP segments to what happened on each connection: who sent the data,
//! how big the segments were, how many bytes were outstanding, what window the receiver
//! advertised, and a summary (ACK ratio, small segments, delayed ACKs, stop-and-go periods,
//! retransmissions). Pure code: segments in, figures out.

use std::net::SocketAddr;

use crate::model::trace::FlowSummary;

use super::segment::{Segment, ACK, SYN};

/// An ACK this long after the data it follows, beyond the flow's quickest such ACK, is the
/// receiver's delayed-ACK timer firing (Linux's minimum delayed-ACK timeout is 40 ms; 35
/// leaves room for time-stamp jitter).
pub const DELAYED_ACK_NS: u64 = 35_000_000;
/// A gap between data segments longer than this many median gaps is a stop in the flow...
pub const STOP_GO_FACTOR: u64 = 10;
/// ...and at least this long: on loopback the median gap is microseconds, and a thread
/// descheduled for a moment is not a stop of the TCP flow.
pub const STOP_GO_MIN_NS: u64 = 1_000_000;

/// One connection's series for plots: (nanoseconds since the capture's first segment, value).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct FlowSeries {
    /// Payload bytes of each data segment.
    pub segment_size: Vec<(u64, u64)>,
    /// Sent but not yet acknowledged bytes (snd_nxt - snd_una as the capture saw them),
    /// after every segment once both are known.
    pub outstanding: Vec<(u64, u64)>,
    /// The window the receiver advertised (scaled when `window_shift` is known), bytes.
    pub window: Vec<(u64, u64)>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Flow {
    pub summary: FlowSummary,
    pub series: FlowSeries,
}

/// Unwraps 32-bit sequence numbers into a 64-bit line (a segment is never 2 GiB away from
/// the one before it).
struct Unwrap {
    last: Option<i64>,
}

impl Unwrap {
    fn at(&mut self, v: u32) -> i64 {
        let abs = match self.last {
            None => i64::from(v),
            Some(l) => l + i64::from(v.wrapping_sub(l as u32) as i32),
        };
        self.last = Some(abs);
        abs
    }
}

/// The stretches of sequence space seen so far, merged and in order.
#[derive(Default)]
struct Covered {
    ranges: Vec<(i64, i64)>,
}

impl Covered {
    /// Adds [start, end): returns how many of its bytes were covered already.
    fn insert(&mut self, start: i64, end: i64) -> u64 {
        // The ranges that touch or overlap [start, end) are merged into one.
        let first = self.ranges.partition_point(|&(_, e)| e < start);
        let mut last = first;
        let (mut lo, mut hi, mut overlap) = (start, end, 0u64);
        while last < self.ranges.len() && self.ranges[last].0 <= end {
            let (a, b) = self.ranges[last];
            overlap += (b.min(end) - a.max(start)).max(0) as u64;
            lo = lo.min(a);
            hi = hi.max(b);
            last += 1;
        }
        self.ranges.splice(first..last, [(lo, hi)]);
        overlap
    }
}

/// Every TCP connection among `segments`, in order of first appearance.
pub fn analyse(segments: &[Segment]) -> Vec<Flow> {
    // Packets reach the capture socket in the order the CPUs handed them over, which is not
    // quite the order of their time stamps when two CPUs send at once: time decides.
    let mut sorted = segments.to_vec();
    sorted.sort_by_key(|s| s.t_ns);
    let segments = &sorted[..];
    let origin = segments.first().map_or(0, |s| s.t_ns);
    let mut keys: Vec<(SocketAddr, SocketAddr)> = Vec::new();
    let mut groups: Vec<Vec<&Segment>> = Vec::new();
    for s in segments {
        let key = if s.src <= s.dst {
            (s.src, s.dst)
        } else {
            (s.dst, s.src)
        };
        match keys.iter().position(|k| *k == key) {
            Some(i) => groups[i].push(s),
            None => {
                keys.push(key);
                groups.push(vec![s]);
            }
        }
    }
    groups.iter().map(|g| one_flow(g, origin)).collect()
}

fn one_flow(segs: &[&Segment], origin: u64) -> Flow {
    let (a, b) = (segs[0].src, segs[0].dst);
    let payload_from = |end: SocketAddr| -> u64 {
        segs.iter()
            .filter(|s| s.src == end)
            .map(|s| u64::from(s.len))
            .sum()
    };
    let (sender, receiver) = if payload_from(b) > payload_from(a) {
        (b, a)
    } else {
        (a, b)
    };
    let syn_of = |end: SocketAddr| segs.iter().find(|s| s.src == end && s.has(SYN));
    let (sender_syn, receiver_syn) = (syn_of(sender), syn_of(receiver));
    // RFC 7323: scaling is on only when both SYNs offer it; the shift applies to the
    // windows of the end that announced it.
    let window_shift = match (sender_syn, receiver_syn) {
        (Some(s), Some(r)) => Some(match (s.wscale, r.wscale) {
            (Some(_), Some(w)) => w,
            _ => 0,
        }),
        _ => None,
    };
    let syn_mss = receiver_syn.and_then(|r| r.mss).map(u32::from);

    let mut seq = Unwrap { last: None };
    let mut seen = Covered::default();
    let mut series = FlowSeries::default();
    let mut s = FlowSummary {
        sender: sender.to_string(),
        receiver: receiver.to_string(),
        duration_ns: segs
            .last()
            .map_or(0, |l| l.t_ns.saturating_sub(segs[0].t_ns)),
        data_segments: 0,
        data_bytes: 0,
        retransmitted_segments: 0,
        repeated_bytes: 0,
        unique_data_bytes: 0,
        acks: 0,
        segments_per_ack: None,
        bytes_per_ack: None,
        mss: 0,
        mss_from_syn: syn_mss.is_some(),
        sub_mss_segments: 0,
        sub_mss_share: None,
        window_shift,
        delayed_acks: 0,
        ack_baseline_ns: None,
        median_gap_ns: None,
        stops: 0,
        stopped_ns: 0,
        stop_threshold_ns: None,
    };
    let mut snd_nxt: Option<i64> = None;
    let mut snd_una: Option<i64> = None;
    let mut last_data_t: Option<u64> = None;
    let mut unacked_data = false;
    let mut data_gaps: Vec<u64> = Vec::new();
    let mut ack_gaps: Vec<u64> = Vec::new();
    for g in segs {
        let t = g.t_ns.saturating_sub(origin);
        if g.has(SYN) {
            // The handshake's sequence numbers start the line (a SYN takes one number).
            if g.src == sender {
                let v = seq.at(g.seq);
                snd_nxt = Some(snd_nxt.map_or(v + 1, |n| n.max(v + 1)));
            } else if g.has(ACK) {
                let a = seq.at(g.ack);
                snd_una = Some(snd_una.map_or(a, |u| u.max(a)));
            }
            continue;
        }
        if g.src == sender {
            if g.len > 0 {
                let start = seq.at(g.seq);
                let end = start + i64::from(g.len);
                if snd_nxt.is_some_and(|n| start < n) {
                    s.retransmitted_segments += 1;
                }
                s.repeated_bytes += seen.insert(start, end);
                s.data_segments += 1;
                s.data_bytes += u64::from(g.len);
                series.segment_size.push((t, u64::from(g.len)));
                if let Some(l) = last_data_t {
                    data_gaps.push(g.t_ns.saturating_sub(l));
                }
                last_data_t = Some(g.t_ns);
                unacked_data = true;
                snd_nxt = Some(snd_nxt.map_or(end, |n| n.max(end)));
            }
        } else {
            if g.has(ACK) {
                let a = seq.at(g.ack);
                snd_una = Some(snd_una.map_or(a, |u| u.max(a)));
                let shift = window_shift.unwrap_or(0);
                series.window.push((t, u64::from(g.window) << shift));
            }
            if g.has(ACK) && g.len == 0 {
                s.acks += 1;
                if unacked_data {
                    if let Some(l) = last_data_t {
                        ack_gaps.push(g.t_ns.saturating_sub(l));
                    }
                    unacked_data = false;
                }
            }
        }
        if let (Some(n), Some(u)) = (snd_nxt, snd_una) {
            // A FIN's acknowledgement runs one past the data: nothing is outstanding then.
            series.outstanding.push((t, (n - u).max(0) as u64));
        }
    }
    s.unique_data_bytes = s.data_bytes - s.repeated_bytes;
    if s.acks > 0 {
        s.segments_per_ack = Some(s.data_segments as f64 / s.acks as f64);
        s.bytes_per_ack = Some(s.data_bytes as f64 / s.acks as f64);
    }
    // The announced MSS leaves out TCP options: the payload of a full segment is smaller
    // by the options each data segment carries (12 bytes with time stamps).
    let options = segs
        .iter()
        .find(|g| g.src == sender && g.len > 0)
        .map_or(0, |g| u32::from(g.options_len));
    s.mss = syn_mss
        .map(|m| m.saturating_sub(options))
        .unwrap_or_else(|| {
            series
                .segment_size
                .iter()
                .map(|&(_, l)| l as u32)
                .max()
                .unwrap_or(0)
        });
    s.sub_mss_segments = series
        .segment_size
        .iter()
        .filter(|&&(_, l)| l < u64::from(s.mss))
        .count() as u64;
    if s.data_segments > 0 {
        s.sub_mss_share = Some(s.sub_mss_segments as f64 / s.data_segments as f64);
    }
    if let Some(&base) = ack_gaps.iter().min() {
        s.ack_baseline_ns = Some(base);
        s.delayed_acks = ack_gaps
            .iter()
            .filter(|&&g| g.saturating_sub(base) >= DELAYED_ACK_NS)
            .count() as u64;
    }
    if let Some(median) = median(&data_gaps) {
        let threshold = (median * STOP_GO_FACTOR).max(STOP_GO_MIN_NS);
        s.median_gap_ns = Some(median);
        s.stop_threshold_ns = Some(threshold);
        for &g in data_gaps.iter().filter(|&&g| g > threshold) {
            s.stops += 1;
            s.stopped_ns += g;
        }
    }
    Flow { summary: s, series }
}

/// The lower median (an observed gap, not a mean of two).
fn median(xs: &[u64]) -> Option<u64> {
    if xs.is_empty() {
        return None;
    }
    let mut v = xs.to_vec();
    v.sort_unstable();
    Some(v[(v.len() - 1) / 2])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::segment::FIN;

    const MS: u64 = 1_000_000;

    struct Builder {
        segs: Vec<Segment>,
    }

    fn seg(t_ns: u64, from_client: bool, seq: u32, ack: u32, flags: u8, len: u32) -> Segment {
        let c: SocketAddr = "10.0.0.1:40000".parse().unwrap();
        let s: SocketAddr = "10.0.0.2:5321".parse().unwrap();
        let (src, dst) = if from_client { (c, s) } else { (s, c) };
        Segment {
            t_ns,
            src,
            dst,
            seq,
            ack,
            flags,
            window: 1000,
            len,
            options_len: 0,
            mss: None,
            wscale: None,
        }
    }

    impl Builder {
        /// A handshake with MSS 1000 and window scale 7 from the server (the receiver).
        /// Sequence numbers start near the top of the 32-bit space, so they wrap.
        fn new() -> Builder {
            let isn = u32::MAX - 1500;
            let mut syn = seg(0, true, isn, 0, SYN, 0);
            syn.wscale = Some(2);
            syn.mss = Some(1400);
            let mut synack = seg(MS, false, 7, isn.wrapping_add(1), SYN | ACK, 0);
            synack.wscale = Some(7);
            synack.mss = Some(1000);
            Builder {
                segs: vec![
                    syn,
                    synack,
                    seg(2 * MS, true, isn.wrapping_add(1), 8, ACK, 0),
                ],
            }
        }
        fn data(&mut self, t_ms: u64, offset: u32, len: u32) -> &mut Self {
            let isn = u32::MAX - 1500;
            self.segs.push(seg(
                t_ms * MS,
                true,
                isn.wrapping_add(1).wrapping_add(offset),
                8,
                ACK,
                len,
            ));
            self
        }
        fn ack(&mut self, t_ms: u64, upto: u32) -> &mut Self {
            let isn = u32::MAX - 1500;
            self.segs.push(seg(
                t_ms * MS,
                false,
                8,
                isn.wrapping_add(1).wrapping_add(upto),
                ACK,
                0,
            ));
            self
        }
    }

    /// A flow made by hand: four full segments ACKed every two after 1 ms, one small
    /// segment the receiver ACKs only 41 ms later (its delayed-ACK timer), a 30 ms stop,
    /// and a retransmission of 600 bytes (400 of them new): 6900 bytes of stream in 7100 sent.
    fn known_flow() -> Vec<Segment> {
        let mut b = Builder::new();
        b.data(10, 0, 1000)
            .data(11, 1000, 1000)
            .ack(12, 2000)
            .data(13, 2000, 1000)
            .data(14, 3000, 1000)
            .ack(15, 4000)
            .data(16, 4000, 500)
            .ack(57, 4500)
            // a stop: nothing sent for 30 ms
            .data(87, 4500, 1000)
            .data(88, 5500, 1000)
            .ack(89, 6500)
            // 6300..6900 again: 200 bytes old, 400 new
            .data(90, 6300, 600)
            .ack(91, 6900);
        b.segs.push(seg(
            92 * MS,
            true,
            (u32::MAX - 1500).wrapping_add(6901),
            8,
            FIN | ACK,
            0,
        ));
        b.segs.clone()
    }

    #[test]
    fn a_known_flow_gives_exact_figures() {
        let flows = analyse(&known_flow());
        assert_eq!(flows.len(), 1);
        let s = &flows[0].summary;
        assert_eq!(s.sender, "10.0.0.1:40000");
        assert_eq!(s.receiver, "10.0.0.2:5321");
        assert_eq!(s.data_segments, 8);
        assert_eq!(s.data_bytes, 7100);
        assert_eq!(s.retransmitted_segments, 1);
        assert_eq!(s.repeated_bytes, 200);
        assert_eq!(s.unique_data_bytes, 6900);
        // 5 pure ACKs from the receiver (the sender's handshake ACK and FIN are not its).
        assert_eq!(s.acks, 5);
        assert_eq!(s.segments_per_ack, Some(8.0 / 5.0));
        assert_eq!(s.bytes_per_ack, Some(7100.0 / 5.0));
        assert_eq!((s.mss, s.mss_from_syn), (1000, true));
        assert_eq!(s.sub_mss_segments, 2);
        assert_eq!(s.sub_mss_share, Some(0.25));
        assert_eq!(s.window_shift, Some(7));
        // ACK gaps after data: 1, 1, 41, 1, 1 ms: baseline 1 ms, one 40 ms later.
        assert_eq!(s.ack_baseline_ns, Some(MS));
        assert_eq!(s.delayed_acks, 1);
        // Data gaps: 1,2,1,2,71,1,2 ms: median 2 ms, threshold 20 ms, one stop of 71 ms.
        assert_eq!(s.median_gap_ns, Some(2 * MS));
        assert_eq!(s.stop_threshold_ns, Some(20 * MS));
        assert_eq!((s.stops, s.stopped_ns), (1, 71 * MS));
        assert_eq!(s.duration_ns, 92 * MS);
    }

    #[test]
    fn the_series_follow_the_sender_and_the_receiver() {
        let f = &analyse(&known_flow())[0].series;
        assert_eq!(f.segment_size.len(), 8);
        assert_eq!(f.segment_size[0], (10 * MS, 1000));
        assert_eq!(f.segment_size[7], (90 * MS, 600));
        // Windows are 1000 << 7; the SYN-ACK's is not scaled and not in the series.
        assert_eq!(f.window.len(), 5);
        assert!(f.window.iter().all(|&(_, w)| w == 128_000));
        // Outstanding: once the first ACK (the SYN-ACK's) is in, after every segment.
        let at = |ms: u64| {
            f.outstanding
                .iter()
                .rev()
                .find(|&&(t, _)| t == ms * MS)
                .map(|&(_, v)| v)
        };
        assert_eq!(at(10), Some(1000));
        assert_eq!(at(11), Some(2000));
        assert_eq!(at(12), Some(0));
        assert_eq!(at(14), Some(2000));
        assert_eq!(at(16), Some(500));
        assert_eq!(at(88), Some(2000));
        assert_eq!(at(90), Some(400));
        assert_eq!(at(91), Some(0));
        assert_eq!(at(92), Some(0));
    }

    /// Without the handshake the windows stay the raw field and the MSS is the largest
    /// segment.
    #[test]
    fn without_the_handshake_windows_are_unscaled() {
        let segs: Vec<Segment> = known_flow().into_iter().filter(|s| !s.has(SYN)).collect();
        let s = &analyse(&segs)[0].summary;
        assert_eq!(s.window_shift, None);
        assert_eq!((s.mss, s.mss_from_syn), (1000, false));
        assert_eq!(s.unique_data_bytes, 6900);
        assert!(analyse(&segs)[0]
            .series
            .window
            .iter()
            .all(|&(_, w)| w == 1000));
    }

    #[test]
    fn repeated_bytes_are_counted_once_and_a_filled_hole_is_new() {
        let mut c = Covered::default();
        assert_eq!(c.insert(0, 100), 0);
        assert_eq!(c.insert(200, 300), 0);
        assert_eq!(c.insert(100, 200), 0, "the hole");
        assert_eq!(c.ranges, vec![(0, 300)]);
        assert_eq!(c.insert(250, 400), 50);
        assert_eq!(c.insert(500, 600), 0);
        assert_eq!(c.insert(0, 700), 500);
        assert_eq!(c.ranges, vec![(0, 700)]);
    }

    /// Seen on the receiver's side: a lost segment's retransmission arrives after the
    /// segments behind it. It is a retransmission, but its bytes are new to the capture.
    #[test]
    fn a_hole_filled_at_the_receiver_is_a_retransmission_of_new_bytes() {
        let mut b = Builder::new();
        b.data(10, 0, 1000)
            .data(11, 2000, 1000)
            .ack(12, 1000)
            .data(20, 1000, 1000)
            .ack(21, 3000);
        let s = &analyse(&b.segs)[0].summary;
        assert_eq!(s.retransmitted_segments, 1);
        assert_eq!((s.repeated_bytes, s.unique_data_bytes), (0, 3000));
    }

    #[test]
    fn two_connections_are_two_flows_and_nothing_is_no_flow() {
        let mut segs = known_flow();
        let mut other = known_flow();
        for s in &mut other {
            if s.src.port() == 40000 {
                s.src.set_port(40001);
            } else {
                s.dst.set_port(40001);
            }
        }
        segs.extend(other);
        segs.sort_by_key(|s| s.t_ns);
        let flows = analyse(&segs);
        assert_eq!(flows.len(), 2);
        assert_eq!(flows[1].summary.unique_data_bytes, 6900);
        assert!(analyse(&[]).is_empty());
    }
}
