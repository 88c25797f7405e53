//! The capture thread: reads the data connections' segments from a packet socket and writes
//! them to a pcap file as they come, keeping each one's parsed headers for the summary.

use std::io::{BufWriter, Write};
use std::os::fd::{AsFd, OwnedFd};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use anyhow::Result;

use super::pcap;
use super::segment::{self, Segment};
use crate::sys::packet;

/// Kernel receive buffer of the capture socket. The kernel charges a queued packet its whole
/// buffer, not the 128 bytes kept: on loopback a 64 KiB GSO super-segment costs ~70 KiB, so
/// this holds about 900 of them (the memory is only held while the capture lags).
const SOCKET_BUFFER: usize = 64 << 20;
/// `PACKET_OUTGOING` (linux/if_packet.h).
const PACKET_OUTGOING: u8 = 4;
/// After the point, the capture goes on until no segment came for this long (the last
/// ACKs may still be on their way)...
const QUIET: Duration = Duration::from_millis(50);
/// ...but not longer than this.
const DRAIN_MAX: Duration = Duration::from_millis(500);
/// How long the capture lets packets queue after a wake-up before reading them all. On
/// loopback at 10-20 Gbit/s (release build, 2 CPUs) a wake-up per packet cost about 4 us of
/// CPU a packet, 1 ms of queueing 1.4 us and 4 ms 1.2 us; but with 4 ms the queue of
/// loopback's super-segments overflowed on a loaded machine (see SOCKET_BUFFER).
const BATCH_WAIT: Duration = Duration::from_millis(1);

/// Which TCP segments to capture: those to or from the server's data port, none of the
/// control connection's (it has the same server port with --one-port).
#[derive(Debug, Clone, Copy)]
pub struct PortFilter {
    pub data_port: u16,
    /// The control connection's client port, when it shares the data port.
    pub exclude_port: Option<u16>,
}

/// Opens the capture socket in the calling thread's network namespace (a socket keeps the
/// namespace it was made in, so it can be read from any thread afterwards).
pub fn open(filter: PortFilter, snaplen: u32) -> Result<(OwnedFd, Option<u32>)> {
    let loopback = packet::ifindex("lo").ok();
    let fd = packet::open_tcp_capture(
        filter.data_port,
        filter.exclude_port.unwrap_or(0),
        snaplen,
        loopback.unwrap_or(0),
        SOCKET_BUFFER,
    )
    .map_err(|e| {
        if e.raw_os_error() == Some(libc::EPERM) {
            anyhow::anyhow!(
                "--trace needs CAP_NET_RAW (run as root or give the binary cap_net_raw)"
            )
        } else {
            anyhow::Error::new(e).context("opening the packet socket for --trace")
        }
    })?;
    Ok((fd, loopback))
}

/// What a finished capture saw.
#[derive(Debug, Clone, Default)]
pub struct Captured {
    /// Packets written to the file.
    pub packets: u64,
    /// Packets the kernel dropped because the socket's queue was full.
    pub drops: u64,
    pub segments: Vec<Segment>,
    /// CPU time of the capture thread, and the time it ran, nanoseconds.
    pub cpu_ns: u64,
    pub elapsed_ns: u64,
}

pub struct Capture {
    stop: Arc<AtomicBool>,
    handle: JoinHandle<Result<Captured>>,
}

impl Capture {
    /// Starts the capture thread on `fd` (from [`open`]), writing `file`, created at `path`
    /// by [`crate::outfile`].
    pub fn start(
        fd: OwnedFd,
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
                capture_loop(fd, loopback, BufWriter::new(file), &path, snaplen, &flag)
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
    fd: OwnedFd,
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
    let mut got = Captured::default();
    // One system call for up to 64 packets.
    let mut batch = packet::StampedBatch::new(64, snaplen as usize);
    let mut stopping_since: Option<Instant> = None;
    let mut last_packet = Instant::now();
    loop {
        let stopping = stop.load(Ordering::SeqCst);
        if stopping && stopping_since.is_none() {
            stopping_since = Some(Instant::now());
        }
        if let Some(s) = stopping_since {
            if last_packet.elapsed() >= QUIET || s.elapsed() >= DRAIN_MAX {
                break;
            }
        }
        if !crate::sys::wait_readable(fd.as_fd(), Duration::from_millis(20))? {
            continue;
        }
        // Woken once per packet the thread costs several microseconds a packet in wake-ups
        // alone; after a wake-up it lets the queue fill for a moment instead (the kernel's
        // time stamps do not depend on when the packets are read).
        std::thread::sleep(BATCH_WAIT);
        loop {
            let n = match batch.recv(fd.as_fd()) {
                Ok(n) => n,
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(anyhow::Error::new(e).context("reading the packet socket")),
            };
            last_packet = Instant::now();
            for i in 0..n {
                let (p, data) = batch.get(i);
                // On loopback a packet passes the packet tap twice, once leaving (OUTGOING)
                // and once arriving (HOST): the outgoing copy is kept. The socket's filter
                // drops the other already; this keeps the file right whatever the filter did.
                if Some(p.ifindex) == loopback && p.pkttype != PACKET_OUTGOING {
                    continue;
                }
                let orig = ip_length(data).unwrap_or(p.len as u32);
                if let Some(s) = segment::parse(p.t_ns, data, orig) {
                    got.segments.push(s);
                }
                pcap::write_packet(&mut out, p.t_ns, data, orig).map_err(written)?;
                got.packets += 1;
            }
            if n < 64 {
                break;
            }
        }
    }
    out.flush().map_err(written)?;
    got.drops = packet::statistics(fd.as_fd()).map(|(_, d)| d).unwrap_or(0);
    got.cpu_ns = packet::thread_cpu_ns().saturating_sub(cpu_start);
    got.elapsed_ns = started.elapsed().as_nanos() as u64;
    Ok(got)
}

/// The packet's length from its IP header (the packet is cut to the snap length).
fn ip_length(p: &[u8]) -> Option<u32> {
    match p.first()? >> 4 {
        4 => Some(u32::from(u16::from_be_bytes([*p.get(2)?, *p.get(3)?]))).filter(|&l| l > 0),
        6 => Some(u32::from(u16::from_be_bytes([*p.get(4)?, *p.get(5)?])) + 40),
        _ => None,
    }
}
