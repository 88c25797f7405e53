//! The classic pcap file format (the one tcpdump, tshark and Wireshark all open): a 24-byte
//! file header, then a 16-byte header before each packet. Written with nanosecond time
//! stamps and link type RAW (the packet starts at its IP header); read back with either time
//! resolution, either byte order, and the link types a capture of IP traffic usually has.

use std::io::{self, Write};

/// Nanosecond-resolution pcap's magic number (microsecond files use 0xa1b2c3d4).
const MAGIC_NS: u32 = 0xa1b2_3c4d;
const MAGIC_US: u32 = 0xa1b2_c3d4;
/// LINKTYPE_RAW: the packet begins with an IPv4 or IPv6 header (the version nibble says which).
pub const LINKTYPE_RAW: u32 = 101;
const LINKTYPE_ETHERNET: u32 = 1;
const LINKTYPE_LINUX_SLL: u32 = 113;
const LINKTYPE_IPV4: u32 = 228;
const LINKTYPE_IPV6: u32 = 229;

pub const FILE_HEADER_LEN: usize = 24;
pub const RECORD_HEADER_LEN: usize = 16;

/// One captured packet: when, the bytes kept (from the IP header on) and the length it had.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Packet {
    /// Nanoseconds since the Unix epoch (the kernel's receive time stamp).
    pub t_ns: u64,
    pub data: Vec<u8>,
    pub orig_len: u32,
}

/// Writes the file header of a nanosecond, RAW-link pcap with `snaplen`.
pub fn write_header(w: &mut impl Write, snaplen: u32) -> io::Result<()> {
    let mut h = [0u8; FILE_HEADER_LEN];
    h[0..4].copy_from_slice(&MAGIC_NS.to_le_bytes());
    h[4..6].copy_from_slice(&2u16.to_le_bytes());
    h[6..8].copy_from_slice(&4u16.to_le_bytes());
    // thiszone and sigfigs stay 0, as every writer leaves them.
    h[16..20].copy_from_slice(&snaplen.to_le_bytes());
    h[20..24].copy_from_slice(&LINKTYPE_RAW.to_le_bytes());
    w.write_all(&h)
}

/// Writes one packet record: `data` is what was kept, `orig_len` its length on the wire.
pub fn write_packet(w: &mut impl Write, t_ns: u64, data: &[u8], orig_len: u32) -> io::Result<()> {
    let mut h = [0u8; RECORD_HEADER_LEN];
    let secs = u32::try_from(t_ns / 1_000_000_000).unwrap_or(u32::MAX);
    h[0..4].copy_from_slice(&secs.to_le_bytes());
    h[4..8].copy_from_slice(&((t_ns % 1_000_000_000) as u32).to_le_bytes());
    h[8..12].copy_from_slice(&(data.len() as u32).to_le_bytes());
    h[12..16].copy_from_slice(&orig_len.max(data.len() as u32).to_le_bytes());
    w.write_all(&h)?;
    w.write_all(data)
}

/// Reads a whole pcap file held in memory: its packets, each cut to start at the IP header
/// (packets that are not IP, e.g. ARP in an Ethernet capture, are left out). A file that is
/// not pcap, has an unknown link type, or ends inside a record is an error.
pub fn read(bytes: &[u8]) -> Result<Vec<Packet>, String> {
    if bytes.len() < FILE_HEADER_LEN {
        return Err("not a pcap file: shorter than its 24-byte header".into());
    }
    let magic_le = u32::from_le_bytes(bytes[0..4].try_into().unwrap_or_default());
    let (big_endian, ns) = match magic_le {
        MAGIC_NS => (false, true),
        MAGIC_US => (false, false),
        m if m.swap_bytes() == MAGIC_NS => (true, true),
        m if m.swap_bytes() == MAGIC_US => (true, false),
        _ if bytes[0..4] == [0x0a, 0x0d, 0x0d, 0x0a] => {
            return Err("a pcapng file: save it as pcap (editcap -F pcap IN OUT)".into())
        }
        _ => return Err("not a pcap file (unknown magic number)".into()),
    };
    let u32_at = |b: &[u8], at: usize| -> u32 {
        let a: [u8; 4] = b[at..at + 4].try_into().unwrap_or_default();
        if big_endian {
            u32::from_be_bytes(a)
        } else {
            u32::from_le_bytes(a)
        }
    };
    let linktype = u32_at(bytes, 20) & 0x0fff_ffff;
    let mut out = Vec::new();
    let mut at = FILE_HEADER_LEN;
    while at < bytes.len() {
        if bytes.len() - at < RECORD_HEADER_LEN {
            return Err(format!("pcap file cut inside a packet header at byte {at}"));
        }
        let secs = u64::from(u32_at(bytes, at));
        let frac = u64::from(u32_at(bytes, at + 4));
        let incl = u32_at(bytes, at + 8) as usize;
        let orig = u32_at(bytes, at + 12);
        at += RECORD_HEADER_LEN;
        if bytes.len() - at < incl {
            return Err(format!("pcap file cut inside packet {}", out.len() + 1));
        }
        let data = &bytes[at..at + incl];
        at += incl;
        let t_ns = secs * 1_000_000_000 + if ns { frac } else { frac * 1000 };
        let (skip, is_ip) = match linktype {
            LINKTYPE_RAW | LINKTYPE_IPV4 | LINKTYPE_IPV6 => (0, true),
            LINKTYPE_ETHERNET => (14, ethertype_is_ip(data, 12)),
            LINKTYPE_LINUX_SLL => (16, ethertype_is_ip(data, 14)),
            other => return Err(format!("pcap link type {other} is not read here (IP, Ethernet and Linux cooked captures are)")),
        };
        if !is_ip || data.len() < skip {
            continue;
        }
        out.push(Packet {
            t_ns,
            data: data[skip..].to_vec(),
            orig_len: orig.saturating_sub(skip as u32),
        });
    }
    Ok(out)
}

