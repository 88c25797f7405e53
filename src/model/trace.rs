//! A segment trace as a run records it: the capture's own figures and one summary per TCP
//! connection captured, with the lines `run` and `trace show` print from them.

use serde::{Deserialize, Serialize};

use crate::units::{format_seconds, format_us};

/// Where the capture runs.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum, schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum TraceSide {
    /// In the client's network namespace.
    Client,
    /// In the server's (a self-hosted server's, or the lab's host b).
    Server,
}

impl TraceSide {
    pub fn name(self) -> &'static str {
        match self {
            TraceSide::Client => "client",
            TraceSide::Server => "server",
        }
    }
}

/// A trace's summary: in the point's JSON, and what `trace show` prints for a file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct TraceSummary {
    /// The pcap file.
    pub file: String,
    /// Where the capture ran (null for a file read back by `trace show`).
    pub side: Option<TraceSide>,
    /// Packets in the file (on loopback each once: the outgoing copy).
    pub packets: u64,
    /// Packets the kernel dropped because the capture fell behind (PACKET_STATISTICS); null
    /// for a file read back.
    pub dropped: Option<u64>,
    /// CPU time of the capture thread, nanoseconds.
    pub capture_cpu_ns: Option<u64>,
    /// How long the capture ran, nanoseconds.
    pub capture_elapsed_ns: Option<u64>,
    /// `capture_cpu_ns` over `capture_elapsed_ns`: the share of one CPU the trace cost.
    pub capture_cpu_share: Option<f64>,
    /// `capture_cpu_ns` over the CPU time of the same side's data threads in the point.
    pub capture_cpu_vs_data_threads: Option<f64>,
    /// The completeness check: data segments the data connections' senders on the capture's
    /// host sent by their own count (TCP_INFO `tcpi_data_segs_out`, retransmissions
    /// included, summed over the connections), read at each connection's end. Null where no
    /// data sender ran on the capture's host, a sender did not report it, or for a file read
    /// back.
    #[serde(default)]
    pub sender_data_segments: Option<u64>,
    /// The same senders' data frames in the capture, each counted as the kernel counts it:
    /// ceil(payload / MSS) segments for a GSO/TSO super-frame.
    #[serde(default)]
    pub captured_data_segments: Option<u64>,
    /// `sender_data_segments` minus `captured_data_segments`: frames missing from the
    /// capture when positive; negative when the capture counted more than the kernel (an
    /// MSS that changed during the connection). 0: every data frame is in the file.
    #[serde(default)]
    pub missing_data_segments: Option<i64>,
    /// Why the completeness check was not made, or where it may not be exact (a sender's
    /// count read before all it sent was acknowledged); null when it was made and is exact.
    #[serde(default)]
    pub completeness_note: Option<String>,
    /// One summary per TCP connection captured, in order of first appearance.
    pub flows: Vec<FlowSummary>,
    /// The kernel's TCP state per received segment (the `tcp:tcp_probe` tracepoint) on the
    /// data connections' sockets, from the sidecar file written beside the pcap. Null with
    /// --no-trace-probe, or for a file read back without its sidecar; with `unavailable`
    /// set when the tracepoint could not be read.
    #[serde(default)]
    pub tcp_probe: Option<ProbeSummary>,
}

/// What the `tcp:tcp_probe` tracepoint showed of the data connections' sockets. The kernel
/// fires it for every segment a socket in the established state receives (on the sender,
/// each ACK; on the receiver, each data segment), with the socket's state after it.
/// Read with `--trace-probe`, on the data's sending sockets (see `notes`). Tracepoints are
/// one for the whole kernel, not per network namespace: the samples are those of every
/// socket keyed by the data port, which in the lab (hosts sharing one kernel) includes the
/// other host's sockets.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ProbeSummary {
    /// The sidecar CSV the samples were written to (null when unavailable).
    pub file: Option<String>,
    /// Samples in the sidecar.
    pub samples: u64,
    /// Samples the kernel dropped because the per-CPU ring was full (PERF_RECORD_LOST);
    /// null for a file read back.
    pub lost: Option<u64>,
    /// CPU time of the thread that read the rings and wrote the sidecar, nanoseconds.
    pub reader_cpu_ns: Option<u64>,
    /// How long the reader ran, nanoseconds.
    pub reader_elapsed_ns: Option<u64>,
    /// `reader_cpu_ns` over `reader_elapsed_ns`: the share of one CPU the reader cost (the
    /// kernel's own cost of firing the tracepoint is in the data threads' time, not here).
    pub reader_cpu_share: Option<f64>,
    /// One entry per socket seen (by the kernel's socket cookie), in order of first sample.
    pub sockets: Vec<ProbeSocket>,
    /// Why there are no samples: the tracepoint could not be read (no tracefs, no
    /// permission, no tcp_probe in this kernel). Null when it was read.
    pub unavailable: Option<String>,
    /// What else a reader should know (tracefs mounted by this run, a clock moved by an
    /// offset, ports other connections may share).
    pub notes: Vec<String>,
}

