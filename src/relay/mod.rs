//! `wirebench relay`: a user-space TCP relay to put in a path, so that a test can measure
//! what one more hop through a daemon or proxy costs (PVM's daemon route against its direct
//! route in [Müller et al. 1997] and [Local ATM computing n.d.], REFERENCES.md; a sidecar
//! proxy today).
//!
//! Each accepted connection gets a connection to the forward address and two threads that
//! copy bytes through user space with read and write, as such a daemon does. Both sockets
//! have Nagle off, so the relay adds its copying and scheduling, not a coalescing delay.
//! Byte counts per connection are logged so that a test can check that nothing was lost.
//!
//! A relay faces whoever can reach its port, so it bounds what they can hold: a cap on the
//! pairs relayed at once (each costs two threads and four descriptors) and a smaller cap per
//! source address (so that one source cannot fill the relay for the others), an idle timeout (a
//! pair with no byte either way is closed), a write timeout (a peer that stops reading cannot
//! hold a pair open with a full send buffer), and a cap on the copy buffer it allocates per
//! direction. A pair ends as soon as either side closes: every wirebench connection carries
//! data one way only after its opening, so nothing waits on a half-closed pair, and a server
//! that hangs up on a silent client (its hello deadline) frees the relay's pair with it.
//!
//! PVM's default route has two daemons and a UDP leg between them: task -> pvmd (local) ->
//! pvmd (remote, over UDP, with the daemons' own fragmentation, acknowledgements and resends)
//! -> task (Geist et al., *PVM 3 user's guide and reference manual*). Two relays make that
//! path: relay A (`--listen` with `--forward-udp`) carries every connection it accepts over
//! UDP to relay B (`--listen-udp` with `--forward`), which opens the TCP connection to the
//! server; [`link`] is the protocol of that leg, `udp` its I/O. The same bounds hold there.

use std::collections::HashMap;
use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};

use crate::control::access::ClientKey;
use crate::control::client::resolve;
use crate::control::server::DEFAULT_PORT;

mod auth;
pub mod link;
mod udp;

/// The largest copy buffer: 16 MiB per direction, far beyond what a socket hands one read.
pub const MAX_BUFFER: u64 = 16 << 20;
/// The copy buffer when none is given: `relay --buffer`'s default.
pub const DEFAULT_BUFFER: u64 = 128 << 10;
/// Default cap on connections relayed at once.
pub const DEFAULT_MAX_CONNECTIONS: usize = 256;
/// Default cap on the connections of one source (an IPv4 address, an IPv6 /64): a quarter of
/// the whole, as `serve` gives one client a quarter of its pending hellos. A test needs one
/// connection for control and one per stream (two per stream pair with `--bidir`).
pub const DEFAULT_MAX_PER_SOURCE: usize = DEFAULT_MAX_CONNECTIONS / 4;

/// How a relay bounds each connection.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    pub max_connections: usize,
    pub max_per_source: usize,
    pub idle_timeout: Duration,
    pub write_timeout: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_connections: DEFAULT_MAX_CONNECTIONS,
            max_per_source: DEFAULT_MAX_PER_SOURCE,
            idle_timeout: Duration::from_secs(120),
            write_timeout: Duration::from_secs(30),
        }
    }
}

/// The pairs relayed now, in all and per source. Places are taken on accept, before a thread
/// exists, so that a burst cannot outrun the caps, and given back by [`Slot`]'s Drop.
#[derive(Default)]
struct Occupancy {
    total: AtomicUsize,
    per_source: Mutex<HashMap<ClientKey, usize>>,
}

/// Why a connection was not relayed.
enum Full {
    All,
    Source(ClientKey),
}

impl Occupancy {
    fn take(self: &Arc<Self>, source: ClientKey, limits: &Limits) -> Result<Slot, Full> {
        let mut per_source = self
            .per_source
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let mine = per_source.entry(source).or_insert(0);
        if *mine >= limits.max_per_source {
            return Err(Full::Source(source));
        }
        if self.total.fetch_add(1, Ordering::SeqCst) >= limits.max_connections {
            self.total.fetch_sub(1, Ordering::SeqCst);
            if *mine == 0 {
                per_source.remove(&source);
            }
            return Err(Full::All);
        }
        *mine += 1;
        Ok(Slot {
            occupancy: Arc::clone(self),
            source,
        })
    }

