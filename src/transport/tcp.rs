//! TCP: the reference reliable byte stream (and, with another protocol number, MPTCP).

use std::io::Write;
use std::net::{IpAddr, SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsFd;
use std::sync::mpsc;
use std::time::Duration;

use anyhow::{Context, Result};
use socket2::{Domain, Protocol, SockRef, Socket, Type};

use super::bytestream::{present_cookie, ByteStream, CookieGate};
use super::{
    same_ip, sockopt, Capabilities, Connection, Cookie, Listener, SocketOptions, Transport,
};

/// A byte stream over IP: TCP, or another protocol with TCP's socket interface (MPTCP).
pub struct IpStream {
    pub name: &'static str,
    pub protocol: Protocol,
    /// What to tell the user when the kernel refuses to make such a socket.
    pub unsupported: &'static str,
    /// See [`Capabilities::rcvlowat`].
    pub rcvlowat: bool,
}

/// Plain TCP.
pub const TCP: IpStream = IpStream {
    name: "tcp",
    protocol: Protocol::TCP,
    unsupported: "this system cannot create TCP sockets",
    rcvlowat: true,
};

/// The endpoint a server announces when data connections share its control port.
pub const CONTROL_PORT_ENDPOINT: &str = "control";

/// The first bytes of a data connection to the control port. Read as a control frame's
/// length they exceed the frame limit, so no control connection can start with them.
pub const DATA_PREFIX: [u8; 4] = *b"WBDT";

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
            syscall_batching: false,
            rcvlowat: self.rcvlowat,
        }
    }
    fn listen(&self, local: IpAddr, peer: IpAddr) -> Result<Box<dyn Listener>> {
        let sock = self.socket(SocketAddr::new(local, 0))?;
        sock.set_reuse_address(true)?;
        sock.bind(&SocketAddr::new(local, 0).into())
            .with_context(|| format!("binding TCP data listener on {local}"))?;
        sock.listen(128)
            .context("listening for TCP data connections")?;
        // The gate polls the listener with the pending connections: accept never blocks.
        sock.set_nonblocking(true)
            .context("making the TCP data listener non-blocking")?;
        Ok(Box::new(TcpDataListener {
            listener: sock.into(),
            peer,
            gate: CookieGate::new(),
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
        let on_control_port = endpoint == CONTROL_PORT_ENDPOINT;
        let addr = if on_control_port {
            control
        } else {
            let port: u16 = endpoint
                .parse()
                .with_context(|| format!("server announced a bad TCP data port '{endpoint}'"))?;
            SocketAddr::new(control.ip(), port)
        };
        let sock = self.socket(addr)?;
        // Buffers and MSS must be set before the handshake: they decide the window scale.
        sockopt::apply(&SockRef::from(&sock), opts, true)?;
        sock.connect_timeout(&addr.into(), timeout).with_context(|| {
            if on_control_port {
                format!("connecting a {} data connection to {addr}", self.name)
            } else {
                format!(
                    "connecting a {} data connection to {addr} (if --to is a relay or proxy, add --one-port)",
                    self.name
                )
            }
        })?;
        let mut stream: TcpStream = sock.into();
        if on_control_port {
            // Prefix and cookie in one write: two small writes would wait on a delayed ACK.
            let mut hello = [0u8; 20];
            hello[..4].copy_from_slice(&DATA_PREFIX);
            hello[4..].copy_from_slice(&cookie.0);
            stream.set_write_timeout(Some(timeout))?;
            stream
                .write_all(&hello)
                .context("sending the test cookie")?;
        } else {
            present_cookie(&mut stream, cookie, timeout)?;
        }
        Ok(Box::new(ByteStream::new(stream, true)))
    }
}

struct TcpDataListener {
    listener: TcpListener,
    /// The control connection's peer: connections from anywhere else are closed on sight.
    peer: IpAddr,
    gate: CookieGate<TcpStream>,
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
        let (listener, peer) = (&self.listener, self.peer);
        self.gate.accept(
            listener.as_fd(),
            || {
                listener
                    .accept()
                    .map(|(s, from)| same_ip(from.ip(), peer).then_some(s))
            },
            cookie,
            timeout,
            &self.opts,
            true,
            "TCP",
        )
    }
}

/// The listener of a `--one-port` test: the server's control loop recognises data connections
/// by [`DATA_PREFIX`] and the test's cookie and hands them over through `handed`.
pub struct HandedOverListener {
    pub handed: mpsc::Receiver<TcpStream>,
    opts: SocketOptions,
}

impl HandedOverListener {
    pub fn new(handed: mpsc::Receiver<TcpStream>) -> HandedOverListener {
        HandedOverListener {
            handed,
            opts: SocketOptions::default(),
        }
    }
}

impl Listener for HandedOverListener {
    fn endpoint(&self) -> String {
        CONTROL_PORT_ENDPOINT.to_owned()
    }
    fn configure(&mut self, opts: &SocketOptions) -> Result<()> {
        // The control port's listener is shared by all tests: options wait for accept.
        self.opts = opts.clone();
        Ok(())
    }
    fn accept(
        &mut self,
        _cookie: &Cookie,
        timeout: Duration,
    ) -> Result<Option<Box<dyn Connection>>> {
        let stream = match self.handed.recv_timeout(timeout) {
            Ok(s) => s,
            Err(mpsc::RecvTimeoutError::Timeout) => return Ok(None),
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                anyhow::bail!("the server stopped handing over data connections")
            }
        };
        stream.set_read_timeout(None)?;
        sockopt::apply(&SockRef::from(&stream), &self.opts, true)?;
        Ok(Some(Box::new(ByteStream::new(stream, true))))
    }
}