/// Which end of a connection a socket is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ProbeRole {
    /// The end that sends the data: its samples are per ACK received.
    Sender,
    /// The end that receives it: its samples are per data segment received.
    Receiver,
}

/// One socket's tcp_probe figures. Windows in bytes, the congestion window and slow-start
/// threshold in segments (of the socket's MSS), srtt in microseconds (the kernel's
/// smoothed RTT); min/p50/max are over the socket's samples, one per received segment.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ProbeSocket {
    /// The socket's own port and its peer's.
    pub local_port: u16,
    pub remote_port: u16,
    /// The captured connection it belongs to ("SENDER -> RECEIVER" as in `flows`), matched
    /// by ports; null when the pcap holds no such connection.
    pub flow: Option<String>,
    /// Its end of that connection (null without a matching connection).
    pub role: Option<ProbeRole>,
    pub samples: u64,
    /// How far snd_una moved from the first sample to the last: bytes of its own data the
    /// peer acknowledged meanwhile.
    pub bytes_acked: u64,
    pub cwnd_min: u32,
    pub cwnd_max: u32,
    pub cwnd_last: u32,
    /// The slow-start threshold at the last sample, and its smallest value; null while it
    /// is the kernel's "infinite" initial value (slow start never ended). tcp_probe logs
    /// `tcp_current_ssthresh`: outside a window reduction (recovery, CWR) that is the larger
    /// of snd_ssthresh and 3/4 of the congestion window, not snd_ssthresh itself.
    pub ssthresh_last: Option<u32>,
    pub ssthresh_min: Option<u32>,
    /// Smoothed RTT over the samples that had one (null when none had).
    pub srtt_min_us: Option<u32>,
    pub srtt_p50_us: Option<u32>,
    pub srtt_max_us: Option<u32>,
    /// The window its peer last advertised (snd_wnd) and the one it last offered (rcv_wnd).
    pub snd_wnd_last: u32,
    pub rcv_wnd_last: u32,
}

impl ProbeSummary {
    /// A summary that says why there is none.
    pub fn unavailable(why: String) -> ProbeSummary {
        ProbeSummary {
            file: None,
            samples: 0,
            lost: None,
            reader_cpu_ns: None,
            reader_elapsed_ns: None,
            reader_cpu_share: None,
            sockets: vec![],
            unavailable: Some(why),
            notes: vec![],
        }
    }

    /// The part of the trace line after "tcp_probe: ".
    pub fn line(&self) -> String {
        if let Some(why) = &self.unavailable {
            return format!("unavailable ({why})");
        }
        let mut s = format!(
            "{} samples, {} lost",
            self.samples,
            self.lost.map_or("?".into(), |l| l.to_string())
        );
        if let Some(c) = self.reader_cpu_share {
            s.push_str(&format!(", reader cost {:.1}% of one CPU", c * 100.0));
        }
        let senders: Vec<&ProbeSocket> = self
            .sockets
            .iter()
            .filter(|k| k.role == Some(ProbeRole::Sender))
            .collect();
        for k in senders {
            s.push_str(&format!("; sender :{} {}", k.local_port, k.state_line()));
        }
        s
    }

    /// Lines for `trace show`.
    pub fn text(&self) -> String {
        let mut s = String::from("tcp_probe: ");
        if let Some(why) = &self.unavailable {
            s.push_str(&format!(
                "unavailable ({why})
"
            ));
            return s;
        }
        s.push_str(&format!(
            "{} samples in {}, {} lost, {} socket(s)
",
            self.samples,
            self.file.as_deref().unwrap_or("-"),
            self.lost.map_or("?".into(), |l| l.to_string()),
            self.sockets.len()
        ));
        for k in &self.sockets {
            s.push_str(&format!(
                "  :{} -> :{} ({}{}): {} samples, {} bytes acked
    {}
",
                k.local_port,
                k.remote_port,
                k.role.map_or("no captured connection", |r| match r {
                    ProbeRole::Sender => "sender",
                    ProbeRole::Receiver => "receiver",
                }),
                k.flow
                    .as_ref()
                    .map_or(String::new(), |f| format!(" of {f}")),
                k.samples,
                k.bytes_acked,
                k.state_line()
            ));
        }
        for n in &self.notes {
            s.push_str(&format!(
                "  note: {n}
"
            ));
        }
        s
    }
}

