//! What TCP and Unix stream sockets share: a connection that moves bytes with read and write,
//! and a listener loop that admits only connections opening with the test's cookie.

use std::io::{self, Read, Write};
use std::net::{Shutdown, TcpStream};
use std::os::fd::{AsFd, BorrowedFd};
use std::os::unix::net::UnixStream;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use socket2::SockRef;

use super::{remaining, sockopt, Connection, Cookie, EffectiveOptions, SocketOptions};
use crate::model::socket::TcpInfo;
use crate::sys;

/// How long a new data connection may take to present its cookie.
const COOKIE_WAIT: Duration = Duration::from_secs(5);

/// The socket calls std gives TcpStream and UnixStream under the same names.
pub(crate) trait StreamSocket: Read + Write + AsFd + Send + 'static {
    fn read_timeout(&self, t: Option<Duration>) -> io::Result<()>;
    fn write_timeout(&self, t: Option<Duration>) -> io::Result<()>;
    fn nonblocking(&self, on: bool) -> io::Result<()>;
    fn shutdown_write(&self) -> io::Result<()>;
}

macro_rules! stream_socket {
    ($t:ty) => {
        impl StreamSocket for $t {
            fn read_timeout(&self, t: Option<Duration>) -> io::Result<()> {
                self.set_read_timeout(t)
            }
            fn write_timeout(&self, t: Option<Duration>) -> io::Result<()> {
                self.set_write_timeout(t)
            }
            fn nonblocking(&self, on: bool) -> io::Result<()> {
                self.set_nonblocking(on)
            }
            fn shutdown_write(&self) -> io::Result<()> {
                self.shutdown(Shutdown::Write)
            }
        }
    };
}
stream_socket!(TcpStream);
stream_socket!(UnixStream);

/// A connected byte stream; `tcp` says whether TCP options and TCP_INFO apply.
pub(crate) struct ByteStream<S> {
    pub stream: S,
    pub tcp: bool,
    /// Path timing's state once `enable_stamps` was called (TCP only).
    pub stamps: Option<Box<super::stamps::Stamps>>,
}

impl<S> ByteStream<S> {
    pub fn new(stream: S, tcp: bool) -> ByteStream<S> {
        ByteStream {
            stream,
            tcp,
            stamps: None,
        }
    }
}

