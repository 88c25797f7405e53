//! A point's figures, each described once: its CSV name (which carries its unit) and how to
//! read it from a result. The CSV is these columns in order; the ping-pong and request/response
//! tables lay out some of them ([`TableColumn`]) in the units a reader scans, so the table and
//! the CSV read every figure through the same function and can not disagree on which number
//! it is.

use crate::model::{DirectionTotal, PointResult, RunDocument, StreamPair};
use crate::stats::validity::Validity;
use crate::units::{mbit, us};

/// One cell's value before it is written.
#[derive(Debug, Clone, PartialEq)]
pub enum Cell {
    /// Unknown, or not a figure of this pattern: an empty CSV field, "-" in a table.
    Empty,
    Int(u64),
    Float(f64),
    Text(String),
    Bool(bool),
}

impl Cell {
    /// The CSV field: Rust's shortest text that reads back as the same number.
    pub fn csv(&self) -> String {
        match self {
            Cell::Empty => String::new(),
            Cell::Int(v) => v.to_string(),
            Cell::Float(v) => v.to_string(),
            Cell::Text(s) => s.clone(),
            Cell::Bool(b) => b.to_string(),
        }
    }

    fn number(&self) -> Option<f64> {
        match self {
            Cell::Int(v) => Some(*v as f64),
            Cell::Float(v) => Some(*v),
            _ => None,
        }
    }
}

impl<T: Into<Cell>> From<Option<T>> for Cell {
    fn from(v: Option<T>) -> Cell {
        v.map_or(Cell::Empty, Into::into)
    }
}

impl From<u64> for Cell {
    fn from(v: u64) -> Cell {
        Cell::Int(v)
    }
}

impl From<u32> for Cell {
    fn from(v: u32) -> Cell {
        Cell::Int(u64::from(v))
    }
}

impl From<f64> for Cell {
    fn from(v: f64) -> Cell {
        Cell::Float(v)
    }
}

impl From<bool> for Cell {
    fn from(v: bool) -> Cell {
        Cell::Bool(v)
    }
}

impl From<String> for Cell {
    fn from(v: String) -> Cell {
        Cell::Text(v)
    }
}

/// What a row is about: a point of a run, or one stream of a stream point.
#[derive(Clone, Copy)]
pub struct Row<'a> {
    pub report: &'a RunDocument,
    /// The run's id in the results database it was saved in, if it was.
    pub run_id: Option<i64>,
    pub point: &'a PointResult,
    /// One stream's row (after its point's total row, when a point has several streams).
    pub stream: Option<&'a StreamPair>,
    /// One direction's sum over its streams (the stream table's sum rows).
    pub total: Option<&'a DirectionTotal>,
}

impl<'a> Row<'a> {
    /// A point's row.
    pub fn point(report: &'a RunDocument, run_id: Option<i64>, point: &'a PointResult) -> Self {
        Row {
            report,
            run_id,
            point,
            stream: None,
            total: None,
        }
    }

