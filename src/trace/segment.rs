//! One TCP segment read from the start of an IP packet (the packet may be cut to its headers:
//! lengths come from the IP header, not from what was captured).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

pub const FIN: u8 = 0x01;
pub const SYN: u8 = 0x02;
pub const RST: u8 = 0x04;
pub const ACK: u8 = 0x10;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Segment {
    /// Capture time stamp, nanoseconds since the Unix epoch.
    pub t_ns: u64,
    pub src: SocketAddr,
    pub dst: SocketAddr,
    pub seq: u32,
    pub ack: u32,
    pub flags: u8,
    /// The window field as sent (before any scaling).
    pub window: u16,
    /// TCP payload bytes (from the IP length: a GSO/TSO super-segment counts as one).
    pub len: u32,
    /// Bytes of TCP options (the header beyond its 20 fixed bytes).
    pub options_len: u8,
    /// Options of a SYN, when the captured bytes hold them.
    pub mss: Option<u16>,
    pub wscale: Option<u8>,
}

impl Segment {
    pub fn has(&self, flag: u8) -> bool {
        self.flags & flag != 0
    }
}

/// The TCP segment in IP packet `p` (captured bytes; `orig_len` its full length), or None if
/// it is not TCP, is a non-first fragment, or its headers were not captured.
pub fn parse(t_ns: u64, p: &[u8], orig_len: u32) -> Option<Segment> {
    let (src, dst, l4, l4_len) = match p.first()? >> 4 {
        4 => {
            let ihl = usize::from(p.first()? & 0x0f) * 4;
            let total = u16::from_be_bytes([*p.get(2)?, *p.get(3)?]) as usize;
            let frag = u16::from_be_bytes([*p.get(6)?, *p.get(7)?]) & 0x1fff;
            if *p.get(9)? != 6 || frag != 0 || ihl < 20 {
                return None;
            }
            let a = |at: usize| -> Option<IpAddr> {
                let b: [u8; 4] = p.get(at..at + 4)?.try_into().ok()?;
                Some(IpAddr::V4(Ipv4Addr::from(b)))
            };
            // A GSO super-packet of more than 64 KiB (BIG TCP) carries 0 here: the length
            // the kernel gave is the truth then.
            let total = if total == 0 { orig_len as usize } else { total };
            (a(12)?, a(16)?, p.get(ihl..)?, total.checked_sub(ihl)?)
        }
        6 => {
            if *p.get(6)? != 6 {
                return None;
            }
            let payload = u16::from_be_bytes([*p.get(4)?, *p.get(5)?]) as usize;
            let payload = if payload == 0 {
                (orig_len as usize).checked_sub(40)?
            } else {
                payload
            };
            let a = |at: usize| -> Option<IpAddr> {
                let b: [u8; 16] = p.get(at..at + 16)?.try_into().ok()?;
                Some(IpAddr::V6(Ipv6Addr::from(b)))
            };
            (a(8)?, a(24)?, p.get(40..)?, payload)
        }
        _ => return None,
    };
    let u16_at =
        |at: usize| -> Option<u16> { Some(u16::from_be_bytes([*l4.get(at)?, *l4.get(at + 1)?])) };
    let u32_at = |at: usize| -> Option<u32> {
        Some(u32::from_be_bytes(l4.get(at..at + 4)?.try_into().ok()?))
    };
    let doff = usize::from(l4.get(12)? >> 4) * 4;
    if doff < 20 {
        return None;
    }
    let flags = *l4.get(13)?;
    let mut seg = Segment {
        t_ns,
        src: SocketAddr::new(src, u16_at(0)?),
        dst: SocketAddr::new(dst, u16_at(2)?),
        seq: u32_at(4)?,
        ack: u32_at(8)?,
        flags,
        window: u16_at(14)?,
        len: u32::try_from(l4_len.checked_sub(doff)?).ok()?,
        options_len: (doff - 20) as u8,
        mss: None,
        wscale: None,
    };
    if flags & SYN != 0 {
        // Options as far as they were captured; a cut option list just ends early.
        let opts = l4.get(20..doff.min(l4.len())).unwrap_or_default();
        let mut i = 0;
        while i < opts.len() {
            match opts[i] {
                0 => break,
                1 => i += 1,
                kind => {
                    let Some(&len) = opts.get(i + 1) else { break };
                    let len = usize::from(len);
                    if len < 2 || i + len > opts.len() {
                        break;
                    }
                    match (kind, len) {
                        (2, 4) => seg.mss = Some(u16::from_be_bytes([opts[i + 2], opts[i + 3]])),
                        (3, 3) => seg.wscale = Some(opts[i + 2].min(14)),
                        _ => {}
                    }
                    i += len;
                }
            }
        }
    }
    Some(seg)
}

