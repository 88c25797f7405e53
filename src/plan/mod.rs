//! The plan: turns a [`Request`] into the list of points to measure (a sweep is the
//! cartesian product of the swept parameters) and checks it before anything runs.

pub mod compare;
pub mod compete;
pub mod guard;
pub mod instrumented;
pub mod lab_server;
pub mod load;
pub mod measure;
#[cfg(feature = "mpi")]
pub mod mpi;
#[cfg(test)]
mod nodelay_tests;
pub mod runner;
#[cfg(test)]
mod runner_tests;
pub mod trace;

use std::time::Duration;

use anyhow::{bail, Result};
use serde::{Deserialize, Serialize};

use crate::control::client::ClientSide;
use crate::control::protocol::{PointSpec, TestSpec};
use crate::pattern::stream::{Pace, DATAGRAM_HEADER, MAX_PACE_BURST};
use crate::pattern::{Direction, FastPaths, PatternKind};
use crate::request::Request;
use crate::transport::sockopt::CcName;
use crate::transport::{self, Capabilities, SocketOptions};
use crate::units::{self, Rate};

/// The parameters that identify a point in a sweep (requested values).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct PointKey {
    /// Message / request / write size, bytes.
    pub size: u64,
    pub sndbuf: u64,
    pub rcvbuf: u64,
    pub server_sndbuf: u64,
    pub server_rcvbuf: u64,
    /// The point's congestion control when `--cc` names several (a sweep axis); absent
    /// otherwise: a single `--cc` is one of the run's settings, as before the sweep existed,
    /// so the points of a run with one algorithm keep the keys they always had.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<String>")]
    pub cc: Option<CcName>,
}

#[derive(Debug, Clone)]
pub struct PlannedPoint {
    pub key: PointKey,
    pub spec: PointSpec,
    pub client_socket: SocketOptions,
}

/// Which parameters vary across the sweep (for table columns and grouping).
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema,
)]
pub struct Swept {
    pub size: bool,
    pub sndbuf: bool,
    pub rcvbuf: bool,
    pub server_sndbuf: bool,
    pub server_rcvbuf: bool,
    /// `--cc` names several algorithms. False in documents written before it could.
    #[serde(default)]
    pub cc: bool,
}

#[derive(Debug, Clone)]
pub struct RunPlan {
    pub test: TestSpec,
    pub points: Vec<PlannedPoint>,
    pub swept: Swept,
    pub client: ClientSide,
    pub confidence: f64,
    pub repeat: u32,
    pub until_ci: Option<f64>,
    pub max_repeat: u32,
    pub rate: Option<Rate>,
    /// wirebench turned Nagle's algorithm off by itself: a bulk TCP stream under BBR (see
    /// [`automatic_nodelay`]). The points' socket options carry TCP_NODELAY.
    pub nodelay_auto: bool,
}

/// The smallest write of a stream that turns Nagle's algorithm off by itself: 64 KiB, the
/// largest segment any path carries (loopback's MSS is 65483), so that every write is at least
/// one full segment and Nagle could only ever hold a write's last, partial one.
pub const NODELAY_AUTO_MIN_WRITE: u64 = 64 * 1024;

/// Whether a stream turns Nagle's algorithm off by itself. A bulk stream writes whole
/// buffers back to back: Nagle coalesces nothing there and only holds each write's last,
/// partial segment until an ACK comes. Where TCP paces the connection itself (BBR; the kernel's
/// timer, without an fq qdisc) that hold cost 25-33% of a single stream's rate on loopback with
/// 4-10 times as many pacing stops (bench/RESULTS.md, "Where the single stream's time went"), a
/// figure of write size against MSS rather than of the path; under cubic it did not, and
/// TCP_NODELAY cost 7% there, so only senders that pace themselves get it. Left on where Nagle
/// is the study: small writes (a write-size sweep below 64K keeps it on for every point), fixed
/// socket buffers (the seeds' Nagle and SWS stalls), --nagle, and MPTCP (whose subflows are not
/// plain TCP); and where the sender's algorithm is not known here (a remote server sending
/// with its own default).
fn automatic_nodelay(
    r: &Request,
    caps: &Capabilities,
    sizes: &[u64],
    ccs: &[Option<CcName>],
    default_cc: Option<&str>,
) -> bool {
    let b = &r.buffers;
    let buffers_left_to_kernel = [
        &b.window,
        &b.sndbuf,
        &b.rcvbuf,
        &b.server_sndbuf,
        &b.server_rcvbuf,
    ]
    .iter()
    .all(|v| v.as_ref().is_none_or(|v| v.iter().all(|&x| x == 0)));
    r.pattern == PatternKind::Stream
        && caps.tcp_options
        // Plain TCP: MPTCP shares tcp_options but not the receive-side semantics.
        && caps.rcvlowat
        && !r.socket.nodelay
        && !r.socket.nagle
        && buffers_left_to_kernel
        && sizes.iter().all(|&s| s >= NODELAY_AUTO_MIN_WRITE)
        && senders_pace_themselves(r, ccs, default_cc)
}

