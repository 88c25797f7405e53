//! The UDP leg between two relays, as a state machine without sockets or clocks (the
//! quinn-proto style): the caller hands it datagrams (with their source address), bytes read
//! from TCP and the time, and takes from it datagrams to send (with their destination), bytes
//! to write to TCP and events. The relay's I/O loop (`super::udp`) drives it; the tests below
//! drive two of them against each other in memory.
//!
//! It does what PVM's daemons do between hosts (Geist et al., *PVM 3 user's guide and
//! reference manual*): messages cross as UDP datagrams of at most UDPMAXLEN (4 KiB) bytes, the
//! daemon cutting them up and putting them together again, numbering, acknowledging and
//! resending them itself, with a small fixed window of datagrams not yet acknowledged.
//!
//! Unlike pvmd's, the leg does not trust an address: before any channel, the opener proves
//! that it receives at its source address (a stateless cookie handshake, [`super::auth`]),
//! and every datagram after it carries a tag of the session's key (derived from the
//! pre-shared key when the relays have one). A datagram that fails is dropped unanswered and
//! counted ([`Counters::rejected`]); the acceptor answers an unverified source only with a
//! cookie shorter than the INIT it got, so it cannot be made to send more than it received.
//! (Before, any OPEN from the peer's address made the acceptor connect to its server, and
//! every channel, even a refused one, resent its frames every 25 ms for 30 s: 600 OPENs from a
//! strange port brought 39.7 MB back.)
//!
//! Each relayed TCP connection is a *channel* of the link: the relay that accepted it (the
//! opener) names it with a 64-bit id, whose upper half is a random number drawn at the
//! opener's start, so that a restarted opener never reuses a live id of the acceptor. Each
//! direction of a channel is a sequence of frames numbered from 0: an OPEN (opener to
//! acceptor only), the bytes of TCP reads cut into pieces that fill a datagram, then a FIN
//! when the TCP side ended. Every frame is acknowledged alone (as pvmd acknowledges each
//! packet); a frame not acknowledged is sent again after [`RTO`], then after twice as long
//! each time up to [`MAX_RTO`], at most [`MAX_RESENDS`] times (an acknowledgement on the
//! channel starts the back-off again); at most [`WINDOW`] numbers are in flight (from the
//! oldest unacknowledged one) per channel and direction. A channel that will never reach
//! TCP (refused, or its connection failed) is ended at once with one RESET, never resent.
//!
//! Datagram, big-endian: the leg's version byte (0x80 | [`VERSION`]), kind (1 = data, 2 =
//! ack, 3 = reset; 4-7 the handshake's), flags (1 = OPEN, 2 = FIN), channel id (8 bytes),
//! sequence number (8 bytes), a data frame's bytes, then the tag ([`auth::TAG`] bytes):
//! [`HEADER`] bytes besides the payload, so that a datagram of `datagram` bytes carries
//! `datagram - HEADER` of them. A relay of the first version (no version byte) is told apart
//! and named in one line.

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use super::auth::{self, Nonce, Secret, SessionKey, NONCE};
use crate::control::auth::Psk;

/// The version of the leg's wire format: 2 added the version byte, the handshake and the
/// tags. A relay of another version is refused in one line, not misread.
pub const VERSION: u8 = 2;
const VERSION_BYTE: u8 = 0x80 | VERSION;
/// Bytes before a data frame's payload.
const FIXED: usize = 19;
/// Bytes of every datagram of a session besides its payload: the header and the tag.
pub const HEADER: usize = FIXED + auth::TAG;
/// Frames in flight per channel and direction: the sender sends number `s` only while
/// `s < oldest unacknowledged + WINDOW`, and the receiver keeps frames out of order only
/// within the window. Small and fixed, as pvmd's; the number is ours.
pub const WINDOW: u64 = 8;
/// How long a frame waits for its acknowledgement before it is first sent again (pvmd's
/// retry interval is fixed; here it is where the back-off starts). No RTT estimate: on a
/// loopback or LAN path an acknowledgement takes tens of microseconds, so only a lost
/// datagram (or a descheduled relay) waits this long.
pub const RTO: Duration = Duration::from_millis(25);
/// The back-off's longest wait between two sends of a frame.
pub const MAX_RTO: Duration = Duration::from_secs(1);
/// Resends of a frame without any acknowledgement on its channel before the channel is given
/// up: about 25 s of silence with the back-off above, as long as the default write timeout.
pub const MAX_RESENDS: u32 = 30;
/// Resends of a frame after which the opener makes a new session (the channels carry on over
/// it): an acceptor that restarted has forgotten the old one and drops its datagrams unanswered,
/// so without this its channels would wait out every resend.
pub const REKEY_AFTER: u32 = 5;
/// Handshake messages sent (first and resends) before the opener says the peer does not
/// answer.
pub const HANDSHAKE_TRIES: u32 = 12;
/// Bytes of an INIT, padding included: the acceptor's answer (a COOKIE, [`COOKIE_LEN`]) is
/// shorter, so a source it has not verified gets back less than it sent.
pub const INIT_LEN: usize = 64;
const COOKIE_LEN: usize = 3 + 2 * NONCE;
const ECHO_LEN: usize = 3 + 3 * NONCE;
const ACCEPT_LEN: usize = 3 + 2 * NONCE + auth::TAG;
/// A cookie holds for the time slot it was made in and the next one.
const COOKIE_SLOT: Duration = Duration::from_secs(30);
/// PVM's UDPMAXLEN: the default largest datagram of the link, header included.
pub const DEFAULT_DATAGRAM: usize = 4096;
/// The smallest datagram accepted: a header and 29 bytes.
pub const MIN_DATAGRAM: usize = 64;
/// The largest UDP payload over IPv4.
pub const MAX_DATAGRAM: usize = 65_507;
/// Channel ids remembered after their channel ended, so that a late or resent frame of an
/// ended channel is acknowledged (and dropped) instead of opening it again.
const RETIRED_KEPT: usize = 4096;

const KIND_DATA: u8 = 1;
const KIND_ACK: u8 = 2;
const KIND_RESET: u8 = 3;
const KIND_INIT: u8 = 4;
const KIND_COOKIE: u8 = 5;
const KIND_ECHO: u8 = 6;
const KIND_ACCEPT: u8 = 7;
const FLAG_OPEN: u8 = 1;
const FLAG_FIN: u8 = 2;
/// On handshake messages: the sender has a pre-shared key.
const FLAG_KEYED: u8 = 1;

/// The wait before the resend that follows `resends` resends: [`RTO`] doubled each time, at
/// most [`MAX_RTO`].
pub fn backoff(resends: u32) -> Duration {
    RTO.saturating_mul(1u32 << resends.min(16)).min(MAX_RTO)
}

/// Which end of the link: the opener names channels (relay A, which accepts TCP), the
/// acceptor opens a TCP connection for each (relay B).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    Opener,
    Acceptor,
}

#[derive(Debug, Clone)]
pub struct Config {
    pub role: Role,
    /// Largest datagram, header included, bytes.
    pub datagram: usize,
    /// A channel whose oldest unacknowledged frame was first sent this long ago is given up.
    pub give_up: Duration,
    /// A channel with no datagram received and none sent for the first time for this long is
    /// given up.
    pub idle: Duration,
    /// Bytes a channel holds for its TCP side (in order, and out of order) at most: a frame
    /// beyond it is dropped unacknowledged, so that a TCP peer that reads slowly slows its
    /// sender (which resends) instead of growing the relay.
    pub receive_cap: usize,
    /// The upper half of the channel ids of an opener.
    pub id_base: u32,
    /// The opener's peer relay: where its handshake and frames go.
    pub peer: Option<SocketAddr>,
}

impl Config {
    pub fn new(role: Role, datagram: usize) -> Config {
        let datagram = datagram.clamp(MIN_DATAGRAM, MAX_DATAGRAM);
        Config {
            role,
            datagram,
            give_up: Duration::from_secs(30),
            idle: Duration::from_secs(120),
            receive_cap: 4 * WINDOW as usize * (datagram - HEADER),
            id_base: 0,
            peer: None,
        }
    }

    /// Payload bytes per data datagram.
    pub fn payload(&self) -> usize {
        self.datagram - HEADER
    }
}

