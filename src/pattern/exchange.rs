//! Request/response exchanges: `pingpong` (equal sizes, one in flight) and `rr` (separate
//! request and response sizes, `burst` in flight), as NetPIPE, tcppp, IMB PingPong and netperf
//! TCP_RR/UDP_RR do them. The client times each transaction from just before its request is
//! sent until its whole response has arrived.
//!
//! On unreliable transports requests of 8 bytes or more carry a sequence number that the
//! responder copies into its response, so that a late response is never taken for the current
//! one; a transaction whose response does not come within the loss timeout counts as lost.
//!
//! Over byte streams a message may be written in pieces (`write_size`: requests here, responses
//! by the responder alike), as an application that writes a header and then a body does: the
//! pieces meet Nagle's algorithm and delayed ACKs unless TCP_NODELAY is set. A requester may
//! think before each timed transaction (`think`); the wait is timed apart from the RTTs.

use std::io;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use super::{
    nanos, payload, read_tag, write_tag, CpuMeter, CpuTime, DataChannel, StopAt, DATAGRAM_READ,
    TAG_LEN,
};
use crate::stats::LatencyRecorder;
use crate::transport::{Capabilities, Shape};

/// Bytes of a buffer that takes one message of `size` bytes: with message boundaries a whole
/// datagram (a message may come up to that size, and a smaller buffer would cut it), on a
/// byte stream the message.
pub fn message_buffer_size(caps: &Capabilities, size: usize) -> usize {
    if caps.message_boundaries {
        usize::try_from(DATAGRAM_READ)
            .unwrap_or(usize::MAX)
            .max(size)
    } else {
        size.max(1)
    }
}

/// A responder's buffers: the one its requests arrive in, and its response.
pub(crate) fn responder_buffers(
    caps: &Capabilities,
    request_size: usize,
    response_size: usize,
) -> (Vec<u8>, Vec<u8>) {
    (
        vec![0u8; message_buffer_size(caps, request_size)],
        payload(response_size.max(1)),
    )
}

/// What a responder holds while it answers, bytes: the buffers of `responder_buffers`. A
/// server charges each exchange connection this against its memory budget.
pub fn responder_footprint(caps: &Capabilities, request_size: u64, response_size: u64) -> u64 {
    let request = usize::try_from(request_size).unwrap_or(usize::MAX);
    (message_buffer_size(caps, request) as u64).saturating_add(response_size.max(1))
}

#[derive(Debug, Clone)]
pub struct ExchangePlan {
    pub request_size: usize,
    pub response_size: usize,
    pub burst: u32,
    pub stop: StopAt,
    pub warmup: u64,
    /// Unreliable transports only: how long to wait for a response before calling it lost.
    pub loss_timeout: Duration,
    /// Each request is written in calls of at most this many bytes (0: one call per message).
    pub write_size: usize,
    /// How long to wait before each timed transaction (one in flight only).
    pub think: Option<Duration>,
    /// Keep every timed round trip with its time in [`ExchangeStats::series`] (`--load`'s
    /// time-series plot); the figures are the same either way.
    pub rtt_series: bool,
    /// Open-loop arrivals (`--arrivals`, rr): requests leave on a schedule, not on replies.
    pub open_loop: Option<super::openloop::OpenLoopPlan>,
    /// Path timing (`--path-timing`, one in flight): every other timed round trip carries the
    /// kernel's stamps (see `path.rs`), kept in [`ExchangeStats::path`].
    pub path_timing: bool,
}

/// What the requesting side measured.
pub struct ExchangeStats {
    /// Round-trip time of every timed, completed transaction.
    pub rtt: LatencyRecorder,
    /// Completed timed transactions.
    pub transactions: u64,
    /// Timed transactions whose response never came (unreliable transports).
    pub lost: u64,
    /// Responses that arrived after their transaction had been given up.
    pub stale: u64,
    /// Round-trip time of the very first (warm-up) transaction, ns.
    pub first_ns: Option<u64>,
    /// Length of the timed phase, nanoseconds, think waits included.
    pub elapsed_ns: u64,
    /// Think waits made in the timed phase: one before every timed transaction.
    pub thinks: u64,
    /// Their measured length, summed, nanoseconds: each from the end of the transaction
    /// before it (or the start of the timed phase) to the start of the one after it, so that
    /// `elapsed_ns - think_ns` is the timed phase without them.
    pub think_ns: u64,
    pub cpu: CpuTime,
    /// With [`ExchangePlan::rtt_series`]: (start of the transaction since the timed phase's
    /// start, its round trip), nanoseconds, in the order completed; at most
    /// [`MAX_RTT_SERIES`]. Empty otherwise.
    pub series: Vec<(u64, u64)>,
    /// The connection's serialisation times, warm-up included (grpc); None elsewhere.
    pub serialisation: Option<crate::model::rpc::Serialisation>,
    /// With open-loop arrivals (`--arrivals`): the schedule's counts and the service times.
    /// `rtt` then holds each request's latency from its scheduled send, `transactions` the
    /// replies, and `elapsed_ns` runs from the schedule's start to the last reply.
    pub open_loop: Option<super::openloop::OpenLoopStats>,
    /// With [`ExchangePlan::path_timing`]: the stamped round trips' records.
    pub path: Option<super::path::ClientPath>,
}

