//! The default output: a readable table with units in every header, one line per point as
//! it completes, and the sweep's derived metrics at the end.

use super::columns::{self, Row, TableColumn};
use super::Output;
use crate::model::{DirectionTotal, PointResult, RunReport};
use crate::pattern::stream::IntervalEvent;
use crate::pattern::{PatternKind, RcvLowat, Role};
use crate::plan::sink::{IntervalPrinter, Sink};
use crate::plan::Swept;
use crate::stats::Validity;
use crate::transport::LinkCounters;
use crate::units::format_bytes;
use crate::units::{mbit, us};

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

/// At least four significant digits, no more decimals than that needs ("14576", "6.500").
fn four_digits(v: f64) -> String {
    let magnitude = if v.abs() > 0.0 {
        v.abs().log10().floor() as i32
    } else {
        0
    };
    format!("{v:.*}", (3 - magnitude).max(0) as usize)
}

fn pct(x: f64) -> String {
    format!("{:.3}", x * 100.0)
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

    /// The ping-pong and request/response tables' columns, and how many come before the
    /// swept buffers' columns.
    fn latency_columns(&self) -> (Vec<&'static TableColumn>, usize) {
        let (mut cols, before): (Vec<&'static TableColumn>, usize) = match self.pattern {
            Some(PatternKind::Pingpong) => (columns::PINGPONG.iter().collect(), 1),
            Some(PatternKind::Rr | PatternKind::Crr) => (columns::RR.iter().collect(), 2),
            _ => (Vec::new(), 0),
        };
        if self.think {
            cols.push(&columns::THINK_TPS);
        }
        if self.pattern == Some(PatternKind::Crr) {
            cols.push(&columns::SETUP);
        } else if self.unreliable {
            cols.push(&columns::LOST);
        }
        (cols, before)
    }

    /// One line of the ping-pong or request/response table (the header or a point's row),
    /// each cell's text from `cell`, `bufs` after the columns that come before the swept
    /// buffers.
    fn latency_line(&self, bufs: &str, cell: impl Fn(&TableColumn) -> String) -> String {
        let (cols, before) = self.latency_columns();
        columns_line(&cols, before, bufs, cell)
    }

    /// The stream table's columns for this transport; the point's CPU figures only on the
    /// header and the sum rows.
    fn stream_columns(&self, with_cpu: bool) -> Vec<&'static TableColumn> {
        let mut cols: Vec<&'static TableColumn> = columns::STREAM_TABLE.iter().collect();
        if self.acked {
            cols.push(&columns::STREAM_ACKED);
        }
        cols.extend(columns::STREAM_RATES);
        if self.unreliable {
            cols.extend(columns::STREAM_LOSS);
        } else {
            cols.push(&columns::STREAM_RETRANSMITS);
        }
        if with_cpu {
            cols.extend(columns::STREAM_CPU);
        }
        cols
    }

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
    fn begin(&mut self, r: &RunReport) -> anyhow::Result<()> {
        self.pattern = Some(r.pattern);
        self.swept = r.swept;
        // Loss, jitter and reordering columns for every transport that may lose messages.
        let caps = r.transport.capabilities().ok();
        self.unreliable = caps.is_some_and(|c| !c.reliable);
        self.acked = caps.is_some_and(|c| c.tcp_options);
        self.intervals = r.settings.interval_ns.is_some();
        self.think = r.settings.think_ns.is_some();
        let server = r.server.address.clone().unwrap_or_default();
        self.line(&format!(
            "# wirebench {} {} over {}, server {}{}",
            r.wirebench_version,
            r.pattern,
            r.transport,
            server,
            if r.server.self_hosted {
                " (self-hosted on loopback)"
            } else {
                ""
            }
        ))?;
        if let Some(label) = &r.label {
            self.line(&format!("# label: {}", crate::text::printable(label)))?;
        }
        if let Some(m) = &r.server.middlebox {
            self.line(&format!(
                "# a relay, proxy or NAT is in the path ({m}){}",
                if r.server.one_port {
                    ": data connections go through the control port"
                } else {
                    ""
                }
            ))?;
        } else if r.server.one_port {
            self.line("# data connections go through the control port (--one-port)")?;
        }
        let c = &r.client_environment;
        self.line(&format!(
            "# client: {} ({}, {} CPUs, {})",
            c.hostname, c.kernel, c.cpus, c.cpu_model
        ))?;
        if let Some(s) = &r.server_environment {
            self.line(&format!(
                "# server: {} ({}, {} CPUs, {})",
                s.hostname, s.kernel, s.cpus, s.cpu_model
            ))?;
        }
        if let Some(lab) = &r.lab {
            self.line(&format!(
                "# lab {}: client on host a ({}), server on host b ({}), mechanism {}, MTU {} bytes",
                lab.name, lab.host_a.address, lab.host_b.address, lab.mechanism, lab.config.mtu
            ))?;
            for (dir, d) in [("a->b", &lab.config.forward), ("b->a", &lab.config.back)] {
                self.line(&format!("#   {dir}: {}", d.describe(lab.config.mtu)))?;
            }
        }
        let st = &r.settings;
        self.line(&format!(
            "# {} stream(s), warm-up {} iterations, stop after {}, {}% confidence, {} run(s) per point{}",
            st.streams,
            st.warmup,
            [
                st.duration_ns.map(|d| format!("{} s", d as f64 / 1e9)),
                st.bytes.map(|b| format!("{b} bytes")),
                st.iterations.map(|n| format!("{n} iterations")),
            ]
            .into_iter()
            .flatten()
            .collect::<Vec<_>>()
            .join(" or "),
            st.confidence * 100.0,
            st.repeat,
            st.until_ci
                .map(|t| format!(", until CI < {}% of mean (max {})", t * 100.0, st.max_repeat))
                .unwrap_or_default()
        ))?;
        if let Some(rate) = &st.rate {
            let rate = match rate {
                crate::units::Rate::BitsPerSecond(b) => format!("{} Mbit/s of payload", b / 1e6),
                crate::units::Rate::PacketsPerSecond(p) => format!("{p} writes/datagrams per s"),
            };
            self.line(&format!(
                "# sender paced at {rate} per direction, split evenly over the streams, {}",
                if st.pace_burst > 1 {
                    format!("{} writes/datagrams at a time", st.pace_burst)
                } else {
                    "each write/datagram on its own schedule".into()
                }
            ))?;
        }
        if let Some(w) = st.write_size {
            self.line(&format!(
                "# every request and response written in pieces of at most {w} bytes, on both ends{}",
                if st.nodelay { "" } else { " (Nagle's algorithm on: --nodelay turns it off)" }
            ))?;
        }
        if let Some(t) = st.think_ns {
            self.line(&format!(
                "# think time {} before each timed transaction: txn/s over the raw time, txn/s-think over the time without the waits; RTTs exclude them",
                crate::units::format_duration(std::time::Duration::from_nanos(t))
            ))?;
        }
        let bufs = self.buffer_headers();
        match r.pattern {
            PatternKind::Pingpong => {
                self.line("# latency = RTT/2 (one-way), microseconds; throughput = 2n/RTT in Mbit/s (10^6 bit/s); CI = confidence interval half-width of the mean")?;
                self.line(&self.latency_line(&bufs, |c| c.header.to_owned()))?;
            }
            PatternKind::Rr | PatternKind::Crr => {
                self.line("# transaction = request + response, round-trip times in microseconds; throughput counts request+response payload in Mbit/s (10^6 bit/s)")?;
                self.line(&self.latency_line(&bufs, |c| c.header.to_owned()))?;
            }
            PatternKind::Stream => {
                self.line("# rates in Mbit/s (10^6 bit/s) of payload, each side over its own clock; cpu = service demand in us of CPU per KiB moved")?;
                for line in stream_rates_note(self.acked) {
                    self.line(line)?;
                }
                if r.settings.nodelay_auto {
                    self.line("# Nagle's algorithm off (TCP_NODELAY), wirebench's choice for a bulk TCP stream that TCP paces itself (BBR): every write is at least a full segment, and Nagle would only hold each write's tail; --nagle keeps it on")?;
                }
                let cols = self.stream_columns(true);
                self.line(&columns_line(&cols, 1, &bufs, |c| c.header.to_owned()))?;
            }
        }
        Ok(())
    }

    fn point(&mut self, r: &RunReport, p: &PointResult) -> anyhow::Result<()> {
        let bufs = self.buffer_columns(p);
        match self.pattern {
            Some(PatternKind::Pingpong) => {
                let Some(l) = &p.latency else {
                    self.line(&format!("{:>9}{bufs} no completed exchanges", p.key.size))?;
                    return Ok(());
                };
                let row = Row::point(r, None, p);
                self.line(&self.latency_line(&bufs, |c| c.text(&row, &l.validity)))?;
                self.footnote("", &l.validity)?;
                self.footnote("", &l.percentile_validity("p99"))?;
            }
            Some(PatternKind::Rr | PatternKind::Crr) => {
                let Some(l) = &p.latency else {
                    self.line(&format!(
                        "{:>9}{bufs} no completed transactions",
                        p.request_size
                    ))?;
                    return Ok(());
                };
                let row = Row::point(r, None, p);
                self.line(&self.latency_line(&bufs, |c| c.text(&row, &l.validity)))?;
                self.footnote("", &l.validity)?;
                self.footnote("", &l.percentile_validity("p99"))?;
            }
            Some(PatternKind::Stream) => {
                let Some(s) = &p.stream else { return Ok(()) };
                if self.intervals {
                    // The client's own intervals were printed live; the server's arrive now.
                    self.line("  server side:")?;
                    for st in &s.streams {
                        let (stats, role) = if st.direction == "server_to_client" {
                            (&st.sender, Role::Sender)
                        } else {
                            (&st.receiver, Role::Receiver)
                        };
                        for iv in &stats.intervals {
                            print_interval(
                                &self.out,
                                &IntervalEvent {
                                    stream: st.index,
                                    role,
                                    interval: *iv,
                                },
                            )?;
                        }
                    }
                }
                let figures = Validity::default();
                if s.streams.len() > s.totals.len() {
                    let cols = self.stream_columns(false);
                    for st in &s.streams {
                        let row = Row {
                            stream: Some(st),
                            ..Row::point(r, None, p)
                        };
                        self.line(&columns_line(&cols, 1, &bufs, |c| c.text(&row, &figures)))?;
                    }
                }
                if let Some(st) = s.streams.first() {
                    let mut fallbacks: Vec<&str> = s
                        .streams
                        .iter()
                        .flat_map(|x| x.sender.fallbacks.iter().chain(x.receiver.fallbacks.iter()))
                        .map(String::as_str)
                        .collect();
                    fallbacks.dedup();
                    let zc = match (st.sender.zerocopy_completed, st.sender.zerocopy_copied) {
                        (Some(done), Some(copied)) => format!(
                            "; zero-copy sends completed {done}, of which the kernel copied {copied}"
                        ),
                        _ => String::new(),
                    };
                    let tail = match st.receiver.untimed_tail_bytes {
                        0 => String::new(),
                        b => format!(
                            " (its last {b} B untimed: they may have arrived outside its phase, ahead of its count when its clock started or after its last arrival stamp)"
                        ),
                    };
                    let woken = match st.receiver.rcvlowat_bytes {
                        Some(b) => format!(
                            " woken at {b} B queued (SO_RCVLOWAT{})",
                            match r.settings.fast.rcvlowat {
                                RcvLowat::Auto =>
                                    ", auto: 1 ms at the warm-up's rate, at most one read",
                                _ => "",
                            }
                        ),
                        None => String::new(),
                    };
                    if st.sender.io_path != "write"
                        || st.receiver.io_path != "read"
                        || !woken.is_empty()
                        || !fallbacks.is_empty()
                    {
                        self.line(&format!(
                            "{:>9}   i/o: sender {}, receiver {}{woken}{tail}{zc}{}",
                            "",
                            st.sender.io_path,
                            st.receiver.io_path,
                            if fallbacks.is_empty() {
                                String::new()
                            } else {
                                format!("; NOT used: {}", fallbacks.join("; "))
                            }
                        ))?;
                    }
                }
                let cols = self.stream_columns(true);
                for t in &s.totals {
                    let row = Row {
                        total: Some(t),
                        ..Row::point(r, None, p)
                    };
                    self.line(&columns_line(&cols, 1, &bufs, |c| c.text(&row, &figures)))?;
                    let dir = if s.totals.len() > 1 {
                        format!("{} ", t.direction)
                    } else {
                        String::new()
                    };
                    self.footnote(&format!("{dir}sender"), &t.sender_validity())?;
                    self.footnote(&format!("{dir}receiver"), &t.receiver_validity())?;
                    if let Some(line) = span_line(t) {
                        self.line(&format!("{:>9}   {dir}{line}", ""))?;
                    }
                    if self.intervals {
                        for line in sum_interval_lines(t) {
                            self.line(&line)?;
                        }
                    }
                    let several = s.streams.len() > 1;
                    for st in s.streams.iter().filter(|st| st.direction == t.direction) {
                        if let Some(n) = &st.sender.note {
                            let which = if several {
                                format!("stream {} ", st.index)
                            } else {
                                String::new()
                            };
                            self.line(&format!("{:>9}   note: {dir}{which}sender: {n}", ""))?;
                        }
                    }
                    if let Some(k) = &t.frames {
                        self.line(&format!("{:>9}   {}", "", frames_line(k)))?;
                    }
                    if let Some(g) = t.theoretical_goodput_bits_per_s {
                        self.line(&format!(
                            "{:>9}   link goodput allowed by the lab's rate{}: {} Mbit/s; receiver measured {}% of it",
                            "",
                            goodput_loss_note(r, &t.direction),
                            mbit(g),
                            marked(
                                format!("{:.2}", t.receiver_bits_per_s / g * 100.0),
                                &t.receiver_validity()
                            )
                        ))?;
                    }
                }
            }
            None => {}
        }
        if let Some(t) = &p.trace {
            self.line(&format!("{:>9}   {}", "", t.line()))?;
        }
        if let Some(l) = &p.load {
            self.line(&format!("{:>9}   {}", "", l.line()))?;
        }
        if let Some(f) = &p.fairness {
            for line in f.lines() {
                self.line(&format!("{:>9}   {}", "", line))?;
            }
        }
        if let Some(u) = &p.under_load {
            for line in u.lines() {
                self.line(&format!("{:>9}   {}", "", line))?;
            }
        }
        if p.runs > 1 {
            if let Some(m) = &p.headline.over_runs {
                self.line(&format!(
                    "{:>9}   over {} runs: {} mean {} {} ±{} ({}){}",
                    "",
                    m.n,
                    p.headline.name,
                    marked(format!("{:.4e}", m.mean), &p.headline.validity),
                    p.headline.unit,
                    m.half_width
                        .map(|h| format!("{h:.3e}"))
                        .unwrap_or_else(|| "-".into()),
                    m.relative_half_width()
                        .map(|w| format!("{:.2}% of mean", w * 100.0))
                        .unwrap_or_default(),
                    match p.headline.target_met {
                        Some(false) => ", target NOT met",
                        Some(true) => ", target met",
                        None => "",
                    }
                ))?;
                self.footnote("over runs", &p.headline.validity)?;
            }
        }
        for a in p.loss_attribution.iter().filter(|a| a.is_notable()) {
            let size = p.key.size;
            self.line(&format!(
                "# {}",
                crate::instruments::attribution::describe(a, size, &|n| n.to_string())
            ))?;
        }
        if self.host_cpu {
            if let Some(h) = &p.host_cpu {
                self.line(&host_cpu_line(p.key.size, h))?;
            }
        }
        Ok(())
    }

    fn finish(&mut self, r: &RunReport) -> anyhow::Result<()> {
        for a in &r.anomalies {
            let Some(p) = r.points.get(a.point) else {
                continue;
            };
            let k = &p.key;
            let against = |rel: Option<f64>, which: &str| {
                rel.map(|r| format!("{:+.0}% against the {which}", r * 100.0))
            };
            let sides: Vec<String> = [
                against(a.vs_previous, "previous point"),
                against(a.vs_next, "next"),
            ]
            .into_iter()
            .flatten()
            .collect();
            let peak = a.vs_previous.or(a.vs_next).is_some_and(|r| r > 0.0);
            self.line(&format!(
                "# anomaly along {}: the point at size {} B, sndbuf {}, rcvbuf {}{} ({} {} {}) is {}{}: a {} worth a second look (--repeat 5)",
                a.axis,
                k.size,
                k.sndbuf,
                k.rcvbuf,
                k.cc.map(|c| format!(", cc {c}")).unwrap_or_default(),
                p.headline.name,
                four_digits(a.value),
                p.headline.unit,
                sides.join(" and "),
                if sides.len() == 1 { " (an end of the sweep)" } else { "" },
                if peak { "peak" } else { "dip" }
            ))?;
        }
        for g in &r.sweep_metrics {
            let m = &g.metrics;
            if self.swept.sndbuf
                || self.swept.rcvbuf
                || self.swept.server_sndbuf
                || self.swept.server_rcvbuf
                || self.swept.cc
            {
                self.line(&format!(
                    "# sweep group: sndbuf {} rcvbuf {} server sndbuf {} server rcvbuf {} (0 = autotuning){}",
                    g.sndbuf,
                    g.rcvbuf,
                    g.server_sndbuf,
                    g.server_rcvbuf,
                    g.cc.map(|c| format!(", congestion control {c}")).unwrap_or_default()
                ))?;
            }
            if !m.left_out.is_empty() {
                self.line(&format!(
                    "# left out of t0, r_max, n_1/2 and the fit, their figures not being valid: {}",
                    m.left_out
                        .iter()
                        .map(|l| format!("{} B ({})", l.size, l.reason))
                        .collect::<Vec<_>>()
                        .join(", ")
                ))?;
            }
            self.line(&format!(
                "# t0 = RTT/2 of the smallest message ({} B) = {} us{}",
                m.t0_size,
                us(m.t0_ns),
                m.t0_ci_ns
                    .map(|c| format!(" ±{}", us(c)))
                    .unwrap_or_default()
            ))?;
            self.line(&format!(
                "# r_max = {} Mbit/s ({:.3} MB/s, MB = 10^6 B) at {} B{}",
                mbit(m.r_max_bits_per_s),
                m.r_max_bits_per_s / 8e6,
                m.r_max_size,
                m.r_max_ci_bits_per_s
                    .map(|(lo, hi)| format!(" [{} .. {}]", mbit(lo), mbit(hi)))
                    .unwrap_or_default()
            ))?;
            if let Some(note) = &m.r_max_note {
                self.line(&format!("#   {note}"))?;
            }
            match m.n_half_bytes {
                Some(n) => self.line(&format!(
                    "# n_1/2 = {n:.0} B (size reaching r_max/2, linear interpolation){}",
                    m.n_half_note
                        .as_deref()
                        .map(|n| format!("; {n}"))
                        .unwrap_or_default()
                ))?,
                None => self.line("# n_1/2: not reached in the measured sizes")?,
            }
            match m.valid_fit() {
                Some(f) => self.line(&format!(
                    "# fit t(n) = t0 + n/r_inf over {} sizes: t0 = {} us, r_inf = {} Mbit/s, n_1/2 = r_inf*t0 = {:.0} B, R^2 = {:.5}",
                    f.points,
                    us(f.t0_ns),
                    mbit(f.r_inf_bits_per_s),
                    f.n_half_bytes,
                    f.r_squared
                ))?,
                None => self.line(&format!(
                    "# fit t(n) = t0 + n/r_inf over {} sizes: no valid fit: {}",
                    m.points,
                    m.fit_reason()
                ))?,
            }
        }
        let setups: Vec<u64> = r
            .points
            .iter()
            .flat_map(|p| p.socket.client.iter().filter_map(|e| e.setup_ns))
            .collect();
        if let (Some(min), false) = (setups.iter().min(), setups.is_empty()) {
            let mean = setups.iter().sum::<u64>() as f64 / setups.len() as f64;
            self.line(&format!(
                "# data connection setup, client side (connect, handshake, test cookie; not in the figures above): mean {} us, min {} us over {} connections",
                us(mean),
                us(*min as f64),
                setups.len()
            ))?;
        }
        if let Some(p) = r.points.last() {
            if let Some(first) = p.latency.as_ref().and_then(|l| l.first_ns) {
                self.line(&format!(
                    "# first (warm-up) transaction of the last point: {} us round trip, not in the statistics",
                    us(first as f64)
                ))?;
            }
        }
        if !r.complete {
            self.line(&format!("# incomplete: {}", r.points_of_planned()))?;
        }
        Ok(())
    }

    fn wants_intervals(&self) -> bool {
        self.intervals
    }

    fn interval_printer(&self) -> IntervalPrinter {
        let out = self.out.clone();
        Box::new(move |ev: &IntervalEvent| print_interval(&out, ev))
    }
}

