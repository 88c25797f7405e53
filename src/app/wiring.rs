//! Connecting every rank to every other over a socket transport: each rank learns the
//! others' addresses over the group, opens a listener for each lower rank (admitting that
//! rank's address alone, with a cookie of its own), the endpoints are exchanged, and then
//! each rank accepts from the lower ranks and connects to the higher ones, in that order.
//! Every rank thus works through the pairs (i, j), i < j, in the same order, so no two
//! ranks ever wait on each other in a cycle, whatever a transport's handshake needs.
//!
//! With a lab namespace the sockets are made by a thread inside it and keep belonging to it
//! when the kernel uses them from its own thread.

use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use anyhow::{anyhow, bail, Context, Result};
use serde::{Deserialize, Serialize};

use super::Peers;
use crate::group::Group;
use crate::transport::{
    Connection, Cookie, Listener, SocketOptions, Transport, TransportConfig, TransportKind,
};

/// How this rank's data connections are made.
#[derive(Debug, Clone)]
pub struct Wiring {
    pub transport: TransportKind,
    pub config: TransportConfig,
    pub options: SocketOptions,
    /// The namespace this rank's data lives in, if any.
    pub netns: Option<String>,
    /// The address the other ranks reach this one at.
    pub address: IpAddr,
    /// Setup waits (connect, accept) and every later send and receive.
    pub io_timeout: Duration,
    pub control_timeout: Duration,
}

/// What a rank tells the others: where it listens for each lower rank.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Offer {
    address: IpAddr,
    /// For each rank below this one: the listener's endpoint and the cookie to present.
    listeners: Vec<(String, String)>,
}

/// Runs `f` in the namespace, or here.
fn in_place<T: Send + 'static>(
    netns: &Option<String>,
    f: impl FnOnce() -> Result<T> + Send + 'static,
) -> Result<T> {
    match netns {
        Some(ns) => crate::lab::in_netns(ns, f),
        None => f(),
    }
}

/// Connects this rank to every other one over `w.transport`.
pub fn connect(group: &dyn Group, w: &Wiring) -> Result<Peers> {
    let caps = w.transport.capabilities()?;
    if !caps.reliable || caps.message_boundaries {
        bail!(
            "the application kernels need a reliable byte stream; {} is not one (use tcp, unix, mptcp, quic or mpi)",
            w.transport.name()
        );
    }
    let (me, size) = (group.rank(), group.size());
    let addresses: Vec<IpAddr> = group
        .allgather(&serde_json::to_vec(&w.address)?, w.control_timeout)?
        .iter()
        .map(|b| serde_json::from_slice(b))
        .collect::<Result<_, _>>()
        .context("the ranks' addresses")?;

    // A transport or listener may own what its connections run on (QUIC's endpoint and
    // runtime; a QUIC listener closes its endpoint when dropped): every one opened lives as
    // long as the connections.
    let mut transports: Vec<Box<dyn Transport>> = Vec::new();
    let mut listeners: Vec<(Box<dyn Listener>, Cookie)> = Vec::new();
    for lower in addresses.iter().take(me) {
        let (kind, config, local, peer) = (w.transport, w.config.clone(), w.address, *lower);
        let (transport, listener) = in_place(&w.netns, move || {
            let t = kind.open(&config)?;
            let l = t.listen(local, peer)?;
            Ok((t, l))
        })
        .with_context(|| format!("rank {me} listening"))?;
        transports.push(transport);
        listeners.push((listener, Cookie::random()?));
    }
    let offer = Offer {
        address: w.address,
        listeners: listeners
            .iter()
            .map(|(l, c)| (l.endpoint(), c.to_hex()))
            .collect(),
    };
    let offers: Vec<Offer> = group
        .allgather(&serde_json::to_vec(&offer)?, w.control_timeout)?
        .iter()
        .map(|b| serde_json::from_slice(b))
        .collect::<Result<_, _>>()
        .context("the ranks' listeners")?;

    let mut conns: Vec<Option<Box<dyn Connection>>> = (0..size).map(|_| None).collect();
    for (lower, (listener, cookie)) in listeners.iter_mut().enumerate() {
        listener.configure(&w.options)?;
        let conn = listener.accept(cookie, w.io_timeout)?.ok_or_else(|| {
            anyhow!(
                "rank {lower} did not connect to rank {me} within {}",
                crate::units::format_seconds(w.io_timeout.as_secs_f64())
            )
        })?;
        conns[lower] = Some(conn);
    }
    for (higher, offer) in offers.iter().enumerate().skip(me + 1) {
        let Some((endpoint, cookie)) = offer.listeners.get(me).cloned() else {
            bail!("rank {higher} offered no listener to rank {me}");
        };
        let cookie = Cookie::from_hex(&cookie).ok_or_else(|| anyhow!("a bad cookie"))?;
        let (kind, config, opts, timeout) = (
            w.transport,
            w.config.clone(),
            w.options.clone(),
            w.io_timeout,
        );
        let control = SocketAddr::new(offer.address, 0);
        let (transport, conn) = in_place(&w.netns, move || {
            let t = kind.open(&config)?;
            let c = t.connect(control, &endpoint, &opts, &cookie, timeout)?;
            Ok((t, c))
        })
        .with_context(|| format!("rank {me} connecting to rank {higher}"))?;
        transports.push(transport);
        conns[higher] = Some(conn);
    }
    for c in conns.iter_mut().flatten() {
        c.set_read_timeout(Some(w.io_timeout))?;
        c.set_write_timeout(Some(w.io_timeout))?;
    }
    let listeners = listeners.into_iter().map(|(l, _)| l).collect();
    Ok(Peers::new(me, conns)?.keeping(transports, listeners))
}
