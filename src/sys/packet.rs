//! Packet sockets (AF_PACKET): for the lab's delay line, whole Ethernet frames with the
//! kernel's virtio-net header so that GSO super-frames and partial checksums cross unchanged;
//! for the raw transport, datagram packet sockets of one EtherType, addressed by MAC.

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

/// Opens a blocking datagram packet socket that receives frames of `ethertype` (the kernel
/// adds and strips the Ethernet header) and ignores our own outgoing frames.
///
/// It is not bound to an interface: binding re-registers the protocol hook, and the kernel
/// waits for an RCU grace period (milliseconds) to do that. [`filter_flow`] picks the
/// interface instead.
pub fn open_ethertype(ethertype: u16) -> io::Result<OwnedFd> {
    let protocol = ethertype.to_be();
    // SAFETY: plain socket(2) call with constant arguments; the result is checked below.
    let raw = unsafe {
        libc::socket(
            libc::AF_PACKET,
            libc::SOCK_DGRAM | libc::SOCK_CLOEXEC,
            libc::c_int::from(protocol),
        )
    };
    check(raw)?;
    // SAFETY: `raw` is a fresh descriptor we own and hand to OwnedFd exactly once.
    let fd = unsafe { OwnedFd::from_raw_fd(raw) };
    super::set_int_option(fd.as_fd(), libc::SOL_PACKET, PACKET_IGNORE_OUTGOING, 1)?;
    Ok(fd)
}

fn link_address(ifindex: u32, ethertype: u16, mac: [u8; 6]) -> libc::sockaddr_ll {
    // SAFETY: sockaddr_ll is a plain C struct; all-zero is a valid starting value.
    let mut addr: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
    addr.sll_family = libc::AF_PACKET as u16;
    addr.sll_protocol = ethertype.to_be();
    addr.sll_ifindex = ifindex as libc::c_int;
    addr.sll_halen = 6;
    addr.sll_addr[..6].copy_from_slice(&mac);
    addr
}

/// Lets through only frames that arrive on interface `ifindex` and whose big-endian 16-bit
/// field at `offset` (from the start of the frame's payload) equals `value`: a socket then
/// wakes for its own flow only.
pub fn filter_flow(fd: BorrowedFd<'_>, ifindex: u32, offset: u32, value: u16) -> io::Result<()> {
    /// The kernel's ancillary load of the receiving interface (linux/filter.h).
    const SKF_AD_IFINDEX: u32 = 8;
    let code = [
        // A = index of the interface the frame arrived on
        libc::sock_filter {
            code: (libc::BPF_LD | libc::BPF_W | libc::BPF_ABS) as u16,
            jt: 0,
            jf: 0,
            k: (libc::SKF_AD_OFF as u32).wrapping_add(SKF_AD_IFINDEX),
        },
        libc::sock_filter {
            code: (libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K) as u16,
            jt: 0,
            jf: 3,
            k: ifindex,
        },
        // A = payload[offset..offset + 2] as big-endian u16
        libc::sock_filter {
            code: (libc::BPF_LD | libc::BPF_H | libc::BPF_ABS) as u16,
            jt: 0,
            jf: 0,
            k: offset,
        },
        libc::sock_filter {
            code: (libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K) as u16,
            jt: 0,
            jf: 1,
            k: u32::from(value),
        },
        libc::sock_filter {
            code: (libc::BPF_RET | libc::BPF_K) as u16,
            jt: 0,
            jf: 0,
            k: u32::MAX,
        },
        libc::sock_filter {
            code: (libc::BPF_RET | libc::BPF_K) as u16,
            jt: 0,
            jf: 0,
            k: 0,
        },
    ];
    super::filter::attach(fd, &code)
}