/// Whether every sending end of the run has TCP pace itself (see
/// [`transport::sockopt::paces_itself`]): the algorithms asked for, else `default_cc`, this
/// host's default, where this host's sockets send (forward, or a server started here). A
/// remote server's default is not known here: false.
fn senders_pace_themselves(r: &Request, ccs: &[Option<CcName>], default_cc: Option<&str>) -> bool {
    let this_host_sends = r.traffic.direction == Direction::Forward || r.server.to.is_none();
    ccs.iter().all(|cc| match cc {
        Some(cc) => transport::sockopt::paces_itself(cc.as_str()),
        None => this_host_sends && default_cc.is_some_and(transport::sockopt::paces_itself),
    })
}

/// Default message sizes when --size is not given.
fn default_size(pattern: PatternKind, reliable: bool) -> u64 {
    match pattern {
        // 128 KiB writes, iperf3's and iperf2's default. Once the receiver wakes per read
        // rather than per segment (RcvLowat::Auto), fewer, larger writes move more on the
        // machines measured; with a wake-up per segment they had moved less (bench/RESULTS.md).
        PatternKind::Stream if reliable => 128 * 1024,
        PatternKind::Stream => 1400,
        _ => 1,
    }
}

/// Most points one run may have.
pub const MAX_POINTS: usize = 100_000;

/// Points of a sweep over options with these numbers of values each: their product, exact
/// (u128 holds a product of five counts of at most 10 000 each).
pub fn sweep_points(dims: &[usize]) -> u128 {
    dims.iter().fold(1u128, |n, &d| n.saturating_mul(d as u128))
}

/// A sweep's values, or the one value "not set" (0: kernel autotuning).
fn sweep(values: Option<&Vec<u64>>) -> Vec<u64> {
    values.cloned().unwrap_or_else(|| vec![0])
}

/// Checks a request and lays out its points. Every refusal names the option as the command
/// line spells it.
pub fn build(r: &Request) -> Result<RunPlan> {
    build_on(r, transport::sockopt::default_congestion_control)
}

