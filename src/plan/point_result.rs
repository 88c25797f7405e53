//! Turns what both sides measured in each run of a point into the point's result.

use crate::control::client::PointOutcome;
use crate::control::protocol::TestSpec;
use crate::model::distribution::log_bins;
use crate::pattern::stream::StreamStats;
use crate::pattern::{CpuTime, PatternKind, Role};
use crate::plan::PlannedPoint;
use crate::stats::validity::{self, Validity};
use crate::stats::{LatencyRecorder, MeanCi};

use crate::model::span;
use crate::model::{
    CpuResult, DirectionTotal, Headline, LatencyResult, OpenLoopResult, PointResult, SocketReport,
    StreamPair, StreamResult, ThinkResult,
};
use crate::pattern::exchange::ExchangeStats;
use crate::pattern::openloop::OpenLoopStats;

/// The headline figure of one run, what `--repeat` and `--until-ci` aggregate, with the
/// verdict on the figures it comes from.
pub fn headline_value(test: &TestSpec, o: &PointOutcome) -> Option<(f64, Validity)> {
    match test.pattern {
        PatternKind::Pingpong => {
            let mut rec = LatencyRecorder::new();
            for x in &o.exchanges {
                rec.merge(&x.rtt);
            }
            rec.summary(0.95)
                .map(|s| (s.mean_ns / 2.0, validity::latency(s.samples)))
        }
        PatternKind::Rr => {
            let samples = o.exchanges.iter().map(|x| x.rtt.count()).sum();
            Some((
                o.exchanges
                    .iter()
                    .map(|x| per_s(x.transactions, x.elapsed_ns))
                    .sum(),
                validity::latency(samples),
            ))
        }
        PatternKind::Crr => o.crr.as_ref().map(|c| {
            (
                per_s(c.transactions, c.elapsed_ns),
                validity::latency(c.transaction.count()),
            )
        }),
        PatternKind::Stream => {
            let pairs = stream_pairs(o, test.transport);
            // Each direction's receivers over one window (report::span), summed over the
            // directions.
            let result = StreamResult {
                totals: totals(&pairs),
                streams: pairs,
            };
            Some((
                result.totals.iter().map(|t| t.receiver_bits_per_s).sum(),
                result.receivers_validity(),
            ))
        }
    }
}

/// Think time of one run's connections: the waits of the one with the shortest timed phase
/// (the one `elapsed_ns` reports), and the rate of all without their waits.
fn think_result(asked_ns: u64, exchanges: &[ExchangeStats]) -> Option<ThinkResult> {
    let shortest = exchanges.iter().min_by_key(|x| x.elapsed_ns)?;
    Some(ThinkResult {
        asked_ns,
        waits: shortest.thinks,
        waited_ns: shortest.think_ns,
        corrected_elapsed_ns: shortest.elapsed_ns.saturating_sub(shortest.think_ns),
        corrected_transactions_per_s: exchanges
            .iter()
            .map(|x| per_s(x.transactions, x.elapsed_ns.saturating_sub(x.think_ns)))
            .sum(),
    })
}

/// The achieved rate below this share of the scheduled one flags an open-loop point: under
/// capacity the two differ only by the last reply's round trip over the schedule's span.
const KEPT_UP_SHARE: f64 = 0.97;