/// Most round trips one connection keeps with their times (16 MiB): the percentiles come from
/// the histogram of all of them whatever the length of the run.
pub const MAX_RTT_SERIES: usize = 1 << 20;

impl ExchangeStats {
    /// Nothing measured yet; with `rtt_series` the series is reserved before the timed phase,
    /// so that keeping round trips never reallocates (and copies) inside it; untouched pages
    /// cost nothing until used.
    pub fn empty(rtt_series: bool) -> ExchangeStats {
        ExchangeStats {
            rtt: LatencyRecorder::new(),
            transactions: 0,
            lost: 0,
            stale: 0,
            first_ns: None,
            elapsed_ns: 0,
            thinks: 0,
            think_ns: 0,
            cpu: CpuTime::default(),
            series: if rtt_series {
                Vec::with_capacity(MAX_RTT_SERIES)
            } else {
                Vec::new()
            },
            serialisation: None,
            open_loop: None,
            path: None,
        }
    }

    /// Keeps one round trip with its time, if asked to and while there is room.
    #[inline]
    pub(super) fn keep(&mut self, on: bool, since_start_ns: u64, rtt_ns: u64) {
        if on && self.series.len() < MAX_RTT_SERIES {
            self.series.push((since_start_ns, rtt_ns));
        }
    }
}

/// What the responding side counted.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ResponderStats {
    pub requests: u64,
    pub bytes_received: u64,
    pub bytes_sent: u64,
    pub cpu: CpuTime,
    /// The connection's serialisation times, warm-up included (grpc); absent elsewhere.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub serialisation: Option<crate::model::rpc::Serialisation>,
    /// Path timing: the stamped requests' records (absent without it, and from a server
    /// older than it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<super::path::ServerPath>,
}

fn closed() -> io::Error {
    io::Error::new(
        io::ErrorKind::UnexpectedEof,
        "the peer closed the data connection",
    )
}

/// Runs warm-up and timed transactions until the stop condition.
pub fn run_requester(ch: &mut DataChannel, plan: &ExchangePlan) -> io::Result<ExchangeStats> {
    ch.expect(Shape::Exchange {
        response_size: Some(plan.response_size.max(1) as u64),
    });
    if let Some(open) = &plan.open_loop {
        return super::openloop::run_requester(ch, plan, open);
    }
    let cpu = CpuMeter::start();
    let tagged = !ch.capabilities().reliable && plan.request_size >= TAG_LEN;
    if !ch.capabilities().reliable {
        ch.set_read_timeout(plan.loss_timeout)?;
    }
    let mut out = ExchangeStats::empty(plan.rtt_series);
    // A message of 0 bytes is a real one only where messages have bounds of their own (a
    // datagram, a framed byte stream); an unframed byte stream sends at least a byte.
    let exact = ch.capabilities().message_boundaries || ch.framed();
    let least = usize::from(!exact);
    let mut req = payload(plan.request_size.max(least));
    // A datagram response may be any size up to the largest datagram; size the buffer for it.
    let mut resp = vec![0u8; message_buffer_size(&ch.capabilities(), plan.response_size)];
    let resp_len = plan.response_size.max(least);
    let mut seq: u64 = 0;
    if plan.path_timing && !ch.enable_stamps()? {
        return Err(io::Error::new(
            io::ErrorKind::Unsupported,
            "this transport cannot stamp its messages (path timing)",
        ));
    }

    for i in 0..plan.warmup {
        // The kernel turns arrival stamping on for the whole host a little after the first
        // socket asks (a deferred work item): warm-up waits for it, a while at most, so that
        // the timed round trips are stamped from the first.
        if plan.path_timing && i > 0 && ch.rx_stamp().is_none() {
            std::thread::sleep(STAMPING_SETTLE);
        }
        let t0 = Instant::now();
        seq += 1;
        let ok = one_transaction(
            ch,
            &mut req,
            &mut resp[..],
            resp_len,
            plan.write_size,
            tagged,
            seq,
            &mut out.stale,
        )?;
        if i == 0 && ok {
            out.first_ns = Some(nanos(t0, Instant::now()));
        }
    }
    if plan.burst > 1 {
        return run_burst(ch, plan, out, req, resp, resp_len, tagged, seq, cpu);
    }
    if plan.path_timing {
        let bufs = Buffers {
            req,
            resp,
            resp_len,
            tagged,
        };
        return run_path_timed(ch, plan, out, bufs, seq, cpu);
    }

    let start = Instant::now();
    let deadline = plan.stop.deadline(start);
    let iter_limit = plan
        .stop
        .transaction_limit((plan.request_size + plan.response_size) as u64);
    let mut attempts: u64 = 0;
    let mut now = start;
    while attempts < iter_limit && deadline.is_none_or(|d| now < d) {
        seq += 1;
        attempts += 1;
        // The transaction's clock starts where the think ends: its RTT holds none of it.
        let t0 = match plan.think {
            Some(think) => {
                let woke = super::think::wait_until(now + think);
                out.thinks += 1;
                out.think_ns += nanos(now, woke);
                woke
            }
            None => Instant::now(),
        };
        let ok = one_transaction(
            ch,
            &mut req,
            &mut resp[..],
            resp_len,
            plan.write_size,
            tagged,
            seq,
            &mut out.stale,
        )?;
        now = Instant::now();
        if ok {
            let rtt = nanos(t0, now);
            out.rtt.record(rtt);
            out.keep(plan.rtt_series, nanos(start, t0), rtt);
            out.transactions += 1;
        } else {
            out.lost += 1;
        }
    }
    out.elapsed_ns = nanos(start, now);
    out.cpu = cpu.stop();
    Ok(out)
}

