//! A memory-mapped TPACKET_V3 receive ring (PACKET_MMAP, Documentation/networking/packet_mmap
//! in the kernel's tree) for `--trace`: the kernel writes each captured frame into a block of
//! a ring shared with this process and hands a block over whole, when it is full or when its
//! retire timer fires. Reading a frame then costs no system call and no copy; one poll(2)
//! wakes the reader for a whole block.
//!
//! The block walker ([`walk_block`]) is pure code over bytes, tested with synthetic blocks.

use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

/// `TPACKET_V3` (linux/if_packet.h, enum tpacket_versions).
const TPACKET_V3: libc::c_int = 2;
/// `PACKET_VERSION`, `PACKET_RX_RING`, `PACKET_TIMESTAMP`, `PACKET_STATISTICS`.
const PACKET_VERSION: libc::c_int = 10;
const PACKET_RX_RING: libc::c_int = 5;
const PACKET_TIMESTAMP: libc::c_int = 17;
const PACKET_STATISTICS: libc::c_int = 6;
/// `PACKET_VNET_HDR`: each frame is preceded by a `struct virtio_net_hdr` (raw sockets only).
const PACKET_VNET_HDR: libc::c_int = 15;
/// Size of `struct virtio_net_hdr`, and where its `gso_size` lies in it.
const VNET_HDR_LEN: usize = 10;
const VNET_GSO_SIZE: usize = 4;
/// Bytes kept beyond the snap length for the link header a raw socket's frames begin with
/// (14 for Ethernet and loopback).
const LINK_ROOM: u32 = 64;
/// Block status bits: the kernel owns the block (0), or user space does.
const TP_STATUS_KERNEL: u32 = 0;
const TP_STATUS_USER: u32 = 1;

/// Offsets in `struct tpacket_block_desc` (version, offset_to_priv, then tpacket_hdr_v1).
const BLOCK_STATUS: usize = 8;
const BLOCK_NUM_PKTS: usize = 12;
const BLOCK_FIRST_PKT: usize = 16;
/// Size of `struct tpacket_block_desc` (tpacket_hdr_v1 holds an aligned u64 and two stamps).
pub const BLOCK_DESC_LEN: usize = 48;
/// Offsets in `struct tpacket3_hdr`.
const TP_NEXT_OFFSET: usize = 0;
const TP_SEC: usize = 4;
const TP_NSEC: usize = 8;
const TP_SNAPLEN: usize = 12;
const TP_LEN: usize = 16;
const TP_MAC: usize = 24;
const TP_NET: usize = 26;
/// `TPACKET_ALIGN(sizeof(struct tpacket3_hdr))`: where the frame's `sockaddr_ll` begins.
pub const FRAME_HDR_LEN: usize = 48;
/// Offsets in `struct sockaddr_ll`.
const SLL_IFINDEX: usize = 4;
const SLL_PKTTYPE: usize = 10;

/// The ring's shape.
#[derive(Debug, Clone, Copy)]
pub struct RingShape {
    /// Bytes per block (a multiple of the page size): what one wake-up hands over at most.
    pub block_size: usize,
    pub blocks: usize,
    /// The longest a block with frames in it stays open before the kernel hands it over,
    /// milliseconds: how late a quiet connection's last frames reach the reader.
    pub retire_ms: u32,
}

/// One frame of a block.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Frame<'a> {
    /// The kernel's time stamp, nanoseconds since the Unix epoch.
    pub t_ns: u64,
    /// The packet's length from its network header on.
    pub len: u32,
    /// The bytes kept, from the network header on.
    pub data: &'a [u8],
    /// The MSS a GSO/TSO super-frame is to be cut by (the kernel's `gso_size`, from the
    /// frame's virtio-net header); 0 for a frame that is sent as it is, or without the header.
    pub gso_size: u16,
    /// PACKET_HOST, PACKET_OUTGOING, ... (linux/if_packet.h).
    pub pkttype: u8,
    pub ifindex: u32,
}

fn u32_at(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_ne_bytes(b.get(at..at + 4)?.try_into().ok()?))
}

fn u16_at(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_ne_bytes(b.get(at..at + 2)?.try_into().ok()?))
}