/// Sends `payload` as one frame of `ethertype` to `mac` out of interface `ifindex`.
#[inline]
pub fn send_to(
    fd: BorrowedFd<'_>,
    payload: &[u8],
    ifindex: u32,
    ethertype: u16,
    mac: [u8; 6],
) -> io::Result<usize> {
    let addr = link_address(ifindex, ethertype, mac);
    // SAFETY: `payload` is a valid buffer of the given length and `addr` a properly
    // initialised sockaddr_ll whose exact size is passed.
    let n = unsafe {
        libc::sendto(
            fd.as_raw_fd(),
            payload.as_ptr().cast(),
            payload.len(),
            0,
            (&addr as *const libc::sockaddr_ll).cast(),
            std::mem::size_of::<libc::sockaddr_ll>() as libc::socklen_t,
        )
    };
    if n < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(n as usize)
    }
}

/// [`send_to`], asking for the transmit stamps `flags` of this frame (see
/// [`super::timestamping::send_stamped`]).
pub fn send_to_stamped(
    fd: BorrowedFd<'_>,
    payload: &[u8],
    ifindex: u32,
    ethertype: u16,
    mac: [u8; 6],
    flags: u32,
) -> io::Result<usize> {
    let addr = link_address(ifindex, ethertype, mac);
    super::timestamping::send_with(fd, payload, flags, Some(&addr))
}

/// Receives one frame's payload into `buf`: its length (truncated to `buf`) and the
/// sender's MAC address.
#[inline]
pub fn recv_from(fd: BorrowedFd<'_>, buf: &mut [u8]) -> io::Result<(usize, [u8; 6])> {
    // SAFETY: sockaddr_ll is a plain C struct; all-zero is a valid starting value.
    let mut addr: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
    let mut len = std::mem::size_of::<libc::sockaddr_ll>() as libc::socklen_t;
    // SAFETY: `buf` is a valid writable buffer of the given length; `addr` and `len` are
    // valid for writes and `len` holds the size of `addr`.
    let n = unsafe {
        libc::recvfrom(
            fd.as_raw_fd(),
            buf.as_mut_ptr().cast(),
            buf.len(),
            0,
            (&mut addr as *mut libc::sockaddr_ll).cast(),
            &mut len,
        )
    };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    let mut mac = [0u8; 6];
    mac.copy_from_slice(&addr.sll_addr[..6]);
    Ok(((n as usize).min(buf.len()), mac))
}

/// Like [`recv_from`], with the kernel's arrival stamp (CLOCK_REALTIME) of the frame when the
/// socket asked for one (see [`super::rx_timestamps`]); `control` is scratch for it.
#[inline]
pub fn recv_from_stamped(
    fd: BorrowedFd<'_>,
    buf: &mut [u8],
    control: &mut [u64; 8],
) -> io::Result<(usize, [u8; 6], Option<std::time::Duration>)> {
    // SAFETY: sockaddr_ll and msghdr are plain C structs; all-zero is a valid starting value.
    let mut addr: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
    let mut iov = libc::iovec {
        iov_base: buf.as_mut_ptr().cast(),
        iov_len: buf.len(),
    };
    // SAFETY: as above.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_name = (&mut addr as *mut libc::sockaddr_ll).cast();
    msg.msg_namelen = std::mem::size_of::<libc::sockaddr_ll>() as libc::socklen_t;
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.as_mut_ptr().cast();
    msg.msg_controllen = std::mem::size_of::<[u64; 8]>() as _;
    // SAFETY: `msg` points at `addr`, one iovec over `buf` and `control`, all live and
    // writable for the stated lengths for the duration of the call.
    let n = unsafe { libc::recvmsg(fd.as_raw_fd(), &mut msg, 0) };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `msg` points at `control`, live and written by the kernel in this receive.
    let stamp = unsafe { super::scm_timestampns(&msg) };
    let mut mac = [0u8; 6];
    mac.copy_from_slice(&addr.sll_addr[..6]);
    Ok(((n as usize).min(buf.len()), mac, stamp))
}

/// The index of interface `name`.
pub fn ifindex(name: &str) -> io::Result<u32> {
    let c = CString::new(name).map_err(|_| io::Error::other("interface name has a NUL"))?;
    // SAFETY: `c` is a valid NUL-terminated string for the duration of the call.
    let index = unsafe { libc::if_nametoindex(c.as_ptr()) };
    if index == 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(index)
    }
}

