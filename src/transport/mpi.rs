//! MPI point-to-point between the two ranks of an MPI job (feature `mpi`), as IMB PingPong and
//! the OSU micro-benchmarks use it: every `send` is one standard-mode message to the other
//! rank, every `recv` takes one message. Which wire it crosses (TCP, shared memory,
//! InfiniBand...) is the MPI library's choice, made with its own options
//! (`mpirun --mca btl tcp,self`).
//!
//! This is the only file that calls MPI (through the `mpi` crate, rsmpi, whose calls are
//! safe Rust); the `wirebench mpi` command (`src/mpi_cmd.rs`) drives it.
//!
//! How the connection maps the [`Connection`] contract onto MPI:
//!
//! - **A connection is a tag.** Each run of a point gets its own tag ([`run_tag`]), so a
//!   message left over from an earlier run can never be taken for this one's. Control
//!   messages travel on [`CONTROL_TAG`] (a mesh's pairs on [`PAIR_CONTROL_TAGS`]), never on
//!   a data tag.
//! - **End of data is a zero-length message** on the data tag, sent by
//!   [`Connection::shutdown_write`] or, like a socket's close, when the connection is dropped
//!   (unless this side already saw the peer's end). A receive returns Ok(0) for it, which is
//!   what patterns take for end of stream. Zero-length sends from patterns are not sent.
//! - **Byte-stream capabilities** (`message_boundaries: false`): one send is one MPI message
//!   and a receive returns one whole message when the buffer holds it; a longer message is
//!   handed out over several receives. Patterns then read whole messages and see the end of
//!   data as end of stream, as over TCP. (A message transport in wirebench's sense has no end
//!   of stream: its responders stop on a flag, which a process of its own, the other rank,
//!   cannot raise.)
//! - **Receives honour the read timeout** (and non-blocking mode): they poll `MPI_Improbe`
//!   and take the matched message with `MPI_Mrecv`. Polling is what MPI's own blocking calls
//!   do; the clock is read only every [`POLLS_PER_CLOCK_READ`] polls.
//! - **A stream keeps windows of messages in flight** ([`MpiConnection::streaming`]), as
//!   osu_bw does. The sender copies each send into one of W buffers and starts it with
//!   `MPI_Isend`; only a send into a buffer still in flight waits, like a write into a full
//!   socket buffer. The end of data waits for every send in the window. The receiver keeps W
//!   `MPI_Irecv` posted, so that every rendezvous message can move at once, and copies each
//!   message out as it is read (see `crate::sys::mpi_window`).
//!   Ping-pong and request/response send straight from the caller's buffer, as IMB PingPong
//!   and osu_latency do: a copy there would be timed.
//! - **Sends are `MPI_Isend` completed by polling `MPI_Test`**, so that a send that cannot
//!   complete (a large message the peer never receives) is noticed after the write timeout.
//!   MPI cannot take back a message it has started to send, and the buffer may not be given
//!   back while MPI may still read it, so such a send ends the whole job with `MPI_Abort`
//!   after printing why: the job ends instead of hanging.
//! - **One thread.** MPI is initialised with `MPI_THREAD_FUNNELED`: only the thread that
//!   initialised it may call MPI. A connection remembers its thread and refuses to be used
//!   from another.
//! - No socket underneath: no socket options, no TCP_INFO, no fast paths (`socket_fd` is None).

use std::io;
use std::net::{IpAddr, SocketAddr};
use std::thread::ThreadId;
use std::time::{Duration, Instant};

use anyhow::{bail, Result};
use mpi::datatype::Equivalence;
use mpi::point_to_point::{Message, Status};
pub use mpi::topology::Rank;
use mpi::topology::SimpleCommunicator;
use mpi::traits::*;
pub use mpi::Tag;

use super::{
    Capabilities, Connection, Cookie, EffectiveOptions, Listener, SocketOptions, Transport,
};
use crate::sys::mpi_window::{spin_until, RecvWindow, SendWindow, Stuck};

