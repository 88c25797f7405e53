//! Turns what both sides measured in each run of a point into the point's result.

use crate::control::client::PointOutcome;
use crate::control::protocol::TestSpec;
use crate::pattern::{CpuTime, PatternKind, Role};
use crate::plan::PlannedPoint;
use crate::results::distribution::log_bins;
use crate::stats::{LatencyRecorder, MeanCi};

use super::model::{
    CpuResult, DirectionTotal, Headline, LatencyResult, PointResult, SocketReport, StreamPair,
    StreamResult,
};

/// The headline figure of one run: what `--repeat` and `--until-ci` aggregate.
pub fn headline_value(test: &TestSpec, o: &PointOutcome) -> Option<f64> {
    match test.pattern {
        PatternKind::Pingpong => {
            let mut rec = LatencyRecorder::new();
            for x in &o.exchanges {
                rec.merge(&x.rtt);
            }
            rec.summary(0.95).map(|s| s.mean_ns / 2.0)
        }
        PatternKind::Rr => Some(
            o.exchanges
                .iter()
                .map(|x| per_s(x.transactions, x.elapsed_s))
                .sum(),
        ),
        PatternKind::Crr => o.crr.as_ref().map(|c| per_s(c.transactions, c.elapsed_s)),
        PatternKind::Stream => Some(stream_pairs(o).iter().map(|p| p.receiver.bits_per_s).sum()),
    }
}

pub fn headline_name(pattern: PatternKind) -> (&'static str, &'static str) {
    match pattern {
        PatternKind::Pingpong => ("one-way latency (RTT/2), mean", "ns"),
        PatternKind::Rr | PatternKind::Crr => ("transactions per second", "1/s"),
        PatternKind::Stream => ("receiver throughput, all streams", "bit/s"),
    }
}

fn per_s(n: u64, secs: f64) -> f64 {
    if secs > 0.0 {
        n as f64 / secs
    } else {
        0.0
    }
}

/// Pairs each connection's client and server statistics into sender and receiver.
fn stream_pairs(o: &PointOutcome) -> Vec<StreamPair> {
    let mut pairs = Vec::new();
    for (k, (index, client)) in o.client_streams.iter().enumerate() {
        let Some(server) = o.server.streams.get(k) else {
            continue;
        };
        let client_sends = client.role == Some(Role::Sender);
        let (sender, receiver) = if client_sends {
            (client.clone(), server.clone())
        } else {
            (server.clone(), client.clone())
        };
        pairs.push(StreamPair {
            index: *index,
            direction: if client_sends {
                "client_to_server"
            } else {
                "server_to_client"
            }
            .into(),
            sender,
            receiver,
        });
    }
    pairs
}

fn totals(pairs: &[StreamPair]) -> Vec<DirectionTotal> {
    let mut out = Vec::new();
    for dir in ["client_to_server", "server_to_client"] {
        let ps: Vec<&StreamPair> = pairs.iter().filter(|p| p.direction == dir).collect();
        if ps.is_empty() {
            continue;
        }
        let loss = ps.iter().try_fold(
            crate::pattern::stream::LossStats::default(),
            |mut acc, p| {
                let l = p.receiver.loss?;
                acc.sent += l.sent;
                acc.received += l.received;
                acc.lost += l.lost;
                acc.duplicated += l.duplicated;
                acc.reordered += l.reordered;
                acc.jitter_s = acc.jitter_s.max(l.jitter_s);
                Some(acc)
            },
        );
        let loss = loss.map(|mut l| {
            l.loss_ratio = if l.sent > 0 {
                l.lost as f64 / l.sent as f64
            } else {
                0.0
            };
            l
        });
        let frames = ps
            .iter()
            .try_fold(crate::transport::LinkCounters::default(), |acc, p| {
                Some(acc.plus(p.receiver.frames.as_ref()?))
            });
        let retransmits = ps
            .iter()
            .map(|p| p.sender.tcp_info.map(|t| u64::from(t.total_retrans)))
            .sum::<Option<u64>>();
        out.push(DirectionTotal {
            direction: dir.into(),
            streams: ps.len() as u32,
            sender_bits_per_s: ps.iter().map(|p| p.sender.bits_per_s).sum(),
            acked_bits_per_s: ps.iter().map(|p| p.sender.acked_bits_per_s).sum(),
            receiver_bits_per_s: ps.iter().map(|p| p.receiver.bits_per_s).sum(),
            bytes_sent: ps.iter().map(|p| p.sender.bytes_total).sum(),
            bytes_received: ps.iter().map(|p| p.receiver.bytes_total).sum(),
            send_failures: ps.iter().map(|p| p.sender.send_failures).sum(),
            loss,
            frames,
            retransmits,
            theoretical_goodput_bits_per_s: None,
        });
    }
    out
}

fn us_per(cpu: CpuTime, units: f64) -> Option<f64> {
    (units > 0.0).then(|| cpu.total_s() * 1e6 / units)
}

