//! The default output: a readable table with units in every header, one line per point as
//! it completes, and the sweep's derived metrics at the end.

use std::io::Write;

use super::model::{PointResult, RunReport};
use super::{mbit, us, IntervalPrinter, Sink};
use crate::pattern::stream::IntervalEvent;
use crate::pattern::{PatternKind, RcvLowat, Role};
use crate::plan::{RunPlan, Swept};
use crate::stats::Validity;
use crate::transport::LinkCounters;
use crate::units::format_bytes;

pub struct TableSink {
    pattern: Option<PatternKind>,
    swept: Swept,
    unreliable: bool,
    /// The transport's kernel keeps TCP_INFO: streams show the acknowledged rate.
    acked: bool,
    intervals: bool,
}

impl TableSink {
    pub fn new() -> TableSink {
        TableSink {
            pattern: None,
            swept: Swept::default(),
            unreliable: false,
            acked: false,
            intervals: false,
        }
    }
}

impl Default for TableSink {
    fn default() -> Self {
        Self::new()
    }
}

/// Every table line goes out here: host names, kernels, CPU models and notes in it may come
/// from the peer or from an imported file, so their control characters are escaped.
fn out(line: &str) {
    let mut o = std::io::stdout().lock();
    let _ = writeln!(o, "{}", crate::text::printable_lines(line));
}

fn pct(x: f64) -> String {
    format!("{:.3}", x * 100.0)
}

/// A figure with "!" after it when it is not a valid measurement.
fn marked(figure: String, v: &Validity) -> String {
    format!("{figure}{}", v.mark())
}

/// The footnote under an invalid figure's row: "! WHAT: REASON".
fn footnote(what: &str, v: &Validity) {
    if v.is_invalid() {
        let what = if what.is_empty() {
            String::new()
        } else {
            format!("{what}: ")
        };
        out(&format!("{:>9}   ! {what}{}", "", v.reason()));
    }
}

impl TableSink {
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
        s
    }

    /// The `acked` column's cell, for transports whose kernel keeps TCP_INFO.
    fn acked_column(&self, cell: &str) -> String {
        if self.acked {
            format!(" {cell:>12}")
        } else {
            String::new()
        }
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
        s
    }
}