/// Tag of the control messages between the ranks (plan, statistics).
pub const CONTROL_TAG: Tag = 1;
/// Control tags of one ordered pair of ranks measuring inside a larger job (a mesh), one for
/// each way the pair can be ordered: apart from the job's own [`CONTROL_TAG`], so that the
/// pair's exchange never takes the job's messages or leaves a late one where the job (or the
/// reverse pair) will look.
pub const PAIR_CONTROL_TAGS: [Tag; 2] = [2, 3];
/// Data tags are `FIRST_DATA_TAG + run % DATA_TAGS`; MPI guarantees tags up to 32767.
const FIRST_DATA_TAG: Tag = 16;
const DATA_TAGS: u64 = (32_767 - FIRST_DATA_TAG as u64) + 1;

/// Probes between two clock reads while waiting for a message.
const POLLS_PER_CLOCK_READ: u32 = 64;

/// osu_bw's window: messages in flight at once on a stream.
pub const DEFAULT_WINDOW: u32 = 64;
/// Bytes the window's buffers may hold at most, as Linux's largest default TCP send buffer
/// (4 MiB): with large messages fewer are in flight. More buffers only leave the caches: on
/// loopback 1 MiB messages moved 40-46 Gbit/s with 4 in flight and 25 with 16.
pub const WINDOW_BYTES: u64 = 4 << 20;

/// Messages in flight for `requested` messages of `message` bytes, within [`WINDOW_BYTES`].
pub fn window_for(requested: u32, message: u64) -> usize {
    let by_bytes = (WINDOW_BYTES / message.max(1)).max(1);
    (u64::from(requested.max(1))).min(by_bytes) as usize
}

/// The data tag of run number `run` (counted over the whole job).
pub fn run_tag(run: u64) -> Tag {
    FIRST_DATA_TAG + (run % DATA_TAGS) as Tag
}

/// The transport as `wirebench run` sees it: capabilities for the plan, and a clear error for
/// anything that would need a socket.
pub struct Mpi;

pub const CAPABILITIES: Capabilities = Capabilities {
    reliable: true,
    message_boundaries: false,
    // MPI counts elements in a C int; one message of bytes carries at most 2^31 - 1.
    max_message: i32::MAX as u64,
    tcp_options: false,
    host_local: false,
    syscall_batching: false,
    rcvlowat: false,
};

fn not_a_socket() -> anyhow::Error {
    anyhow::anyhow!(
        "the mpi transport runs between the two ranks of an MPI job, not over a wirebench server: use `mpirun -np 2 wirebench mpi PATTERN ...`"
    )
}

impl Transport for Mpi {
    fn name(&self) -> &'static str {
        "mpi"
    }
    fn capabilities(&self) -> Capabilities {
        CAPABILITIES
    }
    fn listen(&self, _local: IpAddr, _peer: IpAddr) -> Result<Box<dyn Listener>> {
        Err(not_a_socket())
    }
    fn connect(
        &self,
        _control: SocketAddr,
        _endpoint: &str,
        _opts: &SocketOptions,
        _cookie: &Cookie,
        _timeout: Duration,
    ) -> Result<Box<dyn Connection>> {
        Err(not_a_socket())
    }
}

/// This process's place in the MPI job. MPI is finalised when it is dropped, so it must
/// outlive every connection.
pub struct Job {
    _universe: mpi::environment::Universe,
    rank: Rank,
    size: Rank,
}

impl Job {
    /// Initialises MPI (`MPI_THREAD_FUNNELED`: this thread makes every MPI call).
    pub fn init() -> Result<Job> {
        let Some((universe, _provided)) = mpi::initialize_with_threading(mpi::Threading::Funneled)
        else {
            bail!("MPI was already initialised");
        };
        let world = universe.world();
        Ok(Job {
            rank: world.rank(),
            size: world.size(),
            _universe: universe,
        })
    }
    pub fn rank(&self) -> Rank {
        self.rank
    }
    pub fn size(&self) -> Rank {
        self.size
    }
    /// The MPI library, e.g. "Open MPI v4.1.4" (its first line).
    pub fn library(&self) -> String {
        library()
    }
}

