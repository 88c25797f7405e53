//! Packet sockets (AF_PACKET) for the lab's delay line: whole Ethernet frames, with the
//! kernel's virtio-net header so that GSO super-frames and partial checksums cross unchanged.

use std::ffi::CString;
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};

/// `PACKET_VNET_HDR` (linux/if_packet.h): prefix every frame with a `virtio_net_hdr`.
const PACKET_VNET_HDR: libc::c_int = 15;
/// `PACKET_IGNORE_OUTGOING` (Linux 4.20): do not see our own transmissions.
const PACKET_IGNORE_OUTGOING: libc::c_int = 23;
/// Size of `struct virtio_net_hdr` that precedes each frame.
pub const VNET_HDR_LEN: usize = 10;

fn check(rc: libc::c_int) -> io::Result<()> {
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

/// Opens a non-blocking packet socket bound to interface `ifname` that sees every incoming
/// frame (not our own outgoing ones) and sends frames out of that interface.
pub fn open(ifname: &str, buffer_bytes: usize) -> io::Result<OwnedFd> {
    let protocol = (libc::ETH_P_ALL as u16).to_be();
    // SAFETY: plain socket(2) call with constant arguments; the result is checked below.
    let raw = unsafe {
        libc::socket(
            libc::AF_PACKET,
            libc::SOCK_RAW | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
            libc::c_int::from(protocol),
        )
    };
    check(raw)?;
    // SAFETY: `raw` is a fresh descriptor we own and hand to OwnedFd exactly once.
    let fd = unsafe { OwnedFd::from_raw_fd(raw) };
    super::set_int_option(fd.as_fd(), libc::SOL_PACKET, PACKET_VNET_HDR, 1)?;
    super::set_int_option(fd.as_fd(), libc::SOL_PACKET, PACKET_IGNORE_OUTGOING, 1)?;
    let size = libc::c_int::try_from(buffer_bytes).unwrap_or(libc::c_int::MAX);
    // The FORCE variants (root only) go past rmem_max/wmem_max; fall back quietly.
    if super::set_int_option(fd.as_fd(), libc::SOL_SOCKET, libc::SO_RCVBUFFORCE, size).is_err() {
        let _ = super::set_int_option(fd.as_fd(), libc::SOL_SOCKET, libc::SO_RCVBUF, size);
    }
    if super::set_int_option(fd.as_fd(), libc::SOL_SOCKET, libc::SO_SNDBUFFORCE, size).is_err() {
        let _ = super::set_int_option(fd.as_fd(), libc::SOL_SOCKET, libc::SO_SNDBUF, size);
    }
    let name = CString::new(ifname).map_err(|_| io::Error::other("interface name has a NUL"))?;
    // SAFETY: `name` is a valid NUL-terminated string for the duration of the call.
    let ifindex = unsafe { libc::if_nametoindex(name.as_ptr()) };
    if ifindex == 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: sockaddr_ll is a plain C struct; all-zero is a valid starting value.
    let mut addr: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
    addr.sll_family = libc::AF_PACKET as u16;
    addr.sll_protocol = protocol;
    addr.sll_ifindex = ifindex as libc::c_int;
    // SAFETY: `addr` is a properly initialised sockaddr_ll and its exact size is passed.
    check(unsafe {
        libc::bind(
            fd.as_raw_fd(),
            (&addr as *const libc::sockaddr_ll).cast(),
            std::mem::size_of::<libc::sockaddr_ll>() as libc::socklen_t,
        )
    })?;
    Ok(fd)
}

/// Receives one frame (virtio header included). WouldBlock when none is waiting.
#[inline]
pub fn recv(fd: BorrowedFd<'_>, buf: &mut [u8]) -> io::Result<usize> {
    nix::sys::socket::recv(fd.as_raw_fd(), buf, nix::sys::socket::MsgFlags::MSG_TRUNC)
        .map_err(io::Error::from)
}

/// Sends one frame (virtio header included).
#[inline]
pub fn send(fd: BorrowedFd<'_>, frame: &[u8]) -> io::Result<usize> {
    nix::sys::socket::send(fd.as_raw_fd(), frame, nix::sys::socket::MsgFlags::empty())
        .map_err(io::Error::from)
}
