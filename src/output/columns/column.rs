//! The figures the CSV and the tables share, each a [`Column`]: its CSV name and its reader.

use super::cell::text;
use super::{Cell, Row};

/// One figure of a point.
pub struct Column {
    /// The CSV header, with the unit in it.
    pub name: &'static str,
    pub get: fn(&Row) -> Cell,
}

pub const SIZE: Column = Column {
    name: "size_bytes",
    get: |r| r.point.key.size.into(),
};
pub const REQUEST_SIZE: Column = Column {
    name: "request_size_bytes",
    get: |r| r.point.request_size.into(),
};
pub const RESPONSE_SIZE: Column = Column {
    name: "response_size_bytes",
    get: |r| r.point.response_size.into(),
};
pub const RTT_SAMPLES: Column = Column {
    name: "rtt_samples",
    get: |r| r.latency(|l| l.rtt.samples),
};
pub const TRANSACTIONS: Column = Column {
    name: "transactions",
    get: |r| r.latency(|l| l.transactions),
};
pub const RTT_MEAN: Column = Column {
    name: "rtt_mean_ns",
    get: |r| r.latency(|l| l.rtt.mean_ns),
};
pub const RTT_CI: Column = Column {
    name: "rtt_ci_half_width_ns",
    get: |r| r.latency(|l| l.rtt.ci_half_width_ns),
};
pub const RTT_MIN: Column = Column {
    name: "rtt_min_ns",
    get: |r| r.latency(|l| l.rtt.min_ns),
};
pub const RTT_P50: Column = Column {
    name: "rtt_p50_ns",
    get: |r| r.latency(|l| l.rtt.median_ns),
};
pub const RTT_P99: Column = Column {
    name: "rtt_p99_ns",
    get: |r| r.latency(|l| l.rtt.p99_ns),
};
pub const RTT_MAX: Column = Column {
    name: "rtt_max_ns",
    get: |r| r.latency(|l| l.rtt.max_ns),
};
pub const THROUGHPUT: Column = Column {
    name: "throughput_bits_per_s",
    get: |r| r.latency(|l| l.throughput_bits_per_s),
};
pub const TRANSACTIONS_PER_S: Column = Column {
    name: "transactions_per_s",
    get: |r| r.latency(|l| l.transactions_per_s),
};
pub const LOST_TRANSACTIONS: Column = Column {
    name: "lost_transactions",
    get: |r| r.latency(|l| l.lost),
};
/// With --think: transactions per second on the time without the waits.
pub const THINK_CORRECTED_TPS: Column = Column {
    name: "think_corrected_transactions_per_s",
    get: |r| {
        r.point
            .latency
            .as_ref()
            .and_then(|l| l.think.as_ref())
            .map(|t| t.corrected_transactions_per_s)
            .into()
    },
};
pub const THINK_WAITED: Column = Column {
    name: "think_waited_ns",
    get: |r| {
        r.point
            .latency
            .as_ref()
            .and_then(|l| l.think.as_ref())
            .map(|t| t.waited_ns)
            .into()
    },
};
pub const RTT_P999: Column = Column {
    name: "rtt_p999_ns",
    get: |r| r.latency(|l| l.rtt.p999_ns),
};

/// An open-loop point's figures (`--arrivals`); empty for a closed loop.
fn open_loop<T: Into<Cell>>(r: &Row, f: fn(&crate::model::OpenLoopResult) -> T) -> Cell {
    r.point
        .latency
        .as_ref()
        .and_then(|l| l.open_loop.as_ref())
        .map(f)
        .into()
}