fn ethertype_is_ip(data: &[u8], at: usize) -> bool {
    matches!(
        data.get(at..at + 2),
        Some([0x08, 0x00]) | Some([0x86, 0xdd])
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What is written is read back exactly, nanoseconds and original lengths included, and
    /// the headers are the 24 and 16 bytes other tools expect.
    #[test]
    fn a_written_file_reads_back() {
        let mut f = Vec::new();
        write_header(&mut f, 128).unwrap();
        write_packet(&mut f, 1_700_000_000_123_456_789, &[0x45, 1, 2], 1500).unwrap();
        write_packet(&mut f, 1_700_000_001_000_000_001, &[0x60; 5], 5).unwrap();
        assert_eq!(f.len(), 24 + 16 + 3 + 16 + 5);
        assert_eq!(&f[0..4], &[0x4d, 0x3c, 0xb2, 0xa1]);
        let p = read(&f).unwrap();
        assert_eq!(p.len(), 2);
        assert_eq!(p[0].t_ns, 1_700_000_000_123_456_789);
        assert_eq!(p[0].data, vec![0x45, 1, 2]);
        assert_eq!(p[0].orig_len, 1500);
        assert_eq!(p[1].orig_len, 5);
    }

    /// Microsecond files in the other byte order, and Ethernet framing, are read too.
    #[test]
    fn a_big_endian_microsecond_ethernet_file_is_read() {
        let mut f = Vec::new();
        f.extend_from_slice(&MAGIC_US.to_be_bytes());
        f.extend_from_slice(&[0, 2, 0, 4]);
        f.extend_from_slice(&[0; 8]);
        f.extend_from_slice(&65535u32.to_be_bytes());
        f.extend_from_slice(&LINKTYPE_ETHERNET.to_be_bytes());
        let mut frame = vec![0u8; 12];
        frame.extend_from_slice(&[0x08, 0x00, 0x45, 0]);
        f.extend_from_slice(&7u32.to_be_bytes());
        f.extend_from_slice(&250u32.to_be_bytes());
        f.extend_from_slice(&(frame.len() as u32).to_be_bytes());
        f.extend_from_slice(&60u32.to_be_bytes());
        f.extend_from_slice(&frame);
        let p = read(&f).unwrap();
        assert_eq!(p.len(), 1);
        assert_eq!(p[0].t_ns, 7_000_250_000);
        assert_eq!(p[0].data, vec![0x45, 0]);
        assert_eq!(p[0].orig_len, 46);
    }

    #[test]
    fn bad_files_are_errors_not_panics() {
        assert!(read(b"short").is_err());
        assert!(read(&[0u8; 24]).unwrap_err().contains("magic"));
        let mut f = Vec::new();
        write_header(&mut f, 128).unwrap();
        write_packet(&mut f, 1, &[0x45; 20], 20).unwrap();
        assert!(read(&f[..f.len() - 1]).unwrap_err().contains("cut"));
        assert!(read(&f[..30]).unwrap_err().contains("cut"));
    }
}
