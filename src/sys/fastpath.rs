//! Fast paths for moving bytes: zero-copy and sendfile sends, receives that skip the copy,
//! batched datagram system calls, and UDP segmentation offload in both directions. Each
//! function works on any socket descriptor; the caller decides when one applies.

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, OwnedFd};

const SO_ZEROCOPY: libc::c_int = 60;
const SO_BUSY_POLL: libc::c_int = 46;
const SO_EE_ORIGIN_ZEROCOPY: u8 = 5;
const SO_EE_CODE_ZEROCOPY_COPIED: u8 = 1;
const SOL_UDP: libc::c_int = 17;
const UDP_SEGMENT: libc::c_int = 103;
const UDP_GRO: libc::c_int = 104;
/// The kernel segments at most this many datagrams per send (UDP_MAX_SEGMENTS).
pub const UDP_MAX_SEGMENTS: usize = 64;

fn check(rc: libc::c_int) -> io::Result<libc::c_int> {
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(rc)
    }
}

/// SO_ZEROCOPY: allows MSG_ZEROCOPY sends on this socket.
pub fn enable_zerocopy(fd: BorrowedFd<'_>) -> io::Result<()> {
    super::set_int_option(fd, libc::SOL_SOCKET, SO_ZEROCOPY, 1)
}

/// SO_BUSY_POLL: the kernel busy-polls the device queue for up to `us` microseconds on a
/// blocking receive (needs CAP_NET_ADMIN above net.core.busy_read's limit).
pub fn set_busy_poll(fd: BorrowedFd<'_>, us: u32) -> io::Result<()> {
    super::set_int_option(
        fd,
        libc::SOL_SOCKET,
        SO_BUSY_POLL,
        us.min(i32::MAX as u32) as libc::c_int,
    )
}

/// SO_RCVLOWAT: a blocking receive is woken only once `bytes` are queued (or the stream
/// ends, or the buffer is under pressure). Returns the threshold the kernel holds afterwards,
/// which it may have capped (TCP: at half the largest receive buffer).
pub fn set_rcvlowat(fd: BorrowedFd<'_>, bytes: u64) -> io::Result<u64> {
    let want = bytes.clamp(1, i32::MAX as u64) as libc::c_int;
    super::set_int_option(fd, libc::SOL_SOCKET, libc::SO_RCVLOWAT, want)?;
    super::get_int_option(fd, libc::SOL_SOCKET, libc::SO_RCVLOWAT).map(|v| v.max(1) as u64)
}

/// UDP_SEGMENT: every send larger than `size` is cut by the kernel into datagrams of `size`.
pub fn set_udp_segment(fd: BorrowedFd<'_>, size: u16) -> io::Result<()> {
    super::set_int_option(fd, SOL_UDP, UDP_SEGMENT, libc::c_int::from(size))
}

/// UDP_GRO: the kernel may hand several datagrams of one size to one receive.
pub fn enable_udp_gro(fd: BorrowedFd<'_>) -> io::Result<()> {
    super::set_int_option(fd, SOL_UDP, UDP_GRO, 1)
}

/// One MSG_ZEROCOPY send. The buffer must not change until the kernel reports completion.
#[inline]
pub fn send_zerocopy(fd: BorrowedFd<'_>, buf: &[u8]) -> io::Result<usize> {
    // SAFETY: `buf` is valid for reads of its length for the duration of the call. With
    // MSG_ZEROCOPY the kernel pins the pages instead of copying, which keeps them valid
    // physically even if we free the memory; the caller keeps the contents unchanged.
    let n = unsafe {
        libc::send(
            fd.as_raw_fd(),
            buf.as_ptr().cast(),
            buf.len(),
            libc::MSG_ZEROCOPY | libc::MSG_NOSIGNAL,
        )
    };
    if n < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(n as usize)
    }
}

/// What zero-copy completions said so far.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ZerocopyCompletions {
    /// Sends the kernel has finished with.
    pub completed: u64,
    /// Of those, how many it copied after all (loopback always does).
    pub copied: u64,
}

