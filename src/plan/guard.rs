//! Applies the physics guard ([`crate::stats::physics`]) to a point's result once it is
//! measured and to a sweep's metrics once they are derived: the one place per figure kind
//! where a figure that breaks what the run knows becomes invalid, with the reason, before it
//! is printed, saved, fitted, searched, compared or called an anomaly. No I/O, and never in
//! a timed phase: it reads the result, the lab's configuration and the lab's counters over
//! the point.

use crate::lab::config::{DirectionConfig, LinkConfig};
use crate::lab::goodput::{self, Framing};
use crate::lab::link::QueueLimit;
use crate::model::fairness::FairnessResult;
use crate::model::path::{PathClock, PathTiming, Stage, StageName};
use crate::model::{LatencyResult, PercentileNote, PointResult, StreamPair};
use crate::stats::physics::{self, End, Lateness, Link, RateBound};
use crate::stats::sweep::SweepMetrics;
use crate::stats::validity::{self, Validity};
use crate::transport::sockopt::EffectiveOptions;
use crate::transport::TransportKind;

/// The percentiles a latency point prints (table, JSON, CSV), as (name, p).
pub const PRINTED_PERCENTILES: [(&str, f64); 5] = [
    ("p50", 0.5),
    ("p90", 0.9),
    ("p99", 0.99),
    ("p99.9", 0.999),
    ("p99.99", 0.9999),
];

fn link(d: &DirectionConfig) -> Link {
    Link {
        rate_bits_per_s: d.rate_bits_per_s,
        delay_s: d.delay.as_secs_f64(),
        jitter_s: d.jitter.as_secs_f64(),
    }
}

fn tcp_like(t: TransportKind) -> bool {
    matches!(t, TransportKind::Tcp | TransportKind::Mptcp)
}

/// Payload bits per second a link of `rate` can carry for `transport` messages of `size`
/// bytes, without loss (with random loss the realised share of a phase varies around 1 - p,
/// so the loss-free goodput is the bound that no true figure breaks). TCP: full segments
/// with timestamps (MPTCP's options only make it less); QUIC: full UDP datagrams. None where
/// the link's framing of the transport is not known.
/// Every packet counts as the link's `framing` charges it (the delay line's own wire bytes).
pub fn goodput_of(
    transport: TransportKind,
    rate: f64,
    mtu: u64,
    size: u64,
    framing: Framing,
) -> Option<f64> {
    match transport {
        TransportKind::Tcp | TransportKind::Mptcp => {
            Some(goodput::tcp(rate, mtu, framing).tcp_bits_per_s)
        }
        // HTTP/2 frames and protobuf framing only take from TCP's goodput: its bound holds.
        TransportKind::Grpc => Some(goodput::tcp(rate, mtu, framing).tcp_bits_per_s),
        TransportKind::Udp => Some(goodput::udp(rate, mtu, size.max(1), framing)),
        TransportKind::Raw => Some(goodput::raw(rate, mtu, size.max(1), framing)),
        TransportKind::Quic => Some(goodput::udp(
            rate,
            mtu,
            mtu.saturating_sub(goodput::IPV4_HEADER + goodput::UDP_HEADER),
            framing,
        )),
        TransportKind::Unix | TransportKind::Mpi => None,
    }
}

/// The fewest wire bytes a message of `size` bytes takes on the link: its frames with their
/// headers (TCP in full segments with timestamps, UDP with its fragments, raw with
/// wirebench's header); for other transports the payload alone, a lower bound.
pub fn message_wire_bytes(transport: TransportKind, size: u64, mtu: u64, framing: Framing) -> u64 {
    match transport {
        TransportKind::Tcp | TransportKind::Mptcp => {
            let headers = goodput::IPV4_HEADER + goodput::TCP_HEADER + goodput::TCP_TIMESTAMPS;
            let mss = mtu.saturating_sub(headers).max(1);
            let segments = size.div_ceil(mss).max(1);
            let last = size - (segments - 1) * mss;
            (segments - 1) * framing.wire_bytes(mss + headers) + framing.wire_bytes(last + headers)
        }
        TransportKind::Udp => goodput::udp_wire_bytes(size, mtu, framing),
        TransportKind::Raw => goodput::raw_wire_bytes(size, mtu, framing),
        _ => size,
    }
}

