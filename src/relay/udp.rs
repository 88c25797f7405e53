//! The relay's I/O around [`super::link`]: one UDP socket to the peer relay, and per relayed
//! TCP connection two threads (a reader and a writer, as the TCP relay's pair has), all
//! sharing the link behind one lock. A UDP thread receives datagrams, runs the link's timers
//! (every [`TICK`]) and sends what the link queues; a reader waits for room in its channel's
//! window, reads its TCP socket once and hands the bytes to the link, as pvmd hands a task's
//! message to its peer daemon; a writer takes what arrived in order and writes it to TCP.
//!
//! Relay A (the opener) accepts TCP under the caps of the TCP relay and opens a channel per
//! connection; relay B (the acceptor) connects to its forward address for each channel the
//! peer opens, under `--max-connections` (every channel comes from one source, the peer).
//!
//! A datagram from an address other than the peer's is ignored here; one from the peer's
//! address still has to pass the link's handshake and tags (the address alone proves
//! nothing: any process of the peer's host can use it, and a spoofer any address).

use std::collections::HashMap;
use std::io::{self, Read, Write};
use std::net::{IpAddr, Shutdown, SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread;
use std::time::{Duration, Instant};

use anyhow::Result;

use super::link::{self, Counters, Event, Link, Role, Take};
use super::{Full, Limits, Occupancy, Slot};
use crate::control::access::ClientKey;
use crate::control::auth::Psk;

/// How often the UDP thread runs the link's timers when no datagram comes, and how long a
/// waiting reader or writer sleeps before it looks at its channel again (a wake-up is also
/// signalled at once on every change).
const TICK: Duration = Duration::from_millis(5);

/// Which datagrams count as the peer relay's.
#[derive(Debug, Clone, Copy)]
pub enum Peer {
    /// This address and port only.
    Exact(SocketAddr),
    /// Any port of this address (the opener's port is ephemeral unless `--udp-bind` names it).
    Host(IpAddr),
}

impl Peer {
    fn matches(&self, a: SocketAddr) -> bool {
        match *self {
            Peer::Exact(p) => {
                p.ip().to_canonical() == a.ip().to_canonical() && p.port() == a.port()
            }
            Peer::Host(ip) => ip.to_canonical() == a.ip().to_canonical(),
        }
    }
}

impl std::fmt::Display for Peer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Peer::Exact(a) => write!(f, "{a}"),
            Peer::Host(ip) => write!(f, "{ip} (any port)"),
        }
    }
}

/// One end of a UDP leg.
pub struct Leg {
    pub role: Role,
    /// The opener's TCP listener (None for the acceptor).
    pub listener: Option<TcpListener>,
    pub socket: UdpSocket,
    pub peer: Peer,
    /// The acceptor's forward address (TCP).
    pub forward: Option<SocketAddr>,
    pub datagram: usize,
    pub buffer: usize,
    pub connect_timeout: Duration,
    pub limits: Limits,
    /// Test aid: drop every n-th datagram this relay would send (0: none).
    pub drop_every: u64,
    pub log: bool,
    /// The pre-shared key the leg's session key is derived from, if the relays have one.
    pub psk: Option<Psk>,
}

struct State {
    link: Link,
    /// Datagrams handed to the socket, and dropped by `--drop-every` instead.
    handed: u64,
    dropped_by_aid: u64,
    /// Datagrams from an address other than the peer relay's, ignored.
    ignored: u64,
    send_errors: u64,
    channels_total: u64,
    channels: HashMap<u64, Meta>,
}

/// What the log says about a channel, and its TCP socket (shut when the link gives it up).
struct Meta {
    label: String,
    tcp: Option<TcpStream>,
}

