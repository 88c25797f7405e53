//! TCP: the reference reliable byte stream.

use std::io::{self, Read, Write};
use std::net::{IpAddr, SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsFd;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use socket2::{Domain, Protocol, SockRef, Socket, Type};

use super::{
    remaining, sockopt, Capabilities, Connection, Cookie, EffectiveOptions, Listener,
    SocketOptions, Transport,
};
use crate::sys::{self, TcpInfo};

pub struct Tcp;

impl Transport for Tcp {
    fn name(&self) -> &'static str {
        "tcp"
    }
    fn capabilities(&self) -> Capabilities {
        Capabilities {
            reliable: true,
            message_boundaries: false,
            max_message: u64::MAX,
            tcp_options: true,
            host_local: false,
        }
    }
    fn listen(&self, local: IpAddr) -> Result<Box<dyn Listener>> {
        let sock = Socket::new(
            Domain::for_address(SocketAddr::new(local, 0)),
            Type::STREAM,
            Some(Protocol::TCP),
        )
        .context("creating TCP data socket")?;
        sock.set_reuse_address(true)?;
        sock.bind(&SocketAddr::new(local, 0).into())
            .with_context(|| format!("binding TCP data listener on {local}"))?;
        sock.listen(128)
            .context("listening for TCP data connections")?;
        Ok(Box::new(TcpDataListener {
            listener: sock.into(),
            opts: SocketOptions::default(),
        }))
    }
    fn connect(
        &self,
        server: IpAddr,
        endpoint: &str,
        opts: &SocketOptions,
        cookie: &Cookie,
        timeout: Duration,
    ) -> Result<Box<dyn Connection>> {
        let port: u16 = endpoint
            .parse()
            .with_context(|| format!("server announced a bad TCP data port '{endpoint}'"))?;
        let addr = SocketAddr::new(server, port);
        let sock = Socket::new(Domain::for_address(addr), Type::STREAM, Some(Protocol::TCP))
            .context("creating TCP data socket")?;
        // Buffers and MSS must be set before the handshake: they decide the window scale.
        sockopt::apply(&SockRef::from(&sock), opts, true)?;
        sock.connect_timeout(&addr.into(), timeout)
            .with_context(|| format!("connecting TCP data connection to {addr}"))?;
        let mut stream: TcpStream = sock.into();
        stream.set_write_timeout(Some(timeout))?;
        stream
            .write_all(&cookie.0)
            .context("sending the test cookie")?;
        Ok(Box::new(TcpConnection { stream }))
    }
}

struct TcpDataListener {
    listener: TcpListener,
    opts: SocketOptions,
}

impl Listener for TcpDataListener {
    fn endpoint(&self) -> String {
        self.listener
            .local_addr()
            .map(|a| a.port().to_string())
            .unwrap_or_default()
    }
    fn configure(&mut self, opts: &SocketOptions) -> Result<()> {
        sockopt::apply(&SockRef::from(&self.listener), opts, true)?;
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
            if !sys::wait_readable(self.listener.as_fd(), left)? {
                return Ok(None);
            }
            let (mut stream, _peer) = match self.listener.accept() {
                Ok(s) => s,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e).context("accepting a TCP data connection"),
            };
            // A peer that connects and says nothing must not hold the test up for long.
            stream.set_read_timeout(Some(left.min(Duration::from_secs(5))))?;
            let mut got = [0u8; 16];
            if stream.read_exact(&mut got).is_err() || got != cookie.0 {
                continue; // not ours: drop it and keep waiting for the real client
            }
            stream.set_read_timeout(None)?;
            sockopt::apply(&SockRef::from(&stream), &self.opts, true)?;
            return Ok(Some(Box::new(TcpConnection { stream })));
        }
    }
}

struct TcpConnection {
    stream: TcpStream,
}

impl Connection for TcpConnection {
    #[inline]
    fn send(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.stream.write(buf)
    }
    #[inline]
    fn recv(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.stream.read(buf)
    }
    fn set_read_timeout(&mut self, timeout: Option<Duration>) -> io::Result<()> {
        self.stream.set_read_timeout(timeout)
    }
    fn set_write_timeout(&mut self, timeout: Option<Duration>) -> io::Result<()> {
        self.stream.set_write_timeout(timeout)
    }
    fn set_nonblocking(&mut self, on: bool) -> io::Result<()> {
        self.stream.set_nonblocking(on)
    }
    fn shutdown_write(&mut self) -> io::Result<()> {
        self.stream.shutdown(std::net::Shutdown::Write)
    }
    fn socket_fd(&self) -> Option<std::os::fd::BorrowedFd<'_>> {
        Some(std::os::fd::AsFd::as_fd(&self.stream))
    }
    fn effective_options(&self, requested: &SocketOptions) -> EffectiveOptions {
        sockopt::read_back(&SockRef::from(&self.stream), requested, true)
    }
    fn tcp_info(&self) -> Option<TcpInfo> {
        sys::tcp_info(self.stream.as_fd())
    }
}