/// What the stream table's rate columns count, one header line each. The sender's is what it
/// handed to the transport, which on TCP includes what still sat in its socket buffer at the
/// end: on a 100 Mbit/s link a 2 s stream's sender read 101.3 Mbit/s. Where TCP_INFO exists,
/// the bytes the peer acknowledged over the same phase stand next to it.
/// "# host cpu at 1400 B: client user 12.0% system 30.5% softirq 8.1% (2 CPUs, busiest 97%),
/// server ..." (on one host: "client and server (one host) ...").
fn host_cpu_line(size: u64, h: &crate::model::HostCpu) -> String {
    let one = |c: &crate::instruments::CpuShare| {
        format!(
            "user {:.1}% system {:.1}% softirq {:.1}% ({} CPUs, busiest {:.0}%)",
            c.user * 100.0,
            c.system * 100.0,
            c.softirq * 100.0,
            c.cpus,
            c.busiest_cpu * 100.0
        )
    };
    let show = |c: Option<&crate::instruments::CpuShare>| c.map_or("not read".to_owned(), one);
    if h.same_host {
        format!(
            "# host cpu at {size} B: client and server (one host) {}",
            show(h.client.as_ref())
        )
    } else {
        format!(
            "# host cpu at {size} B: client {}; server {}",
            show(h.client.as_ref()),
            show(h.server.as_ref())
        )
    }
}

