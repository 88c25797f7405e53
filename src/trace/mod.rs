//! Segment-flow traces (`--trace FILE`): the TCP segments of a point's data connections
//! captured with kernel time stamps into a pcap file, and what they show: segment sizes,
//! bytes outstanding, the advertised window, ACK ratios, delayed ACKs, stops and
//! retransmissions. `pcap`, `segment` and `flow` are pure code; `capture` reads the socket.

pub mod capture;
pub mod flow;
pub mod pcap;
pub mod segment;

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

pub use flow::{analyse, Flow, FlowSeries, FlowSummary};

/// Bytes of each packet kept by default: IP and TCP headers with options, no payload.
pub const DEFAULT_SNAPLEN: u32 = 128;

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

/// `--trace` as asked.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TraceRequest {
    pub file: PathBuf,
    /// None: the side that sends the data (the client's for --bidir).
    pub side: Option<TraceSide>,
    pub snaplen: u32,
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
    /// One summary per TCP connection captured, in order of first appearance.
    pub flows: Vec<FlowSummary>,
}

impl TraceSummary {
    /// A summary of `segments` with no capture figures (those are filled in by the caller).
    pub fn of_segments(file: &Path, packets: u64, segments: &[segment::Segment]) -> TraceSummary {
        TraceSummary {
            file: file.display().to_string(),
            side: None,
            packets,
            dropped: None,
            capture_cpu_ns: None,
            capture_elapsed_ns: None,
            capture_cpu_share: None,
            capture_cpu_vs_data_threads: None,
            flows: analyse(segments).into_iter().map(|f| f.summary).collect(),
        }
    }

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
            "; {} connection(s): {} data segments, {} bytes ({} retransmissions), {} ACKs{}, {} sub-MSS, {} delayed ACKs, {} stops ({:.1} ms)",
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
            sum(|f| f.stopped_ns) as f64 / 1e6
        ));
        if self.flows.iter().any(|f| f.window_shift.is_none()) {
            s.push_str(", windows unscaled (handshake not captured)");
        }
        s
    }
}

impl TraceSummary {
    /// Several lines for `trace show`: the capture, then each connection.
    pub fn text(&self) -> String {
        let mut s = format!(
            "{}: {} packets, {} TCP connection(s)\n",
            self.file,
            self.packets,
            self.flows.len()
        );
        let ms = |ns: u64| ns as f64 / 1e6;
        let opt = |v: Option<f64>, f: &dyn Fn(f64) -> String| v.map_or("-".into(), f);
        for f in &self.flows {
            s.push_str(&format!(
                "{} -> {} over {:.3} s\n  data: {} segments, {} bytes, {} unique; {} retransmissions ({} bytes repeated)\n  ACKs: {} ({} segments, {} bytes per ACK); {} delayed ACKs (>= 35 ms beyond the quickest ACK, {} ms)\n  MSS {} ({}): {} segments below it ({})\n  window scale: {}\n  stops: {} gaps longer than {} ms (median gap {} ms), {:.3} ms in all\n",
                f.sender,
                f.receiver,
                f.duration_ns as f64 / 1e9,
                f.data_segments,
                f.data_bytes,
                f.unique_data_bytes,
                f.retransmitted_segments,
                f.repeated_bytes,
                f.acks,
                opt(f.segments_per_ack, &|v| format!("{v:.2}")),
                opt(f.bytes_per_ack, &|v| format!("{v:.0}")),
                f.delayed_acks,
                opt(f.ack_baseline_ns.map(ms), &|v| format!("{v:.3}")),
                f.mss,
                if f.mss_from_syn { "from the SYN" } else { "largest segment: handshake not captured" },
                f.sub_mss_segments,
                opt(f.sub_mss_share, &|v| format!("{:.1}%", v * 100.0)),
                f.window_shift.map_or("unscaled (handshake not captured)".into(), |w| format!("shift {w}")),
                f.stops,
                opt(f.stop_threshold_ns.map(ms), &|v| format!("{v:.3}")),
                opt(f.median_gap_ns.map(ms), &|v| format!("{v:.3}")),
                ms(f.stopped_ns),
            ));
        }
        s
    }
}

