//! Admission: the accept loop of a server, which decides what a new connection may cost
//! before it costs anything.
//!
//! One thread accepts and reads every connection that has not yet said what it is, with
//! poll(2), up to a fixed number of them at once and each against a deadline counted from
//! accept. A connection gets a thread of its own only once it has sent a complete hello and
//! taken a session slot (within the server's total and its client's share); a `--one-port`
//! data connection never does (it is handed to its test once its cookie is in). So silent,
//! slow or vanished clients cost a descriptor and a few bytes each, for a few seconds, and
//! never a thread or a test slot: once thousands of silent connections made as many threads,
//! and 64 connections dribbling their hello locked everyone out.

use std::collections::HashMap;
use std::io::{self, Read};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsFd;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use nix::poll::{poll, PollFd, PollFlags, PollTimeout};

use super::access::{AccessList, ClientKey};
use super::auth::Psk;
use super::counters::ServerCounters;
use super::framing::write_frame;
use super::oneport::DataRoutes;
use super::protocol::ServerMessage;
use super::refusal::Refusal;
use crate::transport::DATA_PREFIX;
use crate::units::format_seconds;

/// How long after accept a connection has to send its whole hello (or, for a one-port data
/// connection, its prefix and cookie), however slowly its bytes come.
pub const HELLO_DEADLINE: Duration = Duration::from_secs(5);
/// The largest hello accepted. A real one is under 200 bytes; the bound keeps what the
/// waiting connections can hold to a few bytes each.
pub const MAX_HELLO: u32 = 4096;
/// Connections accepted per round before the waiting ones are read again, so that a burst of
/// connections does not starve those already waiting (nor fill their client's share unread).
const ACCEPT_BATCH: usize = 32;
const COOKIE_LEN: usize = 16;

/// Who may connect and how much of the server one client may hold.
#[derive(Debug, Clone)]
pub struct AccessConfig {
    pub list: AccessList,
    /// Most sessions (control connections past their hello) one client holds at once.
    pub max_sessions_per_client: u32,
    /// Most connections waiting for their hello at once, all clients together; a quarter of
    /// them (or max_sessions_per_client, if more) is one client's share. Over either, the
    /// oldest waiting connection is closed.
    pub max_pending: u32,
    /// Clients must prove they hold this key (see auth.rs).
    pub psk: Option<Arc<Psk>>,
}

impl Default for AccessConfig {
    fn default() -> Self {
        AccessConfig {
            list: AccessList::default(),
            max_sessions_per_client: 8,
            max_pending: 256,
            psk: None,
        }
    }
}

impl AccessConfig {
    /// One client's share of the waiting set: a quarter of it, or as many as the tests it may
    /// run if that is more (a client allowed 400 tests at once may open that many at once).
    fn pending_per_client(&self) -> usize {
        let all = self.max_pending as usize;
        (all / 4)
            .max(self.max_sessions_per_client as usize)
            .clamp(1, all.max(1))
    }
}

/// How long a session must have waited for its client's next request before a client that
/// finds the server full may take its slot. A client between points asks again within a few
/// milliseconds; one that holds a slot and says nothing for seconds is the one to yield, not
/// the newcomer (64 sessions that opened a test and then said nothing once kept every other
/// client "busy" for the whole minute of the idle timeout).
pub const YIELD_AFTER: Duration = Duration::from_secs(2);

/// The server's session slots, in total and per client.
#[derive(Default)]
pub struct Slots {
    counts: Mutex<SlotCounts>,
}

#[derive(Default)]
struct SlotCounts {
    total: u32,
    per_client: HashMap<ClientKey, u32>,
    /// Every slot held now, so that a full server can find a session idle long enough.
    held: Vec<Arc<Holder>>,
}

/// One held slot, shared between the slots' count and the session that holds it.
struct Holder {
    client: ClientKey,
    state: Mutex<HolderState>,
}