/// Walks the frames of one block as the kernel laid it out (a `tpacket_block_desc` with
/// `num_pkts` frames from `offset_to_first_pkt`, each a `tpacket3_hdr` whose `tp_next_offset`
/// leads to the next), calling `f` for each. Returns the frames walked; a frame whose
/// offsets point outside the block ends the walk (never a panic), and the count then says
/// fewer than the block's `num_pkts` (see [`block_frames`]).
/// With `vnet`, each frame's virtio-net header lies just before its link header.
pub fn walk_block(block: &[u8], vnet: bool, mut f: impl FnMut(Frame<'_>)) -> u32 {
    let (Some(n), Some(first)) = (
        u32_at(block, BLOCK_NUM_PKTS),
        u32_at(block, BLOCK_FIRST_PKT),
    ) else {
        return 0;
    };
    let mut at = first as usize;
    for i in 0..n {
        let Some(hdr) = block.get(at..at + FRAME_HDR_LEN + SLL_PKTTYPE + 1) else {
            return i;
        };
        let field = |o| u32_at(hdr, o).unwrap_or(0);
        let (sec, nsec, snap, len) = (
            field(TP_SEC),
            field(TP_NSEC),
            field(TP_SNAPLEN),
            field(TP_LEN),
        );
        let mac = usize::from(u16_at(hdr, TP_MAC).unwrap_or(0));
        let net = usize::from(u16_at(hdr, TP_NET).unwrap_or(0)).max(mac);
        // The kept bytes begin at the link header (none on a datagram socket).
        let link = net - mac;
        let kept = (snap as usize).saturating_sub(link);
        let Some(data) = block.get(at + net..at + net + kept) else {
            return i;
        };
        let gso_size = if vnet {
            let Some(v) = mac
                .checked_sub(VNET_HDR_LEN)
                .and_then(|v| u16_at(block, at + v + VNET_GSO_SIZE))
            else {
                return i;
            };
            v
        } else {
            0
        };
        f(Frame {
            t_ns: u64::from(sec) * 1_000_000_000 + u64::from(nsec),
            len: len.saturating_sub(link as u32),
            data,
            gso_size,
            pkttype: hdr[FRAME_HDR_LEN + SLL_PKTTYPE],
            ifindex: field(FRAME_HDR_LEN + SLL_IFINDEX),
        });
        let next = field(TP_NEXT_OFFSET) as usize;
        if next == 0 && i + 1 < n {
            return i + 1;
        }
        at += next;
    }
    n
}

/// The number of frames the block says it holds.
pub fn block_frames(block: &[u8]) -> u32 {
    u32_at(block, BLOCK_NUM_PKTS).unwrap_or(0)
}

/// A packet socket with a TPACKET_V3 receive ring mapped into this process.
pub struct RxRing {
    fd: OwnedFd,
    map: NonNull<u8>,
    shape: RingShape,
    /// Whether frames carry a virtio-net header (their GSO size).
    vnet: bool,
    /// The block to look at next: the kernel fills blocks in ring order.
    next: usize,
}

// SAFETY: the mapping belongs to this value alone (no other handle to it exists in this
// process), and the kernel's side of it is synchronised through each block's status word
// (atomic loads and stores below); moving the value to another thread moves that ownership.
unsafe impl Send for RxRing {}

/// The counters of a TPACKET_V3 socket since the last read: frames the filter passed,
/// frames dropped because no block was free, and how often the ring was frozen full.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RingStats {
    pub packets: u64,
    pub drops: u64,
    pub freezes: u64,
}

