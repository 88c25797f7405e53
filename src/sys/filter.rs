//! Classic BPF socket filters (SO_ATTACH_FILTER): the kernel drops what a socket must not
//! see before any user-space code reads it.

use std::io;
use std::net::IpAddr;
use std::os::fd::{AsRawFd, BorrowedFd};

/// Attaches a classic BPF program to a socket.
pub(super) fn attach(fd: BorrowedFd<'_>, code: &[libc::sock_filter]) -> io::Result<()> {
    let prog = libc::sock_fprog {
        len: code.len() as u16,
        filter: code.as_ptr() as *mut libc::sock_filter,
    };
    // SAFETY: `prog` points at `code`, which the caller keeps alive for the whole call; the
    // kernel copies the program and keeps no pointer to it.
    let rc = unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_ATTACH_FILTER,
            (&prog as *const libc::sock_fprog).cast(),
            std::mem::size_of::<libc::sock_fprog>() as libc::socklen_t,
        )
    };
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

/// The program of [`only_from`]: accepts an IPv4 packet whose source is `v4`, or an IPv6 packet
/// whose source is `v6`, and drops everything else. Loads are relative to the network header
/// (SKF_NET_OFF), which a UDP socket's filter can reach though its data starts at the UDP
/// header.
fn only_from_program(v4: Option<u32>, v6: [u8; 16]) -> Vec<libc::sock_filter> {
    let net = |offset: u32| (libc::SKF_NET_OFF as u32).wrapping_add(offset);
    let op = |code: u32, jt: u8, jf: u8, k: u32| libc::sock_filter {
        code: code as u16,
        jt,
        jf,
        k,
    };
    let ld_b = libc::BPF_LD | libc::BPF_B | libc::BPF_ABS;
    let ld_w = libc::BPF_LD | libc::BPF_W | libc::BPF_ABS;
    let jeq = libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K;
    let w = |i: usize| u32::from_be_bytes([v6[i], v6[i + 1], v6[i + 2], v6[i + 3]]);
    // Instruction 13 accepts, 14 drops; a jump's offset counts from the next instruction.
    const ACCEPT: u8 = 13;
    const DROP: u8 = 14;
    let to = |target: u8, from: u8| target - from - 1;
    // An IPv6 peer never sends IPv4 packets: the IPv4 branch then drops whatever it compares.
    let (v4_value, v4_match) = match v4 {
        Some(a) => (a, to(ACCEPT, 4)),
        None => (0, to(DROP, 4)),
    };
    vec![
        op(ld_b, 0, 0, net(0)), // 0: A = version byte
        op(libc::BPF_ALU | libc::BPF_AND | libc::BPF_K, 0, 0, 0xf0), // 1: A &= 0xf0
        op(jeq, 0, 2, 0x40),    // 2: IPv4? 3 : 5
        op(ld_w, 0, 0, net(12)), // 3: A = IPv4 source
        op(jeq, v4_match, to(DROP, 4), v4_value), // 4
        op(ld_w, 0, 0, net(8)), // 5: IPv6 source, word 0
        op(jeq, 0, to(DROP, 6), w(0)), // 6
        op(ld_w, 0, 0, net(12)), // 7: word 1
        op(jeq, 0, to(DROP, 8), w(4)), // 8
        op(ld_w, 0, 0, net(16)), // 9: word 2
        op(jeq, 0, to(DROP, 10), w(8)), // 10
        op(ld_w, 0, 0, net(20)), // 11: word 3
        op(jeq, to(ACCEPT, 12), to(DROP, 12), w(12)), // 12
        op(libc::BPF_RET | libc::BPF_K, 0, 0, u32::MAX), // 13: accept
        op(libc::BPF_RET | libc::BPF_K, 0, 0, 0), // 14: drop
    ]
}

