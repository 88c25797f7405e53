//! UDP: unreliable datagrams. Patterns add sequence numbers and account for loss.
//!
//! UDP has no connections, so one is made: the client sends HELLO(cookie, nonce) to the
//! listener port until an ACK names a fresh server socket (already connected to the client)
//! and then connects its own socket to it. A repeated HELLO (same address and nonce) gets the
//! same answer; the nonce keeps a client port that the kernel reuses for a later connection
//! from being answered with an old, closed data port. Both data sockets are connected, so
//! stray handshake datagrams never reach a test's data path.

use std::collections::HashMap;
use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, UdpSocket};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use socket2::{Domain, Protocol, SockRef, Socket, Type};

use super::{
    remaining, sockopt, Capabilities, Connection, Cookie, EffectiveOptions, Listener,
    SocketOptions, Transport,
};

const HELLO: &[u8; 4] = b"WBH1";
const ACK: &[u8; 4] = b"WBA1";
const HELLO_LEN: usize = 4 + 16 + 8;
const ACK_LEN: usize = 4 + 16 + 8 + 2;
/// How long the client waits for an ACK before sending HELLO again.
const HELLO_RETRY: Duration = Duration::from_millis(200);
/// IPv4's largest UDP payload (65535 - 20 IP - 8 UDP); IPv6 allows a little more, not used.
pub const MAX_DATAGRAM: u64 = 65_507;

pub struct Udp;

fn udp_socket(local: SocketAddr, opts: &SocketOptions) -> Result<UdpSocket> {
    let sock = Socket::new(Domain::for_address(local), Type::DGRAM, Some(Protocol::UDP))
        .context("creating UDP data socket")?;
    sockopt::apply(&SockRef::from(&sock), opts, false)?;
    sock.bind(&local.into())
        .with_context(|| format!("binding UDP data socket on {local}"))?;
    Ok(sock.into())
}