/// The open-loop figures of one run's connections, summed; None for a closed loop.
pub(crate) fn open_loop_result(
    exchanges: &[ExchangeStats],
    confidence: f64,
) -> Option<OpenLoopResult> {
    let ols: Vec<(&ExchangeStats, &OpenLoopStats)> = exchanges
        .iter()
        .filter_map(|x| x.open_loop.as_ref().map(|o| (x, o)))
        .collect();
    let arrivals = ols.first()?.1.plan.arrivals;
    let mut service = LatencyRecorder::new();
    for (_, o) in &ols {
        service.merge(&o.service);
    }
    let sum = |f: &dyn Fn(&OpenLoopStats) -> u64| ols.iter().map(|(_, o)| f(o)).sum::<u64>();
    let (scheduled, sent, received) = (
        sum(&|o| o.scheduled),
        sum(&|o| o.sent),
        sum(&|o| o.received),
    );
    let (outstanding, unsent) = (sum(&|o| o.outstanding()), sum(&|o| o.unsent()));
    let offered: f64 = ols.iter().map(|(_, o)| o.plan.rate_per_s).sum();
    // n requests span n - 1 gaps.
    let scheduled_per_s: f64 = ols
        .iter()
        .map(|(_, o)| match o.scheduled {
            n if n > 1 && o.span_ns > 0 => per_s(n - 1, o.span_ns),
            _ => o.plan.rate_per_s,
        })
        .sum();
    let achieved: f64 = ols
        .iter()
        .map(|(x, _)| per_s(x.transactions, x.elapsed_ns))
        .sum();
    let overload = if received < scheduled {
        Some(format!(
            "{} of {scheduled} requests scheduled were not answered within the point ({outstanding} outstanding, {unsent} never sent): the offered {offered:.0}/s exceeded what the client, path and server carried",
            scheduled - received
        ))
    } else if achieved < KEPT_UP_SHARE * scheduled_per_s {
        // How long after the schedule's last request its last reply came, on the connection
        // that lagged most.
        let lag_ns = ols
            .iter()
            .map(|(x, o)| x.elapsed_ns.saturating_sub(o.span_ns))
            .max()
            .unwrap_or(0);
        Some(format!(
            "achieved {achieved:.0}/s is below the {scheduled_per_s:.0}/s scheduled: the last reply came {:.1} ms after the last request was due, the replies fell behind the schedule and the latency holds the queue that built",
            lag_ns as f64 / 1e6
        ))
    } else {
        None
    };
    Some(OpenLoopResult {
        arrivals,
        offered_per_s: offered,
        scheduled_per_s,
        achieved_per_s: achieved,
        scheduled,
        sent,
        received,
        outstanding,
        unsent,
        bound_waits: sum(&|o| o.bound_waits),
        service: service.summary(confidence),
        overload,
    })
}

/// The shortest of some timed phases; None when there are none.
fn shortest(ns: impl Iterator<Item = u64>) -> Option<u64> {
    ns.min()
}

/// The verdict on a point's headline from those on each run's value: invalid when any run's
/// is, naming the first such run (and how many more there are).
pub fn runs_validity(runs: &[Validity]) -> Validity {
    let bad: Vec<(usize, &Validity)> = runs
        .iter()
        .enumerate()
        .filter(|(_, v)| v.is_invalid())
        .collect();
    match bad.first() {
        None => validity::all(runs.iter().map(|v| (String::new(), v))),
        Some((_, v)) if runs.len() == 1 => (*v).clone(),
        Some((k, v)) => Validity::invalid(format!(
            "run {} of {}: {}{}",
            k + 1,
            runs.len(),
            v.reason(),
            match bad.len() {
                1 => String::new(),
                n => format!(" (and {} more of the runs)", n - 1),
            }
        )),
    }
}

pub fn headline_name(pattern: PatternKind) -> (&'static str, &'static str) {
    match pattern {
        PatternKind::Pingpong => ("one-way latency (RTT/2), mean", "ns"),
        PatternKind::Rr | PatternKind::Crr => ("transactions per second", "1/s"),
        PatternKind::Stream => ("receiver throughput, all streams", "bit/s"),
    }
}

fn per_s(n: u64, ns: u64) -> f64 {
    if ns > 0 {
        n as f64 / (ns as f64 / 1e9)
    } else {
        0.0
    }
}

/// Pairs each connection's client and server statistics into sender and receiver, and judges
/// both rates.
fn stream_pairs(o: &PointOutcome, transport: crate::transport::TransportKind) -> Vec<StreamPair> {
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
        pairs.push(StreamPair::judged(
            *index,
            if client_sends {
                "client_to_server"
            } else {
                "server_to_client"
            }
            .into(),
            sender,
            receiver,
            transport,
        ));
    }
    pairs
}