/// The bytes one direction of the link can hold: its queue and what is on its way over the
/// delay (rate x (delay + jitter)).
fn link_holds(d: &DirectionConfig, mtu: u64) -> u64 {
    let queue = match d.effective_queue(mtu) {
        Some(QueueLimit::Bytes(b)) => b,
        Some(QueueLimit::Packets(p)) => p.saturating_mul(mtu + goodput::ETHERNET_HEADER),
        None => 0,
    };
    let flight = d
        .rate_bits_per_s
        .map_or(0.0, |r| r * (d.delay + d.jitter).as_secs_f64() / 8.0);
    queue.saturating_add(flight as u64)
}

/// A socket buffer's most: as reported when set by hand, the kernel's autotuning maximum for
/// TCP when left to it (or when not reported).
fn buffer(requested: u64, reported: Option<u64>, tcp: bool, autotuned_max: u64) -> u64 {
    match reported {
        Some(b) if requested > 0 || !tcp => b,
        Some(b) => b.max(autotuned_max),
        None => autotuned_max,
    }
}

fn sndbuf(o: &[EffectiveOptions], tcp: bool) -> u64 {
    o.iter()
        .map(|e| {
            buffer(
                e.sndbuf_requested,
                e.sndbuf_bytes,
                tcp,
                physics::AUTOTUNED_SNDBUF_MAX,
            )
        })
        .max()
        .unwrap_or(physics::AUTOTUNED_SNDBUF_MAX)
}

fn rcvbuf(o: &[EffectiveOptions], tcp: bool) -> u64 {
    o.iter()
        .map(|e| {
            buffer(
                e.rcvbuf_requested,
                e.rcvbuf_bytes,
                tcp,
                physics::AUTOTUNED_RCVBUF_MAX,
            )
        })
        .max()
        .unwrap_or(physics::AUTOTUNED_RCVBUF_MAX)
}

/// What one receiver may carry over from one interval into the next (see
/// [`physics::interval_within_goodput`]): its receive buffer, at least one read; QUIC's own
/// flow-control windows sit above its socket, so for it autotuning's TCP ceiling.
fn read_backlog(o: &[EffectiveOptions], transport: TransportKind) -> u64 {
    let buffer = rcvbuf(o, tcp_like(transport));
    let buffer = if transport == TransportKind::Quic {
        buffer.max(physics::AUTOTUNED_RCVBUF_MAX)
    } else {
        buffer
    };
    buffer.max(physics::READ_UNIT_BYTES)
}

/// Whether the transport's sender is clocked by acknowledgements coming back (a reliable one;
/// when its capabilities cannot be read, assumed so: the stricter verdict).
fn facts_acknowledged(transport: TransportKind) -> bool {
    transport.capabilities().map_or(true, |c| c.reliable)
}

/// The lab verdicts of a stream's data in each direction, from each direction's: the data's
/// own direction, and for an acknowledged transport the other too (its acknowledgements clock
/// the sender).
fn stream_faithfulness(
    acknowledged: bool,
    forward: &Validity,
    back: &Validity,
) -> (Validity, Validity) {
    if acknowledged {
        (join(forward, back), join(back, forward))
    } else {
        (forward.clone(), back.clone())
    }
}

/// `v` with `more` joined in (the reasons of both, in order).
fn join(v: &Validity, more: &Validity) -> Validity {
    if !more.is_invalid() {
        return v.clone();
    }
    validity::all([(String::new(), v), (String::new(), more)])
}

/// Everything the guard knows of the run besides the point itself.
#[derive(Clone, Copy)]
pub struct Facts<'a> {
    pub transport: TransportKind,
    /// The lab link the run crossed (client on host a); None without a lab.
    pub lab: Option<&'a LinkConfig>,
    /// Client and server on one host (loopback): nothing between them holds bytes but their
    /// sockets.
    pub same_host: bool,
    /// The point is a ping-pong (one-way times, 2n/RTT).
    pub pingpong: bool,
}