impl<S: StreamSocket> Connection for ByteStream<S> {
    #[inline]
    fn send(&mut self, buf: &[u8]) -> io::Result<usize> {
        match &self.stamps {
            Some(st) if st.flags() != 0 => st.send(self.stream.as_fd(), buf),
            _ => self.stream.write(buf),
        }
    }
    #[inline]
    fn recv(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match &mut self.stamps {
            Some(st) => st.recv(self.stream.as_fd(), buf),
            None => self.stream.read(buf),
        }
    }
    fn set_read_timeout(&mut self, timeout: Option<Duration>) -> io::Result<()> {
        self.stream.read_timeout(timeout)
    }
    fn set_write_timeout(&mut self, timeout: Option<Duration>) -> io::Result<()> {
        self.stream.write_timeout(timeout)
    }
    fn set_nonblocking(&mut self, on: bool) -> io::Result<()> {
        self.stream.nonblocking(on)
    }
    fn shutdown_write(&mut self) -> io::Result<()> {
        self.stream.shutdown_write()
    }
    fn socket_fd(&self) -> Option<BorrowedFd<'_>> {
        Some(self.stream.as_fd())
    }
    fn effective_options(&self, requested: &SocketOptions) -> EffectiveOptions {
        sockopt::read_back(&SockRef::from(&self.stream), requested, self.tcp)
    }
    fn enable_stamps(&mut self) -> io::Result<bool> {
        if !self.tcp {
            return Ok(false);
        }
        self.stamps = Some(super::stamps::Stamps::enable(
            self.stream.as_fd(),
            true,
            true,
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
        super::stamps::drain(self.stream.as_fd(), out)
    }
    fn tcp_info(&self) -> Option<TcpInfo> {
        if self.tcp {
            sockopt::tcp_info(self.stream.as_fd())
        } else {
            None
        }
    }
}

/// Client side: presents the test's cookie as the connection's first bytes.
pub(crate) fn present_cookie<S: StreamSocket>(
    stream: &mut S,
    cookie: &Cookie,
    timeout: Duration,
) -> Result<()> {
    stream.write_timeout(Some(timeout))?;
    stream
        .write_all(&cookie.0)
        .context("sending the test cookie")
}

/// How many connections that have not presented their cookie yet one listener holds at once.
/// Beyond it the oldest is dropped: a crowd of silent connections (data-port squatting) costs
/// the test nothing, and its holder a bounded number of descriptors.
const MAX_PENDING: usize = 64;

/// A data connection accepted but not admitted: the cookie bytes it has sent so far.
struct Pending<S> {
    stream: S,
    got: [u8; 16],
    have: usize,
    since: Instant,
}

/// What reading a pending connection's cookie came to.
enum Cookied {
    NotYet,
    Matches,
    /// Wrong bytes, end of stream or an error: the connection is dropped.
    Refused,
}

impl<S: StreamSocket> Pending<S> {
    /// Reads whatever of the cookie has arrived, never more than the cookie (the bytes after
    /// it are the test's data), without blocking.
    fn read_cookie(&mut self, cookie: &Cookie) -> Cookied {
        loop {
            match self.stream.read(&mut self.got[self.have..]) {
                Ok(0) => return Cookied::Refused,
                Ok(n) => {
                    self.have += n;
                    if self.have == self.got.len() {
                        return if self.got == cookie.0 {
                            Cookied::Matches
                        } else {
                            Cookied::Refused
                        };
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Cookied::NotYet,
                Err(_) => return Cookied::Refused,
            }
        }
    }
}

/// Server side of a byte-stream listener: admits only connections whose first bytes are the
/// test's cookie. It waits for the cookies of many pending connections at once (one poll over
/// all of them), so a connection that says nothing delays no other; the pending ones are kept
/// from one accept to the next, since a test's connections may arrive together.
pub(crate) struct CookieGate<S> {
    pending: Vec<Pending<S>>,
}

impl<S: StreamSocket> CookieGate<S> {
    pub fn new() -> CookieGate<S> {
        CookieGate {
            pending: Vec::new(),
        }
    }

    /// Waits up to `timeout` on the non-blocking `listener` for a connection that presents
    /// `cookie`, dropping any that does not; applies `opts` to the one admitted. `accept`
    /// takes one pending connection: Ok(Some) to examine, Ok(None) for one refused on sight
    /// (a stranger's address), WouldBlock when there is none. `what` names it in errors.
    #[allow(clippy::too_many_arguments)]
    pub fn accept(
        &mut self,
        listener: BorrowedFd<'_>,
        mut accept: impl FnMut() -> io::Result<Option<S>>,
        cookie: &Cookie,
        timeout: Duration,
        opts: &SocketOptions,
        tcp: bool,
        what: &str,
    ) -> Result<Option<Box<dyn Connection>>> {
        let deadline = Instant::now() + timeout;
        loop {
            let now = Instant::now();
            // A peer that connects and says nothing must not hold a place for long.
            self.pending
                .retain(|p| now.duration_since(p.since) < COOKIE_WAIT);
            let Some(left) = remaining(deadline) else {
                return Ok(None);
            };
            let wait = self
                .pending
                .iter()
                .map(|p| (p.since + COOKIE_WAIT).saturating_duration_since(now))
                .fold(left, Duration::min)
                .max(Duration::from_millis(1));
            let mut ready = {
                let mut fds = Vec::with_capacity(self.pending.len() + 1);
                fds.push(listener);
                fds.extend(self.pending.iter().map(|p| p.stream.as_fd()));
                sys::wait_any_readable(&fds, wait)?
            };
            // Cookies first, oldest first: the one that has presented it is admitted now.
            let mut i = 0;
            while i < self.pending.len() {
                if !ready[i + 1] {
                    i += 1;
                    continue;
                }
                match self.pending[i].read_cookie(cookie) {
                    Cookied::NotYet => i += 1,
                    Cookied::Refused => {
                        // Not ours: dropped; the shift keeps `ready` aligned with what is left.
                        self.pending.remove(i);
                        ready.remove(i + 1);
                    }
                    Cookied::Matches => {
                        let stream = self.pending.remove(i).stream;
                        stream.nonblocking(false)?;
                        stream.read_timeout(None)?;
                        sockopt::apply(&SockRef::from(&stream), opts, tcp)?;
                        return Ok(Some(Box::new(ByteStream::new(stream, tcp))));
                    }
                }
            }
            if ready[0] {
                self.take_new(&mut accept, what)?;
            }
        }
    }

    /// Accepts every connection waiting on the listener into `pending`.
    fn take_new(
        &mut self,
        accept: &mut impl FnMut() -> io::Result<Option<S>>,
        what: &str,
    ) -> Result<()> {
        // Bounded, so that a flood of connections cannot keep this loop from the cookies.
        for _ in 0..MAX_PENDING {
            let stream = match accept() {
                Ok(Some(s)) => s,
                Ok(None) => continue,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(()),
                // The peer gave up between SYN and accept: nothing to admit.
                Err(e) if e.kind() == io::ErrorKind::ConnectionAborted => continue,
                Err(e) => {
                    return Err(e).with_context(|| format!("accepting a {what} data connection"))
                }
            };
            if stream.nonblocking(true).is_err() {
                continue;
            }
            if self.pending.len() >= MAX_PENDING {
                self.pending.remove(0);
            }
            self.pending.push(Pending {
                stream,
                got: [0; 16],
                have: 0,
                since: Instant::now(),
            });
        }
        Ok(())
    }
}

#[cfg(test)]
mod loopback_tests {
    use std::net::{IpAddr, Ipv4Addr, SocketAddr, TcpStream};

    use super::*;
    use crate::transport::{TransportConfig, TransportKind};

    fn tcp_listener(peer: IpAddr) -> (Box<dyn crate::transport::Listener>, SocketAddr) {
        let local: IpAddr = Ipv4Addr::LOCALHOST.into();
        let tcp = TransportKind::Tcp
            .open(&TransportConfig::default())
            .unwrap();
        let listener = tcp.listen(local, peer).unwrap();
        let port = listener.endpoint().parse().unwrap();
        (listener, SocketAddr::new(local, port))
    }

    /// Whether the listener still holds `c` open and has sent nothing on it: still waiting.
    fn still_waiting(c: &TcpStream) -> bool {
        c.set_nonblocking(true).unwrap();
        let got = c.peek(&mut [0u8; 1]);
        c.set_nonblocking(false).unwrap();
        matches!(got, Err(e) if e.kind() == io::ErrorKind::WouldBlock)
    }

    /// Squatting: silent connections opened before the client's own delay nothing; the
    /// client's connection, presenting the cookie, is admitted while they still wait: every
    /// one of them is still open when accept returns it (the gate closes a squatter only once
    /// its COOKIE_WAIT has passed).
    #[test]
    fn silent_connections_before_the_clients_do_not_keep_it_out() {
        let local: IpAddr = Ipv4Addr::LOCALHOST.into();
        let hung = Duration::from_secs(60);
        for squatters in [2, 50] {
            // An attempt during which a host too loaded for one accept in COOKIE_WAIT let the
            // squatters expire tells nothing, and the next has fresh ones; a gate that waits
            // on them never gets through an attempt and fails once a minute has passed.
            let until = Instant::now() + hung;
            loop {
                let (mut listener, addr) = tcp_listener(local);
                let silent: Vec<TcpStream> = (0..squatters)
                    .map(|_| TcpStream::connect(addr).unwrap())
                    .collect();
                let cookie = Cookie([9; 16]);
                let mut client = TcpStream::connect(addr).unwrap();
                client.write_all(&cookie.0).unwrap();
                client.write_all(b"data").unwrap();
                let mut conn = listener
                    .accept(&cookie, hung)
                    .unwrap()
                    .expect("the client's connection was not admitted");
                let waiting = silent.iter().all(still_waiting);
                // The bytes after the cookie are the test's, untouched by the gate.
                let mut data = [0u8; 4];
                conn.set_read_timeout(Some(hung)).unwrap();
                let mut have = 0;
                while have < 4 {
                    have += conn.recv(&mut data[have..]).unwrap();
                }
                assert_eq!(&data, b"data");
                if waiting {
                    break;
                }
                assert!(
                    Instant::now() < until,
                    "{squatters} squatters: the client was admitted only once they had gone"
                );
            }
        }
    }

    /// A connection with the right cookie from another address than the control peer is
    /// closed on sight, and the accept times out.
    #[test]
    fn a_connection_from_another_address_is_refused() {
        let (mut listener, addr) = tcp_listener(Ipv4Addr::new(127, 0, 0, 2).into());
        let cookie = Cookie([4; 16]);
        let mut client = TcpStream::connect(addr).unwrap();
        client.write_all(&cookie.0).unwrap();
        let got = listener
            .accept(&cookie, Duration::from_millis(500))
            .unwrap();
        assert!(got.is_none());
        // Closed by the server: the client reads end of stream (or a reset).
        client
            .set_read_timeout(Some(crate::test_support::HUNG))
            .unwrap();
        let mut b = [0u8; 1];
        assert!(matches!(client.read(&mut b), Ok(0) | Err(_)));
    }

    /// A test's connections may arrive together: one whose cookie came while another was
    /// being admitted is admitted by the next accept.
    #[test]
    fn connections_arriving_together_are_all_admitted() {
        let local: IpAddr = Ipv4Addr::LOCALHOST.into();
        let (mut listener, addr) = tcp_listener(local);
        let cookie = Cookie([6; 16]);
        let clients: Vec<TcpStream> = (0..8)
            .map(|_| {
                let mut c = TcpStream::connect(addr).unwrap();
                c.write_all(&cookie.0[..8]).unwrap();
                c
            })
            .collect();
        for mut c in clients.iter() {
            c.write_all(&cookie.0[8..]).unwrap();
        }
        for i in 0..8 {
            assert!(
                listener
                    .accept(&cookie, crate::test_support::HUNG)
                    .unwrap()
                    .is_some(),
                "connection {i}"
            );
        }
    }
}