/// Reads every pending completion notification from the socket's error queue (non-blocking).
pub fn reap_zerocopy(fd: BorrowedFd<'_>, into: &mut ZerocopyCompletions) -> io::Result<()> {
    let mut control = [0u64; 16]; // 128 bytes, 8-aligned, ample for one cmsg
    loop {
        // SAFETY: msghdr is a plain C struct; zeroed is a valid empty header.
        let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
        msg.msg_control = control.as_mut_ptr().cast();
        msg.msg_controllen = std::mem::size_of_val(&control) as _;
        // SAFETY: `msg` points at `control`, a live writable buffer of the stated size; no data
        // iovecs are given, so the kernel writes only the control message.
        let rc = unsafe {
            libc::recvmsg(
                fd.as_raw_fd(),
                &mut msg,
                libc::MSG_ERRQUEUE | libc::MSG_DONTWAIT,
            )
        };
        if rc < 0 {
            let e = io::Error::last_os_error();
            return if e.kind() == io::ErrorKind::WouldBlock {
                Ok(())
            } else {
                Err(e)
            };
        }
        // SAFETY: the kernel filled `msg.msg_control`; CMSG_FIRSTHDR/NXTHDR walk only within
        // msg_controllen, and the extended error is read unaligned from a cmsg of the
        // right level and type.
        unsafe {
            let mut cmsg = libc::CMSG_FIRSTHDR(&msg);
            while !cmsg.is_null() {
                let level = (*cmsg).cmsg_level;
                let kind = (*cmsg).cmsg_type;
                if (level == libc::SOL_IP && kind == libc::IP_RECVERR)
                    || (level == libc::SOL_IPV6 && kind == libc::IPV6_RECVERR)
                {
                    let err: libc::sock_extended_err =
                        std::ptr::read_unaligned(libc::CMSG_DATA(cmsg).cast());
                    if err.ee_origin == SO_EE_ORIGIN_ZEROCOPY {
                        // ee_info..=ee_data is the range of send calls completed.
                        let n = u64::from(err.ee_data.wrapping_sub(err.ee_info)) + 1;
                        into.completed += n;
                        if err.ee_code & SO_EE_CODE_ZEROCOPY_COPIED != 0 {
                            into.copied += n;
                        }
                    }
                }
                cmsg = libc::CMSG_NXTHDR(&msg, cmsg);
            }
        }
    }
}

/// A memory file holding the payload, for sendfile.
pub fn payload_file(payload: &[u8]) -> io::Result<OwnedFd> {
    use nix::sys::memfd::{memfd_create, MFdFlags};
    let fd = memfd_create("wirebench-payload", MFdFlags::MFD_CLOEXEC).map_err(io::Error::from)?;
    let mut off = 0;
    while off < payload.len() {
        off += nix::unistd::write(&fd, &payload[off..]).map_err(io::Error::from)?;
    }
    Ok(fd)
}

/// Sends `len` bytes of `file` from its start with sendfile: no copy through user space.
#[inline]
pub fn sendfile(sock: BorrowedFd<'_>, file: BorrowedFd<'_>, len: usize) -> io::Result<usize> {
    let mut offset: libc::off_t = 0;
    nix::sys::sendfile::sendfile(sock, file, Some(&mut offset), len).map_err(io::Error::from)
}

/// A receive that discards up to `buf.len()` bytes without copying them (TCP's MSG_TRUNC),
/// or, on a datagram socket, copies only what fits in `buf` and returns the datagram's length.
#[inline]
pub fn recv_trunc(fd: BorrowedFd<'_>, buf: &mut [u8], len: usize) -> io::Result<usize> {
    // SAFETY: `buf` is writable for buf.len() bytes. With MSG_TRUNC on a TCP socket the
    // kernel discards `len` bytes and writes nothing; on a datagram socket it writes at most
    // buf.len() bytes, so `len` is clamped to that there by the caller.
    let n = unsafe {
        libc::recv(
            fd.as_raw_fd(),
            buf.as_mut_ptr().cast(),
            len,
            libc::MSG_TRUNC,
        )
    };
    if n < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(n as usize)
    }
}

/// Pre-built headers for batched datagram calls over `count` buffers of `size` bytes each,
/// laid out back to back in one allocation. Built once; the hot loop only calls the kernel.
pub struct Batch {
    data: Vec<u8>,
    size: usize,
    iovs: Vec<libc::iovec>,
    msgs: Vec<libc::mmsghdr>,
    /// One control buffer per message, for the kernel's arrival stamp of a receive.
    controls: Vec<[u64; 8]>,
}

// SAFETY: the raw pointers in `iovs` and `msgs` point into `data` and `iovs`, which the Batch
// owns and never reallocates; moving the Batch to another thread moves the owner with them.
unsafe impl Send for Batch {}