impl RxRing {
    /// Sets up the ring on `fd`, a packet socket not yet bound (so nothing is queued before
    /// the ring exists), and maps it.
    pub fn new(fd: OwnedFd, shape: RingShape, vnet: bool) -> io::Result<RxRing> {
        let page = 4096usize;
        if shape.block_size == 0 || !shape.block_size.is_multiple_of(page) || shape.blocks == 0 {
            return Err(io::Error::other("ring blocks must be whole pages"));
        }
        super::set_int_option(fd.as_fd(), libc::SOL_PACKET, PACKET_VERSION, TPACKET_V3)?;
        // Software stamps in nanoseconds (a V3 frame always carries tp_nsec).
        super::set_int_option(
            fd.as_fd(),
            libc::SOL_PACKET,
            PACKET_TIMESTAMP,
            libc::SOF_TIMESTAMPING_SOFTWARE as libc::c_int,
        )?;
        // The frame size only has to divide the block for V3 (frames are packed by length).
        let frame_size = 2048u32;
        let req = libc::tpacket_req3 {
            tp_block_size: shape.block_size as u32,
            tp_block_nr: shape.blocks as u32,
            tp_frame_size: frame_size,
            tp_frame_nr: (shape.block_size / frame_size as usize * shape.blocks) as u32,
            tp_retire_blk_tov: shape.retire_ms,
            tp_sizeof_priv: 0,
            tp_feature_req_word: 0,
        };
        // SAFETY: `req` is a valid tpacket_req3 and its exact size is passed; the kernel
        // copies it.
        check(unsafe {
            libc::setsockopt(
                fd.as_raw_fd(),
                libc::SOL_PACKET,
                PACKET_RX_RING,
                (&req as *const libc::tpacket_req3).cast(),
                std::mem::size_of::<libc::tpacket_req3>() as libc::socklen_t,
            )
        })?;
        let len = shape.block_size * shape.blocks;
        // SAFETY: maps the ring the kernel just allocated for `fd`, whole, shared, at an
        // address of the kernel's choosing; the result is checked before use.
        let map = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                fd.as_raw_fd(),
                0,
            )
        };
        if map == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let map = NonNull::new(map.cast::<u8>()).ok_or_else(|| io::Error::other("mmap gave 0"))?;
        Ok(RxRing {
            fd,
            map,
            shape,
            vnet,
            next: 0,
        })
    }

    pub fn fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }

    /// Whether the frames give their GSO size (see [`Frame::gso_size`]).
    pub fn gso_sizes(&self) -> bool {
        self.vnet
    }

    /// The status word of block `i`.
    fn status(&self, i: usize) -> &AtomicU32 {
        // SAFETY: block `i` (< blocks) lies inside the mapping, which lives as long as
        // `self`; its status word is at offset 8 of a page-aligned block, so 4-aligned, and
        // the kernel and this process only ever access it whole (the kernel with
        // smp_load_acquire/smp_store_release, as the atomics here).
        unsafe {
            &*self
                .map
                .as_ptr()
                .add(i * self.shape.block_size + BLOCK_STATUS)
                .cast::<AtomicU32>()
        }
    }

    /// Waits up to `timeout` for the next block the kernel hands over, walks its frames
    /// with `f` and gives the block back. Returns the frames walked (None: no block came),
    /// and whether the walk stopped short of the block's count (a malformed block).
    pub fn next_block(
        &mut self,
        timeout: Duration,
        f: impl FnMut(Frame<'_>),
    ) -> io::Result<Option<(u32, bool)>> {
        let i = self.next;
        if self.status(i).load(Ordering::Acquire) & TP_STATUS_USER == 0 {
            // poll(2) reports the socket readable once a block is user space's.
            super::wait_readable(self.fd.as_fd(), timeout)?;
            if self.status(i).load(Ordering::Acquire) & TP_STATUS_USER == 0 {
                return Ok(None);
            }
        }
        let (walked, count) = {
            // SAFETY: block `i` lies inside the mapping; its status says user space owns it,
            // and the kernel writes no byte of a block it does not own until the status is
            // handed back below (after this slice is gone).
            let block = unsafe {
                std::slice::from_raw_parts(
                    self.map.as_ptr().add(i * self.shape.block_size),
                    self.shape.block_size,
                )
            };
            (walk_block(block, self.vnet, f), block_frames(block))
        };
        // The release orders every read of the block before the kernel may write it again.
        self.status(i).store(TP_STATUS_KERNEL, Ordering::Release);
        self.next = (i + 1) % self.shape.blocks;
        Ok(Some((walked, walked < count)))
    }

    /// PACKET_STATISTICS of a V3 socket: counts since the last read.
    pub fn statistics(&self) -> io::Result<RingStats> {
        let mut stats = libc::tpacket_stats_v3 {
            tp_packets: 0,
            tp_drops: 0,
            tp_freeze_q_cnt: 0,
        };
        let mut len = std::mem::size_of::<libc::tpacket_stats_v3>() as libc::socklen_t;
        // SAFETY: `stats` and `len` are valid for writes and `len` holds the size of `stats`.
        check(unsafe {
            libc::getsockopt(
                self.fd.as_raw_fd(),
                libc::SOL_PACKET,
                PACKET_STATISTICS,
                (&mut stats as *mut libc::tpacket_stats_v3).cast(),
                &mut len,
            )
        })?;
        Ok(RingStats {
            packets: u64::from(stats.tp_packets),
            drops: u64::from(stats.tp_drops),
            freezes: u64::from(stats.tp_freeze_q_cnt),
        })
    }
}