impl ProbeSocket {
    /// "cwnd 10..245 (last 200) segments, ssthresh 180 (min 120), srtt 21/35/410 us
    /// (min/p50/max), snd_wnd 3.1 MiB, rcv_wnd 64 KiB (last)".
    fn state_line(&self) -> String {
        let opt = |v: Option<u32>| v.map_or("-".into(), |v| v.to_string());
        format!(
            "cwnd {}..{} (last {}) segments, ssthresh {}, srtt {}/{}/{} us (min/p50/max), snd_wnd {} B, rcv_wnd {} B (last)",
            self.cwnd_min,
            self.cwnd_max,
            self.cwnd_last,
            match (self.ssthresh_last, self.ssthresh_min) {
                (None, None) => "infinite (slow start never ended)".to_owned(),
                (l, m) => format!("{} (min {})", l.map_or("infinite".into(), |v| v.to_string()), opt(m)),
            },
            opt(self.srtt_min_us),
            opt(self.srtt_p50_us),
            opt(self.srtt_max_us),
            self.snd_wnd_last,
            self.rcv_wnd_last
        )
    }
}

impl TraceSummary {
    /// The line printed under the table, e.g. "trace: 12 345 segments, 0 dropped, capture
    /// cost 2.1% of one CPU ...".
    pub fn line(&self) -> String {
        let sum = |f: fn(&FlowSummary) -> u64| self.flows.iter().map(f).sum::<u64>();
        let (data, acks, sub) = (
            sum(|f| f.data_segments),
            sum(|f| f.acks),
            sum(|f| f.sub_mss_segments),
        );
        let mut s = format!(
            "trace: {} segments in {}, {} dropped",
            self.packets,
            self.file,
            self.dropped.map_or("?".into(), |d| d.to_string())
        );
        if let Some(c) = self.capture_cpu_share {
            s.push_str(&format!(", capture cost {:.1}% of one CPU", c * 100.0));
            if let Some(d) = self.capture_cpu_vs_data_threads {
                s.push_str(&format!(" ({:.1}% of the data threads' CPU)", d * 100.0));
            }
        }
        s.push_str(&format!(
            "; {} connection(s): {} data segments, {} bytes ({} retransmissions), {} ACKs{}, {} sub-MSS, {} delayed ACKs, {} stops ({})",
            self.flows.len(),
            data,
            sum(|f| f.data_bytes),
            sum(|f| f.retransmitted_segments),
            acks,
            if acks > 0 {
                format!(" ({:.2} segments per ACK)", data as f64 / acks as f64)
            } else {
                String::new()
            },
            if data > 0 {
                format!("{:.1}%", sub as f64 / data as f64 * 100.0)
            } else {
                "-".into()
            },
            sum(|f| f.delayed_acks),
            sum(|f| f.stops),
            format_seconds(sum(|f| f.stopped_ns) as f64 / 1e9)
        ));
        if self.flows.iter().any(|f| f.window_shift.is_none()) {
            s.push_str(", windows unscaled (handshake not captured)");
        }
        if let Some(c) = self.completeness() {
            s.push_str("; ");
            s.push_str(&c);
        }
        if let Some(p) = &self.tcp_probe {
            s.push_str("; tcp_probe: ");
            s.push_str(&p.line());
        }
        s
    }

    /// The completeness check in words: whether every data frame the senders on the
    /// capture's host sent is in the file, and if not, how many are missing.
    pub fn completeness(&self) -> Option<String> {
        let note = self
            .completeness_note
            .as_ref()
            .map_or(String::new(), |n| format!(" ({n})"));
        match (
            self.sender_data_segments,
            self.captured_data_segments,
            self.missing_data_segments,
        ) {
            (Some(sent), Some(_), Some(0)) => Some(format!(
                "complete: all {sent} data segments the sender counted are in the file{note}"
            )),
            (Some(sent), Some(_), Some(m)) if m > 0 => Some(format!(
                "INCOMPLETE: {m} of the {sent} data segments the sender counted are missing from the file{note}"
            )),
            (Some(sent), Some(got), Some(_)) => Some(format!(
                "MISMATCH: the file holds {got} data segments, the sender counted {sent}{note}"
            )),
            _ => self
                .completeness_note
                .as_ref()
                .map(|n| format!("completeness not checked: {n}")),
        }
    }