/// What authenticates a link: the relay's own random secret (its cookies and nonces), and
/// the pre-shared key if it has one.
pub struct Keys {
    pub secret: [u8; 32],
    pub psk: Option<Psk>,
}

/// What a link or one channel counted. "Sent" and "received" data datagrams are counted once
/// each (first sends, frames accepted new); resends and duplicates apart.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counters {
    /// Bytes read from TCP and carried to the peer relay.
    pub bytes_sent: u64,
    /// Bytes from the peer relay handed to TCP, in order.
    pub bytes_received: u64,
    /// Data datagrams sent (first sends: OPEN, data, FIN).
    pub datagrams_sent: u64,
    /// Data datagrams accepted from the peer (new, not duplicates).
    pub datagrams_received: u64,
    pub acks_sent: u64,
    pub acks_received: u64,
    /// TCP reads handed to the link.
    pub tcp_reads: u64,
    /// Data datagrams made from them (a read larger than a datagram's payload makes several).
    pub fragments: u64,
    /// Data datagrams sent again without their acknowledgement.
    pub resent: u64,
    /// Data datagrams received again (already accepted): acknowledged again and dropped.
    pub duplicates: u64,
    /// Data datagrams dropped unacknowledged: beyond the window, beyond the receive cap, or
    /// of a channel whose OPEN has not come yet.
    pub dropped: u64,
    /// Datagrams that are not of this protocol (too short, unknown kind).
    pub malformed: u64,
    /// Datagrams that failed verification (no session, a wrong tag or cookie, another
    /// version of the leg): dropped, never answered.
    pub rejected: u64,
    /// RESETs sent (a channel refused or failed here) and received.
    pub resets_sent: u64,
    pub resets_received: u64,
    /// COOKIEs sent, each in answer to one INIT at least as long.
    pub cookies_sent: u64,
}

impl Counters {
    fn add(&mut self, o: &Counters) {
        self.bytes_sent += o.bytes_sent;
        self.bytes_received += o.bytes_received;
        self.datagrams_sent += o.datagrams_sent;
        self.datagrams_received += o.datagrams_received;
        self.acks_sent += o.acks_sent;
        self.acks_received += o.acks_received;
        self.tcp_reads += o.tcp_reads;
        self.fragments += o.fragments;
        self.resent += o.resent;
        self.duplicates += o.duplicates;
        self.dropped += o.dropped;
        self.malformed += o.malformed;
        self.rejected += o.rejected;
        self.resets_sent += o.resets_sent;
        self.resets_received += o.resets_received;
        self.cookies_sent += o.cookies_sent;
    }
}

/// Why a channel ended without both its FINs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Abort {
    /// No datagram for [`Config::idle`].
    Idle,
    /// A frame unacknowledged for [`Config::give_up`], or after [`MAX_RESENDS`] resends.
    Unacknowledged,
    /// Refused or failed here: one RESET went to the peer.
    Refused,
    /// The peer sent a RESET.
    Reset,
    /// The peer relay never completed the handshake.
    NoSession,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// The peer opened a channel (acceptor): connect it, or [`Link::refuse`] it.
    Opened(u64),
    /// A channel is gone, with what it counted; `aborted` when it did not end by both FINs.
    Closed {
        id: u64,
        counters: Counters,
        aborted: Option<Abort>,
    },
    /// A session with the peer relay at this address began (a handshake completed).
    Session(SocketAddr),
    /// Something the operator must hear of, in one line (a relay of another version or with
    /// another key, a peer that does not answer); each kind once.
    Warning(String),
}

/// What [`Link::take`] hands the TCP writer of a channel.
#[derive(Debug, PartialEq, Eq)]
pub enum Take {
    Data(Vec<u8>),
    /// The peer's TCP side ended and every byte before it was taken.
    Fin,
    /// Nothing yet.
    Nothing,
    /// No such channel (ended, or given up).
    Gone,
}

struct Frame {
    flags: u8,
    bytes: Vec<u8>,
    first_sent: Instant,
    last_sent: Instant,
    /// Resends since the channel's last acknowledgement: the back-off's step.
    resends: u32,
}

impl Frame {
    fn due(&self) -> Instant {
        self.last_sent + backoff(self.resends)
    }
}

struct Chan {
    // Sending.
    next_seq: u64,
    unacked: BTreeMap<u64, Frame>,
    fin_queued: bool,
    // Receiving.
    next_expected: u64,
    early: BTreeMap<u64, (u8, Vec<u8>)>,
    early_bytes: usize,
    delivered: VecDeque<u8>,
    fin_received: bool,
    fin_taken: bool,
    last_activity: Instant,
    counters: Counters,
}

impl Chan {
    fn new(now: Instant) -> Chan {
        Chan {
            next_seq: 0,
            unacked: BTreeMap::new(),
            fin_queued: false,
            next_expected: 0,
            early: BTreeMap::new(),
            early_bytes: 0,
            delivered: VecDeque::new(),
            fin_received: false,
            fin_taken: false,
            last_activity: now,
            counters: Counters::default(),
        }
    }

    /// Numbers the sender may still use before the window is full.
    fn window_left(&self) -> u64 {
        let oldest = self.unacked.keys().next().copied().unwrap_or(self.next_seq);
        (oldest + WINDOW).saturating_sub(self.next_seq)
    }

    fn done(&self) -> bool {
        self.fin_queued && self.unacked.is_empty() && self.fin_received && self.fin_taken
    }
}

/// Where the link's session with its peer relay stands.
enum Session {
    /// No handshake yet (an opener starts one at its first timeout).
    None,
    /// The opener's handshake: INIT sent, then ECHO once the cookie came.
    Opening {
        na: Nonce,
        cookie: Option<Nonce>,
        tries: u32,
        due: Instant,
    },
    /// The opener's handshake went unanswered; the next channel starts another.
    Failed,
    Up {
        key: SessionKey,
        na: Nonce,
    },
}

/// How a remembered channel ended: a late frame of a reset one is answered with a RESET, of
/// one ended by FINs with an acknowledgement.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Ended {
    Finished,
    Reset,
}

/// Warnings, each said once.
const WARN_OLD_VERSION: u8 = 1;
const WARN_OTHER_VERSION: u8 = 2;
const WARN_KEY_MISMATCH: u8 = 3;
const WARN_NO_ANSWER: u8 = 4;

/// One end of the link.
pub struct Link {
    cfg: Config,
    secret: Secret,
    psk: Option<Psk>,
    session: Session,
    /// Where frames go: the opener's peer, or the address of the acceptor's session.
    peer: Option<SocketAddr>,
    /// The first time seen: the cookies' time slots count from it.
    epoch: Option<Instant>,
    handshakes: u64,
    next_id: u32,
    chans: HashMap<u64, Chan>,
    retired: HashMap<u64, Ended>,
    retired_order: VecDeque<u64>,
    /// Frames of the session, sealed when they leave.
    out: VecDeque<Vec<u8>>,
    /// Handshake messages, complete, with where they go.
    ctl: VecDeque<(SocketAddr, Vec<u8>)>,
    events: VecDeque<Event>,
    warned: HashSet<u8>,
    /// Counts of the channels that ended, and of what belongs to no channel.
    ended: Counters,
}

fn encode(kind: u8, flags: u8, id: u64, seq: u64, bytes: &[u8]) -> Vec<u8> {
    let mut d = Vec::with_capacity(HEADER + bytes.len());
    d.push(VERSION_BYTE);
    d.push(kind);
    d.push(flags);
    d.extend_from_slice(&id.to_be_bytes());
    d.extend_from_slice(&seq.to_be_bytes());
    d.extend_from_slice(bytes);
    d
}

fn be_u64(b: &[u8]) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[..8]);
    u64::from_be_bytes(a)
}

fn nonce_at(d: &[u8], at: usize) -> Nonce {
    let mut n = [0u8; NONCE];
    n.copy_from_slice(&d[at..at + NONCE]);
    n
}

