//! The goodput a link can deliver: its rate times the payload share of each frame, with
//! every packet counted as the lab's wire charges it under the link's framing
//! ([`Framing::wire_bytes`]: by default the frame as the kernel holds it, Ethernet header and
//! no preamble, FCS or gap; or its Ethernet, ATM cell or FDDI bytes). [HARP thesis n.d.] (see
//! REFERENCES.md) did the same for ATM cells.

pub use super::framing::{Framing, ETHERNET_HEADER};
pub use crate::model::lab::Goodput;
pub const IPV4_HEADER: u64 = 20;
pub const TCP_HEADER: u64 = 20;
/// TCP timestamps option with padding, on by default in Linux.
pub const TCP_TIMESTAMPS: u64 = 12;
pub const UDP_HEADER: u64 = 8;

/// TCP over IPv4 with timestamps: MSS = MTU - 52 payload bytes per MTU-sized IP packet as
/// the framing puts it on the wire (MTU + 14 for the kernel's frame).
pub fn tcp(rate_bits_per_s: f64, mtu: u64, framing: Framing) -> Goodput {
    let payload = mtu.saturating_sub(IPV4_HEADER + TCP_HEADER + TCP_TIMESTAMPS);
    let eff = payload as f64 / framing.wire_bytes(mtu) as f64;
    Goodput {
        tcp_bits_per_s: rate_bits_per_s * eff,
        tcp_efficiency: eff,
        mtu,
    }
}

/// Wire bytes on the link for one UDP datagram with `payload` bytes, including IPv4
/// fragmentation when the datagram does not fit the MTU, each fragment framed on its own.
pub fn udp_wire_bytes(payload: u64, mtu: u64, framing: Framing) -> u64 {
    let ip_payload = payload + UDP_HEADER;
    let per_fragment = (mtu.saturating_sub(IPV4_HEADER) / 8) * 8;
    let fragments = udp_frames(payload, mtu);
    if fragments == 1 {
        return framing.wire_bytes(ip_payload + IPV4_HEADER);
    }
    let last = ip_payload - (fragments - 1) * per_fragment;
    (fragments - 1) * framing.wire_bytes(per_fragment + IPV4_HEADER)
        + framing.wire_bytes(last + IPV4_HEADER)
}

/// Frames one UDP datagram of `payload` bytes takes (IPv4 fragments).
pub fn udp_frames(payload: u64, mtu: u64) -> u64 {
    let ip_payload = payload + UDP_HEADER;
    let per_fragment = (mtu.saturating_sub(IPV4_HEADER) / 8) * 8;
    if ip_payload + IPV4_HEADER <= mtu || per_fragment == 0 {
        1
    } else {
        ip_payload.div_ceil(per_fragment)
    }
}

/// Frames one raw-transport message of `payload` bytes takes.
pub fn raw_frames(payload: u64, mtu: u64) -> u64 {
    payload
        .div_ceil(mtu.saturating_sub(RAW_HEADER).max(1))
        .max(1)
}

/// The share of goodput left by random loss `p` per frame for messages of `frames` frames
/// that are lost whole when any frame is (datagrams, raw messages): (1 - p)^frames. For TCP
/// (`frames` = 1) it is an upper bound: each lost segment takes the wire again when it is
/// resent, and congestion control may keep TCP far below it.
pub fn loss_share(p: f64, frames: u64) -> f64 {
    (1.0 - p.clamp(0.0, 1.0)).powi(frames.min(i32::MAX as u64) as i32)
}

/// Payload bits per second of UDP datagrams of `payload` bytes at full link rate.
pub fn udp(rate_bits_per_s: f64, mtu: u64, payload: u64, framing: Framing) -> f64 {
    rate_bits_per_s * payload as f64 / udp_wire_bytes(payload, mtu, framing) as f64
}

/// wirebench's own header in each raw Ethernet frame (src/transport/raw.rs).
pub const RAW_HEADER: u64 = 24;

/// Wire bytes on the link for one raw-transport message of `payload` bytes: split into
/// frames of at most MTU - 24 message bytes, each with wirebench's header, each framed.
pub fn raw_wire_bytes(payload: u64, mtu: u64, framing: Framing) -> u64 {
    let per_frame = mtu.saturating_sub(RAW_HEADER).max(1);
    let frames = payload.div_ceil(per_frame).max(1);
    let last = payload - (frames - 1) * per_frame;
    (frames - 1) * framing.wire_bytes(per_frame + RAW_HEADER)
        + framing.wire_bytes(last + RAW_HEADER)
}