    /// Several lines for `trace show`: the capture, then each connection.
    pub fn text(&self) -> String {
        let mut s = format!(
            "{}: {} packets, {} TCP connection(s)\n",
            self.file,
            self.packets,
            self.flows.len()
        );
        let seconds = |ns: u64| ns as f64 / 1e9;
        let opt = |v: Option<f64>, f: &dyn Fn(f64) -> String| v.map_or("-".into(), f);
        if let Some(c) = self.completeness() {
            s.push_str(&format!("{c}\n"));
        }
        for f in &self.flows {
            s.push_str(&format!(
                "{} -> {} over {}\n  data: {} segments, {} bytes, {} unique; {} retransmissions ({} bytes repeated)\n  ACKs: {} ({} segments, {} bytes per ACK); {} delayed ACKs (>= 35 ms beyond the quickest ACK, {})\n  MSS {} ({}): {} segments below it ({})\n  window scale: {}\n  stops: {} gaps longer than {} (median gap {}), {} in all\n",
                f.sender,
                f.receiver,
                format_seconds(f.duration_ns as f64 / 1e9),
                f.data_segments,
                f.data_bytes,
                f.unique_data_bytes,
                f.retransmitted_segments,
                f.repeated_bytes,
                f.acks,
                opt(f.segments_per_ack, &|v| format!("{v:.2}")),
                opt(f.bytes_per_ack, &|v| format!("{v:.0}")),
                f.delayed_acks,
                opt(f.ack_baseline_ns.map(|ns| ns as f64), &format_us),
                f.mss,
                if f.mss_from_syn { "from the SYN" } else { "largest segment: handshake not captured" },
                f.sub_mss_segments,
                opt(f.sub_mss_share, &|v| format!("{:.1}%", v * 100.0)),
                f.window_shift.map_or("unscaled (handshake not captured)".into(), |w| format!("shift {w}")),
                f.stops,
                opt(f.stop_threshold_ns.map(seconds), &format_seconds),
                opt(f.median_gap_ns.map(seconds), &format_seconds),
                format_seconds(seconds(f.stopped_ns)),
            ));
        }
        if let Some(p) = &self.tcp_probe {
            s.push_str(&p.text());
        }
        s
    }
}

/// One connection's summary, as the run's JSON and `trace show` give it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct FlowSummary {
    /// The end that sent the payload (the one that sent more of it), as ADDR:PORT.
    pub sender: String,
    pub receiver: String,
    /// From the flow's first segment to its last in the capture, nanoseconds.
    pub duration_ns: u64,
    /// Segments from the sender with payload, as captured: a GSO/TSO super-segment, as the
    /// capture point saw it, counts once.
    pub data_segments: u64,
    /// Payload bytes of those segments, retransmissions included.
    pub data_bytes: u64,
    /// Data segments that started below the highest sequence number seen before them
    /// (retransmissions; on the receiver's side also those that fill a hole left by a loss).
    pub retransmitted_segments: u64,
    /// Of `data_bytes`, the bytes this capture had already seen (a hole filled on the
    /// receiver's side is new bytes, not repeated ones).
    pub repeated_bytes: u64,
    /// `data_bytes` minus `repeated_bytes`: each byte of the stream once.
    pub unique_data_bytes: u64,
    /// Segments from the receiver with the ACK flag and no payload.
    pub acks: u64,
    /// Data segments per pure ACK (null without ACKs).
    pub segments_per_ack: Option<f64>,
    /// Payload bytes per pure ACK (null without ACKs).
    pub bytes_per_ack: Option<f64>,
    /// The payload of a full segment, which the small-segment share is measured against:
    /// the MSS the receiver announced in its SYN, less the TCP options of the sender's data
    /// segments (12 bytes with time stamps), when the handshake was captured; else the
    /// largest data segment captured.
    pub mss: u32,
    /// Whether `mss` came from the receiver's SYN.
    pub mss_from_syn: bool,
    /// Data segments with fewer payload bytes than `mss`, and their share of `data_segments`.
    pub sub_mss_segments: u64,
    pub sub_mss_share: Option<f64>,
    /// The receiver's window scale shift when both SYNs were captured (0 when either side
    /// did not offer scaling); null when the handshake was not captured: the advertised
    /// windows are then the raw 16-bit field, unscaled.
    pub window_shift: Option<u8>,
    /// ACKs that came at least 35 ms later than the flow's quickest ACK after data (its
    /// round trip at the capture point), with no data in between: the receiver's
    /// delayed-ACK timer.
    pub delayed_acks: u64,
    /// The quickest data-to-ACK gap seen, the baseline of `delayed_acks`, nanoseconds.
    pub ack_baseline_ns: Option<u64>,
    /// Median gap between consecutive data segments, nanoseconds.
    pub median_gap_ns: Option<u64>,
    /// Gaps in the data longer than `stop_threshold_ns` (10 median gaps, at least 1 ms):
    /// how many, and their total time.
    pub stops: u64,
    pub stopped_ns: u64,
    pub stop_threshold_ns: Option<u64>,
}