/// [`build`] on a host whose default congestion control `default_cc` reads (it is read only
/// where the plan can depend on it): tests give each host they mean, whatever this one uses.
fn build_on(r: &Request, default_cc: impl FnOnce() -> Option<String>) -> Result<RunPlan> {
    let t = r.transport.open(&r.local)?;
    let caps = t.capabilities();
    let pattern = r.pattern;
    let (sizes_req, bufs, stop, traffic, sock, fast, stats) = (
        &r.sizes,
        &r.buffers,
        &r.stop,
        &r.traffic,
        &r.socket,
        &r.fast,
        &r.statistics,
    );
    if r.server.one_port && !crate::control::oneport::carries(r.transport) {
        bail!(
            "--one-port carries the data connections on the control port's TCP: it works with -t tcp only, not {}",
            r.transport
        );
    }

    if !caps.tcp_options {
        for (set, name) in [
            (sock.nodelay, "--nodelay"),
            (sock.nagle, "--nagle"),
            (!sock.cc.is_empty(), "--cc"),
            (sock.mss.is_some(), "--mss"),
        ] {
            if set {
                bail!(
                    "{name} applies to TCP only, not to the {} transport",
                    r.transport
                );
            }
        }
    }
    // Every algorithm is checked before the first point runs: a sweep does not stop half
    // way at a name the kernel lacks.
    let ccs = congestion_controls(&sock.cc)?;
    if pattern != PatternKind::Stream {
        for (set, name) in [
            (traffic.direction == Direction::Reverse, "--reverse"),
            (traffic.direction == Direction::Bidir, "--bidir"),
            (traffic.rate.is_some(), "--rate"),
            (traffic.pace_burst != 1, "--pace-burst"),
            (traffic.interval.is_some(), "--interval"),
            (sizes_req.read_size.is_some(), "--read-size"),
        ] {
            if set {
                bail!("{name} applies to the stream pattern only");
            }
        }
    }
    check_split_and_think(r, caps.message_boundaries)?;
    if let Some(load) = &r.load {
        load::check(r, load)?;
    }
    compete::check(r)?;
    check_plot(r)?;
    let byte_stream_only = [(fast.zerocopy, "--zerocopy"), (fast.sendfile, "--sendfile")];
    let datagram_only = [
        (fast.gso, "--gso"),
        (fast.gro, "--gro"),
        (fast.batch.is_some(), "--batch"),
    ];
    for (set, name) in byte_stream_only.iter().chain(datagram_only.iter()).chain(
        [
            (fast.skip_rx_copy, "--skip-rx-copy"),
            (fast.rcvlowat.is_some(), "--rcvlowat"),
        ]
        .iter(),
    ) {
        if *set && pattern != PatternKind::Stream {
            bail!("{name} applies to the stream pattern only");
        }
    }
    for (set, name) in byte_stream_only {
        if set && !caps.reliable {
            bail!(
                "{name} applies to byte streams (tcp, unix), not to {}",
                r.transport
            );
        }
    }
    if fast.rcvlowat.is_some() && !caps.rcvlowat {
        bail!("--rcvlowat applies to tcp streams, not to {}", r.transport);
    }
    for (set, name) in datagram_only {
        if set && !caps.syscall_batching {
            bail!(
                "{name} applies to kernel datagram sockets (udp), not to {}",
                r.transport
            );
        }
    }
    if fast.zerocopy && fast.sendfile {
        bail!("--zerocopy and --sendfile are two different send paths: choose one");
    }
    if fast.batch == Some(0) || fast.batch.is_some_and(|b| b > 1024) {
        bail!("--batch must be 1 to 1024");
    }
    if pattern != PatternKind::Rr && traffic.burst != 1 {
        bail!("--burst applies to the rr pattern only");
    }
    if pattern == PatternKind::Crr && traffic.parallel != 1 {
        bail!("crr runs one connection at a time; drop --parallel");
    }
    if traffic.parallel == 0 {
        bail!("--parallel must be at least 1");
    }
    if traffic.burst == 0 {
        bail!("--burst must be at least 1");
    }
    let confidence = crate::stats::parse_confidence(stats.confidence)
        .map_err(|e| anyhow::anyhow!("--confidence: {e}"))?;
    if stats.repeat == 0 {
        bail!("--repeat must be at least 1");
    }
    let until_ci = stats.until_ci;
    if until_ci.is_some_and(|f| !(f > 0.0 && f.is_finite())) {
        bail!("--until-ci must be a share above 0%");
    }
    if until_ci.is_some() && stats.max_repeat < 3 {
        bail!("--max-repeat must be at least 3 with --until-ci");
    }
    let cpus = crate::sys::cpu_count();
    if let Some(c) = sock.cpu.iter().find(|&&c| c >= cpus) {
        bail!("--cpu {c}: this machine has CPUs 0 to {}", cpus - 1);
    }
    if traffic.interval.is_some_and(|d| d.is_zero()) {
        bail!("--interval must be longer than 0");
    }
    if stop.duration.is_some_and(|d| d.is_zero()) {
        bail!("--duration must be longer than 0");
    }
    if stop.iterations == Some(0) || stop.bytes == Some(0) {
        bail!("--iterations and --bytes must be at least 1");
    }

    // Sizes.
    let mut sizes = match (
        &sizes_req.size,
        pattern,
        sizes_req.write_size,
        sizes_req.request_size,
    ) {
        (_, PatternKind::Stream, Some(w), _) => vec![w],
        (_, PatternKind::Rr | PatternKind::Crr, _, Some(q)) => vec![q],
        (Some(s), ..) => s.clone(),
        (None, ..) => vec![default_size(pattern, caps.reliable)],
    };
    if sizes.is_empty() {
        bail!("--size names no size");
    }
    if sizes.len() > units::MAX_SIZE_SPEC_VALUES {
        bail!(
            "--size has {} sizes; at most {} are allowed",
            sizes.len(),
            units::MAX_SIZE_SPEC_VALUES
        );
    }
    sizes = units::perturb(&sizes, sizes_req.perturb);
    if let Some(&bad) = sizes.iter().find(|&&s| s == 0) {
        bail!("message size {bad}: sizes must be at least 1 byte");
    }
    let floor = if pattern == PatternKind::Stream && !caps.reliable {
        DATAGRAM_HEADER as u64
    } else {
        1
    };
    if let Some(&small) = sizes.iter().find(|&&s| s < floor) {
        bail!(
            "datagram size {small} is too small: a {} stream datagram carries a {floor}-byte sequence header",
            r.transport
        );
    }
    let response = sizes_req.response_size;
    let largest = sizes
        .iter()
        .copied()
        .max()
        .unwrap_or(1)
        .max(response.unwrap_or(1));
    if largest > caps.max_message {
        bail!(
            "message size {largest} bytes exceeds what one {} message can carry ({} bytes)",
            r.transport,
            caps.max_message
        );
    }
    if response == Some(0) {
        bail!("--response-size must be at least 1 byte");
    }
    // A datagram read holds one datagram: a larger read buffer only costs memory (times
    // --batch, on both ends), and a server refuses it.
    if let Some(read) = sizes_req.read_size {
        let most = caps.max_message.max(crate::control::limits::DATAGRAM_READ);
        if caps.message_boundaries && read > most {
            bail!(
                "--read-size of {read} bytes: one {} message holds at most {} bytes (reads up to {most} are accepted)",
                r.transport,
                caps.max_message
            );
        }
    }

    // Socket buffer sweeps (0 = autotuning).
    // -w (--window) sets both; --sndbuf and --rcvbuf override it each.
    let sndbufs = sweep(bufs.sndbuf.as_ref().or(bufs.window.as_ref()));
    let rcvbufs = sweep(bufs.rcvbuf.as_ref().or(bufs.window.as_ref()));
    // -w alone sweeps both buffers together (one point per value), not their product.
    let paired = bufs.window.is_some() && bufs.sndbuf.is_none() && bufs.rcvbuf.is_none();
    // u64::MAX: the server follows the client's --sndbuf / --rcvbuf.
    let server_sndbufs = bufs.server_sndbuf.clone().unwrap_or_else(|| vec![u64::MAX]);
    let server_rcvbufs = bufs.server_rcvbuf.clone().unwrap_or_else(|| vec![u64::MAX]);
    for (name, values) in [
        ("--sndbuf", &sndbufs),
        ("--rcvbuf", &rcvbufs),
        ("--server-sndbuf", &server_sndbufs),
        ("--server-rcvbuf", &server_rcvbufs),
    ] {
        if values.is_empty() {
            bail!("{name} names no size");
        }
    }
    let swept = Swept {
        size: sizes.len() > 1,
        sndbuf: sndbufs.len() > 1,
        rcvbuf: rcvbufs.len() > 1,
        server_sndbuf: server_sndbufs.len() > 1,
        server_rcvbuf: server_rcvbufs.len() > 1,
        cc: ccs.len() > 1,
    };

    let duration = stop
        .duration
        .or(if stop.bytes.is_none() && stop.iterations.is_none() {
            Some(match pattern {
                PatternKind::Stream => Duration::from_secs(10),
                _ => Duration::from_secs(1),
            })
        } else {
            None
        });
    let direction = traffic.direction;
    let rate = traffic.rate;
    if let Some(Rate::BitsPerSecond(v) | Rate::PacketsPerSecond(v)) = rate {
        if !(v > 0.0 && v.is_finite()) {
            bail!("--rate must be above 0");
        }
    }
    if traffic.pace_burst == 0 || traffic.pace_burst > MAX_PACE_BURST {
        bail!("--pace-burst must be 1 to {MAX_PACE_BURST}");
    }
    if traffic.pace_burst != 1 && rate.is_none() {
        bail!("--pace-burst needs --rate: it groups the paced sender's writes");
    }

    // Counted before one point is built: five swept options multiply, and 10^8 points were
    // built (6.8 GB) before this limit was ever looked at.
    let dims = [
        sizes.len(),
        sndbufs.len(),
        if paired { 1 } else { rcvbufs.len() },
        server_sndbufs.len(),
        server_rcvbufs.len(),
        ccs.len(),
    ];
    let count = sweep_points(&dims);
    if count > MAX_POINTS as u128 {
        bail!(
            "the sweep has {count} points ({} sizes x {} sndbuf x {} rcvbuf x {} server-sndbuf x {} server-rcvbuf x {} cc); at most {MAX_POINTS} are allowed",
            dims[0],
            dims[1],
            dims[2],
            dims[3],
            dims[4],
            dims[5]
        );
    }
    // Read only where the choice can depend on it.
    let default_cc = (pattern == PatternKind::Stream && caps.tcp_options)
        .then(default_cc)
        .flatten();
    let nodelay_auto = automatic_nodelay(r, &caps, &sizes, &ccs, default_cc.as_deref());
    // The run's one algorithm, if any (a sweep sets each point's own below).
    let base_socket = SocketOptions {
        sndbuf: 0,
        rcvbuf: 0,
        nodelay: sock.nodelay || nodelay_auto,
        cc: match ccs.as_slice() {
            [one] => one.map(|c| c.as_str().to_owned()),
            _ => None,
        },
        mss: sock.mss,
    };
    let mut points = Vec::new();
    // One block of the other axes per algorithm: a table reads as one sweep per algorithm.
    for &cc in &ccs {
        let point_socket = SocketOptions {
            cc: cc.map(|c| c.as_str().to_owned()),
            ..base_socket.clone()
        };
        let key_cc = if swept.cc { cc } else { None };
        for &size in &sizes {
            for &snd in &sndbufs {
                for &rcv in &rcvbufs {
                    if paired && rcv != snd {
                        continue;
                    }
                    for &ssnd in &server_sndbufs {
                        for &srcv in &server_rcvbufs {
                            let server_sndbuf = if ssnd == u64::MAX { snd } else { ssnd };
                            let server_rcvbuf = if srcv == u64::MAX { rcv } else { srcv };
                            let key = PointKey {
                                size,
                                sndbuf: snd,
                                rcvbuf: rcv,
                                server_sndbuf,
                                server_rcvbuf,
                                cc: key_cc,
                            };
                            points.push(point(
                                r,
                                pattern,
                                caps.reliable,
                                key,
                                response,
                                duration,
                                rate,
                                &point_socket,
                            ));
                        }
                    }
                }
            }
        }
    }

    Ok(RunPlan {
        test: TestSpec {
            one_port: r.server.one_port,
            pattern,
            transport: r.transport,
            streams: traffic.parallel,
            direction,
            spin: sock.spin,
            server_cpus: sock.server_cpu.clone(),
            interval_ms: traffic.interval.map(|d| d.as_millis().max(1) as u64),
            burst: traffic.burst,
            write_size: match pattern {
                PatternKind::Pingpong | PatternKind::Rr => sizes_req.write_size,
                _ => None,
            },
            think_ns: traffic.think.map(units::whole_ns),
            fast: FastPaths {
                zerocopy: fast.zerocopy,
                sendfile: fast.sendfile,
                skip_rx_copy: fast.skip_rx_copy,
                // Batching is the default for datagram streams: one system call per datagram
                // caps the rate well below what the path carries.
                batch: fast.batch.unwrap_or(
                    if pattern == PatternKind::Stream && caps.syscall_batching {
                        16
                    } else {
                        1
                    },
                ),
                gso: fast.gso,
                gro: fast.gro,
                busy_poll_us: fast.busy_poll_us,
                rcvlowat: fast.rcvlowat.unwrap_or_default(),
            },
        },
        points,
        swept,
        client: ClientSide {
            socket: base_socket,
            cpus: sock.cpu.clone(),
            io_timeout: r.timeouts.io,
            loss_timeout: r.timeouts.loss,
            // --load's time-series plot of the round trips, idle and loaded.
            rtt_series: r.load.is_some()
                && matches!(pattern, PatternKind::Pingpong | PatternKind::Rr),
        },
        confidence,
        repeat: stats.repeat,
        until_ci,
        max_repeat: stats.max_repeat,
        rate,
        nodelay_auto,
    })
}