impl Link {
    pub fn new(cfg: Config, keys: Keys) -> Link {
        let peer = match cfg.role {
            Role::Opener => cfg.peer,
            Role::Acceptor => None,
        };
        Link {
            cfg,
            secret: Secret::new(&keys.secret),
            psk: keys.psk,
            session: Session::None,
            peer,
            epoch: None,
            handshakes: 0,
            next_id: 1,
            chans: HashMap::new(),
            retired: HashMap::new(),
            retired_order: VecDeque::new(),
            out: VecDeque::new(),
            ctl: VecDeque::new(),
            events: VecDeque::new(),
            warned: HashSet::new(),
            ended: Counters::default(),
        }
    }

    pub fn config(&self) -> &Config {
        &self.cfg
    }

    /// Channels open now.
    pub fn channels(&self) -> usize {
        self.chans.len()
    }

    /// Whether a handshake completed and its session holds.
    pub fn is_up(&self) -> bool {
        matches!(self.session, Session::Up { .. })
    }

    /// Everything counted so far: ended channels, live ones and the link's own.
    pub fn totals(&self) -> Counters {
        let mut t = self.ended;
        for c in self.chans.values() {
            t.add(&c.counters);
        }
        t
    }

    /// What one live channel counted so far.
    pub fn channel_counters(&self, id: u64) -> Option<Counters> {
        self.chans.get(&id).map(|c| c.counters)
    }

    /// Opens a channel (opener): its OPEN is queued, and goes once the session is up.
    pub fn open(&mut self, now: Instant) -> u64 {
        if matches!(self.session, Session::Failed) {
            self.start_handshake(now);
        }
        let id = (u64::from(self.cfg.id_base) << 32) | u64::from(self.next_id);
        self.next_id = self.next_id.wrapping_add(1).max(1);
        self.chans.insert(id, Chan::new(now));
        self.queue_frame(id, now, FLAG_OPEN, Vec::new());
        id
    }

    /// Bytes [`Link::send`] takes now on a channel: what the free part of the window holds.
    /// None once the channel is finishing or gone (its TCP reader stops).
    pub fn send_room(&self, id: u64) -> Option<usize> {
        let c = self.chans.get(&id)?;
        if c.fin_queued {
            return None;
        }
        Some(c.window_left() as usize * self.cfg.payload())
    }

    /// Takes the bytes of one TCP read, cut into datagrams; returns how many it took (at most
    /// [`Link::send_room`]).
    pub fn send(&mut self, id: u64, now: Instant, bytes: &[u8]) -> usize {
        let Some(room) = self.send_room(id) else {
            return 0;
        };
        let take = bytes.len().min(room);
        if take == 0 {
            return 0;
        }
        let payload = self.cfg.payload();
        let mut pieces = 0u64;
        for piece in bytes[..take].chunks(payload) {
            self.queue_frame(id, now, 0, piece.to_vec());
            pieces += 1;
        }
        if let Some(c) = self.chans.get_mut(&id) {
            c.counters.tcp_reads += 1;
            c.counters.fragments += pieces;
            c.counters.bytes_sent += take as u64;
        }
        take
    }

    /// The channel's TCP side ended (or failed): its FIN is queued. Idempotent.
    pub fn finish(&mut self, id: u64, now: Instant) {
        let Some(c) = self.chans.get_mut(&id) else {
            return;
        };
        if c.fin_queued {
            return;
        }
        c.fin_queued = true;
        self.queue_frame(id, now, FLAG_FIN, Vec::new());
    }

    /// The channel will never reach TCP (refused, or its connection failed): it ends here at
    /// once, with one RESET to the peer and nothing left queued or to resend.
    pub fn refuse(&mut self, id: u64, _now: Instant) {
        if !self.chans.contains_key(&id) {
            return;
        }
        let id_bytes = id.to_be_bytes();
        self.out.retain(|d| d[3..11] != id_bytes);
        self.ended.resets_sent += 1;
        self.out.push_back(encode(KIND_RESET, 0, id, 0, &[]));
        self.retire(id, Some(Abort::Refused));
    }

    /// Bytes received in order for the channel's TCP side, all there are.
    pub fn take(&mut self, id: u64) -> Take {
        let Some(c) = self.chans.get_mut(&id) else {
            return Take::Gone;
        };
        if !c.delivered.is_empty() {
            let v: Vec<u8> = c.delivered.drain(..).collect();
            return Take::Data(v);
        }
        if c.fin_received {
            c.fin_taken = true;
            self.retire_if_done(id);
            return Take::Fin;
        }
        Take::Nothing
    }

    /// The next datagram to send, and where to.
    pub fn poll_transmit(&mut self) -> Option<(SocketAddr, Vec<u8>)> {
        if let Some(t) = self.ctl.pop_front() {
            return Some(t);
        }
        let (Session::Up { key, .. }, Some(to)) = (&self.session, self.peer) else {
            return None;
        };
        let mut d = self.out.pop_front()?;
        key.seal(&mut d);
        Some((to, d))
    }

    pub fn poll_event(&mut self) -> Option<Event> {
        self.events.pop_front()
    }

    /// When [`Link::handle_timeout`] has work next: the earliest resend or handshake step.
    pub fn next_timeout(&self) -> Option<Instant> {
        match &self.session {
            Session::Opening { due, .. } => Some(*due),
            Session::Up { .. } => self
                .chans
                .values()
                .flat_map(|c| c.unacked.values().map(Frame::due))
                .min(),
            Session::None if self.cfg.role == Role::Opener => self.epoch,
            _ => None,
        }
    }

    /// Resends what waited its back-off, gives up channels idle or unacknowledged too long,
    /// and runs the opener's handshake.
    pub fn handle_timeout(&mut self, now: Instant) {
        self.epoch.get_or_insert(now);
        self.handshake_timeout(now);
        let up = self.is_up();
        let mut gone = Vec::new();
        let mut rekey = false;
        for (&id, c) in self.chans.iter_mut() {
            if now.saturating_duration_since(c.last_activity) >= self.cfg.idle {
                gone.push((id, Abort::Idle));
                continue;
            }
            if c.unacked
                .values()
                .next()
                .is_some_and(|f| now.saturating_duration_since(f.first_sent) >= self.cfg.give_up)
            {
                gone.push((id, Abort::Unacknowledged));
                continue;
            }
            if !up {
                // Nothing has left yet: the frames wait in `out` for the session.
                continue;
            }
            if c.unacked
                .values()
                .any(|f| f.resends >= MAX_RESENDS && now >= f.due())
            {
                gone.push((id, Abort::Unacknowledged));
                continue;
            }
            for (&seq, f) in c.unacked.iter_mut() {
                if now >= f.due() {
                    f.last_sent = now;
                    f.resends += 1;
                    rekey |= f.resends == REKEY_AFTER;
                    c.counters.resent += 1;
                    self.out
                        .push_back(encode(KIND_DATA, f.flags, id, seq, &f.bytes));
                }
            }
        }
        gone.sort_unstable_by_key(|&(id, _)| id);
        let unanswered = gone.iter().any(|&(_, w)| w == Abort::Unacknowledged);
        for (id, why) in gone {
            self.retire(id, Some(why));
        }
        // Nothing answers: the acceptor may have restarted and forgotten the session. The
        // opener makes a new one (channels still alive carry on over it).
        if (unanswered || rekey) && up && self.cfg.role == Role::Opener {
            self.start_handshake(now);
        }
    }

    fn handshake_timeout(&mut self, now: Instant) {
        if self.cfg.role != Role::Opener {
            return;
        }
        match &mut self.session {
            Session::None => self.start_handshake(now),
            Session::Opening {
                na,
                cookie,
                tries,
                due,
            } if now >= *due => {
                if *tries >= HANDSHAKE_TRIES {
                    let peer = self
                        .peer
                        .map(|p| p.to_string())
                        .unwrap_or_else(|| "?".into());
                    self.session = Session::Failed;
                    self.warn(
                        WARN_NO_ANSWER,
                        format!(
                            "the relay at {peer} did not complete the UDP leg's handshake (leg version {VERSION}) in {HANDSHAKE_TRIES} tries: is it a wirebench relay of this version with --listen-udp there, --udp-peer naming this relay, and the same --psk-file?"
                        ),
                    );
                    let ids: Vec<u64> = self.chans.keys().copied().collect();
                    for id in ids {
                        self.retire(id, Some(Abort::NoSession));
                    }
                    return;
                }
                let (na, cookie) = (*na, *cookie);
                *tries += 1;
                *due = now + backoff(*tries);
                self.send_handshake(&na, cookie.as_ref());
            }
            _ => {}
        }
    }