struct Shared {
    state: Mutex<State>,
    changed: Condvar,
    socket: UdpSocket,
    role: Role,
    /// The TCP relay's forward address or the peer relay, for the log lines.
    far: String,
    drop_every: u64,
    log: bool,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Sends what the link queued and handles its events; returns the channels the peer
    /// opened (for the UDP thread to connect). Called with the lock held after every change.
    fn after(&self, st: &mut State) -> Vec<u64> {
        while let Some((to, d)) = st.link.poll_transmit() {
            st.handed += 1;
            if self.drop_every != 0 && st.handed.is_multiple_of(self.drop_every) {
                st.dropped_by_aid += 1;
                continue;
            }
            if self.socket.send_to(&d, to).is_err() {
                st.send_errors += 1;
            }
        }
        let mut opened = Vec::new();
        while let Some(e) = st.link.poll_event() {
            match e {
                Event::Opened(id) => opened.push(id),
                Event::Warning(line) => eprintln!("wirebench relay: {line}"),
                Event::Session(peer) => {
                    if self.log {
                        eprintln!(
                            "wirebench relay: UDP leg session with {peer} (handshake completed, leg version {})",
                            link::VERSION
                        );
                    }
                }
                Event::Closed {
                    id,
                    counters,
                    aborted,
                } => {
                    let meta = st.channels.remove(&id);
                    if let Some(tcp) = meta.as_ref().and_then(|m| m.tcp.as_ref()) {
                        let _ = tcp.shutdown(Shutdown::Both);
                    }
                    if self.log {
                        let label = meta.map(|m| m.label).unwrap_or_else(|| format!("{id:x}"));
                        if let Some(why) = aborted {
                            let why = match why {
                                link::Abort::Idle => {
                                    "no datagram either way for the idle timeout (--idle-timeout)"
                                }
                                link::Abort::Unacknowledged => {
                                    "a datagram unacknowledged for the write timeout (--write-timeout) or after every resend"
                                }
                                link::Abort::Refused => "refused here, or its TCP side failed: reset",
                                link::Abort::Reset => "reset by the peer relay",
                                link::Abort::NoSession => {
                                    "the peer relay never completed the UDP leg's handshake"
                                }
                            };
                            eprintln!("wirebench relay: {label}: {why}: closing");
                        }
                        eprintln!(
                            "wirebench relay: {label} closed: {}",
                            self.describe(&counters)
                        );
                    }
                }
            }
        }
        self.changed.notify_all();
        opened
    }

    /// Bytes and datagrams of one channel or all, up (towards the wirebench server) and down,
    /// in the TCP relay's words.
    fn describe(&self, c: &Counters) -> String {
        // The opener sends up, the acceptor receives up.
        let (up, down, dg_up, dg_down) = match self.role {
            Role::Opener => (
                c.bytes_sent,
                c.bytes_received,
                c.datagrams_sent,
                c.datagrams_received,
            ),
            Role::Acceptor => (
                c.bytes_received,
                c.bytes_sent,
                c.datagrams_received,
                c.datagrams_sent,
            ),
        };
        format!(
            "{up} bytes up (to {}), {down} bytes down; {dg_up} data datagrams up, {dg_down} data datagrams down; {} fragments of {} TCP reads; {} resent, {} duplicates dropped",
            self.far, c.fragments, c.tcp_reads, c.resent, c.duplicates
        )
    }

    /// The totals line: every channel so far, ended or not.
    fn totals(&self) -> String {
        let st = self.lock();
        let t = st.link.totals();
        let mut s = format!(
            "wirebench relay: totals over UDP: {} channels ({} open); {}; {} acks sent, {} received; {} dropped unacknowledged, {} malformed, {} from other than the peer relay ignored, {} failed verification (dropped unanswered); {} resets sent, {} received; {} cookies sent",
            st.channels_total,
            st.link.channels(),
            self.describe(&t),
            t.acks_sent,
            t.acks_received,
            t.dropped,
            t.malformed,
            st.ignored,
            t.rejected,
            t.resets_sent,
            t.resets_received,
            t.cookies_sent
        );
        if self.drop_every != 0 {
            s.push_str(&format!(
                "; {} datagrams dropped by --drop-every {} (a test aid)",
                st.dropped_by_aid, self.drop_every
            ));
        }
        if st.send_errors != 0 {
            s.push_str(&format!("; {} sends failed", st.send_errors));
        }
        s
    }
}

/// Runs a leg until the process ends; prints the totals on Ctrl-C before exiting.
pub fn serve(leg: Leg) -> Result<()> {
    let mut cfg = link::Config::new(leg.role, leg.datagram);
    cfg.give_up = leg.limits.write_timeout;
    cfg.idle = leg.limits.idle_timeout;
    if leg.role == Role::Opener {
        let mut r = [0u8; 4];
        getrandom::fill(&mut r).map_err(|e| anyhow::anyhow!("no random channel ids: {e}"))?;
        cfg.id_base = u32::from_be_bytes(r);
        if let Peer::Exact(a) = leg.peer {
            cfg.peer = Some(a);
        }
    }
    let mut secret = [0u8; 32];
    getrandom::fill(&mut secret).map_err(|e| anyhow::anyhow!("no random secret: {e}"))?;
    let keys = link::Keys {
        secret,
        psk: leg.psk.clone(),
    };
    let far = match (leg.role, leg.forward, leg.peer) {
        (Role::Acceptor, Some(f), _) => f.to_string(),
        (_, _, p) => format!("{p} over UDP"),
    };
    let shared = Arc::new(Shared {
        state: Mutex::new(State {
            link: Link::new(cfg, keys),
            handed: 0,
            dropped_by_aid: 0,
            ignored: 0,
            send_errors: 0,
            channels_total: 0,
            channels: HashMap::new(),
        }),
        changed: Condvar::new(),
        socket: leg.socket.try_clone()?,
        role: leg.role,
        far,
        drop_every: leg.drop_every,
        log: leg.log,
    });
    {
        let shared = Arc::clone(&shared);
        let _ = ctrlc::set_handler(move || {
            eprintln!("{}", shared.totals());
            std::process::exit(130);
        });
    }
    let occupancy = Arc::new(Occupancy::default());
    let chan = ChannelIo {
        buffer: leg.buffer,
        limits: leg.limits,
    };
    let udp = {
        let shared = Arc::clone(&shared);
        let occupancy = Arc::clone(&occupancy);
        let (peer, forward, connect_timeout, limits) =
            (leg.peer, leg.forward, leg.connect_timeout, leg.limits);
        thread::Builder::new()
            .name("wb-relay-udp".into())
            .spawn(move || {
                udp_loop(
                    &shared,
                    peer,
                    forward,
                    connect_timeout,
                    &occupancy,
                    limits,
                    chan,
                )
            })?
    };
    match leg.listener {
        Some(listener) => accept_loop(&shared, listener, &occupancy, leg.limits, chan),
        None => {
            let _ = udp.join();
        }
    }
    eprintln!("{}", shared.totals());
    Ok(())
}