/// A requester's message buffers.
struct Buffers {
    req: Vec<u8>,
    resp: Vec<u8>,
    resp_len: usize,
    tagged: bool,
}

/// How long a path-timing warm-up transaction waits for arrival stamping to take effect when
/// the response before it came without a stamp (at most once per warm-up transaction).
const STAMPING_SETTLE: Duration = Duration::from_millis(20);

/// Transmit stamps read from the error queue at once.
const STAMPS_AT_ONCE: usize = 16;

/// The timed phase with path timing: as `run_requester`'s, with every other round trip
/// stamped (the send asks for transmit stamps, the response's arrival stamp is kept) and the
/// application's CLOCK_REALTIME read right after the round trip's clock starts and right
/// before it stops. The error queue is read after the clock stopped, timed apart.
fn run_path_timed(
    ch: &mut DataChannel,
    plan: &ExchangePlan,
    mut out: ExchangeStats,
    mut b: Buffers,
    mut seq: u64,
    cpu: CpuMeter,
) -> io::Result<ExchangeStats> {
    use super::path::{beyond_cap, stamped, Attribution, ClientPath, ClientRecord};
    use crate::sys::timestamping::realtime_ns;
    let mut path = ClientPath::new();
    let mut parts = Vec::with_capacity(path.records.capacity());
    let mut attribution = Attribution::default();
    let mut scratch = [crate::transport::TxStamp::default(); STAMPS_AT_ONCE];
    let start = Instant::now();
    let deadline = plan.stop.deadline(start);
    let iter_limit = plan
        .stop
        .transaction_limit((plan.request_size + plan.response_size) as u64);
    let mut attempts: u64 = 0;
    let mut now = start;
    // Time of the stamped round trips and their error-queue reads, left out of elapsed_ns.
    let mut stamped_ns: u64 = 0;
    while attempts < iter_limit && deadline.is_none_or(|d| now < d) {
        seq += 1;
        attempts += 1;
        let stamp = stamped(seq, plan.warmup);
        path.cut |= beyond_cap(seq, plan.warmup);
        ch.stamp_sends(stamp);
        let t0 = match plan.think {
            Some(think) => {
                let woke = super::think::wait_until(now + think);
                out.thinks += 1;
                out.think_ns += nanos(now, woke);
                woke
            }
            None => Instant::now(),
        };
        // CLOCK_REALTIME is read only around the stamped round trips: the unstamped ones are
        // the point's own figures and carry nothing of path timing inside their clock.
        let send_call = if stamp { realtime_ns() } else { 0 };
        let ok = one_transaction(
            ch,
            &mut b.req,
            &mut b.resp[..],
            b.resp_len,
            plan.write_size,
            b.tagged,
            seq,
            &mut out.stale,
        )?;
        let read_return = if stamp { realtime_ns() } else { 0 };
        now = Instant::now();
        let rtt = nanos(t0, now);
        // The point's own figures are the unstamped round trips': stamping lengthens a round
        // trip (by a quarter on loopback), and the instrument must not move the figure it
        // explains. A stamped round trip, with the error-queue read after it, is left out of
        // the figures and of the timed phase's length, as a think wait is.
        if !ok {
            out.lost += 1;
        } else if !stamp {
            out.rtt.record(rtt);
            out.keep(plan.rtt_series, nanos(start, t0), rtt);
            out.transactions += 1;
        }
        if !stamp {
            if ok && !beyond_cap(seq, plan.warmup) {
                path.unstamped_rtt.push(rtt);
            }
            continue;
        }
        ch.stamp_sends(false);
        path.records.push(ClientRecord {
            seq,
            rtt_ns: if ok { rtt } else { 0 },
            send_call,
            arrival: if ok { ch.rx_stamp().unwrap_or(0) } else { 0 },
            read_return,
            tx: Default::default(),
        });
        parts.push(Default::default());
        let d0 = Instant::now();
        drain_into(
            ch,
            &mut scratch,
            &mut attribution,
            &mut parts,
            &mut path.unmatched_stamps,
        )?;
        path.read_ns += nanos(d0, Instant::now());
        path.reads += 1;
        now = Instant::now();
        stamped_ns += nanos(t0, now);
    }
    out.elapsed_ns = nanos(start, now).saturating_sub(stamped_ns);
    // The last ACK stamps may come after the last read.
    drain_into(
        ch,
        &mut scratch,
        &mut attribution,
        &mut parts,
        &mut path.unmatched_stamps,
    )?;
    for (r, p) in path.records.iter_mut().zip(parts.iter()) {
        r.tx = *p;
    }
    path.unmatched_stamps += attribution.unmatched;
    out.path = Some(path);
    out.cpu = cpu.stop();
    Ok(out)
}

