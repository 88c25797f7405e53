//! The run's header: what was run, where and how, the table's units, and the notes on what
//! its columns count (the column header itself stands over the first row).

use super::TableSink;
use crate::model::vocab::PatternKind;
use crate::model::RunDocument;

impl TableSink {
    /// The lines that say what was run and where: version, pattern and transport, the hosts
    /// and the lab, and the settings that shape every figure.
    pub(super) fn run_lines(&self, r: &RunDocument) -> anyhow::Result<()> {
        let server = r.server.address.clone().unwrap_or_default();
        self.line(&format!(
            "# wirebench {} {} over {}{}, server {}{}",
            r.wirebench_version,
            r.pattern,
            r.transport,
            if r.settings.tls == Some(true) {
                " (TLS 1.3)"
            } else {
                ""
            },
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
            if lab.config.framing != crate::model::lab::Framing::Frame {
                self.line(&format!("#   framing {}", lab.config.framing.describe()))?;
            }
            for b in &lab.host_cpu {
                self.line(&format!(
                    "#   host {} CPU budget: {:.0}% of one CPU ({} us of CPU time every {} us, {})",
                    b.host,
                    b.share * 100.0,
                    b.quota_us,
                    b.period_us,
                    b.controller
                ))?;
            }
        }
        let st = &r.settings;
        self.line(&format!(
            "# {} stream(s), warm-up {} iterations, stop after {}, {}% confidence, {} run(s) per point{}",
            st.streams,
            st.warmup,
            [
                st.duration_ns
                    .map(|d| crate::units::format_seconds(d as f64 / 1e9)),
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
        if st.length_prefix_bytes != 0 {
            self.line(&format!(
                "# every message framed with a {}-byte length before it (a size of 0 over a byte stream is nothing on the wire otherwise); sizes, bytes and throughput count the messages' own bytes, not the prefix",
                st.length_prefix_bytes
            ))?;
        }
        match (st.arrivals, &st.open_loop) {
            (_, Some(o)) => {
                self.line(&format!(
                    "# open loop: {} arrivals (seed {}), at most {} requests in flight per connection; latency from each request's scheduled send, so queueing is in it; svc from its actual send",
                    o.arrivals, o.seed, o.max_in_flight
                ))?;
                // With requests in flight, a small write waits for the ACK of the ones before
                // it (Nagle), which the peer may delay: on loopback the last replies of every
                // point came 40 to 50 ms late without --nodelay, none with it.
                if self.acked && !st.nodelay {
                    self.line("# Nagle's algorithm on: a request written while others are unacknowledged waits for their ACK, which the peer may delay (about 40 ms on Linux); --nodelay turns it off")?;
                }
            }
            (Some(crate::model::vocab::Arrivals::Closed), None) => self.line(
                "# closed loop: each request leaves once the reply to the one before came, so a slow server slows the load it gets and its queue stays out of the latency (--arrivals poisson --rate N/s: open loop)",
            )?,
            _ => {}
        }
        if let Some(t) = st.think_ns {
            self.line(&format!(
                "# think time {} before each timed transaction: txn/s over the raw time, txn/s-think over the time without the waits; RTTs exclude them",
                crate::units::format_duration(std::time::Duration::from_nanos(t))
            ))?;
        }
        Ok(())
    }

    /// The pattern's columns laid out (their header is printed over the first row), before
    /// anything is printed: a `--columns` that leaves none is refused first.
    pub(super) fn lay_out_columns(&mut self, r: &RunDocument) -> anyhow::Result<()> {
        match r.pattern {
            PatternKind::Pingpong | PatternKind::Rr | PatternKind::Crr => {
                let (cols, before) = self.latency_columns();
                self.lay_out(cols, before)
            }
            PatternKind::Stream => {
                let cols = self.stream_columns();
                self.lay_out(cols, 1)
            }
        }
    }

    /// The table's units and the notes on what the pattern's columns count.
    pub(super) fn column_header(&self, r: &RunDocument) -> anyhow::Result<()> {
        self.line(&self.units_line(r))?;
        match r.pattern {
            PatternKind::Pingpong => {
                self.line("# latency = RTT/2 (one-way); throughput = 2n/RTT; CI = confidence interval half-width of the mean")?;
            }
            PatternKind::Rr if self.open_loop => {
                self.line("# offered = requests per second asked for; achieved = replies per second from the schedule's start to the last reply; outst = sent and not answered when the point ended; waits = requests held by --max-in-flight")?;
            }
            PatternKind::Rr | PatternKind::Crr => {
                self.line("# transaction = request + response, times are round trips; throughput counts request+response payload")?;
            }
            PatternKind::Stream => {
                self.line("# rates of payload, each side over its own clock; cpu = service demand, CPU time per KiB moved")?;
                for line in stream_rates_note(self.acked) {
                    self.line(line)?;
                }
                if r.settings.nodelay_auto {
                    self.line("# Nagle's algorithm off (TCP_NODELAY), wirebench's choice for a bulk TCP stream that TCP paces itself (BBR): every write is at least a full segment, and Nagle would only hold each write's tail; --nagle keeps it on")?;
                }
            }
        }
        Ok(())
    }

    /// The units of every column, said once at the table's top.
    fn units_line(&self, r: &RunDocument) -> String {
        let swept_buffers = self.swept.sndbuf
            || self.swept.rcvbuf
            || self.swept.server_sndbuf
            || self.swept.server_rcvbuf;
        let sizes = if swept_buffers {
            "sizes in bytes (buffers K = 1024 B, M = 1024 K)"
        } else {
            "sizes in bytes"
        };
        match r.pattern {
            PatternKind::Pingpong => format!(
                "# units: times in us (one-way = RTT/2), rates in Mbit/s (10^6 bit/s), {sizes}"
            ),
            PatternKind::Rr if r.settings.open_loop.is_some() => format!(
                "# units: times in us (latency and p50/p99/p99.9/max from the scheduled send, svc from the actual send), offered/s and achieved/s in requests per second, {sizes}"
            ),
            PatternKind::Rr | PatternKind::Crr => format!(
                "# units: times in us (round trips{}), rates in Mbit/s (10^6 bit/s), txn/s in transactions per second, {sizes}",
                if r.pattern == PatternKind::Crr {
                    ", setup: connect and handshake"
                } else {
                    ""
                }
            ),
            PatternKind::Stream => format!(
                "# units: rates in Mbit/s (10^6 bit/s), {sizes}, cpu in us per KiB{}",
                if self.unreliable {
                    ", loss in % of datagrams sent, jitter in ms"
                } else {
                    ""
                }
            ),
        }
    }
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