/// The MTU of interface `name` in the current network namespace (sysfs may show another
/// namespace's interfaces when this thread entered a namespace itself).
pub fn interface_mtu(name: &str) -> io::Result<usize> {
    let probe =
        std::net::UdpSocket::bind("0.0.0.0:0").or_else(|_| std::net::UdpSocket::bind("[::]:0"))?;
    // SAFETY: ifreq is a plain C struct; all-zero is a valid starting value.
    let mut req: libc::ifreq = unsafe { std::mem::zeroed() };
    let bytes = name.as_bytes();
    if bytes.is_empty() || bytes.len() >= req.ifr_name.len() {
        return Err(io::Error::other("bad interface name"));
    }
    for (dst, &b) in req.ifr_name.iter_mut().zip(bytes) {
        *dst = b as libc::c_char;
    }
    // SAFETY: SIOCGIFMTU reads the NUL-terminated name from `req` and writes the MTU into its
    // union; `req` is valid for reads and writes for the whole call.
    check(unsafe { libc::ioctl(probe.as_raw_fd(), libc::SIOCGIFMTU, &mut req) })?;
    // SAFETY: after a successful SIOCGIFMTU the kernel has set the union's `ifru_mtu` field.
    let mtu = unsafe { req.ifr_ifru.ifru_mtu };
    usize::try_from(mtu).map_err(|_| io::Error::other("negative MTU"))
}