impl Transport for Udp {
    fn name(&self) -> &'static str {
        "udp"
    }
    fn capabilities(&self) -> Capabilities {
        Capabilities {
            reliable: false,
            message_boundaries: true,
            max_message: MAX_DATAGRAM,
            tcp_options: false,
            host_local: false,
            syscall_batching: true,
            rcvlowat: false,
        }
    }
    fn listen(&self, local: IpAddr) -> Result<Box<dyn Listener>> {
        let socket = udp_socket(SocketAddr::new(local, 0), &SocketOptions::default())?;
        Ok(Box::new(UdpListener {
            socket,
            local,
            opts: SocketOptions::default(),
            answered: HashMap::new(),
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
        let port: u16 = endpoint
            .parse()
            .with_context(|| format!("server announced a bad UDP data port '{endpoint}'"))?;
        let server = control.ip();
        let listener = SocketAddr::new(server, port);
        let any: IpAddr = match server {
            IpAddr::V4(_) => Ipv4Addr::UNSPECIFIED.into(),
            IpAddr::V6(_) => Ipv6Addr::UNSPECIFIED.into(),
        };
        let socket = udp_socket(SocketAddr::new(any, 0), opts)?;
        let mut hello = [0u8; HELLO_LEN];
        hello[..4].copy_from_slice(HELLO);
        hello[4..20].copy_from_slice(&cookie.0);
        getrandom::fill(&mut hello[20..28])
            .map_err(|e| anyhow::anyhow!("no randomness for a UDP handshake: {e}"))?;
        let deadline = Instant::now() + timeout;
        let mut buf = [0u8; 64];
        'retry: loop {
            if remaining(deadline).is_none() {
                bail!("timed out after {timeout:?} waiting for the UDP handshake with {listener}");
            }
            socket
                .send_to(&hello, listener)
                .with_context(|| format!("sending UDP hello to {listener}"))?;
            let wait_until = (Instant::now() + HELLO_RETRY).min(deadline);
            loop {
                let now = Instant::now();
                if now >= wait_until {
                    continue 'retry;
                }
                socket.set_read_timeout(Some(wait_until - now))?;
                match socket.recv_from(&mut buf) {
                    Ok((n, from))
                        if n == ACK_LEN
                            && from.ip() == server
                            && &buf[..4] == ACK
                            && buf[4..28] == hello[4..28] =>
                    {
                        let data_port = u16::from_be_bytes([buf[28], buf[29]]);
                        socket.connect(SocketAddr::new(server, data_port))?;
                        socket.set_read_timeout(None)?;
                        return Ok(Box::new(UdpConnection { socket }));
                    }
                    Ok(_) => continue, // someone else's datagram: ignore
                    Err(e)
                        if matches!(
                            e.kind(),
                            io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                        ) =>
                    {
                        continue 'retry
                    }
                    // ICMP port unreachable from an earlier hello surfaces here.
                    Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => {
                        bail!("UDP data port {listener} refused the handshake")
                    }
                    Err(e) => return Err(e).context("waiting for the UDP handshake"),
                }
            }
        }
    }
}

struct UdpListener {
    socket: UdpSocket,
    local: IpAddr,
    opts: SocketOptions,
    /// Handshakes already answered (client address, nonce), so that a repeated HELLO gets
    /// the same data port.
    answered: HashMap<(SocketAddr, [u8; 8]), u16>,
}

impl UdpListener {
    fn send_ack(
        &self,
        to: SocketAddr,
        cookie: &Cookie,
        nonce: [u8; 8],
        port: u16,
    ) -> io::Result<()> {
        let mut ack = [0u8; ACK_LEN];
        ack[..4].copy_from_slice(ACK);
        ack[4..20].copy_from_slice(&cookie.0);
        ack[20..28].copy_from_slice(&nonce);
        ack[28..].copy_from_slice(&port.to_be_bytes());
        self.socket.send_to(&ack, to).map(|_| ())
    }
}

impl Listener for UdpListener {
    fn endpoint(&self) -> String {
        self.socket
            .local_addr()
            .map(|a| a.port().to_string())
            .unwrap_or_default()
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
        let mut buf = [0u8; 64];
        loop {
            let Some(left) = remaining(deadline) else {
                return Ok(None);
            };
            self.socket.set_read_timeout(Some(left))?;
            let (n, from) = match self.socket.recv_from(&mut buf) {
                Ok(r) => r,
                Err(e)
                    if matches!(
                        e.kind(),
                        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                    ) =>
                {
                    return Ok(None)
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e).context("receiving a UDP data handshake"),
            };
            if n != HELLO_LEN || &buf[..4] != HELLO || buf[4..20] != cookie.0 {
                continue;
            }
            let mut nonce = [0u8; 8];
            nonce.copy_from_slice(&buf[20..28]);
            if let Some(&port) = self.answered.get(&(from, nonce)) {
                let _ = self.send_ack(from, cookie, nonce, port);
                continue;
            }
            let socket = udp_socket(SocketAddr::new(self.local, 0), &self.opts)?;
            socket.connect(from)?;
            let port = socket.local_addr()?.port();
            // Bounded memory for a long connect-per-transaction test: old clients never return.
            if self.answered.len() >= 4096 {
                self.answered.clear();
            }
            self.answered.insert((from, nonce), port);
            self.send_ack(from, cookie, nonce, port)?;
            return Ok(Some(Box::new(UdpConnection { socket })));
        }
    }
}

struct UdpConnection {
    socket: UdpSocket,
}

impl Connection for UdpConnection {
    #[inline]
    fn send(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.socket.send(buf)
    }
    #[inline]
    fn recv(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.socket.recv(buf)
    }
    fn set_read_timeout(&mut self, timeout: Option<Duration>) -> io::Result<()> {
        self.socket.set_read_timeout(timeout)
    }
    fn set_write_timeout(&mut self, timeout: Option<Duration>) -> io::Result<()> {
        self.socket.set_write_timeout(timeout)
    }
    fn set_nonblocking(&mut self, on: bool) -> io::Result<()> {
        self.socket.set_nonblocking(on)
    }
    fn shutdown_write(&mut self) -> io::Result<()> {
        Ok(())
    }
    fn socket_fd(&self) -> Option<std::os::fd::BorrowedFd<'_>> {
        Some(std::os::fd::AsFd::as_fd(&self.socket))
    }
    fn effective_options(&self, requested: &SocketOptions) -> EffectiveOptions {
        sockopt::read_back(&SockRef::from(&self.socket), requested, false)
    }
}
