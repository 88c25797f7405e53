//! The UDP leg between two relays, as a state machine without sockets or clocks (the
//! quinn-proto style): the caller hands it datagrams, bytes read from TCP and the time, and
//! takes from it datagrams to send, bytes to write to TCP and events. The relay's I/O loop
//! (`super::udp`) drives it; the tests below drive two of them against each other in memory.
//!
//! It does what PVM's daemons do between hosts (Geist et al., *PVM 3 user's guide and
//! reference manual*): messages cross as UDP datagrams of at most UDPMAXLEN (4 KiB) bytes, the
//! daemon cutting them up and putting them together again, numbering, acknowledging and
//! resending them itself, with a small fixed window of datagrams not yet acknowledged.
//!
//! Each relayed TCP connection is a *channel* of the link: the relay that accepted it (the
//! opener) names it with a 64-bit id, whose upper half is a random number drawn at the
//! opener's start, so that a restarted opener never reuses a live id of the acceptor. Each
//! direction of a channel is a sequence of frames numbered from 0: an OPEN (opener to
//! acceptor only), the bytes of TCP reads cut into pieces that fill a datagram, then a FIN
//! when the TCP side ended. Every frame is acknowledged alone (as pvmd acknowledges each
//! packet); a frame not acknowledged within [`RTO`] is sent again; at most [`WINDOW`]
//! numbers are in flight (from the oldest unacknowledged one) per channel and direction.
//!
//! Datagram, big-endian: kind (1 = data, 2 = ack), flags (1 = OPEN, 2 = FIN), channel id
//! (8 bytes), sequence number (8 bytes), then a data frame's bytes: [`HEADER`] bytes before
//! the payload, so that a datagram of `datagram` bytes carries `datagram - HEADER` of them.

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::time::{Duration, Instant};

/// Bytes of the header of every datagram.
pub const HEADER: usize = 18;
/// Frames in flight per channel and direction: the sender sends number `s` only while
/// `s < oldest unacknowledged + WINDOW`, and the receiver keeps frames out of order only
/// within the window. Small and fixed, as pvmd's; the number is ours.
pub const WINDOW: u64 = 8;
/// How long a frame waits for its acknowledgement before it is sent again. Fixed, as pvmd's
/// retry interval is (no RTT estimate): on a loopback or LAN path an acknowledgement takes
/// tens of microseconds, so only a lost datagram (or a descheduled relay) waits this long.
pub const RTO: Duration = Duration::from_millis(25);
/// PVM's UDPMAXLEN: the default largest datagram of the link, header included.
pub const DEFAULT_DATAGRAM: usize = 4096;
/// The smallest datagram accepted: a header and 46 bytes.
pub const MIN_DATAGRAM: usize = 64;
/// The largest UDP payload over IPv4.
pub const MAX_DATAGRAM: usize = 65_507;
/// Channel ids remembered after their channel ended, so that a late or resent frame of an
/// ended channel is acknowledged (and dropped) instead of opening it again.
const RETIRED_KEPT: usize = 4096;

const KIND_DATA: u8 = 1;
const KIND_ACK: u8 = 2;
const FLAG_OPEN: u8 = 1;
const FLAG_FIN: u8 = 2;

/// Which end of the link: the opener names channels (relay A, which accepts TCP), the
/// acceptor opens a TCP connection for each (relay B).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    Opener,
    Acceptor,
}

#[derive(Debug, Clone, Copy)]
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
        }
    }

    /// Payload bytes per data datagram.
    pub fn payload(&self) -> usize {
        self.datagram - HEADER
    }
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
    /// Data datagrams sent again after [`RTO`] without their acknowledgement.
    pub resent: u64,
    /// Data datagrams received again (already accepted): acknowledged again and dropped.
    pub duplicates: u64,
    /// Data datagrams dropped unacknowledged: beyond the window, beyond the receive cap, or
    /// of a channel whose OPEN has not come yet.
    pub dropped: u64,
    /// Datagrams that are not of this protocol (too short, unknown kind).
    pub malformed: u64,
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
    }
}

/// Why a channel ended without both its FINs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Abort {
    /// No datagram for [`Config::idle`].
    Idle,
    /// A frame unacknowledged for [`Config::give_up`].
    Unacknowledged,
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
    /// Received bytes are thrown away (a refused channel): nobody takes them.
    discard: bool,
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
            discard: false,
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
        self.fin_queued
            && self.unacked.is_empty()
            && self.fin_received
            && (self.fin_taken || self.discard)
    }
}