/// The MPI library, e.g. "Open MPI v4.1.4" (its first line).
pub fn library() -> String {
    mpi::environment::library_version()
        .ok()
        .and_then(|v| v.split([',', '\n']).next().map(|s| s.trim().to_owned()))
        .unwrap_or_else(|| "unknown MPI".into())
}

fn abort_job(why: &str) -> ! {
    eprintln!("wirebench: error: {why}; ending the MPI job (MPI_Abort)");
    SimpleCommunicator::world().abort(crate::error::EXIT_FAILURE)
}

/// Sends `buf` as one message to `peer` with `tag` and polls until MPI is done with the
/// buffer; after `timeout` (None: never) the job is aborted, see the module documentation.
fn send_message(peer: Rank, tag: Tag, buf: &[u8], timeout: Option<Duration>) {
    let world = SimpleCommunicator::world();
    let dest = world.process_at_rank(peer);
    mpi::request::scope(|scope| {
        let mut req = Some(dest.immediate_send_with_tag(scope, buf, tag));
        let sent = spin_until(timeout, || match req.take().map(|r| r.test()) {
            Some(Err(r)) => {
                req = Some(r);
                false
            }
            _ => true,
        });
        if !sent {
            stuck(peer, Stuck::Timeout { bytes: buf.len() }, timeout);
        }
    })
}

/// A send that cannot complete: the job ends, see the module documentation.
fn stuck(peer: Rank, e: Stuck, timeout: Option<Duration>) -> ! {
    match e {
        Stuck::Timeout { bytes } => abort_job(&format!(
            "a {bytes}-byte MPI send to rank {peer} did not complete{}",
            timeout
                .map(|t| format!(" within {}", crate::units::format_seconds(t.as_secs_f64())))
                .unwrap_or_default()
        )),
        Stuck::WrongThread => {
            abort_job("an MPI send window was used from another thread than its own")
        }
    }
}

/// How a probe waits for a message.
#[derive(Clone, Copy)]
enum Wait {
    /// Returns WouldBlock at once when nothing is there.
    Never,
    /// Spins (as MPI's blocking calls do) for up to the timeout; None: no limit.
    Spin(Option<Duration>),
    /// Sleeps between probes: for control messages, which may be seconds away.
    Doze(Duration),
}

fn timed_out() -> io::Error {
    io::Error::new(io::ErrorKind::TimedOut, "no MPI message within the timeout")
}

/// Waits for the next message from `peer` with `tag` and returns it matched (no other
/// receive can take it any more) with its length in bytes.
fn probe(peer: Rank, tag: Tag, wait: Wait) -> io::Result<(Message, usize)> {
    let world = SimpleCommunicator::world();
    let source = world.process_at_rank(peer);
    let found = |m: (Message, Status)| {
        let len = m.1.count(u8::equivalent_datatype()).max(0) as usize;
        (m.0, len)
    };
    if let Some(m) = source.immediate_matched_probe_with_tag(tag) {
        return Ok(found(m));
    }
    let started = Instant::now();
    let mut polls = 0u32;
    loop {
        match wait {
            Wait::Never => return Err(io::ErrorKind::WouldBlock.into()),
            Wait::Spin(limit) => {
                polls = polls.wrapping_add(1);
                if polls.is_multiple_of(POLLS_PER_CLOCK_READ)
                    && limit.is_some_and(|t| started.elapsed() >= t)
                {
                    return Err(timed_out());
                }
                std::hint::spin_loop();
            }
            Wait::Doze(limit) => {
                if started.elapsed() >= limit {
                    return Err(timed_out());
                }
                std::thread::sleep(Duration::from_micros(200));
            }
        }
        if let Some(m) = source.immediate_matched_probe_with_tag(tag) {
            return Ok(found(m));
        }
    }
}

/// Sends one control message (bytes, e.g. JSON) to `peer`.
pub fn send_control(peer: Rank, bytes: &[u8], timeout: Duration) {
    send_control_on(peer, CONTROL_TAG, bytes, timeout);
}