/// A classic BPF program for a packet socket: IPv4 (first fragments) and IPv6 (no extension
/// headers) TCP segments to or from `port`, none to or from `exclude` (0: none), each cut at
/// the end of its TCP header plus `link_room` bytes, and never longer than `snaplen` (a
/// packet socket keeps as many bytes as its filter returns). Its loads are relative to the
/// network header (SKF_NET_OFF), so it reads the same on a datagram socket and on a raw one
/// whose packets begin with a link header of any length up to `link_room` (the kept length
/// counts from that header). On interface `loopback` (0: none) only the outgoing copy passes:
/// loopback shows each packet twice, leaving and arriving, and dropping the second here
/// spares the socket half its work.
///
/// Why headers only: the payload is wirebench's own filler, and on loopback, where a frame
/// is a 64 KiB GSO packet, every byte kept beyond the headers is copied into the ring and
/// written to the file at tens of megabytes a second, which the measured connection pays
/// for on a small host.
pub(super) fn tcp_port_program(
    port: u16,
    exclude: u16,
    link_room: u32,
    snaplen: u32,
    loopback: u32,
) -> Vec<libc::sock_filter> {
    let net = |k: u32| (libc::SKF_NET_OFF as u32).wrapping_add(k);
    let op = |code: u32, jt: u8, jf: u8, k: u32| libc::sock_filter {
        code: code as u16,
        jt,
        jf,
        k,
    };
    let (ld, ldx, jmp, ret) = (libc::BPF_LD, libc::BPF_LDX, libc::BPF_JMP, libc::BPF_RET);
    let (b, h, abs, ind, k) = (
        libc::BPF_B,
        libc::BPF_H,
        libc::BPF_ABS,
        libc::BPF_IND,
        libc::BPF_K,
    );
    let (p, e) = (u32::from(port), u32::from(exclude));
    /// The kernel's ancillary loads (linux/filter.h): receiving interface, packet type.
    const SKF_AD_PKTTYPE: u32 = 4;
    const SKF_AD_IFINDEX: u32 = 8;
    const PACKET_OUTGOING: u32 = 4;
    let ad = |field: u32| (libc::SKF_AD_OFF as u32).wrapping_add(field);
    // Jump offsets count the instructions skipped; the line numbers are in the comments.
    vec![
        /* -4 */ op(ld | libc::BPF_W | abs, 0, 0, ad(SKF_AD_IFINDEX)),
        /* -3 */ op(jmp | libc::BPF_JEQ | k, 0, 2, loopback), // not loopback -> 0
        /* -2 */ op(ld | libc::BPF_W | abs, 0, 0, ad(SKF_AD_PKTTYPE)),
        /* -1 */
        op(jmp | libc::BPF_JEQ | k, 0, 29, PACKET_OUTGOING), // arriving -> drop
        /* 0 */ op(ld | b | abs, 0, 0, net(0)),
        /* 1 */ op(libc::BPF_ALU | libc::BPF_RSH | k, 0, 0, 4),
        /* 2 */ op(jmp | libc::BPF_JEQ | k, 7, 0, 6), // IPv6 -> 10
        /* 3 */ op(jmp | libc::BPF_JEQ | k, 0, 25, 4), // not IPv4 -> drop
        /* 4 */ op(ld | b | abs, 0, 0, net(9)),
        /* 5 */ op(jmp | libc::BPF_JEQ | k, 0, 23, 6), // not TCP -> drop
        /* 6 */ op(ld | h | abs, 0, 0, net(6)),
        /* 7 */ op(jmp | libc::BPF_JSET | k, 21, 0, 0x1fff), // later fragment -> drop
        /* 8 */ op(ldx | b | libc::BPF_MSH, 0, 0, net(0)), // X = IPv4 header length
        /* 9 */ op(jmp | libc::BPF_JA, 0, 0, 3), // -> 13
        /* 10 */ op(ld | b | abs, 0, 0, net(6)),
        /* 11 */ op(jmp | libc::BPF_JEQ | k, 0, 17, 6), // not TCP -> drop
        /* 12 */ op(ldx | libc::BPF_W | libc::BPF_IMM, 0, 0, 40),
        /* 13 */ op(ld | h | ind, 0, 0, net(0)), // source port
        /* 14 */ op(jmp | libc::BPF_JEQ | k, 14, 0, e), // -> drop
        /* 15 */ op(libc::BPF_ST, 0, 0, 0),
        /* 16 */ op(ld | h | ind, 0, 0, net(2)), // destination port
        /* 17 */ op(jmp | libc::BPF_JEQ | k, 11, 0, e), // -> drop
        /* 18 */ op(jmp | libc::BPF_JEQ | k, 2, 0, p), // -> 21
        /* 19 */ op(ld | libc::BPF_W | libc::BPF_MEM, 0, 0, 0),
        /* 20 */ op(jmp | libc::BPF_JEQ | k, 0, 8, p), // -> drop
        /* 21 */ op(ld | b | ind, 0, 0, net(12)), // TCP data offset, high nibble
        /* 22 */ op(libc::BPF_ALU | libc::BPF_AND | k, 0, 0, 0xf0),
        /* 23 */
        op(libc::BPF_ALU | libc::BPF_RSH | k, 0, 0, 2), // A = TCP header length
        /* 24 */
        op(libc::BPF_ALU | libc::BPF_ADD | libc::BPF_X, 0, 0, 0), // + IP header
        /* 25 */ op(libc::BPF_ALU | libc::BPF_ADD | k, 0, 0, link_room),
        /* 26 */ op(jmp | libc::BPF_JGT | k, 1, 0, snaplen), // longer than asked -> 28
        /* 27 */ op(ret | libc::BPF_A, 0, 0, 0),
        /* 28 */ op(ret | k, 0, 0, snaplen),
        /* 29 */ op(ret | k, 0, 0, 0),
    ]
}

