//! The handshake: the client's HELLO, repeated until its ACK, and the listener's HELLO answerer.

use std::collections::HashMap;
use std::os::fd::{AsFd, OwnedFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use socket2::SockRef;

use super::connection::RawConnection;
use super::iface::Iface;
use super::socket::{next_port, open_socket, recv_within};
use super::wire::{
    format_mac, handshake_frame, read_handshake, Header, ACK, ETHERTYPE, HEADER, HELLO,
};
use crate::sys::packet;
use crate::transport::{remaining, sockopt, Cookie, SocketOptions};

/// How often a HELLO is repeated until the ACK arrives.
const HELLO_EVERY: Duration = Duration::from_millis(100);

/// The client's side: from a port of its own, a HELLO with the test's cookie to the
/// listener's port every [`HELLO_EVERY`] until the server's MAC answers with the ACK.
pub(super) fn connect(
    iface: Iface,
    server_mac: [u8; 6],
    listener_port: u16,
    server_mtu: usize,
    opts: &SocketOptions,
    cookie: &Cookie,
    timeout: Duration,
) -> Result<RawConnection> {
    let mut port = next_port()?;
    if port == listener_port {
        port = port.wrapping_add(1).max(1);
    }
    let fd = open_socket(&iface, port)?;
    sockopt::apply(&SockRef::from(&fd), opts, false)?;
    let hello = handshake_frame(HELLO, listener_port, port, cookie, iface.mtu);
    let mut buf = vec![0u8; iface.mtu.max(HEADER + 64)];
    let deadline = Instant::now() + timeout;
    loop {
        let Some(left) = remaining(deadline) else {
            bail!(
                "no answer from the raw endpoint {} on {} within {} (is the server on the same Ethernet segment?)",
                format_mac(server_mac),
                iface.name,
                crate::units::format_seconds(timeout.as_secs_f64())
            );
        };
        packet::send_to(fd.as_fd(), &hello, iface.index, ETHERTYPE, server_mac)
            .with_context(|| format!("sending a raw HELLO on {}", iface.name))?;
        let until = Instant::now() + left.min(HELLO_EVERY);
        while let Some(wait) = remaining(until) {
            let Some((n, from)) = recv_within(&fd, &mut buf, wait)? else {
                break;
            };
            let Some((h, got, mtu)) = read_handshake(&buf[..n]) else {
                continue;
            };
            if h.kind == ACK && from == server_mac && got == cookie.0 {
                let frame_mtu = iface.mtu.min(server_mtu).min(mtu);
                return Ok(RawConnection::new(
                    iface, fd, server_mac, h.src_port, port, frame_mtu,
                ));
            }
        }
    }
}

/// A HELLO from a client not answered yet: its header, MAC and MTU.
pub(super) type Hello = (Header, [u8; 6], [u8; 16], usize);

/// Clients already answered, (MAC, port), and the port of their connection.
pub(super) type Accepted = Mutex<HashMap<([u8; 6], u16), u16>>;

/// Reads the listener's socket for as long as the listener lives: new HELLOs go to
/// `accept`, and a HELLO repeated because its ACK was lost gets the same ACK again, even after
/// the test has started (nobody calls accept then). Only HELLOs from `peer_mac`, the control
/// peer's own link-layer address, are answered: see [`peer_mac`](super::iface::peer_mac).
pub(super) fn answer_hellos(
    fd: &OwnedFd,
    ifindex: u32,
    mtu: usize,
    peer_mac: [u8; 6],
    accepted: &Accepted,
    stop: &AtomicBool,
    hellos: &mpsc::SyncSender<Hello>,
) {
    let mut buf = vec![0u8; mtu];
    while !stop.load(Ordering::Relaxed) {
        let Ok(Some((n, from))) = recv_within(fd, &mut buf, HELLO_EVERY) else {
            continue;
        };
        let Some((h, cookie, client_mtu)) = read_handshake(&buf[..n]) else {
            continue;
        };
        if h.kind != HELLO || from != peer_mac {
            continue;
        }
        let known = accepted
            .lock()
            .ok()
            .and_then(|a| a.get(&(from, h.src_port)).copied());
        match known {
            Some(conn_port) => {
                let ack = handshake_frame(ACK, h.src_port, conn_port, &Cookie(cookie), mtu);
                let _ = packet::send_to(fd.as_fd(), &ack, ifindex, ETHERTYPE, from);
            }
            None => match hellos.try_send((h, from, cookie, client_mtu)) {
                Ok(()) | Err(mpsc::TrySendError::Full(_)) => {}
                Err(mpsc::TrySendError::Disconnected(_)) => return,
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use std::net::IpAddr;

    use super::super::wire::parse_endpoint;
    use super::super::Raw;
    use super::*;
    use crate::transport::{Transport, TransportConfig};

    /// Needs sockets on loopback: the loopback tier (see README, Tests).
    mod loopback_a_hello_from_another_mac_than_the_contro {
        use super::*;

        /// Reflection, on loopback as root: the same HELLO, cookie and all, is ignored from a
        /// forged source MAC and admitted from the control peer's (loopback's, all zeros).
        #[test]
        fn a_hello_from_another_mac_than_the_control_peers_is_ignored() {
            // Packet sockets need root.
            if !crate::test_support::require_root() {
                return;
            }
            let local: IpAddr = std::net::Ipv4Addr::LOCALHOST.into();
            let mut listener = Raw::new(&TransportConfig::default())
                .listen(local, local)
                .unwrap();
            let (mac, port, _) = parse_endpoint(&listener.endpoint()).unwrap();
            assert_eq!(mac, [0; 6], "loopback's MAC");
            let cookie = Cookie([8; 16]);
            let sender = packet::open("lo", 1 << 20).unwrap();
            let send_from = |src: [u8; 6], client_port: u16| {
                let mut frame = vec![0u8; packet::VNET_HDR_LEN];
                frame.extend_from_slice(&mac);
                frame.extend_from_slice(&src);
                frame.extend_from_slice(&ETHERTYPE.to_be_bytes());
                frame.extend_from_slice(&handshake_frame(HELLO, port, client_port, &cookie, 1500));
                packet::send(sender.as_fd(), &frame).unwrap();
            };
            for _ in 0..5 {
                send_from([2, 0, 0, 0, 0, 0x66], 4001);
            }
            let got = listener
                .accept(&cookie, Duration::from_millis(800))
                .unwrap();
            assert!(got.is_none(), "a HELLO from a forged MAC was admitted");
            send_from([0; 6], 4002);
            let got = listener.accept(&cookie, crate::test_support::HUNG).unwrap();
            assert!(got.is_some(), "the control peer's HELLO was not admitted");
        }
    }
}