/// Receives one control message from `peer`, waiting up to `timeout` (sleeping, not spinning).
pub fn recv_control(peer: Rank, timeout: Duration) -> io::Result<Vec<u8>> {
    recv_control_on(peer, CONTROL_TAG, timeout)
}

/// [`send_control`] on a control tag of its own (one of [`PAIR_CONTROL_TAGS`]).
pub fn send_control_on(peer: Rank, tag: Tag, bytes: &[u8], timeout: Duration) {
    send_message(peer, tag, bytes, Some(timeout));
}

/// [`recv_control`] on a control tag of its own (one of [`PAIR_CONTROL_TAGS`]).
pub fn recv_control_on(peer: Rank, tag: Tag, timeout: Duration) -> io::Result<Vec<u8>> {
    let (msg, len) = probe(peer, tag, Wait::Doze(timeout))?;
    let mut buf = vec![0u8; len];
    msg.matched_receive_into(&mut buf[..]);
    Ok(buf)
}

/// A data connection to the other rank of the job, on one run's tag.
pub struct MpiConnection {
    peer: Rank,
    tag: Tag,
    thread: ThreadId,
    read_timeout: Option<Duration>,
    write_timeout: Option<Duration>,
    nonblocking: bool,
    /// A message longer than the buffer that received it: the part not yet handed out.
    pending: Vec<u8>,
    pending_from: usize,
    /// The peer's end-of-data message arrived.
    peer_done: bool,
    /// This side sent its end-of-data message.
    done: bool,
    /// A stream sender's sends in flight; None: each send completes before `send` returns.
    window: Option<SendWindow>,
    /// A stream receiver's posted receives; None: each message is probed for, then received.
    rx_window: Option<RecvWindow>,
}

impl MpiConnection {
    /// A connection to `peer` on `tag` (see [`run_tag`]), to be used on this thread only.
    pub fn new(peer: Rank, tag: Tag) -> MpiConnection {
        MpiConnection {
            peer,
            tag,
            thread: std::thread::current().id(),
            read_timeout: None,
            write_timeout: None,
            nonblocking: false,
            pending: Vec::new(),
            pending_from: 0,
            peer_done: false,
            done: false,
            window: None,
            rx_window: None,
        }
    }

    /// One end of a stream: up to `window` messages of up to `message` bytes in flight at
    /// once, sent (`sends`) or received, see the module documentation. A window of 1 still
    /// copies; use [`MpiConnection::new`] to move messages straight from the caller's buffer.
    pub fn streaming(
        peer: Rank,
        tag: Tag,
        sends: bool,
        window: usize,
        message: usize,
    ) -> MpiConnection {
        let mut c = MpiConnection::new(peer, tag);
        if sends {
            c.window = Some(SendWindow::new(peer, tag, window, message));
        } else {
            c.rx_window = Some(RecvWindow::new(peer, tag, window, message));
        }
        c
    }

    /// How messages leave and arrive on this side, for the report.
    pub fn io_path(&self) -> String {
        match (&self.window, &self.rx_window) {
            (Some(w), _) => format!("MPI_Isend, window of {}", w.len()),
            (_, Some(w)) => format!("MPI_Irecv, window of {}", w.len()),
            _ => "MPI_Isend/MPI_Mrecv, one at a time".into(),
        }
    }

    /// Waits for every send of the window (the end of data must follow them all).
    fn drain(&mut self) {
        if let Some(w) = &mut self.window {
            if let Err(e) = w.drain(self.write_timeout) {
                stuck(self.peer, e, self.write_timeout);
            }
        }
    }

    /// Sends the end-of-data message after every message before it has gone.
    fn send_end(&mut self) {
        self.done = true;
        self.drain();
        send_message(self.peer, self.tag, &[], self.write_timeout);
    }