/// `--cc`'s algorithms, each checked against the kernel, as the values of the sweep axis:
/// `[None]` when none is named.
fn congestion_controls(names: &[String]) -> Result<Vec<Option<CcName>>> {
    if names.is_empty() {
        return Ok(vec![None]);
    }
    let mut out = Vec::with_capacity(names.len());
    for (i, name) in names.iter().enumerate() {
        if name.is_empty() {
            bail!("--cc names an empty algorithm");
        }
        if names[..i].contains(name) {
            bail!("--cc names '{}' twice", crate::text::printable(name));
        }
        transport::sockopt::validate_cc(name)?;
        let Some(cc) = CcName::new(name) else {
            bail!(
                "--cc '{}': congestion control names have at most {} bytes",
                crate::text::printable(name),
                transport::sockopt::CC_NAME_MAX
            );
        };
        out.push(Some(cc));
    }
    Ok(out)
}

/// `--plot`: what it draws needs --load on an exchange or --compete, and a figure's file.
fn check_plot(r: &Request) -> Result<()> {
    let Some(plot) = &r.plot else {
        return Ok(());
    };
    let exchange = matches!(r.pattern, PatternKind::Pingpong | PatternKind::Rr);
    if !((r.load.is_some() && exchange) || !r.compete.is_empty()) {
        bail!("--plot draws latency under --load (pingpong, rr) or the shares of --compete flows (stream): give one of them");
    }
    if !plot
        .extension()
        .and_then(|e| e.to_str())
        .is_some_and(|e| e.eq_ignore_ascii_case("svg") || e.eq_ignore_ascii_case("png"))
    {
        bail!(
            "--plot {}: the file name must end in .svg or .png",
            plot.display()
        );
    }
    Ok(())
}