#[derive(Clone, Copy)]
struct ChannelIo {
    buffer: usize,
    limits: Limits,
}

/// Receives datagrams and runs the timers; connects the channels the peer opens.
#[allow(clippy::too_many_arguments)]
fn udp_loop(
    shared: &Arc<Shared>,
    peer: Peer,
    forward: Option<SocketAddr>,
    connect_timeout: Duration,
    occupancy: &Arc<Occupancy>,
    limits: Limits,
    chan: ChannelIo,
) {
    let _ = shared.socket.set_read_timeout(Some(TICK));
    let mut buf = vec![0u8; 65_536];
    // Every channel comes from the peer: the per-source cap would be the whole cap.
    let acceptor_limits = Limits {
        max_per_source: limits.max_connections,
        ..limits
    };
    loop {
        let got = shared.socket.recv_from(&mut buf);
        let now = Instant::now();
        let mut st = shared.lock();
        match got {
            Ok((n, from)) if peer.matches(from) => st.link.handle(now, from, &buf[..n]),
            Ok(_) => st.ignored += 1,
            Err(_) => {}
        }
        st.link.handle_timeout(now);
        let opened = shared.after(&mut st);
        for id in opened {
            let Some(forward) = forward else {
                continue;
            };
            let key = ClientKey::of(peer_ip(peer));
            match occupancy.take(key, &acceptor_limits) {
                Ok(slot) => {
                    st.channels_total += 1;
                    st.channels.insert(
                        id,
                        Meta {
                            label: format!("channel {id:x} over UDP -> {forward}"),
                            tcp: None,
                        },
                    );
                    let shared2 = Arc::clone(shared);
                    let spawned = thread::Builder::new()
                        .name("wb-relay-connect".into())
                        .spawn(move || {
                            connect_channel(&shared2, id, forward, connect_timeout, slot, chan)
                        });
                    if spawned.is_err() {
                        st.link.refuse(id, now);
                    }
                }
                Err(full) => {
                    if shared.log {
                        let why = match full {
                            Full::All | Full::Source(_) => format!(
                                "{} connections relayed already (--max-connections)",
                                limits.max_connections
                            ),
                        };
                        eprintln!("wirebench relay: channel {id:x} refused: {why}");
                    }
                    st.link.refuse(id, now);
                }
            }
        }
        shared.after(&mut st);
    }
}

fn peer_ip(p: Peer) -> IpAddr {
    match p {
        Peer::Exact(a) => a.ip(),
        Peer::Host(ip) => ip,
    }
}

/// The acceptor's side of a new channel: its TCP connection to the forward address.
fn connect_channel(
    shared: &Arc<Shared>,
    id: u64,
    forward: SocketAddr,
    connect_timeout: Duration,
    slot: Slot,
    chan: ChannelIo,
) {
    match TcpStream::connect_timeout(&forward, connect_timeout) {
        Ok(tcp) => run_channel(shared, id, tcp, slot, chan),
        Err(e) => {
            if shared.log {
                eprintln!("wirebench relay: channel {id:x}: cannot reach {forward}: {e}");
            }
            let mut st = shared.lock();
            st.link.refuse(id, Instant::now());
            shared.after(&mut st);
        }
    }
}