/// The file of the `run`-th run of point `point`: FILE itself for a run of one point once,
/// else FILE with "-pN" (and "-rM" with repeats) before its extension.
pub fn file_for(file: &Path, point: usize, points: usize, run: u32, runs: u32) -> PathBuf {
    if points <= 1 && runs <= 1 {
        return file.to_owned();
    }
    let stem = file
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    let mut name = format!("{stem}-p{}", point + 1);
    if runs > 1 {
        name.push_str(&format!("-r{}", run + 1));
    }
    if let Some(ext) = file.extension() {
        name.push('.');
        name.push_str(&ext.to_string_lossy());
    }
    file.with_file_name(name)
}

/// Reads a pcap file: its packets' count and their TCP segments.
pub fn read_file(path: &Path) -> anyhow::Result<(u64, Vec<segment::Segment>)> {
    use anyhow::Context;
    let bytes = std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
    let packets = pcap::read(&bytes).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
    let segments = packets
        .iter()
        .filter_map(|p| segment::parse(p.t_ns, &p.data, p.orig_len))
        .collect();
    Ok((packets.len() as u64, segments))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn files_are_named_per_point_and_run_only_when_there_are_several() {
        let f = Path::new("/tmp/x/flow.pcap");
        assert_eq!(file_for(f, 0, 1, 0, 1), f);
        assert_eq!(file_for(f, 1, 3, 0, 1), Path::new("/tmp/x/flow-p2.pcap"));
        assert_eq!(file_for(f, 0, 1, 2, 3), Path::new("/tmp/x/flow-p1-r3.pcap"));
        assert_eq!(file_for(Path::new("t"), 0, 2, 0, 1), Path::new("t-p1"));
    }

    /// A synthetic capture written to a pcap in memory and read back gives the flow's exact
    /// figures: the file is the whole record.
    #[test]
    fn a_synthetic_pcap_reads_back_into_the_same_summary() {
        use segment::{build_ipv4, Segment, ACK, SYN};
        let c: std::net::SocketAddr = "127.0.0.1:41000".parse().unwrap();
        let s: std::net::SocketAddr = "127.0.0.1:5400".parse().unwrap();
        let mk = |t: u64, from_c: bool, seq: u32, ack: u32, flags: u8, len: u32| Segment {
            t_ns: 1_000_000_000 + t,
            src: if from_c { c } else { s },
            dst: if from_c { s } else { c },
            seq,
            ack,
            flags,
            window: 512,
            len,
            options_len: if flags & SYN != 0 { 8 } else { 12 },
            mss: None,
            wscale: None,
        };
        let mut segs = vec![
            Segment {
                mss: Some(65495),
                wscale: Some(7),
                ..mk(0, true, 99, 0, SYN, 0)
            },
            Segment {
                mss: Some(65495),
                wscale: Some(7),
                ..mk(10, false, 499, 100, SYN | ACK, 0)
            },
            mk(20, true, 100, 500, ACK, 0),
        ];
        for i in 0..10u32 {
            segs.push(mk(
                100 + u64::from(i) * 100,
                true,
                100 + i * 65483,
                500,
                ACK,
                65483,
            ));
        }
        segs.push(mk(2000, false, 500, 100 + 10 * 65483, ACK, 0));
        let mut file = Vec::new();
        pcap::write_header(&mut file, DEFAULT_SNAPLEN).unwrap();
        for g in &segs {
            let p = build_ipv4(g);
            let orig = 40 + u32::from(g.options_len) + g.len;
            pcap::write_packet(&mut file, g.t_ns, &p, orig).unwrap();
        }
        let back: Vec<Segment> = pcap::read(&file)
            .unwrap()
            .iter()
            .filter_map(|p| segment::parse(p.t_ns, &p.data, p.orig_len))
            .collect();
        assert_eq!(back, segs);
        let t = TraceSummary::of_segments(Path::new("f.pcap"), 14, &back);
        assert_eq!(t.flows.len(), 1);
        let f = &t.flows[0];
        assert_eq!(f.unique_data_bytes, 654_830);
        assert_eq!((f.data_segments, f.acks), (10, 1));
        assert_eq!(f.window_shift, Some(7));
        assert_eq!((f.mss, f.sub_mss_segments), (65483, 0));
        assert!(t.line().contains("10 data segments, 654830 bytes (0 retransmissions), 1 ACKs (10.00 segments per ACK), 0.0% sub-MSS"), "{}", t.line());
    }
}
