//! Request/response exchanges: `pingpong` (equal sizes, one in flight) and `rr` (separate
//! request and response sizes, `burst` in flight), as NetPIPE, tcppp, IMB PingPong and netperf
//! TCP_RR/UDP_RR do them. The client times each transaction from just before its request is
//! sent until its whole response has arrived.
//!
//! On unreliable transports requests of 8 bytes or more carry a sequence number that the
//! responder copies into its response, so that a late response is never taken for the current
//! one; a transaction whose response does not come within the loss timeout counts as lost.

use std::io;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use super::{nanos, payload, read_tag, write_tag, CpuMeter, CpuTime, DataChannel, StopAt, TAG_LEN};
use crate::stats::LatencyRecorder;

#[derive(Debug, Clone)]
pub struct ExchangePlan {
    pub request_size: usize,
    pub response_size: usize,
    pub burst: u32,
    pub stop: StopAt,
    pub warmup: u64,
    /// Unreliable transports only: how long to wait for a response before calling it lost.
    pub loss_timeout: Duration,
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
    /// Length of the timed phase, nanoseconds.
    pub elapsed_ns: u64,
    pub cpu: CpuTime,
}

/// What the responding side counted.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct ResponderStats {
    pub requests: u64,
    pub bytes_received: u64,
    pub bytes_sent: u64,
    pub cpu: CpuTime,
}

fn closed() -> io::Error {
    io::Error::new(
        io::ErrorKind::UnexpectedEof,
        "the peer closed the data connection",
    )
}

/// Runs warm-up and timed transactions until the stop condition.
pub fn run_requester(ch: &mut DataChannel, plan: &ExchangePlan) -> io::Result<ExchangeStats> {
    let cpu = CpuMeter::start();
    let tagged = !ch.capabilities().reliable && plan.request_size >= TAG_LEN;
    if !ch.capabilities().reliable {
        ch.set_read_timeout(plan.loss_timeout)?;
    }
    let mut out = ExchangeStats {
        rtt: LatencyRecorder::new(),
        transactions: 0,
        lost: 0,
        stale: 0,
        first_ns: None,
        elapsed_ns: 0,
        cpu: CpuTime::default(),
    };
    let mut req = payload(plan.request_size.max(1));
    // A datagram response may be any size up to the largest datagram; size the buffer for it.
    let resp_cap = if ch.capabilities().message_boundaries {
        65_536.max(plan.response_size)
    } else {
        plan.response_size.max(1)
    };
    let mut resp = vec![0u8; resp_cap];
    let resp_len = plan.response_size.max(1);
    let mut seq: u64 = 0;

    for i in 0..plan.warmup {
        let t0 = Instant::now();
        seq += 1;
        let ok = one_transaction(
            ch,
            &mut req,
            &mut resp[..],
            resp_len,
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
        let t0 = Instant::now();
        let ok = one_transaction(
            ch,
            &mut req,
            &mut resp[..],
            resp_len,
            tagged,
            seq,
            &mut out.stale,
        )?;
        now = Instant::now();
        if ok {
            out.rtt.record(nanos(t0, now));
            out.transactions += 1;
        } else {
            out.lost += 1;
        }
    }
    out.elapsed_ns = nanos(start, now);
    out.cpu = cpu.stop();
    Ok(out)
}

/// One request and its response. Ok(false) when the response was lost.
#[inline]
fn one_transaction(
    ch: &mut DataChannel,
    req: &mut [u8],
    resp: &mut [u8],
    resp_len: usize,
    tagged: bool,
    seq: u64,
    stale: &mut u64,
) -> io::Result<bool> {
    if tagged {
        write_tag(req, seq);
    }
    ch.send_message(req)?;
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
            ch.send_message(&req)?;
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
                out.rtt.record(nanos(sent_at[(got % window) as usize], now));
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
/// its clients to a bit rate.
pub fn run_responder(
    ch: &mut DataChannel,
    request_size: usize,
    response_size: usize,
    stop: &AtomicBool,
    io_timeout: Duration,
    poll: Duration,
    moved: Option<&AtomicU64>,
) -> io::Result<ResponderStats> {
    let cpu = CpuMeter::start();
    let caps = ch.capabilities();
    let mut out = ResponderStats::default();
    let mut req = vec![
        0u8;
        if caps.message_boundaries {
            65_536.max(request_size)
        } else {
            request_size.max(1)
        }
    ];
    let mut resp = payload(response_size.max(1));
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
                ch.send_message(&resp)?;
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