/// The opener's accept loop: the TCP relay's, each connection a channel.
fn accept_loop(
    shared: &Arc<Shared>,
    listener: TcpListener,
    occupancy: &Arc<Occupancy>,
    limits: Limits,
    chan: ChannelIo,
) {
    for conn in listener.incoming() {
        let client = match conn {
            Ok(c) => c,
            Err(e) => {
                eprintln!("wirebench relay: accept failed: {e}");
                thread::sleep(Duration::from_millis(50));
                continue;
            }
        };
        let Ok(source) = client.peer_addr() else {
            continue;
        };
        let slot = match occupancy.take(ClientKey::of(source.ip()), &limits) {
            Ok(slot) => slot,
            Err(full) => {
                if shared.log {
                    let why = match full {
                        Full::All => format!(
                            "{} connections relayed already (--max-connections)",
                            limits.max_connections
                        ),
                        Full::Source(key) => format!(
                            "{} connections from {key} relayed already (--max-per-source)",
                            limits.max_per_source
                        ),
                    };
                    eprintln!("wirebench relay: {source} refused: {why}");
                }
                continue;
            }
        };
        let id = {
            let mut st = shared.lock();
            let id = st.link.open(Instant::now());
            st.channels_total += 1;
            st.channels.insert(
                id,
                Meta {
                    label: format!("{source} -> channel {id:x} over UDP"),
                    tcp: None,
                },
            );
            shared.after(&mut st);
            id
        };
        let shared = Arc::clone(shared);
        let _ = thread::Builder::new()
            .name("wb-relay-chan".into())
            .spawn(move || run_channel(&shared, id, client, slot, chan));
    }
}

/// Relays one channel: this thread writes what arrives to TCP, a second one reads TCP.
fn run_channel(shared: &Arc<Shared>, id: u64, tcp: TcpStream, slot: Slot, chan: ChannelIo) {
    let _slot = slot;
    let _ = tcp.set_nodelay(true);
    let reader_tcp = match (
        tcp.set_write_timeout(Some(chan.limits.write_timeout)),
        tcp.try_clone(),
        tcp.try_clone(),
    ) {
        (Ok(()), Ok(r), Ok(kept)) => {
            let mut st = shared.lock();
            match st.channels.get_mut(&id) {
                Some(m) => m.tcp = Some(kept),
                // Given up already.
                None => return,
            }
            r
        }
        _ => {
            let mut st = shared.lock();
            st.link.refuse(id, Instant::now());
            shared.after(&mut st);
            return;
        }
    };
    let reader = {
        let shared = Arc::clone(shared);
        thread::Builder::new()
            .name("wb-relay-read".into())
            .spawn(move || read_tcp(&shared, id, reader_tcp, chan.buffer))
    };
    if reader.is_err() {
        let mut st = shared.lock();
        st.link.refuse(id, Instant::now());
        shared.after(&mut st);
    }
    write_tcp(shared, id, tcp);
    if let Ok(h) = reader {
        let _ = h.join();
    }
}

/// TCP to the link: one read per free window, each read cut into datagrams.
fn read_tcp(shared: &Shared, id: u64, mut tcp: TcpStream, buffer: usize) {
    let mut buf = vec![0u8; buffer];
    loop {
        let room = {
            let mut st = shared.lock();
            loop {
                match st.link.send_room(id) {
                    None => return,
                    Some(0) => {
                        st = shared
                            .changed
                            .wait_timeout(st, TICK)
                            .unwrap_or_else(|p| p.into_inner())
                            .0;
                    }
                    Some(r) => break r,
                }
            }
        };
        let n = match tcp.read(&mut buf[..room.min(buffer)]) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(_) => break,
        };
        let mut st = shared.lock();
        // Only this thread sends on the channel, and room only grows: all of it is taken.
        st.link.send(id, Instant::now(), &buf[..n]);
        shared.after(&mut st);
    }
    let mut st = shared.lock();
    st.link.finish(id, Instant::now());
    shared.after(&mut st);
}

/// The link to TCP: what arrived in order, then the end. The TCP relay's rule holds: the pair
/// ends as soon as either side closes, so the peer's FIN shuts this connection both ways
/// (its reader then ends, and sends this side's FIN).
fn write_tcp(shared: &Shared, id: u64, mut tcp: TcpStream) {
    loop {
        let t = {
            let mut st = shared.lock();
            loop {
                match st.link.take(id) {
                    Take::Nothing => {
                        st = shared
                            .changed
                            .wait_timeout(st, TICK)
                            .unwrap_or_else(|p| p.into_inner())
                            .0;
                    }
                    t => {
                        shared.after(&mut st);
                        break t;
                    }
                }
            }
        };
        match t {
            Take::Data(v) => {
                if tcp.write_all(&v).is_err() {
                    // Stuck or reset: what comes is dropped, and the channel ends.
                    let _ = tcp.shutdown(Shutdown::Both);
                    let mut st = shared.lock();
                    st.link.refuse(id, Instant::now());
                    shared.after(&mut st);
                    return;
                }
            }
            Take::Fin | Take::Gone | Take::Nothing => {
                let _ = tcp.shutdown(Shutdown::Both);
                return;
            }
        }
    }
}