    fn give_back(&self, source: ClientKey) {
        let mut per_source = self
            .per_source
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if let Some(n) = per_source.get_mut(&source) {
            *n -= 1;
            if *n == 0 {
                per_source.remove(&source);
            }
        }
        self.total.fetch_sub(1, Ordering::SeqCst);
    }
}

/// A running relay: its listener and what it forwards to.
pub struct Relay {
    listener: TcpListener,
    forward: SocketAddr,
    buffer: usize,
    connect_timeout: Duration,
    limits: Limits,
    occupancy: Arc<Occupancy>,
    log: bool,
}

/// The copy buffer asked for, refused in one line above [`MAX_BUFFER`] (before, --buffer 64G
/// aborted the relay on its first connection, failing to allocate it).
pub fn check_buffer(buffer: u64) -> Result<usize> {
    if buffer == 0 || buffer > MAX_BUFFER {
        bail!(
            "--buffer {buffer} bytes: the relay copies through buffers of 1 byte to {} MiB",
            MAX_BUFFER >> 20
        );
    }
    Ok(buffer as usize)
}

impl Relay {
    pub fn bind(listen: SocketAddr, forward: SocketAddr, buffer: u64) -> Result<Relay> {
        let buffer = check_buffer(buffer)?;
        let listener =
            TcpListener::bind(listen).with_context(|| format!("cannot listen on {listen}"))?;
        Ok(Relay {
            listener,
            forward,
            buffer,
            connect_timeout: Duration::from_secs(10),
            limits: Limits::default(),
            occupancy: Arc::new(Occupancy::default()),
            log: false,
        })
    }

    /// Sets the caps and timeouts; a zero cap or timeout is refused.
    pub fn set_limits(&mut self, limits: Limits) -> Result<()> {
        check_limits(&limits)?;
        self.limits = limits;
        Ok(())
    }

    pub fn local_addr(&self) -> Result<SocketAddr> {
        Ok(self.listener.local_addr()?)
    }

    /// Relays connections until the process ends.
    pub fn serve(self) -> Result<()> {
        for conn in self.listener.incoming() {
            let client = match conn {
                Ok(c) => c,
                Err(e) => {
                    eprintln!("wirebench relay: accept failed: {e}");
                    thread::sleep(Duration::from_millis(50));
                    continue;
                }
            };
            let source = match client.peer_addr() {
                Ok(a) => a,
                Err(_) => continue, // already gone
            };
            let slot = match self
                .occupancy
                .take(ClientKey::of(source.ip()), &self.limits)
            {
                Ok(slot) => slot,
                Err(full) => {
                    // Closed at once (dropped here): the client sees the end of the stream.
                    if self.log {
                        let why = match full {
                            Full::All => format!(
                                "{} connections relayed already (--max-connections)",
                                self.limits.max_connections
                            ),
                            Full::Source(key) => format!(
                                "{} connections from {key} relayed already (--max-per-source)",
                                self.limits.max_per_source
                            ),
                        };
                        eprintln!("wirebench relay: {source} refused: {why}");
                    }
                    continue;
                }
            };
            let pair = Pair {
                forward: self.forward,
                buffer: self.buffer,
                connect_timeout: self.connect_timeout,
                limits: self.limits,
                log: self.log,
            };
            let _ = thread::Builder::new()
                .name("wb-relay".into())
                .spawn(move || {
                    let _slot = slot;
                    relay_one(client, &pair)
                });
        }
        Ok(())
    }

    /// Relays in a background thread (tests).
    pub fn spawn(self) -> Result<SocketAddr> {
        let addr = self.local_addr()?;
        thread::Builder::new()
            .name("wb-relay-accept".into())
            .spawn(move || self.serve())?;
        Ok(addr)
    }
}

/// Gives a connection's place under the caps back when its relaying ends (or its thread could
/// not start).
struct Slot {
    occupancy: Arc<Occupancy>,
    source: ClientKey,
}

impl Drop for Slot {
    fn drop(&mut self) {
        self.occupancy.give_back(self.source);
    }
}

/// What relaying one connection needs.
#[derive(Clone, Copy)]
struct Pair {
    forward: SocketAddr,
    buffer: usize,
    connect_timeout: Duration,
    limits: Limits,
    log: bool,
}

/// When either direction of a pair last moved a byte, as milliseconds since `start`.
struct Activity {
    start: Instant,
    last_ms: AtomicU64,
}