#[derive(Default)]
struct HolderState {
    /// Since when the session has waited for its client's next request (None: it is working).
    idle_since: Option<Instant>,
    /// The control connection while the session waits, to wake its read when it must yield.
    ctrl: Option<TcpStream>,
    /// The slot was given to another client after the session had waited this long: it is
    /// no longer counted, and the session must end.
    yielded: Option<Duration>,
}

/// A session's slot, given back when it drops.
pub struct SessionSlot {
    slots: Arc<Slots>,
    holder: Arc<Holder>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl SlotCounts {
    fn release(&mut self, holder: &Arc<Holder>) {
        self.total = self.total.saturating_sub(1);
        if let Some(n) = self.per_client.get_mut(&holder.client) {
            *n -= 1;
            if *n == 0 {
                self.per_client.remove(&holder.client);
            }
        }
        self.held.retain(|h| !Arc::ptr_eq(h, holder));
    }

    /// Takes the slot of the session that has waited longest for its client, if that is
    /// [`YIELD_AFTER`] or more, and wakes the session so that it ends (with why). Ok when a
    /// slot was freed; else how long until the longest waiting session will have waited
    /// that long (None: every session is working).
    fn reclaim(&mut self, now: Instant) -> Result<(), Option<Duration>> {
        let longest = self
            .held
            .iter()
            .filter_map(|h| lock(&h.state).idle_since.map(|since| (since, h)))
            .min_by_key(|(since, _)| *since)
            .map(|(since, h)| (since, Arc::clone(h)));
        let holder = match longest {
            None => return Err(None),
            Some((since, holder)) => {
                let idle = now.saturating_duration_since(since);
                if idle < YIELD_AFTER {
                    return Err(Some(YIELD_AFTER - idle));
                }
                holder
            }
        };
        {
            let mut st = lock(&holder.state);
            // Between the look and now the session may have got its request: it keeps its slot.
            let Some(since) = st.idle_since.take() else {
                return Err(None);
            };
            st.yielded = Some(now.saturating_duration_since(since));
            if let Some(ctrl) = st.ctrl.take() {
                // Wakes the session's read (it returns end of stream); its writes still work,
                // so it can tell its client why.
                let _ = ctrl.shutdown(std::net::Shutdown::Read);
            }
        }
        self.release(&holder);
        Ok(())
    }
}

impl Slots {
    /// Takes a slot for `client`, or says why not. When the server is full, a session that
    /// has waited [`YIELD_AFTER`] or more for its client's next request gives up its slot; if
    /// one waits but not yet that long, the refusal says when it will have.
    pub fn take(
        self: &Arc<Self>,
        client: ClientKey,
        max_total: u32,
        max_per_client: u32,
    ) -> Result<SessionSlot, Refusal> {
        let mut c = lock(&self.counts);
        let mine = c.per_client.get(&client).copied().unwrap_or(0);
        if c.total >= max_total {
            let freed = if mine >= max_per_client {
                Err(None)
            } else {
                c.reclaim(Instant::now())
            };
            if let Err(wait) = freed {
                return Err(Refusal::busy(format!(
                    "server busy: {} tests running, the limit is {max_total}",
                    c.total
                ))
                .retry_after(wait));
            }
        }
        if mine >= max_per_client {
            return Err(Refusal::busy(format!(
                "too many tests from {client}: the limit is {max_per_client}"
            )));
        }
        *c.per_client.entry(client).or_default() += 1;
        c.total += 1;
        let holder = Arc::new(Holder {
            client,
            state: Mutex::default(),
        });
        c.held.push(Arc::clone(&holder));
        Ok(SessionSlot {
            slots: Arc::clone(self),
            holder,
        })
    }

    /// Sessions held now, in total.
    pub fn held(&self) -> u32 {
        lock(&self.counts).total
    }
}

impl SessionSlot {
    /// No other session holds a slot now.
    pub fn last_one(&self) -> bool {
        lock(&self.slots.counts).total <= 1
    }

    /// The session waits for its client's next request from now on; `ctrl` (a handle on the
    /// control connection) lets a full server wake it to yield.
    pub fn waiting(&self, ctrl: &TcpStream) {
        self.waiting_since(ctrl.try_clone().ok(), Instant::now());
    }

