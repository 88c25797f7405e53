//! UDP: unreliable datagrams. Patterns add sequence numbers and account for loss.
//!
//! UDP has no connections, so one is made: the client sends HELLO(cookie, nonce) to the
//! listener port until an ACK names a fresh server socket (already connected to the client)
//! and then connects its own socket to it. A repeated HELLO (same address and nonce) gets the
//! same answer, for as long as the listener lives (a thread reads the listener's socket, so
//! that a HELLO repeated because its ACK was lost is answered after the test has started too,
//! when nobody calls accept); the nonce keeps a client port that the kernel reuses for a later
//! connection from being answered with an old, closed data port. Both data sockets are connected, so
//! stray handshake datagrams never reach a test's data path.

use std::collections::HashMap;
use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use socket2::{Domain, Protocol, SockRef, Socket, Type};

use super::{
    remaining, same_ip, sockopt, Capabilities, Connection, Cookie, EffectiveOptions, Listener,
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
    fn listen(&self, local: IpAddr, peer: IpAddr) -> Result<Box<dyn Listener>> {
        let socket = Arc::new(udp_socket(
            SocketAddr::new(local, 0),
            &SocketOptions::default(),
        )?);
        socket.set_read_timeout(Some(HELLO_POLL))?;
        let answered = Arc::new(Mutex::new(HashMap::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let (tx, hellos) = mpsc::sync_channel(HELLO_QUEUE);
        let ignored = Arc::new(AtomicU64::new(0));
        {
            let (socket, answered, stop, ignored) = (
                Arc::clone(&socket),
                Arc::clone(&answered),
                Arc::clone(&stop),
                Arc::clone(&ignored),
            );
            std::thread::Builder::new()
                .name("wb-udp-hello".into())
                .spawn(move || answer_hellos(&socket, peer, &answered, &stop, &ignored, &tx))
                .context("starting the UDP handshake thread")?;
        }
        Ok(Box::new(UdpListener {
            socket,
            local,
            opts: SocketOptions::default(),
            answered,
            hellos,
            stop,
            ignored,
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
                bail!(
                    "timed out after {} waiting for the UDP handshake with {listener}",
                    crate::units::format_seconds(timeout.as_secs_f64())
                );
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
                        return Ok(Box::new(UdpConnection {
                            socket,
                            stamps: None,
                        }));
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

/// New HELLOs waiting for accept. A full queue drops further ones (their clients repeat
/// them), so that a flood of HELLOs while nobody accepts costs no memory.
const HELLO_QUEUE: usize = 64;

/// How often the handshake thread looks whether its listener is gone.
const HELLO_POLL: Duration = Duration::from_millis(100);

/// Handshakes already answered, (client address, nonce), with their cookie and data port.
type Answered = Mutex<HashMap<(SocketAddr, [u8; 8]), ([u8; 16], u16)>>;

/// A HELLO not answered yet: the client's address, cookie and nonce.
type Hello = (SocketAddr, [u8; 16], [u8; 8]);

struct UdpListener {
    socket: Arc<UdpSocket>,
    local: IpAddr,
    opts: SocketOptions,
    answered: Arc<Answered>,
    hellos: mpsc::Receiver<Hello>,
    stop: Arc<AtomicBool>,
    /// HELLOs ignored because they came from another address than the control peer.
    ignored: Arc<AtomicU64>,
}

impl Drop for UdpListener {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

fn send_ack(
    socket: &UdpSocket,
    to: SocketAddr,
    cookie: &[u8; 16],
    nonce: [u8; 8],
    port: u16,
) -> io::Result<()> {
    let mut ack = [0u8; ACK_LEN];
    ack[..4].copy_from_slice(ACK);
    ack[4..20].copy_from_slice(cookie);
    ack[20..28].copy_from_slice(&nonce);
    ack[28..].copy_from_slice(&port.to_be_bytes());
    socket.send_to(&ack, to).map(|_| ())
}

/// Reads the listener's socket for as long as the listener lives: new HELLOs go to `accept`,
/// and a HELLO repeated because its ACK was lost (2% of them over a lab link with 2% loss) gets
/// the same ACK again, even after the test has started. Before this thread a lost ACK left the
/// client repeating its HELLO to nobody until its timeout.
///
/// Only HELLOs from `peer`, the control connection's peer, count: a HELLO's source address is
/// not proof of anything (it can be forged), and the data socket is connected to it and sent
/// to. The control peer proved its address with the TCP handshake of the control connection,
/// so a forged HELLO can aim the test at no one but the client itself.
fn answer_hellos(
    socket: &UdpSocket,
    peer: IpAddr,
    answered: &Answered,
    stop: &AtomicBool,
    ignored: &AtomicU64,
    hellos: &mpsc::SyncSender<Hello>,
) {
    let mut buf = [0u8; 64];
    while !stop.load(Ordering::Relaxed) {
        let (n, from) = match socket.recv_from(&mut buf) {
            Ok(r) => r,
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock
                        | io::ErrorKind::TimedOut
                        | io::ErrorKind::Interrupted
                ) =>
            {
                continue
            }
            // Nothing else is expected of an unconnected socket; do not spin on it.
            Err(_) => {
                std::thread::sleep(HELLO_POLL);
                continue;
            }
        };
        if n != HELLO_LEN || &buf[..4] != HELLO {
            continue;
        }
        if !same_ip(from.ip(), peer) {
            ignored.fetch_add(1, Ordering::Relaxed);
            continue;
        }
        let (mut cookie, mut nonce) = ([0u8; 16], [0u8; 8]);
        cookie.copy_from_slice(&buf[4..20]);
        nonce.copy_from_slice(&buf[20..28]);
        let known = answered
            .lock()
            .ok()
            .and_then(|a| a.get(&(from, nonce)).copied());
        match known {
            Some((c, port)) if c == cookie => {
                let _ = send_ack(socket, from, &cookie, nonce, port);
            }
            Some(_) => {}
            None => match hellos.try_send((from, cookie, nonce)) {
                Ok(()) | Err(mpsc::TrySendError::Full(_)) => {}
                Err(mpsc::TrySendError::Disconnected(_)) => return,
            },
        }
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
    fn strangers(&self) -> u64 {
        self.ignored.load(Ordering::Relaxed)
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
            let (from, got, nonce) = match self.hellos.recv_timeout(left) {
                Ok(hello) => hello,
                Err(mpsc::RecvTimeoutError::Timeout) => return Ok(None),
                Err(mpsc::RecvTimeoutError::Disconnected) => {
                    bail!("the UDP handshake thread stopped")
                }
            };
            if got != cookie.0 {
                continue;
            }
            let mut answered = self
                .answered
                .lock()
                .map_err(|_| anyhow::anyhow!("UDP handshake state poisoned"))?;
            if answered.contains_key(&(from, nonce)) {
                continue; // a repeat that raced with our own ACK
            }
            let socket = udp_socket(SocketAddr::new(self.local, 0), &self.opts)?;
            socket.connect(from)?;
            let port = socket.local_addr()?.port();
            // Bounded memory for a long connect-per-transaction test: old clients never return.
            if answered.len() >= 4096 {
                answered.clear();
            }
            // Recorded before the ACK goes out, so that a repeated HELLO finds it.
            answered.insert((from, nonce), (cookie.0, port));
            drop(answered);
            send_ack(&self.socket, from, &cookie.0, nonce, port)?;
            return Ok(Some(Box::new(UdpConnection {
                socket,
                stamps: None,
            })));
        }
    }
}

struct UdpConnection {
    socket: UdpSocket,
    /// Path timing's state once `enable_stamps` was called.
    stamps: Option<Box<super::stamps::Stamps>>,
}

impl Connection for UdpConnection {
    #[inline]
    fn send(&mut self, buf: &[u8]) -> io::Result<usize> {
        match &self.stamps {
            Some(st) if st.flags() != 0 => st.send(std::os::fd::AsFd::as_fd(&self.socket), buf),
            _ => self.socket.send(buf),
        }
    }
    #[inline]
    fn recv(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match &mut self.stamps {
            Some(st) => st.recv(std::os::fd::AsFd::as_fd(&self.socket), buf),
            None => self.socket.recv(buf),
        }
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
    fn enable_stamps(&mut self) -> io::Result<bool> {
        self.stamps = Some(super::stamps::Stamps::enable(
            std::os::fd::AsFd::as_fd(&self.socket),
            true,
            false,
        )?);
        Ok(true)
    }
    fn stamp_sends(&mut self, on: bool) {
        if let Some(st) = &mut self.stamps {
            st.set(on);
        }
    }
    fn rx_stamp(&self) -> Option<i64> {
        self.stamps.as_ref().and_then(|st| st.last_rx)
    }
    fn drain_tx_stamps(&mut self, out: &mut [super::TxStamp]) -> io::Result<(usize, u64)> {
        if self.stamps.is_none() {
            return Ok((0, 0));
        }
        super::stamps::drain(std::os::fd::AsFd::as_fd(&self.socket), out)
    }
}

#[cfg(test)]
mod loopback_tests {
    use super::*;

    /// A client whose first ACK is lost repeats its HELLO after the server's accept has
    /// returned (the test has begun): the listener still answers, with the same data port.
    #[test]
    fn a_hello_repeated_after_accept_gets_the_same_ack() {
        let local: IpAddr = Ipv4Addr::LOCALHOST.into();
        let mut listener = Udp.listen(local, local).unwrap();
        let to = SocketAddr::new(local, listener.endpoint().parse().unwrap());
        let cookie = Cookie([7; 16]);
        let client = UdpSocket::bind(SocketAddr::new(local, 0)).unwrap();
        // Hang guards: the ACKs come at once (the negative check below has its own 300 ms).
        client
            .set_read_timeout(Some(crate::test_support::HUNG))
            .unwrap();
        let mut hello = [0u8; HELLO_LEN];
        hello[..4].copy_from_slice(HELLO);
        hello[4..20].copy_from_slice(&cookie.0);
        hello[20..28].copy_from_slice(&[1, 2, 3, 4, 5, 6, 7, 8]);
        client.send_to(&hello, to).unwrap();
        let _conn = listener
            .accept(&cookie, crate::test_support::HUNG)
            .unwrap()
            .expect("a connection");
        let mut first = [0u8; 64];
        let (n, _) = client.recv_from(&mut first).unwrap();
        assert_eq!(n, ACK_LEN);
        // That ACK "was lost": the client asks again, and nobody calls accept any more.
        client.send_to(&hello, to).unwrap();
        let mut again = [0u8; 64];
        let (m, _) = client.recv_from(&mut again).unwrap();
        assert_eq!(first[..n], again[..m]);
        // A HELLO with the same address and nonce but another cookie is not answered.
        hello[4..20].copy_from_slice(&[9; 16]);
        client.send_to(&hello, to).unwrap();
        client
            .set_read_timeout(Some(Duration::from_millis(300)))
            .unwrap();
        assert!(client.recv_from(&mut again).is_err());
    }

    /// Reflection: a HELLO with the right cookie from another address than the control peer
    /// (here 127.0.0.2, standing for a forged source) gets no ACK and no data socket, and is
    /// counted; the same HELLO from the control peer is admitted.
    #[test]
    fn a_hello_from_another_address_than_the_control_peer_is_ignored() {
        let local: IpAddr = Ipv4Addr::LOCALHOST.into();
        let mut listener = Udp.listen(local, local).unwrap();
        let to = SocketAddr::new(local, listener.endpoint().parse().unwrap());
        let cookie = Cookie([5; 16]);
        let mut hello = [0u8; HELLO_LEN];
        hello[..4].copy_from_slice(HELLO);
        hello[4..20].copy_from_slice(&cookie.0);
        let stranger = UdpSocket::bind("127.0.0.2:0").unwrap();
        stranger
            .set_read_timeout(Some(Duration::from_millis(500)))
            .unwrap();
        stranger.send_to(&hello, to).unwrap();
        let got = listener
            .accept(&cookie, Duration::from_millis(800))
            .unwrap();
        assert!(got.is_none(), "a stranger's HELLO was admitted");
        let mut buf = [0u8; 64];
        assert!(
            stranger.recv_from(&mut buf).is_err(),
            "a stranger got an ACK"
        );
        // Counted by the listener's handshake thread, in its own time: waited for.
        assert!(
            crate::test_support::wait_until(crate::test_support::HUNG, || listener.strangers()
                == 1),
            "{} strangers counted",
            listener.strangers()
        );

        let client = UdpSocket::bind(SocketAddr::new(local, 0)).unwrap();
        client.send_to(&hello, to).unwrap();
        let conn = listener.accept(&cookie, crate::test_support::HUNG).unwrap();
        assert!(conn.is_some(), "the control peer's HELLO was not admitted");
    }
}