/// Reads the error queue until it is empty, handing the stamps to their messages.
fn drain_into(
    ch: &mut DataChannel,
    scratch: &mut [crate::transport::TxStamp],
    attribution: &mut super::path::Attribution,
    parts: &mut [super::path::TxPart],
    dropped: &mut u64,
) -> io::Result<()> {
    loop {
        let (n, d) = ch.drain_tx_stamps(scratch)?;
        attribution.assign(&scratch[..n], parts);
        *dropped += d;
        if n < scratch.len() {
            return Ok(());
        }
    }
}

/// One request and its response. Ok(false) when the response was lost.
#[inline]
#[allow(clippy::too_many_arguments)]
pub(super) fn one_transaction(
    ch: &mut DataChannel,
    req: &mut [u8],
    resp: &mut [u8],
    resp_len: usize,
    write_size: usize,
    tagged: bool,
    seq: u64,
    stale: &mut u64,
) -> io::Result<bool> {
    if tagged {
        write_tag(req, seq);
    }
    ch.send_message_split(req, write_size)?;
    let reliable = ch.capabilities().reliable;
    let buf = if ch.capabilities().message_boundaries {
        &mut resp[..]
    } else {
        &mut resp[..resp_len]
    };
    loop {
        match ch.recv_message(buf) {
            Ok(Some(n)) => {
                if tagged && n >= TAG_LEN && read_tag(buf) != Some(seq) {
                    *stale += 1;
                    continue;
                }
                return Ok(true);
            }
            Ok(None) => return Err(closed()),
            Err(e) if !reliable && e.kind() == io::ErrorKind::TimedOut => return Ok(false),
            Err(e) => return Err(e),
        }
    }
}

/// `burst` transactions in flight: a new request goes out as each response comes back.
#[allow(clippy::too_many_arguments)]
fn run_burst(
    ch: &mut DataChannel,
    plan: &ExchangePlan,
    mut out: ExchangeStats,
    mut req: Vec<u8>,
    mut resp: Vec<u8>,
    resp_len: usize,
    tagged: bool,
    mut seq: u64,
    cpu: CpuMeter,
) -> io::Result<ExchangeStats> {
    let window = plan.burst as u64;
    // Send times by sequence number modulo the window: a fixed ring, no allocation per send.
    let mut sent_at = vec![Instant::now(); window as usize];
    let reliable = ch.capabilities().reliable;
    let boundaries = ch.capabilities().message_boundaries;
    let start = Instant::now();
    let deadline = plan.stop.deadline(start);
    let iter_limit = plan
        .stop
        .transaction_limit((plan.request_size + plan.response_size) as u64);
    let first_seq = seq + 1;
    let mut next_expected = first_seq; // oldest outstanding (reliable transports answer in order)
    let mut attempts: u64 = 0;
    let mut now = start;
    let mut stopping = false;
    loop {
        // Keep the window full until the stop condition.
        if !stopping && (attempts >= iter_limit || deadline.is_some_and(|d| now >= d)) {
            stopping = true;
        }
        while !stopping && seq + 1 - next_expected < window && attempts < iter_limit {
            seq += 1;
            attempts += 1;
            if tagged {
                write_tag(&mut req, seq);
            }
            sent_at[(seq % window) as usize] = Instant::now();
            ch.send_message_split(&req, plan.write_size)?;
        }
        if next_expected > seq {
            break; // nothing outstanding
        }
        let buf = if boundaries {
            &mut resp[..]
        } else {
            &mut resp[..resp_len]
        };
        match ch.recv_message(buf) {
            Ok(Some(n)) => {
                now = Instant::now();
                let got = if tagged && n >= TAG_LEN {
                    read_tag(buf).unwrap_or(0)
                } else {
                    next_expected
                };
                if got < next_expected || got > seq {
                    out.stale += 1;
                    continue;
                }
                // Responses skipped over on an unreliable transport were lost.
                out.lost += got - next_expected;
                let sent = sent_at[(got % window) as usize];
                let rtt = nanos(sent, now);
                out.rtt.record(rtt);
                out.keep(plan.rtt_series, nanos(start, sent), rtt);
                out.transactions += 1;
                next_expected = got + 1;
            }
            Ok(None) => return Err(closed()),
            Err(e) if !reliable && e.kind() == io::ErrorKind::TimedOut => {
                now = Instant::now();
                out.lost += seq + 1 - next_expected;
                next_expected = seq + 1;
            }
            Err(e) => return Err(e),
        }
    }
    out.elapsed_ns = nanos(start, now);
    out.cpu = cpu.stop();
    Ok(out)
}

