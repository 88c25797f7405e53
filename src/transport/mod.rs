//! Transports: how bytes move between two endpoints of the data plane.
//!
//! Patterns see only the [`Transport`], [`Listener`] and [`Connection`] traits. A new transport
//! is one new file implementing them, plus one arm of [`TransportKind`] (in `kind.rs`).

mod bytestream;
mod grpc;
mod kind;
#[cfg(test)]
pub mod mem;
#[cfg(feature = "mpi")]
pub mod mpi;
mod mptcp;
mod quic;
mod raw;
pub mod sockopt;
mod stamps;
mod tcp;
mod tls;
mod udp;
mod unix;

use std::io;
use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::time::Duration;

use anyhow::Result;
use serde::{Deserialize, Serialize};

pub use grpc::{
    connect_foreign as grpc_connect_foreign, serve_echo as grpc_serve_echo, EchoCounts,
    ECHO_CAPS as GRPC_ECHO_CAPS,
};
pub use kind::{names, Layer, TransportKind};
pub use sockopt::{EffectiveOptions, SocketOptions};
pub use tcp::{HandedOverListener, CONTROL_PORT_ENDPOINT, DATA_PREFIX};

use crate::model::socket::TcpInfo;
pub use crate::model::stream::LinkCounters;
pub use crate::sys::timestamping::{TxKind, TxStamp};

/// What a transport guarantees, so that patterns can adapt without naming a transport.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Capabilities {
    /// Bytes arrive complete and in order (no loss accounting needed).
    pub reliable: bool,
    /// One send is delivered as one message (datagram semantics).
    pub message_boundaries: bool,
    /// The largest message one send can carry, bytes.
    pub max_message: u64,
    /// TCP-level options (Nagle, congestion control, MSS, TCP_INFO) apply.
    pub tcp_options: bool,
    /// The data endpoint is reachable only on the server's own host (a filesystem path).
    pub host_local: bool,
    /// One message is one kernel datagram on [`Connection::socket_fd`], so that batched
    /// system calls (sendmmsg, recvmmsg) and UDP GSO/GRO can carry the messages.
    pub syscall_batching: bool,
    /// A blocking reader of [`Connection::socket_fd`] may be woken only once SO_RCVLOWAT bytes
    /// are queued, and is still woken at the end of the stream.
    pub rcvlowat: bool,
}

/// A random token that ties data connections to the test that announced them, so that a stray
/// connection to a data port can never be mistaken for the test's own.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cookie(pub [u8; 16]);

impl Cookie {
    pub fn random() -> Result<Cookie> {
        let mut b = [0u8; 16];
        getrandom::fill(&mut b)
            .map_err(|e| anyhow::anyhow!("no randomness for a test cookie: {e}"))?;
        Ok(Cookie(b))
    }
    pub fn to_hex(self) -> String {
        self.0.iter().map(|b| format!("{b:02x}")).collect()
    }
    pub fn from_hex(s: &str) -> Option<Cookie> {
        if s.len() != 32 || !s.is_ascii() {
            return None;
        }
        let mut b = [0u8; 16];
        for (i, byte) in b.iter_mut().enumerate() {
            *byte = u8::from_str_radix(&s[2 * i..2 * i + 2], 16).ok()?;
        }
        Some(Cookie(b))
    }
}

/// A way of moving bytes: creates listeners (server side) and connections (client side).
pub trait Transport: Send + Sync {
    fn name(&self) -> &'static str;
    fn capabilities(&self) -> Capabilities;
    /// Opens a data listener on `local` (the address the control connection arrived on) that
    /// admits data connections and handshakes from `peer` alone (the control connection's
    /// peer): a client can aim a test's traffic only at an address it has shown it owns by
    /// completing the control connection's TCP handshake from it, never at a third party
    /// (a spoofed data hello would otherwise make the server send to its victim).
    fn listen(&self, local: IpAddr, peer: IpAddr) -> Result<Box<dyn Listener>>;
    /// Connects to the data endpoint a server announced (`endpoint` is what its
    /// [`Listener::endpoint`] returned), presenting `cookie`, with `opts` applied beforehand.
    /// `control` is the address the client's control connection went to: the server's host,
    /// or a relay in front of it.
    fn connect(
        &self,
        control: SocketAddr,
        endpoint: &str,
        opts: &SocketOptions,
        cookie: &Cookie,
        timeout: Duration,
    ) -> Result<Box<dyn Connection>>;
}