    /// The point's row, then, when it has more than one stream, a row for each stream.
    pub fn all_of(
        report: &'a RunDocument,
        run_id: Option<i64>,
        point: &'a PointResult,
    ) -> Vec<Row<'a>> {
        let total = Row::point(report, run_id, point);
        let mut rows = vec![total];
        if let Some(s) = point.stream.as_ref().filter(|s| s.streams.len() > 1) {
            rows.extend(s.streams.iter().map(|pair| Row {
                stream: Some(pair),
                ..total
            }));
        }
        rows
    }

    fn totals(&self) -> Option<&'a [DirectionTotal]> {
        self.point.stream.as_ref().map(|s| s.totals.as_slice())
    }

    /// A stream's own figure, a direction's, or the sum over the directions; empty for the
    /// latency patterns.
    fn sum(&self, one: fn(&StreamPair) -> f64, total: fn(&DirectionTotal) -> f64) -> Cell {
        match (self.stream, self.total) {
            (Some(p), _) => one(p).into(),
            (None, Some(t)) => total(t).into(),
            (None, None) => self
                .totals()
                .map(|t| t.iter().map(total).sum::<f64>())
                .into(),
        }
    }

    fn count(&self, one: fn(&StreamPair) -> u64, total: fn(&DirectionTotal) -> u64) -> Cell {
        match (self.stream, self.total) {
            (Some(p), _) => one(p).into(),
            (None, Some(t)) => total(t).into(),
            (None, None) => self
                .totals()
                .map(|t| t.iter().map(total).sum::<u64>())
                .into(),
        }
    }

    /// A figure that may be unknown (in any direction, for the sum over directions).
    fn maybe<T: Into<Cell> + std::iter::Sum<T>>(
        &self,
        one: fn(&StreamPair) -> Option<T>,
        total: fn(&DirectionTotal) -> Option<T>,
    ) -> Cell {
        match (self.stream, self.total) {
            (Some(p), _) => one(p).into(),
            (None, Some(t)) => total(t).into(),
            (None, None) => self
                .totals()
                .and_then(|t| t.iter().map(total).sum::<Option<T>>())
                .into(),
        }
    }

    /// Datagrams sent and lost and the largest jitter: the stream's, the direction's, or over
    /// the directions when every direction counted its datagrams.
    fn loss(&self) -> Option<(u64, u64, f64)> {
        let loss = match (self.stream, self.total) {
            (Some(p), _) => p.receiver.loss,
            (None, Some(t)) => t.loss,
            (None, None) => {
                return self.totals()?.iter().try_fold((0, 0, 0.0f64), |acc, d| {
                    d.loss
                        .map(|l| (acc.0 + l.sent, acc.1 + l.lost, acc.2.max(l.jitter_ns / 1e9)))
                })
            }
        };
        loss.map(|l| (l.sent, l.lost, l.jitter_ns / 1e9))
    }

    /// The verdict on the row's sender rate (stream rows only).
    fn sender_validity(&self) -> Validity {
        match (self.stream, self.total) {
            (Some(p), _) => p.sender.validity.clone(),
            (None, Some(t)) => t.sender_validity(),
            (None, None) => Validity::default(),
        }
    }

    fn receiver_validity(&self) -> Validity {
        match (self.stream, self.total) {
            (Some(p), _) => p.receiver.validity.clone(),
            (None, Some(t)) => t.receiver_validity(),
            (None, None) => Validity::default(),
        }
    }

    /// A figure of the whole point, which one stream's row leaves empty.
    fn whole<T: Into<Cell>>(&self, f: impl Fn(&PointResult) -> T) -> Cell {
        match self.stream {
            Some(_) => Cell::Empty,
            None => f(self.point).into(),
        }
    }

    /// The verdict on the row's figures.
    fn validity(&self) -> Validity {
        match self.stream {
            Some(p) => crate::stats::validity::all([
                ("sender".to_owned(), &p.sender.validity),
                ("receiver".to_owned(), &p.receiver.validity),
            ]),
            None => crate::model::point_validity(self.point),
        }
    }

    fn latency<T: Into<Cell>>(&self, f: fn(&crate::model::LatencyResult) -> T) -> Cell {
        self.point.latency.as_ref().map(f).into()
    }
}

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

/// One end's host CPU shares; on one host the server's are the client's.
fn host_cpu(p: &PointResult, server: bool) -> Option<&crate::model::host::CpuShare> {
    let h = p.host_cpu.as_ref()?;
    if server && !h.same_host {
        h.server.as_ref()
    } else {
        h.client.as_ref()
    }
}

fn text(s: &str) -> Cell {
    Cell::Text(s.to_owned())
}