    fn start_handshake(&mut self, now: Instant) {
        self.handshakes += 1;
        let na = self
            .secret
            .nonce(&[b"opener", &self.handshakes.to_be_bytes()]);
        self.session = Session::Opening {
            na,
            cookie: None,
            tries: 1,
            due: now + backoff(1),
        };
        self.send_handshake(&na, None);
    }

    fn keyed_flag(&self) -> u8 {
        if self.psk.is_some() {
            FLAG_KEYED
        } else {
            0
        }
    }

    /// The opener's INIT (no cookie yet) or ECHO.
    fn send_handshake(&mut self, na: &Nonce, cookie: Option<&Nonce>) {
        let Some(to) = self.peer else {
            return;
        };
        let mut d = vec![VERSION_BYTE, 0, self.keyed_flag()];
        d.extend_from_slice(na);
        match cookie {
            None => {
                d[1] = KIND_INIT;
                d.resize(INIT_LEN, 0);
            }
            Some(c) => {
                d[1] = KIND_ECHO;
                d.extend_from_slice(c);
                let proof = self
                    .psk
                    .as_ref()
                    .map(|k| auth::proof(k, na, c))
                    .unwrap_or([0u8; NONCE]);
                d.extend_from_slice(&proof);
            }
        }
        self.ctl.push_back((to, d));
    }

    fn warn(&mut self, kind: u8, line: String) {
        if self.warned.insert(kind) {
            self.events.push_back(Event::Warning(line));
        }
    }

    fn reject(&mut self) {
        self.ended.rejected += 1;
    }

    fn slot(&mut self, now: Instant) -> u64 {
        let epoch = *self.epoch.get_or_insert(now);
        (now.saturating_duration_since(epoch).as_secs() / COOKIE_SLOT.as_secs()) + 1
    }

    /// One datagram from `from` (an address the relay takes datagrams from at all).
    pub fn handle(&mut self, now: Instant, from: SocketAddr, d: &[u8]) {
        let Some(&first) = d.first() else {
            self.ended.malformed += 1;
            return;
        };
        if first != VERSION_BYTE {
            self.reject();
            if (first == 1 || first == 2) && d.len() >= 18 {
                self.warn(
                    WARN_OLD_VERSION,
                    format!(
                        "the relay at {from} speaks the UDP leg's first version (an older wirebench, without authentication): both relays of a leg must run the same version (leg version {VERSION}); its datagrams are dropped"
                    ),
                );
            } else if first & 0x80 != 0 {
                self.warn(
                    WARN_OTHER_VERSION,
                    format!(
                        "the relay at {from} speaks the UDP leg's version {} and this one version {VERSION}: run the same wirebench on both; its datagrams are dropped",
                        first & 0x7f
                    ),
                );
            }
            return;
        }
        if d.len() < 3 {
            self.ended.malformed += 1;
            return;
        }
        match (d[1], self.cfg.role) {
            (KIND_INIT, Role::Acceptor) => self.on_init(now, from, d),
            (KIND_ECHO, Role::Acceptor) => self.on_echo(now, from, d),
            (KIND_COOKIE, Role::Opener) => self.on_cookie(now, d),
            (KIND_ACCEPT, Role::Opener) => self.on_accept(now, from, d),
            (KIND_DATA | KIND_ACK | KIND_RESET, _) => {
                let Session::Up { key, .. } = &self.session else {
                    self.reject();
                    return;
                };
                let Some(body) = key.open(d) else {
                    self.reject();
                    return;
                };
                if body.len() < FIXED || body.len() > self.cfg.datagram.max(MAX_DATAGRAM) {
                    self.ended.malformed += 1;
                    return;
                }
                let (kind, flags, id, seq) = (
                    body[1],
                    body[2],
                    be_u64(&body[3..11]),
                    be_u64(&body[11..19]),
                );
                let payload = body[FIXED..].to_vec();
                match kind {
                    KIND_ACK => self.on_ack(now, id, seq),
                    KIND_RESET => self.on_reset(id),
                    _ => self.on_data(now, flags, id, seq, &payload),
                }
            }
            _ => self.reject(),
        }
    }

    /// An INIT: answered with a cookie only, shorter than the INIT, and nothing kept.
    fn on_init(&mut self, now: Instant, from: SocketAddr, d: &[u8]) {
        if d.len() < INIT_LEN {
            self.reject();
            return;
        }
        let na = nonce_at(d, 3);
        let slot = self.slot(now);
        let cookie = self.secret.cookie(slot, from, &na);
        let mut reply = vec![VERSION_BYTE, KIND_COOKIE, self.keyed_flag()];
        reply.extend_from_slice(&na);
        reply.extend_from_slice(&cookie);
        debug_assert!(reply.len() <= d.len());
        self.ended.cookies_sent += 1;
        self.ctl.push_back((from, reply));
    }

    /// An ECHO: with a cookie made for its source (and the key's proof when this relay has a
    /// key), a session begins, replacing any before it (a restarted opener).
    fn on_echo(&mut self, now: Instant, from: SocketAddr, d: &[u8]) {
        if d.len() != ECHO_LEN {
            self.reject();
            return;
        }
        let (na, cookie) = (nonce_at(d, 3), nonce_at(d, 3 + NONCE));
        let slot = self.slot(now);
        if !self.secret.check_cookie(slot, from, &na, &cookie) {
            self.reject();
            return;
        }
        let theirs_keyed = d[2] & FLAG_KEYED != 0;
        let proved = match (&self.psk, theirs_keyed) {
            (Some(k), true) => auth::check_proof(k, &na, &cookie, &d[3 + 2 * NONCE..]),
            (None, false) => true,
            _ => false,
        };
        if !proved {
            self.reject();
            let why = match (self.psk.is_some(), theirs_keyed) {
                (true, false) => "has no pre-shared key and this one has",
                (false, true) => "has a pre-shared key and this one has none",
                _ => "has another pre-shared key than this one",
            };
            self.warn(
                WARN_KEY_MISMATCH,
                format!("the relay at {from} {why} (--psk-file): its handshakes are refused"),
            );
            return;
        }
        let nb = self.secret.nonce(&[b"acceptor", &na, &cookie]);
        let key = SessionKey::derive(self.psk.as_ref(), &na, &nb, &cookie);
        let mut reply = vec![VERSION_BYTE, KIND_ACCEPT, self.keyed_flag()];
        reply.extend_from_slice(&na);
        reply.extend_from_slice(&nb);
        key.seal(&mut reply);
        let same = matches!(&self.session, Session::Up { na: n, .. } if *n == na)
            && self.peer == Some(from);
        if !same {
            self.session = Session::Up { key, na };
            self.peer = Some(from);
            self.events.push_back(Event::Session(from));
        }
        self.ctl.push_back((from, reply));
    }

    fn on_cookie(&mut self, now: Instant, d: &[u8]) {
        let Session::Opening {
            na, cookie: None, ..
        } = &self.session
        else {
            self.reject();
            return;
        };
        if d.len() != COOKIE_LEN || nonce_at(d, 3) != *na {
            self.reject();
            return;
        }
        let na = *na;
        let theirs_keyed = d[2] & FLAG_KEYED != 0;
        if theirs_keyed != self.psk.is_some() {
            let peer = self.peer.map(|p| p.to_string()).unwrap_or_default();
            let why = if theirs_keyed {
                "has a pre-shared key and this one has none"
            } else {
                "has no pre-shared key and this one has"
            };
            self.warn(
                WARN_KEY_MISMATCH,
                format!("the relay at {peer} {why} (--psk-file): the UDP leg cannot start"),
            );
            // The handshake runs out its tries and fails the waiting channels.
            self.reject();
            return;
        }
        let cookie = nonce_at(d, 3 + NONCE);
        self.session = Session::Opening {
            na,
            cookie: Some(cookie),
            tries: 1,
            due: now + backoff(1),
        };
        self.send_handshake(&na, Some(&cookie));
    }

