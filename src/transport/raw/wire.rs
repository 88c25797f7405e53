//! The wire codec: the frame header, the HELLO/ACK payload, and MACs and endpoints as text.

use anyhow::Result;

use crate::transport::Cookie;

/// IEEE 802 "local experimental EtherType 1": free for a protocol of one's own.
pub(super) const ETHERTYPE: u16 = 0x88B5;
/// Bytes of wirebench's header at the start of every frame's payload.
pub(super) const HEADER: usize = 24;
const VERSION: u8 = 1;
pub(super) const DATA: u8 = 0;
pub(super) const HELLO: u8 = 1;
pub(super) const ACK: u8 = 2;
/// Offset of the destination port in the header (the socket filter reads it).
pub(super) const DST_PORT_AT: u32 = 2;

/// wirebench's header, big-endian on the wire:
/// version u8, kind u8, dst port u16, src port u16, frame seq u32, message u32,
/// fragment u16, fragments u16, message length u32, 2 bytes reserved.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Header {
    pub(super) kind: u8,
    pub(super) dst_port: u16,
    pub(super) src_port: u16,
    pub(super) seq: u32,
    pub(super) message: u32,
    pub(super) fragment: u16,
    pub(super) fragments: u16,
    pub(super) length: u32,
}

impl Header {
    pub(super) fn write(&self, out: &mut [u8]) {
        out[0] = VERSION;
        out[1] = self.kind;
        out[2..4].copy_from_slice(&self.dst_port.to_be_bytes());
        out[4..6].copy_from_slice(&self.src_port.to_be_bytes());
        out[6..10].copy_from_slice(&self.seq.to_be_bytes());
        out[10..14].copy_from_slice(&self.message.to_be_bytes());
        out[14..16].copy_from_slice(&self.fragment.to_be_bytes());
        out[16..18].copy_from_slice(&self.fragments.to_be_bytes());
        out[18..22].copy_from_slice(&self.length.to_be_bytes());
        out[22..24].fill(0);
    }

    pub(super) fn read(frame: &[u8]) -> Option<Header> {
        if frame.len() < HEADER || frame[0] != VERSION {
            return None;
        }
        let u16_at = |i: usize| u16::from_be_bytes([frame[i], frame[i + 1]]);
        let u32_at = |i: usize| u32::from_be_bytes(frame[i..i + 4].try_into().unwrap_or([0; 4]));
        Some(Header {
            kind: frame[1],
            dst_port: u16_at(2),
            src_port: u16_at(4),
            seq: u32_at(6),
            message: u32_at(10),
            fragment: u16_at(14),
            fragments: u16_at(16),
            length: u32_at(18),
        })
    }
}

pub(super) fn format_mac(mac: [u8; 6]) -> String {
    mac.iter()
        .map(|b| format!("{b:02x}"))
        .collect::<Vec<_>>()
        .join(":")
}

pub(super) fn parse_mac(s: &str) -> Option<[u8; 6]> {
    let parts: Vec<u8> = s
        .split(':')
        .map(|p| u8::from_str_radix(p, 16))
        .collect::<Result<_, _>>()
        .ok()?;
    parts.try_into().ok()
}

/// What the server announces: its MAC, the listener's port and the interface MTU.
pub(super) fn parse_endpoint(endpoint: &str) -> Result<([u8; 6], u16, usize)> {
    let bad = || anyhow::anyhow!("server announced a bad raw endpoint '{endpoint}'");
    let mut it = endpoint.split('/');
    let mac = it.next().and_then(parse_mac).ok_or_else(bad)?;
    let port = it.next().and_then(|p| p.parse().ok()).ok_or_else(bad)?;
    let mtu = it.next().and_then(|p| p.parse().ok()).ok_or_else(bad)?;
    if it.next().is_some() || port == 0 {
        return Err(bad());
    }
    Ok((mac, port, mtu))
}

/// HELLO and ACK payload: the cookie, then the sender's MTU.
pub(super) fn handshake_frame(
    kind: u8,
    dst: u16,
    src: u16,
    cookie: &Cookie,
    mtu: usize,
) -> Vec<u8> {
    let mut f = vec![0u8; HEADER + 20];
    Header {
        kind,
        dst_port: dst,
        src_port: src,
        seq: 0,
        message: 0,
        fragment: 0,
        fragments: 1,
        length: 20,
    }
    .write(&mut f);
    f[HEADER..HEADER + 16].copy_from_slice(&cookie.0);
    f[HEADER + 16..].copy_from_slice(&(mtu as u32).to_be_bytes());
    f
}

/// Reads a HELLO or ACK: (header, cookie, sender MTU).
pub(super) fn read_handshake(frame: &[u8]) -> Option<(Header, [u8; 16], usize)> {
    let h = Header::read(frame)?;
    if frame.len() < HEADER + 20 || !(h.kind == HELLO || h.kind == ACK) {
        return None;
    }
    let cookie: [u8; 16] = frame[HEADER..HEADER + 16].try_into().ok()?;
    let mtu = u32::from_be_bytes(frame[HEADER + 16..HEADER + 20].try_into().ok()?) as usize;
    Some((h, cookie, mtu))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_round_trips() {
        let h = Header {
            kind: DATA,
            dst_port: 0xBEEF,
            src_port: 7,
            seq: 0xDEAD_BEEF,
            message: 42,
            fragment: 3,
            fragments: 9,
            length: 123_456,
        };
        let mut b = [0u8; HEADER];
        h.write(&mut b);
        assert_eq!(Header::read(&b), Some(h));
        // The socket filter reads the destination port at this offset.
        assert_eq!(
            u16::from_be_bytes([b[DST_PORT_AT as usize], b[DST_PORT_AT as usize + 1]]),
            0xBEEF
        );
        b[0] = 99;
        assert_eq!(Header::read(&b), None, "another version is not ours");
        assert_eq!(Header::read(&b[..10]), None);
    }

    #[test]
    fn endpoints_parse_and_bad_ones_are_errors() {
        let (mac, port, mtu) = parse_endpoint("02:00:0a:4d:00:01/4242/1500").unwrap();
        assert_eq!(mac, [2, 0, 0x0a, 0x4d, 0, 1]);
        assert_eq!((port, mtu), (4242, 1500));
        for bad in [
            "",
            "02:00/1/1500",
            "02:00:0a:4d:00:01/0/1500",
            "x/1/2",
            "a/b/c/d",
        ] {
            assert!(parse_endpoint(bad).is_err(), "{bad}");
        }
        assert_eq!(format_mac(mac), "02:00:0a:4d:00:01");
    }
}
