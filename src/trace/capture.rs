//! The capture thread: reads the data connections' segments from a memory-mapped packet
//! ring (TPACKET_V3) and writes them to a pcap file as they come, keeping each one's parsed
//! headers for the summary.

use std::io::{BufWriter, Write};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use anyhow::Result;

use super::pcap;
use super::segment::{self, Segment};
use crate::sys::packet;
use crate::sys::ring::{self, RingShape, RxRing};

/// The ring: 64 blocks of 1 MiB. A header-only frame takes about 200 bytes of a block
/// (the frame header, the virtio-net header, link and IP and TCP headers, and the filter's
/// room for the link header), so a block holds about 5 000 frames, a tenth of a second of
/// loopback at 40 Gbit/s; the ring, 64 of them. A block with frames is handed over after
/// RETIRE_MS at the latest, so a capture thread that is not scheduled for a while loses
/// nothing as long as it is back within 64 x RETIRE_MS (2.5 s).
const RING: RingShape = RingShape {
    block_size: 1 << 20,
    blocks: 64,
    retire_ms: RETIRE_MS,
};
/// The block retire timeout, milliseconds: the capture wakes at most about once per this
/// while frames come (and for every full block), instead of once per frame. Each wake-up
/// on a 2-CPU host takes a CPU from a measured thread: at 8 ms, loopback's traced rate was
/// about 3% lower than at 50 ms (bench/RESULTS.md).
const RETIRE_MS: u32 = 40;
/// The pcap writer's buffer: a few writes per second at loopback rates.
const WRITE_BUFFER: usize = 1 << 20;
/// `PACKET_OUTGOING` (linux/if_packet.h).
const PACKET_OUTGOING: u8 = 4;
/// After the point, the capture goes on until no block came for this long, counted from the
/// stop at the earliest (the last ACKs may still be on their way, and a partly filled block
/// is handed over only when its retire timer fires, within about two RETIRE_MS)...
const QUIET: Duration = Duration::from_millis(100);
/// ...but not longer than this.
const DRAIN_MAX: Duration = Duration::from_millis(500);
/// The longest one wait for a block lasts: how soon a stop is seen.
const POLL: Duration = Duration::from_millis(20);

/// Which TCP segments to capture: those to or from the server's data port, none of the
/// control connection's (it has the same server port with --one-port).
#[derive(Debug, Clone, Copy)]
pub struct PortFilter {
    pub data_port: u16,
    /// The control connection's client port, when it shares the data port.
    pub exclude_port: Option<u16>,
}

/// Opens the capture ring in the calling thread's network namespace (a socket keeps the
/// namespace it was made in, so it can be read from any thread afterwards).
pub fn open(filter: PortFilter, snaplen: u32) -> Result<(RxRing, Option<u32>)> {
    let loopback = packet::ifindex("lo").ok();
    let ring = ring::open_tcp_ring(
        filter.data_port,
        filter.exclude_port.unwrap_or(0),
        snaplen,
        loopback.unwrap_or(0),
        RING,
    )
    .map_err(|e| {
        if e.raw_os_error() == Some(libc::EPERM) {
            anyhow::anyhow!(
                "--trace needs CAP_NET_RAW (run as root or give the binary cap_net_raw)"
            )
        } else {
            anyhow::Error::new(e).context("setting up the packet ring for --trace")
        }
    })?;
    Ok((ring, loopback))
}

/// What a finished capture saw.
#[derive(Debug, Clone, Default)]
pub struct Captured {
    /// Packets written to the file.
    pub packets: u64,
    /// Packets the kernel dropped because no block of the ring was free.
    pub drops: u64,
    /// Blocks the kernel handed over whose frames could not all be walked (never expected:
    /// a sign of a ring this code misreads).
    pub malformed_blocks: u64,
    pub segments: Vec<Segment>,
    /// Each segment's GSO size (see [`crate::sys::ring::Frame::gso_size`]), in the order of
    /// `segments`, when the ring gave them (`gso_known`).
    pub gso_sizes: Vec<u16>,
    pub gso_known: bool,
    /// CPU time of the capture thread, and the time it ran, nanoseconds.
    pub cpu_ns: u64,
    pub elapsed_ns: u64,
}

pub struct Capture {
    stop: Arc<AtomicBool>,
    handle: JoinHandle<Result<Captured>>,
}

impl Capture {
    /// Starts the capture thread on `ring` (from [`open`]), writing `file`, created at
    /// `path` by [`crate::outfile`].
    pub fn start(
        ring: RxRing,
        loopback: Option<u32>,
        file: std::fs::File,
        path: &Path,
        snaplen: u32,
    ) -> Result<Capture> {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let path = path.to_owned();
        let handle = std::thread::Builder::new()
            .name("wb-trace".into())
            .spawn(move || {
                // The capture must not cut into the measured threads' time slices when
                // it wakes (on a small host they are the bottleneck); refused, it runs as
                // an ordinary thread.
                let _ = crate::sys::batch_priority();
                let out = BufWriter::with_capacity(WRITE_BUFFER, file);
                capture_loop(ring, loopback, out, &path, snaplen, &flag)
            })?;
        Ok(Capture { stop, handle })
    }