/// One end of the link.
pub struct Link {
    cfg: Config,
    next_id: u32,
    chans: HashMap<u64, Chan>,
    retired: HashSet<u64>,
    retired_order: VecDeque<u64>,
    out: VecDeque<Vec<u8>>,
    events: VecDeque<Event>,
    /// Counts of the channels that ended, and of what belongs to no channel.
    ended: Counters,
}

fn encode(kind: u8, flags: u8, id: u64, seq: u64, bytes: &[u8]) -> Vec<u8> {
    let mut d = Vec::with_capacity(HEADER + bytes.len());
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

impl Link {
    pub fn new(cfg: Config) -> Link {
        Link {
            cfg,
            next_id: 1,
            chans: HashMap::new(),
            retired: HashSet::new(),
            retired_order: VecDeque::new(),
            out: VecDeque::new(),
            events: VecDeque::new(),
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

    /// Opens a channel (opener): its OPEN is queued.
    pub fn open(&mut self, now: Instant) -> u64 {
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

    /// The channel will never reach TCP (refused, or its connection failed): what arrives is
    /// acknowledged and dropped, and it ends once both FINs are done.
    pub fn refuse(&mut self, id: u64, now: Instant) {
        if let Some(c) = self.chans.get_mut(&id) {
            c.discard = true;
            c.delivered.clear();
        }
        self.finish(id, now);
        self.retire_if_done(id);
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

    /// The next datagram to send to the peer relay.
    pub fn poll_transmit(&mut self) -> Option<Vec<u8>> {
        self.out.pop_front()
    }

    pub fn poll_event(&mut self) -> Option<Event> {
        self.events.pop_front()
    }

    /// When [`Link::handle_timeout`] has work next: the earliest resend.
    pub fn next_timeout(&self) -> Option<Instant> {
        self.chans
            .values()
            .flat_map(|c| c.unacked.values().map(|f| f.last_sent + RTO))
            .min()
    }

    /// Resends what waited [`RTO`], and gives up channels idle or unacknowledged too long.
    pub fn handle_timeout(&mut self, now: Instant) {
        let mut gone = Vec::new();
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
            for (&seq, f) in c.unacked.iter_mut() {
                if now.saturating_duration_since(f.last_sent) >= RTO {
                    f.last_sent = now;
                    c.counters.resent += 1;
                    self.out
                        .push_back(encode(KIND_DATA, f.flags, id, seq, &f.bytes));
                }
            }
        }
        gone.sort_unstable_by_key(|&(id, _)| id);
        for (id, why) in gone {
            self.retire(id, Some(why));
        }
    }

    /// One datagram from the peer relay.
    pub fn handle(&mut self, now: Instant, d: &[u8]) {
        if d.len() < HEADER || d.len() > self.cfg.datagram.max(MAX_DATAGRAM) {
            self.ended.malformed += 1;
            return;
        }
        let (kind, flags, id, seq) = (d[0], d[1], be_u64(&d[2..10]), be_u64(&d[10..18]));
        match kind {
            KIND_ACK => self.on_ack(now, id, seq),
            KIND_DATA => self.on_data(now, flags, id, seq, &d[HEADER..]),
            _ => self.ended.malformed += 1,
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
        }
        self.retire_if_done(id);
    }

    fn on_data(&mut self, now: Instant, flags: u8, id: u64, seq: u64, bytes: &[u8]) {
        if !self.chans.contains_key(&id) {
            if self.retired.contains(&id) {
                // A resend whose acknowledgement was lost: acknowledged again.
                self.ended.duplicates += 1;
                self.ack(id, seq, None);
                return;
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
            self.ack(id, seq, None);
            return;
        }
        if seq >= c.next_expected + WINDOW
            || (!c.discard && c.delivered.len() + c.early_bytes + bytes.len() > cap)
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
            if !c.discard {
                c.delivered.extend(bytes);
            }
            if flags & FLAG_FIN != 0 {
                c.fin_received = true;
            }
        }
        self.ack(id, seq, Some(()));
        self.retire_if_done(id);
    }

    fn ack(&mut self, id: u64, seq: u64, live: Option<()>) {
        self.out.push_back(encode(KIND_ACK, 0, id, seq, &[]));
        match (live, self.chans.get_mut(&id)) {
            (_, Some(c)) => c.counters.acks_sent += 1,
            _ => self.ended.acks_sent += 1,
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
        if self.retired.insert(id) {
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
            let mut ca = Config::new(Role::Opener, datagram);
            ca.id_base = 7;
            Pair {
                a: Link::new(ca),
                b: Link::new(Config::new(Role::Acceptor, datagram)),
                now: Instant::now(),
                sent: [0; 2],
                lost: [0; 2],
                lost_acks: 0,
                wire,
                at_b: HashMap::new(),
                at_a: HashMap::new(),
                events_a: Vec::new(),
                events_b: Vec::new(),
            }
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
                        while let Some(d) = from.poll_transmit() {
                            let n = self.sent[dir];
                            self.sent[dir] += 1;
                            if counts(n, self.wire.lose_every) {
                                self.lost[dir] += 1;
                                self.lost_acks += u64::from(d[0] == KIND_ACK);
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
                    let to = if dir == 0 { &mut self.b } else { &mut self.a };
                    for d in batch {
                        moved = true;
                        to.handle(self.now, &d);
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

    #[test]
    fn a_frame_beyond_the_window_or_before_its_open_is_dropped() {
        let mut b = Link::new(Config::new(Role::Acceptor, 100));
        let now = Instant::now();
        b.handle(now, &encode(KIND_DATA, 0, 9, 3, b"early"));
        assert_eq!(b.totals().dropped, 1);
        assert!(b.poll_transmit().is_none(), "not acknowledged");
        b.handle(now, &encode(KIND_DATA, FLAG_OPEN, 9, 0, &[]));
        assert_eq!(b.poll_event(), Some(Event::Opened(9)));
        assert!(b.poll_transmit().is_some(), "the OPEN is acknowledged");
        b.handle(now, &encode(KIND_DATA, 0, 9, WINDOW + 1, b"far"));
        assert_eq!(b.totals().dropped, 2);
        b.handle(now, &[1, 2, 3]);
        b.handle(now, &encode(9, 0, 9, 1, b""));
        assert_eq!(b.totals().malformed, 2);
        // An opener never takes an OPEN.
        let mut a = Link::new(Config::new(Role::Opener, 100));
        a.handle(now, &encode(KIND_DATA, FLAG_OPEN, 5, 0, &[]));
        assert_eq!((a.channels(), a.totals().dropped), (0, 1));
    }

    #[test]
    fn the_window_bounds_what_is_in_flight_and_an_idle_channel_is_given_up() {
        let mut a = Link::new(Config::new(Role::Opener, 100));
        let now = Instant::now();
        let id = a.open(now);
        let payload = 100 - HEADER;
        assert_eq!(a.send_room(id), Some((WINDOW as usize - 1) * payload));
        assert_eq!(
            a.send(id, now, &vec![0; 10_000]),
            (WINDOW as usize - 1) * payload
        );
        assert_eq!(a.send_room(id), Some(0));
        assert_eq!(a.send(id, now, b"x"), 0);
        // Nothing acknowledged: every frame is resent once per RTO, counted.
        a.handle_timeout(now + RTO);
        assert_eq!(a.totals().resent, WINDOW);
        let idle = a.config().idle;
        a.handle_timeout(now + idle);
        assert!(matches!(
            a.poll_event(),
            Some(Event::Closed {
                aborted: Some(Abort::Idle),
                ..
            })
        ));
        assert_eq!(a.send_room(id), None);
        assert_eq!(a.take(id), Take::Gone);
    }

    #[test]
    fn a_refused_channel_acknowledges_and_drops_its_bytes_and_ends() {
        let mut p = Pair::new(CLEAN, 200);
        let id = p.open();
        assert_eq!(p.events_b, vec![Event::Opened(id)]);
        p.at_b.clear();
        p.b.refuse(id, p.now);
        p.settle();
        // A's TCP side learns the end (its FIN) and closes; A then sends its FIN.
        assert_eq!(p.at_a[&id], (Vec::new(), true));
        p.push(0, id, &data(5000, 3), 5000);
        p.a.finish(id, p.now);
        p.settle();
        p.quiesce();
        assert_eq!(p.a.channels() + p.b.channels(), 0);
        // A late resend of the ended channel is acknowledged again, not reopened.
        p.b.handle(p.now, &encode(KIND_DATA, FLAG_OPEN, id, 0, &[]));
        assert_eq!(p.b.channels(), 0);
        assert!(p.b.poll_transmit().is_some());
    }
}