/// Every column of `--csv` and `export --csv`, in order.
pub const CSV: &[Column] = &[
    Column {
        name: "index",
        get: |r| (r.point.index as u64).into(),
    },
    STREAM,
    DIRECTION,
    Column {
        name: "pattern",
        get: |r| Cell::Text(r.report.pattern.to_string()),
    },
    Column {
        name: "transport",
        get: |r| Cell::Text(r.report.transport.to_string()),
    },
    Column {
        name: "run_started_at",
        get: |r| text(&r.report.started_at),
    },
    Column {
        name: "run_id",
        get: |r| r.run_id.map(|id| id.to_string()).into(),
    },
    Column {
        name: "client_host",
        get: |r| text(&r.report.client_environment.hostname),
    },
    Column {
        name: "server_host",
        get: |r| {
            r.report
                .server_environment
                .as_ref()
                .map(|e| e.hostname.clone())
                .into()
        },
    },
    SIZE,
    REQUEST_SIZE,
    RESPONSE_SIZE,
    Column {
        name: "sndbuf_bytes",
        get: |r| r.point.key.sndbuf.into(),
    },
    Column {
        name: "rcvbuf_bytes",
        get: |r| r.point.key.rcvbuf.into(),
    },
    Column {
        name: "server_sndbuf_bytes",
        get: |r| r.point.key.server_sndbuf.into(),
    },
    Column {
        name: "server_rcvbuf_bytes",
        get: |r| r.point.key.server_rcvbuf.into(),
    },
    // The point's algorithm in a sweep, else the run's (empty: the kernel's default).
    Column {
        name: "cc",
        get: |r| {
            r.point
                .key
                .cc
                .map(|c| c.to_string())
                .or_else(|| r.report.settings.cc.clone())
                .into()
        },
    },
    Column {
        name: "runs",
        get: |r| r.point.runs.into(),
    },
    Column {
        name: "headline_mean",
        get: |r| r.whole(|p| p.headline.over_runs.as_ref().map(|m| m.mean)),
    },
    Column {
        name: "headline_ci_half_width",
        get: |r| r.whole(|p| p.headline.over_runs.as_ref().and_then(|m| m.half_width)),
    },
    Column {
        name: "headline_unit",
        get: |r| r.whole(|p| p.headline.unit.clone()),
    },
    RTT_SAMPLES,
    RTT_MEAN,
    Column {
        name: "rtt_stddev_ns",
        get: |r| r.latency(|l| l.rtt.stddev_ns),
    },
    RTT_CI,
    RTT_MIN,
    RTT_P50,
    Column {
        name: "rtt_p90_ns",
        get: |r| r.latency(|l| l.rtt.p90_ns),
    },
    RTT_P99,
    Column {
        name: "rtt_p999_ns",
        get: |r| r.latency(|l| l.rtt.p999_ns),
    },
    Column {
        name: "rtt_p9999_ns",
        get: |r| r.latency(|l| l.rtt.p9999_ns),
    },
    // The percentiles' sample floors (10 / (1 - p), the physics guard): whether every printed
    // percentile stands on enough samples, and which do not, by name.
    Column {
        name: "rtt_percentiles_valid",
        get: |r| {
            r.point
                .latency
                .as_ref()
                .filter(|l| !l.percentiles.is_empty())
                .map(|l| l.percentiles.iter().all(|p| !p.validity.is_invalid()))
                .into()
        },
    },
    Column {
        name: "rtt_percentiles_invalid",
        get: |r| {
            r.point
                .latency
                .as_ref()
                .filter(|l| !l.percentiles.is_empty())
                .map(crate::model::LatencyResult::invalid_percentiles)
                .into()
        },
    },
    RTT_MAX,
    Column {
        name: "one_way_mean_ns",
        get: |r| r.latency(|l| l.one_way_mean_ns),
    },
    THROUGHPUT,
    TRANSACTIONS_PER_S,
    TRANSACTIONS,
    LOST_TRANSACTIONS,
    THINK_CORRECTED_TPS,
    THINK_WAITED,
    SETUP_MEAN,
    SENDER_BITS,
    ACKED_BITS,
    RECEIVER_BITS,
    BYTES_SENT,
    BYTES_RECEIVED,
    Column {
        name: "datagrams_sent",
        get: |r| r.loss().map(|l| l.0).into(),
    },
    DATAGRAMS_LOST,
    LOSS_RATIO,
    JITTER,
    Column {
        name: "send_failures",
        get: |r| r.count(|p| p.sender.send_failures, |d| d.send_failures),
    },
    RETRANSMITS,
    Column {
        name: "client_cpu_s",
        get: |r| r.whole(|p| p.cpu.client.total_s()),
    },
    Column {
        name: "server_cpu_s",
        get: |r| r.whole(|p| p.cpu.server.total_s()),
    },
    CLIENT_US_PER_KIB,
    SERVER_US_PER_KIB,
    Column {
        name: "client_host_user_share",
        get: |r| r.whole(|p| host_cpu(p, false).map(|c| c.user)),
    },
    Column {
        name: "client_host_system_share",
        get: |r| r.whole(|p| host_cpu(p, false).map(|c| c.system)),
    },
    Column {
        name: "client_host_softirq_share",
        get: |r| r.whole(|p| host_cpu(p, false).map(|c| c.softirq)),
    },
    Column {
        name: "server_host_user_share",
        get: |r| r.whole(|p| host_cpu(p, true).map(|c| c.user)),
    },
    Column {
        name: "server_host_system_share",
        get: |r| r.whole(|p| host_cpu(p, true).map(|c| c.system)),
    },
    Column {
        name: "server_host_softirq_share",
        get: |r| r.whole(|p| host_cpu(p, true).map(|c| c.softirq)),
    },
    Column {
        name: "valid",
        get: |r| r.validity().valid.into(),
    },
    Column {
        name: "invalid_reason",
        get: |r| text(r.validity().reason()),
    },
];