impl Drop for RxRing {
    fn drop(&mut self) {
        // SAFETY: the mapping was made by `new` with this length and nothing borrows it any
        // more (every block slice lives only inside `next_block`).
        unsafe {
            libc::munmap(
                self.map.as_ptr().cast(),
                self.shape.block_size * self.shape.blocks,
            );
        }
    }
}

fn check(rc: libc::c_int) -> io::Result<()> {
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

/// Opens a packet socket on every interface of the current network namespace that
/// receives, into a TPACKET_V3 ring of `shape`, the TCP segments to or from `port` (none to
/// or from `exclude`, 0 for none) with `snaplen` bytes from the IP header on, nanosecond
/// software stamps, and each frame's GSO size. The socket is a raw one with virtio-net
/// headers (the GSO size is what the sender's TCP counted the frame as: the MSS it cut by,
/// which on loopback changes during a connection); where the kernel refuses those headers,
/// the frames come without GSO sizes. The filter is attached and the ring set up before the
/// socket is bound to a protocol, so nothing else is queued. On interface index `loopback`
/// (0: none) only outgoing copies are received. Needs CAP_NET_RAW.
pub fn open_tcp_ring(
    port: u16,
    exclude: u16,
    snaplen: u32,
    loopback: u32,
    shape: RingShape,
) -> io::Result<RxRing> {
    // SAFETY: plain socket(2) call with constant arguments; the result is checked below.
    // Protocol 0: the socket receives nothing until bind names one.
    let raw = unsafe { libc::socket(libc::AF_PACKET, libc::SOCK_RAW | libc::SOCK_CLOEXEC, 0) };
    check(raw)?;
    // SAFETY: `raw` is a fresh descriptor we own and hand to OwnedFd exactly once.
    let fd = unsafe { OwnedFd::from_raw_fd(raw) };
    super::filter::attach(
        fd.as_fd(),
        &super::packet::tcp_port_program(
            port,
            exclude,
            LINK_ROOM,
            snaplen.saturating_add(LINK_ROOM),
            loopback,
        ),
    )?;
    // Before the ring: the kernel sizes frames with it.
    let vnet = super::set_int_option(fd.as_fd(), libc::SOL_PACKET, PACKET_VNET_HDR, 1).is_ok();
    let ring = RxRing::new(fd, shape, vnet)?;
    // SAFETY: sockaddr_ll is a plain C struct; all-zero is a valid starting value.
    let mut addr: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
    addr.sll_family = libc::AF_PACKET as u16;
    addr.sll_protocol = (libc::ETH_P_ALL as u16).to_be();
    // Index 0: every interface.
    // SAFETY: `addr` is a properly initialised sockaddr_ll and its exact size is passed.
    check(unsafe {
        libc::bind(
            ring.fd.as_raw_fd(),
            (&addr as *const libc::sockaddr_ll).cast(),
            std::mem::size_of::<libc::sockaddr_ll>() as libc::socklen_t,
        )
    })?;
    Ok(ring)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The offsets used here are the kernel's (libc's copies of the structs agree).
    #[test]
    fn the_offsets_are_the_kernels() {
        assert_eq!(std::mem::size_of::<libc::tpacket3_hdr>(), FRAME_HDR_LEN);
        assert_eq!(std::mem::offset_of!(libc::tpacket3_hdr, tp_next_offset), 0);
        assert_eq!(std::mem::offset_of!(libc::tpacket3_hdr, tp_sec), TP_SEC);
        assert_eq!(std::mem::offset_of!(libc::tpacket3_hdr, tp_nsec), TP_NSEC);
        assert_eq!(
            std::mem::offset_of!(libc::tpacket3_hdr, tp_snaplen),
            TP_SNAPLEN
        );
        assert_eq!(std::mem::offset_of!(libc::tpacket3_hdr, tp_len), TP_LEN);
        assert_eq!(std::mem::offset_of!(libc::tpacket3_hdr, tp_net), TP_NET);
        assert_eq!(std::mem::offset_of!(libc::tpacket3_hdr, tp_mac), TP_MAC);
        assert_eq!(
            std::mem::offset_of!(libc::sockaddr_ll, sll_ifindex),
            SLL_IFINDEX
        );
        assert_eq!(
            std::mem::offset_of!(libc::sockaddr_ll, sll_pkttype),
            SLL_PKTTYPE
        );
        assert_eq!(
            std::mem::size_of::<libc::tpacket_block_desc>(),
            BLOCK_DESC_LEN
        );
        let bh = std::mem::offset_of!(libc::tpacket_block_desc, hdr);
        assert_eq!(
            bh + std::mem::offset_of!(libc::tpacket_hdr_v1, block_status),
            BLOCK_STATUS
        );
        assert_eq!(
            bh + std::mem::offset_of!(libc::tpacket_hdr_v1, num_pkts),
            BLOCK_NUM_PKTS
        );
        assert_eq!(
            bh + std::mem::offset_of!(libc::tpacket_hdr_v1, offset_to_first_pkt),
            BLOCK_FIRST_PKT
        );
    }

    /// A frame as the kernel writes it: header, sockaddr_ll, data at `net`.
    fn put_frame(
        b: &mut [u8],
        at: usize,
        next: u32,
        t: (u32, u32),
        data: &[u8],
        len: u32,
        (pkttype, ifindex): (u8, u32),
    ) {
        let net = 96usize;
        b[at + TP_MAC..at + TP_MAC + 2].copy_from_slice(&(net as u16).to_ne_bytes());
        let w = |b: &mut [u8], o: usize, v: u32| {
            b[at + o..at + o + 4].copy_from_slice(&v.to_ne_bytes())
        };
        w(b, TP_NEXT_OFFSET, next);
        w(b, TP_SEC, t.0);
        w(b, TP_NSEC, t.1);
        w(b, TP_SNAPLEN, data.len() as u32);
        w(b, TP_LEN, len);
        b[at + TP_NET..at + TP_NET + 2].copy_from_slice(&(net as u16).to_ne_bytes());
        w(b, FRAME_HDR_LEN + SLL_IFINDEX, ifindex);
        b[at + FRAME_HDR_LEN + SLL_PKTTYPE] = pkttype;
        b[at + net..at + net + data.len()].copy_from_slice(data);
    }

    fn block_of(frames: u32, first: u32) -> Vec<u8> {
        let mut b = vec![0u8; 4096];
        b[BLOCK_STATUS..BLOCK_STATUS + 4].copy_from_slice(&TP_STATUS_USER.to_ne_bytes());
        b[BLOCK_NUM_PKTS..BLOCK_NUM_PKTS + 4].copy_from_slice(&frames.to_ne_bytes());
        b[BLOCK_FIRST_PKT..BLOCK_FIRST_PKT + 4].copy_from_slice(&first.to_ne_bytes());
        b
    }

    /// Three frames linked by their next offsets come out in order with their nanosecond
    /// stamps, kept bytes, lengths, packet types and interfaces.
    #[test]
    fn a_synthetic_block_walks_frame_by_frame() {
        let mut b = block_of(3, 48);
        put_frame(
            &mut b,
            48,
            240,
            (1_700_000_000, 5),
            &[0x45; 128],
            65_535,
            (4, 1),
        );
        put_frame(
            &mut b,
            288,
            112,
            (1_700_000_000, 999_999_999),
            &[0x60, 1],
            2,
            (0, 3),
        );
        put_frame(&mut b, 400, 0, (1_700_000_001, 0), &[0x45; 40], 52, (4, 1));
        let mut got = Vec::new();
        let n = walk_block(&b, false, |f| {
            got.push((f.t_ns, f.len, f.data.to_vec(), f.pkttype, f.ifindex))
        });
        assert_eq!(n, 3);
        assert_eq!(
            got,
            vec![
                (1_700_000_000_000_000_005, 65_535, vec![0x45; 128], 4, 1),
                (1_700_000_000_999_999_999, 2, vec![0x60, 1], 0, 3),
                (1_700_000_001_000_000_000, 52, vec![0x45; 40], 4, 1),
            ]
        );
        assert_eq!(block_frames(&b), 3);
    }

    /// The capture keeps loopback's outgoing copies only: a walker's caller skips the
    /// arriving (PACKET_HOST) copy by its packet type and interface.
    #[test]
    fn incoming_copies_on_lo_are_told_apart_by_packet_type() {
        let mut b = block_of(2, 48);
        put_frame(&mut b, 48, 160, (1, 1), &[0x45; 20], 20, (4, 1));
        put_frame(&mut b, 208, 0, (1, 2), &[0x45; 20], 20, (0, 1));
        let mut kept = 0;
        assert_eq!(
            walk_block(&b, false, |f| {
                if !(f.ifindex == 1 && f.pkttype != 4) {
                    kept += 1;
                }
            }),
            2
        );
        assert_eq!(kept, 1);
    }

    /// Offsets that point outside the block end the walk short, without a panic.
    #[test]
    fn a_malformed_block_ends_the_walk_short() {
        let mut b = block_of(3, 48);
        put_frame(&mut b, 48, 5000, (1, 1), &[0x45; 20], 20, (4, 1));
        assert_eq!(walk_block(&b, false, |_| {}), 1);
        let b = block_of(2, 4090);
        assert_eq!(walk_block(&b, false, |_| {}), 0);
        let mut b = block_of(2, 48);
        put_frame(&mut b, 48, 0, (1, 1), &[0x45; 20], 20, (4, 1));
        assert_eq!(
            walk_block(&b, false, |_| {}),
            1,
            "a zero next offset before the last frame"
        );
        assert_eq!(walk_block(&[0u8; 8], false, |_| {}), 0);
    }

    /// A raw socket's frame: a 14-byte link header before the IP header and a virtio-net
    /// header before that; the walker gives the bytes from the IP header on, the length less
    /// the link header, and the GSO size.
    #[test]
    fn a_raw_frame_gives_its_ip_bytes_and_gso_size() {
        let mut b = block_of(1, 48);
        let (mac, net) = (96usize, 110usize);
        let at = 48;
        let w = |b: &mut [u8], o: usize, v: u32| b[o..o + 4].copy_from_slice(&v.to_ne_bytes());
        w(&mut b, at + TP_SEC, 7);
        w(&mut b, at + TP_SNAPLEN, 14 + 40);
        w(&mut b, at + TP_LEN, 14 + 40 + 3 * 1448);
        b[at + TP_MAC..at + TP_MAC + 2].copy_from_slice(&(mac as u16).to_ne_bytes());
        b[at + TP_NET..at + TP_NET + 2].copy_from_slice(&(net as u16).to_ne_bytes());
        let v = at + mac - VNET_HDR_LEN + VNET_GSO_SIZE;
        b[v..v + 2].copy_from_slice(&1448u16.to_ne_bytes());
        b[at + net..at + net + 40].copy_from_slice(&[0x45; 40]);
        let mut got = Vec::new();
        assert_eq!(
            walk_block(&b, true, |f| got.push((f.len, f.data.len(), f.gso_size))),
            1
        );
        assert_eq!(got, vec![(40 + 3 * 1448, 40, 1448)]);
        let mut plain = Vec::new();
        walk_block(&b, false, |f| plain.push(f.gso_size));
        assert_eq!(plain, vec![0]);
    }
}
