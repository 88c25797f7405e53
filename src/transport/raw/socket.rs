//! The packet socket: our EtherType, a BPF filter for one port, arrival stamps; ports, waits.

use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::sync::atomic::Ordering;
use std::time::Duration;

use anyhow::{Context, Result};

use super::iface::Iface;
use super::wire::{DST_PORT_AT, ETHERTYPE};
use crate::sys::{self, packet};

/// Receive buffer of every raw socket unless --rcvbuf asks for another, bytes.
const DEFAULT_RCVBUF: usize = 4 << 20;

/// A packet socket of our EtherType that sees only frames for `port`.
pub(super) fn open_socket(iface: &Iface, port: u16) -> Result<OwnedFd> {
    let fd = packet::open_ethertype(ETHERTYPE).map_err(|e| {
        if e.raw_os_error() == Some(libc::EPERM) {
            anyhow::anyhow!(
                "the raw transport needs root (CAP_NET_RAW) to open packet sockets: {e}"
            )
        } else {
            anyhow::Error::new(e).context(format!("opening a packet socket on {}", iface.name))
        }
    })?;
    packet::filter_flow(fd.as_fd(), iface.index, DST_PORT_AT, port)
        .context("filtering raw frames by interface and port")?;
    // Every frame carries the kernel's arrival stamp: a stream's receiver times its phase by
    // them, not by when it got round to reading (see `Connection::arrival_stamp`).
    sys::rx_timestamps(fd.as_fd(), true).context("asking for arrival stamps (SO_TIMESTAMPNS)")?;
    // A packet socket has no autotuning and a 208 KiB default: four 64 KiB frames of one
    // loopback message already overflow it. Give it room for several large messages; an
    // explicit --rcvbuf, applied after this, still decides.
    let room = libc::c_int::try_from(DEFAULT_RCVBUF).unwrap_or(libc::c_int::MAX);
    if sys::set_int_option(fd.as_fd(), libc::SOL_SOCKET, libc::SO_RCVBUFFORCE, room).is_err() {
        let _ = sys::set_int_option(fd.as_fd(), libc::SOL_SOCKET, libc::SO_RCVBUF, room);
    }
    Ok(fd)
}

/// A port for a new raw endpoint: one after the other from a random start, so that one
/// process does not hand out the same port twice in 65 535 connections. With a fresh random
/// port each time, a crr client's new connection took the port of an earlier one about once
/// in fifty runs (tens of connections each, 16-bit ports); the server, which remembers
/// answered HELLOs by (MAC, port) to repeat lost ACKs, then answered with the old
/// connection's ACK, and the request went to a closed port.
pub(super) fn next_port() -> Result<u16> {
    static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(u32::MAX);
    if NEXT.load(Ordering::Relaxed) == u32::MAX {
        let mut b = [0u8; 2];
        getrandom::fill(&mut b)
            .map_err(|e| anyhow::anyhow!("no randomness for a raw port: {e}"))?;
        // Only the first caller's start counts.
        let start = u32::from(u16::from_be_bytes(b));
        let _ = NEXT.compare_exchange(u32::MAX, start, Ordering::Relaxed, Ordering::Relaxed);
    }
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    Ok((n % 65_535 + 1) as u16)
}

/// Waits up to `left` for a frame; Ok(None) when none came.
pub(super) fn recv_within(
    fd: &OwnedFd,
    buf: &mut [u8],
    left: Duration,
) -> io::Result<Option<(usize, [u8; 6])>> {
    if !sys::wait_readable(fd.as_fd(), left)? {
        return Ok(None);
    }
    match packet::recv_from(fd.as_fd(), buf) {
        Ok(r) => Ok(Some(r)),
        Err(e)
            if matches!(
                e.kind(),
                io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted
            ) =>
        {
            Ok(None)
        }
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_process_hands_out_no_port_twice_in_a_row_of_thousands() {
        let ports: std::collections::HashSet<u16> =
            (0..10_000).map(|_| next_port().unwrap()).collect();
        assert_eq!(ports.len(), 10_000);
        assert!(!ports.contains(&0));
    }
}