fn stream_rates_note(acked: bool) -> Vec<&'static str> {
    let mut lines = vec!["# sender = bytes written to the transport over the sender's timed phase (bytes still in its socket buffer at the end count); receiver = bytes read over the receiver's timed phase"];
    if acked {
        lines.push("# acked = bytes the peer acknowledged over the sender's timed phase (TCP_INFO): what reached the receiver's kernel");
    }
    lines
}

/// A sum over several streams on one clock: the window each side's total is over.
fn span_line(t: &DirectionTotal) -> Option<String> {
    let side = |name: &str, s: &Option<crate::model::span::TotalSpan>| {
        s.map(|s| format!("{name} over their {}", s.phrase()))
    };
    let parts: Vec<String> = [
        side("senders", &t.sender_span),
        side("receivers", &t.receiver_span),
    ]
    .into_iter()
    .flatten()
    .collect();
    (!parts.is_empty()).then(|| {
        format!(
            "sum of {} streams on one clock: {}",
            t.streams,
            parts.join("; ")
        )
    })
}

/// The receivers' account of a transport's own numbered frames (raw), in one line.
/// ", its queue and 2% loss per frame" when the lab's direction loses frames: the goodput then
/// counts only messages whose every frame arrives (for TCP, an upper bound).
fn goodput_loss_note(r: &RunReport, direction: &str) -> String {
    let Some(lab) = &r.lab else {
        return String::new();
    };
    let d = if direction == "client_to_server" {
        &lab.config.forward
    } else {
        &lab.config.back
    };
    if d.loss > 0.0 {
        format!(
            " less its {}% loss per frame ({})",
            d.loss * 100.0,
            if r.transport == crate::transport::TransportKind::Tcp {
                "an upper bound: TCP resends what is lost and may slow down far below it"
            } else {
                "messages lost whole when any frame is"
            }
        )
    } else {
        String::new()
    }
}