/// Lets a socket receive only packets whose source address is `peer` (an IPv4 peer in either
/// form: a dual-stack socket sees its packets as IPv4). Attached before the socket is bound,
/// no datagram from anyone else is ever queued on it.
pub fn only_from(fd: BorrowedFd<'_>, peer: IpAddr) -> io::Result<()> {
    let (v4, v6) = match peer.to_canonical() {
        IpAddr::V4(a) => (Some(u32::from(a)), a.to_ipv6_mapped().octets()),
        IpAddr::V6(a) => (None, a.octets()),
    };
    attach(fd, &only_from_program(v4, v6))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::UdpSocket;
    use std::os::fd::AsFd;
    // Hang guards: a datagram on loopback arrives at once; what must not arrive is checked
    // without waiting (non-blocking), so no wait here is a window that a slow host could miss.
    use crate::test_support::HUNG;

    /// The jumps land where the comments say: every path ends in one of the two returns.
    #[test]
    fn every_jump_lands_on_an_instruction() {
        for v4 in [Some(0x7f00_0001), None] {
            let p = only_from_program(v4, [0; 16]);
            for (i, ins) in p.iter().enumerate() {
                if u32::from(ins.code) & 0x07 == libc::BPF_JMP {
                    assert!(i + 1 + usize::from(ins.jt) < p.len());
                    assert!(i + 1 + usize::from(ins.jf) < p.len());
                }
            }
            assert_eq!(p[13].k, u32::MAX);
            assert_eq!(p[14].k, 0);
        }
    }

    /// (Named `..._on_loopback` so that the unit tier, which runs without a network, leaves
    /// it out.) On loopback: a datagram from 127.0.0.1 arrives, one from 127.0.0.2 is dropped by the
    /// kernel (the socket never sees it, so nothing above can answer it).
    #[test]
    fn a_filtered_socket_receives_its_peer_alone_on_loopback() {
        let rx = UdpSocket::bind("127.0.0.1:0").unwrap();
        only_from(rx.as_fd(), "127.0.0.1".parse().unwrap()).unwrap();
        rx.set_read_timeout(Some(HUNG)).unwrap();
        let stranger = UdpSocket::bind("127.0.0.2:0").unwrap();
        let peer = UdpSocket::bind("127.0.0.1:0").unwrap();
        let to = rx.local_addr().unwrap();
        stranger.send_to(b"stranger", to).unwrap();
        peer.send_to(b"peer", to).unwrap();
        let mut buf = [0u8; 16];
        let (n, from) = rx.recv_from(&mut buf).unwrap();
        assert_eq!(
            (&buf[..n], from),
            (&b"peer"[..], peer.local_addr().unwrap())
        );
        // The stranger's datagram was sent first: had it been queued, it would have come first.
        rx.set_nonblocking(true).unwrap();
        assert!(rx.recv_from(&mut buf).is_err());
    }

    /// A dual-stack socket with an IPv4 peer written as mapped IPv6 takes the peer's IPv4
    /// packets; an IPv6 peer's filter drops IPv4 packets.
    #[test]
    fn mapped_and_ipv6_peers_on_loopback() {
        let rx = UdpSocket::bind("[::]:0").unwrap();
        only_from(rx.as_fd(), "::ffff:127.0.0.1".parse().unwrap()).unwrap();
        rx.set_read_timeout(Some(HUNG)).unwrap();
        let port = rx.local_addr().unwrap().port();
        let peer = UdpSocket::bind("127.0.0.1:0").unwrap();
        peer.send_to(b"v4", ("127.0.0.1", port)).unwrap();
        let mut buf = [0u8; 16];
        let (n, _) = rx.recv_from(&mut buf).unwrap();
        assert_eq!(&buf[..n], b"v4");

        let v6only = UdpSocket::bind("[::]:0").unwrap();
        only_from(v6only.as_fd(), "::1".parse().unwrap()).unwrap();
        v6only.set_read_timeout(Some(HUNG)).unwrap();
        let port = v6only.local_addr().unwrap().port();
        peer.send_to(b"v4", ("127.0.0.1", port)).unwrap();
        let p6 = UdpSocket::bind("[::1]:0").unwrap();
        p6.send_to(b"v6", ("::1", port)).unwrap();
        let (n, _) = v6only.recv_from(&mut buf).unwrap();
        assert_eq!(&buf[..n], b"v6");
        v6only.set_nonblocking(true).unwrap();
        assert!(v6only.recv_from(&mut buf).is_err());
    }
}
