//! The kernel's software time stamps of a socket's messages (SO_TIMESTAMPING, see the kernel's
//! Documentation/networking/timestamping.rst): when a message entered the queueing layer
//! (TX_SCHED), was handed to the driver (TX_SOFTWARE), was acknowledged (TX_ACK, TCP), and
//! when it arrived (RX_SOFTWARE). Every stamp is CLOCK_REALTIME, nanoseconds since the epoch.
//!
//! Transmit stamps are asked for per send (a SO_TIMESTAMPING control message), so that stamped
//! and unstamped messages can alternate on one socket, and are read back from the socket's
//! error queue, each with its OPT_ID key: the datagram's number for UDP and packet sockets, the
//! offset of the send's last byte for TCP.

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd};

/// `ee_info` of a transmit stamp (include/uapi/linux/errqueue.h).
const SCM_TSTAMP_SND: u32 = 0;
const SCM_TSTAMP_SCHED: u32 = 1;
const SCM_TSTAMP_ACK: u32 = 2;
/// A packet socket's error-queue message type (include/uapi/linux/if_packet.h).
const PACKET_TX_TIMESTAMP: libc::c_int = 16;

/// Where in a message's way out a transmit stamp was taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum TxKind {
    /// Entering the queueing layer (qdisc): SCM_TSTAMP_SCHED.
    #[default]
    Sched,
    /// Handed to the driver: SCM_TSTAMP_SND.
    Software,
    /// Acknowledged by the peer (TCP): SCM_TSTAMP_ACK.
    Ack,
}

/// One transmit stamp from the error queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TxStamp {
    pub kind: TxKind,
    /// OPT_ID: the datagram's number (UDP, packet sockets) or the byte offset of the stamped
    /// send's last byte (TCP), counted from when stamping was enabled.
    pub key: u32,
    /// CLOCK_REALTIME, nanoseconds since the epoch.
    pub ns: i64,
}

/// The transmit stamps a send asks for: queueing layer and driver, and for TCP the ACK.
pub fn tx_request_flags(ack: bool) -> u32 {
    let mut f = libc::SOF_TIMESTAMPING_TX_SCHED | libc::SOF_TIMESTAMPING_TX_SOFTWARE;
    if ack {
        f |= libc::SOF_TIMESTAMPING_TX_ACK;
    }
    f
}

/// Turns software stamping on for `fd`: transmit stamps reported to the error queue without
/// the packet (OPT_TSONLY) and keyed (OPT_ID), and with `rx` the arrival stamp of every
/// message received. No transmit stamp is recorded until a send asks for one
/// ([`send_stamped`]). A TCP socket must be connected (OPT_ID counts from its write sequence).
pub fn enable(fd: BorrowedFd<'_>, rx: bool) -> io::Result<()> {
    let mut flags = libc::SOF_TIMESTAMPING_SOFTWARE
        | libc::SOF_TIMESTAMPING_OPT_ID
        | libc::SOF_TIMESTAMPING_OPT_TSONLY;
    if rx {
        flags |= libc::SOF_TIMESTAMPING_RX_SOFTWARE;
    }
    let v = libc::c_int::try_from(flags).unwrap_or(0);
    super::set_int_option(fd, libc::SOL_SOCKET, libc::SO_TIMESTAMPING, v)
}

/// CLOCK_REALTIME now, nanoseconds since the epoch: the clock the kernel's stamps are in.
#[inline]
pub fn realtime_ns() -> i64 {
    match std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH) {
        Ok(d) => i64::try_from(d.as_nanos()).unwrap_or(i64::MAX),
        Err(_) => 0,
    }
}

/// This kernel's boot id: two ends that report the same one read one clock.
pub fn boot_id() -> Option<String> {
    std::fs::read_to_string("/proc/sys/kernel/random/boot_id")
        .ok()
        .map(|s| s.trim().to_owned())
        .filter(|s| !s.is_empty())
}

/// Control buffer of one SO_TIMESTAMPING request: a cmsghdr and a u32, 8-byte aligned.
#[repr(C, align(8))]
struct RequestCmsg([u8; 32]);

/// Sends `buf` on a connected socket (or to `to`, a packet socket's link address), asking
/// for the transmit stamps `flags` ([`tx_request_flags`]) of this one send. One sendmsg call;
/// the result is as `send`'s.
pub fn send_stamped(fd: BorrowedFd<'_>, buf: &[u8], flags: u32) -> io::Result<usize> {
    send_with(fd, buf, flags, None)
}

