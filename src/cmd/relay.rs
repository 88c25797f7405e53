//! `wirebench relay`: the relay's options.

use std::net::SocketAddr;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use clap::Args;

use super::run::{parse_bytes, parse_duration};
use crate::relay::{UdpLegConfig, UdpPeer, UdpRelayConfig};

#[derive(Debug, Args)]
pub struct RelayArgs {
    /// Address to accept TCP connections on, [HOST:]PORT (default host 0.0.0.0).
    #[arg(
        long,
        required_unless_present = "listen_udp",
        conflicts_with = "listen_udp"
    )]
    pub listen: Option<String>,
    /// Where to forward each connection over TCP, HOST[:PORT] (default port 5320).
    #[arg(
        long,
        required_unless_present = "forward_udp",
        conflicts_with = "forward_udp"
    )]
    pub forward: Option<String>,
    /// Carry each connection accepted on --listen over UDP to the relay at HOST:PORT (its
    /// --listen-udp), as PVM's daemons carry a task's messages to each other: cut into
    /// datagrams of at most --datagram bytes, numbered, acknowledged, resent and put back
    /// in order.
    #[arg(long, value_name = "HOST:PORT", requires = "listen")]
    pub forward_udp: Option<String>,
    /// With --forward-udp: the local address of the UDP leg's socket, [HOST:]PORT (default:
    /// any address of the peer's family, a port the system picks).
    #[arg(long, value_name = "[HOST:]PORT", requires = "forward_udp")]
    pub udp_bind: Option<String>,
    /// Take the UDP leg of the relay named by --udp-peer on [HOST:]PORT (default host
    /// 0.0.0.0), and connect each of its connections to --forward over TCP.
    #[arg(long, value_name = "[HOST:]PORT", requires_all = ["forward", "udp_peer"])]
    pub listen_udp: Option<String>,
    /// With --listen-udp: the relay whose datagrams are taken, HOST (any port) or HOST:PORT;
    /// a datagram from any other address is ignored and counted.
    #[arg(long, value_name = "HOST[:PORT]", requires = "listen_udp")]
    pub udp_peer: Option<String>,
    /// With --forward-udp or --listen-udp: a file holding the pre-shared key (at least 16
    /// bytes; the environment variable WIREBENCH_PSK if not given) that both relays of the
    /// leg hold. Every datagram of the leg then carries a tag of a key derived from it;
    /// without one, a cookie handshake proves only that the opener receives at its address.
    #[arg(long, value_name = "FILE")]
    pub psk_file: Option<std::path::PathBuf>,
    /// Largest datagram of the UDP leg, its 35-byte header and tag included (binary
    /// suffixes), 64 to 65507 bytes. The default is PVM's UDPMAXLEN.
    #[arg(long, default_value = "4K", value_parser = parse_bytes)]
    pub datagram: u64,
    /// A test aid, not a network model: drop every N-th datagram this relay would send on
    /// its UDP leg (data and acknowledgements alike), so that resending can be seen at work.
    #[arg(long, value_name = "N", default_value_t = 0)]
    pub drop_every: u64,
    /// Bytes copied per read and write call (binary suffixes), at most 16M: one such buffer
    /// per direction of every relayed connection.
    #[arg(long, default_value = "128K", value_parser = parse_bytes)]
    pub buffer: u64,
    /// Timeout of connecting to the forward address, e.g. 5s.
    #[arg(long, default_value = "10s", value_parser = parse_duration)]
    pub connect_timeout: Duration,
    /// Connections relayed at once; one more is closed as soon as it is accepted. Each costs
    /// two threads and four descriptors.
    #[arg(long, default_value_t = crate::relay::DEFAULT_MAX_CONNECTIONS)]
    pub max_connections: usize,
    /// Connections relayed at once from one source (an IPv4 address, an IPv6 /64); one more
    /// is closed as soon as it is accepted. A test takes one for control and one per stream.
    #[arg(long, default_value_t = crate::relay::DEFAULT_MAX_PER_SOURCE)]
    pub max_per_source: usize,
    /// A relayed connection with no byte in either direction for this long is closed.
    #[arg(long, default_value = "120s", value_parser = parse_duration)]
    pub idle_timeout: Duration,
    /// A write to either side that cannot progress for this long (the peer reads nothing)
    /// closes the connection.
    #[arg(long, default_value = "30s", value_parser = parse_duration)]
    pub write_timeout: Duration,
    /// Print one line per closed connection with the bytes relayed each way.
    #[arg(long, short)]
    pub verbose: bool,
}

