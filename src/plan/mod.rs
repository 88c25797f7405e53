//! The plan: turns a [`Request`] into the list of points to measure (a sweep is the
//! cartesian product of the swept parameters) and checks it before anything runs. [`build`]
//! refuses what does not apply (`checks`), takes each swept option's values (`axes`),
//! chooses the socket options every point starts from, and lays the points out (`points`).

mod axes;
mod checks;
pub mod compete;
pub mod guard;
pub mod instrumented;
pub mod lab_server;
pub mod load;
#[cfg(feature = "mpi")]
pub mod mpi;
#[cfg(test)]
mod nodelay_tests;
pub mod path_stages;
pub mod point_result;
mod points;
pub mod runner;
#[cfg(test)]
mod runner_tests;
pub mod sink;
pub mod trace;

use anyhow::Result;

use crate::control::client::ClientSide;
use crate::control::protocol::{PointSpec, TestSpec};
use crate::pattern::{Direction, FastPaths, OpenLoopSettings, PatternKind};
use crate::request::Request;
use crate::transport::sockopt::CcName;
use crate::transport::{self, Capabilities, SocketOptions};
use crate::units::{self, Rate};

pub use crate::model::{PointKey, Swept};
pub use axes::{sweep_points, MAX_POINTS};

/// One point of the sweep: its place in the sweep, what both ends run, and the client's
/// socket options.
#[derive(Debug, Clone)]
pub struct PlannedPoint {
    pub key: PointKey,
    pub spec: PointSpec,
    pub client_socket: SocketOptions,
}

/// A request checked and laid out: the test, its points, and how each is repeated.
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
/// socket buffers (the Nagle and SWS stalls of the studies in REFERENCES.md), --nagle, and MPTCP (whose subflows are not
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

/// Checks a request and lays out its points. Every refusal names the option as the command
/// line spells it; the checks run in a fixed order (transport, pattern, statistics, sizes,
/// buffers, pacing, the sweep's size), so a request is refused for the same fault each time.
pub fn build(r: &Request) -> Result<RunPlan> {
    build_on(r, transport::sockopt::default_congestion_control)
}

/// [`build`] on a host whose default congestion control `default_cc` reads (it is read only
/// where the plan can depend on it): tests give each host they mean, whatever this one uses.
fn build_on(r: &Request, default_cc: impl FnOnce() -> Option<String>) -> Result<RunPlan> {
    let t = r.transport.open(&r.local)?;
    let caps = t.capabilities();
    checks::transport_options(r, &caps)?;
    // Every algorithm is checked before the first point runs: a sweep does not stop half
    // way at a name the kernel lacks.
    let ccs = axes::congestion_controls(&r.socket.cc)?;
    checks::pattern_options(r, &caps)?;
    checks::fast_paths(r, &caps)?;
    checks::burst_and_parallel(r)?;
    let confidence = checks::statistics(&r.statistics)?;
    checks::cpus_and_stop(r)?;
    let sizes = axes::sizes(r, &caps)?;
    let mut axes = axes::Axes::new(sizes, ccs, &r.buffers)?;
    axes.rates = axes::rates(r);
    checks::pacing(&r.traffic)?;
    checks::open_loop(r, &caps, points::duration(r))?;
    axes.check_count()?;
    let (base_socket, nodelay_auto) = socket_options(r, &caps, &axes, default_cc);
    let points = points::lay_out(r, caps.reliable, &axes, points::duration(r), &base_socket);
    let stats = &r.statistics;
    Ok(RunPlan {
        test: test_spec(r, &caps, &axes.sizes),
        points,
        swept: axes.swept(),
        client: ClientSide {
            socket: base_socket,
            cpus: r.socket.cpu.clone(),
            io_timeout: r.timeouts.io,
            loss_timeout: r.timeouts.loss,
            // --load's time-series plot of the round trips, idle and loaded.
            rtt_series: r.load.is_some()
                && matches!(r.pattern, PatternKind::Pingpong | PatternKind::Rr),
            host_counters: r.host_counters,
        },
        confidence,
        repeat: stats.repeat,
        until_ci: stats.until_ci,
        max_repeat: stats.max_repeat,
        rate: r.traffic.rate,
        nodelay_auto,
    })
}

/// The socket options every point starts from, and whether TCP_NODELAY among them is
/// wirebench's own choice ([`automatic_nodelay`]). A run of one algorithm carries it here; a
/// sweep sets each point's own.
fn socket_options(
    r: &Request,
    caps: &Capabilities,
    axes: &axes::Axes,
    default_cc: impl FnOnce() -> Option<String>,
) -> (SocketOptions, bool) {
    // Read only where the choice can depend on it.
    let default_cc = (r.pattern == PatternKind::Stream && caps.tcp_options)
        .then(default_cc)
        .flatten();
    let nodelay_auto = automatic_nodelay(r, caps, &axes.sizes, &axes.ccs, default_cc.as_deref());
    let base = SocketOptions {
        sndbuf: 0,
        rcvbuf: 0,
        nodelay: r.socket.nodelay || nodelay_auto,
        cc: match axes.ccs.as_slice() {
            [one] => one.map(|c| c.as_str().to_owned()),
            _ => None,
        },
        mss: r.socket.mss,
    };
    (base, nodelay_auto)
}

/// Bytes of the length before each message of a run's exchanges: a byte stream carries a
/// 0-byte message as nothing at all, so a run with a size of 0 frames every message of every
/// point (all its points alike, comparable); a transport with message boundaries sends a
/// 0-byte datagram as it is.
pub fn length_prefix(r: &Request, caps: &Capabilities, sizes: &[u64]) -> u32 {
    let exchange = matches!(r.pattern, PatternKind::Pingpong | PatternKind::Rr);
    let zero = sizes.contains(&0) || r.sizes.response_size == Some(0);
    if exchange && zero && !caps.message_boundaries {
        crate::pattern::channel::LENGTH_PREFIX as u32
    } else {
        0
    }
}

/// The test as both ends run it, the same for every point.
fn test_spec(r: &Request, caps: &Capabilities, sizes: &[u64]) -> TestSpec {
    let (pattern, traffic, sock, fast) = (r.pattern, &r.traffic, &r.socket, &r.fast);
    TestSpec {
        one_port: r.server.one_port,
        pattern,
        transport: r.transport,
        streams: traffic.parallel,
        direction: traffic.direction,
        spin: sock.spin,
        server_cpus: sock.server_cpu.clone(),
        interval_ms: traffic.interval.map(|d| d.as_millis().max(1) as u64),
        burst: traffic.burst,
        write_size: match pattern {
            PatternKind::Pingpong | PatternKind::Rr => r.sizes.write_size,
            _ => None,
        },
        think_ns: traffic.think.map(units::whole_ns),
        length_prefix: length_prefix(r, caps, sizes),
        tls: r.local.tls,
        path_timing: r.traffic.path_timing,
        // A seed drawn here when none is given, so that the run document records the one used.
        open_loop: traffic.open_loop.as_ref().map(|o| OpenLoopSettings {
            arrivals: o.arrivals,
            seed: o.seed.unwrap_or_else(|| fastrand::u64(..)),
            max_in_flight: o.max_in_flight,
        }),
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
    }
}