    fn on_accept(&mut self, now: Instant, from: SocketAddr, d: &[u8]) {
        let Session::Opening {
            na,
            cookie: Some(cookie),
            ..
        } = &self.session
        else {
            // A late ACCEPT of a session already up: nothing to do.
            if !self.is_up() {
                self.reject();
            }
            return;
        };
        if d.len() != ACCEPT_LEN || nonce_at(d, 3) != *na {
            self.reject();
            return;
        }
        let nb = nonce_at(d, 3 + NONCE);
        let key = SessionKey::derive(self.psk.as_ref(), na, &nb, cookie);
        if key.open(d).is_none() {
            self.reject();
            return;
        }
        let na = *na;
        self.session = Session::Up { key, na };
        self.events.push_back(Event::Session(from));
        // What waited for the session leaves now: its resend clocks start now (the back-off's
        // step stays: a new session does not buy a frame more resends).
        for c in self.chans.values_mut() {
            for f in c.unacked.values_mut() {
                f.last_sent = now;
            }
        }
    }

    fn on_ack(&mut self, now: Instant, id: u64, seq: u64) {
        let Some(c) = self.chans.get_mut(&id) else {
            // The ack of a resend of an ended channel.
            self.ended.acks_received += 1;
            return;
        };
        c.counters.acks_received += 1;
        if c.unacked.remove(&seq).is_some() {
            c.last_activity = now;
            // The peer answers: the back-off of what is still unacknowledged starts again.
            for f in c.unacked.values_mut() {
                f.resends = f.resends.min(1);
            }
        }
        self.retire_if_done(id);
    }

    fn on_reset(&mut self, id: u64) {
        if self.chans.contains_key(&id) {
            self.ended.resets_received += 1;
            self.retire(id, Some(Abort::Reset));
        }
    }

    fn on_data(&mut self, now: Instant, flags: u8, id: u64, seq: u64, bytes: &[u8]) {
        if !self.chans.contains_key(&id) {
            match self.retired.get(&id) {
                Some(Ended::Finished) => {
                    // A resend whose acknowledgement was lost: acknowledged again.
                    self.ended.duplicates += 1;
                    self.ack(id, seq);
                    return;
                }
                Some(Ended::Reset) => {
                    // The RESET was lost: one more, for this datagram, never resent.
                    self.ended.resets_sent += 1;
                    self.out.push_back(encode(KIND_RESET, 0, id, 0, &[]));
                    return;
                }
                None => {}
            }
            if self.cfg.role == Role::Acceptor && flags & FLAG_OPEN != 0 && seq == 0 {
                self.chans.insert(id, Chan::new(now));
                self.events.push_back(Event::Opened(id));
            } else {
                // Data before its OPEN: the sender resends it.
                self.ended.dropped += 1;
                return;
            }
        }
        let cap = self.cfg.receive_cap;
        let Some(c) = self.chans.get_mut(&id) else {
            return;
        };
        if seq < c.next_expected || c.early.contains_key(&seq) {
            c.counters.duplicates += 1;
            self.ack(id, seq);
            return;
        }
        if seq >= c.next_expected + WINDOW || c.delivered.len() + c.early_bytes + bytes.len() > cap
        {
            c.counters.dropped += 1;
            return;
        }
        c.last_activity = now;
        c.counters.datagrams_received += 1;
        c.early_bytes += bytes.len();
        c.early.insert(seq, (flags, bytes.to_vec()));
        while let Some((flags, bytes)) = c.early.remove(&c.next_expected) {
            c.next_expected += 1;
            c.early_bytes -= bytes.len();
            c.counters.bytes_received += bytes.len() as u64;
            c.delivered.extend(bytes);
            if flags & FLAG_FIN != 0 {
                c.fin_received = true;
            }
        }
        self.ack(id, seq);
        self.retire_if_done(id);
    }

    fn ack(&mut self, id: u64, seq: u64) {
        self.out.push_back(encode(KIND_ACK, 0, id, seq, &[]));
        match self.chans.get_mut(&id) {
            Some(c) => c.counters.acks_sent += 1,
            None => self.ended.acks_sent += 1,
        }
    }

    fn queue_frame(&mut self, id: u64, now: Instant, flags: u8, bytes: Vec<u8>) {
        let Some(c) = self.chans.get_mut(&id) else {
            return;
        };
        let seq = c.next_seq;
        c.next_seq += 1;
        c.last_activity = now;
        c.counters.datagrams_sent += 1;
        self.out
            .push_back(encode(KIND_DATA, flags, id, seq, &bytes));
        c.unacked.insert(
            seq,
            Frame {
                flags,
                bytes,
                first_sent: now,
                last_sent: now,
                resends: 0,
            },
        );
    }

    fn retire_if_done(&mut self, id: u64) {
        if self.chans.get(&id).is_some_and(Chan::done) {
            self.retire(id, None);
        }
    }