/// Answers requests until end of stream (byte streams) or until `stop` is raised
/// (datagrams, which have no end of stream). `poll` bounds how long a datagram responder
/// sleeps before it looks at `stop`; a byte-stream responder waits at most `io_timeout`.
/// `moved`, when given, is kept at the bytes received and sent so far, for a server that holds
/// its clients to a bit rate. Responses are written in calls of at most `write_size` bytes (0:
/// one call), as the requester writes its requests: with `--write-size` both ends split.
#[allow(clippy::too_many_arguments)]
pub fn run_responder(
    ch: &mut DataChannel,
    request_size: usize,
    response_size: usize,
    write_size: usize,
    stop: &AtomicBool,
    io_timeout: Duration,
    poll: Duration,
    moved: Option<&AtomicU64>,
) -> io::Result<ResponderStats> {
    let cpu = CpuMeter::start();
    let caps = ch.capabilities();
    let mut out = ResponderStats::default();
    let (mut req, mut resp) = responder_buffers(&caps, request_size, response_size);
    if caps.message_boundaries || ch.framed() {
        // A response of 0 bytes is a real message here (see `run_requester`).
        resp.truncate(response_size);
    }
    let tag = !caps.reliable && response_size >= TAG_LEN;
    ch.set_read_timeout(if caps.reliable { io_timeout } else { poll })?;
    loop {
        // Set once the point is over or torn down (a server's deadline): a requester that
        // keeps asking would keep this loop going forever otherwise.
        if stop.load(Ordering::Relaxed) {
            break;
        }
        match ch.recv_message(&mut req) {
            Ok(Some(n)) => {
                if tag && n >= TAG_LEN {
                    resp[..TAG_LEN].copy_from_slice(&req[..TAG_LEN]);
                }
                ch.send_message_split(&resp, write_size)?;
                out.requests += 1;
                out.bytes_received += n as u64;
                out.bytes_sent += resp.len() as u64;
                if let Some(m) = moved {
                    m.store(out.bytes_received + out.bytes_sent, Ordering::Relaxed);
                }
            }
            Ok(None) => break,
            Err(e) if e.kind() == io::ErrorKind::TimedOut && !caps.reliable => {
                if stop.load(Ordering::Relaxed) {
                    break;
                }
            }
            Err(e) => return Err(e),
        }
    }
    out.cpu = cpu.stop();
    Ok(out)
}

