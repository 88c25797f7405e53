//! The default output: a readable table, one line per point as it completes.
//!
//! Units in every header, and the sweep's derived metrics at the end. The sink and the layout
//! of a line live here; what it writes is one file per part: the run's header (header.rs), a
//! ping-pong or request/response point's row (exchange.rs), a stream point's rows (stream.rs)
//! and the interval lines (intervals.rs), the lines under any point (notes.rs), and the run's
//! summary at the end (summary.rs).

mod exchange;
mod header;
mod intervals;
mod notes;
mod stream;
mod summary;

use super::columns::TableColumn;
use super::Output;
use crate::model::stream::IntervalEvent;
use crate::model::vocab::PatternKind;
use crate::model::Swept;
use crate::model::{PointResult, RunDocument};
use crate::plan::sink::{IntervalPrinter, Sink};
use crate::stats::Validity;
use crate::units::format_bytes;

pub struct TableSink {
    out: Output,
    pattern: Option<PatternKind>,
    swept: Swept,
    unreliable: bool,
    /// The transport's kernel keeps TCP_INFO: streams show the acknowledged rate.
    acked: bool,
    intervals: bool,
    /// --think: exchanges show their rate without the waits too.
    think: bool,
    /// Both hosts' CPU shares under each point (--host-cpu).
    host_cpu: bool,
}

impl TableSink {
    /// Also shows both hosts' CPU shares under each point.
    pub fn with_host_cpu(mut self, on: bool) -> TableSink {
        self.host_cpu = on;
        self
    }

    /// A table on stdout.
    pub fn new() -> TableSink {
        TableSink::to(Output::stdout())
    }

    pub fn to(out: Output) -> TableSink {
        TableSink {
            out,
            pattern: None,
            swept: Swept::default(),
            unreliable: false,
            acked: false,
            intervals: false,
            think: false,
            host_cpu: false,
        }
    }
}

impl Default for TableSink {
    fn default() -> Self {
        Self::new()
    }
}

/// What a point's rows said of it.
enum Rows {
    /// Its figures: the lines under every point follow.
    Measured,
    /// Nothing was measured: nothing more is said of the point.
    Unmeasured,
}

/// A table line: each cell's text from `cell`, right-aligned in its column and separated by a
/// space, `bufs` (the swept buffers' cells) after the first `before` columns.
fn columns_line(
    cols: &[&TableColumn],
    before: usize,
    bufs: &str,
    cell: impl Fn(&TableColumn) -> String,
) -> String {
    let mut line = String::new();
    for (i, c) in cols.iter().enumerate() {
        if i > 0 {
            line.push(' ');
        }
        line.push_str(&format!("{:>w$}", cell(c), w = c.width));
        if i + 1 == before {
            line.push_str(bufs);
        }
    }
    line
}

fn table_line(out: &Output, line: &str) -> anyhow::Result<()> {
    out.line(&crate::text::printable_lines(line))
}

/// A figure with "!" after it when it is not a valid measurement.
fn marked(figure: String, v: &Validity) -> String {
    format!("{figure}{}", v.mark())
}

impl TableSink {
    /// Every table line goes out here: host names, kernels, CPU models and notes in it may
    /// come from the peer or from an imported file, so their control characters are escaped.
    fn line(&self, line: &str) -> anyhow::Result<()> {
        table_line(&self.out, line)
    }

    /// The footnote under an invalid figure's row: "! WHAT: REASON".
    fn footnote(&self, what: &str, v: &Validity) -> anyhow::Result<()> {
        if v.is_invalid() {
            let what = if what.is_empty() {
                String::new()
            } else {
                format!("{what}: ")
            };
            self.line(&format!("{:>9}   ! {what}{}", "", v.reason()))?;
        }
        Ok(())
    }

    /// The swept buffers' (and congestion control's) cells of a point's row.
    fn buffer_columns(&self, p: &PointResult) -> String {
        let mut s = String::new();
        let k = &p.key;
        for (on, v) in [
            (self.swept.sndbuf, k.sndbuf),
            (self.swept.rcvbuf, k.rcvbuf),
            (self.swept.server_sndbuf, k.server_sndbuf),
            (self.swept.server_rcvbuf, k.server_rcvbuf),
        ] {
            if on {
                s.push_str(&format!(" {:>9}", format_bytes(v)));
            }
        }
        if self.swept.cc {
            let cc = k.cc.map_or_else(|| "-".to_owned(), |c| c.to_string());
            s.push_str(&format!(" {cc:>9}"));
        }
        s
    }

    /// The swept buffers' (and congestion control's) headers, as [`Self::buffer_columns`]
    /// lays out their cells.
    fn buffer_headers(&self) -> String {
        let mut s = String::new();
        for (on, h) in [
            (self.swept.sndbuf, "sndbuf(B)"),
            (self.swept.rcvbuf, "rcvbuf(B)"),
            (self.swept.server_sndbuf, "s_sndbuf(B)"),
            (self.swept.server_rcvbuf, "s_rcvbuf(B)"),
        ] {
            if on {
                s.push_str(&format!(" {h:>9}"));
            }
        }
        if self.swept.cc {
            s.push_str(&format!(" {:>9}", "cc"));
        }
        s
    }
}

impl Sink for TableSink {
    fn begin(&mut self, r: &RunDocument) -> anyhow::Result<()> {
        self.pattern = Some(r.pattern);
        self.swept = r.swept;
        // Loss, jitter and reordering columns for every transport that may lose messages.
        let caps = r.transport.capabilities().ok();
        self.unreliable = caps.is_some_and(|c| !c.reliable);
        self.acked = caps.is_some_and(|c| c.tcp_options);
        self.intervals = r.settings.interval_ns.is_some();
        self.think = r.settings.think_ns.is_some();
        self.run_lines(r)?;
        self.column_header(r)
    }

    fn point(&mut self, r: &RunDocument, p: &PointResult) -> anyhow::Result<()> {
        let bufs = self.buffer_columns(p);
        let rows = match self.pattern {
            Some(PatternKind::Pingpong) => {
                self.exchange_row(r, p, &bufs, p.key.size, "exchanges")?
            }
            Some(PatternKind::Rr | PatternKind::Crr) => {
                self.exchange_row(r, p, &bufs, p.request_size, "transactions")?
            }
            Some(PatternKind::Stream) => self.stream_rows(r, p, &bufs)?,
            // A point before `begin` has no table to be a row of; the lines under it stand.
            None => Rows::Measured,
        };
        match rows {
            Rows::Measured => self.point_notes(p),
            Rows::Unmeasured => Ok(()),
        }
    }

    fn finish(&mut self, r: &RunDocument) -> anyhow::Result<()> {
        self.anomalies(r)?;
        self.sweep_metrics(r)?;
        self.run_notes(r)
    }

    fn wants_intervals(&self) -> bool {
        self.intervals
    }

    fn interval_printer(&self) -> IntervalPrinter {
        let out = self.out.clone();
        Box::new(move |ev: &IntervalEvent| intervals::print_interval(&out, ev))
    }
}
