//! raw: Ethernet frames on a packet socket with wirebench's own EtherType. No IP, no TCP: the
//! native link layer, as the Fore ATM API and HARP's AAL5 sockets were in the seed studies.
//!
//! A message larger than one frame is split into frames and reassembled. Like AAL5, nothing
//! is retransmitted: a message that misses a frame is dropped whole, and the patterns count
//! it lost (they number their messages). Every frame carries a sequence number, a message
//! number and its place in the message. The receive side counts frames by their sequence
//! numbers (received, lost, reordered, duplicated, dropped late) and the messages it could not
//! reassemble, and reports them through [`Connection::link_counters`].
//!
//! Flows are told apart by 16-bit ports in wirebench's own header (a BPF filter on each
//! socket lets only its own port's frames in). The handshake is a HELLO carrying the test's
//! cookie to the listener's port, answered by an ACK from the new connection's port.
//! Packet sockets need root (CAP_NET_RAW); the control connection stays TCP.

use std::collections::HashMap;
use std::io;
use std::net::{IpAddr, SocketAddr, UdpSocket};
use std::os::fd::{AsFd, OwnedFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use socket2::SockRef;

use super::{
    remaining, sockopt, Capabilities, Connection, Cookie, EffectiveOptions, LinkCounters, Listener,
    SocketOptions, Transport, TransportConfig,
};
use crate::stats::SeqTracker;
use crate::sys::{self, packet};

/// IEEE 802 "local experimental EtherType 1": free for a protocol of one's own.
pub const ETHERTYPE: u16 = 0x88B5;
/// Bytes of wirebench's header at the start of every frame's payload.
pub const HEADER: usize = 24;
const VERSION: u8 = 1;
const DATA: u8 = 0;
const HELLO: u8 = 1;
const ACK: u8 = 2;
/// Offset of the destination port in the header (the socket filter reads it).
const DST_PORT_AT: u32 = 2;
/// How often a HELLO is repeated until the ACK arrives.
const HELLO_EVERY: Duration = Duration::from_millis(100);
/// Receive buffer of every raw socket unless --rcvbuf asks for another, bytes.
const DEFAULT_RCVBUF: usize = 4 << 20;
/// The largest message: frames per message are counted in 16 bits.
const MAX_MESSAGE: u64 = 16 << 20;
/// Frame numbers the receive side remembers behind the highest one, to tell a duplicate from
/// a late original: far more frames than a socket buffer holds. 8 KiB per connection.
const SEQ_WINDOW: u64 = 1 << 16;

/// wirebench's header, big-endian on the wire:
/// version u8, kind u8, dst port u16, src port u16, frame seq u32, message u32,
/// fragment u16, fragments u16, message length u32, 2 bytes reserved.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Header {
    kind: u8,
    dst_port: u16,
    src_port: u16,
    seq: u32,
    message: u32,
    fragment: u16,
    fragments: u16,
    length: u32,
}

impl Header {
    fn write(&self, out: &mut [u8]) {
        out[0] = VERSION;
        out[1] = self.kind;
        out[2..4].copy_from_slice(&self.dst_port.to_be_bytes());
        out[4..6].copy_from_slice(&self.src_port.to_be_bytes());
        out[6..10].copy_from_slice(&self.seq.to_be_bytes());
        out[10..14].copy_from_slice(&self.message.to_be_bytes());
        out[14..16].copy_from_slice(&self.fragment.to_be_bytes());
        out[16..18].copy_from_slice(&self.fragments.to_be_bytes());
        out[18..22].copy_from_slice(&self.length.to_be_bytes());
        out[22..24].fill(0);
    }

    fn read(frame: &[u8]) -> Option<Header> {
        if frame.len() < HEADER || frame[0] != VERSION {
            return None;
        }
        let u16_at = |i: usize| u16::from_be_bytes([frame[i], frame[i + 1]]);
        let u32_at = |i: usize| u32::from_be_bytes(frame[i..i + 4].try_into().unwrap_or([0; 4]));
        Some(Header {
            kind: frame[1],
            dst_port: u16_at(2),
            src_port: u16_at(4),
            seq: u32_at(6),
            message: u32_at(10),
            fragment: u16_at(14),
            fragments: u16_at(16),
            length: u32_at(18),
        })
    }
}

fn format_mac(mac: [u8; 6]) -> String {
    mac.iter()
        .map(|b| format!("{b:02x}"))
        .collect::<Vec<_>>()
        .join(":")
}

fn parse_mac(s: &str) -> Option<[u8; 6]> {
    let parts: Vec<u8> = s
        .split(':')
        .map(|p| u8::from_str_radix(p, 16))
        .collect::<Result<_, _>>()
        .ok()?;
    parts.try_into().ok()
}

