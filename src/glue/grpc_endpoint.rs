//! `run -t grpc --grpc-endpoint HOST:PORT`: pingpong or rr against a gRPC echo service that
//! is not a wirebench server (another implementation of proto/wirebench_echo.proto). There
//! is no control connection: one data connection, client-side figures only, said so in the
//! output.

use std::net::ToSocketAddrs;
use std::time::Duration;

use anyhow::{bail, Context, Result};

use crate::pattern::exchange::{run_requester, ExchangePlan};
use crate::pattern::{DataChannel, PatternKind, StopAt};
use crate::request::Request;

/// Measures, prints, and returns the exit code.
pub fn run(r: &Request, endpoint: &str) -> Result<i32> {
    if !matches!(r.pattern, PatternKind::Pingpong | PatternKind::Rr) {
        bail!(
            "--grpc-endpoint measures pingpong and rr (unary calls); {} needs a wirebench server",
            r.pattern
        );
    }
    let addr = endpoint
        .to_socket_addrs()
        .with_context(|| format!("--grpc-endpoint {endpoint}: not HOST:PORT"))?
        .next()
        .with_context(|| format!("--grpc-endpoint {endpoint}: no address"))?;
    let size = match r.sizes.size.as_deref() {
        None => 1,
        Some([one]) => *one,
        Some(_) => bail!("--grpc-endpoint measures one size at a time"),
    };
    let request_size = r.sizes.request_size.unwrap_or(size).max(1);
    let response_size = match r.pattern {
        PatternKind::Pingpong => request_size,
        _ => r.sizes.response_size.unwrap_or(1).max(1),
    };
    let encoding = r.local.encoding;
    let io = r.timeouts.io;
    let conn = crate::transport::grpc_connect_foreign(addr, encoding, io)?;
    let caps = crate::transport::TransportKind::Grpc.capabilities()?;
    let mut ch = DataChannel::new(conn, caps, false, io)?;
    let stop = StopAt {
        duration: r.stop.duration.or_else(|| {
            (r.stop.iterations.is_none() && r.stop.bytes.is_none())
                .then_some(Duration::from_secs(1))
        }),
        bytes: r.stop.bytes,
        iterations: r.stop.iterations,
    };
    let plan = ExchangePlan {
        request_size: request_size as usize,
        response_size: response_size as usize,
        burst: 1,
        stop,
        warmup: r.stop.warmup,
        loss_timeout: r.timeouts.loss,
        write_size: 0,
        think: None,
        rtt_series: false,
        open_loop: None,
        path_timing: false,
    };
    let stats = run_requester(&mut ch, &plan)
        .with_context(|| format!("calling the gRPC service at {addr}"))?;
    let times = ch.connection().serialisation(false);
    println!(
        "# wirebench {} {} over grpc against {addr}: not a wirebench server, so client-side figures only (no server CPU, socket or serialisation figures)",
        env!("CARGO_PKG_VERSION"),
        r.pattern
    );
    println!(
        "# encoding {encoding}, request {request_size} B, response {response_size} B (application bytes), warm-up {} calls, one connection, one call in flight",
        r.stop.warmup
    );
    let Some(s) = stats.rtt.summary(0.95) else {
        println!("# no call completed in the timed phase");
        return Ok(1);
    };
    let us = |ns: f64| format!("{:.2}", ns / 1000.0);
    println!(
        "calls {} in {:.3} s: {:.1} calls/s; round trip mean {} us (±{} us, 95% CI), min {} us, p50 {} us, p99 {} us, max {} us; one-way = RTT/2 {} us",
        stats.transactions,
        stats.elapsed_ns as f64 / 1e9,
        stats.transactions as f64 / (stats.elapsed_ns.max(1) as f64 / 1e9),
        us(s.mean_ns),
        s.ci_half_width_ns.map_or("-".into(), us),
        us(s.min_ns as f64),
        us(s.median_ns as f64),
        us(s.p99_ns as f64),
        us(s.max_ns as f64),
        us(s.mean_ns / 2.0),
    );
    if let Some(t) = times {
        let step = |c: Option<crate::model::rpc::CodecTime>| match c {
            Some(c) => format!(
                "mean {} us, p50 {} us, p99 {} us (n={})",
                us(c.mean_ns),
                us(c.p50_ns as f64),
                us(c.p99_ns as f64),
                c.count
            ),
            None => "-".into(),
        };
        println!(
            "# serialisation, client side, per message, warm-up included: encode {}; decode {}",
            step(t.encode),
            step(t.decode)
        );
    }
    let v = crate::stats::validity::latency(s.samples);
    if v.is_invalid() {
        println!("# not a valid latency: {}", v.reason());
    }
    Ok(0)
}