pub(crate) fn totals(pairs: &[StreamPair]) -> Vec<DirectionTotal> {
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
                acc.jitter_ns = acc.jitter_ns.max(l.jitter_ns);
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
        // Several streams on one clock: over one window (see report::span).
        let senders: Vec<&StreamStats> = ps.iter().map(|p| &p.sender.stats).collect();
        let receivers: Vec<&StreamStats> = ps.iter().map(|p| &p.receiver.stats).collect();
        let sent = span::over_one_clock(&senders, span::BYTES);
        // Acknowledged bytes over the senders' window, or (intervals without them) each
        // sender's own phase as before.
        let acked = span::over_one_clock(&senders, span::ACKED).filter(|a| {
            sent.as_ref().is_some_and(|t| {
                (t.span.start_ns, t.span.end_ns) == (a.span.start_ns, a.span.end_ns)
            })
        });
        let received = span::over_one_clock(&receivers, span::BYTES);
        let mut total = DirectionTotal {
            direction: dir.into(),
            streams: ps.len() as u32,
            sender_bits_per_s: match &sent {
                Some(t) => t.bits_per_s(),
                None => ps.iter().map(|p| p.sender.bits_per_s).sum(),
            },
            acked_bits_per_s: match &acked {
                Some(t) => Some(t.bits_per_s()),
                None => ps.iter().map(|p| p.sender.acked_bits_per_s).sum(),
            },
            receiver_bits_per_s: match &received {
                Some(t) => t.bits_per_s(),
                None => ps.iter().map(|p| p.receiver.bits_per_s).sum(),
            },
            sender_span: sent.map(|t| t.span),
            receiver_span: received.as_ref().map(|t| t.span),
            receiver_intervals: received.map(|t| t.intervals).unwrap_or_default(),
            bytes_sent: ps.iter().map(|p| p.sender.bytes_total).sum(),
            bytes_received: ps.iter().map(|p| p.receiver.bytes_total).sum(),
            send_failures: ps.iter().map(|p| p.sender.send_failures).sum(),
            loss,
            frames,
            retransmits,
            ..DirectionTotal::default()
        };
        total.judge_from(&ps);
        out.push(total);
    }
    out
}

fn us_per(cpu: CpuTime, units: f64) -> Option<f64> {
    (units > 0.0).then(|| cpu.total_ns() as f64 / 1e3 / units)
}