/// Judges the point's figures against the physics and joins any reason into their verdicts
/// and the headline's. The lab's delay line counters over the point are in
/// `result.counters.lab` (see [`crate::plan::instrumented::fill`]).
pub fn point(result: &mut PointResult, facts: Facts) {
    let lab = facts.lab;
    // (f) Was the lab the link it was asked to be, each direction?
    let rate_phase_ns = result.stream.as_ref().map(|s| {
        s.streams
            .iter()
            .flat_map(|p| [p.sender.elapsed_ns, p.receiver.elapsed_ns])
            .filter(|&ns| ns > 0)
            .min()
            .unwrap_or(0)
    });
    let round_trip_phase_ns = result.latency.as_ref().and_then(|l| l.elapsed_ns);
    let unfaithful = |forward: bool| -> Validity {
        let Some(c) = result
            .counters
            .as_ref()
            .and_then(|c| c.lab)
            .filter(|c| c.delay_line_read)
        else {
            return Validity::valid();
        };
        let d = if forward { c.forward } else { c.back };
        physics::lab_faithful(
            if forward { "a->b" } else { "b->a" },
            Lateness {
                frames: d.frames_out,
                late_frames: d.late_frames,
                late_sum_ns: d.late_sum_ns,
                late_max_ns: d.late_max_ns,
                late_window_sum_ns: d.late_window_sum_ns,
                rate_phase_ns,
                round_trip_phase_ns,
            },
        )
    };
    let (fwd_faithful, back_faithful) = (unfaithful(true), unfaithful(false));
    let mut headline = Validity::valid();

    if let Some(l) = result.latency.as_mut() {
        l.percentiles = percentiles(l);
        let mut found = Vec::new();
        if let Some(cfg) = lab {
            let (fwd, back) = (link(&cfg.forward), link(&cfg.back));
            let floor = fwd.one_way_floor_s(message_wire_bytes(
                facts.transport,
                result.request_size,
                cfg.mtu,
                cfg.framing,
            )) + back.one_way_floor_s(message_wire_bytes(
                facts.transport,
                result.response_size,
                cfg.mtu,
                cfg.framing,
            ));
            found.push(physics::round_trip_floor(
                l.rtt.min_ns as f64 / 1e9,
                floor,
                facts.pingpong,
            ));
            // 2n/RTT summed over the connections: each direction carries them all.
            let rate = [cfg.forward, cfg.back]
                .iter()
                .filter_map(|d| d.rate_bits_per_s)
                .fold(f64::INFINITY, f64::min);
            if facts.pingpong && rate.is_finite() {
                if let Some(g) = goodput_of(
                    facts.transport,
                    rate,
                    cfg.mtu,
                    result.request_size,
                    cfg.framing,
                ) {
                    found.push(physics::within_goodput(
                        "2n/RTT",
                        l.throughput_bits_per_s,
                        RateBound {
                            goodput_bits_per_s: g,
                            seconds: l.elapsed_ns.unwrap_or(0) as f64 / 1e9,
                            flows: result.socket.client.len().max(1) as u64,
                            message_bytes: result.request_size,
                        },
                    ));
                }
            }
            found.push(fwd_faithful.clone());
            found.push(back_faithful.clone());
        }
        let guard = validity::all(found.iter().map(|v| (String::new(), v)));
        l.validity = join(&l.validity, &guard);
        headline = join(&headline, &guard);
    }

    if let (Some(cfg), Some(t)) = (lab, result.path_timing.as_mut()) {
        t.validity = wire_stage_floors(
            t,
            cfg,
            facts.transport,
            result.request_size,
            result.response_size,
        );
    }

    if let Some(s) = result.stream.as_mut() {
        let tcp = tcp_like(facts.transport);
        // A reliable transport's sender is clocked by what comes back (TCP's and QUIC's
        // acknowledgements): a lab that held those back did not emulate the link either (the
        // oracle's seed 1795724142607489833, scenario 64: 3 622 of 7 617 acknowledgement
        // frames late, the latest by 27.3 ms, and the stream's figures valid).
        let acknowledged = facts_acknowledged(facts.transport);
        let (fwd_stream, back_stream) =
            stream_faithfulness(acknowledged, &fwd_faithful, &back_faithful);
        let mut receivers = Vec::new();
        for pair in s.streams.iter_mut() {
            let forward = pair.direction == "client_to_server";
            let (snd, rcv) = if forward {
                (&result.socket.client, &result.socket.server)
            } else {
                (&result.socket.server, &result.socket.client)
            };
            let dir = lab.map(|c| if forward { c.forward } else { c.back });
            let r = judge_pair(
                pair,
                facts,
                dir.as_ref(),
                lab.map_or(0, |c| c.mtu),
                sndbuf(snd, tcp),
                rcvbuf(rcv, tcp),
                if forward { &fwd_stream } else { &back_stream },
            );
            receivers.push((pair.index, r));
        }
        let several = s.streams.len() > 1;
        for (index, r) in &receivers {
            let label = if several {
                format!("stream {index} receiver")
            } else {
                "receiver".to_owned()
            };
            headline = join(&headline, &labelled(&label, r));
        }
        // The sums of each direction: their verdicts from the streams', then (d).
        let directions: Vec<String> = s.totals.iter().map(|t| t.direction.clone()).collect();
        for (k, direction) in directions.iter().enumerate() {
            let mine: Vec<&StreamPair> = s
                .streams
                .iter()
                .filter(|p| &p.direction == direction)
                .collect();
            s.totals[k].judge_from(&mine);
            let Some(cfg) = lab else { continue };
            let forward = direction == "client_to_server";
            let d = if forward { cfg.forward } else { cfg.back };
            let Some(rate) = d.rate_bits_per_s else {
                continue;
            };
            let Some(g) = goodput_of(facts.transport, rate, cfg.mtu, result.key.size, cfg.framing)
            else {
                continue;
            };
            let t = &s.totals[k];
            let bound = RateBound {
                goodput_bits_per_s: g,
                seconds: t.receiver_elapsed_ns as f64 / 1e9,
                flows: t.streams as u64,
                message_bytes: result.key.size,
            };
            let mut found = Vec::new();
            let mut compete = None;
            if t.streams > 1 {
                // On one clock, each stream's rate over the direction's window (the total's
                // parts); without stamps, each over its own phase.
                let rx: Vec<&crate::pattern::stream::StreamStats> =
                    mine.iter().map(|p| &p.receiver.stats).collect();
                let (rates, seconds) =
                    match crate::model::span::over_one_clock(&rx, crate::model::span::BYTES) {
                        Some(w) => (w.per_stream_bits_per_s(), w.span.seconds()),
                        None => (
                            mine.iter().map(|p| p.receiver.bits_per_s).collect(),
                            bound.seconds,
                        ),
                    };
                let flows: Vec<(String, f64)> = mine
                    .iter()
                    .zip(rates)
                    .map(|(p, r)| (format!("stream {}", p.index), r))
                    .collect();
                found.push(physics::flows_within_goodput(
                    &flows,
                    RateBound { seconds, ..bound },
                ));
            }
            // --compete: the measured stream is the first flow; the others share the path
            // client -> server.
            if let (true, Some(f)) = (forward, result.fairness.as_ref()) {
                if f.flows.len() > 1 {
                    // The flows' own framings: TCP's, and full UDP datagrams for QUIC's.
                    let mut flow_g = g.max(goodput::tcp(rate, cfg.mtu, cfg.framing).tcp_bits_per_s);
                    if f.flows.iter().any(|x| x.flow.starts_with("quic")) {
                        flow_g = flow_g.max(
                            goodput_of(TransportKind::Quic, rate, cfg.mtu, 0, cfg.framing)
                                .unwrap_or(0.0),
                        );
                    }
                    let shortest = f
                        .flows
                        .iter()
                        .filter(|x| x.bits_per_s > 0.0)
                        .map(|x| x.bytes as f64 * 8.0 / x.bits_per_s)
                        .fold(bound.seconds, f64::min);
                    let flows: Vec<(String, f64)> = f
                        .flows
                        .iter()
                        .enumerate()
                        .map(|(i, x)| {
                            let label = if i == 0 {
                                "measured".to_owned()
                            } else {
                                x.flow.clone()
                            };
                            (label, x.bits_per_s)
                        })
                        .collect();
                    let sum = physics::flows_within_goodput(
                        &flows,
                        RateBound {
                            goodput_bits_per_s: flow_g,
                            seconds: shortest,
                            ..bound
                        },
                    );
                    found.push(sum);
                    // Interval by interval, each flow may carry over what its receive buffer
                    // held: the measured streams' and the competing flows', left to the
                    // kernel.
                    let backlog = t.streams as u64
                        * read_backlog(&result.socket.server, facts.transport)
                        + (f.flows.len() as u64 - 1)
                            * physics::AUTOTUNED_RCVBUF_MAX.max(physics::READ_UNIT_BYTES);
                    compete = Some((flow_g, backlog));
                }
            }
            // --load: its receiver is the server, so it shares client -> server.
            if let (true, Some(load)) = (forward, result.load.as_ref()) {
                let load_g =
                    if load.transport.parse::<TransportKind>().ok() == Some(TransportKind::Tcp) {
                        goodput::tcp(rate, cfg.mtu, cfg.framing).tcp_bits_per_s
                    } else {
                        goodput::udp(rate, cfg.mtu, cfg.mtu.saturating_sub(28), cfg.framing)
                    };
                found.push(physics::load_within_goodput(
                    t.receiver_bits_per_s,
                    load.achieved_bits_per_s,
                    load.elapsed_ns as f64 / 1e9,
                    RateBound {
                        goodput_bits_per_s: g.max(load_g),
                        ..bound
                    },
                ));
            }
            // The sum interval by interval: each stream may carry over its receive buffer.
            let backlog = t.streams as u64
                * read_backlog(
                    if forward {
                        &result.socket.server
                    } else {
                        &result.socket.client
                    },
                    facts.transport,
                );
            for iv in s.totals[k].receiver_intervals.iter_mut() {
                let v = judge_interval(
                    "the streams",
                    (iv.start_ns, iv.end_ns),
                    iv.bits_per_s,
                    g,
                    backlog,
                );
                iv.validity = join(&iv.validity, &v);
            }
            let sum = validity::all(found.iter().map(|v| (String::new(), v)));
            if let (Some((flow_g, backlog)), Some(f)) = (compete, result.fairness.as_mut()) {
                judge_fairness(f, &sum, flow_g, backlog);
            }
            if sum.is_invalid() {
                let t = &mut s.totals[k];
                let v = join(&t.receiver_validity(), &sum);
                (t.receiver_valid, t.receiver_invalid_reason) = (v.valid, v.invalid_reason);
                headline = join(&headline, &labelled(&format!("{direction} sum"), &sum));
            }
        }
    }

    if headline.is_invalid() {
        let h = &mut result.headline;
        let guard = if result.runs > 1 {
            Validity::invalid(format!(
                "run {} of {}: {}",
                result.runs,
                result.runs,
                headline.reason()
            ))
        } else {
            headline
        };
        if !h.validity.reason().contains(guard.reason()) {
            h.validity = join(&h.validity, &guard);
        }
    }
}