/// How a table shows a column's value.
#[derive(Clone, Copy)]
pub enum Show {
    /// As the CSV does (counts, sizes).
    Plain,
    /// Nanoseconds as microseconds, 2 decimals.
    Us,
    /// Half of a round trip, in microseconds: ping-pong's one-way time.
    HalfUs,
    /// Bit/s as Mbit/s, 2 decimals.
    Mbit,
    /// One decimal (transactions per second).
    OneDecimal,
    /// Three decimals (CPU service demand).
    ThreeDecimals,
    /// A ratio as a percentage, 3 decimals.
    Percent,
    /// Seconds as milliseconds, 4 decimals (jitter).
    Ms,
    /// A stream's number, or "sum" for a sum over several.
    Stream,
}

/// Which verdict marks a table cell with "!" when its figure is not a valid measurement.
#[derive(Clone, Copy, PartialEq)]
pub enum Judged {
    No,
    /// The point's latency figures.
    Latency,
    /// The row's sender rate (stream tables).
    Sender,
    /// The row's receiver rate (stream tables).
    Receiver,
    /// The point's p99, against its sample floor (10 / (1 - p): 1000 samples).
    P99,
}

/// A column of the ping-pong and request/response tables: a [`Column`] shown in a unit for
/// reading, right-aligned in `width`.
pub struct TableColumn {
    pub header: &'static str,
    pub width: usize,
    pub column: Column,
    pub show: Show,
    pub judged: Judged,
}

impl TableColumn {
    /// The cell's text, not yet aligned; "-" where the value is unknown. `latency` is the
    /// verdict on the point's latency figures.
    pub fn text(&self, row: &Row, latency: &Validity) -> String {
        let cell = (self.column.get)(row);
        let Some(x) = cell.number() else {
            return match (cell, self.show) {
                (Cell::Empty, _) => "-".into(),
                (Cell::Text(t), Show::Stream) if t == "total" => "sum".into(),
                (other, _) => other.csv(),
            };
        };
        let shown = match self.show {
            Show::Plain | Show::Stream => cell.csv(),
            Show::Us => us(x),
            Show::HalfUs => us(x / 2.0),
            Show::Mbit => mbit(x),
            Show::OneDecimal => format!("{x:.1}"),
            Show::ThreeDecimals => format!("{x:.3}"),
            Show::Percent => format!("{:.3}", x * 100.0),
            Show::Ms => format!("{:.4}", x * 1e3),
        };
        let mark = match self.judged {
            Judged::No => "",
            Judged::Latency => latency.mark(),
            Judged::Sender => row.sender_validity().mark(),
            Judged::Receiver => row.receiver_validity().mark(),
            Judged::P99 => row
                .point
                .latency
                .as_ref()
                .map_or("", |l| l.percentile_validity("p99").mark()),
        };
        format!("{shown}{mark}")
    }
}

const fn col(
    header: &'static str,
    width: usize,
    column: Column,
    show: Show,
    judged: Judged,
) -> TableColumn {
    TableColumn {
        header,
        width,
        column,
        show,
        judged,
    }
}

/// Ping-pong's table, the swept buffer columns after the first.
pub const PINGPONG: &[TableColumn] = &[
    col("size(B)", 9, SIZE, Show::Plain, Judged::No),
    col("samples", 9, RTT_SAMPLES, Show::Plain, Judged::No),
    col("mean(us)", 11, RTT_MEAN, Show::HalfUs, Judged::Latency),
    col("±CI(us)", 9, RTT_CI, Show::HalfUs, Judged::Latency),
    col("min(us)", 9, RTT_MIN, Show::HalfUs, Judged::No),
    col("p50(us)", 9, RTT_P50, Show::HalfUs, Judged::No),
    col("p99(us)", 9, RTT_P99, Show::HalfUs, Judged::P99),
    col("max(us)", 9, RTT_MAX, Show::HalfUs, Judged::No),
    col("Mbit/s", 11, THROUGHPUT, Show::Mbit, Judged::Latency),
];