/// Summarises every run of one point; None when there was no run. `values` holds each run's
/// headline value with the verdict on it, as [`headline_value`] gave them.
pub fn summarize(
    index: usize,
    test: &TestSpec,
    planned: &PlannedPoint,
    runs: &[PointOutcome],
    values: Vec<(f64, Validity)>,
    confidence: f64,
    target: Option<f64>,
) -> Option<PointResult> {
    let last = runs.last()?;
    let (name, unit) = headline_name(test.pattern);
    let (values, verdicts): (Vec<f64>, Vec<Validity>) = values.into_iter().unzip();
    let headline_validity = runs_validity(&verdicts);
    let over_runs = MeanCi::from_samples(&values, confidence);
    // An interval over values that are not measurements meets no target.
    let target_met = target.map(|t| {
        !headline_validity.is_invalid()
            && over_runs
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
                tps += per_s(x.transactions, x.elapsed_ns);
                if let Some(s) = x.rtt.summary(confidence) {
                    pingpong_bps += 2.0 * spec.request_size as f64 * 8.0 / (s.mean_ns / 1e9);
                }
            }
            let elapsed = shortest(last.exchanges.iter().map(|x| x.elapsed_ns));
            let think = test
                .think_ns
                .and_then(|asked| think_result(asked, &last.exchanges));
            let open_loop = open_loop_result(&last.exchanges, confidence);
            rec.summary(confidence).map(|rtt| {
                let pingpong = test.pattern == PatternKind::Pingpong;
                LatencyResult {
                    validity: validity::latency(rtt.samples),
                    elapsed_ns: elapsed,
                    think,
                    open_loop,
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
                    percentiles: Vec::new(),
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
                .map_or(0.0, |c| per_s(c.transactions, c.elapsed_ns));
            let elapsed = last.crr.as_ref().map(|c| c.elapsed_ns);
            rec.summary(confidence).map(|rtt| LatencyResult {
                validity: validity::latency(rtt.samples),
                elapsed_ns: elapsed,
                think: None,
                open_loop: None,
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
                percentiles: Vec::new(),
            })
        }
        PatternKind::Stream => None,
    };

    let stream = (test.pattern == PatternKind::Stream).then(|| {
        let pairs = stream_pairs(last, test.transport);
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

    let rpc = {
        let client: Vec<_> = last
            .exchanges
            .iter()
            .filter_map(|x| x.serialisation)
            .chain(
                last.client_streams
                    .iter()
                    .filter_map(|(_, s)| s.serialisation),
            )
            .collect();
        let server: Vec<_> = last
            .server
            .responders
            .iter()
            .filter_map(|r| r.serialisation)
            .chain(last.server.streams.iter().filter_map(|s| s.serialisation))
            .collect();
        let rtt = latency
            .as_ref()
            .filter(|_| !last.exchanges.is_empty())
            .map(|l| l.rtt.mean_ns);
        crate::model::rpc::RpcResult::new(client, server, rtt)
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
            validity: headline_validity,
        },
        latency,
        stream,
        cpu,
        socket: SocketReport {
            client: last.client_socket.clone(),
            server: last.server_socket.clone(),
        },
        trace: None,
        counters: None,
        host_cpu: None,
        loss_attribution: Vec::new(),
        load: None,
        under_load: None,
        fairness: None,
        rpc,
        path_timing: path_timing(test, last),
    })
}

/// The last run's path timing (`--path-timing`): the one connection's stamped round trips
/// paired with the server's records of them.
fn path_timing(test: &TestSpec, last: &PointOutcome) -> Option<crate::model::path::PathTiming> {
    if !test.path_timing {
        return None;
    }
    let client = last.exchanges.first()?.path.as_ref()?;
    let server = last.server.responders.first().and_then(|r| r.path.as_ref());
    let boot = crate::sys::timestamping::boot_id();
    let paired = super::path_stages::pair(client, server, boot.as_deref());
    super::path_stages::path_timing(&paired, super::path_stages::cost(client))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn connection(transactions: u64, elapsed_ns: u64, thinks: u64, think_ns: u64) -> ExchangeStats {
        ExchangeStats {
            rtt: LatencyRecorder::new(),
            transactions,
            lost: 0,
            stale: 0,
            first_ns: None,
            elapsed_ns,
            thinks,
            think_ns,
            cpu: CpuTime::default(),
            series: Vec::new(),
            serialisation: None,
            open_loop: None,
            path: None,
        }
    }

    /// The time without thinking is the raw time minus the measured waits, exactly, of the
    /// connection whose raw time is reported; the corrected rate sums every connection's.
    #[test]
    fn the_time_without_thinking_is_the_raw_time_minus_the_measured_waits() {
        let conns = [
            connection(100, 9_000_000_123, 100, 8_000_000_120),
            connection(50, 8_500_000_000, 50, 8_000_000_000),
        ];
        let t = think_result(80_000_000, &conns).unwrap();
        assert_eq!(t.asked_ns, 80_000_000);
        assert_eq!((t.waits, t.waited_ns), (50, 8_000_000_000));
        assert_eq!(t.corrected_elapsed_ns, 8_500_000_000 - 8_000_000_000);
        let expected = 100.0 / 1.000_000_003 + 50.0 / 0.5;
        assert!((t.corrected_transactions_per_s - expected).abs() < 1e-9 * expected);
        assert!(think_result(1, &[]).is_none());
    }
}