    fn retire(&mut self, id: u64, aborted: Option<Abort>) {
        let Some(c) = self.chans.remove(&id) else {
            return;
        };
        self.ended.add(&c.counters);
        self.events.push_back(Event::Closed {
            id,
            counters: c.counters,
            aborted,
        });
        let how = if matches!(aborted, Some(Abort::Refused | Abort::Reset)) {
            Ended::Reset
        } else {
            Ended::Finished
        };
        if self.retired.insert(id, how).is_none() {
            self.retired_order.push_back(id);
        }
        while self.retired_order.len() > RETIRED_KEPT {
            if let Some(old) = self.retired_order.pop_front() {
                self.retired.remove(&old);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    //! Two links in memory, with the datagrams between them lost, duplicated and reordered
    //! by a deterministic schedule: every byte arrives once and in order, and the resends are
    //! exactly the datagrams the schedule lost.
    use super::*;

    fn addr(s: &str) -> SocketAddr {
        s.parse().unwrap()
    }

    fn a_addr() -> SocketAddr {
        addr("127.0.0.1:4001")
    }

    fn b_addr() -> SocketAddr {
        addr("127.0.0.1:4002")
    }

    fn keys(n: u8, psk: Option<&str>) -> Keys {
        Keys {
            secret: [n; 32],
            psk: psk.map(|k| Psk::new(k.as_bytes()).unwrap()),
        }
    }

    /// An opener towards B's address, and an acceptor, without a session yet.
    fn links(datagram: usize, psk_a: Option<&str>, psk_b: Option<&str>) -> (Link, Link) {
        let mut ca = Config::new(Role::Opener, datagram);
        ca.id_base = 7;
        ca.peer = Some(b_addr());
        (
            Link::new(ca, keys(1, psk_a)),
            Link::new(Config::new(Role::Acceptor, datagram), keys(2, psk_b)),
        )
    }

    /// What the wire does to the n-th datagram (counted per direction from 0).
    #[derive(Clone, Copy)]
    struct Wire {
        /// Lose every n-th (none when 0).
        lose_every: u64,
        /// Send every n-th twice (none when 0).
        dup_every: u64,
        /// Hold every n-th back behind the next one (none when 0).
        swap_every: u64,
    }

    const CLEAN: Wire = Wire {
        lose_every: 0,
        dup_every: 0,
        swap_every: 0,
    };

    struct Pair {
        a: Link,
        b: Link,
        now: Instant,
        sent: [u64; 2],
        lost: [u64; 2],
        lost_acks: u64,
        wire: Wire,
        /// Bytes B's TCP side got, per channel, and whether its FIN came.
        at_b: HashMap<u64, (Vec<u8>, bool)>,
        at_a: HashMap<u64, (Vec<u8>, bool)>,
        events_a: Vec<Event>,
        events_b: Vec<Event>,
    }

    fn counts(n: u64, every: u64) -> bool {
        every != 0 && n % every == every - 1
    }

    impl Pair {
        fn new(wire: Wire, datagram: usize) -> Pair {
            let (a, b) = links(datagram, None, None);
            let mut p = Pair {
                a,
                b,
                now: Instant::now(),
                sent: [0; 2],
                lost: [0; 2],
                lost_acks: 0,
                wire: CLEAN,
                at_b: HashMap::new(),
                at_a: HashMap::new(),
                events_a: Vec::new(),
                events_b: Vec::new(),
            };
            // The handshake crosses a clean wire; the counts start after it.
            p.a.handle_timeout(p.now);
            p.b.handle_timeout(p.now);
            p.settle();
            assert!(p.a.is_up() && p.b.is_up());
            p.events_a.clear();
            p.events_b.clear();
            p.sent = [0; 2];
            p.wire = wire;
            p
        }

        /// Moves every queued datagram across the wire, both ways, until none is left; the
        /// TCP sides take what arrives.
        fn settle(&mut self) {
            loop {
                let mut moved = false;
                for dir in 0..2 {
                    let mut batch = Vec::new();
                    {
                        let from = if dir == 0 { &mut self.a } else { &mut self.b };
                        let want = if dir == 0 { b_addr() } else { a_addr() };
                        while let Some((to, d)) = from.poll_transmit() {
                            assert_eq!(to, want);
                            let n = self.sent[dir];
                            self.sent[dir] += 1;
                            if counts(n, self.wire.lose_every) {
                                self.lost[dir] += 1;
                                self.lost_acks += u64::from(d[1] == KIND_ACK);
                                continue;
                            }
                            batch.push(d.clone());
                            if counts(n, self.wire.dup_every) {
                                batch.push(d);
                            }
                        }
                    }
                    // Reorder: every swap_every-th datagram changes place with its successor.
                    let mut i = 0;
                    while i + 1 < batch.len() {
                        if counts(i as u64, self.wire.swap_every) {
                            batch.swap(i, i + 1);
                            i += 1;
                        }
                        i += 1;
                    }
                    let (to, from) = if dir == 0 {
                        (&mut self.b, a_addr())
                    } else {
                        (&mut self.a, b_addr())
                    };
                    for d in batch {
                        moved = true;
                        to.handle(self.now, from, &d);
                    }
                }
                self.drain();
                if !moved {
                    break;
                }
            }
        }

        fn drain(&mut self) {
            while let Some(e) = self.a.poll_event() {
                self.events_a.push(e);
            }
            while let Some(e) = self.b.poll_event() {
                if let Event::Opened(id) = e {
                    self.at_b.entry(id).or_default();
                }
                self.events_b.push(e);
            }
            for (link, at) in [(&mut self.a, &mut self.at_a), (&mut self.b, &mut self.at_b)] {
                for (id, (bytes, fin)) in at.iter_mut() {
                    loop {
                        match link.take(*id) {
                            Take::Data(v) => bytes.extend(v),
                            Take::Fin => {
                                *fin = true;
                                break;
                            }
                            Take::Nothing | Take::Gone => break,
                        }
                    }
                }
            }
        }

        /// Time passes by one RTO: resends go out and cross.
        fn tick(&mut self) {
            self.now += RTO;
            self.a.handle_timeout(self.now);
            self.b.handle_timeout(self.now);
            self.settle();
        }

        /// Sends `data` from `dir` (0: A to B) on `id`, as TCP reads of `read` bytes, waiting
        /// (ticks) whenever the window is full.
        fn push(&mut self, dir: usize, id: u64, data: &[u8], read: usize) {
            let mut off = 0;
            let mut stuck = 0;
            while off < data.len() {
                let link = if dir == 0 { &mut self.a } else { &mut self.b };
                let end = (off + read).min(data.len());
                let n = link.send(id, self.now, &data[off..end]);
                off += n;
                self.settle();
                if n == 0 {
                    self.tick();
                    stuck += 1;
                    assert!(stuck < 10_000, "no progress at {off}");
                }
            }
        }

        fn open(&mut self) -> u64 {
            let id = self.a.open(self.now);
            self.at_a.insert(id, (Vec::new(), false));
            self.settle();
            id
        }

        /// Ticks until nothing is unacknowledged anywhere.
        fn quiesce(&mut self) {
            for _ in 0..1000 {
                if self.a.next_timeout().is_none() && self.b.next_timeout().is_none() {
                    return;
                }
                self.tick();
            }
            panic!("the link never settled");
        }
    }

    fn data(n: usize, salt: u8) -> Vec<u8> {
        (0..n).map(|i| (i % 253) as u8 ^ salt).collect()
    }

    /// One channel, both ways, then closed from A: everything arrives once, in order; with a
    /// clean wire nothing is resent, and every datagram is a fragment or an OPEN/FIN.
    fn exchange(wire: Wire) -> Pair {
        let mut p = Pair::new(wire, 1000);
        let id = p.open();
        let up = data(100_000, 1);
        let down = data(33_333, 2);
        p.push(0, id, &up, 4096);
        p.push(1, id, &down, 1500);
        p.a.finish(id, p.now);
        p.settle();
        // B's writer saw the FIN, its TCP side closes and its reader ends.
        p.quiesce();
        assert_eq!(p.at_b[&id], (up.clone(), true));
        p.b.finish(id, p.now);
        p.settle();
        p.quiesce();
        assert_eq!(p.at_a[&id], (down.clone(), true));
        // Both ends retired the channel, each with one Closed event, not aborted.
        for events in [&p.events_a, &p.events_b] {
            let closed: Vec<_> = events
                .iter()
                .filter_map(|e| match e {
                    Event::Closed { id: i, aborted, .. } => Some((*i, *aborted)),
                    _ => None,
                })
                .collect();
            assert_eq!(closed, vec![(id, None)]);
        }
        assert_eq!(p.a.channels() + p.b.channels(), 0);
        let (ta, tb) = (p.a.totals(), p.b.totals());
        assert_eq!((ta.bytes_sent, tb.bytes_received), (100_000, 100_000));
        assert_eq!((tb.bytes_sent, ta.bytes_received), (33_333, 33_333));
        // Every datagram sent first is a fragment of a read, or an OPEN or a FIN.
        assert_eq!(ta.datagrams_sent, ta.fragments + 2);
        assert_eq!(tb.datagrams_sent, tb.fragments + 1);
        p
    }

    #[test]
    fn a_clean_link_delivers_everything_once_and_resends_nothing() {
        let p = exchange(CLEAN);
        let (ta, tb) = (p.a.totals(), p.b.totals());
        assert_eq!(
            (ta.resent, tb.resent, ta.duplicates, tb.duplicates),
            (0, 0, 0, 0)
        );
        assert_eq!(ta.acks_sent, tb.datagrams_sent);
        assert_eq!(tb.acks_sent, ta.datagrams_sent);
        assert_eq!(p.lost, [0, 0]);
        assert_eq!(p.sent[0], ta.datagrams_sent + ta.acks_sent);
        // On a clean wire the window is empty at every read: each read is cut whole. 100 000
        // bytes in reads of 4096 into payloads of 982: 24 reads of 5 datagrams (4096 = 4 *
        // 982 + 168), and a last read of 1696 bytes, 2 datagrams.
        let payload = (1000 - HEADER) as u64;
        assert_eq!(ta.tcp_reads, 25);
        assert_eq!(ta.fragments, 24 * 4096u64.div_ceil(payload) + 2);
        assert_eq!(ta.datagrams_sent, ta.fragments + 2, "OPEN and FIN");
        assert_eq!(tb.datagrams_sent, tb.fragments + 1, "FIN");
        assert_eq!(tb.tcp_reads, 33_333u64.div_ceil(1500));
    }

    #[test]
    fn every_lost_datagram_costs_exactly_one_resend() {
        for lose in [3, 6, 7, 11] {
            let p = exchange(Wire {
                lose_every: lose,
                ..CLEAN
            });
            let (ta, tb) = (p.a.totals(), p.b.totals());
            assert!(p.lost[0] > 10 && p.lost[1] > 2, "{:?}", p.lost);
            // A lost data datagram is resent once; a lost ack makes its datagram come again,
            // once, a duplicate its receiver acknowledges again; a datagram dropped (data
            // behind a lost OPEN) is resent once too.
            assert_eq!(
                ta.resent + tb.resent,
                p.lost[0] + p.lost[1] + ta.dropped + tb.dropped,
                "every {lose}"
            );
            assert_eq!(ta.duplicates + tb.duplicates, p.lost_acks, "every {lose}");
        }
    }

    #[test]
    fn losses_duplicates_and_reordering_still_deliver_everything_once_in_order() {
        for (lose, dup, swap) in [(5, 0, 0), (0, 3, 0), (0, 0, 2), (4, 3, 5), (3, 2, 2)] {
            // `exchange` checks the bytes, their order, the ends and the counts of reads.
            let p = exchange(Wire {
                lose_every: lose,
                dup_every: dup,
                swap_every: swap,
            });
            let (ta, tb) = (p.a.totals(), p.b.totals());
            let case = format!("lose {lose} dup {dup} swap {swap}");
            if lose == 0 {
                // Only an OPEN overtaken by its data makes a resend without a loss.
                assert_eq!(ta.resent + tb.resent, ta.dropped + tb.dropped, "{case}");
            } else {
                assert!(ta.resent > 0 && tb.resent > 0, "{case}");
            }
            if dup != 0 {
                assert!(ta.duplicates > 0 && tb.duplicates > 0, "{case}");
            }
            // Each frame was accepted once: as many as were sent (first sends).
            assert_eq!(ta.datagrams_received, tb.datagrams_sent, "{case}");
            assert_eq!(tb.datagrams_received, ta.datagrams_sent, "{case}");
        }
    }

    /// A datagram of the session between A and B, sealed with its key, as A would send it.
    fn sealed(p: &Pair, kind: u8, flags: u8, id: u64, seq: u64, bytes: &[u8]) -> Vec<u8> {
        let Session::Up { key, .. } = &p.a.session else {
            panic!("no session");
        };
        let mut d = encode(kind, flags, id, seq, bytes);
        key.seal(&mut d);
        d
    }

    fn drain_out(l: &mut Link) -> Vec<(SocketAddr, Vec<u8>)> {
        std::iter::from_fn(|| l.poll_transmit()).collect()
    }

    #[test]
    fn a_frame_beyond_the_window_or_before_its_open_is_dropped() {
        let mut p = Pair::new(CLEAN, 100);
        let now = p.now;
        let early = sealed(&p, KIND_DATA, 0, 9, 3, b"early");
        p.b.handle(now, a_addr(), &early);
        assert_eq!(p.b.totals().dropped, 1);
        assert!(p.b.poll_transmit().is_none(), "not acknowledged");
        let open = sealed(&p, KIND_DATA, FLAG_OPEN, 9, 0, &[]);
        p.b.handle(now, a_addr(), &open);
        assert_eq!(p.b.poll_event(), Some(Event::Opened(9)));
        assert!(p.b.poll_transmit().is_some(), "the OPEN is acknowledged");
        let far = sealed(&p, KIND_DATA, 0, 9, WINDOW + 1, b"far");
        p.b.handle(now, a_addr(), &far);
        assert_eq!(p.b.totals().dropped, 2);
        p.b.handle(now, a_addr(), &[]);
        p.b.handle(now, a_addr(), &[VERSION_BYTE, 1]);
        let unknown = sealed(&p, 9, 0, 9, 1, b"");
        p.b.handle(now, a_addr(), &unknown);
        assert_eq!(p.b.totals().malformed, 2);
        assert_eq!(p.b.totals().rejected, 1, "a kind of no session");
        // An opener never takes an OPEN.
        let open5 = sealed(&p, KIND_DATA, FLAG_OPEN, 5, 0, &[]);
        p.a.handle(now, b_addr(), &open5);
        assert_eq!((p.a.channels(), p.a.totals().dropped), (0, 1));
    }

    #[test]
    fn an_unauthenticated_open_creates_no_channel_and_is_never_answered() {
        let (_, mut b) = links(200, None, None);
        let now = Instant::now();
        b.handle_timeout(now);
        let stranger = addr("127.0.0.1:5555");
        let mut sent = 0usize;
        let mut n = 0u64;
        for id in 1..=300u64 {
            // The first version's OPEN, this version's OPEN with a made-up tag, and one
            // without any.
            let mut v1 = vec![1u8, 1];
            v1.extend_from_slice(&id.to_be_bytes());
            v1.extend_from_slice(&0u64.to_be_bytes());
            let mut v2 = encode(KIND_DATA, FLAG_OPEN, id, 0, &[]);
            let bare = v2.clone();
            v2.extend_from_slice(&[0xa5; auth::TAG]);
            for d in [v1, v2, bare] {
                sent += d.len();
                n += 1;
                b.handle(now, stranger, &d);
                // From the peer's own address too: the address proves nothing.
                b.handle(now, a_addr(), &d);
                n += 1;
            }
        }
        assert_eq!(b.channels(), 0);
        assert_eq!(b.totals().rejected, n);
        assert!(drain_out(&mut b).is_empty(), "nothing answered");
        // One warning names the old version, once.
        let events: Vec<Event> = std::iter::from_fn(|| b.poll_event()).collect();
        assert_eq!(events.len(), 1, "{events:?}");
        assert!(matches!(&events[0], Event::Warning(w) if w.contains("first version")));
        // An INIT gets a cookie only, shorter than the INIT; a short INIT gets nothing.
        let mut init = vec![VERSION_BYTE, KIND_INIT, 0];
        init.extend_from_slice(&[3u8; NONCE]);
        b.handle(now, stranger, &init);
        assert!(drain_out(&mut b).is_empty(), "short INIT unanswered");
        init.resize(INIT_LEN, 0);
        b.handle(now, stranger, &init);
        sent += init.len();
        let out = drain_out(&mut b);
        assert_eq!(out.len(), 1);
        assert_eq!(out[0].0, stranger);
        assert!(out[0].1.len() < init.len());
        assert!(out[0].1.len() < sent);
        // An ECHO with a cookie not made for its source, or made up, starts nothing.
        let cookie = &out[0].1[3 + NONCE..];
        for (from, c) in [(a_addr(), cookie.to_vec()), (stranger, vec![0u8; NONCE])] {
            let mut echo = vec![VERSION_BYTE, KIND_ECHO, 0];
            echo.extend_from_slice(&[3u8; NONCE]);
            echo.extend_from_slice(&c);
            echo.extend_from_slice(&[0u8; NONCE]);
            b.handle(now, from, &echo);
            assert!(!b.is_up());
            assert!(drain_out(&mut b).is_empty());
        }
        assert_eq!(b.channels(), 0);
    }

    #[test]
    fn a_forged_or_modified_datagram_is_dropped_and_counted() {
        let mut p = Pair::new(CLEAN, 200);
        let now = p.now;
        let id = p.a.open(now);
        let (_, open) = p.a.poll_transmit().unwrap();
        for i in 0..open.len() {
            let mut bad = open.clone();
            bad[i] ^= 0x01;
            p.b.handle(now, a_addr(), &bad);
        }
        // Another session's key (a stranger that ran its own handshake) is no better.
        let mut other = encode(KIND_DATA, FLAG_OPEN, id, 0, &[]);
        SessionKey::derive(None, &[1; NONCE], &[2; NONCE], &[3; NONCE]).seal(&mut other);
        p.b.handle(now, a_addr(), &other);
        assert_eq!(p.b.totals().rejected, open.len() as u64 + 1);
        assert_eq!(p.b.channels(), 0);
        assert!(drain_out(&mut p.b).is_empty());
        // At most a warning (the version byte changed): no channel.
        while let Some(e) = p.b.poll_event() {
            assert!(matches!(e, Event::Warning(_)), "{e:?}");
        }
        // The datagram as sent opens the channel.
        p.b.handle(now, a_addr(), &open);
        assert_eq!(p.b.poll_event(), Some(Event::Opened(id)));
    }

    #[test]
    fn the_window_bounds_what_is_in_flight_and_an_idle_channel_is_given_up() {
        let mut p = Pair::new(CLEAN, 100);
        let now = p.now;
        let id = p.a.open(now);
        let payload = 100 - HEADER;
        assert_eq!(p.a.send_room(id), Some((WINDOW as usize - 1) * payload));
        assert_eq!(
            p.a.send(id, now, &vec![0; 10_000]),
            (WINDOW as usize - 1) * payload
        );
        assert_eq!(p.a.send_room(id), Some(0));
        assert_eq!(p.a.send(id, now, b"x"), 0);
        // Nothing acknowledged: every frame is resent once after the RTO, counted.
        p.a.handle_timeout(now + RTO);
        assert_eq!(p.a.totals().resent, WINDOW);
        let idle = p.a.config().idle;
        p.a.handle_timeout(now + idle);
        assert!(matches!(
            p.a.poll_event(),
            Some(Event::Closed {
                aborted: Some(Abort::Idle),
                ..
            })
        ));
        assert_eq!(p.a.send_room(id), None);
        assert_eq!(p.a.take(id), Take::Gone);
    }

    #[test]
    fn resends_back_off_and_stop() {
        let mut p = Pair::new(CLEAN, 200);
        let start = p.now;
        let id = p.a.open(start);
        // B hears none of A's data (it answers the handshakes A makes again after
        // REKEY_AFTER resends): A's data datagrams are recorded with their times.
        let mut sends = Vec::new();
        let step = Duration::from_millis(5);
        let mut now = start;
        let mut closed = None;
        let mut handshakes = 0;
        while now < start + Duration::from_secs(60) {
            p.a.handle_timeout(now);
            for _ in 0..4 {
                for (_, d) in drain_out(&mut p.a) {
                    if d[1] == KIND_DATA {
                        sends.push(now - start);
                    } else {
                        handshakes += u32::from(d[1] == KIND_INIT);
                        p.b.handle(now, a_addr(), &d);
                    }
                }
                for (_, d) in drain_out(&mut p.b) {
                    p.a.handle(now, b_addr(), &d);
                }
            }
            while let Some(e) = p.a.poll_event() {
                if let Event::Closed { id: i, aborted, .. } = e {
                    closed.get_or_insert((i, aborted, now - start));
                }
            }
            now += step;
        }
        assert_eq!(sends.len() as u32, 1 + MAX_RESENDS, "{sends:?}");
        let gaps: Vec<u64> = sends
            .windows(2)
            .map(|w| (w[1] - w[0]).as_millis() as u64)
            .collect();
        let want: Vec<u64> = (0..MAX_RESENDS)
            .map(|i| backoff(i).as_millis() as u64)
            .collect();
        assert_eq!(gaps, want);
        assert_eq!(&want[..7], &[25, 50, 100, 200, 400, 800, 1000]);
        assert!(want.iter().all(|&g| g <= 1000));
        let (i, aborted, at) = closed.unwrap();
        assert_eq!((i, aborted), (id, Some(Abort::Unacknowledged)));
        assert!(at < p.a.config().give_up, "stopped by the attempt limit");
        assert_eq!(p.a.channels(), 0);
        // One new session at REKEY_AFTER resends, one after the channel was given up.
        assert_eq!(handshakes, 2);
    }

    #[test]
    fn a_restarted_acceptor_gets_a_new_session_after_a_few_resends() {
        let mut p = Pair::new(CLEAN, 200);
        // B restarts: a new secret, no session, no channel.
        p.b = Link::new(Config::new(Role::Acceptor, 200), keys(3, None));
        let id = p.open();
        assert!(
            p.events_b.is_empty(),
            "the old session's OPEN is dropped unanswered"
        );
        for _ in 0..200 {
            if !p.events_b.is_empty() {
                break;
            }
            p.tick();
        }
        assert_eq!(
            p.events_b,
            vec![Event::Session(a_addr()), Event::Opened(id)]
        );
        assert_eq!(p.a.totals().resent, u64::from(REKEY_AFTER));
        assert!(p.b.totals().rejected >= u64::from(REKEY_AFTER));
    }

    #[test]
    fn a_refused_channel_sends_one_reset_and_nothing_more() {
        let mut p = Pair::new(CLEAN, 200);
        let id = p.open();
        assert_eq!(p.events_b, vec![Event::Opened(id)]);
        p.at_b.clear();
        let sent_before = p.sent;
        p.b.refuse(id, p.now);
        assert_eq!(p.b.channels(), 0, "nothing kept");
        assert_eq!(p.b.next_timeout(), None, "nothing to resend");
        p.settle();
        assert_eq!(p.sent[1] - sent_before[1], 1, "one RESET");
        // A's channel ends at once, its TCP side closed.
        assert!(p.events_a.iter().any(|e| matches!(e,
            Event::Closed { id: i, aborted: Some(Abort::Reset), .. } if *i == id)));
        assert_eq!(p.a.channels(), 0);
        for _ in 0..200 {
            p.tick();
        }
        assert_eq!(p.sent[1] - sent_before[1], 1, "never resent");
        assert_eq!((p.a.totals().resent, p.b.totals().resent), (0, 0));
        // A late copy of the OPEN is answered with one RESET, not opened again.
        let open = sealed(&p, KIND_DATA, FLAG_OPEN, id, 0, &[]);
        p.b.handle(p.now, a_addr(), &open);
        assert_eq!(p.b.channels(), 0);
        let out = drain_out(&mut p.b);
        assert_eq!(out.len(), 1);
        assert_eq!(out[0].1[1], KIND_RESET);
        assert_eq!(p.b.totals().resets_sent, 2);
    }

    #[test]
    fn the_pre_shared_key_must_match_on_both_relays() {
        for (ka, kb, up) in [
            (
                Some("0123456789abcdef-one"),
                Some("0123456789abcdef-one"),
                true,
            ),
            (
                Some("0123456789abcdef-one"),
                Some("0123456789abcdef-two"),
                false,
            ),
            (Some("0123456789abcdef-one"), None, false),
            (None, Some("0123456789abcdef-one"), false),
        ] {
            let (mut a, mut b) = links(200, ka, kb);
            let mut now = Instant::now();
            let mut warnings = Vec::new();
            for _ in 0..400 {
                a.handle_timeout(now);
                for _ in 0..4 {
                    for (_, d) in drain_out(&mut a) {
                        b.handle(now, a_addr(), &d);
                    }
                    for (_, d) in drain_out(&mut b) {
                        a.handle(now, b_addr(), &d);
                    }
                }
                for l in [&mut a, &mut b] {
                    while let Some(e) = l.poll_event() {
                        if let Event::Warning(w) = e {
                            warnings.push(w);
                        }
                    }
                }
                now += RTO;
            }
            assert_eq!((a.is_up(), b.is_up()), (up, up), "{ka:?} {kb:?}");
            if up {
                assert!(warnings.is_empty(), "{warnings:?}");
            } else {
                assert!(
                    warnings.iter().any(|w| w.contains("pre-shared key")),
                    "{ka:?} {kb:?}: {warnings:?}"
                );
            }
        }
    }

    #[test]
    fn a_lost_handshake_is_sent_again_and_a_channel_waits_for_the_session() {
        let (mut a, mut b) = links(200, None, None);
        let mut now = Instant::now();
        let id = a.open(now);
        // The INIT, then the first ECHO, are lost.
        a.handle_timeout(now);
        assert_eq!(drain_out(&mut a).len(), 1, "INIT only: the OPEN waits");
        now += backoff(1);
        a.handle_timeout(now);
        for (_, d) in drain_out(&mut a) {
            b.handle(now, a_addr(), &d);
        }
        for (_, d) in drain_out(&mut b) {
            a.handle(now, b_addr(), &d);
        }
        assert_eq!(drain_out(&mut a).len(), 1, "the ECHO, lost");
        now += backoff(1);
        a.handle_timeout(now);
        for _ in 0..3 {
            for (_, d) in drain_out(&mut a) {
                b.handle(now, a_addr(), &d);
            }
            for (_, d) in drain_out(&mut b) {
                a.handle(now, b_addr(), &d);
            }
        }
        assert!(a.is_up() && b.is_up());
        assert_eq!(b.poll_event(), Some(Event::Session(a_addr())));
        assert_eq!(b.poll_event(), Some(Event::Opened(id)));
        assert_eq!(a.totals().resent, 0);
    }

    #[test]
    fn an_unanswered_handshake_fails_its_channels_in_one_line() {
        let (mut a, _) = links(200, None, None);
        let mut now = Instant::now();
        let id = a.open(now);
        let mut sent = 0;
        for _ in 0..2000 {
            a.handle_timeout(now);
            sent += drain_out(&mut a).len();
            now += RTO;
        }
        assert_eq!(sent as u32, HANDSHAKE_TRIES);
        let events: Vec<Event> = std::iter::from_fn(|| a.poll_event()).collect();
        assert!(events.iter().any(|e| matches!(e, Event::Warning(w) if w.contains("did not complete the UDP leg's handshake"))));
        assert!(events.iter().any(|e| matches!(e,
            Event::Closed { id: i, aborted: Some(Abort::NoSession), .. } if *i == id)));
        // The next channel tries again.
        a.open(now);
        assert_eq!(drain_out(&mut a).len(), 1);
    }
}
