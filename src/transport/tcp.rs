//! TCP: the reference reliable byte stream (and, with another protocol number, MPTCP).

use std::net::{IpAddr, SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsFd;
use std::time::Duration;

use anyhow::{Context, Result};
use socket2::{Domain, Protocol, SockRef, Socket, Type};

use super::bytestream::{accept_with_cookie, present_cookie, ByteStream};
use super::{sockopt, Capabilities, Connection, Cookie, Listener, SocketOptions, Transport};

/// A byte stream over IP: TCP, or another protocol with TCP's socket interface (MPTCP).
pub struct IpStream {
    pub name: &'static str,
    pub protocol: Protocol,
    /// What to tell the user when the kernel refuses to make such a socket.
    pub unsupported: &'static str,
}

/// Plain TCP.
pub const TCP: IpStream = IpStream {
    name: "tcp",
    protocol: Protocol::TCP,
    unsupported: "this system cannot create TCP sockets",
};

impl IpStream {
    fn socket(&self, addr: SocketAddr) -> Result<Socket> {
        Socket::new(Domain::for_address(addr), Type::STREAM, Some(self.protocol)).map_err(|e| {
            match e.raw_os_error() {
                Some(libc::EPROTONOSUPPORT | libc::ENOPROTOOPT | libc::EINVAL) => {
                    anyhow::anyhow!("{}: {e}", self.unsupported)
                }
                _ => anyhow::Error::new(e).context(format!("creating a {} data socket", self.name)),
            }
        })
    }
}

impl Transport for IpStream {
    fn name(&self) -> &'static str {
        self.name
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
        let sock = self.socket(SocketAddr::new(local, 0))?;
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
        control: SocketAddr,
        endpoint: &str,
        opts: &SocketOptions,
        cookie: &Cookie,
        timeout: Duration,
    ) -> Result<Box<dyn Connection>> {
        let port: u16 = endpoint
            .parse()
            .with_context(|| format!("server announced a bad TCP data port '{endpoint}'"))?;
        let addr = SocketAddr::new(control.ip(), port);
        let sock = self.socket(addr)?;
        // Buffers and MSS must be set before the handshake: they decide the window scale.
        sockopt::apply(&SockRef::from(&sock), opts, true)?;
        sock.connect_timeout(&addr.into(), timeout)
            .with_context(|| format!("connecting TCP data connection to {addr}"))?;
        let mut stream: TcpStream = sock.into();
        present_cookie(&mut stream, cookie, timeout)?;
        Ok(Box::new(ByteStream { stream, tcp: true }))
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
        let listener = &self.listener;
        accept_with_cookie(
            listener.as_fd(),
            || listener.accept().map(|(s, _)| s),
            cookie,
            timeout,
            &self.opts,
            true,
            "TCP",
        )
    }
}