pub(crate) fn send_with(
    fd: BorrowedFd<'_>,
    buf: &[u8],
    flags: u32,
    to: Option<&libc::sockaddr_ll>,
) -> io::Result<usize> {
    let mut control = RequestCmsg([0; 32]);
    let space = {
        // SAFETY: CMSG_SPACE only computes a size from its argument.
        unsafe { libc::CMSG_SPACE(std::mem::size_of::<u32>() as u32) }
    } as usize;
    let mut iov = libc::iovec {
        iov_base: buf.as_ptr().cast_mut().cast(),
        iov_len: buf.len(),
    };
    // SAFETY: msghdr is a plain C struct; all-zero is a valid starting value.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    if let Some(addr) = to {
        msg.msg_name = (addr as *const libc::sockaddr_ll).cast_mut().cast();
        msg.msg_namelen = std::mem::size_of::<libc::sockaddr_ll>() as libc::socklen_t;
    }
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.0.as_mut_ptr().cast();
    msg.msg_controllen = space.min(control.0.len()) as _;
    // SAFETY: the control buffer is 8-byte aligned and holds CMSG_SPACE(4) bytes (at most 24
    // of its 32), so CMSG_FIRSTHDR is non-null and the header and its 4 data bytes lie inside
    // it; the data is written unaligned.
    unsafe {
        let c = libc::CMSG_FIRSTHDR(&msg);
        if c.is_null() {
            return Err(io::Error::other("no room for a time stamp request"));
        }
        (*c).cmsg_level = libc::SOL_SOCKET;
        (*c).cmsg_type = libc::SO_TIMESTAMPING;
        (*c).cmsg_len = libc::CMSG_LEN(std::mem::size_of::<u32>() as u32) as _;
        std::ptr::write_unaligned(libc::CMSG_DATA(c).cast::<u32>(), flags);
    }
    // SAFETY: `msg` points at one iovec over `buf` (only read by the kernel), at `control`,
    // and at `to` when given, all live for the call with the stated lengths.
    let n = unsafe { libc::sendmsg(fd.as_raw_fd(), &msg, libc::MSG_NOSIGNAL) };
    if n < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(n as usize)
    }
}

/// Scratch for the control messages of a stamped receive: room for SCM_TIMESTAMPING (three
/// timespecs) and more, 8-byte aligned.
#[repr(C, align(8))]
pub struct RxControl([u8; 256]);

impl Default for RxControl {
    fn default() -> RxControl {
        RxControl([0; 256])
    }
}

/// One `recv` on a socket with stamping enabled: the bytes and, when the kernel gave one, the
/// arrival stamp (RX_SOFTWARE) of the data returned (for TCP, of the last segment read).
pub fn recv_stamped(
    fd: BorrowedFd<'_>,
    buf: &mut [u8],
    control: &mut RxControl,
) -> io::Result<(usize, Option<i64>)> {
    let mut iov = libc::iovec {
        iov_base: buf.as_mut_ptr().cast(),
        iov_len: buf.len(),
    };
    // SAFETY: msghdr is a plain C struct; all-zero is a valid starting value.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.0.as_mut_ptr().cast();
    msg.msg_controllen = control.0.len() as _;
    // SAFETY: `msg` points at one iovec over `buf` and at `control`, both live and writable
    // for the stated lengths for the duration of the call.
    let n = unsafe { libc::recvmsg(fd.as_raw_fd(), &mut msg, 0) };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    let mut stamp = None;
    // SAFETY: `msg.msg_control` points at `control`, live, aligned and written by the kernel
    // in this receive, msg_controllen as the kernel left it.
    unsafe {
        each_cmsg(&msg, |level, kind, data| {
            if let Some(ns) = scm_timestamping(level, kind, data) {
                stamp = Some(ns);
            }
        })
    };
    Ok((n as usize, stamp))
}