    fn waiting_since(&self, ctrl: Option<TcpStream>, since: Instant) {
        let mut st = lock(&self.holder.state);
        if st.yielded.is_none() {
            st.idle_since = Some(since);
            st.ctrl = ctrl;
        }
    }

    /// The wait is over. Err(why) when the slot went to another client meanwhile: the session
    /// must end, whatever its client sent.
    pub fn working(&self) -> Result<(), Refusal> {
        let mut st = lock(&self.holder.state);
        st.idle_since = None;
        st.ctrl = None;
        match st.yielded {
            None => Ok(()),
            Some(idle) => Err(Refusal::busy(format!(
                "server busy: this session's slot went to another client after {} without a request from this one (the server was at its --max-sessions)",
                format_seconds(idle.as_secs_f64())
            ))),
        }
    }
}

impl Drop for SessionSlot {
    fn drop(&mut self) {
        let mut c = lock(&self.slots.counts);
        // A yielded slot was given back when it was taken away.
        if lock(&self.holder.state).yielded.is_none() {
            c.release(&self.holder);
        }
    }
}

/// A control connection past its hello, with its slot: the session's to serve.
pub struct Admitted {
    pub stream: TcpStream,
    pub peer: SocketAddr,
    pub accepted: Instant,
    /// The hello frame as it came, length prefix included.
    pub hello: Vec<u8>,
    pub slot: SessionSlot,
}

/// A connection that has not yet said what it is.
struct Pending {
    stream: TcpStream,
    peer: SocketAddr,
    client: ClientKey,
    accepted: Instant,
    buf: Vec<u8>,
    /// Bytes wanted in `buf` before the next decision.
    need: usize,
}

enum Progress {
    Waiting,
    Gone,
    Refuse(Refusal),
    Control,
    Data,
}

impl Pending {
    /// Reads what has arrived, without waiting.
    fn progress(&mut self) -> Progress {
        let mut chunk = [0u8; 512];
        loop {
            let want = (self.need - self.buf.len()).min(chunk.len());
            match self.stream.read(&mut chunk[..want]) {
                Ok(0) => return Progress::Gone,
                Ok(n) => self.buf.extend_from_slice(&chunk[..n]),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Progress::Waiting,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(_) => return Progress::Gone,
            }
            if self.buf.len() < self.need {
                continue;
            }
            if self.need > 4 {
                return if self.buf[..4] == DATA_PREFIX {
                    Progress::Data
                } else {
                    Progress::Control
                };
            }
            // The first four bytes: a data connection's prefix, or a frame's length.
            if self.buf[..] == DATA_PREFIX {
                self.need = 4 + COOKIE_LEN;
                continue;
            }
            let len = u32::from_be_bytes([self.buf[0], self.buf[1], self.buf[2], self.buf[3]]);
            if len == 0 || len > MAX_HELLO {
                return Progress::Refuse(Refusal::invalid(format!(
                    "malformed control frame (length {len}, limit {MAX_HELLO} for a hello): not a wirebench peer?"
                )));
            }
            self.need = 4 + len as usize;
        }
    }
}

/// One line per refusal on stderr, when the server logs, but no more than a few a second: a
/// flood of refused connections must not become a flood of log lines.
struct RefusalLog {
    on: bool,
    window: Instant,
    lines: u32,
    unlogged: u64,
}

const LOG_LINES_PER_SECOND: u32 = 10;

impl RefusalLog {
    fn note(&mut self, peer: SocketAddr, why: &Refusal) {
        if !self.on {
            return;
        }
        let now = Instant::now();
        if now.duration_since(self.window) >= Duration::from_secs(1) {
            if self.unlogged > 0 {
                eprintln!(
                    "wirebench serve: {} more connections refused in the last second",
                    self.unlogged
                );
            }
            self.window = now;
            self.lines = 0;
            self.unlogged = 0;
        }
        if self.lines < LOG_LINES_PER_SECOND {
            self.lines += 1;
            eprintln!("wirebench serve: refused {peer} ({}): {why}", why.kind);
        } else {
            self.unlogged += 1;
        }
    }
}

/// The accept loop.
pub struct Acceptor<'a> {
    listener: &'a TcpListener,
    access: &'a AccessConfig,
    max_sessions: u32,
    routes: &'a DataRoutes,
    slots: Arc<Slots>,
    pending: Vec<Pending>,
    log: RefusalLog,
    counters: Arc<ServerCounters>,
}