impl Activity {
    fn new() -> Activity {
        Activity {
            start: Instant::now(),
            last_ms: AtomicU64::new(0),
        }
    }
    fn touch(&self) {
        let now = self.start.elapsed().as_millis() as u64;
        self.last_ms.store(now, Ordering::Relaxed);
    }
    fn idle_for(&self) -> Duration {
        let last = Duration::from_millis(self.last_ms.load(Ordering::Relaxed));
        self.start.elapsed().saturating_sub(last)
    }
}

/// Why a pair was closed before both its directions ended.
const IDLE: u8 = 1;
const WRITE_STUCK: u8 = 2;

fn relay_one(client: TcpStream, pair: &Pair) {
    let (forward, log) = (pair.forward, pair.log);
    let peer = client
        .peer_addr()
        .map(|a| a.to_string())
        .unwrap_or_else(|_| "?".into());
    let server = match TcpStream::connect_timeout(&forward, pair.connect_timeout) {
        Ok(s) => s,
        Err(e) => {
            if log {
                eprintln!("wirebench relay: {peer}: cannot reach {forward}: {e}");
            }
            return;
        }
    };
    // The read timeout is a tick for looking at the idle clock, not the idle timeout itself:
    // a pair is idle when neither direction moves, which one direction alone cannot see.
    let tick =
        (pair.limits.idle_timeout / 4).clamp(Duration::from_millis(50), Duration::from_secs(1));
    for s in [&client, &server] {
        let _ = s.set_nodelay(true);
        if s.set_read_timeout(Some(tick)).is_err()
            || s.set_write_timeout(Some(pair.limits.write_timeout))
                .is_err()
        {
            return;
        }
    }
    let up = Arc::new(AtomicU64::new(0));
    let down = Arc::new(AtomicU64::new(0));
    let activity = Arc::new(Activity::new());
    let why = Arc::new(std::sync::atomic::AtomicU8::new(0));
    let (c2, s2) = match (client.try_clone(), server.try_clone()) {
        (Ok(c), Ok(s)) => (c, s),
        _ => return,
    };
    let upstream = {
        let (count, activity, why) = (Arc::clone(&up), Arc::clone(&activity), Arc::clone(&why));
        let (buffer, idle) = (pair.buffer, pair.limits.idle_timeout);
        thread::Builder::new()
            .name("wb-relay-up".into())
            .spawn(move || pump(c2, s2, buffer, &count, &activity, idle, &why))
    };
    if upstream.is_err() {
        return;
    }
    pump(
        server,
        client,
        pair.buffer,
        &down,
        &activity,
        pair.limits.idle_timeout,
        &why,
    );
    if let Ok(h) = upstream {
        let _ = h.join();
    }
    if log {
        match why.load(Ordering::Relaxed) {
            IDLE => eprintln!(
                "wirebench relay: {peer} -> {forward}: no byte either way for the idle timeout (--idle-timeout): closing"
            ),
            WRITE_STUCK => eprintln!(
                "wirebench relay: {peer} -> {forward}: a write made no progress for the write timeout (--write-timeout): closing"
            ),
            _ => {}
        }
        eprintln!(
            "wirebench relay: {peer} -> {forward} closed: {} bytes up (to {forward}), {} bytes down",
            up.load(Ordering::Relaxed),
            down.load(Ordering::Relaxed)
        );
    }
}

/// Copies `from` to `to` until end of stream or an error, counting bytes into `count`. Either
/// way it then closes both sockets for both directions, which ends the other direction's pump
/// too: the end of stream reaches `to` after every byte written to it (shutdown sends FIN
/// behind the queued data), and the pair holds nothing once one side has gone, whether it
/// ended, was idle for `idle`, or a write was stuck.
fn pump(
    mut from: TcpStream,
    mut to: TcpStream,
    buffer: usize,
    count: &AtomicU64,
    activity: &Activity,
    idle: Duration,
    why: &std::sync::atomic::AtomicU8,
) {
    let mut buf = vec![0u8; buffer];
    let close_both = |from: &TcpStream, to: &TcpStream| {
        let _ = from.shutdown(Shutdown::Both);
        let _ = to.shutdown(Shutdown::Both);
    };
    loop {
        let n = match from.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                ) =>
            {
                if activity.idle_for() >= idle {
                    let _ = why.compare_exchange(0, IDLE, Ordering::Relaxed, Ordering::Relaxed);
                    close_both(&from, &to);
                    return;
                }
                continue;
            }
            Err(_) => {
                // A reset on one side resets the other: nothing half-open stays behind.
                close_both(&from, &to);
                return;
            }
        };
        activity.touch();
        if let Err(e) = write_all_active(&mut to, &buf[..n], activity) {
            if matches!(
                e.kind(),
                io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
            ) {
                let _ = why.compare_exchange(0, WRITE_STUCK, Ordering::Relaxed, Ordering::Relaxed);
            }
            close_both(&from, &to);
            return;
        }
        count.fetch_add(n as u64, Ordering::Relaxed);
    }
    // Before, only the end was passed on (a half-close), and the other direction waited for
    // its own end: 400 silent clients whose server had hung up at its hello deadline held 513
    // threads until the idle timeout, two minutes later.
    close_both(&from, &to);
}

