//! Segment-flow traces (`--trace FILE`): the TCP segments of a point's data connections
//! captured with kernel time stamps into a pcap file, and what they show: segment sizes,
//! bytes outstanding, the advertised window, ACK ratios, delayed ACKs, stops and
//! retransmissions. `pcap`, `segment` and `flow` are pure code; `capture` reads the socket.

pub mod capture;
pub mod complete;
pub mod flow;
pub mod pcap;
pub mod probe;
pub mod segment;

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

pub use crate::model::trace::{
    FlowSummary, ProbeRole, ProbeSocket, ProbeSummary, TraceSide, TraceSummary,
};
pub use flow::{analyse, Flow, FlowSeries};

/// Bytes of each packet kept by default: IP and TCP headers with options, no payload.
pub const DEFAULT_SNAPLEN: u32 = 128;

/// `--trace` as asked.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TraceRequest {
    pub file: PathBuf,
    /// None: the side that sends the data (the client's for --bidir).
    pub side: Option<TraceSide>,
    pub snaplen: u32,
    /// Whether the kernel's TCP state is read too (`tcp:tcp_probe`).
    #[serde(default)]
    pub probe: ProbeMode,
}

/// `--trace-probe` / `--no-trace-probe`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ProbeMode {
    /// Read when the tracepoint is readable; otherwise the summary says why not.
    #[default]
    Auto,
    /// Read, or stop before the first point with the reason.
    Required,
    /// Not read.
    Off,
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
            sender_data_segments: None,
            captured_data_segments: None,
            missing_data_segments: None,
            completeness_note: None,
            flows: analyse(segments).into_iter().map(|f| f.summary).collect(),
            tcp_probe: None,
        }
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