fn frames_line(k: &LinkCounters) -> String {
    format!(
        "link frames (receiver, warm-up included): {} received, {} lost ({}%), {} reordered, {} duplicated, {} dropped late; {} messages incomplete",
        k.received,
        k.lost,
        pct(k.loss_ratio),
        k.reordered,
        k.duplicated,
        k.late,
        k.messages_incomplete
    )
}

/// The receivers' sum over -P streams interval by interval on one clock, in the per-stream
/// interval lines' columns (iperf3's `[SUM]`); a sum the guard found impossible is marked,
/// with its reason.
fn sum_interval_lines(t: &DirectionTotal) -> Vec<String> {
    t.receiver_intervals
        .iter()
        .map(|iv| {
            let reason = if iv.validity.is_invalid() {
                format!("  ! not valid: {}", iv.validity.reason())
            } else {
                String::new()
            };
            format!(
                "  [SUM] {:>8} {:7.2}-{:<7.2} s {:>14} B {:>10} Mbit/s{reason}",
                "received",
                iv.start_ns as f64 / 1e9,
                iv.end_ns as f64 / 1e9,
                iv.bytes,
                marked(mbit(iv.bits_per_s), &iv.validity),
            )
        })
        .collect()
}

/// One interval line; senders on TCP add the kernel's view of the connection.
fn print_interval(out: &Output, ev: &IntervalEvent) -> anyhow::Result<()> {
    let iv = &ev.interval;
    let acked = iv
        .acked_bits_per_s()
        .map(|r| format!("  acked {} Mbit/s", mbit(r)))
        .unwrap_or_default();
    let tcp = iv
        .tcp_info
        .map(|t| {
            format!(
                "{acked}  rtt {:.3} ms rttvar {:.3} ms cwnd {} seg retr {} unacked {} B delivery {} Mbit/s{}",
                f64::from(t.rtt_us) / 1e3,
                f64::from(t.rttvar_us) / 1e3,
                t.snd_cwnd,
                iv.retransmits.unwrap_or(0),
                t.unacked_bytes,
                mbit(t.delivery_rate_bits_per_s as f64),
                if t.pacing_rate_bits_per_s > 0 {
                    format!(" pacing {} Mbit/s", mbit(t.pacing_rate_bits_per_s as f64))
                } else {
                    String::new()
                }
            )
        })
        .unwrap_or_default();
    table_line(
        out,
        &format!(
            "  [{:>3}] {:>8} {:7.2}-{:<7.2} s {:>14} B {:>10} Mbit/s{}",
            ev.stream,
            match ev.role {
                Role::Sender => "sent",
                _ => "received",
            },
            iv.start_ns as f64 / 1e9,
            iv.end_ns as f64 / 1e9,
            iv.bytes,
            mbit(iv.bits_per_s),
            if matches!(ev.role, Role::Sender) {
                tcp
            } else {
                String::new()
            }
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_frames_line_says_what_it_counts() {
        let k = LinkCounters {
            received: 12034,
            lost: 611,
            reordered: 3,
            late: 2,
            messages_incomplete: 590,
            ..LinkCounters::default()
        }
        .with_loss_ratio();
        assert_eq!(
            frames_line(&k),
            "link frames (receiver, warm-up included): 12034 received, 611 lost (4.832%), \
             3 reordered, 0 duplicated, 2 dropped late; 590 messages incomplete"
        );
    }
}