/// `--write-size` of an exchange and `--think`: what they apply to. A stream's write size is
/// its message size and is checked with the sizes.
fn check_split_and_think(r: &Request, message_boundaries: bool) -> Result<()> {
    let exchange = matches!(r.pattern, PatternKind::Pingpong | PatternKind::Rr);
    if r.sizes.write_size == Some(0) {
        bail!("--write-size must be at least 1 byte");
    }
    if r.sizes.write_size.is_some() && r.pattern != PatternKind::Stream {
        if !exchange {
            bail!(
                "--write-size applies to the stream, pingpong and rr patterns, not to {}",
                r.pattern
            );
        }
        if message_boundaries {
            bail!(
                "--write-size splits a message over several writes: a {} message is one datagram and cannot be split",
                r.transport
            );
        }
    }
    if let Some(think) = r.traffic.think {
        if !exchange {
            bail!(
                "--think applies to the pingpong and rr patterns, not to {}",
                r.pattern
            );
        }
        if think.is_zero() {
            bail!("--think must be longer than 0");
        }
        if r.traffic.burst > 1 {
            bail!("--think waits between transactions, one at a time: it cannot be combined with --burst");
        }
    }
    Ok(())
}

#[allow(clippy::too_many_arguments)]
fn point(
    r: &Request,
    pattern: PatternKind,
    reliable: bool,
    key: PointKey,
    response: Option<u64>,
    duration: Option<Duration>,
    rate: Option<Rate>,
    base: &SocketOptions,
) -> PlannedPoint {
    let response_size = match pattern {
        PatternKind::Pingpong => key.size,
        _ => response.unwrap_or(1),
    };
    // Only streams read in chunks of their own size; exchanges read whole messages.
    let read_size = match pattern {
        PatternKind::Stream => {
            r.sizes
                .read_size
                .unwrap_or(if reliable { 128 * 1024 } else { 65_536 })
        }
        _ => key.size,
    };
    let streams = u64::from(r.traffic.parallel);
    // Totals per direction are split evenly over the streams.
    let pace = rate.map(|rate| Pace {
        interval_ns: match rate {
            Rate::BitsPerSecond(bps) => key.size as f64 * 8.0 * 1e9 / (bps / streams as f64),
            Rate::PacketsPerSecond(pps) => 1e9 / (pps / streams as f64),
        },
        burst: u64::from(r.traffic.pace_burst),
    });
    let bytes = match pattern {
        PatternKind::Stream => r.stop.bytes.map(|b| b.div_ceil(streams)),
        _ => r.stop.bytes,
    };
    PlannedPoint {
        key,
        spec: PointSpec {
            request_size: key.size,
            response_size,
            read_size,
            duration_ms: duration.map(|d| d.as_millis().max(1) as u64),
            bytes,
            iterations: r.stop.iterations,
            warmup: r.stop.warmup,
            pace,
            server_socket: SocketOptions {
                sndbuf: key.server_sndbuf,
                rcvbuf: key.server_rcvbuf,
                ..base.clone()
            },
            buffers_fixed: [key.sndbuf, key.rcvbuf, key.server_sndbuf, key.server_rcvbuf]
                .iter()
                .any(|&b| b > 0),
        },
        client_socket: SocketOptions {
            sndbuf: key.sndbuf,
            rcvbuf: key.rcvbuf,
            ..base.clone()
        },
    }
}