/// `--compete`: the flows' rates take the verdict of their sum over the common span (`sum`,
/// the direction's), and each interval row on one clock is held to the goodput with what the
/// receivers may have carried over into it (`backlog` bytes).
/// Path timing's wire stages against the lab link (bound (b)): `wire_out` and `wire_back`
/// on one clock, and `wire out+back` (each end against its own clock) on any. A stage
/// that stands for a neighbour too (a device without stamps) still holds the wire, so the
/// bound applies to it as well. A message of several frames is stamped at its last frame,
/// whose driver stamp may come before the others are through the link's rate: its bound is
/// then the delay and the smallest frame's time.
fn wire_stage_floors(
    t: &PathTiming,
    cfg: &LinkConfig,
    transport: TransportKind,
    request: u64,
    response: u64,
) -> Validity {
    let floor = |d: &DirectionConfig, size: u64| {
        let whole = message_wire_bytes(transport, size, cfg.mtu, cfg.framing);
        let one_frame = whole <= cfg.framing.wire_bytes(cfg.mtu);
        let bytes = if one_frame {
            whole
        } else {
            message_wire_bytes(transport, 1, cfg.mtu, cfg.framing)
        };
        link(d).one_way_floor_s(bytes)
    };
    let (out, back) = (floor(&cfg.forward, request), floor(&cfg.back, response));
    let min_s = |s: &Stage| s.min_ns as f64 / 1e9;
    let mut found = Vec::new();
    if t.clock == PathClock::Shared {
        for s in &t.stages {
            match s.name {
                StageName::WireOut => found.push(physics::stage_floor("wire out", min_s(s), out)),
                StageName::WireBack => {
                    found.push(physics::stage_floor("wire back", min_s(s), back))
                }
                _ => {}
            }
        }
    }
    if let Some(w) = &t.wire_both {
        found.push(physics::stage_floor("wire out+back", min_s(w), out + back));
    }
    if found.is_empty() {
        return Validity::default();
    }
    validity::all(found.iter().map(|v| (String::new(), v)))
}

