//! The default output: a readable table, one line per point as it completes, through the one
//! table renderer ([`crate::text::table::LiveTable`]: a row wider than its columns prints the
//! header again above it), or as a Markdown table printed whole at the end (`--format
//! markdown`); `--columns` keeps some of its columns.
//!
//! The units once at the top and in every header, and the sweep's derived metrics at the end.
//! The sink and the table's columns live here; what it writes is one file per part: the run's
//! header (header.rs), a ping-pong or request/response point's row (exchange.rs), a stream point's rows (stream.rs)
//! and the interval lines (intervals.rs), the lines under any point (notes.rs), the stages of
//! `--path-timing` (path.rs), and the run's summary at the end (summary.rs).

mod exchange;
mod header;
mod intervals;
mod notes;
mod path;
mod stream;
mod summary;

use std::cell::RefCell;

use super::columns::{Row, TableColumn};
use super::Output;
use crate::model::stream::IntervalEvent;
use crate::model::vocab::PatternKind;
use crate::model::Swept;
use crate::model::{PointResult, RunDocument};
use crate::plan::sink::{IntervalPrinter, Sink};
use crate::stats::Validity;
use crate::text::table::{Column, LiveTable, NoteLabel, Style, Table};
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
    /// rr with open-loop arrivals: the QPS-against-latency table.
    open_loop: bool,
    /// Both hosts' CPU shares under each point (--host-cpu).
    host_cpu: bool,
    /// Plain (printed a row at a time) or Markdown (printed whole at the end).
    style: Style,
    /// `--columns`: the CSV names of the columns to keep (None: all of them).
    selection: Option<Vec<String>>,
    /// The table's columns, in order, once `begin` has laid them out.
    layout: Vec<RunColumn>,
    /// What has been printed or gathered so far; behind a cell because every line, row or
    /// note goes through it from methods that only read the rest of the sink.
    body: RefCell<Body>,
}

/// The table as it goes.
enum Body {
    /// Rows printed as they come; the column header right before the first row, so that any
    /// interval lines printed live while the point ran stand above it and not between the
    /// header and its rows.
    Plain { live: LiveTable, header_shown: bool },
    /// A Markdown table can hold no line between its rows: the lines before the table, the
    /// table with its notes, and the lines after it are gathered and printed at the end.
    Markdown {
        before: Vec<String>,
        table: Table,
        after: Vec<String>,
        /// Tables of their own after the lines after it (a sweep's path timing matrix).
        blocks: Vec<String>,
    },
}

/// A swept setting shown in its own column.
#[derive(Clone, Copy)]
enum SweptKey {
    Sndbuf,
    Rcvbuf,
    ServerSndbuf,
    ServerRcvbuf,
    Cc,
}

/// A column of the run table.
#[derive(Clone, Copy)]
enum RunColumn {
    /// One of the pattern's figures; `sums_only`: a figure of the whole point, empty on a
    /// stream's own row.
    Figure {
        column: &'static TableColumn,
        sums_only: bool,
    },
    /// A swept buffer's or congestion control's value.
    Swept(SweptKey),
}

impl RunColumn {
    fn figure(column: &'static TableColumn) -> RunColumn {
        RunColumn::Figure {
            column,
            sums_only: false,
        }
    }

    /// The CSV column it shows, the name `--columns` picks it by.
    fn name(&self) -> &'static str {
        match self {
            RunColumn::Figure { column, .. } => column.column.name,
            RunColumn::Swept(SweptKey::Sndbuf) => "sndbuf_bytes",
            RunColumn::Swept(SweptKey::Rcvbuf) => "rcvbuf_bytes",
            RunColumn::Swept(SweptKey::ServerSndbuf) => "server_sndbuf_bytes",
            RunColumn::Swept(SweptKey::ServerRcvbuf) => "server_rcvbuf_bytes",
            RunColumn::Swept(SweptKey::Cc) => "cc",
        }
    }

    fn header(&self) -> &'static str {
        match self {
            RunColumn::Figure { column, .. } => column.header,
            RunColumn::Swept(SweptKey::Sndbuf) => "sndbuf(B)",
            RunColumn::Swept(SweptKey::Rcvbuf) => "rcvbuf(B)",
            RunColumn::Swept(SweptKey::ServerSndbuf) => "s_sndbuf(B)",
            RunColumn::Swept(SweptKey::ServerRcvbuf) => "s_rcvbuf(B)",
            RunColumn::Swept(SweptKey::Cc) => "cc",
        }
    }

    /// The renderer's column: numbers and names alike right-aligned, as the table always had
    /// them.
    fn column(&self) -> Column {
        let min = match self {
            RunColumn::Figure { column, .. } => column.min_width,
            RunColumn::Swept(_) => 8,
        };
        Column::right(self.header()).min_width(min)
    }

    /// The cell of `row`; `latency` is the verdict on the point's latency figures, `sum`
    /// whether the row is a point's or a direction's (not one stream's).
    fn cell(&self, row: &Row, latency: &Validity, sum: bool) -> String {
        let k = &row.point.key;
        match self {
            RunColumn::Figure {
                sums_only: true, ..
            } if !sum => String::new(),
            RunColumn::Figure { column, .. } => column.text(row, latency),
            RunColumn::Swept(SweptKey::Sndbuf) => format_bytes(k.sndbuf),
            RunColumn::Swept(SweptKey::Rcvbuf) => format_bytes(k.rcvbuf),
            RunColumn::Swept(SweptKey::ServerSndbuf) => format_bytes(k.server_sndbuf),
            RunColumn::Swept(SweptKey::ServerRcvbuf) => format_bytes(k.server_rcvbuf),
            RunColumn::Swept(SweptKey::Cc) => {
                k.cc.map_or_else(|| "-".to_owned(), |c| c.to_string())
            }
        }
    }
}