impl Batch {
    /// Fails, rather than aborting the process, when `count * size` bytes overflow or cannot
    /// be allocated: both come from a peer's request (a batch of 1024 reads of 64 MiB asked
    /// for 64 GiB, and the failed allocation aborted the server).
    pub fn new(count: usize, size: usize) -> io::Result<Batch> {
        let count = count.max(1);
        let bytes = count.checked_mul(size).ok_or_else(|| {
            io::Error::other(format!("a batch of {count} x {size} bytes is too large"))
        })?;
        let mut data = Vec::new();
        data.try_reserve_exact(bytes).map_err(|_| {
            io::Error::new(
                io::ErrorKind::OutOfMemory,
                format!("cannot allocate a batch of {count} x {size} bytes"),
            )
        })?;
        data.resize(bytes, 0);
        let mut b = Batch {
            data,
            size,
            iovs: Vec::with_capacity(count),
            msgs: Vec::with_capacity(count),
            controls: vec![[0; 8]; count],
        };
        for i in 0..count {
            b.iovs.push(libc::iovec {
                // SAFETY: i * size is within `data`, which holds count * size bytes.
                iov_base: unsafe { b.data.as_mut_ptr().add(i * size) }.cast(),
                iov_len: size,
            });
        }
        for i in 0..count {
            // SAFETY: mmsghdr is a plain C struct; zeroed is a valid empty header.
            let mut m: libc::mmsghdr = unsafe { std::mem::zeroed() };
            // SAFETY: i < count = iovs.len(); `iovs` is never reallocated after this.
            m.msg_hdr.msg_iov = unsafe { b.iovs.as_mut_ptr().add(i) };
            m.msg_hdr.msg_iovlen = 1;
            b.msgs.push(m);
        }
        Ok(b)
    }

    pub fn count(&self) -> usize {
        self.msgs.len()
    }

    /// Bytes a batch of `count` buffers of `size` bytes holds: the buffers and, per message,
    /// its iovec, its header and its control buffer, as [`Batch::new`] allocates them (so that
    /// a server can charge a batched stream what it will hold before it is made).
    pub fn footprint(count: usize, size: usize) -> u64 {
        let count = count.max(1) as u64;
        let per_message = std::mem::size_of::<libc::iovec>()
            + std::mem::size_of::<libc::mmsghdr>()
            + std::mem::size_of::<[u64; 8]>();
        count
            .saturating_mul(size as u64)
            .saturating_add(count.saturating_mul(per_message as u64))
    }

    /// Bytes this batch holds, by its vectors' capacities.
    #[cfg(test)]
    pub(crate) fn allocated(&self) -> u64 {
        (self.data.capacity()
            + self.iovs.capacity() * std::mem::size_of::<libc::iovec>()
            + self.msgs.capacity() * std::mem::size_of::<libc::mmsghdr>()
            + self.controls.capacity() * std::mem::size_of::<[u64; 8]>()) as u64
    }

    /// Buffer `i` (to fill before sending, or to read after receiving).
    #[inline]
    pub fn buffer(&mut self, i: usize) -> &mut [u8] {
        &mut self.data[i * self.size..(i + 1) * self.size]
    }

    /// The kernel's arrival stamp (CLOCK_REALTIME) of message `i` of the last receive, when
    /// the socket asked for one (see [`super::rx_timestamps`]).
    #[inline]
    pub fn stamp(&self, i: usize) -> Option<std::time::Duration> {
        let h = &self.msgs.get(i)?.msg_hdr;
        if h.msg_control.is_null() {
            return None;
        }
        // SAFETY: a receive pointed this header at its own live control buffer, of which the
        // kernel wrote msg_controllen bytes.
        unsafe { super::scm_timestampns(h) }
    }

    /// Length the kernel reported for message `i` of the last receive.
    #[inline]
    pub fn received_len(&self, i: usize) -> usize {
        self.msgs[i].msg_len as usize
    }

    /// Sends the first `n` buffers as `n` datagrams; returns how many went out.
    #[inline]
    pub fn send(&mut self, fd: BorrowedFd<'_>, n: usize) -> io::Result<usize> {
        let n = n.min(self.msgs.len());
        // No control messages on a send (a receive may have pointed the headers at some).
        for m in &mut self.msgs[..n] {
            m.msg_hdr.msg_controllen = 0;
        }
        // SAFETY: the first n mmsghdrs point at n valid iovecs over live buffers (see new()).
        let rc =
            unsafe { libc::sendmmsg(fd.as_raw_fd(), self.msgs.as_mut_ptr(), n as libc::c_uint, 0) };
        check(rc).map(|r| r as usize)
    }