fn judge_fairness(f: &mut FairnessResult, sum: &Validity, goodput: f64, backlog: u64) {
    f.validity = join(&f.validity, sum);
    if f.common_span.is_none() {
        return;
    }
    for iv in f.intervals.iter_mut() {
        let sum = iv.bits_per_s.iter().sum();
        let v = judge_interval("the flows", (iv.start_ns, iv.end_ns), sum, goodput, backlog);
        iv.validity = join(&iv.validity, &v);
    }
}

/// (d) One interval row of a sum (its bounds in ns, its rate) against the goodput and the
/// receivers' `backlog`; an empty interval is not judged.
fn judge_interval(
    what: &str,
    (start, end): (u64, u64),
    sum: f64,
    goodput: f64,
    backlog: u64,
) -> Validity {
    let seconds = end.saturating_sub(start) as f64 / 1e9;
    if seconds <= 0.0 {
        return Validity::valid();
    }
    physics::interval_within_goodput(what, sum, seconds, goodput, backlog)
}

fn labelled(label: &str, v: &Validity) -> Validity {
    validity::all([(label.to_owned(), v)])
}

/// Judges one stream's two ends: (c) always, and over a lab (a), (g) and (f) for its
/// direction. Returns what it found against the receiver (the headline's figure).
fn judge_pair(
    pair: &mut StreamPair,
    facts: Facts,
    dir: Option<&DirectionConfig>,
    mtu: u64,
    sndbuf: u64,
    rcvbuf: u64,
    faithful: &Validity,
) -> Validity {
    let (s, r) = (&pair.sender.stats, &pair.receiver.stats);
    let mut on_sender = Vec::new();
    let mut on_receiver = Vec::new();
    // (c) What may be held between the ends: both sockets, and for a datagram transport what
    // the path holds (the lab link's queue and flight; nothing on one host; unknown on a real
    // path, where its ends are then not compared). A byte stream's bytes on the path are
    // unacknowledged, so still in the sender's buffer: the path adds nothing to it.
    let path = match (dir, facts.same_host) {
        _ if tcp_like(facts.transport) => Some(0),
        (Some(d), _) => Some(link_holds(d, mtu)),
        (None, true) => Some(0),
        (None, false) => None,
    };
    if let Some(path) = path {
        let ends = physics::ends_agree(
            End {
                bits_per_s: s.bits_per_s,
                bytes_total: s.bytes_total,
                seconds: s.elapsed_ns as f64 / 1e9,
            },
            End {
                bits_per_s: r.bits_per_s,
                bytes_total: r.bytes_total,
                seconds: r.elapsed_ns as f64 / 1e9,
            },
            sndbuf.saturating_add(rcvbuf).saturating_add(path),
        );
        on_sender.push(ends.clone());
        on_receiver.push(ends);
    }
    if let Some(d) = dir {
        if let Some(rate) = d.rate_bits_per_s {
            let size = s.bytes_timed.checked_div(s.messages_timed).unwrap_or(0);
            if let Some(g) = goodput_of(
                facts.transport,
                rate,
                mtu,
                size.max(1),
                facts.lab.map_or(Framing::default(), |c| c.framing),
            ) {
                on_receiver.push(physics::within_goodput(
                    "receiver",
                    r.bits_per_s,
                    RateBound {
                        goodput_bits_per_s: g,
                        seconds: r.elapsed_ns as f64 / 1e9,
                        flows: 1,
                        message_bytes: size,
                    },
                ));
            }
            // (g) A note, not a verdict: the figure is true of what it counts.
            let line =
                physics::sender_within_line(s.bits_per_s, rate, s.elapsed_ns as f64 / 1e9, sndbuf);
            if line.is_invalid() {
                pair.sender.note = line.invalid_reason;
            }
        }
        on_receiver.push(faithful.clone());
    }
    let sender = validity::all(on_sender.iter().map(|v| (String::new(), v)));
    let receiver = validity::all(on_receiver.iter().map(|v| (String::new(), v)));
    pair.sender.validity = join(&pair.sender.validity, &sender);
    pair.receiver.validity = join(&pair.receiver.validity, &receiver);
    receiver
}