/// CPU time the calling thread has used, nanoseconds.
pub fn thread_cpu_ns() -> u64 {
    nix::time::clock_gettime(nix::time::ClockId::CLOCK_THREAD_CPUTIME_ID)
        .map(|t| (t.tv_sec() as u64).saturating_mul(1_000_000_000) + t.tv_nsec() as u64)
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A classic BPF interpreter for the instructions [`tcp_port_program`] uses, over a frame
    /// whose network header starts at `net_off`: the program's result (bytes kept, 0 drop)
    /// is checked without a socket.
    fn run(
        prog: &[libc::sock_filter],
        frame: &[u8],
        net_off: usize,
        ifindex: u32,
        pkttype: u32,
    ) -> u32 {
        let (mut a, mut x, mut mem, mut pc) = (0u32, 0u32, [0u32; 16], 0usize);
        let at = |k: i64| -> Option<usize> {
            let net = i64::from(libc::SKF_NET_OFF);
            (k >= net && k < i64::from(libc::SKF_AD_OFF))
                .then(|| usize::try_from(net_off as i64 + k - net).ok())
                .flatten()
        };
        let load = |off: Option<usize>, size: usize| -> Option<u32> {
            let b = frame.get(off?..off? + size)?;
            Some(b.iter().fold(0u32, |v, &x| (v << 8) | u32::from(x)))
        };
        loop {
            let i = prog[pc];
            let (code, k) = (u32::from(i.code), i.k);
            pc += 1;
            let kk = i64::from(k as i32);
            match code {
                c if c == libc::BPF_LD | libc::BPF_W | libc::BPF_ABS => {
                    a = match kk - i64::from(libc::SKF_AD_OFF) {
                        4 => pkttype,
                        8 => ifindex,
                        _ => match load(at(kk), 4) {
                            Some(v) => v,
                            None => return 0,
                        },
                    }
                }
                c if c == libc::BPF_LD | libc::BPF_B | libc::BPF_ABS => match load(at(kk), 1) {
                    Some(v) => a = v,
                    None => return 0,
                },
                c if c == libc::BPF_LD | libc::BPF_H | libc::BPF_ABS => match load(at(kk), 2) {
                    Some(v) => a = v,
                    None => return 0,
                },
                c if c == libc::BPF_LD | libc::BPF_H | libc::BPF_IND => {
                    match load(at(kk + i64::from(x)), 2) {
                        Some(v) => a = v,
                        None => return 0,
                    }
                }
                c if c == libc::BPF_LD | libc::BPF_B | libc::BPF_IND => {
                    match load(at(kk + i64::from(x)), 1) {
                        Some(v) => a = v,
                        None => return 0,
                    }
                }
                c if c == libc::BPF_LDX | libc::BPF_B | libc::BPF_MSH => match load(at(kk), 1) {
                    Some(v) => x = (v & 0xf) * 4,
                    None => return 0,
                },
                c if c == libc::BPF_LDX | libc::BPF_W | libc::BPF_IMM => x = k,
                c if c == libc::BPF_ST => mem[k as usize] = a,
                c if c == libc::BPF_LD | libc::BPF_W | libc::BPF_MEM => a = mem[k as usize],
                c if c == libc::BPF_ALU | libc::BPF_RSH | libc::BPF_K => a >>= k,
                c if c == libc::BPF_ALU | libc::BPF_AND | libc::BPF_K => a &= k,
                c if c == libc::BPF_ALU | libc::BPF_ADD | libc::BPF_K => a = a.wrapping_add(k),
                c if c == libc::BPF_ALU | libc::BPF_ADD | libc::BPF_X => a = a.wrapping_add(x),
                c if c == libc::BPF_JMP | libc::BPF_JA => pc += k as usize,
                c if c & 0x07 == libc::BPF_JMP => {
                    let taken = match c & 0xf0 {
                        op if op == libc::BPF_JEQ => a == k,
                        op if op == libc::BPF_JGT => a > k,
                        op if op == libc::BPF_JSET => a & k != 0,
                        op => panic!("jump {op:#x} not interpreted"),
                    };
                    pc += usize::from(if taken { i.jt } else { i.jf });
                }
                c if c == libc::BPF_RET | libc::BPF_K => return k,
                c if c == libc::BPF_RET | libc::BPF_A => return a,
                c => panic!("instruction {c:#x} not interpreted"),
            }
        }
    }

    /// An Ethernet frame carrying a TCP segment from port `s` to `d`, with `options` bytes of
    /// TCP options and `payload` bytes of data.
    fn frame(
        v6: bool,
        ip_options: usize,
        s: u16,
        d: u16,
        options: usize,
        payload: usize,
    ) -> Vec<u8> {
        let mut f = vec![0u8; 14];
        let tcp_len = 20 + options;
        if v6 {
            let mut ip = vec![0u8; 40];
            ip[0] = 0x60;
            ip[4..6].copy_from_slice(&((tcp_len + payload) as u16).to_be_bytes());
            ip[6] = 6;
            f.extend(ip);
        } else {
            let ihl = 20 + ip_options;
            let mut ip = vec![0u8; ihl];
            ip[0] = 0x40 | (ihl / 4) as u8;
            ip[2..4].copy_from_slice(&((ihl + tcp_len + payload) as u16).to_be_bytes());
            ip[9] = 6;
            f.extend(ip);
        }
        let mut tcp = vec![0u8; tcp_len];
        tcp[0..2].copy_from_slice(&s.to_be_bytes());
        tcp[2..4].copy_from_slice(&d.to_be_bytes());
        tcp[12] = ((tcp_len / 4) as u8) << 4;
        f.extend(tcp);
        f.extend(vec![0xabu8; payload]);
        f
    }

    /// Every segment of the data port is kept up to the end of its TCP header plus the room
    /// for its link header, never beyond the snap length; the control connection's, other
    /// ports', non-TCP packets and loopback's arriving copies are dropped.
    #[test]
    fn the_capture_filter_keeps_headers_only_and_the_data_port_alone() {
        const ROOM: u32 = 64;
        let prog = tcp_port_program(5201, 40000, ROOM, 128 + ROOM, 1);
        let keep = |f: &[u8], ifindex: u32, pkttype: u32| run(&prog, f, 14, ifindex, pkttype);
        // IPv4 with timestamps (12 bytes of options), 64 KiB of data: 20 + 32 + room.
        assert_eq!(
            keep(&frame(false, 0, 5201, 50000, 12, 65_000), 2, 0),
            20 + 32 + ROOM
        );
        assert_eq!(
            keep(&frame(false, 0, 50000, 5201, 12, 1), 2, 0),
            20 + 32 + ROOM
        );
        // IP options count too; IPv6's fixed header is 40.
        assert_eq!(
            keep(&frame(false, 8, 50000, 5201, 0, 100), 2, 0),
            28 + 20 + ROOM
        );
        assert_eq!(
            keep(&frame(true, 0, 50000, 5201, 12, 100), 2, 0),
            40 + 32 + ROOM
        );
        // The largest IP header (60) with the largest TCP header (60) fit in 128; a shorter
        // snap length caps them.
        let largest = frame(false, 40, 50000, 5201, 40, 100);
        assert_eq!(keep(&largest, 2, 0), 60 + 60 + ROOM);
        let short = tcp_port_program(5201, 40000, ROOM, 64 + ROOM, 1);
        assert_eq!(run(&short, &largest, 14, 2, 0), 64 + ROOM);
        // Not the data port, the control connection, a UDP packet: dropped.
        assert_eq!(keep(&frame(false, 0, 50000, 5202, 12, 100), 2, 0), 0);
        assert_eq!(keep(&frame(false, 0, 40000, 5201, 12, 100), 2, 0), 0);
        assert_eq!(keep(&frame(false, 0, 5201, 40000, 12, 100), 2, 0), 0);
        let mut udp = frame(false, 0, 50000, 5201, 12, 100);
        udp[14 + 9] = 17;
        assert_eq!(keep(&udp, 2, 0), 0);
        // On loopback (index 1) the outgoing copy (type 4) is kept and the arriving one not.
        let f = frame(false, 0, 50000, 5201, 12, 100);
        assert_eq!(keep(&f, 1, 4), 20 + 32 + ROOM);
        assert_eq!(keep(&f, 1, 0), 0);
    }
}
