//! `--csv`: a header and one row per point, printed as each point completes. Written by the
//! `csv` crate (RFC 4180): a field with a comma, a quote or a line end is quoted, so a reason
//! or a host name keeps its text.

use super::model::{PointResult, RunReport};
use super::Sink;
use crate::plan::RunPlan;
use crate::stats::validity::{self, Validity};

/// Rows on stdout, each flushed as its point completes.
pub struct CsvSink {
    out: csv::Writer<std::io::Stdout>,
}

impl Default for CsvSink {
    fn default() -> Self {
        CsvSink {
            out: csv::Writer::from_writer(std::io::stdout()),
        }
    }
}

/// The header and a row per point of `report`, as one CSV text (`export --csv`).
pub fn to_string(report: &RunReport) -> anyhow::Result<String> {
    let mut w = csv::Writer::from_writer(Vec::new());
    w.write_record(COLUMNS)?;
    for p in &report.points {
        w.write_record(row(report, p))?;
    }
    let bytes = w
        .into_inner()
        .map_err(|e| anyhow::anyhow!("{}", e.error()))?;
    Ok(String::from_utf8(bytes)?)
}

pub const COLUMNS: &[&str] = &[
    "index",
    "pattern",
    "transport",
    "run_started_at",
    "client_host",
    "server_host",
    "size_bytes",
    "request_size_bytes",
    "response_size_bytes",
    "sndbuf_bytes",
    "rcvbuf_bytes",
    "server_sndbuf_bytes",
    "server_rcvbuf_bytes",
    "runs",
    "headline_mean",
    "headline_ci_half_width",
    "headline_unit",
    "rtt_samples",
    "rtt_mean_ns",
    "rtt_stddev_ns",
    "rtt_ci_half_width_ns",
    "rtt_min_ns",
    "rtt_p50_ns",
    "rtt_p90_ns",
    "rtt_p99_ns",
    "rtt_p999_ns",
    "rtt_p9999_ns",
    "rtt_max_ns",
    "one_way_mean_ns",
    "throughput_bits_per_s",
    "transactions_per_s",
    "lost_transactions",
    "setup_mean_ns",
    "sender_bits_per_s",
    "receiver_bits_per_s",
    "bytes_sent",
    "bytes_received",
    "datagrams_sent",
    "datagrams_lost",
    "loss_ratio",
    "jitter_s",
    "send_failures",
    "retransmits",
    "client_cpu_s",
    "server_cpu_s",
    "client_us_per_kib",
    "server_us_per_kib",
    "valid",
    "invalid_reason",
];

fn opt<T: ToString>(v: Option<T>) -> String {
    v.map(|x| x.to_string()).unwrap_or_default()
}

/// The verdict on every figure of a point's row: its latency point, both sums of each stream
/// direction, and the headline over runs.
pub fn point_validity(p: &PointResult) -> Validity {
    let mut parts: Vec<(String, Validity)> = Vec::new();
    if let Some(l) = &p.latency {
        parts.push((String::new(), l.validity.clone()));
    }
    if let Some(s) = &p.stream {
        let dir = |t: &super::model::DirectionTotal| {
            if s.totals.len() > 1 {
                format!("{} ", t.direction)
            } else {
                String::new()
            }
        };
        for t in &s.totals {
            parts.push((format!("{}sender", dir(t)), t.sender_validity()));
            parts.push((format!("{}receiver", dir(t)), t.receiver_validity()));
        }
    }
    if p.runs > 1 {
        parts.push(("over runs".into(), p.headline.validity.clone()));
    }
    validity::all(parts.iter().map(|(l, v)| (l.clone(), v)))
}