/// `run_responder` with path timing: the requests the requester stamps (by sequence number,
/// warm-up `warmup` transactions) are answered with a stamped response, and each gets a
/// record: its arrival stamp, the application's CLOCK_REALTIME right after its read returned
/// and right before the response's send call, and the response's transmit stamps.
#[allow(clippy::too_many_arguments)]
pub fn run_path_responder(
    ch: &mut DataChannel,
    request_size: usize,
    response_size: usize,
    write_size: usize,
    warmup: u64,
    stop: &AtomicBool,
    io_timeout: Duration,
    poll: Duration,
    moved: Option<&AtomicU64>,
) -> io::Result<ResponderStats> {
    use super::path::{stamped, Attribution, ServerPath, ServerRecord, TxPart, MAX_STAMPED};
    use crate::sys::timestamping::{boot_id, realtime_ns};
    let cpu = CpuMeter::start();
    let caps = ch.capabilities();
    let mut out = ResponderStats::default();
    let (mut req, mut resp) = responder_buffers(&caps, request_size, response_size);
    if caps.message_boundaries || ch.framed() {
        resp.truncate(response_size);
    }
    let tag = !caps.reliable && response_size >= TAG_LEN;
    // The requester numbers its requests when it tags them; otherwise they are counted.
    let numbered = !caps.reliable && request_size >= TAG_LEN;
    if !ch.enable_stamps()? {
        return Err(io::Error::new(
            io::ErrorKind::Unsupported,
            "this transport cannot stamp its messages (path timing)",
        ));
    }
    let cap = usize::try_from(MAX_STAMPED).unwrap_or(0);
    let mut records: Vec<ServerRecord> = Vec::with_capacity(cap);
    let mut parts: Vec<TxPart> = Vec::with_capacity(cap);
    let mut attribution = Attribution::default();
    let mut scratch = [crate::transport::TxStamp::default(); STAMPS_AT_ONCE];
    let mut cut = false;
    let mut dropped = 0u64;
    ch.set_read_timeout(if caps.reliable { io_timeout } else { poll })?;
    loop {
        if stop.load(Ordering::Relaxed) {
            break;
        }
        match ch.recv_message(&mut req) {
            Ok(Some(n)) => {
                let seq = if numbered && n >= TAG_LEN {
                    read_tag(&req).unwrap_or(out.requests + 1)
                } else {
                    out.requests + 1
                };
                let stamp = stamped(seq, warmup);
                // As on the client: the clock is read for the stamped requests only.
                let read_return = if stamp { realtime_ns() } else { 0 };
                let arrival = ch.rx_stamp().unwrap_or(0);
                if tag && n >= TAG_LEN {
                    resp[..TAG_LEN].copy_from_slice(&req[..TAG_LEN]);
                }
                ch.stamp_sends(stamp);
                let send_call = if stamp { realtime_ns() } else { 0 };
                ch.send_message_split(&resp, write_size)?;
                out.requests += 1;
                out.bytes_received += n as u64;
                out.bytes_sent += resp.len() as u64;
                if let Some(m) = moved {
                    m.store(out.bytes_received + out.bytes_sent, Ordering::Relaxed);
                }
                if stamp {
                    ch.stamp_sends(false);
                    if records.len() < cap {
                        records.push(ServerRecord {
                            seq,
                            arrival,
                            read_return,
                            send_call,
                            tx: TxPart::default(),
                        });
                        parts.push(TxPart::default());
                    } else {
                        cut = true;
                    }
                    drain_into(ch, &mut scratch, &mut attribution, &mut parts, &mut dropped)?;
                }
            }
            Ok(None) => break,
            Err(e) if e.kind() == io::ErrorKind::TimedOut && !caps.reliable => {
                if stop.load(Ordering::Relaxed) {
                    break;
                }
            }
            Err(e) => return Err(e),
        }
    }
    for (r, p) in records.iter_mut().zip(parts.iter()) {
        r.tx = *p;
    }
    out.cpu = cpu.stop();
    out.path = Some(ServerPath {
        boot_id: boot_id(),
        records: ServerPath::encode(&records),
        cut,
        unmatched_stamps: attribution.unmatched + dropped,
    });
    Ok(out)
}

#[cfg(test)]
mod tests {
    //! Split writes and think time over the in-memory transport: the link counts every send
    //! call in each direction, so the writes per message are checked exactly, whatever the
    //! host's load. No timing is asserted: only counts, and sums that hold by construction.

    use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
    use std::sync::Arc;
    use std::time::Duration;

    use super::{
        message_buffer_size, responder_buffers, responder_footprint, run_requester, run_responder,
        ExchangePlan, ExchangeStats, ResponderStats,
    };
    use crate::pattern::{DataChannel, StopAt};
    use crate::transport::mem::{self, Fate, Script, BYTES, DATAGRAMS};

    const WARMUP: u64 = 3;
    const TIMED: u64 = 20;

    /// A perfect link that counts its send calls.
    fn counting(calls: &Arc<AtomicU64>) -> Script {
        let calls = Arc::clone(calls);
        Box::new(move |_| {
            calls.fetch_add(1, Ordering::Relaxed);
            Fate::Deliver
        })
    }

    struct Outcome {
        requester: ExchangeStats,
        responder: ResponderStats,
        request_writes: u64,
        response_writes: u64,
    }

    /// WARMUP + TIMED transactions over a byte-stream pair, both ends splitting at
    /// `write_size` (0: whole messages).
    fn exchange(
        request: usize,
        response: usize,
        write_size: usize,
        think: Option<Duration>,
    ) -> Outcome {
        exchange_n(request, response, write_size, think, TIMED, false)
    }

    /// As [`exchange`], with `timed` transactions and the round-trip series on or off.
    fn exchange_n(
        request: usize,
        response: usize,
        write_size: usize,
        think: Option<Duration>,
        timed: u64,
        rtt_series: bool,
    ) -> Outcome {
        exchange_with(
            BYTES, false, request, response, write_size, think, timed, rtt_series,
        )
    }