impl Sink for TableSink {
    fn begin(&mut self, r: &RunReport, plan: &RunPlan) {
        self.pattern = Some(plan.test.pattern);
        self.swept = plan.swept;
        // Loss, jitter and reordering columns for every transport that may lose messages.
        let caps = r.transport.capabilities().ok();
        self.unreliable = caps.is_some_and(|c| !c.reliable);
        self.acked = caps.is_some_and(|c| c.tcp_options);
        self.intervals = plan.test.interval_ms.is_some();
        let server = r.server.address.clone().unwrap_or_default();
        out(&format!(
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
        ));
        if let Some(label) = &r.label {
            out(&format!("# label: {}", crate::text::printable(label)));
        }
        if let Some(m) = &r.server.middlebox {
            out(&format!(
                "# a relay, proxy or NAT is in the path ({m}){}",
                if r.server.one_port {
                    ": data connections go through the control port"
                } else {
                    ""
                }
            ));
        } else if r.server.one_port {
            out("# data connections go through the control port (--one-port)");
        }
        let c = &r.client_environment;
        out(&format!(
            "# client: {} ({}, {} CPUs, {})",
            c.hostname, c.kernel, c.cpus, c.cpu_model
        ));
        if let Some(s) = &r.server_environment {
            out(&format!(
                "# server: {} ({}, {} CPUs, {})",
                s.hostname, s.kernel, s.cpus, s.cpu_model
            ));
        }
        if let Some(lab) = &r.lab {
            out(&format!(
                "# lab {}: client on host a ({}), server on host b ({}), mechanism {}, MTU {} bytes",
                lab.name, lab.host_a.address, lab.host_b.address, lab.mechanism, lab.config.mtu
            ));
            for (dir, d) in [("a->b", &lab.config.forward), ("b->a", &lab.config.back)] {
                out(&format!("#   {dir}: {}", d.describe(lab.config.mtu)));
            }
        }
        let st = &r.settings;
        out(&format!(
            "# {} stream(s), warm-up {} iterations, stop after {}, {}% confidence, {} run(s) per point{}",
            st.streams,
            st.warmup,
            [
                st.duration_s.map(|d| format!("{d} s")),
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
        ));
        if let Some(rate) = &st.rate {
            let rate = match rate {
                crate::units::Rate::BitsPerSecond(b) => format!("{} Mbit/s of payload", b / 1e6),
                crate::units::Rate::PacketsPerSecond(p) => format!("{p} writes/datagrams per s"),
            };
            out(&format!(
                "# sender paced at {rate} per direction, split evenly over the streams, {}",
                if st.pace_burst > 1 {
                    format!("{} writes/datagrams at a time", st.pace_burst)
                } else {
                    "each write/datagram on its own schedule".into()
                }
            ));
        }
        let bufs = self.buffer_headers();
        match plan.test.pattern {
            PatternKind::Pingpong => {
                out("# latency = RTT/2 (one-way), microseconds; throughput = 2n/RTT in Mbit/s (10^6 bit/s); CI = confidence interval half-width of the mean");
                out(&format!(
                    "{:>9}{bufs} {:>9} {:>11} {:>9} {:>9} {:>9} {:>9} {:>9} {:>11}{}",
                    "size(B)",
                    "samples",
                    "mean(us)",
                    "±CI(us)",
                    "min(us)",
                    "p50(us)",
                    "p99(us)",
                    "max(us)",
                    "Mbit/s",
                    if self.unreliable {
                        format!(" {:>7}", "lost")
                    } else {
                        String::new()
                    }
                ));
            }
            PatternKind::Rr | PatternKind::Crr => {
                out("# transaction = request + response, round-trip times in microseconds; throughput counts request+response payload in Mbit/s (10^6 bit/s)");
                out(&format!(
                    "{:>9} {:>9}{bufs} {:>9} {:>11} {:>10} {:>9} {:>9} {:>9} {:>9} {:>9}{}",
                    "req(B)",
                    "resp(B)",
                    "txns",
                    "txn/s",
                    "mean(us)",
                    "±CI(us)",
                    "p50(us)",
                    "p99(us)",
                    "max(us)",
                    "Mbit/s",
                    if plan.test.pattern == PatternKind::Crr {
                        format!(" {:>11}", "setup(us)")
                    } else if self.unreliable {
                        format!(" {:>7}", "lost")
                    } else {
                        String::new()
                    }
                ));
            }
            PatternKind::Stream => {
                out("# rates in Mbit/s (10^6 bit/s) of payload, each side over its own clock; cpu = service demand in us of CPU per KiB moved");
                for line in stream_rates_note(self.acked) {
                    out(line);
                }
                out(&format!(
                    "{:>9}{bufs} {:>7} {:>17} {:>12}{} {:>12} {:>14} {:>14}{} {:>9} {:>9}",
                    "size(B)",
                    "stream",
                    "direction",
                    "sender",
                    self.acked_column("acked"),
                    "receiver",
                    "sent(B)",
                    "received(B)",
                    if self.unreliable {
                        format!(" {:>10} {:>8} {:>10}", "lost(dgr)", "loss(%)", "jitter(ms)")
                    } else {
                        format!(" {:>7}", "retr")
                    },
                    "cpu_cli",
                    "cpu_srv"
                ));
            }
        }
    }

    fn point(&mut self, r: &RunReport, p: &PointResult) {
        let bufs = self.buffer_columns(p);
        match self.pattern {
            Some(PatternKind::Pingpong) => {
                let Some(l) = &p.latency else {
                    out(&format!("{:>9}{bufs} no completed exchanges", p.key.size));
                    return;
                };
                let r = &l.rtt;
                out(&format!(
                    "{:>9}{bufs} {:>9} {:>11} {:>9} {:>9} {:>9} {:>9} {:>9} {:>11}{}",
                    p.key.size,
                    r.samples,
                    marked(us(r.mean_ns / 2.0), &l.validity),
                    r.ci_half_width_ns
                        .map(|h| marked(us(h / 2.0), &l.validity))
                        .unwrap_or_else(|| "-".into()),
                    us(r.min_ns as f64 / 2.0),
                    us(r.median_ns as f64 / 2.0),
                    us(r.p99_ns as f64 / 2.0),
                    us(r.max_ns as f64 / 2.0),
                    marked(mbit(l.throughput_bits_per_s), &l.validity),
                    if self.unreliable {
                        format!(" {:>7}", l.lost)
                    } else {
                        String::new()
                    }
                ));
                footnote("", &l.validity);
            }
            Some(PatternKind::Rr | PatternKind::Crr) => {
                let Some(l) = &p.latency else {
                    out(&format!(
                        "{:>9}{bufs} no completed transactions",
                        p.request_size
                    ));
                    return;
                };
                let r = &l.rtt;
                out(&format!(
                    "{:>9} {:>9}{bufs} {:>9} {:>11} {:>10} {:>9} {:>9} {:>9} {:>9} {:>9}{}",
                    p.request_size,
                    p.response_size,
                    l.transactions,
                    marked(format!("{:.1}", l.transactions_per_s), &l.validity),
                    marked(us(r.mean_ns), &l.validity),
                    r.ci_half_width_ns
                        .map(|h| marked(us(h), &l.validity))
                        .unwrap_or_else(|| "-".into()),
                    us(r.median_ns as f64),
                    us(r.p99_ns as f64),
                    us(r.max_ns as f64),
                    marked(mbit(l.throughput_bits_per_s), &l.validity),
                    match (&l.setup, self.unreliable) {
                        (Some(s), _) => format!(" {:>11}", us(s.mean_ns)),
                        (None, true) => format!(" {:>7}", l.lost),
                        _ => String::new(),
                    }
                ));
                footnote("", &l.validity);
            }
            Some(PatternKind::Stream) => {
                let Some(s) = &p.stream else { return };
                if self.intervals {
                    // The client's own intervals were printed live; the server's arrive now.
                    out("  server side:");
                    for st in &s.streams {
                        let (stats, role) = if st.direction == "server_to_client" {
                            (&st.sender, Role::Sender)
                        } else {
                            (&st.receiver, Role::Receiver)
                        };
                        for iv in &stats.intervals {
                            print_interval(&IntervalEvent {
                                stream: st.index,
                                role,
                                interval: *iv,
                            });
                        }
                    }
                }
                let cpu =
                    |v: Option<f64>| v.map(|x| format!("{x:.3}")).unwrap_or_else(|| "-".into());
                let extra =
                    |loss: Option<crate::pattern::stream::LossStats>, retr: Option<u64>| match loss
                    {
                        Some(l) if self.unreliable => format!(
                            " {:>10} {:>8} {:>10.4}",
                            l.lost,
                            pct(l.loss_ratio),
                            l.jitter_s * 1e3
                        ),
                        _ => format!(
                            " {:>7}",
                            retr.map(|r| r.to_string()).unwrap_or_else(|| "-".into())
                        ),
                    };
                if s.streams.len() > s.totals.len() {
                    for st in &s.streams {
                        out(&format!(
                            "{:>9}{bufs} {:>7} {:>17} {:>12}{} {:>12} {:>14} {:>14}{}",
                            p.key.size,
                            st.index,
                            st.direction,
                            marked(mbit(st.sender.bits_per_s), &st.sender.validity),
                            self.acked_column(&opt_mbit(st.sender.acked_bits_per_s)),
                            marked(mbit(st.receiver.bits_per_s), &st.receiver.validity),
                            st.sender.bytes_total,
                            st.receiver.bytes_total,
                            extra(
                                st.receiver.loss,
                                st.sender.tcp_info.map(|t| u64::from(t.total_retrans))
                            )
                        ));
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
                            " (its last {b} B untimed: as much may have arrived ahead of its count when its clock started)"
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
                        out(&format!(
                            "{:>9}   i/o: sender {}, receiver {}{woken}{tail}{zc}{}",
                            "",
                            st.sender.io_path,
                            st.receiver.io_path,
                            if fallbacks.is_empty() {
                                String::new()
                            } else {
                                format!("; NOT used: {}", fallbacks.join("; "))
                            }
                        ));
                    }
                }
                for t in &s.totals {
                    out(&format!(
                        "{:>9}{bufs} {:>7} {:>17} {:>12}{} {:>12} {:>14} {:>14}{} {:>9} {:>9}",
                        p.key.size,
                        if s.streams.len() > s.totals.len() {
                            "sum"
                        } else {
                            "0"
                        },
                        t.direction,
                        marked(mbit(t.sender_bits_per_s), &t.sender_validity()),
                        self.acked_column(&opt_mbit(t.acked_bits_per_s)),
                        marked(mbit(t.receiver_bits_per_s), &t.receiver_validity()),
                        t.bytes_sent,
                        t.bytes_received,
                        extra(t.loss, t.retransmits),
                        cpu(p.cpu.client_us_per_kib),
                        cpu(p.cpu.server_us_per_kib),
                    ));
                    let dir = if s.totals.len() > 1 {
                        format!("{} ", t.direction)
                    } else {
                        String::new()
                    };
                    footnote(&format!("{dir}sender"), &t.sender_validity());
                    footnote(&format!("{dir}receiver"), &t.receiver_validity());
                    if let Some(k) = &t.frames {
                        out(&format!("{:>9}   {}", "", frames_line(k)));
                    }
                    if let Some(g) = t.theoretical_goodput_bits_per_s {
                        out(&format!(
                            "{:>9}   link goodput allowed by the lab's rate{}: {} Mbit/s; receiver measured {}% of it",
                            "",
                            goodput_loss_note(r, &t.direction),
                            mbit(g),
                            marked(
                                format!("{:.2}", t.receiver_bits_per_s / g * 100.0),
                                &t.receiver_validity()
                            )
                        ));
                    }
                }
            }
            None => {}
        }
        if p.runs > 1 {
            if let Some(m) = &p.headline.over_runs {
                out(&format!(
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
                ));
                footnote("over runs", &p.headline.validity);
            }
        }
    }

    fn finish(&mut self, r: &RunReport) {
        for g in &r.sweep_metrics {
            let m = &g.metrics;
            if self.swept.sndbuf
                || self.swept.rcvbuf
                || self.swept.server_sndbuf
                || self.swept.server_rcvbuf
            {
                out(&format!(
                    "# sweep group: sndbuf {} rcvbuf {} server sndbuf {} server rcvbuf {} (0 = autotuning)",
                    g.sndbuf, g.rcvbuf, g.server_sndbuf, g.server_rcvbuf
                ));
            }
            if !m.left_out.is_empty() {
                out(&format!(
                    "# left out of t0, r_max, n_1/2 and the fit, their figures not being valid: {}",
                    m.left_out
                        .iter()
                        .map(|l| format!("{} B ({})", l.size, l.reason))
                        .collect::<Vec<_>>()
                        .join(", ")
                ));
            }
            out(&format!(
                "# t0 = RTT/2 of the smallest message ({} B) = {} us{}",
                m.t0_size,
                us(m.t0_s * 1e9),
                m.t0_ci_s
                    .map(|c| format!(" ±{}", us(c * 1e9)))
                    .unwrap_or_default()
            ));
            out(&format!(
                "# r_max = {} Mbit/s ({:.3} MB/s, MB = 10^6 B) at {} B{}",
                mbit(m.r_max_bytes_per_s * 8.0),
                m.r_max_bytes_per_s / 1e6,
                m.r_max_size,
                m.r_max_ci_bytes_per_s
                    .map(|(lo, hi)| format!(" [{} .. {}]", mbit(lo * 8.0), mbit(hi * 8.0)))
                    .unwrap_or_default()
            ));
            if let Some(note) = &m.r_max_note {
                out(&format!("#   {note}"));
            }
            match m.n_half_bytes {
                Some(n) => out(&format!(
                    "# n_1/2 = {n:.0} B (size reaching r_max/2, linear interpolation){}",
                    m.n_half_note
                        .as_deref()
                        .map(|n| format!("; {n}"))
                        .unwrap_or_default()
                )),
                None => out("# n_1/2: not reached in the measured sizes"),
            }
            match m.valid_fit() {
                Some(f) => out(&format!(
                    "# fit t(n) = t0 + n/r_inf over {} sizes: t0 = {} us, r_inf = {} Mbit/s, n_1/2 = r_inf*t0 = {:.0} B, R^2 = {:.5}",
                    f.points,
                    us(f.t0_s * 1e9),
                    mbit(f.r_inf_bytes_per_s * 8.0),
                    f.n_half_bytes,
                    f.r_squared
                )),
                None => out(&format!(
                    "# fit t(n) = t0 + n/r_inf over {} sizes: no valid fit: {}",
                    m.points,
                    m.fit_reason()
                )),
            }
        }
        let setups: Vec<u64> = r
            .points
            .iter()
            .flat_map(|p| p.socket.client.iter().filter_map(|e| e.setup_ns))
            .collect();
        if let (Some(min), false) = (setups.iter().min(), setups.is_empty()) {
            let mean = setups.iter().sum::<u64>() as f64 / setups.len() as f64;
            out(&format!(
                "# data connection setup, client side (connect, handshake, test cookie; not in the figures above): mean {} us, min {} us over {} connections",
                us(mean),
                us(*min as f64),
                setups.len()
            ));
        }
        if let Some(p) = r.points.last() {
            if let Some(first) = p.latency.as_ref().and_then(|l| l.first_ns) {
                out(&format!(
                    "# first (warm-up) transaction of the last point: {} us round trip, not in the statistics",
                    us(first as f64)
                ));
            }
        }
        if !r.complete {
            out(&format!(
                "# incomplete: {} of the planned points measured",
                r.points.len()
            ));
        }
    }

    fn wants_intervals(&self) -> bool {
        self.intervals
    }

    fn interval_printer(&self) -> IntervalPrinter {
        Box::new(print_interval)
    }
}

/// A rate in Mbit/s, or "-" where it is unknown.
fn opt_mbit(bits_per_s: Option<f64>) -> String {
    bits_per_s.map(mbit).unwrap_or_else(|| "-".into())
}

/// What the stream table's rate columns count, one header line each. The sender's is what it
/// handed to the transport, which on TCP includes what still sat in its socket buffer at the
/// end: on a 100 Mbit/s link a 2 s stream's sender read 101.3 Mbit/s. Where TCP_INFO exists,
/// the bytes the peer acknowledged over the same phase stand next to it.
fn stream_rates_note(acked: bool) -> Vec<&'static str> {
    let mut lines = vec!["# sender = bytes written to the transport over the sender's timed phase (bytes still in its socket buffer at the end count); receiver = bytes read over the receiver's timed phase"];
    if acked {
        lines.push("# acked = bytes the peer acknowledged over the sender's timed phase (TCP_INFO): what reached the receiver's kernel");
    }
    lines
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

/// One interval line; senders on TCP add the kernel's view of the connection.
fn print_interval(ev: &IntervalEvent) {
    {
        {
            let iv = &ev.interval;
            let acked = iv
                .acked_bits_per_s()
                .map(|r| format!("  acked {} Mbit/s", mbit(r)))
                .unwrap_or_default();
            let tcp = iv
                .tcp_info
                .map(|t| {
                    format!(
                        "{acked}  rtt {:.3} ms rttvar {:.3} ms cwnd {} seg retr {} unacked {} B delivery {} Mbit/s",
                        f64::from(t.rtt_us) / 1e3,
                        f64::from(t.rttvar_us) / 1e3,
                        t.snd_cwnd,
                        iv.retransmits.unwrap_or(0),
                        t.unacked_bytes,
                        mbit(t.delivery_rate_bits_per_s as f64)
                    )
                })
                .unwrap_or_default();
            out(&format!(
                "  [{:>3}] {:>8} {:7.2}-{:<7.2} s {:>14} B {:>10} Mbit/s{}",
                ev.stream,
                match ev.role {
                    Role::Sender => "sent",
                    _ => "received",
                },
                iv.start_s,
                iv.end_s,
                iv.bytes,
                mbit(iv.bits_per_s),
                if matches!(ev.role, Role::Sender) {
                    tcp
                } else {
                    String::new()
                }
            ));
        }
    }
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
