//! The request's refusals that need no sweep axis: options given where the transport or the
//! pattern has no use for them, and values out of range. Each names the option as the
//! command line spells it; [`super::build`] calls them in a fixed order, so that a request
//! with several faults is refused for the same one every time.

use anyhow::{bail, Result};

use crate::pattern::stream::MAX_PACE_BURST;
use crate::pattern::{Direction, PatternKind};
use crate::request::{Request, Statistics, Traffic};
use crate::transport::{Capabilities, TransportKind};
use crate::units::Rate;

/// What the transport carries: --one-port's single TCP connection, and TCP's own socket
/// options (--nodelay, --nagle, --cc, --mss).
pub(super) fn transport_options(r: &Request, caps: &Capabilities) -> Result<()> {
    let sock = &r.socket;
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
    Ok(())
}

/// What the pattern uses: a stream's traffic options, --write-size and --think, and the
/// traffic beside the measured test (--load, --compete) with its --plot.
pub(super) fn pattern_options(r: &Request, caps: &Capabilities) -> Result<()> {
    let (sizes_req, traffic) = (&r.sizes, &r.traffic);
    if r.pattern != PatternKind::Stream {
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
    check_path_timing(r)?;
    if let Some(load) = &r.load {
        super::load::check(r, load)?;
    }
    super::compete::check(r)?;
    check_plot(r)
}

/// The fast paths: which pattern and which kind of socket each applies to, and the ones that
/// exclude each other.
pub(super) fn fast_paths(r: &Request, caps: &Capabilities) -> Result<()> {
    let (pattern, fast) = (r.pattern, &r.fast);
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
    Ok(())
}

/// --burst and --parallel: where they apply and that they are at least 1.
pub(super) fn burst_and_parallel(r: &Request) -> Result<()> {
    let (pattern, traffic) = (r.pattern, &r.traffic);
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
    Ok(())
}

/// --confidence, --repeat, --until-ci and --max-repeat; the confidence level as a share.
pub(super) fn statistics(stats: &Statistics) -> Result<f64> {
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
    Ok(confidence)
}

/// --cpu within this machine's CPUs, and the lengths and counts that must be above 0.
pub(super) fn cpus_and_stop(r: &Request) -> Result<()> {
    let (stop, traffic) = (&r.stop, &r.traffic);
    let cpus = crate::sys::cpu_count();
    if let Some(c) = r.socket.cpu.iter().find(|&&c| c >= cpus) {
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
    Ok(())
}

/// --rate above 0, and --pace-burst in range and only with a rate to pace at.
pub(super) fn pacing(traffic: &Traffic) -> Result<()> {
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
    Ok(())
}

/// `--arrivals` and rr's `--rate`: an rr over a reliable byte stream (replies are matched
/// to requests in order), with rates whose schedules fit in memory, and none of the options
/// that shape a closed loop.
pub(super) fn open_loop(
    r: &Request,
    caps: &Capabilities,
    duration: Option<std::time::Duration>,
) -> Result<()> {
    use crate::pattern::openloop::{MAX_IN_FLIGHT, MAX_SCHEDULE};
    use crate::pattern::Arrivals;
    let Some(open) = &r.traffic.open_loop else {
        return Ok(());
    };
    let kind = open.arrivals;
    if r.pattern != PatternKind::Rr {
        bail!(
            "--arrivals {kind} applies to the rr pattern only (requests on a schedule), not to {}",
            r.pattern
        );
    }
    if kind == Arrivals::Closed {
        bail!("--rate sets an open-loop schedule: it cannot be combined with --arrivals closed");
    }
    if !caps.reliable {
        bail!(
            "--arrivals {kind} matches each reply to the oldest request, so it needs a reliable, in-order transport (tcp, unix, mptcp, quic, grpc): {} is not one",
            r.transport
        );
    }
    let zero = r.sizes.size.as_ref().is_some_and(|s| s.contains(&0))
        || r.sizes.request_size == Some(0)
        || r.sizes.response_size == Some(0);
    if zero {
        bail!("--arrivals {kind} sends requests of at least 1 byte: a size of 0 is for closed-loop exchanges");
    }
    if open.rates.is_empty() {
        bail!("--arrivals {kind} needs --rate N/s: the requests per second to offer");
    }
    if open.rates.contains(&0) {
        bail!("--rate: a rate of 0 requests per second offers no load");
    }
    for (set, name) in [
        (r.traffic.burst != 1, "--burst"),
        (r.traffic.think.is_some(), "--think"),
        (r.sizes.write_size.is_some(), "--write-size"),
        (r.load.is_some(), "--load"),
    ] {
        if set {
            bail!("{name} shapes a closed loop: it cannot be combined with --arrivals {kind} (--max-in-flight bounds the requests in flight)");
        }
    }
    if open.max_in_flight == 0 || open.max_in_flight > MAX_IN_FLIGHT {
        bail!("--max-in-flight must be 1 to {MAX_IN_FLIGHT}");
    }
    let streams = f64::from(r.traffic.parallel.max(1));
    let most = open.rates.iter().copied().max().unwrap_or(1) as f64 / streams;
    let by_time = duration.map_or(f64::INFINITY, |d| most * d.as_secs_f64());
    let by_count = r.stop.iterations.map_or(f64::INFINITY, |n| n as f64);
    if by_time.min(by_count) > MAX_SCHEDULE as f64 {
        bail!(
            "--rate {} per connection for {} schedules about {:.0} requests per connection; at most {MAX_SCHEDULE} are kept: lower the rate or shorten -d",
            most,
            duration.map_or_else(|| "the run".to_owned(), crate::units::format_duration),
            by_time.min(by_count)
        );
    }
    Ok(())
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
/// `--path-timing`: one request in flight on one connection of a transport whose messages
/// are kernel sockets' own (tcp, udp, raw), each message one send, so that every stamp belongs
/// to one round trip.
fn check_path_timing(r: &Request) -> Result<()> {
    let t = &r.traffic;
    if !t.path_timing {
        return Ok(());
    }
    if !matches!(r.pattern, PatternKind::Pingpong | PatternKind::Rr) {
        bail!(
            "--path-timing applies to pingpong and rr (one round trip at a time), not to {}",
            r.pattern
        );
    }
    if !matches!(
        r.transport,
        TransportKind::Tcp | TransportKind::Udp | TransportKind::Raw
    ) {
        bail!(
            "--path-timing needs the kernel's stamps of a tcp, udp or raw socket; {} has none of its own",
            r.transport
        );
    }
    for (set, name) in [
        (t.open_loop.is_some(), "--arrivals"),
        (t.burst > 1, "--burst above 1"),
        (t.parallel > 1, "-P above 1"),
        (r.sizes.write_size.is_some(), "--write-size"),
        (r.load.is_some(), "--load"),
        (!r.compete.is_empty(), "--compete"),
    ] {
        if set {
            bail!("--path-timing times one closed-loop round trip at a time on one connection, each message one send: not with {name}");
        }
    }
    Ok(())
}

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