/// Summarises every run of one point; None when there was no run.
pub fn summarize(
    index: usize,
    test: &TestSpec,
    planned: &PlannedPoint,
    runs: &[PointOutcome],
    values: Vec<f64>,
    confidence: f64,
    target: Option<f64>,
) -> Option<PointResult> {
    let last = runs.last()?;
    let (name, unit) = headline_name(test.pattern);
    let over_runs = MeanCi::from_samples(&values, confidence);
    let target_met = target.map(|t| {
        over_runs
            .as_ref()
            .and_then(|m| m.relative_half_width())
            .is_some_and(|w| w <= t)
    });
    let spec = &planned.spec;

    let latency = match test.pattern {
        PatternKind::Pingpong | PatternKind::Rr => {
            let mut rec = LatencyRecorder::new();
            let (mut transactions, mut lost, mut stale, mut tps, mut pingpong_bps) =
                (0u64, 0u64, 0u64, 0.0, 0.0);
            for o in runs {
                for x in &o.exchanges {
                    rec.merge(&x.rtt);
                    transactions += x.transactions;
                    lost += x.lost;
                    stale += x.stale;
                }
            }
            for x in &last.exchanges {
                tps += per_s(x.transactions, x.elapsed_s);
                if let Some(s) = x.rtt.summary(confidence) {
                    pingpong_bps += 2.0 * spec.request_size as f64 * 8.0 / (s.mean_ns / 1e9);
                }
            }
            rec.summary(confidence).map(|rtt| {
                let pingpong = test.pattern == PatternKind::Pingpong;
                LatencyResult {
                    one_way_mean_ns: pingpong.then_some(rtt.mean_ns / 2.0),
                    one_way_ci_ns: if pingpong {
                        rtt.ci_half_width_ns.map(|h| h / 2.0)
                    } else {
                        None
                    },
                    throughput_bits_per_s: if pingpong {
                        pingpong_bps
                    } else {
                        tps * (spec.request_size + spec.response_size) as f64 * 8.0
                    },
                    transactions,
                    transactions_per_s: tps,
                    lost,
                    stale,
                    first_ns: last.exchanges.first().and_then(|x| x.first_ns),
                    setup: None,
                    distribution: log_bins(rec.histogram()),
                    rtt,
                }
            })
        }
        PatternKind::Crr => {
            let mut rec = LatencyRecorder::new();
            let mut setup = LatencyRecorder::new();
            let mut transactions = 0;
            for o in runs {
                if let Some(c) = &o.crr {
                    rec.merge(&c.transaction);
                    setup.merge(&c.setup);
                    transactions += c.transactions;
                }
            }
            let tps = last
                .crr
                .as_ref()
                .map_or(0.0, |c| per_s(c.transactions, c.elapsed_s));
            rec.summary(confidence).map(|rtt| LatencyResult {
                rtt,
                one_way_mean_ns: None,
                one_way_ci_ns: None,
                throughput_bits_per_s: tps * (spec.request_size + spec.response_size) as f64 * 8.0,
                transactions,
                transactions_per_s: tps,
                lost: 0,
                stale: 0,
                first_ns: last.crr.as_ref().and_then(|c| c.first_ns),
                setup: setup.summary(confidence),
                distribution: log_bins(rec.histogram()),
            })
        }
        PatternKind::Stream => None,
    };

    let stream = (test.pattern == PatternKind::Stream).then(|| {
        let pairs = stream_pairs(last);
        StreamResult {
            totals: totals(&pairs),
            streams: pairs,
        }
    });

    let (client_units_kib, server_units_kib, txns) = match (&stream, &latency) {
        (Some(_), _) => {
            let c: u64 = last.client_streams.iter().map(|(_, s)| s.bytes_total).sum();
            let s: u64 = last.server.streams.iter().map(|s| s.bytes_total).sum();
            (c as f64 / 1024.0, s as f64 / 1024.0, 0.0)
        }
        (None, Some(_)) => {
            let bytes: u64 = last
                .server
                .responders
                .iter()
                .map(|r| r.bytes_received + r.bytes_sent)
                .sum();
            let t: u64 = last.server.responders.iter().map(|r| r.requests).sum();
            (bytes as f64 / 1024.0, bytes as f64 / 1024.0, t as f64)
        }
        _ => (0.0, 0.0, 0.0),
    };
    let cpu = CpuResult {
        client: last.client_cpu,
        server: last.server.cpu,
        client_us_per_kib: us_per(last.client_cpu, client_units_kib),
        server_us_per_kib: us_per(last.server.cpu, server_units_kib),
        client_us_per_transaction: us_per(last.client_cpu, txns),
        server_us_per_transaction: us_per(last.server.cpu, txns),
    };

    Some(PointResult {
        index,
        key: planned.key,
        request_size: spec.request_size,
        response_size: spec.response_size,
        read_size: spec.read_size,
        runs: runs.len() as u32,
        headline: Headline {
            name: name.into(),
            unit: unit.into(),
            values,
            over_runs,
            target_met,
        },
        latency,
        stream,
        cpu,
        socket: SocketReport {
            client: last.client_socket.clone(),
            server: last.server_socket.clone(),
        },
    })
}