/// (h) Each printed percentile of the point's round trips with its sample floor.
pub(crate) fn percentiles(l: &LatencyResult) -> Vec<PercentileNote> {
    PRINTED_PERCENTILES
        .iter()
        .map(|&(name, p)| PercentileNote {
            name: name.to_owned(),
            samples_needed: physics::percentile_floor(p),
            beyond: physics::beyond(p, l.rtt.samples),
            validity: physics::percentile(name, p, l.rtt.samples),
        })
        .collect()
}

/// (e) Judges a sweep's Hockney fit against its own points and the link; a fit that breaks
/// either is no longer valid, with the reason. `r_max` comes from valid points only, which
/// the point guard already held to the link (a point's 2n/RTT above the goodput is an
/// invalid point, left out of the metrics).
pub fn sweep(metrics: &mut SweepMetrics, facts: Facts) {
    if metrics.fit_valid != Some(true) {
        return;
    }
    let Some(fit) = metrics.fit else { return };
    let goodput = facts.lab.and_then(|cfg| {
        let rate = [cfg.forward, cfg.back]
            .iter()
            .filter_map(|d| d.rate_bits_per_s)
            .fold(f64::INFINITY, f64::min);
        let largest = metrics.largest_size.unwrap_or(metrics.r_max_size);
        rate.is_finite()
            .then(|| goodput_of(facts.transport, rate, cfg.mtu, largest.max(1), cfg.framing))
            .flatten()
    });
    let v = physics::hockney(
        fit.r_inf_bits_per_s,
        fit.r_squared,
        fit.points,
        metrics.r_max_bits_per_s,
        goodput,
    );
    if v.is_invalid() {
        metrics.fit_valid = Some(false);
        metrics.fit_invalid_reason = v.invalid_reason;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wire_bytes_and_goodput_follow_the_framing() {
        // One TCP segment of 1 B: 67 bytes; 1449 B need two segments at MTU 1500.
        const F: Framing = Framing::Frame;
        assert_eq!(message_wire_bytes(TransportKind::Tcp, 1, 1500, F), 67);
        assert_eq!(message_wire_bytes(TransportKind::Tcp, 1448, 1500, F), 1514);
        assert_eq!(
            message_wire_bytes(TransportKind::Tcp, 1449, 1500, F),
            1449 + 132
        );
        assert_eq!(message_wire_bytes(TransportKind::Quic, 100, 1500, F), 100);
        let g = goodput_of(TransportKind::Tcp, 100e6, 1500, 1, F).unwrap();
        assert!((g - 100e6 * 1448.0 / 1514.0).abs() < 1.0);
        assert!(goodput_of(TransportKind::Unix, 100e6, 1500, 1, F).is_none());
        // grpc rides on TCP: HTTP/2 and protobuf framing only take from TCP's goodput, so a
        // grpc figure above it is flagged like a TCP one.
        assert_eq!(goodput_of(TransportKind::Grpc, 100e6, 1500, 1, F), Some(g));
        // In AAL5 cells: a 1-byte segment is a 53-byte packet, 69 bytes, two cells; 1449
        // bytes are a full segment (32 cells) and a 53-byte one (2).
        let atm = Framing::AtmAal5;
        assert_eq!(message_wire_bytes(TransportKind::Tcp, 1, 1500, atm), 106);
        assert_eq!(
            message_wire_bytes(TransportKind::Tcp, 1449, 1500, atm),
            34 * 53
        );
        let g = goodput_of(TransportKind::Tcp, 149.76e6, 1500, 1, atm).unwrap();
        assert!((g - 149.76e6 * 1448.0 / 1696.0).abs() < 1.0);
        // A TCP buffer left to autotuning may grow to the kernel's maximum.
        assert_eq!(buffer(0, Some(16_384), true, 4 << 20), 4 << 20);
        assert_eq!(buffer(8192, Some(16_384), true, 4 << 20), 16_384);
        assert_eq!(buffer(0, Some(212_992), false, 4 << 20), 212_992);
    }

    /// The oracle's seed 1795724142607489833, scenario 64: a TCP stream client -> server whose
    /// acknowledgements the lab released late (3 622 of 7 617 frames b->a, the latest by
    /// 27.3 ms) was printed valid; a UDP stream's data does not depend on the way back.
    /// A wire stage on one clock faster than the lab link's delay and wire time is flagged
    /// with the stage named; one within them is valid; across two clocks only the wires'
    /// sum (each end against its own clock) is held to the bound.
    #[test]
    fn path_timings_wire_stages_are_held_to_the_links_delay_and_wire_time() {
        use crate::lab::config::{DirectionConfig, Mechanism};
        use crate::model::path::Stage;
        let d = DirectionConfig {
            rate_bits_per_s: Some(1e9),
            delay: std::time::Duration::from_millis(1),
            ..DirectionConfig::default()
        };
        let cfg = LinkConfig {
            forward: d,
            back: d,
            mtu: 1500,
            mechanism: Mechanism::Auto,
            framing: Framing::Frame,
        };
        let stage = |name, min_ns| Stage {
            name,
            merged: Vec::new(),
            samples: 1000,
            min_ns,
            p50_ns: min_ns + 100,
            p99_ns: min_ns + 1000,
            mean_ns: (min_ns + 200) as f64,
        };
        // 1 ms + 1090 B (Ethernet frame with preamble and gap) at 1 Gbit/s = 1008.72 us each
        // way for a 1 KiB TCP message.
        let timing = |out: u64, back: u64, clock: PathClock| PathTiming {
            messages: 1000,
            incomplete: 0,
            clock,
            stages: vec![
                stage(StageName::ClientSendToQueue, 2_000),
                stage(StageName::WireOut, out),
                stage(StageName::WireBack, back),
            ],
            rtt_min_ns: out + back + 2_000,
            rtt_p50_ns: out + back + 3_000,
            rtt_p99_ns: out + back + 9_000,
            rtt_mean_ns: (out + back + 3_000) as f64,
            residual_mean_ns: 100.0,
            residual_max_abs_ns: 900,
            client_driver_to_ack: None,
            cost: None,
            notes: Vec::new(),
            wire_both: Some(stage(StageName::WireBoth, out + back)),
            validity: Validity::default(),
        };
        let judge = |t: &PathTiming| wire_stage_floors(t, &cfg, TransportKind::Tcp, 1024, 1024);
        let ok = judge(&timing(1_009_000, 1_010_000, PathClock::Shared));
        assert_eq!(ok.valid, Some(true), "{ok:?}");
        let fast = judge(&timing(3_000, 1_010_000, PathClock::Shared));
        assert!(fast.is_invalid());
        assert!(
            fast.reason().contains("fastest wire out 3.00 us"),
            "{}",
            fast.reason()
        );
        assert!(fast.reason().contains("1008.72 us"), "{}", fast.reason());
        assert!(!fast.reason().contains("wire back"), "{}", fast.reason());
        // Two clocks: a one-way stage rests on the offset estimate and is not judged; the
        // wires' sum is.
        let separate = PathClock::Separate {
            offset_ns: 0,
            error_ns: 5_000,
        };
        let two = judge(&timing(3_000, 1_010_000, separate.clone()));
        assert!(two.is_invalid());
        assert!(two.reason().contains("wire out+back"), "{}", two.reason());
        assert_eq!(judge(&timing(3_000, 2_020_000, separate)).valid, Some(true));
    }

    #[test]
    fn an_acknowledged_stream_needs_the_way_back_faithful_too() {
        let late = Validity::invalid("lab unfaithful: 3622 of 7617 frames b->a");
        let ok = Validity::valid();
        let (fwd, back) = stream_faithfulness(true, &ok, &late);
        assert_eq!(fwd.reason(), late.reason());
        assert_eq!(back.reason(), late.reason());
        let (fwd, back) = stream_faithfulness(false, &ok, &late);
        assert!(!fwd.is_invalid());
        assert!(back.is_invalid());
        assert!(facts_acknowledged(TransportKind::Tcp));
        assert!(facts_acknowledged(TransportKind::Quic));
        assert!(!facts_acknowledged(TransportKind::Udp));
        assert!(!facts_acknowledged(TransportKind::Raw));
    }

    /// --compete: a sum over the common span that breaks the link makes the fairness figures
    /// invalid with it (the oracle's seed 1795791850595441943, scenario 20: measured + quic at
    /// 406.9 Mbit/s over a 397.2 Mbit/s goodput, flagged on the headline, printed valid in
    /// `fairness`); an interval row is held to the goodput with the receivers' backlog.
    #[test]
    fn competing_flows_take_their_sums_verdict_and_each_interval_its_own() {
        use crate::model::fairness::{CommonSpan, FairnessInterval, FlowShare};
        let flow = |bits: f64| FlowShare {
            flow: "tcp".into(),
            bytes: 0,
            bytes_all: 0,
            bits_per_s: bits,
            share: None,
        };
        let interval = |start_ns: u64, bits: [f64; 2]| FairnessInterval {
            start_ns,
            end_ns: start_ns + 100_000_000,
            bits_per_s: bits.to_vec(),
            shares: vec![],
            jain: None,
            validity: Validity::valid(),
        };
        let mut f = FairnessResult {
            flows: vec![flow(200e6), flow(206.9e6)],
            jain: None,
            intervals: vec![
                interval(0, [25e6, 30e6]),
                interval(100_000_000, [40e6, 40e6]),
            ],
            common_span: Some(CommonSpan {
                start_ns: 0,
                end_ns: 200_000_000,
            }),
            validity: Validity::valid(),
        };
        let sum = Validity::invalid("the flows add up to 406.90 Mbit/s");
        // 50 Mbit/s of goodput, a read of 128 KiB each: at most 71 Mbit/s in 100 ms.
        judge_fairness(&mut f, &sum, 50e6, 2 * physics::READ_UNIT_BYTES);
        assert!(f.validity.is_invalid());
        assert!(f.validity.reason().contains("406.90"));
        assert!(!f.intervals[0].validity.is_invalid());
        assert!(f.intervals[1].validity.is_invalid());
        assert!(f.intervals[1]
            .validity
            .reason()
            .starts_with("the flows add up to 80.00 Mbit/s in this 100.0 ms interval"));
        // Without a common span the intervals keep the verdict they were made with.
        f.common_span = None;
        f.intervals[1].validity = Validity::valid();
        judge_fairness(&mut f, &Validity::valid(), 50e6, 0);
        assert!(!f.intervals[1].validity.is_invalid());
    }
}