/// [HOST:]PORT with the host 0.0.0.0 by default.
fn listen_addr(flag: &str, v: &str) -> Result<SocketAddr> {
    let full = if v.chars().all(|c| c.is_ascii_digit()) {
        format!("0.0.0.0:{v}")
    } else {
        v.to_owned()
    };
    full.parse()
        .with_context(|| format!("{flag} '{v}': expected [HOST:]PORT"))
}

/// `wirebench relay`: serves until killed.
pub fn run(a: RelayArgs) -> Result<()> {
    let limits = crate::relay::Limits {
        max_connections: a.max_connections,
        max_per_source: a.max_per_source,
        idle_timeout: a.idle_timeout,
        write_timeout: a.write_timeout,
    };
    let udp_leg = match (&a.listen, &a.forward, &a.forward_udp, &a.listen_udp) {
        (Some(listen), None, Some(peer), None) => {
            let listen = listen_addr("--listen", listen)?;
            let peer = crate::control::client::resolve(peer, 0)
                .with_context(|| format!("--forward-udp '{peer}'"))?;
            if peer.port() == 0 {
                bail!("--forward-udp '{}': expected HOST:PORT (the peer relay's --listen-udp)", a.forward_udp.as_deref().unwrap_or_default());
            }
            let bind = match &a.udp_bind {
                Some(b) => listen_addr("--udp-bind", b)?,
                None if peer.is_ipv6() => SocketAddr::from((std::net::Ipv6Addr::UNSPECIFIED, 0)),
                None => SocketAddr::from((std::net::Ipv4Addr::UNSPECIFIED, 0)),
            };
            Some(UdpLegConfig::Opener { listen, peer, bind })
        }
        (None, Some(forward), None, Some(listen_udp)) => {
            let listen_udp = listen_addr("--listen-udp", listen_udp)?;
            let p = a.udp_peer.as_deref().unwrap_or_default();
            let peer = match crate::control::client::resolve(p, 0) {
                Ok(s) if s.port() == 0 => UdpPeer::Host(s.ip()),
                Ok(s) => UdpPeer::Exact(s),
                Err(e) => return Err(e.context(format!("--udp-peer '{p}'"))),
            };
            Some(UdpLegConfig::Acceptor {
                listen_udp,
                peer,
                forward: forward.clone(),
            })
        }
        (Some(_), Some(_), None, None) => None,
        _ => bail!("wirebench relay takes --listen with --forward or --forward-udp, or --listen-udp with --forward and --udp-peer"),
    };
    if let Some(leg) = udp_leg {
        let psk = crate::control::auth::Psk::load(a.psk_file.as_deref())?;
        return crate::relay::run_udp(UdpRelayConfig {
            psk,
            leg,
            datagram: a.datagram,
            buffer: a.buffer,
            connect_timeout: a.connect_timeout,
            limits,
            drop_every: a.drop_every,
            log: a.verbose,
        });
    }
    if a.psk_file.is_some() {
        bail!("--psk-file keys a UDP leg (--forward-udp or --listen-udp); a TCP relay copies bytes and holds no key");
    }
    if a.drop_every != 0 {
        bail!("--drop-every drops datagrams of a UDP leg: give --forward-udp or --listen-udp");
    }
    let listen = listen_addr("--listen", a.listen.as_deref().unwrap_or_default())?;
    crate::relay::run(crate::relay::RelayConfig {
        listen,
        forward: a.forward.clone().unwrap_or_default(),
        buffer: a.buffer,
        connect_timeout: a.connect_timeout,
        limits,
        log: a.verbose,
    })
}