    /// Receives up to count() datagrams without waiting for more than the first; returns how
    /// many arrived (their lengths via received_len).
    #[inline]
    pub fn recv(&mut self, fd: BorrowedFd<'_>) -> io::Result<usize> {
        for (m, c) in self.msgs.iter_mut().zip(self.controls.iter_mut()) {
            m.msg_len = 0;
            m.msg_hdr.msg_control = c.as_mut_ptr().cast();
            m.msg_hdr.msg_controllen = std::mem::size_of::<[u64; 8]>() as _;
        }
        // SAFETY: every mmsghdr points at an iovec over a writable buffer of `size` bytes and
        // at its own 64-byte control buffer, neither reallocated while the Batch lives;
        // MSG_WAITFORONE makes the call return once at least one datagram is there; the
        // socket's receive timeout bounds the wait for the first.
        let rc = unsafe {
            libc::recvmmsg(
                fd.as_raw_fd(),
                self.msgs.as_mut_ptr(),
                self.msgs.len() as libc::c_uint,
                libc::MSG_WAITFORONE,
                std::ptr::null_mut(),
            )
        };
        check(rc).map(|r| r as usize)
    }
}

/// One receive on a UDP_GRO socket: returns (bytes, segment size, the kernel's arrival stamp
/// when the socket asked for one, see [`super::rx_timestamps`]). Several datagrams of the
/// segment size (the last possibly shorter) may arrive together; segment size 0 means one.
pub fn recv_gro(
    fd: BorrowedFd<'_>,
    buf: &mut [u8],
) -> io::Result<(usize, usize, Option<std::time::Duration>)> {
    // Room for both control messages: UDP_GRO (24 bytes) and SCM_TIMESTAMPNS (32).
    let mut control = [0u64; 8];
    let mut iov = libc::iovec {
        iov_base: buf.as_mut_ptr().cast(),
        iov_len: buf.len(),
    };
    // SAFETY: msghdr is a plain C struct; zeroed is a valid empty header.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.as_mut_ptr().cast();
    msg.msg_controllen = std::mem::size_of_val(&control) as _;
    // SAFETY: `msg` points at one iovec over `buf` and at `control`, both live and writable for
    // the stated lengths.
    let n = unsafe { libc::recvmsg(fd.as_raw_fd(), &mut msg, 0) };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    let mut segment = 0usize;
    // SAFETY: walks the control messages the kernel wrote, within msg_controllen; the
    // UDP_GRO payload is one c_int, read unaligned.
    unsafe {
        let mut cmsg = libc::CMSG_FIRSTHDR(&msg);
        while !cmsg.is_null() {
            if (*cmsg).cmsg_level == SOL_UDP && (*cmsg).cmsg_type == UDP_GRO {
                let v: libc::c_int = std::ptr::read_unaligned(libc::CMSG_DATA(cmsg).cast());
                segment = v.max(0) as usize;
            }
            cmsg = libc::CMSG_NXTHDR(&msg, cmsg);
        }
    }
    // SAFETY: `msg` points at `control`, live and written by the kernel in this receive.
    let stamp = unsafe { super::scm_timestampns(&msg) };
    Ok((n as usize, segment, stamp))
}

#[cfg(test)]
mod tests {
    use super::Batch;

    #[test]
    fn a_batch_too_large_to_hold_is_an_error_not_an_abort() {
        assert!(Batch::new(1024, usize::MAX / 2).is_err());
        assert!(Batch::new(2, usize::MAX).is_err());
        let mut b = Batch::new(4, 100).unwrap();
        assert_eq!(b.count(), 4);
        assert_eq!(b.buffer(3).len(), 100);
    }

    #[test]
    fn a_batch_holds_what_its_footprint_says() {
        for (count, size) in [(1, 1), (4, 100), (1024, 65_536), (0, 9000)] {
            let b = Batch::new(count, size).unwrap();
            assert_eq!(
                b.allocated(),
                Batch::footprint(count, size),
                "{count} x {size}"
            );
        }
    }
}