    /// As [`exchange_n`], over a pair with `caps`, framed (both ends) or not.
    #[allow(clippy::too_many_arguments)]
    fn exchange_with(
        caps: crate::transport::Capabilities,
        framed: bool,
        request: usize,
        response: usize,
        write_size: usize,
        think: Option<Duration>,
        timed: u64,
        rtt_series: bool,
    ) -> Outcome {
        let (requests, responses) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
        let (a, b) = mem::pair(caps, counting(&requests), counting(&responses));
        // A hang guard: the in-memory link never makes either side wait for long.
        let io = crate::test_support::HUNG;
        let mut client = DataChannel::new(Box::new(a), caps, false, io).unwrap();
        let mut server = DataChannel::new(Box::new(b), caps, false, io).unwrap();
        client.set_framed(framed);
        server.set_framed(framed);
        let plan = ExchangePlan {
            request_size: request,
            response_size: response,
            burst: 1,
            stop: StopAt {
                iterations: Some(timed),
                ..StopAt::default()
            },
            warmup: WARMUP,
            loss_timeout: io,
            write_size,
            think,
            rtt_series,
            open_loop: None,
            path_timing: false,
        };
        let stop = AtomicBool::new(false);
        // A datagram responder has no end of stream: it looks at `stop` between reads that
        // time out after `poll`.
        let poll = if caps.reliable {
            io
        } else {
            Duration::from_millis(10)
        };
        let (requester, responder) = std::thread::scope(|s| {
            let responder = s.spawn(|| {
                run_responder(
                    &mut server,
                    request,
                    response,
                    write_size,
                    &stop,
                    io,
                    poll,
                    None,
                )
                .unwrap()
            });
            let stats = run_requester(&mut client, &plan).unwrap();
            stop.store(true, Ordering::Relaxed);
            if caps.reliable {
                // The requester's end closes: the responder sees the end of the stream.
                drop(client);
                (stats, responder.join().unwrap())
            } else {
                // Kept open until the responder stopped: a closed in-memory link reads as
                // endless empty datagrams, which would count as requests of 0 bytes.
                let responder = responder.join().unwrap();
                drop(client);
                (stats, responder)
            }
        });
        Outcome {
            requester,
            responder,
            request_writes: requests.load(Ordering::Relaxed),
            response_writes: responses.load(Ordering::Relaxed),
        }
    }

    #[test]
    fn a_split_message_takes_exactly_ceil_n_over_w_writes_on_both_ends() {
        let messages = WARMUP + TIMED;
        // (request, response, write size, writes per request, writes per response)
        for (req, resp, w, per_req, per_resp) in [
            (1000, 1000, 300, 4, 4),  // pingpong-like: a last piece of 100 bytes
            (900, 900, 300, 3, 3),    // an exact multiple: no empty last write
            (10, 1000, 300, 1, 4),    // rr: a small request is one write
            (1000, 1000, 0, 1, 1),    // not split
            (1000, 1000, 5000, 1, 1), // a write size above the message: one write
            (7, 7, 1, 7, 7),          // a byte per write
        ] {
            let o = exchange(req, resp, w, None);
            assert_eq!(o.requester.transactions, TIMED, "{req}/{resp}/{w}");
            assert_eq!(o.requester.rtt.count(), TIMED);
            assert_eq!((o.requester.lost, o.requester.stale), (0, 0));
            assert_eq!(o.responder.requests, messages);
            assert_eq!(o.responder.bytes_received, messages * req as u64);
            assert_eq!(o.responder.bytes_sent, messages * resp as u64);
            assert_eq!(o.request_writes, messages * per_req, "{req}/{resp}/{w}");
            assert_eq!(o.response_writes, messages * per_resp, "{req}/{resp}/{w}");
            assert_eq!((o.requester.thinks, o.requester.think_ns), (0, 0));
        }
    }

    /// Framed, a message of any size, 0 included, is one write of its length and its bytes
    /// (or ceil((4 + n) / w) writes when split), and both ends count the messages' own bytes.
    /// A datagram pair is never framed: a 0-byte datagram is a message by itself.
    #[test]
    fn framed_messages_of_0_bytes_and_more_are_exchanged_whole() {
        let messages = WARMUP + TIMED;
        // (caps, framed, request, response, write size, writes per request, per response)
        for (caps, framed, req, resp, w, per_req, per_resp) in [
            (BYTES, true, 0, 0, 0, 1, 1),
            (BYTES, true, 64, 64, 0, 1, 1),
            (BYTES, true, 0, 1000, 0, 1, 1),
            (BYTES, true, 1000, 0, 300, 4, 1), // 1004 bytes in pieces of 300
            (BYTES, true, 8, 8, 3, 4, 4),      // 12 bytes in pieces of 3
            (DATAGRAMS, true, 0, 0, 0, 1, 1),
            (DATAGRAMS, false, 0, 64, 0, 1, 1),
        ] {
            let case = format!("{caps:?} framed {framed} {req}/{resp}/{w}");
            let o = exchange_with(caps, framed, req, resp, w, None, TIMED, false);
            assert_eq!(o.requester.transactions, TIMED, "{case}");
            assert_eq!((o.requester.lost, o.requester.stale), (0, 0), "{case}");
            assert_eq!(o.responder.requests, messages, "{case}");
            assert_eq!(o.responder.bytes_received, messages * req as u64, "{case}");
            assert_eq!(o.responder.bytes_sent, messages * resp as u64, "{case}");
            assert_eq!(o.request_writes, messages * per_req, "{case}");
            assert_eq!(o.response_writes, messages * per_resp, "{case}");
        }
    }