/// The server side of a transport: hands out connections that present the test's cookie.
pub trait Listener: Send {
    /// What the client needs to reach this listener (a port, a path), sent over control.
    fn endpoint(&self) -> String;
    /// Applies options that accepted connections inherit (buffer sizes before the handshake
    /// decide the window scale) and that [`Listener::accept`] re-applies to each connection.
    fn configure(&mut self, opts: &SocketOptions) -> Result<()>;
    /// Waits up to `timeout` for a connection presenting `cookie`; others are dropped.
    /// Ok(None) when the time passed without one.
    fn accept(&mut self, cookie: &Cookie, timeout: Duration)
        -> Result<Option<Box<dyn Connection>>>;
    /// Data handshakes or connections ignored so far because they came from another address
    /// than the control peer (for a log); 0 where the transport does not count them.
    fn strangers(&self) -> u64 {
        0
    }
    /// The largest message (application bytes) the next point sends either way: a transport
    /// that decodes whole messages (grpc) decodes no larger, so a client cannot make the
    /// server buffer more than its test needs. The others read into the point's own buffers.
    fn limit_message(&mut self, _largest: u64) {}
}

/// What a pattern is about to do with a connection, for transports whose calls differ by it
/// (an RPC: a unary call per exchange, one client-streaming call for a stream). Every
/// transport that moves bytes alike ignores it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shape {
    /// Requests and responses: each message sent is answered by one of `response_size` bytes
    /// (None: of the request's size, an echo).
    Exchange { response_size: Option<u64> },
    /// One-way messages from this end.
    Send,
    /// One-way messages to this end.
    Receive,
}

