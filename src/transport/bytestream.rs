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
use crate::sys::{self, TcpInfo};

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
}

impl<S: StreamSocket> Connection for ByteStream<S> {
    #[inline]
    fn send(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.stream.write(buf)
    }
    #[inline]
    fn recv(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.stream.read(buf)
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
    fn tcp_info(&self) -> Option<TcpInfo> {
        if self.tcp {
            sys::tcp_info(self.stream.as_fd())
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

/// Server side: waits up to `timeout` on `listener` for a connection that presents `cookie`,
/// dropping any that does not; applies `opts` to the one admitted. `accept` takes one
/// pending connection; `what` names it in errors.
pub(crate) fn accept_with_cookie<S: StreamSocket>(
    listener: BorrowedFd<'_>,
    mut accept: impl FnMut() -> io::Result<S>,
    cookie: &Cookie,
    timeout: Duration,
    opts: &SocketOptions,
    tcp: bool,
    what: &str,
) -> Result<Option<Box<dyn Connection>>> {
    let deadline = Instant::now() + timeout;
    loop {
        let Some(left) = remaining(deadline) else {
            return Ok(None);
        };
        if !sys::wait_readable(listener, left)? {
            return Ok(None);
        }
        let mut stream = match accept() {
            Ok(s) => s,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e).with_context(|| format!("accepting a {what} data connection")),
        };
        // A peer that connects and says nothing must not hold the test up for long.
        stream.read_timeout(Some(left.min(COOKIE_WAIT)))?;
        let mut got = [0u8; 16];
        if stream.read_exact(&mut got).is_err() || got != cookie.0 {
            continue; // not ours: drop it and keep waiting for the real client
        }
        stream.read_timeout(None)?;
        sockopt::apply(&SockRef::from(&stream), opts, tcp)?;
        return Ok(Some(Box::new(ByteStream { stream, tcp })));
    }
}