impl<'a> Acceptor<'a> {
    pub fn new(
        listener: &'a TcpListener,
        access: &'a AccessConfig,
        max_sessions: u32,
        routes: &'a DataRoutes,
        slots: Arc<Slots>,
        log: bool,
        counters: Arc<ServerCounters>,
    ) -> Acceptor<'a> {
        Acceptor {
            listener,
            access,
            max_sessions,
            routes,
            slots,
            pending: Vec::new(),
            log: RefusalLog {
                on: log,
                window: Instant::now(),
                lines: 0,
                unlogged: 0,
            },
            counters,
        }
    }

    /// Accepts forever; `start` serves each admitted session (on a thread of its own).
    pub fn run(&mut self, start: &mut dyn FnMut(Admitted)) -> io::Result<()> {
        self.listener.set_nonblocking(true)?;
        loop {
            self.expire(Instant::now());
            let (listener_ready, ready) = self.wait();
            // Highest index first: swap_remove only moves entries already looked at.
            for i in (0..ready.len()).rev() {
                if ready[i] {
                    let outcome = self.pending[i].progress();
                    self.settle(i, outcome, start);
                }
            }
            if listener_ready {
                self.accept_some(start);
            }
        }
    }

    /// Waits until the listener or a waiting connection is readable, or the next deadline.
    fn wait(&self) -> (bool, Vec<bool>) {
        let next = self
            .pending
            .iter()
            .map(|p| p.accepted + HELLO_DEADLINE)
            .min();
        let timeout = match next {
            // Rounded up: a deadline a fraction of a millisecond away must not spin.
            Some(d) => {
                let ms = d
                    .saturating_duration_since(Instant::now())
                    .as_micros()
                    .div_ceil(1000);
                PollTimeout::from(u16::try_from(ms).unwrap_or(u16::MAX))
            }
            None => PollTimeout::NONE,
        };
        let mut fds = Vec::with_capacity(1 + self.pending.len());
        fds.push(PollFd::new(self.listener.as_fd(), PollFlags::POLLIN));
        for p in &self.pending {
            fds.push(PollFd::new(p.stream.as_fd(), PollFlags::POLLIN));
        }
        match poll(&mut fds, timeout) {
            Ok(_) => {}
            Err(e) => {
                // Interrupted, or out of memory for a moment: nothing is ready; the server
                // keeps serving (deadlines are checked on the next round).
                if e != nix::errno::Errno::EINTR {
                    eprintln!("wirebench serve: poll failed: {e}");
                    std::thread::sleep(Duration::from_millis(50));
                }
                return (false, vec![false; self.pending.len()]);
            }
        }
        // Hang-ups and errors count as ready: the read then tells what happened.
        let ready = |f: &PollFd| f.revents().is_none_or(|r| !r.is_empty());
        (ready(&fds[0]), fds[1..].iter().map(ready).collect())
    }

    fn expire(&mut self, now: Instant) {
        let mut i = 0;
        while i < self.pending.len() {
            if self.pending[i].accepted + HELLO_DEADLINE <= now {
                let p = self.pending.swap_remove(i);
                self.refuse(
                    p.stream,
                    p.peer,
                    Refusal::invalid(format!(
                        "no complete hello within {} of connecting",
                        format_seconds(HELLO_DEADLINE.as_secs_f64())
                    )),
                );
            } else {
                i += 1;
            }
        }
    }

    fn accept_some(&mut self, start: &mut dyn FnMut(Admitted)) {
        for _ in 0..ACCEPT_BATCH {
            match self.listener.accept() {
                Ok((stream, peer)) => self.admit(stream, peer, start),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => {
                    // Out of descriptors and the like: say so, wait a little, keep serving.
                    eprintln!("wirebench serve: accept failed: {e}");
                    std::thread::sleep(Duration::from_millis(50));
                    return;
                }
            }
        }
    }

    /// The checks that need no byte from the peer, then the first read.
    fn admit(&mut self, stream: TcpStream, peer: SocketAddr, start: &mut dyn FnMut(Admitted)) {
        let ip = peer.ip().to_canonical();
        if !self.access.list.permits(ip) {
            return self.refuse(
                stream,
                peer,
                Refusal::policy(format!("access denied: {ip} may not use this server")),
            );
        }
        // Full, the oldest waiting connection makes room (of this client, if it has its
        // share waiting; else of anyone): a real hello comes within a round trip of connect,
        // so silent connections are the ones that grow old, and to keep a client out an
        // attacker must open connections faster than that client can say hello. Refusing the
        // newest instead would let a few silent connections, renewed every few seconds, keep
        // everyone out.
        let client = ClientKey::of(ip);
        let share = self.access.pending_per_client();
        let (mine, oldest_mine) = self.oldest(|p| p.client == client);
        if mine >= share {
            self.evict(
                oldest_mine,
                Refusal::busy(format!(
                    "too many connections from {client} waiting to say hello, the limit is {share}: this one, the oldest, is closed"
                )),
            );
        } else if self.pending.len() >= self.access.max_pending as usize {
            let (n, oldest) = self.oldest(|_| true);
            self.evict(
                oldest,
                Refusal::busy(format!(
                    "server busy: {n} connections are waiting to say hello, the most it keeps: this one, the oldest, is closed"
                )),
            );
        }
        if stream.set_nonblocking(true).is_err() {
            return;
        }
        self.pending.push(Pending {
            stream,
            peer,
            client,
            accepted: Instant::now(),
            buf: Vec::new(),
            need: 4,
        });
        // Most connections have sent everything by now (a crr --one-port test opens one per
        // transaction): settle them without a round through poll.
        let last = self.pending.len() - 1;
        let outcome = self.pending[last].progress();
        self.settle(last, outcome, start);
    }

    /// How many waiting connections match, and the index of the oldest of them.
    fn oldest(&self, which: impl Fn(&Pending) -> bool) -> (usize, Option<usize>) {
        let mut n = 0;
        let mut oldest: Option<usize> = None;
        for (i, p) in self.pending.iter().enumerate().filter(|(_, p)| which(p)) {
            n += 1;
            if oldest.is_none_or(|o| p.accepted < self.pending[o].accepted) {
                oldest = Some(i);
            }
        }
        (n, oldest)
    }

    fn evict(&mut self, i: Option<usize>, why: Refusal) {
        if let Some(i) = i {
            let p = self.pending.swap_remove(i);
            self.refuse(p.stream, p.peer, why);
        }
    }

    fn settle(&mut self, i: usize, outcome: Progress, start: &mut dyn FnMut(Admitted)) {
        match outcome {
            Progress::Waiting => {}
            Progress::Gone => {
                self.pending.swap_remove(i);
            }
            Progress::Refuse(why) => {
                let p = self.pending.swap_remove(i);
                self.refuse(p.stream, p.peer, why);
            }
            Progress::Data => {
                let p = self.pending.swap_remove(i);
                if p.stream.set_nonblocking(false).is_ok() {
                    self.routes.hand_over(&p.buf[4..], p.stream);
                }
            }
            Progress::Control => {
                let p = self.pending.swap_remove(i);
                let max_per_client = self.access.max_sessions_per_client;
                match self.slots.take(p.client, self.max_sessions, max_per_client) {
                    Err(why) => self.refuse(p.stream, p.peer, why),
                    Ok(slot) => {
                        if p.stream.set_nonblocking(false).is_ok() {
                            start(Admitted {
                                stream: p.stream,
                                peer: p.peer,
                                accepted: p.accepted,
                                hello: p.buf,
                                slot,
                            });
                        }
                    }
                }
            }
        }
    }

    /// Tells the peer why, if its socket takes the few bytes at once (it never waits), and
    /// closes the connection.
    fn refuse(&mut self, mut stream: TcpStream, peer: SocketAddr, why: Refusal) {
        let _ = stream.set_nonblocking(true);
        self.counters.refused(why.kind);
        self.log.note(peer, &why);
        let _ = write_frame(&mut stream, &ServerMessage::from(why));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::control::refusal::RefusalKind;

    fn key(s: &str) -> ClientKey {
        ClientKey::of(s.parse().unwrap())
    }

    #[test]
    fn slots_count_in_total_and_per_client_and_come_back() {
        let slots = Arc::new(Slots::default());
        let a1 = slots.take(key("10.0.0.1"), 3, 2).unwrap();
        let a2 = slots.take(key("10.0.0.1"), 3, 2).unwrap();
        assert_eq!(
            slots.take(key("10.0.0.1"), 3, 2).err().unwrap(),
            Refusal::busy("too many tests from 10.0.0.1: the limit is 2")
        );
        let b1 = slots.take(key("10.0.0.2"), 3, 2).unwrap();
        // Every session is working: the server cannot tell when a slot comes free.
        assert_eq!(
            slots.take(key("10.0.0.3"), 3, 2).err().unwrap(),
            Refusal::busy("server busy: 3 tests running, the limit is 3")
        );
        assert_eq!(slots.held(), 3);
        drop(a1);
        let a3 = slots.take(key("10.0.0.1"), 3, 2).unwrap();
        drop((a2, a3, b1));
        assert_eq!(slots.held(), 0);
        assert!(slots.counts.lock().unwrap().per_client.is_empty());
    }

    /// A full server gives the slot of the session that has waited longest (YIELD_AFTER or
    /// more) for its client to a newcomer; a session that waited less, or that is working,
    /// keeps its slot, and a newcomer over its own share takes nobody's.
    #[test]
    fn a_full_server_takes_the_slot_of_the_longest_idle_session() {
        let slots = Arc::new(Slots::default());
        let now = Instant::now();
        let a = slots.take(key("10.0.0.1"), 3, 2).unwrap();
        let b = slots.take(key("10.0.0.2"), 3, 2).unwrap();
        let c = slots.take(key("10.0.0.2"), 3, 2).unwrap();
        // Working sessions and one idle for less than YIELD_AFTER: the newcomer is refused,
        // and told when that session will have waited long enough to yield.
        a.waiting_since(None, now - YIELD_AFTER / 4);
        let e = slots.take(key("10.0.0.3"), 3, 2).err().unwrap();
        assert_eq!(e.kind, RefusalKind::Busy);
        let wait = e.retry_after.expect("a hint");
        assert!(
            wait > Duration::ZERO && wait <= YIELD_AFTER * 3 / 4,
            "{wait:?}"
        );
        assert!(a.working().is_ok());
        // b and c have waited long enough, c the longest; over its own share, 10.0.0.2 takes
        // nobody's slot.
        b.waiting_since(None, now - YIELD_AFTER);
        c.waiting_since(None, now - 2 * YIELD_AFTER);
        assert_eq!(
            slots.take(key("10.0.0.2"), 3, 2).err().unwrap().message,
            "server busy: 3 tests running, the limit is 3"
        );
        let d = slots.take(key("10.0.0.3"), 3, 2).unwrap();
        assert_eq!(slots.held(), 3);
        let why = c.working().unwrap_err();
        assert_eq!(why.kind, RefusalKind::Busy);
        assert!(why.message.contains("went to another client"), "{why}");
        // b still waits and still counts; c's slot is not given back twice.
        drop(c);
        assert_eq!(slots.held(), 3);
        let e = slots.take(key("10.0.0.4"), 3, 2).unwrap();
        assert!(b.working().is_err());
        drop((a, b, d, e));
        assert_eq!(slots.held(), 0);
        let counts = slots.counts.lock().unwrap();
        assert!(counts.per_client.is_empty() && counts.held.is_empty());
    }
}