/// Open loop: the rate asked for, requests per second over all connections.
pub const OFFERED_PER_S: Column = Column {
    name: "offered_per_s",
    get: |r| open_loop(r, |o| o.offered_per_s),
};
/// Open loop: replies per second.
pub const ACHIEVED_PER_S: Column = Column {
    name: "achieved_per_s",
    get: |r| open_loop(r, |o| o.achieved_per_s),
};
pub const REQUESTS_SCHEDULED: Column = Column {
    name: "requests_scheduled",
    get: |r| open_loop(r, |o| o.scheduled),
};
pub const REQUESTS_SENT: Column = Column {
    name: "requests_sent",
    get: |r| open_loop(r, |o| o.sent),
};
pub const REQUESTS_OUTSTANDING: Column = Column {
    name: "requests_outstanding",
    get: |r| open_loop(r, |o| o.outstanding),
};
pub const REQUESTS_UNSENT: Column = Column {
    name: "requests_unsent",
    get: |r| open_loop(r, |o| o.unsent),
};
pub const BOUND_WAITS: Column = Column {
    name: "in_flight_bound_waits",
    get: |r| open_loop(r, |o| o.bound_waits),
};
/// Open loop: from each request's actual send to its reply.
pub const SERVICE_P50: Column = Column {
    name: "service_p50_ns",
    get: |r| open_loop(r, |o| o.service.as_ref().map(|s| s.median_ns)),
};
pub const SERVICE_P99: Column = Column {
    name: "service_p99_ns",
    get: |r| open_loop(r, |o| o.service.as_ref().map(|s| s.p99_ns)),
};
/// Open loop: why the point did not keep up with its offered load; empty when it did.
pub const OVERLOAD: Column = Column {
    name: "overload",
    get: |r| open_loop(r, |o| o.overload.clone()),
};
/// When requests left: closed, fixed or poisson; empty for patterns without requests.
pub const ARRIVALS: Column = Column {
    name: "arrivals",
    get: |r| {
        r.report
            .settings
            .arrivals
            .map(|a| a.name().to_owned())
            .into()
    },
};

pub const SETUP_MEAN: Column = Column {
    name: "setup_mean_ns",
    get: |r| {
        r.point
            .latency
            .as_ref()
            .and_then(|l| l.setup.as_ref())
            .map(|s| s.mean_ns)
            .into()
    },
};

/// The stream's number; a point's or a direction's sum over several streams is "total" (a
/// direction's single stream is stream 0).
pub const STREAM: Column = Column {
    name: "stream",
    get: |r| match (r.stream, r.total, &r.point.stream) {
        (Some(p), _, _) => p.index.into(),
        (None, Some(_), Some(s)) if s.streams.len() <= s.totals.len() => Cell::Int(0),
        (None, _, Some(_)) => text("total"),
        (None, _, None) => Cell::Empty,
    },
};
pub const DIRECTION: Column = Column {
    name: "direction",
    get: |r| match (r.stream, r.total, &r.point.stream) {
        (Some(p), _, _) => text(&p.direction),
        (None, Some(t), _) => text(&t.direction),
        (None, None, Some(s)) => text(
            &s.totals
                .iter()
                .map(|t| t.direction.as_str())
                .collect::<Vec<_>>()
                .join("+"),
        ),
        (None, None, None) => Cell::Empty,
    },
};
pub const SENDER_BITS: Column = Column {
    name: "sender_bits_per_s",
    get: |r| r.sum(|p| p.sender.bits_per_s, |d| d.sender_bits_per_s),
};
/// Where the sender's kernel keeps TCP_INFO: the rate the peer acknowledged.
pub const ACKED_BITS: Column = Column {
    name: "acked_bits_per_s",
    get: |r| r.maybe(|p| p.sender.acked_bits_per_s, |d| d.acked_bits_per_s),
};
pub const RECEIVER_BITS: Column = Column {
    name: "receiver_bits_per_s",
    get: |r| r.sum(|p| p.receiver.bits_per_s, |d| d.receiver_bits_per_s),
};
pub const BYTES_SENT: Column = Column {
    name: "bytes_sent",
    get: |r| r.count(|p| p.sender.bytes_total, |d| d.bytes_sent),
};
pub const BYTES_RECEIVED: Column = Column {
    name: "bytes_received",
    get: |r| r.count(|p| p.receiver.bytes_total, |d| d.bytes_received),
};
pub const DATAGRAMS_LOST: Column = Column {
    name: "datagrams_lost",
    get: |r| r.loss().map(|l| l.1).into(),
};
pub const LOSS_RATIO: Column = Column {
    name: "loss_ratio",
    get: |r| {
        r.loss()
            .map(|(sent, lost, _)| {
                if sent > 0 {
                    lost as f64 / sent as f64
                } else {
                    0.0
                }
            })
            .into()
    },
};
pub const JITTER: Column = Column {
    name: "jitter_s",
    get: |r| r.loss().map(|l| l.2).into(),
};
pub const RETRANSMITS: Column = Column {
    name: "retransmits",
    get: |r| {
        r.maybe(
            |p| p.sender.tcp_info.map(|t| u64::from(t.total_retrans)),
            |d| d.retransmits,
        )
    },
};
pub const CLIENT_US_PER_KIB: Column = Column {
    name: "client_us_per_kib",
    get: |r| r.whole(|p| p.cpu.client_us_per_kib),
};
pub const SERVER_US_PER_KIB: Column = Column {
    name: "server_us_per_kib",
    get: |r| r.whole(|p| p.cpu.server_us_per_kib),
};