/// What the server announces: its MAC, the listener's port and the interface MTU.
fn parse_endpoint(endpoint: &str) -> Result<([u8; 6], u16, usize)> {
    let bad = || anyhow::anyhow!("server announced a bad raw endpoint '{endpoint}'");
    let mut it = endpoint.split('/');
    let mac = it.next().and_then(parse_mac).ok_or_else(bad)?;
    let port = it.next().and_then(|p| p.parse().ok()).ok_or_else(bad)?;
    let mtu = it.next().and_then(|p| p.parse().ok()).ok_or_else(bad)?;
    if it.next().is_some() || port == 0 {
        return Err(bad());
    }
    Ok((mac, port, mtu))
}

/// One interface as the raw transport uses it.
#[derive(Clone)]
struct Iface {
    name: String,
    index: u32,
    mac: [u8; 6],
    mtu: usize,
}

impl Iface {
    fn named(name: &str) -> Result<Iface> {
        let index = packet::ifindex(name).with_context(|| format!("no interface '{name}'"))?;
        // The link-layer entry of getifaddrs carries the MAC address, in this namespace.
        let mac = nix::ifaddrs::getifaddrs()
            .context("listing the interfaces")?
            .filter(|a| a.interface_name == name)
            .find_map(|a| a.address.as_ref()?.as_link_addr()?.addr())
            .with_context(|| format!("interface {name} has no Ethernet address"))?;
        let mtu = packet::interface_mtu(name)
            .with_context(|| format!("reading the MTU of interface {name}"))?;
        if mtu < HEADER + 64 {
            bail!("interface {name} has an MTU of {mtu} bytes: too small for raw frames");
        }
        Ok(Iface {
            name: name.to_owned(),
            index,
            mac,
            mtu,
        })
    }

    /// The interface that holds `addr`.
    fn holding(addr: IpAddr) -> Result<Iface> {
        let addrs = nix::ifaddrs::getifaddrs().context("listing the interfaces")?;
        for a in addrs {
            let ip = a.address.as_ref().and_then(|s| {
                s.as_sockaddr_in()
                    .map(|v4| IpAddr::V4(v4.ip()))
                    .or_else(|| s.as_sockaddr_in6().map(|v6| IpAddr::V6(v6.ip())))
            });
            if ip == Some(addr) {
                return Iface::named(&a.interface_name);
            }
        }
        bail!("no interface holds {addr}: give the raw transport one with --iface")
    }

    /// The interface given, or the one this host would use to reach `peer`.
    fn for_peer(config: &TransportConfig, peer: IpAddr) -> Result<Iface> {
        if let Some(name) = &config.iface {
            return Iface::named(name);
        }
        // connect() on a UDP socket only picks a route and a local address: nothing is sent.
        let any: SocketAddr = match peer {
            IpAddr::V4(_) => "0.0.0.0:0".parse()?,
            IpAddr::V6(_) => "[::]:0".parse()?,
        };
        let probe = UdpSocket::bind(any)?;
        probe.connect(SocketAddr::new(peer, 9))?;
        Iface::holding(probe.local_addr()?.ip())
    }
}