/// write_all that counts each partial write as activity: a slow reader that still takes bytes
/// is not idle, and the write timeout applies to one write without progress, not to the whole.
fn write_all_active(to: &mut TcpStream, mut data: &[u8], activity: &Activity) -> io::Result<()> {
    while !data.is_empty() {
        match to.write(data) {
            Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
            Ok(n) => {
                data = &data[n..];
                activity.touch();
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// What `wirebench relay` runs: where it listens and forwards, and its bounds.
#[derive(Debug, Clone)]
pub struct RelayConfig {
    pub listen: SocketAddr,
    /// HOST[:PORT] (default port 5320).
    pub forward: String,
    pub buffer: u64,
    pub connect_timeout: Duration,
    pub limits: Limits,
    /// One line per closed connection.
    pub log: bool,
}

/// Where a relay with a UDP leg listens and sends (see [`udp`]).
#[derive(Debug, Clone)]
pub enum UdpLegConfig {
    /// Relay A: accepts TCP on `listen`, carries each connection to the relay at `peer`
    /// over UDP from a socket bound to `bind`.
    Opener {
        listen: SocketAddr,
        peer: SocketAddr,
        bind: SocketAddr,
    },
    /// Relay B: takes the UDP leg on `listen_udp` from `peer` (an address, or an address and
    /// port), and connects each channel to `forward` (HOST[:PORT], default port 5320).
    Acceptor {
        listen_udp: SocketAddr,
        peer: udp::Peer,
        forward: String,
    },
}

/// What a relay with a UDP leg runs.
#[derive(Debug, Clone)]
pub struct UdpRelayConfig {
    pub leg: UdpLegConfig,
    /// Largest datagram of the leg, header included, bytes.
    pub datagram: u64,
    pub buffer: u64,
    pub connect_timeout: Duration,
    pub limits: Limits,
    /// Test aid: drop every n-th datagram this relay sends (0: none).
    pub drop_every: u64,
    pub log: bool,
    /// The leg's session keys are derived from this key when given (both relays need it).
    pub psk: Option<crate::control::auth::Psk>,
}

pub use udp::Peer as UdpPeer;

/// The datagram size asked for, refused in one line outside what the leg carries.
pub fn check_datagram(datagram: u64) -> Result<usize> {
    let (lo, hi) = (link::MIN_DATAGRAM as u64, link::MAX_DATAGRAM as u64);
    if !(lo..=hi).contains(&datagram) {
        bail!(
            "--datagram {datagram} bytes: the UDP leg's datagrams hold {lo} to {hi} bytes (its {}-byte header included)",
            link::HEADER
        );
    }
    Ok(datagram as usize)
}

fn check_limits(limits: &Limits) -> Result<()> {
    if limits.max_connections == 0 || limits.max_per_source == 0 {
        bail!("--max-connections and --max-per-source must be at least 1");
    }
    if limits.idle_timeout.is_zero() || limits.write_timeout.is_zero() {
        bail!("--idle-timeout and --write-timeout must be longer than 0");
    }
    Ok(())
}

/// Runs a relay with a UDP leg until killed (or Ctrl-C, which prints its totals).
pub fn run_udp(c: UdpRelayConfig) -> Result<()> {
    // Checked before anything is bound: a refused option is one line, not a listening relay.
    let buffer = check_buffer(c.buffer)?;
    let datagram = check_datagram(c.datagram)?;
    check_limits(&c.limits)?;
    let window = format!(
        "datagrams of at most {datagram} B ({} B of data), window {} per channel, resent after {} doubling to {}, at most {} times; leg version {}, {}",
        datagram - link::HEADER,
        link::WINDOW,
        crate::units::format_seconds(link::RTO.as_secs_f64()),
        crate::units::format_seconds(link::MAX_RTO.as_secs_f64()),
        link::MAX_RESENDS,
        link::VERSION,
        if c.psk.is_some() {
            "authenticated with the pre-shared key"
        } else {
            "authenticated by a cookie handshake (no pre-shared key)"
        }
    );
    let bounds = format!(
        "at most {} connections, {} per source, idle timeout {}, write timeout {}",
        c.limits.max_connections,
        c.limits.max_per_source,
        crate::units::format_seconds(c.limits.idle_timeout.as_secs_f64()),
        crate::units::format_seconds(c.limits.write_timeout.as_secs_f64())
    );
    let aid = if c.drop_every != 0 {
        format!(
            "; dropping every {}th datagram it sends (--drop-every, a test aid)",
            c.drop_every
        )
    } else {
        String::new()
    };
    let leg = match c.leg {
        UdpLegConfig::Opener { listen, peer, bind } => {
            let listener =
                TcpListener::bind(listen).with_context(|| format!("cannot listen on {listen}"))?;
            let socket = std::net::UdpSocket::bind(bind)
                .with_context(|| format!("cannot bind the UDP leg to {bind}"))?;
            eprintln!(
                "wirebench relay on {} forwarding over UDP from {} to the relay at {peer} ({window}; {bounds}{aid})",
                listener.local_addr()?,
                socket.local_addr()?,
            );
            udp::Leg {
                role: link::Role::Opener,
                listener: Some(listener),
                socket,
                peer: udp::Peer::Exact(peer),
                forward: None,
                datagram,
                buffer,
                connect_timeout: c.connect_timeout,
                limits: c.limits,
                drop_every: c.drop_every,
                log: c.log,
                psk: c.psk.clone(),
            }
        }
        UdpLegConfig::Acceptor {
            listen_udp,
            peer,
            forward,
        } => {
            let forward = resolve(&forward, DEFAULT_PORT)?;
            let socket = std::net::UdpSocket::bind(listen_udp)
                .with_context(|| format!("cannot listen on {listen_udp} (UDP)"))?;
            eprintln!(
                "wirebench relay on {} (UDP, from the relay at {peer}) forwarding to {forward} ({window}; {bounds}{aid})",
                socket.local_addr()?,
            );
            if matches!(peer, udp::Peer::Host(_)) && c.psk.is_none() {
                // The handshake proves that the opener receives at its address, which any
                // process of that host does.
                eprintln!(
                    "wirebench relay: note: --udp-peer {peer} without a port and without a pre-shared key: any process on that host can open channels; give HOST:PORT (the opener's --udp-bind) or --psk-file on both relays"
                );
            }
            udp::Leg {
                role: link::Role::Acceptor,
                listener: None,
                socket,
                peer,
                forward: Some(forward),
                datagram,
                buffer,
                connect_timeout: c.connect_timeout,
                limits: c.limits,
                drop_every: c.drop_every,
                log: c.log,
                psk: c.psk.clone(),
            }
        }
    };
    udp::serve(leg)
}

/// A pair of relays with a UDP leg between them, as threads of this process: the opener
/// listens for TCP on `opener_listen` and sends over UDP to the acceptor, which listens on
/// `acceptor_listen` and forwards to `forward`. `in_opener` and `in_acceptor` run a closure
/// where each relay's sockets belong (a lab host's network namespace); their threads
/// inherit it. Returns the opener's TCP address: what a client connects to. The relays run
/// until the process ends, with datagrams of at most `datagram` bytes (a study's PVM route).
pub fn spawn_udp_pair(
    opener_listen: SocketAddr,
    acceptor_listen: SocketAddr,
    forward: SocketAddr,
    datagram: u64,
    in_acceptor: &dyn Fn(Box<dyn FnOnce() -> Result<SocketAddr> + Send>) -> Result<SocketAddr>,
    in_opener: &dyn Fn(Box<dyn FnOnce() -> Result<SocketAddr> + Send>) -> Result<SocketAddr>,
) -> Result<SocketAddr> {
    let datagram = check_datagram(datagram)?;
    let buffer = check_buffer(DEFAULT_BUFFER)?;
    let opener_ip = opener_listen.ip();
    let acceptor = in_acceptor(Box::new(move || {
        let socket = std::net::UdpSocket::bind(acceptor_listen)
            .with_context(|| format!("cannot listen on {acceptor_listen} (UDP)"))?;
        let addr = socket.local_addr()?;
        let leg = udp::Leg {
            role: link::Role::Acceptor,
            listener: None,
            socket,
            peer: udp::Peer::Host(opener_ip),
            forward: Some(forward),
            datagram,
            buffer,
            connect_timeout: Duration::from_secs(5),
            limits: Limits::default(),
            drop_every: 0,
            log: false,
            psk: None,
        };
        thread::Builder::new()
            .name("wb-relay-b".into())
            .spawn(move || udp::serve(leg))?;
        Ok(addr)
    }))?;
    in_opener(Box::new(move || {
        let listener = TcpListener::bind(opener_listen)
            .with_context(|| format!("cannot listen on {opener_listen}"))?;
        let socket = std::net::UdpSocket::bind(SocketAddr::new(opener_ip, 0))
            .with_context(|| format!("cannot bind the UDP leg to {opener_ip}"))?;
        let addr = listener.local_addr()?;
        let leg = udp::Leg {
            role: link::Role::Opener,
            listener: Some(listener),
            socket,
            peer: udp::Peer::Exact(acceptor),
            forward: None,
            datagram,
            buffer,
            connect_timeout: Duration::from_secs(5),
            limits: Limits::default(),
            drop_every: 0,
            log: false,
            psk: None,
        };
        thread::Builder::new()
            .name("wb-relay-a".into())
            .spawn(move || udp::serve(leg))?;
        Ok(addr)
    }))
}

/// Runs a relay until killed.
pub fn run(c: RelayConfig) -> Result<()> {
    let forward = resolve(&c.forward, DEFAULT_PORT)?;
    // Checked before anything is bound: a refused option is one line, not a listening relay.
    check_buffer(c.buffer)?;
    let mut relay = Relay::bind(c.listen, forward, c.buffer)?;
    relay.connect_timeout = c.connect_timeout;
    relay.set_limits(c.limits)?;
    relay.log = c.log;
    eprintln!(
        "wirebench relay on {} forwarding to {forward} (user-space copy, {} B per call; clients switch to one port by themselves; at most {} connections, {} per source, idle timeout {}, write timeout {})",
        relay.local_addr()?,
        relay.buffer,
        relay.limits.max_connections,
        relay.limits.max_per_source,
        crate::units::format_seconds(relay.limits.idle_timeout.as_secs_f64()),
        crate::units::format_seconds(relay.limits.write_timeout.as_secs_f64())
    );
    relay.serve()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(s: &str) -> ClientKey {
        ClientKey::of(s.parse().unwrap())
    }

    #[test]
    fn one_source_holds_its_share_and_others_still_get_places() {
        let limits = Limits {
            max_connections: 10,
            max_per_source: 4,
            ..Limits::default()
        };
        let occ = Arc::new(Occupancy::default());
        let a: Vec<Slot> = (0..4)
            .map(|_| occ.take(key("10.0.0.1"), &limits).ok().unwrap())
            .collect();
        assert!(matches!(
            occ.take(key("10.0.0.1"), &limits),
            Err(Full::Source(_))
        ));
        // An IPv6 /64 is one source, whatever the host part.
        let v6: Vec<Slot> = (1..=4)
            .map(|i| {
                occ.take(key(&format!("2001:db8::{i}")), &limits)
                    .ok()
                    .unwrap()
            })
            .collect();
        assert!(matches!(
            occ.take(key("2001:db8::99"), &limits),
            Err(Full::Source(_))
        ));
        let b: Vec<Slot> = (0..2)
            .map(|_| occ.take(key("10.0.0.2"), &limits).ok().unwrap())
            .collect();
        // Ten in all: the whole is full for a source with room of its own.
        assert!(matches!(occ.take(key("10.0.0.3"), &limits), Err(Full::All)));
        assert_eq!(occ.total.load(Ordering::SeqCst), 10);
        drop(a);
        assert_eq!(occ.total.load(Ordering::SeqCst), 6);
        let again = occ.take(key("10.0.0.1"), &limits);
        assert!(again.is_ok());
        drop((again, v6, b));
        assert_eq!(occ.total.load(Ordering::SeqCst), 0);
        assert!(occ.per_source.lock().unwrap().is_empty());
    }
}