/// Reads every transmit stamp waiting on `fd`'s error queue into `out`, without waiting;
/// returns how many were written. Stamps beyond `out`'s room are read and dropped (counted in
/// the second value) so that the queue never fills.
pub fn drain(fd: BorrowedFd<'_>, out: &mut [TxStamp]) -> io::Result<(usize, u64)> {
    let mut got = 0usize;
    let mut dropped = 0u64;
    let mut data = [0u8; 64];
    let mut control = RxControl::default();
    loop {
        let mut iov = libc::iovec {
            iov_base: data.as_mut_ptr().cast(),
            iov_len: data.len(),
        };
        // SAFETY: msghdr is a plain C struct; all-zero is a valid starting value.
        let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        msg.msg_control = control.0.as_mut_ptr().cast();
        msg.msg_controllen = control.0.len() as _;
        // SAFETY: as in `recv_stamped`: one iovec over `data` and the control buffer, live
        // and writable for the call.
        let n = unsafe {
            libc::recvmsg(
                fd.as_raw_fd(),
                &mut msg,
                libc::MSG_ERRQUEUE | libc::MSG_DONTWAIT,
            )
        };
        if n < 0 {
            let e = io::Error::last_os_error();
            return match e.kind() {
                io::ErrorKind::WouldBlock => Ok((got, dropped)),
                io::ErrorKind::Interrupted => continue,
                _ => Err(e),
            };
        }
        let mut ns = None;
        let mut err: Option<ExtendedErr> = None;
        // SAFETY: `msg.msg_control` points at `control`, written by the kernel in this
        // receive.
        unsafe {
            each_cmsg(&msg, |level, kind, bytes| {
                if let Some(t) = scm_timestamping(level, kind, bytes) {
                    ns = Some(t);
                }
                let ext = matches!(
                    (level, kind),
                    (libc::SOL_IP, libc::IP_RECVERR)
                        | (libc::SOL_IPV6, libc::IPV6_RECVERR)
                        | (libc::SOL_PACKET, PACKET_TX_TIMESTAMP)
                );
                if ext {
                    err = ExtendedErr::parse(bytes);
                }
            })
        };
        let (Some(ns), Some(e)) = (ns, err) else {
            continue;
        };
        if e.errno != libc::ENOMSG as u32 || e.origin != libc::SO_EE_ORIGIN_TIMESTAMPING {
            continue;
        }
        let kind = match e.info {
            SCM_TSTAMP_SCHED => TxKind::Sched,
            SCM_TSTAMP_SND => TxKind::Software,
            SCM_TSTAMP_ACK => TxKind::Ack,
            _ => continue,
        };
        match out.get_mut(got) {
            Some(slot) => {
                *slot = TxStamp {
                    kind,
                    key: e.data,
                    ns,
                };
                got += 1;
            }
            None => dropped += 1,
        }
    }
}

/// The fields of a `struct sock_extended_err` that say what a transmit stamp is.
#[derive(Debug, Clone, Copy)]
struct ExtendedErr {
    errno: u32,
    origin: u8,
    info: u32,
    data: u32,
}

impl ExtendedErr {
    /// From the message's bytes: ee_errno (u32), ee_origin, ee_type, ee_code, ee_pad (u8
    /// each), ee_info (u32), ee_data (u32), in the host's byte order.
    fn parse(b: &[u8]) -> Option<ExtendedErr> {
        let u32_at = |i: usize| -> Option<u32> {
            Some(u32::from_ne_bytes(b.get(i..i + 4)?.try_into().ok()?))
        };
        Some(ExtendedErr {
            errno: u32_at(0)?,
            origin: *b.get(4)?,
            info: u32_at(8)?,
            data: u32_at(12)?,
        })
    }
}

/// The software stamp (ts[0]) of an SCM_TIMESTAMPING message, if this is one and it is set:
/// a `struct timespec` of two 64-bit fields (64-bit Linux), in the host's byte order.
fn scm_timestamping(level: libc::c_int, kind: libc::c_int, data: &[u8]) -> Option<i64> {
    if level != libc::SOL_SOCKET || kind != libc::SCM_TIMESTAMPING {
        return None;
    }
    let i64_at = |i: usize| -> Option<i64> {
        Some(i64::from_ne_bytes(data.get(i..i + 8)?.try_into().ok()?))
    };
    let ns = i64_at(0)?
        .saturating_mul(1_000_000_000)
        .saturating_add(i64_at(8)?);
    (ns != 0).then_some(ns)
}

/// Calls `f(level, type, data)` for each control message of a received `msg`.
///
/// # Safety
/// `msg.msg_control` must point at a live buffer of at least `msg.msg_controllen` bytes that
/// the kernel filled in the receive that returned `msg`.
unsafe fn each_cmsg(msg: &libc::msghdr, mut f: impl FnMut(libc::c_int, libc::c_int, &[u8])) {
    // SAFETY: by the caller's promise the control buffer is live and kernel-written;
    // CMSG_FIRSTHDR/NXTHDR stay within msg_controllen, and each message's data lies within
    // its cmsg_len, which the kernel wrote.
    unsafe {
        let mut c = libc::CMSG_FIRSTHDR(msg);
        while !c.is_null() {
            let header = libc::CMSG_LEN(0) as usize;
            let len = ((*c).cmsg_len as usize).saturating_sub(header);
            let data = std::slice::from_raw_parts(libc::CMSG_DATA(c), len);
            f((*c).cmsg_level, (*c).cmsg_type, data);
            c = libc::CMSG_NXTHDR(msg, c);
        }
    }
}