pub fn row(report: &RunReport, p: &PointResult) -> Vec<String> {
    let l = p.latency.as_ref();
    let r = l.map(|l| &l.rtt);
    let totals = p.stream.as_ref().map(|s| &s.totals);
    let sum = |f: &dyn Fn(&super::model::DirectionTotal) -> f64| {
        totals.map(|t| t.iter().map(f).sum::<f64>())
    };
    let loss = totals.and_then(|t| {
        t.iter().try_fold((0u64, 0u64, 0.0f64), |acc, d| {
            d.loss
                .map(|l| (acc.0 + l.sent, acc.1 + l.lost, acc.2.max(l.jitter_s)))
        })
    });
    let verdict = point_validity(p);
    vec![
        p.index.to_string(),
        report.pattern.to_string(),
        report.transport.to_string(),
        report.started_at.clone(),
        report.client_environment.hostname.clone(),
        opt(report.server_environment.as_ref().map(|e| &e.hostname)),
        p.key.size.to_string(),
        p.request_size.to_string(),
        p.response_size.to_string(),
        p.key.sndbuf.to_string(),
        p.key.rcvbuf.to_string(),
        p.key.server_sndbuf.to_string(),
        p.key.server_rcvbuf.to_string(),
        p.runs.to_string(),
        opt(p.headline.over_runs.as_ref().map(|m| m.mean)),
        opt(p.headline.over_runs.as_ref().and_then(|m| m.half_width)),
        p.headline.unit.clone(),
        opt(r.map(|r| r.samples)),
        opt(r.map(|r| r.mean_ns)),
        opt(r.map(|r| r.stddev_ns)),
        opt(r.and_then(|r| r.ci_half_width_ns)),
        opt(r.map(|r| r.min_ns)),
        opt(r.map(|r| r.median_ns)),
        opt(r.map(|r| r.p90_ns)),
        opt(r.map(|r| r.p99_ns)),
        opt(r.map(|r| r.p999_ns)),
        opt(r.map(|r| r.p9999_ns)),
        opt(r.map(|r| r.max_ns)),
        opt(l.and_then(|l| l.one_way_mean_ns)),
        opt(l.map(|l| l.throughput_bits_per_s)),
        opt(l.map(|l| l.transactions_per_s)),
        opt(l.map(|l| l.lost)),
        opt(l.and_then(|l| l.setup.as_ref()).map(|s| s.mean_ns)),
        opt(sum(&|d| d.sender_bits_per_s)),
        opt(sum(&|d| d.receiver_bits_per_s)),
        opt(sum(&|d| d.bytes_sent as f64).map(|v| v as u64)),
        opt(sum(&|d| d.bytes_received as f64).map(|v| v as u64)),
        opt(loss.map(|l| l.0)),
        opt(loss.map(|l| l.1)),
        opt(loss.map(|l| {
            if l.0 > 0 {
                l.1 as f64 / l.0 as f64
            } else {
                0.0
            }
        })),
        opt(loss.map(|l| l.2)),
        opt(sum(&|d| d.send_failures as f64).map(|v| v as u64)),
        opt(totals.and_then(|t| t.iter().map(|d| d.retransmits).sum::<Option<u64>>())),
        p.cpu.client.total_s().to_string(),
        p.cpu.server.total_s().to_string(),
        opt(p.cpu.client_us_per_kib),
        opt(p.cpu.server_us_per_kib),
        opt(verdict.valid),
        verdict.reason().to_string(),
    ]
}

impl CsvSink {
    /// Writes one record and flushes it; a failed write (a closed pipe) is said once on
    /// stderr, and the run and its saving go on.
    fn record<I, T>(&mut self, fields: I)
    where
        I: IntoIterator<Item = T>,
        T: AsRef<[u8]>,
    {
        let written = self
            .out
            .write_record(fields)
            .map_err(std::io::Error::other)
            .and_then(|()| self.out.flush());
        if written.is_err() {
            super::stdout_closed();
        }
    }
}

impl Sink for CsvSink {
    fn begin(&mut self, _: &RunReport, _: &RunPlan) {
        self.record(COLUMNS);
    }
    fn point(&mut self, report: &RunReport, p: &PointResult) {
        self.record(row(report, p));
    }
    fn finish(&mut self, _: &RunReport) {}
}