    /// Ends the capture once the last segments are in, and returns what it saw.
    pub fn finish(self) -> Result<Captured> {
        self.stop.store(true, Ordering::SeqCst);
        self.handle
            .join()
            .map_err(|_| anyhow::anyhow!("the capture thread panicked"))?
    }
}

fn capture_loop(
    mut ring: RxRing,
    loopback: Option<u32>,
    mut out: BufWriter<std::fs::File>,
    path: &Path,
    snaplen: u32,
    stop: &AtomicBool,
) -> Result<Captured> {
    let cpu_start = packet::thread_cpu_ns();
    let started = Instant::now();
    let written =
        |e: std::io::Error| anyhow::Error::new(e).context(format!("writing {}", path.display()));
    pcap::write_header(&mut out, snaplen).map_err(written)?;
    let mut got = Captured {
        gso_known: ring.gso_sizes(),
        ..Captured::default()
    };
    let mut stopping_since: Option<Instant> = None;
    let mut last_block = Instant::now();
    let mut failed: Option<std::io::Error> = None;
    loop {
        let stopping = stop.load(Ordering::SeqCst);
        if stopping && stopping_since.is_none() {
            stopping_since = Some(Instant::now());
        }
        // A frame written before the stop may sit in a block the kernel has not handed over
        // yet: that block retires within about two RETIRE_MS, so the drain lasts at least
        // QUIET from the stop, however long ago the last block came.
        if let Some(s) = stopping_since {
            let quiet = last_block.elapsed().min(s.elapsed());
            if quiet >= QUIET || s.elapsed() >= DRAIN_MAX {
                break;
            }
        }
        // One wake-up per block: the frames are read in place, and only the pcap writer
        // copies them (into its buffer).
        let walked = ring
            .next_block(POLL, |f| {
                // On loopback a packet passes the packet tap twice, once leaving (OUTGOING)
                // and once arriving (HOST): the outgoing copy is kept. The socket's filter
                // drops the other already; this keeps the file right whatever it did.
                if failed.is_some() || (Some(f.ifindex) == loopback && f.pkttype != PACKET_OUTGOING)
                {
                    return;
                }
                // The ring keeps a little more than the headers (room for the link header
                // of a raw socket): the file holds the IP and TCP headers, no payload, and
                // never more than the snap length.
                let keep = headers_len(f.data).unwrap_or(f.data.len());
                let data = &f.data[..keep.min(f.data.len()).min(snaplen as usize)];
                let orig = ip_length(data).unwrap_or(f.len);
                if let Some(s) = segment::parse(f.t_ns, data, orig) {
                    got.segments.push(s);
                    got.gso_sizes.push(f.gso_size);
                }
                match pcap::write_packet(&mut out, f.t_ns, data, orig) {
                    Ok(()) => got.packets += 1,
                    Err(e) => failed = Some(e),
                }
            })
            .map_err(|e| anyhow::Error::new(e).context("reading the packet ring"))?;
        if let Some(e) = failed.take() {
            return Err(written(e));
        }
        if let Some((_, short)) = walked {
            last_block = Instant::now();
            got.malformed_blocks += u64::from(short);
        }
    }
    out.flush().map_err(written)?;
    got.drops = ring.statistics().map(|s| s.drops).unwrap_or(0);
    got.cpu_ns = packet::thread_cpu_ns().saturating_sub(cpu_start);
    got.elapsed_ns = started.elapsed().as_nanos() as u64;
    Ok(got)
}

/// The length of the IP and TCP headers at the start of `p` (None: not an IPv4 or IPv6 TCP
/// packet, or cut before its TCP header's length).
fn headers_len(p: &[u8]) -> Option<usize> {
    let ip = match p.first()? >> 4 {
        4 => usize::from(p.first()? & 0x0f) * 4,
        6 => 40,
        _ => return None,
    };
    Some(ip + usize::from(p.get(ip + 12)? >> 4) * 4)
}

/// The packet's length from its IP header (the packet is cut to the snap length).
fn ip_length(p: &[u8]) -> Option<u32> {
    match p.first()? >> 4 {
        4 => Some(u32::from(u16::from_be_bytes([*p.get(2)?, *p.get(3)?]))).filter(|&l| l > 0),
        6 => Some(u32::from(u16::from_be_bytes([*p.get(4)?, *p.get(5)?])) + 40),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_file_keeps_the_ip_and_tcp_headers_alone() {
        let mut v4 = vec![0u8; 20 + 32 + 76];
        v4[0] = 0x45;
        v4[20 + 12] = 8 << 4;
        assert_eq!(headers_len(&v4), Some(52));
        let mut v6 = vec![0u8; 40 + 20 + 10];
        v6[0] = 0x60;
        v6[40 + 12] = 5 << 4;
        assert_eq!(headers_len(&v6), Some(60));
        // Cut before the TCP header's length, or not IP: kept as it came.
        assert_eq!(headers_len(&v4[..30]), None);
        assert_eq!(headers_len(&[0x20, 0, 0]), None);
    }
}