impl TableSink {
    /// Also shows both hosts' CPU shares under each point.
    pub fn with_host_cpu(mut self, on: bool) -> TableSink {
        self.host_cpu = on;
        self
    }

    /// Written as a Markdown table (at the end of the run) or a plain one (row by row).
    pub fn with_style(mut self, style: Style) -> TableSink {
        self.style = style;
        self
    }

    /// Only the columns showing these CSV columns (`--columns`), in the table's order.
    pub fn with_columns(mut self, names: Option<Vec<String>>) -> TableSink {
        self.selection = names;
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
            open_loop: false,
            host_cpu: false,
            style: Style::Plain,
            selection: None,
            layout: Vec::new(),
            body: RefCell::new(Body::Plain {
                live: LiveTable::new(Vec::new()),
                header_shown: false,
            }),
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

fn table_line(out: &Output, line: &str) -> anyhow::Result<()> {
    out.line(&crate::text::printable_lines(line))
}

/// A figure with "!" after it when it is not a valid measurement.
fn marked(figure: String, v: &Validity) -> String {
    format!("{figure}{}", v.mark())
}

/// How far a line said under a row is indented, past the first column.
const UNDER: &str = "            ";

impl TableSink {
    /// Every line outside the columns goes out here: host names, kernels, CPU models and notes
    /// in it may come from the peer or from an imported file, so their control characters are
    /// escaped. A Markdown table gathers it, before or after the table.
    fn line(&self, line: &str) -> anyhow::Result<()> {
        match &mut *self.body.borrow_mut() {
            Body::Plain { .. } => table_line(&self.out, line),
            Body::Markdown {
                before,
                table,
                after,
                ..
            } => {
                let to = if table.is_empty() { before } else { after };
                to.push(crate::text::printable_lines(line).into_owned());
                Ok(())
            }
        }
    }

    /// A line said under the row before it, indented past the first column; a note of a
    /// Markdown table.
    fn under(&self, text: &str) -> anyhow::Result<()> {
        self.said_under(&format!("{UNDER}{text}"), text)
    }

    /// A line under the row before it, `plain` as it stands in a plain table, `note` as the
    /// Markdown table's note. Said of a point before its first row (a stream's i/o paths),
    /// it stands under the column header, as it did when the header came first.
    fn said_under(&self, plain: &str, note: &str) -> anyhow::Result<()> {
        match &mut *self.body.borrow_mut() {
            Body::Plain { live, header_shown } => {
                if !*header_shown {
                    table_line(&self.out, &live.header())?;
                    *header_shown = true;
                }
                table_line(&self.out, plain)
            }
            Body::Markdown { table, .. } => {
                table.note(note);
                Ok(())
            }
        }
    }

    /// A row of the table, after its column header when it is the first row (or the first
    /// since interval lines were printed) or when it widened a column.
    fn row(&self, cells: Vec<String>) -> anyhow::Result<()> {
        self.row_then(cells, None)
    }

    /// A row, and `tail` said after its cells (a point that measured nothing).
    fn row_then(&self, cells: Vec<String>, tail: Option<&str>) -> anyhow::Result<()> {
        match &mut *self.body.borrow_mut() {
            Body::Plain { live, header_shown } => {
                let mut lines = Vec::new();
                if !*header_shown {
                    lines.push(live.header());
                    *header_shown = true;
                }
                let mut printed = live.row(cells);
                if printed.len() > 1 && lines.len() == 1 {
                    // Widened: the header it prints again is the one just added.
                    lines.clear();
                }
                if let (Some(tail), Some(last)) = (tail, printed.last_mut()) {
                    last.push_str("  ");
                    last.push_str(tail);
                }
                lines.append(&mut printed);
                for l in lines {
                    table_line(&self.out, &l)?;
                }
                Ok(())
            }
            Body::Markdown { table, .. } => {
                table.row(cells);
                if let Some(tail) = tail {
                    table.note(tail);
                }
                Ok(())
            }
        }
    }

    /// A row's cells, column by column.
    fn cells(&self, row: &Row, latency: &Validity, sum: bool) -> Vec<String> {
        self.layout
            .iter()
            .map(|c| c.cell(row, latency, sum))
            .collect()
    }

    /// The footnote under an invalid figure's row: "! WHAT: REASON".
    fn footnote(&self, what: &str, v: &Validity) -> anyhow::Result<()> {
        if v.is_invalid() {
            let what = if what.is_empty() {
                String::new()
            } else {
                format!("{what}: ")
            };
            self.under(&format!("! {what}{}", v.reason()))?;
        }
        Ok(())
    }

    /// The swept buffers' (and congestion control's) columns, in the order they stand.
    fn swept_columns(&self) -> Vec<RunColumn> {
        [
            (self.swept.sndbuf, SweptKey::Sndbuf),
            (self.swept.rcvbuf, SweptKey::Rcvbuf),
            (self.swept.server_sndbuf, SweptKey::ServerSndbuf),
            (self.swept.server_rcvbuf, SweptKey::ServerRcvbuf),
            (self.swept.cc, SweptKey::Cc),
        ]
        .into_iter()
        .filter(|(on, _)| *on)
        .map(|(_, k)| RunColumn::Swept(k))
        .collect()
    }

    /// The pattern's columns with the swept ones after the first `before`, less those
    /// `--columns` leaves out; an error when it leaves none.
    fn lay_out(&mut self, figures: Vec<RunColumn>, before: usize) -> anyhow::Result<()> {
        let mut layout = figures;
        let at = before.min(layout.len());
        let swept = self.swept_columns();
        layout.splice(at..at, swept);
        if let Some(names) = &self.selection {
            let all: Vec<&str> = layout.iter().map(RunColumn::name).collect();
            layout.retain(|c| names.iter().any(|n| n == c.name()));
            if layout.is_empty() {
                anyhow::bail!(
                    "--columns: none of {} is a column of this table (its columns: {})",
                    names.join(","),
                    all.join(",")
                );
            }
        }
        let columns: Vec<Column> = layout.iter().map(RunColumn::column).collect();
        self.layout = layout;
        let body = self.body.get_mut();
        match body {
            Body::Plain { live, header_shown } => {
                *live = LiveTable::new(columns);
                *header_shown = false;
            }
            Body::Markdown { table, .. } => {
                // With --columns the first cell may be any figure: notes name rows by number.
                let label = if self.selection.is_some() {
                    NoteLabel::RowNumber
                } else {
                    NoteLabel::FirstCell
                };
                *table = Table::new(columns).note_label(label);
            }
        }
        Ok(())
    }

    /// The gathered Markdown table: the lines before it and after it as lists around it.
    fn print_markdown(&self) -> anyhow::Result<()> {
        let Body::Markdown {
            before,
            table,
            after,
            blocks,
        } = &*self.body.borrow()
        else {
            return Ok(());
        };
        let list = |lines: &[String]| -> String {
            lines
                .iter()
                .map(|l| format!("- {}\n", l.trim_start_matches('#').trim()))
                .collect()
        };
        let mut text = list(before);
        if !text.is_empty() {
            text.push('\n');
        }
        text.push_str(&table.render(Style::Markdown));
        if !after.is_empty() {
            text.push('\n');
            text.push_str(&list(after));
        }
        for b in blocks {
            text.push('\n');
            text.push_str(b);
        }
        self.out.write_all(text.as_bytes())
    }
}

impl Sink for TableSink {
    fn begin(&mut self, r: &RunDocument) -> anyhow::Result<()> {
        if self.style == Style::Markdown {
            *self.body.get_mut() = Body::Markdown {
                before: Vec::new(),
                table: Table::new(Vec::new()),
                after: Vec::new(),
                blocks: Vec::new(),
            };
        }
        self.pattern = Some(r.pattern);
        self.swept = r.swept;
        // Loss, jitter and reordering columns for every transport that may lose messages.
        let caps = r.transport.capabilities().ok();
        self.unreliable = caps.is_some_and(|c| !c.reliable);
        self.acked = caps.is_some_and(|c| c.tcp_options);
        // A Markdown table is the table and its notes: interval lines are in --json.
        self.intervals = r.settings.interval_ns.is_some() && self.style == Style::Plain;
        self.think = r.settings.think_ns.is_some();
        self.open_loop = r.settings.open_loop.is_some();
        self.lay_out_columns(r)?;
        self.run_lines(r)?;
        self.column_header(r)
    }

    fn point(&mut self, r: &RunDocument, p: &PointResult) -> anyhow::Result<()> {
        if self.intervals {
            // This point's interval lines were printed above: its rows get their header again.
            if let Body::Plain { header_shown, .. } = self.body.get_mut() {
                *header_shown = false;
            }
        }
        let rows = match self.pattern {
            Some(PatternKind::Pingpong) => self.exchange_row(r, p, "exchanges")?,
            Some(PatternKind::Rr | PatternKind::Crr) => self.exchange_row(r, p, "transactions")?,
            Some(PatternKind::Stream) => self.stream_rows(r, p)?,
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
        self.path_matrix(r)?;
        self.run_notes(r)?;
        self.print_markdown()
    }

    fn wants_intervals(&self) -> bool {
        self.intervals
    }

    fn interval_printer(&self) -> IntervalPrinter {
        let out = self.out.clone();
        Box::new(move |ev: &IntervalEvent| intervals::print_interval(&out, ev))
    }
}
