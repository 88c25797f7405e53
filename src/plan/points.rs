//! Lays the sweep out: one planned point per combination of the axes' values, each with its
//! stop rule, pacing and both ends' socket options.

use std::time::Duration;

use super::axes::Axes;
use super::PlannedPoint;
use crate::control::protocol::PointSpec;
use crate::model::PointKey;
use crate::pattern::stream::Pace;
use crate::pattern::PatternKind;
use crate::request::Request;
use crate::transport::SocketOptions;
use crate::units::Rate;

/// How long each point runs: -d, else a default when neither --bytes nor --iterations ends
/// it.
pub(super) fn duration(r: &Request) -> Option<Duration> {
    let stop = &r.stop;
    stop.duration
        .or(if stop.bytes.is_none() && stop.iterations.is_none() {
            Some(match r.pattern {
                PatternKind::Stream => Duration::from_secs(10),
                _ => Duration::from_secs(1),
            })
        } else {
            None
        })
}

/// Every point of the sweep, in the order they run; `base` is the socket options all points
/// share (each point sets its own buffers and, in a sweep over them, its algorithm).
pub(super) fn lay_out(
    r: &Request,
    reliable: bool,
    axes: &Axes,
    duration: Option<Duration>,
    base: &SocketOptions,
) -> Vec<PlannedPoint> {
    let cc_swept = axes.swept().cc;
    let mut points = Vec::new();
    // One block of the other axes per algorithm: a table reads as one sweep per algorithm.
    for &cc in &axes.ccs {
        let point_socket = SocketOptions {
            cc: cc.map(|c| c.as_str().to_owned()),
            ..base.clone()
        };
        let key_cc = if cc_swept { cc } else { None };
        for &size in &axes.sizes {
            for &snd in &axes.sndbufs {
                for &rcv in &axes.rcvbufs {
                    if axes.paired && rcv != snd {
                        continue;
                    }
                    for &ssnd in &axes.server_sndbufs {
                        for &srcv in &axes.server_rcvbufs {
                            let server_sndbuf = if ssnd == u64::MAX { snd } else { ssnd };
                            let server_rcvbuf = if srcv == u64::MAX { rcv } else { srcv };
                            // The rates innermost: a QPS curve reads in order.
                            for &rate_per_s in &axes.rates {
                                let key = PointKey {
                                    size,
                                    sndbuf: snd,
                                    rcvbuf: rcv,
                                    server_sndbuf,
                                    server_rcvbuf,
                                    cc: key_cc,
                                    rate_per_s,
                                };
                                points.push(point(r, reliable, key, duration, &point_socket));
                            }
                        }
                    }
                }
            }
        }
    }
    points
}

/// The point of `key`: what each end sends, reads and stops at, and its socket options.
fn point(
    r: &Request,
    reliable: bool,
    key: PointKey,
    duration: Option<Duration>,
    base: &SocketOptions,
) -> PlannedPoint {
    let pattern = r.pattern;
    let response_size = match pattern {
        PatternKind::Pingpong => key.size,
        _ => r.sizes.response_size.unwrap_or(1),
    };
    // Only streams read in chunks of their own size; exchanges read whole messages.
    let read_size = match pattern {
        PatternKind::Stream => {
            r.sizes
                .read_size
                .unwrap_or(if reliable { 128 * 1024 } else { 65_536 })
        }
        // An exchange reads whole messages, not in read calls of a size: the field only has to
        // be a size a server takes (a 0-byte message has one of 1).
        _ => key.size.max(1),
    };
    let streams = u64::from(r.traffic.parallel);
    // Totals per direction are split evenly over the streams.
    let pace = r.traffic.rate.map(|rate| Pace {
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
            rate_per_s: key.rate_per_s,
        },
        client_socket: SocketOptions {
            sndbuf: key.sndbuf,
            rcvbuf: key.rcvbuf,
            ..base.clone()
        },
    }
}
