//! raw: Ethernet frames on a packet socket with wirebench's own EtherType. No IP, no TCP: the
//! native link layer, as the Fore ATM API was in [Müller et al. 1997] and [Local ATM computing
//! n.d.], and HARP's AAL5 sockets in [HARP thesis n.d.] (REFERENCES.md).
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
//!
//! The pieces, each a file: [`wire`] encodes and decodes the header and the handshake's
//! payload; [`iface`] finds the interface, its MAC and MTU, and the control peer's MAC on it;
//! [`socket`] opens the packet socket filtered to one port and hands out ports; [`handshake`]
//! is the client's HELLO loop and the listener's thread that answers HELLOs; [`listener`]
//! admits the test's HELLOs as connections; [`connection`] sends a message as frames and takes
//! frames in, which [`reassembly`] puts back into messages and counts. This file is the
//! transport's public face: [`Raw`], which picks the interface and hands over to the
//! listener or the client's handshake. System calls stay in `crate::sys::packet`.

mod connection;
mod handshake;
mod iface;
mod listener;
mod reassembly;
mod socket;
mod wire;

use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use anyhow::Result;

use self::iface::Iface;
use self::listener::RawListener;
use self::wire::parse_endpoint;
use super::{
    Capabilities, Connection, Cookie, Listener, SocketOptions, Transport, TransportConfig,
};

/// The largest message: frames per message are counted in 16 bits.
const MAX_MESSAGE: u64 = 16 << 20;

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
        Ok(Box::new(RawListener::open(iface, peer)?))
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
        let conn = handshake::connect(
            iface,
            server_mac,
            listener_port,
            server_mtu,
            opts,
            cookie,
            timeout,
        )?;
        Ok(Box::new(conn))
    }
}