    fn check_thread(&self) -> io::Result<()> {
        if std::thread::current().id() == self.thread {
            Ok(())
        } else {
            Err(io::Error::other(
                "an MPI connection is used only on the thread that initialised MPI",
            ))
        }
    }

    fn take_pending(&mut self, buf: &mut [u8]) -> usize {
        let n = (self.pending.len() - self.pending_from).min(buf.len());
        buf[..n].copy_from_slice(&self.pending[self.pending_from..self.pending_from + n]);
        self.pending_from += n;
        if self.pending_from == self.pending.len() {
            self.pending.clear();
            self.pending_from = 0;
        }
        n
    }
}

impl Connection for MpiConnection {
    #[inline]
    fn send(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.check_thread()?;
        if self.done {
            return Err(io::Error::new(
                io::ErrorKind::BrokenPipe,
                "send after the end of data",
            ));
        }
        if buf.is_empty() {
            return Ok(0); // a zero-length message would mean end of data
        }
        match &mut self.window {
            Some(w) => {
                if let Err(e) = w.post(buf, self.write_timeout) {
                    stuck(self.peer, e, self.write_timeout);
                }
            }
            None => send_message(self.peer, self.tag, buf, self.write_timeout),
        }
        Ok(buf.len())
    }

    #[inline]
    fn recv(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.check_thread()?;
        if !self.pending.is_empty() {
            return Ok(self.take_pending(buf));
        }
        if self.peer_done || buf.is_empty() {
            return Ok(0);
        }
        if let Some(w) = &mut self.rx_window {
            let n = w.recv(buf, &mut self.pending, !self.nonblocking, self.read_timeout)?;
            if n == 0 {
                self.peer_done = true;
            }
            return Ok(n.min(buf.len()));
        }
        let wait = if self.nonblocking {
            Wait::Never
        } else {
            Wait::Spin(self.read_timeout)
        };
        let (msg, len) = probe(self.peer, self.tag, wait)?;
        if len == 0 {
            msg.matched_receive_into(&mut [0u8; 0][..]);
            self.peer_done = true;
            return Ok(0);
        }
        if len <= buf.len() {
            msg.matched_receive_into(&mut buf[..len]);
            return Ok(len);
        }
        self.pending.resize(len, 0);
        msg.matched_receive_into(&mut self.pending[..]);
        Ok(self.take_pending(buf))
    }

    fn set_read_timeout(&mut self, timeout: Option<Duration>) -> io::Result<()> {
        self.read_timeout = timeout;
        Ok(())
    }

    fn set_write_timeout(&mut self, timeout: Option<Duration>) -> io::Result<()> {
        self.write_timeout = timeout;
        Ok(())
    }

    fn set_nonblocking(&mut self, on: bool) -> io::Result<()> {
        self.nonblocking = on;
        Ok(())
    }

    fn shutdown_write(&mut self) -> io::Result<()> {
        self.check_thread()?;
        if !self.done {
            self.send_end();
        }
        Ok(())
    }

    /// With a window of posted receives, Open MPI sends the first part of a rendezvous
    /// message (its eager part) before the receiver takes the message, so up to a window of
    /// later messages may have arrived in part while this one completes.
    fn arrival_lead(&self) -> u64 {
        self.rx_window.as_ref().map_or(0, |w| w.capacity_bytes())
    }

    /// No sockets: the requested buffer sizes are kept, every kernel figure is unknown.
    fn effective_options(&self, requested: &SocketOptions) -> EffectiveOptions {
        EffectiveOptions {
            sndbuf_requested: requested.sndbuf,
            rcvbuf_requested: requested.rcvbuf,
            ..EffectiveOptions::default()
        }
    }
}

impl Drop for MpiConnection {
    /// Like closing a socket: tells the peer this side is done, unless the peer ended first
    /// (then nobody would read it, and it would linger in MPI's queue of unexpected messages).
    fn drop(&mut self) {
        if self.check_thread().is_err() {
            return;
        }
        if !self.done && !self.peer_done {
            self.send_end();
        } else {
            // Sends still in flight must finish before their buffers can go.
            self.drain();
        }
    }
}