/// An IPv4 TCP packet's first bytes (IP and TCP headers, with options), for tests and for
/// building synthetic captures: `len` payload bytes are counted in the IP length, not stored.
pub fn build_ipv4(s: &Segment) -> Vec<u8> {
    let (IpAddr::V4(src), IpAddr::V4(dst)) = (s.src.ip(), s.dst.ip()) else {
        return Vec::new();
    };
    let mut opts = Vec::new();
    if let Some(m) = s.mss {
        opts.extend_from_slice(&[2, 4]);
        opts.extend_from_slice(&m.to_be_bytes());
    }
    if let Some(w) = s.wscale {
        opts.extend_from_slice(&[1, 3, 3, w]);
    }
    while opts.len() < usize::from(s.options_len) || opts.len() % 4 != 0 {
        opts.push(1);
    }
    let tcp_len = 20 + opts.len();
    let total = (20 + tcp_len) as u32 + s.len;
    let mut p = vec![0u8; 20 + tcp_len];
    p[0] = 0x45;
    p[2..4].copy_from_slice(&(total.min(0xffff) as u16).to_be_bytes());
    p[8] = 64;
    p[9] = 6;
    p[12..16].copy_from_slice(&src.octets());
    p[16..20].copy_from_slice(&dst.octets());
    let t = &mut p[20..];
    t[0..2].copy_from_slice(&s.src.port().to_be_bytes());
    t[2..4].copy_from_slice(&s.dst.port().to_be_bytes());
    t[4..8].copy_from_slice(&s.seq.to_be_bytes());
    t[8..12].copy_from_slice(&s.ack.to_be_bytes());
    t[12] = ((tcp_len / 4) as u8) << 4;
    t[13] = s.flags;
    t[14..16].copy_from_slice(&s.window.to_be_bytes());
    t[20..].copy_from_slice(&opts);
    p
}

#[cfg(test)]
mod tests {
    use super::*;

    fn syn() -> Segment {
        Segment {
            t_ns: 5,
            src: "10.0.0.1:40000".parse().unwrap(),
            dst: "10.0.0.2:5321".parse().unwrap(),
            seq: 1000,
            ack: 0,
            flags: SYN,
            window: 64240,
            len: 0,
            options_len: 8,
            mss: Some(1460),
            wscale: Some(7),
        }
    }

    #[test]
    fn a_syn_with_options_round_trips() {
        let s = syn();
        let p = build_ipv4(&s);
        assert_eq!(p.len(), 20 + 28);
        assert_eq!(parse(5, &p, p.len() as u32), Some(s));
    }

    /// The payload length comes from the IP header, so a packet cut to 128 bytes keeps it.
    #[test]
    fn the_length_of_a_cut_packet_comes_from_the_ip_header() {
        let s = Segment {
            flags: ACK,
            len: 60000,
            options_len: 0,
            mss: None,
            wscale: None,
            ..syn()
        };
        let p = build_ipv4(&s);
        assert_eq!(parse(5, &p, 60040).unwrap().len, 60000);
    }

    #[test]
    fn other_packets_and_short_headers_are_none() {
        let mut p = build_ipv4(&syn());
        assert_eq!(parse(0, &p[..30], 48), None);
        p[9] = 17;
        assert_eq!(parse(0, &p, 48), None);
        assert_eq!(parse(0, &[], 0), None);
        assert_eq!(parse(0, &[0x45], 1), None);
    }
}