/// One established data path. `send`/`recv` map to one system call each.
pub trait Connection: Send {
    /// Sends bytes; a message transport sends `buf` as one message.
    fn send(&mut self, buf: &[u8]) -> io::Result<usize>;
    /// Receives bytes; a message transport returns one message. Ok(0) on a stream is EOF.
    fn recv(&mut self, buf: &mut [u8]) -> io::Result<usize>;
    fn set_read_timeout(&mut self, timeout: Option<Duration>) -> io::Result<()>;
    fn set_write_timeout(&mut self, timeout: Option<Duration>) -> io::Result<()>;
    fn set_nonblocking(&mut self, on: bool) -> io::Result<()>;
    /// Signals the end of this side's data (TCP FIN). A no-op where there is no such thing.
    fn shutdown_write(&mut self) -> io::Result<()>;
    /// The socket options as the kernel reports them now.
    fn effective_options(&self, requested: &SocketOptions) -> EffectiveOptions;
    /// The socket underneath, for transport-independent fast paths (sendfile, batching...);
    /// None for transports that are not one kernel socket.
    fn socket_fd(&self) -> Option<std::os::fd::BorrowedFd<'_>> {
        None
    }
    /// The kernel's TCP state, for transports that have one.
    fn tcp_info(&self) -> Option<TcpInfo> {
        None
    }
    /// Bytes of later messages that may already have arrived while the message being read is
    /// still incomplete (a window of posted receives that the peer fills out of order): a
    /// stream's receiver leaves as many bytes at the end out of its timed phase, so that its
    /// clock starts and stops with the same amount received ahead of its count. 0 for a byte
    /// stream or datagrams, which are read in the order they arrive.
    fn arrival_lead(&self) -> u64 {
        0
    }
    /// The kernel's arrival stamp (CLOCK_REALTIME since the epoch) of the frame that completed
    /// the message the last `recv` returned, for a transport that reads its own frames with
    /// the kernel's stamps (raw); None elsewhere (a receiver with a socket asks it directly).
    fn arrival_stamp(&self) -> Option<Duration> {
        None
    }
    /// What the receive side learned from the transport's own numbered frames so far, for
    /// transports that number them (raw). Read it after the timed phase, not inside it.
    fn link_counters(&self) -> Option<LinkCounters> {
        None
    }
    /// Tells the transport what the pattern will do (see [`Shape`]) before its first send
    /// or receive. A no-op for transports that move bytes the same way whatever the shape.
    fn expect(&mut self, _shape: Shape) {}
    /// This end's serialisation times since the connection was made or last asked with
    /// `reset` (for transports that serialise messages: grpc); None elsewhere.
    fn serialisation(&self, _reset: bool) -> Option<crate::model::rpc::Serialisation> {
        None
    }
    /// Path timing (`run --path-timing`): turns on the kernel's software time stamps of this
    /// connection's messages (SO_TIMESTAMPING: arrivals, and transmit stamps for the sends
    /// that ask). Ok(false) for a transport that cannot stamp its messages (the default).
    fn enable_stamps(&mut self) -> io::Result<bool> {
        Ok(false)
    }
    /// After `enable_stamps`: whether the sends from now on ask for transmit stamps (entering
    /// the queueing layer, handed to the driver, and for TCP acknowledged).
    fn stamp_sends(&mut self, _on: bool) {}
    /// After `enable_stamps`: the kernel's arrival stamp (RX_SOFTWARE, CLOCK_REALTIME
    /// nanoseconds since the epoch) of the data the last `recv` returned.
    fn rx_stamp(&self) -> Option<i64> {
        None
    }
    /// After `enable_stamps`: the transmit stamps waiting, without waiting, into `out`:
    /// (written, read but dropped for want of room).
    fn drain_tx_stamps(&mut self, _out: &mut [TxStamp]) -> io::Result<(usize, u64)> {
        Ok((0, 0))
    }
}

/// What some transports need besides socket options. It comes from this side's own command
/// line and is never sent over control: each end names its own interface and certificates.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TransportConfig {
    /// raw: the network interface to send frames on. Default: the interface that holds the
    /// local address of the control connection.
    pub iface: Option<String>,
    /// quic and grpc --tls server: certificate chain (PEM). Default: a self-signed one made
    /// at start-up.
    pub tls_cert: Option<PathBuf>,
    /// quic and grpc --tls server: the private key of `tls_cert` (PEM).
    pub tls_key: Option<PathBuf>,
    /// quic and grpc --tls client: CA certificates (PEM) to verify the server with. Default:
    /// accept exactly the certificate whose fingerprint the server announced over the
    /// control connection.
    pub tls_ca: Option<PathBuf>,
    /// grpc client: how messages carry their bytes. The server answers each call in the
    /// encoding it came in, so only the client needs it.
    pub encoding: crate::model::vocab::Encoding,
    /// grpc: HTTP/2 over TLS 1.3. The client's `--tls`; a server takes it from the test the
    /// client asked for (the one setting that comes over control), and then uses `tls_cert`
    /// and `tls_key` as quic does.
    pub tls: bool,
}

/// What a build without the `mpi` feature says when asked for MPI.
pub const NO_MPI: &str =
    "this wirebench was built without MPI support; build with --features mpi (see README)";

/// Whether `a` and `b` are one address, an IPv4 address and its IPv4-mapped IPv6 form too (a
/// dual-stack socket sees IPv4 peers in that form).
pub(crate) fn same_ip(a: IpAddr, b: IpAddr) -> bool {
    a.to_canonical() == b.to_canonical()
}

/// Time left until `deadline`, None once it has passed.
pub(crate) fn remaining(deadline: std::time::Instant) -> Option<Duration> {
    deadline
        .checked_duration_since(std::time::Instant::now())
        .filter(|d| !d.is_zero())
}
