//! Connect/request/response (netperf TCP_CRR): every transaction opens a new connection,
//! sends a request, reads the response and closes. Connection setup is timed apart.

use std::io;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};

use super::exchange::{
    message_buffer_size, responder_buffers, responder_footprint, ResponderStats,
};
use super::{nanos, payload, CpuMeter, CpuTime, DataChannel, StopAt};
use crate::stats::LatencyRecorder;
use crate::transport::{Capabilities, Cookie, Listener, Shape, SocketOptions, Transport};

pub struct CrrPlan {
    pub request_size: usize,
    pub response_size: usize,
    pub stop: StopAt,
    pub warmup: u64,
    pub spin: bool,
    pub io_timeout: Duration,
}

pub struct CrrStats {
    /// Whole transaction: connect, request, response.
    pub transaction: LatencyRecorder,
    /// Connection setup alone: connect, test cookie, socket options.
    pub setup: LatencyRecorder,
    pub transactions: u64,
    pub first_ns: Option<u64>,
    pub elapsed_ns: u64,
    pub cpu: CpuTime,
}

/// Where and how to connect for each transaction.
pub struct CrrTarget<'a> {
    pub transport: &'a dyn Transport,
    pub server: SocketAddr,
    pub endpoint: &'a str,
    pub opts: &'a SocketOptions,
    pub cookie: &'a Cookie,
}

pub fn run_client(target: &CrrTarget<'_>, plan: &CrrPlan) -> Result<CrrStats> {
    let cpu = CpuMeter::start();
    let caps = target.transport.capabilities();
    let req = payload(plan.request_size.max(1));
    let mut resp = vec![0u8; message_buffer_size(&caps, plan.response_size)];
    let resp_len = plan.response_size.max(1);
    let mut out = CrrStats {
        transaction: LatencyRecorder::new(),
        setup: LatencyRecorder::new(),
        transactions: 0,
        first_ns: None,
        elapsed_ns: 0,
        cpu: CpuTime::default(),
    };
    let mut one = |out: &mut CrrStats, timed: bool| -> Result<()> {
        let t0 = Instant::now();
        let conn = target.transport.connect(
            target.server,
            target.endpoint,
            target.opts,
            target.cookie,
            plan.io_timeout,
        )?;
        let mut ch = DataChannel::new(conn, caps, plan.spin, plan.io_timeout)?;
        ch.expect(Shape::Exchange {
            response_size: Some(resp_len as u64),
        });
        let t1 = Instant::now();
        ch.send_message(&req[..]).context("sending a crr request")?;
        let buf = if caps.message_boundaries {
            &mut resp[..]
        } else {
            &mut resp[..resp_len]
        };
        match ch.recv_message(buf).context("receiving a crr response")? {
            Some(_) => {}
            None => anyhow::bail!("the server closed a crr connection before responding"),
        }
        let t2 = Instant::now();
        drop(ch);
        if timed {
            out.setup.record(nanos(t0, t1));
            out.transaction.record(nanos(t0, t2));
            out.transactions += 1;
        } else if out.first_ns.is_none() {
            out.first_ns = Some(nanos(t0, t2));
        }
        Ok(())
    };
    for _ in 0..plan.warmup {
        one(&mut out, false)?;
    }
    let start = Instant::now();
    let deadline = plan.stop.deadline(start);
    let limit = plan
        .stop
        .transaction_limit((plan.request_size + plan.response_size) as u64);
    let mut now = start;
    let mut n = 0;
    while n < limit && deadline.is_none_or(|d| now < d) {
        one(&mut out, true)?;
        n += 1;
        now = Instant::now();
    }
    out.elapsed_ns = nanos(start, now);
    out.cpu = cpu.stop();
    Ok(out)
}

/// What the server of a crr point holds, bytes: the buffers of one responder (see
/// `responder_buffers`), since it answers one connection at a time on one thread. A server
/// charges a crr point this against its memory budget.
pub fn server_footprint(caps: &Capabilities, request_size: u64, response_size: u64) -> u64 {
    responder_footprint(caps, request_size, response_size)
}

/// Accepts, answers and closes one connection after another until `stop` is raised.
#[allow(clippy::too_many_arguments)]
pub fn run_server(
    listener: &mut dyn Listener,
    caps: crate::transport::Capabilities,
    cookie: &Cookie,
    request_size: usize,
    response_size: usize,
    stop: &AtomicBool,
    spin: bool,
    io_timeout: Duration,
) -> Result<ResponderStats> {
    let cpu = CpuMeter::start();
    let mut out = ResponderStats::default();
    let (mut req, resp) = responder_buffers(&caps, request_size, response_size);
    while !stop.load(Ordering::Relaxed) {
        let Some(conn) = listener.accept(cookie, Duration::from_millis(100))? else {
            continue;
        };
        let mut ch = DataChannel::new(conn, caps, spin, io_timeout)?;
        match ch.recv_message(&mut req) {
            Ok(Some(n)) => {
                ch.send_message(&resp)?;
                out.requests += 1;
                out.bytes_received += n as u64;
                out.bytes_sent += resp.len() as u64;
            }
            // A client that gave up on a connection is not the server's failure.
            Ok(None) => {}
            Err(e) if e.kind() == io::ErrorKind::TimedOut => {}
            Err(e) => return Err(e.into()),
        }
    }
    out.cpu = cpu.stop();
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::{responder_buffers, server_footprint};
    use crate::transport::mem::{BYTES, DATAGRAMS};

    /// The server's buffers are the ones run_server makes: whatever the sizes, its footprint
    /// is their bytes.
    #[test]
    fn a_crr_servers_footprint_is_the_buffers_it_makes() {
        for caps in [BYTES, DATAGRAMS] {
            for (req, resp) in [(1, 1), (100, 20_000), (70_000, 0)] {
                let (a, b) = responder_buffers(&caps, req, resp);
                assert_eq!(
                    (a.len() + b.len()) as u64,
                    server_footprint(&caps, req as u64, resp as u64),
                    "{caps:?} {req} {resp}"
                );
            }
        }
    }
}