/// A packet socket of our EtherType that sees only frames for `port`.
fn open_socket(iface: &Iface, port: u16) -> Result<OwnedFd> {
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
fn next_port() -> Result<u16> {
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

/// HELLO and ACK payload: the cookie, then the sender's MTU.
fn handshake_frame(kind: u8, dst: u16, src: u16, cookie: &Cookie, mtu: usize) -> Vec<u8> {
    let mut f = vec![0u8; HEADER + 20];
    Header {
        kind,
        dst_port: dst,
        src_port: src,
        seq: 0,
        message: 0,
        fragment: 0,
        fragments: 1,
        length: 20,
    }
    .write(&mut f);
    f[HEADER..HEADER + 16].copy_from_slice(&cookie.0);
    f[HEADER + 16..].copy_from_slice(&(mtu as u32).to_be_bytes());
    f
}

/// Reads a HELLO or ACK: (header, cookie, sender MTU).
fn read_handshake(frame: &[u8]) -> Option<(Header, [u8; 16], usize)> {
    let h = Header::read(frame)?;
    if frame.len() < HEADER + 20 || !(h.kind == HELLO || h.kind == ACK) {
        return None;
    }
    let cookie: [u8; 16] = frame[HEADER..HEADER + 16].try_into().ok()?;
    let mtu = u32::from_be_bytes(frame[HEADER + 16..HEADER + 20].try_into().ok()?) as usize;
    Some((h, cookie, mtu))
}

/// Waits up to `left` for a frame; Ok(None) when none came.
fn recv_within(
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

pub struct Raw {
    config: TransportConfig,
}

impl Raw {
    pub fn new(config: &TransportConfig) -> Raw {
        Raw {
            config: config.clone(),
        }
    }
}

impl Transport for Raw {
    fn name(&self) -> &'static str {
        "raw"
    }
    fn capabilities(&self) -> Capabilities {
        Capabilities {
            reliable: false,
            message_boundaries: true,
            max_message: MAX_MESSAGE,
            tcp_options: false,
            host_local: false,
            syscall_batching: false,
            rcvlowat: false,
        }
    }
    fn listen(&self, local: IpAddr, peer: IpAddr) -> Result<Box<dyn Listener>> {
        let iface = match &self.config.iface {
            Some(name) => Iface::named(name)?,
            None => Iface::holding(local)?,
        };
        let peer_mac = peer_mac(&iface, peer)?;
        let port = next_port()?;
        let fd = Arc::new(open_socket(&iface, port)?);
        let accepted = Arc::new(Mutex::new(HashMap::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let (tx, hellos) = mpsc::sync_channel(HELLO_QUEUE);
        {
            let (fd, accepted, stop) = (Arc::clone(&fd), Arc::clone(&accepted), Arc::clone(&stop));
            let (index, mtu) = (iface.index, iface.mtu);
            thread::Builder::new()
                .name("wb-raw-hello".into())
                .spawn(move || answer_hellos(&fd, index, mtu, peer_mac, &accepted, &stop, &tx))
                .context("starting the raw handshake thread")?;
        }
        Ok(Box::new(RawListener {
            iface,
            port,
            opts: SocketOptions::default(),
            accepted,
            hellos,
            stop,
        }))
    }
    fn connect(
        &self,
        control: SocketAddr,
        endpoint: &str,
        opts: &SocketOptions,
        cookie: &Cookie,
        timeout: Duration,
    ) -> Result<Box<dyn Connection>> {
        let (server_mac, listener_port, server_mtu) = parse_endpoint(endpoint)?;
        let iface = Iface::for_peer(&self.config, control.ip())?;
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
                    "no answer from the raw endpoint {} on {} within {timeout:?} (is the server on the same Ethernet segment?)",
                    format_mac(server_mac),
                    iface.name
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
                    return Ok(Box::new(RawConnection::new(
                        iface, fd, server_mac, h.src_port, port, frame_mtu,
                    )));
                }
            }
        }
    }
}

/// A HELLO from a client not answered yet: its header, MAC and MTU.
type Hello = (Header, [u8; 6], [u8; 16], usize);

/// Clients already answered, (MAC, port), and the port of their connection.
type Accepted = Mutex<HashMap<([u8; 6], u16), u16>>;

struct RawListener {
    iface: Iface,
    port: u16,
    opts: SocketOptions,
    accepted: Arc<Accepted>,
    hellos: mpsc::Receiver<Hello>,
    stop: Arc<AtomicBool>,
}

impl Drop for RawListener {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// New HELLOs waiting for accept; further ones are dropped (their clients repeat them), so a
/// flood of HELLOs while nobody accepts costs no memory.
const HELLO_QUEUE: usize = 64;

/// The MAC address a raw test may send to: the one the control peer's IP address resolves to
/// on `iface`. A HELLO's source MAC proves nothing (any host on the segment can forge it);
/// the control peer proved its IP address with the control connection's TCP handshake, and
/// the kernel's neighbour table says which MAC that address has on this link. A peer that
/// is this host itself (loopback, or one of its addresses) sends from `iface`'s own MAC.
fn peer_mac(iface: &Iface, peer: IpAddr) -> Result<[u8; 6]> {
    let peer = peer.to_canonical();
    if peer.is_loopback() || host_holds(peer)? {
        return Ok(iface.mac);
    }
    let IpAddr::V4(v4) = peer else {
        bail!(
            "raw: the control peer {peer} is IPv6, whose link-layer address this server cannot look up; connect the control connection over IPv4"
        );
    };
    // thread-self: a lab's server thread has entered its host's network namespace, which
    // /proc/net (the process's first thread's) does not show.
    let table = std::fs::read_to_string("/proc/thread-self/net/arp")
        .context("reading /proc/thread-self/net/arp")?;
    arp_lookup(&table, v4, &iface.name).with_context(|| {
        format!(
            "raw: the control peer {peer} has no link-layer address on {} (raw frames go only to the MAC of the control peer's address, on the same Ethernet segment)",
            iface.name
        )
    })
}

/// Whether an interface of this host holds `addr`.
fn host_holds(addr: IpAddr) -> Result<bool> {
    Ok(nix::ifaddrs::getifaddrs()
        .context("listing the interfaces")?
        .filter_map(|a| {
            let s = a.address?;
            s.as_sockaddr_in()
                .map(|v4| IpAddr::V4(v4.ip()))
                .or_else(|| s.as_sockaddr_in6().map(|v6| IpAddr::V6(v6.ip())))
        })
        .any(|ip| ip == addr))
}

/// The MAC of `ip` on interface `dev` in the kernel's ARP table (/proc/net/arp's text): only
/// a complete entry (flag ATF_COM), never an incomplete or all-zero one.
fn arp_lookup(table: &str, ip: std::net::Ipv4Addr, dev: &str) -> Option<[u8; 6]> {
    const ATF_COM: u32 = 0x2;
    table.lines().skip(1).find_map(|line| {
        let f: Vec<&str> = line.split_whitespace().collect();
        if f.len() < 6 || f[0].parse().ok() != Some(ip) || f[5] != dev {
            return None;
        }
        let flags = u32::from_str_radix(f[2].trim_start_matches("0x"), 16).ok()?;
        let mac = parse_mac(f[3])?;
        (flags & ATF_COM != 0 && mac != [0; 6]).then_some(mac)
    })
}

/// Reads the listener's socket for as long as the listener lives: new HELLOs go to
/// `accept`, and a HELLO repeated because its ACK was lost gets the same ACK again, even after
/// the test has started (nobody calls accept then). Only HELLOs from `peer_mac`, the control
/// peer's own link-layer address, are answered: see [`peer_mac`].
fn answer_hellos(
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

impl Listener for RawListener {
    fn endpoint(&self) -> String {
        format!(
            "{}/{}/{}",
            format_mac(self.iface.mac),
            self.port,
            self.iface.mtu
        )
    }
    fn configure(&mut self, opts: &SocketOptions) -> Result<()> {
        self.opts = opts.clone();
        Ok(())
    }
    fn accept(
        &mut self,
        cookie: &Cookie,
        timeout: Duration,
    ) -> Result<Option<Box<dyn Connection>>> {
        let deadline = Instant::now() + timeout;
        loop {
            let Some(left) = remaining(deadline) else {
                return Ok(None);
            };
            let (h, from, got, client_mtu) = match self.hellos.recv_timeout(left) {
                Ok(hello) => hello,
                Err(mpsc::RecvTimeoutError::Timeout) => return Ok(None),
                Err(mpsc::RecvTimeoutError::Disconnected) => {
                    bail!("the raw handshake thread stopped")
                }
            };
            if got != cookie.0 {
                continue;
            }
            let already = self
                .accepted
                .lock()
                .map_err(|_| anyhow::anyhow!("raw handshake state poisoned"))?
                .contains_key(&(from, h.src_port));
            if already {
                continue; // a repeat that raced with our own ACK
            }
            let mut conn_port = next_port()?;
            while conn_port == self.port || conn_port == h.src_port {
                conn_port = conn_port.wrapping_add(1).max(1);
            }
            let iface = self.iface.clone();
            let fd = open_socket(&iface, conn_port)?;
            sockopt::apply(&SockRef::from(&fd), &self.opts, false)?;
            // Recorded before the ACK goes out, so a repeated HELLO finds it.
            self.accepted
                .lock()
                .map_err(|_| anyhow::anyhow!("raw handshake state poisoned"))?
                .insert((from, h.src_port), conn_port);
            let ack = handshake_frame(ACK, h.src_port, conn_port, cookie, iface.mtu);
            packet::send_to(fd.as_fd(), &ack, iface.index, ETHERTYPE, from)
                .context("answering a raw HELLO")?;
            let frame_mtu = iface.mtu.min(client_mtu.max(HEADER + 64));
            return Ok(Some(Box::new(RawConnection::new(
                iface, fd, from, h.src_port, conn_port, frame_mtu,
            ))));
        }
    }
}

/// A frame's 32-bit sequence number on a 64-bit line that does not wrap: the number nearest
/// `highest` (within 2^31 either side) whose low 32 bits are `seq`. Never below 0.
fn extend_seq(highest: Option<u64>, seq: u32) -> u64 {
    let Some(h) = highest else {
        return u64::from(seq);
    };
    let delta = seq.wrapping_sub(h as u32) as i32;
    h.saturating_add_signed(i64::from(delta))
}

/// The receive side's account of one connection's frames: O(1) per frame, no allocation
/// after construction.
struct FrameCounts {
    /// Sequence numbers counted from the sender's first, extended to 64 bits.
    seqs: SeqTracker,
    /// The sender's first sequence number.
    first: u32,
    late: u64,
    incomplete: u64,
}

impl FrameCounts {
    fn new(first: u32) -> FrameCounts {
        FrameCounts {
            seqs: SeqTracker::with_window(SEQ_WINDOW),
            first,
            late: 0,
            incomplete: 0,
        }
    }

    /// Accounts a frame's sequence number; false when that frame was here already.
    #[inline]
    fn observe(&mut self, seq: u32) -> bool {
        let n = extend_seq(self.seqs.highest(), seq.wrapping_sub(self.first));
        self.seqs.observe(n)
    }

    /// The counts so far; `reassembling`: a message still misses frames, and counts as
    /// incomplete (no frame of it will be read any more when the counters are read).
    fn counters(&self, reassembling: bool) -> LinkCounters {
        LinkCounters {
            received: self.seqs.unique,
            lost: self.seqs.missing(),
            loss_ratio: 0.0,
            reordered: self.seqs.reordered,
            duplicated: self.seqs.duplicated,
            late: self.late,
            messages_incomplete: self.incomplete + u64::from(reassembling),
        }
        .with_loss_ratio()
    }
}

/// Copies a one-frame message of `length` bytes into `buf`; the length handed out.
fn deliver_whole(body: &[u8], length: usize, buf: &mut [u8]) -> usize {
    let k = body.len().min(length).min(buf.len());
    buf[..k].copy_from_slice(&body[..k]);
    length.min(buf.len())
}

/// The message being reassembled.
struct Partial {
    message: u32,
    fragments: u16,
    got: u16,
    length: usize,
}

struct RawConnection {
    iface: Iface,
    fd: OwnedFd,
    peer_mac: [u8; 6],
    peer_port: u16,
    port: u16,
    /// Message bytes per frame: the smaller MTU of the two ends, less the header.
    payload: usize,
    next_seq: u32,
    next_message: u32,
    /// Send and receive frame buffers, one frame each, allocated once.
    tx: Vec<u8>,
    rx: Vec<u8>,
    partial: Option<Partial>,
    /// Scratch for the kernel's control messages, and the arrival stamp of the frame that
    /// completed the last message received.
    rx_control: [u64; 8],
    last_stamp: Option<Duration>,
    /// The newest message number seen: older frames arrive late (and are dropped unless
    /// they are a whole one-frame message).
    newest: Option<u32>,
    frames: FrameCounts,
}

impl RawConnection {
    fn new(
        iface: Iface,
        fd: OwnedFd,
        peer_mac: [u8; 6],
        peer_port: u16,
        port: u16,
        frame_mtu: usize,
    ) -> RawConnection {
        RawConnection {
            iface,
            fd,
            peer_mac,
            peer_port,
            port,
            payload: frame_mtu - HEADER,
            next_seq: 0,
            next_message: 0,
            tx: vec![0u8; frame_mtu],
            rx: vec![0u8; frame_mtu],
            partial: None,
            rx_control: [0; 8],
            last_stamp: None,
            newest: None,
            // send() numbers a connection's frames from 0.
            frames: FrameCounts::new(0),
        }
    }

    /// Takes one frame into `buf`; Some(length) when it completed a message.
    fn take_frame(&mut self, n: usize, from: [u8; 6], buf: &mut [u8]) -> Option<usize> {
        let h = Header::read(&self.rx[..n])?;
        if h.kind != DATA
            || h.dst_port != self.port
            || h.src_port != self.peer_port
            || from != self.peer_mac
            || h.fragments == 0
            || h.fragment >= h.fragments
        {
            return None;
        }
        // A duplicate adds nothing (and must not count twice towards its message).
        if !self.frames.observe(h.seq) {
            return None;
        }
        let body = &self.rx[HEADER..n];
        let length = h.length as usize;
        // A frame of a message older than the newest one seen came late. A one-frame message
        // is whole and is delivered, as a late UDP datagram is (the pattern counts it as
        // reordered), unless a reassembly in progress owns the buffer. A frame of a longer
        // message is dropped: its message was given up when a later one began (no reordering
        // across messages is repaired, as AAL5 would not either).
        if let Some(newest) = self.newest {
            if (h.message.wrapping_sub(newest) as i32) < 0 {
                if h.fragments == 1 && self.partial.is_none() {
                    return Some(deliver_whole(body, length, buf));
                }
                self.frames.late += 1;
                return None;
            }
        }
        self.newest = Some(h.message);
        if h.fragments == 1 {
            if self.partial.take().is_some() {
                self.frames.incomplete += 1;
            }
            return Some(deliver_whole(body, length, buf));
        }
        // A frame of another message ends the one in progress: it is lost whole.
        if self.partial.as_ref().is_none_or(|p| p.message != h.message) {
            if self.partial.is_some() {
                self.frames.incomplete += 1;
            }
            self.partial = Some(Partial {
                message: h.message,
                fragments: h.fragments,
                got: 0,
                length,
            });
        }
        let p = self.partial.as_mut()?;
        let at = usize::from(h.fragment) * self.payload;
        if at < buf.len() {
            let k = body.len().min(buf.len() - at);
            buf[at..at + k].copy_from_slice(&body[..k]);
        }
        p.got += 1;
        if p.got == p.fragments {
            let length = p.length;
            self.partial = None;
            return Some(length.min(buf.len()));
        }
        None
    }
}

impl Connection for RawConnection {
    fn send(&mut self, buf: &[u8]) -> io::Result<usize> {
        let fragments = buf.len().div_ceil(self.payload).max(1);
        let fragments = u16::try_from(fragments).map_err(|_| {
            io::Error::new(
                io::ErrorKind::InvalidInput,
                "message too large for the raw transport",
            )
        })?;
        let message = self.next_message;
        self.next_message = self.next_message.wrapping_add(1);
        for i in 0..fragments {
            let start = usize::from(i) * self.payload;
            let chunk = &buf[start.min(buf.len())..(start + self.payload).min(buf.len())];
            Header {
                kind: DATA,
                dst_port: self.peer_port,
                src_port: self.port,
                seq: self.next_seq,
                message,
                fragment: i,
                fragments,
                length: buf.len() as u32,
            }
            .write(&mut self.tx[..HEADER]);
            self.tx[HEADER..HEADER + chunk.len()].copy_from_slice(chunk);
            packet::send_to(
                self.fd.as_fd(),
                &self.tx[..HEADER + chunk.len()],
                self.iface.index,
                ETHERTYPE,
                self.peer_mac,
            )?;
            // Only a frame that left takes a number: a refused send is no gap on the link.
            self.next_seq = self.next_seq.wrapping_add(1);
        }
        Ok(buf.len())
    }

    fn recv(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        loop {
            let (n, from, stamp) =
                packet::recv_from_stamped(self.fd.as_fd(), &mut self.rx, &mut self.rx_control)?;
            if let Some(len) = self.take_frame(n, from, buf) {
                self.last_stamp = stamp;
                return Ok(len);
            }
        }
    }

    fn set_read_timeout(&mut self, timeout: Option<Duration>) -> io::Result<()> {
        SockRef::from(&self.fd).set_read_timeout(timeout)
    }
    fn set_write_timeout(&mut self, timeout: Option<Duration>) -> io::Result<()> {
        SockRef::from(&self.fd).set_write_timeout(timeout)
    }
    fn set_nonblocking(&mut self, on: bool) -> io::Result<()> {
        SockRef::from(&self.fd).set_nonblocking(on)
    }
    fn shutdown_write(&mut self) -> io::Result<()> {
        Ok(())
    }
    fn effective_options(&self, requested: &SocketOptions) -> EffectiveOptions {
        sockopt::read_back(&SockRef::from(&self.fd), requested, false)
    }
    fn arrival_stamp(&self) -> Option<Duration> {
        self.last_stamp
    }
    fn link_counters(&self) -> Option<LinkCounters> {
        Some(self.frames.counters(self.partial.is_some()))
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

    /// Reflection: the MAC a raw test may send to is the control peer's entry in the ARP table
    /// on the listener's interface, complete, and nothing else; a peer on this host is the
    /// interface's own MAC.
    #[test]
    fn the_peer_mac_is_the_complete_arp_entry_of_the_control_peer_on_the_interface() {
        let table = "IP address       HW type     Flags       HW address            Mask     Device
10.77.0.2        0x1         0x2         02:00:0a:4d:00:02     *        veth-a
10.77.0.3        0x1         0x0         00:00:00:00:00:00     *        veth-a
10.77.0.4        0x1         0x2         02:00:0a:4d:00:04     *        eth9
";
        let ip = |d| std::net::Ipv4Addr::new(10, 77, 0, d);
        assert_eq!(
            arp_lookup(table, ip(2), "veth-a"),
            Some([2, 0, 0x0a, 0x4d, 0, 2])
        );
        assert_eq!(arp_lookup(table, ip(3), "veth-a"), None, "incomplete entry");
        assert_eq!(arp_lookup(table, ip(4), "veth-a"), None, "other interface");
        assert_eq!(arp_lookup(table, ip(5), "veth-a"), None, "unknown address");
        let lo = Iface {
            name: "lo".into(),
            index: 1,
            mac: [0; 6],
            mtu: 65536,
        };
        let local: IpAddr = std::net::Ipv4Addr::LOCALHOST.into();
        assert_eq!(peer_mac(&lo, local).unwrap(), [0; 6]);
        let mapped: IpAddr = "::ffff:127.0.0.1".parse().unwrap();
        assert_eq!(peer_mac(&lo, mapped).unwrap(), [0; 6]);
        // A documentation address no host here holds and no neighbour has: refused.
        let far: IpAddr = "192.0.2.77".parse().unwrap();
        let e = peer_mac(&lo, far).unwrap_err();
        assert!(format!("{e:#}").contains("no link-layer address"), "{e:#}");
    }

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
            let got = listener.accept(&cookie, Duration::from_secs(10)).unwrap();
            assert!(got.is_some(), "the control peer's HELLO was not admitted");
        }
    }

    #[test]
    fn header_round_trips() {
        let h = Header {
            kind: DATA,
            dst_port: 0xBEEF,
            src_port: 7,
            seq: 0xDEAD_BEEF,
            message: 42,
            fragment: 3,
            fragments: 9,
            length: 123_456,
        };
        let mut b = [0u8; HEADER];
        h.write(&mut b);
        assert_eq!(Header::read(&b), Some(h));
        // The socket filter reads the destination port at this offset.
        assert_eq!(
            u16::from_be_bytes([b[DST_PORT_AT as usize], b[DST_PORT_AT as usize + 1]]),
            0xBEEF
        );
        b[0] = 99;
        assert_eq!(Header::read(&b), None, "another version is not ours");
        assert_eq!(Header::read(&b[..10]), None);
    }

    #[test]
    fn endpoints_parse_and_bad_ones_are_errors() {
        let (mac, port, mtu) = parse_endpoint("02:00:0a:4d:00:01/4242/1500").unwrap();
        assert_eq!(mac, [2, 0, 0x0a, 0x4d, 0, 1]);
        assert_eq!((port, mtu), (4242, 1500));
        for bad in [
            "",
            "02:00/1/1500",
            "02:00:0a:4d:00:01/0/1500",
            "x/1/2",
            "a/b/c/d",
        ] {
            assert!(parse_endpoint(bad).is_err(), "{bad}");
        }
        assert_eq!(format_mac(mac), "02:00:0a:4d:00:01");
    }

    #[test]
    fn frame_numbers_extend_across_the_wrap_of_32_bits() {
        assert_eq!(extend_seq(None, 5), 5);
        assert_eq!(extend_seq(Some(10), 12), 12);
        assert_eq!(extend_seq(Some(10), 7), 7);
        let top = u64::from(u32::MAX);
        assert_eq!(extend_seq(Some(top - 1), 2), top + 3, "past the wrap");
        assert_eq!(
            extend_seq(Some(top + 3), u32::MAX),
            top,
            "late, from before the wrap"
        );
        assert_eq!(
            extend_seq(Some(5 << 32), 1),
            (5 << 32) + 1,
            "the fifth wrap"
        );
        assert_eq!(extend_seq(Some(3), u32::MAX), 0, "never below 0");
    }

    /// Feeds frame numbers to counts that start at `first`; returns which were new.
    fn count(first: u32, seqs: &[u32]) -> (FrameCounts, Vec<bool>) {
        let mut c = FrameCounts::new(first);
        let fresh = seqs.iter().map(|&s| c.observe(s)).collect();
        (c, fresh)
    }

    #[test]
    fn frames_count_gaps_reordering_and_duplicates() {
        let (c, fresh) = count(0, &[0, 1, 3, 2, 2, 6, 4, 9]);
        assert_eq!(fresh, [true, true, true, true, false, true, true, true]);
        let k = c.counters(false);
        assert_eq!(k.received, 7);
        assert_eq!(k.lost, 3, "5, 7 and 8");
        assert_eq!(k.reordered, 2, "2 after 3, 4 after 6");
        assert_eq!(k.duplicated, 1);
        assert!((k.loss_ratio - 0.3).abs() < 1e-12);
        // Lost first frames are gaps too: the sender's numbers start at 0.
        let (c, _) = count(0, &[2, 3]);
        assert_eq!((c.counters(false).received, c.counters(false).lost), (2, 2));
        let (c, _) = count(0, &[]);
        assert_eq!(c.counters(false), LinkCounters::default());
        assert_eq!(c.counters(true).messages_incomplete, 1);
    }

    #[test]
    fn frames_count_across_the_wrap_of_their_numbers() {
        let first = u32::MAX - 2;
        let seqs = [first, u32::MAX - 1, 0, u32::MAX, 2, 2, 4];
        let (c, fresh) = count(first, &seqs);
        assert_eq!(fresh, [true, true, true, true, true, false, true]);
        let k = c.counters(false);
        // Offsets 0 1 3 2 5 5 7: 4 and 6 (1 and 3 on the wire) are missing.
        assert_eq!(
            (k.received, k.lost, k.reordered, k.duplicated),
            (6, 2, 1, 1)
        );
    }

    const PEER: [u8; 6] = [2, 0, 0, 0, 0, 7];
    const PAYLOAD: usize = 100;

    /// A connection whose receive path is fed by hand (its descriptor is never used), and
    /// the buffer messages are reassembled into.
    struct Fed {
        c: RawConnection,
        buf: Vec<u8>,
    }

    impl Fed {
        fn new() -> Fed {
            let fd: OwnedFd = std::fs::File::open("/dev/null").unwrap().into();
            let iface = Iface {
                name: "test".into(),
                index: 0,
                mac: [2, 0, 0, 0, 0, 9],
                mtu: HEADER + PAYLOAD,
            };
            Fed {
                c: RawConnection::new(iface, fd, PEER, 7, 9, HEADER + PAYLOAD),
                buf: vec![0; 8 * PAYLOAD],
            }
        }

        /// Hands over frame `fragment` of `fragments` of a message whose bytes are all
        /// `message as u8`; Some(length) when that completed the message.
        fn feed(&mut self, seq: u32, message: u32, fragment: u16, fragments: u16) -> Option<usize> {
            let length = usize::from(fragments) * PAYLOAD - 1;
            let body = (length - usize::from(fragment) * PAYLOAD).min(PAYLOAD);
            Header {
                kind: DATA,
                dst_port: 9,
                src_port: 7,
                seq,
                message,
                fragment,
                fragments,
                length: length as u32,
            }
            .write(&mut self.c.rx[..HEADER]);
            self.c.rx[HEADER..HEADER + body].fill(message as u8);
            let got = self.c.take_frame(HEADER + body, PEER, &mut self.buf);
            if let Some(n) = got {
                assert!(
                    self.buf[..n].iter().all(|&b| b == message as u8),
                    "message {message}"
                );
            }
            got
        }
    }

    #[test]
    fn reassembly_counts_incomplete_messages_and_late_frames() {
        let mut c = Fed::new();
        let whole = Some(3 * PAYLOAD - 1);
        // Message 0 whole; message 1 misses its middle frame (seq 4).
        assert_eq!(c.feed(0, 0, 0, 3), None);
        assert_eq!(c.feed(1, 0, 1, 3), None);
        assert_eq!(c.feed(2, 0, 2, 3), whole);
        assert_eq!(c.feed(3, 1, 0, 3), None);
        assert_eq!(c.feed(5, 1, 2, 3), None);
        // Message 2's first frame gives message 1 up; its frames in another order still do.
        assert_eq!(c.feed(7, 2, 1, 3), None);
        assert_eq!(c.feed(6, 2, 0, 3), None);
        // A duplicate is not taken for the missing frame.
        assert_eq!(c.feed(6, 2, 0, 3), None);
        assert_eq!(c.feed(8, 2, 2, 3), whole);
        // Message 4 (one frame) overtakes message 3 (one frame): 3 is whole and still
        // delivered, as a late datagram is.
        assert_eq!(c.feed(10, 4, 0, 1), Some(PAYLOAD - 1));
        assert_eq!(c.feed(9, 3, 0, 1), Some(PAYLOAD - 1));
        // Message 6 overtakes message 5 (two frames): 5's late frame is dropped.
        assert_eq!(c.feed(12, 6, 0, 1), Some(PAYLOAD - 1));
        assert_eq!(c.feed(11, 5, 0, 2), None);
        // Message 7 is cut off when the counters are read.
        assert_eq!(c.feed(13, 7, 0, 2), None);
        let k = c.c.link_counters().unwrap();
        assert_eq!(k.received, 13, "every frame but seq 4, once");
        assert_eq!(k.lost, 1);
        assert_eq!(k.reordered, 3, "seq 6 after 7, 9 after 10, 11 after 12");
        assert_eq!(k.duplicated, 1);
        assert_eq!(k.late, 1, "seq 11");
        assert_eq!(k.messages_incomplete, 2, "message 1, and 7 still waiting");
    }

    #[test]
    fn frames_of_other_connections_are_not_counted() {
        let mut fed = Fed::new();
        assert_eq!(fed.feed(0, 0, 0, 1), Some(PAYLOAD - 1));
        let c = &mut fed.c;
        Header {
            kind: DATA,
            dst_port: 9,
            src_port: 8, // another peer port
            seq: 1,
            message: 1,
            fragment: 0,
            fragments: 1,
            length: 10,
        }
        .write(&mut c.rx[..HEADER]);
        let mut buf = [0u8; PAYLOAD];
        assert_eq!(c.take_frame(HEADER + 10, PEER, &mut buf), None);
        let k = c.link_counters().unwrap();
        assert_eq!((k.received, k.lost), (1, 0));
    }
}
