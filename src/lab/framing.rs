//! The bytes a link's wire charges each packet under its framing ([`Framing`]): what the
//! delay line serialises at the rate, what the goodput line and the physics guard count.
//! Pure functions of the layer-3 packet's length (the IP packet; for wirebench's raw
//! transport, its own header and payload), so that every figure is checked against hand
//! arithmetic.
//!
//! - `frame`: Ethernet header 14 B + packet: the frame as the kernel holds it (the lab's
//!   charge before framings existed, and still its default).
//! - `ethernet`: IEEE 802.3: header 14 + FCS 4, padded to the 64-byte minimum frame, plus
//!   preamble and SFD 8 and the inter-frame gap of 12 byte times.
//! - `atm-aal5`: RFC 2684 (formerly RFC 1483) LLC/SNAP encapsulation of routed IP (8 B:
//!   LLC AA-AA-03, OUI 00-00-00, EtherType), the packet, the 8-byte AAL5 CPCS trailer (UU,
//!   CPI, length, CRC-32), padded to a whole number of 48-byte cell payloads (ITU-T I.363.5);
//!   53 bytes (5 header + 48) per cell. LLC/SNAP rather than VC multiplexing because it is
//!   Classical IP over ATM's default (RFC 2225), the setup the seeds measured.
//! - `atm-aal34`: AAL3/4 (ITU-T I.363.3): 4-byte CPCS header (CPI, Btag, BASize), the packet
//!   padded to a multiple of 4, 4-byte CPCS trailer (AL, Etag, length); each cell carries 44
//!   of those bytes (2-byte SAR header and 2-byte SAR trailer in its 48-byte payload); 53 per
//!   cell. No LLC/SNAP: one protocol per virtual circuit.
//! - `fddi`: ISO 9314-2 (ANSI X3.139) MAC frame: preamble 8 (16 idle symbols), starting
//!   delimiter 1, frame control 1, destination and source addresses 6 + 6, RFC 1390's
//!   LLC/SNAP 8, FCS 4, ending delimiter and frame status 2 (1 + 3 symbols, rounded to whole
//!   bytes): 36 bytes per packet. RFC 1390 gives IP over FDDI an MTU of 4352 bytes (give it
//!   with --mtu 4352). The rate is FDDI's 100 Mbit/s of data (125 Mbaud of 4B/5B symbols).

pub use crate::model::lab::Framing;

/// Ethernet's header, as the kernel holds a frame.
pub const ETHERNET_HEADER: u64 = 14;
/// An ATM cell: 5 header bytes and 48 payload bytes.
pub const CELL: u64 = 53;
pub const CELL_PAYLOAD: u64 = 48;
/// RFC 2684 LLC/SNAP header for routed IPv4.
pub const LLC_SNAP: u64 = 8;
pub const AAL5_TRAILER: u64 = 8;
/// AAL3/4 CPCS header and trailer, and the bytes of them a cell carries.
pub const AAL34_CPCS: u64 = 4 + 4;
pub const AAL34_SAR_PAYLOAD: u64 = 44;
/// Ethernet on the wire: FCS, preamble with SFD, inter-frame gap, minimum frame (header to
/// FCS).
pub const ETHERNET_FCS: u64 = 4;
pub const ETHERNET_PREAMBLE: u64 = 8;
pub const ETHERNET_GAP: u64 = 12;
pub const ETHERNET_MIN_FRAME: u64 = 64;
/// FDDI's bytes around an IP packet (see the module).
pub const FDDI_OVERHEAD: u64 = 8 + 1 + 1 + 6 + 6 + LLC_SNAP + 4 + 2;
/// RFC 1390's MTU of IP over FDDI.
pub const FDDI_MTU: u64 = 4352;

impl Framing {
    /// Wire bytes of one packet of `l3` bytes (an IP packet, headers included).
    pub fn wire_bytes(self, l3: u64) -> u64 {
        match self {
            Framing::Frame => l3 + ETHERNET_HEADER,
            Framing::Ethernet => {
                (l3 + ETHERNET_HEADER + ETHERNET_FCS).max(ETHERNET_MIN_FRAME)
                    + ETHERNET_PREAMBLE
                    + ETHERNET_GAP
            }
            Framing::AtmAal5 | Framing::AtmAal34 => self.cells(l3) * CELL,
            Framing::Fddi => l3 + FDDI_OVERHEAD,
        }
    }

    /// ATM cells one packet of `l3` bytes takes; 0 on a framing without cells.
    pub fn cells(self, l3: u64) -> u64 {
        match self {
            Framing::AtmAal5 => (LLC_SNAP + l3 + AAL5_TRAILER).div_ceil(CELL_PAYLOAD),
            Framing::AtmAal34 => (AAL34_CPCS + l3.next_multiple_of(4)).div_ceil(AAL34_SAR_PAYLOAD),
            Framing::Frame | Framing::Ethernet | Framing::Fddi => 0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aal5_cells_by_hand() {
        // 8 + 40 + 8 = 56 bytes: two cell payloads (96, 40 bytes of padding), 106 bytes.
        assert_eq!(Framing::AtmAal5.cells(40), 2);
        assert_eq!(Framing::AtmAal5.wire_bytes(40), 106);
        // 8 + 32 + 8 = 48: exactly one cell; one byte more takes a second.
        assert_eq!(Framing::AtmAal5.wire_bytes(32), 53);
        assert_eq!(Framing::AtmAal5.wire_bytes(33), 106);
        // A UDP datagram of n payload bytes is an IP packet of 28 + n: 44 + n bytes in cells,
        // so the cell count grows at n = 5, 53, 101, 149, 197.
        let cells = |n: u64| Framing::AtmAal5.cells(28 + n);
        assert_eq!((cells(4), cells(5), cells(52), cells(53)), (1, 2, 2, 3));
        assert_eq!((cells(196), cells(197)), (5, 6));
        // 1500-byte packet: 1516 bytes, 32 cells (1536 payload bytes), 1696 on the wire.
        assert_eq!(Framing::AtmAal5.wire_bytes(1500), 1696);
    }

    #[test]
    fn aal34_cells_by_hand() {
        // 4 + 36 + 4 = 44: one cell; 37 pads to 40, 48 bytes: two.
        assert_eq!(Framing::AtmAal34.cells(36), 1);
        assert_eq!(Framing::AtmAal34.cells(37), 2);
        assert_eq!(Framing::AtmAal34.wire_bytes(40), 106);
        // 1500: 1508 bytes / 44 = 34.3: 35 cells, 1855 bytes.
        assert_eq!(Framing::AtmAal34.wire_bytes(1500), 35 * 53);
    }

    #[test]
    fn ethernet_fddi_and_the_kernel_frame_by_hand() {
        // 40-byte packet: 58-byte frame padded to 64, + 20: 84.
        assert_eq!(Framing::Ethernet.wire_bytes(40), 84);
        assert_eq!(Framing::Ethernet.wire_bytes(1500), 1538);
        assert_eq!(Framing::Frame.wire_bytes(1500), 1514);
        assert_eq!(Framing::Fddi.wire_bytes(FDDI_MTU), 4388);
        assert_eq!(Framing::Ethernet.cells(1500), 0);
        assert_eq!(Framing::default(), Framing::Frame);
    }
}