/// Payload bits per second of raw-transport messages of `payload` bytes at full link rate.
pub fn raw(rate_bits_per_s: f64, mtu: u64, payload: u64, framing: Framing) -> f64 {
    rate_bits_per_s * payload as f64 / raw_wire_bytes(payload, mtu, framing) as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    const F: Framing = Framing::Frame;

    #[test]
    fn tcp_in_atm_cells_and_on_ethernet_wire() {
        // 1448 payload bytes in a 1500-byte IP packet: 32 AAL5 cells, 1696 bytes. At OC-3's
        // 149.76 Mbit/s that is 127.86 Mbit/s of goodput.
        let g = tcp(149.76e6, 1500, Framing::AtmAal5);
        assert!((g.tcp_efficiency - 1448.0 / 1696.0).abs() < 1e-12);
        assert!(
            (g.tcp_bits_per_s - 127.861_132e6).abs() < 1e3,
            "{}",
            g.tcp_bits_per_s
        );
        let g = tcp(100e6, 1500, Framing::Ethernet);
        assert!((g.tcp_efficiency - 1448.0 / 1538.0).abs() < 1e-12);
        // FDDI's own MTU: 4300 bytes in 4388.
        let g = tcp(100e6, 4352, Framing::Fddi);
        assert!((g.tcp_efficiency - 4300.0 / 4388.0).abs() < 1e-12);
        // A 1-byte UDP datagram: 29-byte IP packet, 45 bytes: one cell.
        assert_eq!(udp_wire_bytes(1, 1500, Framing::AtmAal5), 53);
        // 1473 bytes: fragments of 1480 and 1 IP payload bytes, 1500 and 21 IP bytes: 32 + 1
        // cells.
        assert_eq!(udp_wire_bytes(1473, 1500, Framing::AtmAal5), 33 * 53);
        // Raw: 1476 message bytes + 24 header = a 1500-byte packet.
        assert_eq!(raw_wire_bytes(1476, 1500, Framing::AtmAal5), 1696);
    }

    #[test]
    fn raw_messages_split_into_frames() {
        // 1476 message bytes per 1500-byte frame: 4000 bytes take three frames.
        assert_eq!(raw_wire_bytes(4000, 1500, F), 4000 + 3 * 38);
        assert_eq!(raw_wire_bytes(1476, 1500, F), 1476 + 38);
        assert_eq!(raw_wire_bytes(1477, 1500, F), 1477 + 2 * 38);
        assert_eq!(raw_wire_bytes(0, 1500, F), 38);
    }

    #[test]
    fn loss_takes_its_share_of_every_frame_of_a_message() {
        assert_eq!(udp_frames(1400, 1500), 1);
        assert_eq!(udp_frames(8000, 1500), 6);
        assert_eq!(raw_frames(4000, 1500), 3);
        assert!((loss_share(0.01, 1) - 0.99).abs() < 1e-12);
        assert!((loss_share(0.05, 3) - 0.857_375).abs() < 1e-12);
        assert_eq!(loss_share(0.0, 6), 1.0);
    }

    #[test]
    fn tcp_on_standard_ethernet() {
        let g = tcp(100e6, 1500, F);
        // 1448 payload bytes in a 1514-byte frame.
        assert!((g.tcp_efficiency - 1448.0 / 1514.0).abs() < 1e-12);
        assert!((g.tcp_bits_per_s - 95.640_686e6).abs() < 1e3);
    }

    #[test]
    fn tcp_on_jumbo_frames() {
        let g = tcp(1e9, 9000, F);
        assert!((g.tcp_efficiency - 8948.0 / 9014.0).abs() < 1e-12);
    }

    #[test]
    fn udp_datagrams_with_and_without_fragmentation() {
        assert_eq!(udp_wire_bytes(1400, 1500, F), 1400 + 8 + 20 + 14);
        assert_eq!(udp_wire_bytes(1472, 1500, F), 1514);
        // 1473 bytes need two fragments of at most 1480 IP payload bytes each.
        assert_eq!(udp_wire_bytes(1473, 1500, F), 1473 + 8 + 2 * 34);
        assert_eq!(udp_wire_bytes(8000, 1500, F), 8008 + 6 * 34);
        assert!((udp(50e6, 1500, 1400, F) - 50e6 * 1400.0 / 1442.0).abs() < 1e-6);
    }
}