    /// A framed message longer than the receiver expects is an error, not an overrun.
    #[test]
    fn a_framed_message_larger_than_expected_is_refused() {
        let io = crate::test_support::HUNG;
        let (a, b) = mem::pair(
            BYTES,
            Box::new(|_| Fate::Deliver),
            Box::new(|_| Fate::Deliver),
        );
        let mut tx = DataChannel::new(Box::new(a), BYTES, false, io).unwrap();
        let mut rx = DataChannel::new(Box::new(b), BYTES, false, io).unwrap();
        tx.set_framed(true);
        rx.set_framed(true);
        tx.send_message(&[7; 10]).unwrap();
        tx.send_message(&[]).unwrap();
        let mut buf = [0u8; 16];
        assert_eq!(rx.recv_message(&mut buf).unwrap(), Some(10));
        assert_eq!(&buf[..10], &[7; 10]);
        assert_eq!(rx.recv_message(&mut buf).unwrap(), Some(0));
        tx.send_message(&[1; 20]).unwrap();
        let e = rx.recv_message(&mut buf).unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::InvalidData);
        // Framing does nothing where datagrams carry their own bounds.
        let (c, _d) = mem::pair(
            DATAGRAMS,
            Box::new(|_| Fate::Deliver),
            Box::new(|_| Fate::Deliver),
        );
        let mut c = DataChannel::new(Box::new(c), DATAGRAMS, false, io).unwrap();
        c.set_framed(true);
        assert!(!c.framed());
    }

    #[test]
    fn think_waits_precede_every_timed_transaction_and_no_rtt_holds_one() {
        let think = Duration::from_micros(200);
        let o = exchange(64, 64, 0, Some(think));
        let r = &o.requester;
        assert_eq!(r.transactions, TIMED);
        assert_eq!(
            r.thinks, TIMED,
            "one wait before each timed transaction, none in warm-up"
        );
        // A wait never ends before its instant: the measured sum is at least what was asked.
        assert!(r.think_ns >= TIMED * 200_000, "{}", r.think_ns);
        // Each wait ends where the next transaction's clock starts and starts where the last
        // one's stopped: the timed phase is exactly the RTTs and the waits (up to the float
        // rounding of the recorder's running mean).
        let summary = r.rtt.summary(0.95).unwrap();
        let rtts = summary.mean_ns * TIMED as f64;
        let sum = rtts + r.think_ns as f64;
        assert!(
            (sum - r.elapsed_ns as f64).abs() <= 1e-6 * r.elapsed_ns as f64 + 1.0,
            "rtts {rtts} + thinks {} != elapsed {}",
            r.think_ns,
            r.elapsed_ns
        );
    }

    /// What keeping the round-trip series (`--load`) costs the requester's timed loop: the
    /// same in-memory exchange with the series off and on, alternating, paired per round.
    /// A benchmark, not a test (it asserts nothing about time): bench/rtt-series-cost runs it.
    #[test]
    #[ignore = "a benchmark: bench/rtt-series-cost"]
    fn rtt_series_cost() {
        let rounds: usize = std::env::var("ROUNDS")
            .ok()
            .and_then(|r| r.parse().ok())
            .unwrap_or(20);
        let n: u64 = 100_000;
        let per = |on: bool| {
            let o = exchange_n(64, 64, 0, None, n, on);
            assert_eq!(o.requester.transactions, n);
            assert_eq!(o.requester.series.len(), if on { n as usize } else { 0 });
            o.requester.elapsed_ns as f64 / n as f64
        };
        let mut ratios = Vec::new();
        let (mut offs, mut ons) = (Vec::new(), Vec::new());
        for r in 0..rounds {
            let (off, on) = if r % 2 == 0 {
                let off = per(false);
                (off, per(true))
            } else {
                let on = per(true);
                (per(false), on)
            };
            offs.push(off);
            ons.push(on);
            ratios.push(on / off);
        }
        let med = |mut v: Vec<f64>| {
            v.sort_by(f64::total_cmp);
            (v[v.len() / 2], v[0], v[v.len() - 1])
        };
        let (off, on, ratio) = (med(offs), med(ons), med(ratios));
        println!(
            "rtt series over {rounds} rounds of {n} in-memory 64-byte exchanges: off {:.0} ns, on {:.0} ns per transaction (medians); on/off paired median {:.4} [min {:.4}, max {:.4}]",
            off.0, on.0, ratio.0, ratio.1, ratio.2
        );
    }

    /// A responder's footprint is the bytes of the buffers it makes: a datagram one takes a
    /// whole datagram whatever the request's size, a byte-stream one the request.
    #[test]
    fn a_responders_footprint_is_the_buffers_it_makes() {
        for caps in [BYTES, DATAGRAMS] {
            for (req, resp) in [(1, 1), (0, 0), (1000, 64 << 10), (100_000, 3)] {
                let (a, b) = responder_buffers(&caps, req, resp);
                assert_eq!(
                    (a.len() + b.len()) as u64,
                    responder_footprint(&caps, req as u64, resp as u64),
                    "{caps:?} {req} {resp}"
                );
            }
        }
        assert_eq!(message_buffer_size(&DATAGRAMS, 10), 65_536);
        assert_eq!(message_buffer_size(&BYTES, 10), 10);
    }
}