/// rr's and crr's table, the swept buffer columns after the first two.
pub const RR: &[TableColumn] = &[
    col("req(B)", 9, REQUEST_SIZE, Show::Plain, Judged::No),
    col("resp(B)", 9, RESPONSE_SIZE, Show::Plain, Judged::No),
    col("txns", 9, TRANSACTIONS, Show::Plain, Judged::No),
    col(
        "txn/s",
        11,
        TRANSACTIONS_PER_S,
        Show::OneDecimal,
        Judged::Latency,
    ),
    col("mean(us)", 10, RTT_MEAN, Show::Us, Judged::Latency),
    col("±CI(us)", 9, RTT_CI, Show::Us, Judged::Latency),
    col("p50(us)", 9, RTT_P50, Show::Us, Judged::No),
    col("p99(us)", 9, RTT_P99, Show::Us, Judged::P99),
    col("max(us)", 9, RTT_MAX, Show::Us, Judged::No),
    col("Mbit/s", 9, THROUGHPUT, Show::Mbit, Judged::Latency),
];

/// The stream table's first columns, the swept buffer columns after the first; then the
/// acknowledged rate where the sender's kernel keeps TCP_INFO, and [`STREAM_RATES`].
pub const STREAM_TABLE: &[TableColumn] = &[
    col("size(B)", 9, SIZE, Show::Plain, Judged::No),
    col("stream", 7, STREAM, Show::Stream, Judged::No),
    col("direction", 17, DIRECTION, Show::Plain, Judged::No),
    col("sender", 12, SENDER_BITS, Show::Mbit, Judged::Sender),
];
pub const STREAM_ACKED: TableColumn = col("acked", 12, ACKED_BITS, Show::Mbit, Judged::No);
pub const STREAM_RATES: &[TableColumn] = &[
    col("receiver", 12, RECEIVER_BITS, Show::Mbit, Judged::Receiver),
    col("sent(B)", 14, BYTES_SENT, Show::Plain, Judged::No),
    col("received(B)", 14, BYTES_RECEIVED, Show::Plain, Judged::No),
];
/// Transports that may lose datagrams.
pub const STREAM_LOSS: &[TableColumn] = &[
    col("lost(dgr)", 10, DATAGRAMS_LOST, Show::Plain, Judged::No),
    col("loss(%)", 8, LOSS_RATIO, Show::Percent, Judged::No),
    col("jitter(ms)", 10, JITTER, Show::Ms, Judged::No),
];
/// Reliable transports.
pub const STREAM_RETRANSMITS: TableColumn = col("retr", 7, RETRANSMITS, Show::Plain, Judged::No);
/// Figures of the whole point, on its sum rows only.
pub const STREAM_CPU: &[TableColumn] = &[
    col(
        "cpu_cli",
        9,
        CLIENT_US_PER_KIB,
        Show::ThreeDecimals,
        Judged::No,
    ),
    col(
        "cpu_srv",
        9,
        SERVER_US_PER_KIB,
        Show::ThreeDecimals,
        Judged::No,
    ),
];

/// crr's last column.
pub const SETUP: TableColumn = col("setup(us)", 11, SETUP_MEAN, Show::Us, Judged::No);
/// The last column of ping-pong and rr over a transport that may lose messages.
pub const LOST: TableColumn = col("lost", 7, LOST_TRANSACTIONS, Show::Plain, Judged::No);
/// With --think: the rate without the waits, beside `txn/s` over the raw time.
pub const THINK_TPS: TableColumn = col(
    "txn/s-think",
    12,
    THINK_CORRECTED_TPS,
    Show::OneDecimal,
    Judged::Latency,
);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_table_column_is_a_csv_column() {
        let csv: Vec<&str> = CSV.iter().map(|c| c.name).collect();
        let stream = STREAM_TABLE
            .iter()
            .chain(STREAM_RATES)
            .chain(STREAM_LOSS)
            .chain(STREAM_CPU)
            .chain([&STREAM_ACKED, &STREAM_RETRANSMITS]);
        for t in PINGPONG
            .iter()
            .chain(RR)
            .chain([&SETUP, &LOST])
            .chain(stream)
        {
            assert!(csv.contains(&t.column.name), "{}", t.column.name);
        }
        let mut names = csv.clone();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), csv.len(), "a column twice");
    }
}
