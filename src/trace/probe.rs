//! The kernel's TCP state per received segment, from the `tcp:tcp_probe` tracepoint read
//! through perf rings (one per CPU, see [`crate::sys::perf`]), beside the segment capture.
//!
//! The kernel fires tcp_probe in `tcp_rcv_established` for each segment an established
//! socket receives, recording the socket's ports (host order), snd_nxt, snd_una, snd_cwnd
//! (segments), the slow-start threshold (`tcp_current_ssthresh`: outside recovery or CWR the
//! larger of snd_ssthresh and 3/4 of cwnd), snd_wnd and rcv_wnd (bytes) and srtt
//! (`srtt_us >> 3`: microseconds). The record's layout is read from tracefs's `format` file at run time,
//! not assumed. Samples are stamped with CLOCK_REALTIME, the clock of the pcap's stamps, so
//! that both lie on one time line.
//!
//! The samples go to a sidecar CSV beside the pcap (FILE.pcap -> FILE.tcp_probe.csv), with
//! the header [`CSV_HEADER`]: `t_ns` (CLOCK_REALTIME, ns), `cpu`, `sock_cookie` (the
//! kernel's id of the socket), `sport` (the socket's own port), `dport` (its peer's),
//! `data_len` (payload of the segment received), `snd_nxt`, `snd_una` (32-bit sequence
//! numbers), `snd_cwnd` (segments), `ssthresh` (segments; 2147483647 while "infinite"),
//! `snd_wnd`, `rcv_wnd` (bytes) and `srtt_us`.
//!
//! Parsing, decoding, the CSV and the summary are pure code; [`open`] and [`Reader`] use
//! the OS.

use std::collections::HashMap;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use anyhow::{anyhow, Result};

use super::capture::PortFilter;
use crate::model::trace::{FlowSummary, ProbeRole, ProbeSocket, ProbeSummary};
use crate::sys::perf::{self, SampleClock, TracepointRing, RECORD_LOST, RECORD_SAMPLE};

/// The sidecar's header line.
pub const CSV_HEADER: &str = "t_ns,cpu,sock_cookie,sport,dport,data_len,snd_nxt,snd_una,snd_cwnd,ssthresh,snd_wnd,rcv_wnd,srtt_us";
/// The kernel's initial, "infinite" slow-start threshold (TCP_INFINITE_SSTHRESH).
pub const INFINITE_SSTHRESH: u32 = 0x7fff_ffff;
/// Where tracefs is looked for, in order.
const TRACEFS: [&str; 2] = ["/sys/kernel/tracing", "/sys/kernel/debug/tracing"];
const EVENT: &str = "events/tcp/tcp_probe";
/// Data pages of each CPU's ring (4 KiB pages: 1 MiB). On loopback at ~25 Gbit/s the
/// tracepoint fires some 10^5 times a second on both ends together (a third of that on the
/// senders alone), ~170 bytes a record: the reader's 25 ms between reads fill at most
/// about half of one ring.
const RING_PAGES: usize = 256;
/// The smallest ring tried when the kernel refuses the memory (perf_event_mlock_kb).
const RING_PAGES_MIN: usize = 8;
/// How long the reader sleeps between reads of the rings: the samples carry the kernel's
/// time stamps, so reading later does not change them.
const READ_EVERY: Duration = Duration::from_millis(25);

/// The sidecar of a pcap file: FILE.pcap -> FILE.tcp_probe.csv.
pub fn sidecar(pcap: &Path) -> PathBuf {
    pcap.with_extension("tcp_probe.csv")
}

/// One field of a tracepoint's record, as its tracefs `format` file gives it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Field {
    pub offset: usize,
    pub size: usize,
}

/// Reads the fields of a tracefs `format` file: "field:TYPE NAME;\toffset:N;\tsize:N;...".
pub fn parse_format(text: &str) -> HashMap<String, Field> {
    let mut fields = HashMap::new();
    for line in text.lines() {
        let mut name = None;
        let (mut offset, mut size) = (None, None);
        for part in line.split(';').map(str::trim) {
            if let Some(decl) = part.strip_prefix("field:") {
                // The name is the declaration's last word, without an array's "[N]".
                name = decl
                    .split_whitespace()
                    .last()
                    .map(|n| n.split('[').next().unwrap_or(n).to_owned());
            } else if let Some(v) = part.strip_prefix("offset:") {
                offset = v.parse().ok();
            } else if let Some(v) = part.strip_prefix("size:") {
                size = v.parse().ok();
            }
        }
        if let (Some(n), Some(offset), Some(size)) = (name, offset, size) {
            fields.insert(n, Field { offset, size });
        }
    }
    fields
}

/// Where tcp_probe's fields lie in its raw record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Layout {
    sport: Field,
    dport: Field,
    data_len: Field,
    snd_nxt: Field,
    snd_una: Field,
    snd_cwnd: Field,
    ssthresh: Field,
    snd_wnd: Field,
    srtt: Field,
    rcv_wnd: Field,
    /// Kernels before 5.1 have no socket cookie: the ports stand in for it.
    sock_cookie: Option<Field>,
}

impl Layout {
    /// The layout of a `format` file, or the field it lacks.
    pub fn of(format: &str) -> Result<Layout, String> {
        let fields = parse_format(format);
        let get = |name: &str, sizes: &[usize]| -> Result<Field, String> {
            match fields.get(name) {
                Some(f) if sizes.contains(&f.size) => Ok(*f),
                Some(f) => Err(format!(
                    "tcp_probe's field {name} has {} bytes, not {sizes:?}",
                    f.size
                )),
                None => Err(format!("tcp_probe's format has no field {name}")),
            }
        };
        Ok(Layout {
            sport: get("sport", &[2])?,
            dport: get("dport", &[2])?,
            data_len: get("data_len", &[2, 4])?,
            snd_nxt: get("snd_nxt", &[4])?,
            snd_una: get("snd_una", &[4])?,
            snd_cwnd: get("snd_cwnd", &[4])?,
            ssthresh: get("ssthresh", &[4])?,
            snd_wnd: get("snd_wnd", &[4])?,
            srtt: get("srtt", &[4])?,
            rcv_wnd: get("rcv_wnd", &[4])?,
            sock_cookie: get("sock_cookie", &[8]).ok(),
        })
    }

    /// The kernel-side filter for the data connections' `sockets`: a client's socket has
    /// the data port as its peer's (dport), a server's as its own (sport); neither end is
    /// the control connection's (it shares the data port with --one-port). tcp_probe
    /// stores ports in host order, as written here.
    pub fn filter(f: PortFilter, sockets: ProbeSockets) -> String {
        let p = f.data_port;
        let keyed = match sockets {
            ProbeSockets::Client => format!("dport == {p}"),
            ProbeSockets::Server => format!("sport == {p}"),
            ProbeSockets::Both => format!("(sport == {p} || dport == {p})"),
        };
        match f.exclude_port {
            Some(x) => format!("{keyed} && sport != {x} && dport != {x}"),
            None => keyed
                .trim_start_matches('(')
                .trim_end_matches(')')
                .to_string(),
        }
    }
}

/// Whose sockets tcp_probe reads. The tracepoint fires for every segment a socket receives,
/// so a receiving socket of a stream fires once per data segment, more often than the
/// sender does per ACK, for state (cwnd, ssthresh, srtt, snd_wnd) that is the sender's
/// concern. Reading only the sending sockets of a one-way stream roughly thirds the
/// tracepoint's work, which on loopback the measured connection pays for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProbeSockets {
    /// The client's sockets (a forward stream's senders).
    Client,
    /// The server's sockets (a reverse stream's senders).
    Server,
    /// Both ends (bidir streams, and the patterns whose both ends send).
    Both,
}

impl ProbeSockets {
    /// The sockets that send a test's data.
    pub fn senders(stream: bool, direction: crate::model::vocab::Direction) -> ProbeSockets {
        use crate::model::vocab::Direction;
        match (stream, direction) {
            (true, Direction::Forward) => ProbeSockets::Client,
            (true, Direction::Reverse) => ProbeSockets::Server,
            _ => ProbeSockets::Both,
        }
    }

    /// Said in the summary's notes when not both ends are read.
    pub fn note(self) -> Option<&'static str> {
        match self {
            ProbeSockets::Client => Some("tcp_probe reads the data's sending sockets (here the client's): the receivers' would fire once per data segment for state that is the sender's"),
            ProbeSockets::Server => Some("tcp_probe reads the data's sending sockets (here the server's): the receivers' would fire once per data segment for state that is the sender's"),
            ProbeSockets::Both => None,
        }
    }
}

/// One tcp_probe sample: a socket's state after a segment it received.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProbeSample {
    /// CLOCK_REALTIME, nanoseconds (the pcap's clock).
    pub t_ns: u64,
    pub cpu: u32,
    /// The kernel's socket cookie (0 on kernels without it).
    pub cookie: u64,
    /// The socket's own port and its peer's.
    pub sport: u16,
    pub dport: u16,
    /// Payload bytes of the segment received.
    pub data_len: u32,
    pub snd_nxt: u32,
    pub snd_una: u32,
    /// Segments.
    pub snd_cwnd: u32,
    /// Segments ([`INFINITE_SSTHRESH`] before the first loss).
    pub ssthresh: u32,
    /// Bytes.
    pub snd_wnd: u32,
    pub rcv_wnd: u32,
    /// The smoothed RTT, microseconds (0 before the first measurement).
    pub srtt_us: u32,
}

/// What a perf record holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Record {
    Sample(ProbeSample),
    /// PERF_RECORD_LOST: this many samples did not fit in the ring.
    Lost(u64),
    /// Another record type, or a sample too short for the layout.
    Other,
}

fn int(raw: &[u8], f: Field) -> Option<u64> {
    let b = raw.get(f.offset..f.offset + f.size)?;
    Some(match f.size {
        1 => u64::from(b[0]),
        2 => u64::from(u16::from_ne_bytes([b[0], b[1]])),
        4 => u64::from(u32::from_ne_bytes([b[0], b[1], b[2], b[3]])),
        8 => u64::from_ne_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]]),
        _ => return None,
    })
}

/// Decodes the body of a perf record of type `kind` (after its 8-byte header), for
/// samples of [`perf::SAMPLE_TYPE`]: time (u64), cpu (u32) and a reserved u32, the raw
/// record's size (u32) and the raw record. `clock_offset_ns` moves the time onto
/// CLOCK_REALTIME (0 when the samples are stamped with it).
pub fn decode(layout: &Layout, kind: u32, body: &[u8], clock_offset_ns: i64) -> Record {
    let u32_at = |o: usize| -> Option<u32> {
        body.get(o..o + 4)
            .map(|b| u32::from_ne_bytes([b[0], b[1], b[2], b[3]]))
    };
    let u64_at = |o: usize| -> Option<u64> {
        body.get(o..o + 8)
            .map(|b| u64::from_ne_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]]))
    };
    match kind {
        // struct { u64 id; u64 lost; }
        RECORD_LOST => u64_at(8).map_or(Record::Other, Record::Lost),
        RECORD_SAMPLE => {
            let sample = || -> Option<ProbeSample> {
                let t = u64_at(0)?;
                let cpu = u32_at(8)?;
                let size = u32_at(16)? as usize;
                let raw = body.get(20..20 + size)?;
                let v = |f: Field| int(raw, f);
                let v32 = |f: Field| v(f).map(|x| x as u32);
                Some(ProbeSample {
                    t_ns: t.saturating_add_signed(clock_offset_ns),
                    cpu,
                    cookie: match layout.sock_cookie {
                        Some(f) => v(f)?,
                        None => 0,
                    },
                    sport: v(layout.sport)? as u16,
                    dport: v(layout.dport)? as u16,
                    data_len: v32(layout.data_len)?,
                    snd_nxt: v32(layout.snd_nxt)?,
                    snd_una: v32(layout.snd_una)?,
                    snd_cwnd: v32(layout.snd_cwnd)?,
                    ssthresh: v32(layout.ssthresh)?,
                    snd_wnd: v32(layout.snd_wnd)?,
                    rcv_wnd: v32(layout.rcv_wnd)?,
                    srtt_us: v32(layout.srtt)?,
                })
            };
            sample().map_or(Record::Other, Record::Sample)
        }
        _ => Record::Other,
    }
}

/// One CSV line (without its newline) of a sample.
pub fn csv_line(s: &ProbeSample) -> String {
    format!(
        "{},{},{},{},{},{},{},{},{},{},{},{},{}",
        s.t_ns,
        s.cpu,
        s.cookie,
        s.sport,
        s.dport,
        s.data_len,
        s.snd_nxt,
        s.snd_una,
        s.snd_cwnd,
        s.ssthresh,
        s.snd_wnd,
        s.rcv_wnd,
        s.srtt_us
    )
}

/// Reads a sidecar's text back; an error names the line.
pub fn parse_csv(text: &str) -> Result<Vec<ProbeSample>, String> {
    let mut lines = text.lines();
    if lines.next().map(str::trim) != Some(CSV_HEADER) {
        return Err(format!(
            "not a tcp_probe sidecar (first line is not {CSV_HEADER})"
        ));
    }
    let mut out = Vec::new();
    for (i, line) in lines.enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let v: Vec<u64> = line
            .split(',')
            .map(|f| f.trim().parse::<u64>())
            .collect::<Result<_, _>>()
            .map_err(|e| format!("line {}: {e}", i + 2))?;
        if v.len() != 13 {
            return Err(format!("line {}: {} fields, not 13", i + 2, v.len()));
        }
        let n32 = |x: u64| u32::try_from(x).map_err(|_| format!("line {}: {x} too large", i + 2));
        let n16 = |x: u64| u16::try_from(x).map_err(|_| format!("line {}: {x} too large", i + 2));
        out.push(ProbeSample {
            t_ns: v[0],
            cpu: n32(v[1])?,
            cookie: v[2],
            sport: n16(v[3])?,
            dport: n16(v[4])?,
            data_len: n32(v[5])?,
            snd_nxt: n32(v[6])?,
            snd_una: n32(v[7])?,
            snd_cwnd: n32(v[8])?,
            ssthresh: n32(v[9])?,
            snd_wnd: n32(v[10])?,
            rcv_wnd: n32(v[11])?,
            srtt_us: n32(v[12])?,
        });
    }
    Ok(out)
}

/// Reads the sidecar of `pcap`, if there is one.
pub fn read_sidecar(pcap: &Path) -> Result<Option<(PathBuf, Vec<ProbeSample>)>> {
    let path = sidecar(pcap);
    match std::fs::read_to_string(&path) {
        // Empty: created by a run whose reader did not start (its summary says why).
        Ok(text) if text.is_empty() => Ok(None),
        Ok(text) => parse_csv(&text)
            .map(|v| Some((path.clone(), v)))
            .map_err(|e| anyhow!("{}: {e}", path.display())),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(anyhow!("reading {}: {e}", path.display())),
    }
}

/// A socket's key: its cookie, or its ports on kernels without cookies.
fn key(s: &ProbeSample) -> (u64, u16, u16) {
    if s.cookie != 0 {
        (s.cookie, 0, 0)
    } else {
        (0, s.sport, s.dport)
    }
}

/// Each socket's samples, in order of its first sample.
pub fn by_socket(samples: &[ProbeSample]) -> Vec<Vec<ProbeSample>> {
    let mut index: HashMap<(u64, u16, u16), usize> = HashMap::new();
    let mut out: Vec<Vec<ProbeSample>> = Vec::new();
    for s in samples {
        let i = *index.entry(key(s)).or_insert_with(|| {
            out.push(Vec::new());
            out.len() - 1
        });
        out[i].push(*s);
    }
    for v in &mut out {
        v.sort_by_key(|s| s.t_ns);
    }
    out
}

/// The port of "ADDR:PORT" as the flows give it.
fn port_of(addr: &str) -> Option<u16> {
    addr.parse::<std::net::SocketAddr>().ok().map(|a| a.port())
}

/// The captured connection a socket with these ports belongs to, and its end of it.
pub fn join(flows: &[FlowSummary], sport: u16, dport: u16) -> Option<(&FlowSummary, ProbeRole)> {
    flows.iter().find_map(|f| {
        let (s, r) = (port_of(&f.sender)?, port_of(&f.receiver)?);
        if (sport, dport) == (s, r) {
            Some((f, ProbeRole::Sender))
        } else if (sport, dport) == (r, s) {
            Some((f, ProbeRole::Receiver))
        } else {
            None
        }
    })
}

/// One socket's figures.
fn socket(samples: &[ProbeSample], flows: &[FlowSummary]) -> Option<ProbeSocket> {
    let first = samples.first()?;
    let last = samples.last()?;
    let joined = join(flows, first.sport, first.dport);
    let finite = |v: u32| (v < INFINITE_SSTHRESH).then_some(v);
    let mut srtt: Vec<u32> = samples
        .iter()
        .map(|s| s.srtt_us)
        .filter(|&v| v > 0)
        .collect();
    srtt.sort_unstable();
    // snd_una only moves forward: the wrapping differences add up to the bytes acked.
    let bytes_acked = samples
        .windows(2)
        .map(|w| u64::from(w[1].snd_una.wrapping_sub(w[0].snd_una)).min(1 << 31))
        .sum();
    Some(ProbeSocket {
        local_port: first.sport,
        remote_port: first.dport,
        flow: joined.map(|(f, _)| format!("{} -> {}", f.sender, f.receiver)),
        role: joined.map(|(_, r)| r),
        samples: samples.len() as u64,
        bytes_acked,
        cwnd_min: samples.iter().map(|s| s.snd_cwnd).min().unwrap_or(0),
        cwnd_max: samples.iter().map(|s| s.snd_cwnd).max().unwrap_or(0),
        cwnd_last: last.snd_cwnd,
        ssthresh_last: finite(last.ssthresh),
        ssthresh_min: samples.iter().filter_map(|s| finite(s.ssthresh)).min(),
        srtt_min_us: srtt.first().copied(),
        // The lower median, an observed value.
        srtt_p50_us: (!srtt.is_empty()).then(|| srtt[(srtt.len() - 1) / 2]),
        srtt_max_us: srtt.last().copied(),
        snd_wnd_last: last.snd_wnd,
        rcv_wnd_last: last.rcv_wnd,
    })
}

/// The summary of `samples` joined with the captured connections `flows` (no reader
/// figures: the caller fills those in).
pub fn summarise(file: &Path, samples: &[ProbeSample], flows: &[FlowSummary]) -> ProbeSummary {
    let sockets: Vec<ProbeSocket> = by_socket(samples)
        .iter()
        .filter_map(|v| socket(v, flows))
        .collect();
    let mut notes = Vec::new();
    let stray = sockets.iter().filter(|k| k.flow.is_none()).count();
    if stray > 0 {
        notes.push(format!(
            "{stray} socket(s) with the data port are not among the captured connections (another connection on that port, in any network namespace: tracepoints are kernel-wide)"
        ));
    }
    ProbeSummary {
        file: Some(file.display().to_string()),
        samples: samples.len() as u64,
        lost: None,
        reader_cpu_ns: None,
        reader_elapsed_ns: None,
        reader_cpu_share: None,
        sockets,
        unavailable: None,
        notes,
    }
}

/// Whether the samples overlap the capture's time span [first, last] (a stale sidecar from
/// another run does not).
pub fn overlaps(samples: &[ProbeSample], first_ns: u64, last_ns: u64) -> bool {
    samples.iter().any(|s| {
        (first_ns.saturating_sub(1_000_000_000)..=last_ns + 1_000_000_000).contains(&s.t_ns)
    })
}

/// tcp_probe's directory in tracefs, and a note when this call mounted tracefs.
fn event_dir() -> Result<(PathBuf, Option<String>), String> {
    for root in TRACEFS {
        let dir = Path::new(root).join(EVENT);
        if Path::new(root).join("events").is_dir() {
            return if dir.is_dir() {
                Ok((dir, None))
            } else {
                Err(format!(
                    "this kernel has no tcp:tcp_probe tracepoint ({} is missing)",
                    dir.display()
                ))
            };
        }
    }
    // Nothing mounted: root may mount tracefs where the kernel provides its mount point.
    let at = Path::new(TRACEFS[0]);
    if nix::unistd::geteuid().is_root() && at.is_dir() {
        perf::mount_tracefs(at).map_err(|e| {
            format!(
                "tracefs is not mounted and mounting it at {} failed: {e}",
                at.display()
            )
        })?;
        let dir = at.join(EVENT);
        if dir.is_dir() {
            return Ok((
                dir,
                Some(format!(
                    "tracefs was not mounted: this run mounted it at {}",
                    at.display()
                )),
            ));
        }
        return Err("this kernel has no tcp:tcp_probe tracepoint".into());
    }
    Err(format!(
        "tracefs is not mounted (neither {} nor {}; as root: mount -t tracefs nodev {})",
        TRACEFS[0], TRACEFS[1], TRACEFS[0]
    ))
}

fn read_tracefs(path: &Path) -> Result<String, String> {
    std::fs::read_to_string(path).map_err(|e| match e.kind() {
        std::io::ErrorKind::PermissionDenied => {
            format!("{} is not readable (tracefs needs root)", path.display())
        }
        _ => format!("reading {}: {e}", path.display()),
    })
}

/// The tracepoint opened on every online CPU with its filter, not yet enabled.
pub struct Source {
    rings: Vec<TracepointRing>,
    layout: Layout,
    clock_offset_ns: i64,
    pub notes: Vec<String>,
}

/// Opens tcp_probe for the sockets `filter` keys, or says in one line why it cannot.
pub fn open(filter: PortFilter, sockets: ProbeSockets) -> Result<Source, String> {
    let (dir, mounted) = event_dir()?;
    let id: u64 = read_tracefs(&dir.join("id"))?
        .trim()
        .parse()
        .map_err(|e| format!("{}: {e}", dir.join("id").display()))?;
    let layout = Layout::of(&read_tracefs(&dir.join("format"))?)?;
    let expr = Layout::filter(filter, sockets);
    let mut notes: Vec<String> = mounted.into_iter().collect();
    notes.extend(sockets.note().map(String::from));
    let mut clock = SampleClock::Realtime;
    let mut pages = RING_PAGES;
    let mut rings = Vec::new();
    for cpu in perf::online_cpus() {
        let ring = loop {
            match TracepointRing::open(id, cpu, pages, clock) {
                Ok(r) => break r,
                // A kernel that does not stamp this event with CLOCK_REALTIME: monotonic,
                // moved by an offset (below).
                Err(e)
                    if e.raw_os_error() == Some(libc::EINVAL) && clock == SampleClock::Realtime =>
                {
                    clock = SampleClock::Monotonic;
                }
                // The locked-memory budget for perf rings (kernel.perf_event_mlock_kb).
                Err(e)
                    if e.raw_os_error() == Some(libc::EPERM)
                        && !rings.is_empty()
                        && pages > RING_PAGES_MIN =>
                {
                    pages /= 2;
                }
                Err(e) => return Err(open_error(&e)),
            }
        };
        ring.set_filter(&expr)
            .map_err(|e| format!("the kernel refused the tcp_probe filter \"{expr}\": {e}"))?;
        rings.push(ring);
    }
    if rings.is_empty() {
        return Err("no online CPU to open tcp_probe on".into());
    }
    let clock_offset_ns = match clock {
        SampleClock::Realtime => 0,
        SampleClock::Monotonic => {
            notes.push("tcp_probe stamped with CLOCK_MONOTONIC (this kernel refused CLOCK_REALTIME), moved onto the pcap's clock by the offset read at start".into());
            perf::clock_ns(SampleClock::Realtime) as i64
                - perf::clock_ns(SampleClock::Monotonic) as i64
        }
    };
    if pages < RING_PAGES {
        notes.push(format!("perf rings of {pages} pages per CPU (the locked-memory limit refused {RING_PAGES}): more may be lost"));
    }
    Ok(Source {
        rings,
        layout,
        clock_offset_ns,
        notes,
    })
}

fn open_error(e: &std::io::Error) -> String {
    match e.raw_os_error() {
        Some(libc::EACCES) | Some(libc::EPERM) => {
            let paranoid = std::fs::read_to_string("/proc/sys/kernel/perf_event_paranoid")
                .map(|s| s.trim().to_owned())
                .unwrap_or_else(|_| "?".into());
            format!("perf_event_open refused the tracepoint: {e} (needs root or CAP_PERFMON; kernel.perf_event_paranoid is {paranoid})")
        }
        Some(libc::ENOENT) | Some(libc::ENODEV) => {
            format!("perf_event_open: {e} (a kernel without tracepoint support in perf)")
        }
        _ => format!("perf_event_open for tcp_probe: {e}"),
    }
}

/// What a finished reader saw.
#[derive(Debug, Clone, Default)]
pub struct Probed {
    pub samples: Vec<ProbeSample>,
    pub lost: u64,
    pub cpu_ns: u64,
    pub elapsed_ns: u64,
    pub notes: Vec<String>,
}

/// The thread that empties the rings into the sidecar while the point runs.
pub struct Reader {
    stop: Arc<AtomicBool>,
    handle: JoinHandle<Result<Probed>>,
}

impl Reader {
    /// Enables the events and starts reading them into `file`, created at `path` by
    /// [`crate::outfile`].
    pub fn start(source: Source, file: std::fs::File, path: &Path) -> Result<Reader> {
        for r in &source.rings {
            r.enable().map_err(|e| anyhow!("enabling tcp_probe: {e}"))?;
        }
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let path = path.to_owned();
        let handle = std::thread::Builder::new()
            .name("wb-probe".into())
            .spawn(move || {
                // As the capture's thread: its wake-ups must not preempt a measured thread.
                let _ = crate::sys::batch_priority();
                read_loop(source, BufWriter::new(file), &path, &flag)
            })?;
        Ok(Reader { stop, handle })
    }

    /// Reads what is left in the rings and ends.
    pub fn finish(self) -> Result<Probed> {
        self.stop.store(true, Ordering::SeqCst);
        self.handle
            .join()
            .map_err(|_| anyhow!("the tcp_probe reader panicked"))?
    }
}

fn read_loop(
    mut source: Source,
    mut out: BufWriter<std::fs::File>,
    path: &Path,
    stop: &AtomicBool,
) -> Result<Probed> {
    let cpu_start = crate::sys::packet::thread_cpu_ns();
    let started = Instant::now();
    let written = |e: std::io::Error| anyhow!("writing {}: {e}", path.display());
    writeln!(out, "{CSV_HEADER}").map_err(written)?;
    let mut got = Probed {
        notes: std::mem::take(&mut source.notes),
        ..Probed::default()
    };
    let mut failed: Option<std::io::Error> = None;
    loop {
        // Read after the stop was seen, once more: the capture has waited for the last
        // segments, so their samples are in the rings by then.
        let stopping = stop.load(Ordering::SeqCst);
        let (layout, offset) = (&source.layout, source.clock_offset_ns);
        for ring in &mut source.rings {
            ring.drain(&mut |kind, body| match decode(layout, kind, body, offset) {
                Record::Sample(s) => {
                    if failed.is_none() {
                        if let Err(e) = writeln!(out, "{}", csv_line(&s)) {
                            failed = Some(e);
                        }
                    }
                    got.samples.push(s);
                }
                Record::Lost(n) => got.lost += n,
                Record::Other => {}
            });
        }
        if let Some(e) = failed.take() {
            return Err(written(e));
        }
        if stopping {
            break;
        }
        std::thread::sleep(READ_EVERY);
    }
    for r in &source.rings {
        // The rings close with the source; a failed disable changes nothing read.
        let _ = r.disable();
    }
    out.flush().map_err(written)?;
    got.cpu_ns = crate::sys::packet::thread_cpu_ns().saturating_sub(cpu_start);
    got.elapsed_ns = started.elapsed().as_nanos() as u64;
    Ok(got)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// tcp_probe's format on Linux 6.18, as tracefs gives it.
    pub const FORMAT_6_18: &str = "name: tcp_probe
ID: 2273
format:
\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;
\tfield:unsigned char common_flags;\toffset:2;\tsize:1;\tsigned:0;
\tfield:unsigned char common_preempt_count;\toffset:3;\tsize:1;\tsigned:0;
\tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;

\tfield:__u8 saddr[28];\toffset:8;\tsize:28;\tsigned:0;
\tfield:__u8 daddr[28];\toffset:36;\tsize:28;\tsigned:0;
\tfield:__u16 sport;\toffset:64;\tsize:2;\tsigned:0;
\tfield:__u16 dport;\toffset:66;\tsize:2;\tsigned:0;
\tfield:__u16 family;\toffset:68;\tsize:2;\tsigned:0;
\tfield:__u32 mark;\toffset:72;\tsize:4;\tsigned:0;
\tfield:__u16 data_len;\toffset:76;\tsize:2;\tsigned:0;
\tfield:__u32 snd_nxt;\toffset:80;\tsize:4;\tsigned:0;
\tfield:__u32 snd_una;\toffset:84;\tsize:4;\tsigned:0;
\tfield:__u32 snd_cwnd;\toffset:88;\tsize:4;\tsigned:0;
\tfield:__u32 ssthresh;\toffset:92;\tsize:4;\tsigned:0;
\tfield:__u32 snd_wnd;\toffset:96;\tsize:4;\tsigned:0;
\tfield:__u32 srtt;\toffset:100;\tsize:4;\tsigned:0;
\tfield:__u32 rcv_wnd;\toffset:104;\tsize:4;\tsigned:0;
\tfield:__u64 sock_cookie;\toffset:112;\tsize:8;\tsigned:0;
\tfield:const void * skbaddr;\toffset:120;\tsize:8;\tsigned:0;
\tfield:const void * skaddr;\toffset:128;\tsize:8;\tsigned:0;

print fmt: \"family=%s src=%pISpc ...\", REC->saddr
";

    /// A perf sample record's body as the kernel writes it for `fields` (name, value) laid
    /// out by `format`: time, cpu, reserved, raw size, raw record (padded to 8 bytes).
    fn record(format: &str, t: u64, cpu: u32, fields: &[(&str, u64)]) -> Vec<u8> {
        let f = parse_format(format);
        let len = f.values().map(|x| x.offset + x.size).max().unwrap();
        let mut raw = vec![0xAAu8; len + 4];
        for (name, v) in fields {
            let x = f[*name];
            raw[x.offset..x.offset + x.size].copy_from_slice(&v.to_ne_bytes()[..x.size]);
        }
        let mut body = Vec::new();
        body.extend_from_slice(&t.to_ne_bytes());
        body.extend_from_slice(&cpu.to_ne_bytes());
        body.extend_from_slice(&0u32.to_ne_bytes());
        body.extend_from_slice(&(raw.len() as u32).to_ne_bytes());
        body.extend_from_slice(&raw);
        body
    }

    fn fields() -> Vec<(&'static str, u64)> {
        vec![
            ("sport", 41000),
            ("dport", 5201),
            ("family", 2),
            ("data_len", 0),
            ("snd_nxt", 0xffff_fff0),
            ("snd_una", 0xffff_ff00),
            ("snd_cwnd", 42),
            ("ssthresh", u64::from(INFINITE_SSTHRESH)),
            ("snd_wnd", 3_000_000),
            ("srtt", 37),
            ("rcv_wnd", 65483),
            ("sock_cookie", 0x1234_5678_9abc),
        ]
    }

    #[test]
    fn the_format_file_gives_every_field_with_its_offset_and_size() {
        let f = parse_format(FORMAT_6_18);
        assert_eq!(
            f["saddr"],
            Field {
                offset: 8,
                size: 28
            }
        );
        assert_eq!(
            f["sport"],
            Field {
                offset: 64,
                size: 2
            }
        );
        assert_eq!(
            f["data_len"],
            Field {
                offset: 76,
                size: 2
            }
        );
        assert_eq!(
            f["srtt"],
            Field {
                offset: 100,
                size: 4
            }
        );
        assert_eq!(
            f["sock_cookie"],
            Field {
                offset: 112,
                size: 8
            }
        );
        assert_eq!(
            f["skaddr"],
            Field {
                offset: 128,
                size: 8
            }
        );
        assert_eq!(f["common_pid"], Field { offset: 4, size: 4 });
        assert_eq!(f.len(), 21);
        assert!(Layout::of(FORMAT_6_18).is_ok());
    }

    #[test]
    fn a_format_without_a_needed_field_is_refused_by_name() {
        let no_srtt = FORMAT_6_18.replace("field:__u32 srtt;", "field:__u32 other;");
        assert_eq!(
            Layout::of(&no_srtt),
            Err("tcp_probe's format has no field srtt".into())
        );
        let wide = FORMAT_6_18.replace("sport;\toffset:64;\tsize:2", "sport;\toffset:64;\tsize:4");
        assert!(Layout::of(&wide).unwrap_err().contains("sport has 4 bytes"));
    }

    #[test]
    fn a_synthetic_sample_decodes_into_its_fields() {
        let layout = Layout::of(FORMAT_6_18).unwrap();
        let body = record(FORMAT_6_18, 1_700_000_000_123_456_789, 1, &fields());
        let Record::Sample(s) = decode(&layout, RECORD_SAMPLE, &body, 0) else {
            panic!("a sample");
        };
        assert_eq!(
            s,
            ProbeSample {
                t_ns: 1_700_000_000_123_456_789,
                cpu: 1,
                cookie: 0x1234_5678_9abc,
                sport: 41000,
                dport: 5201,
                data_len: 0,
                snd_nxt: 0xffff_fff0,
                snd_una: 0xffff_ff00,
                snd_cwnd: 42,
                ssthresh: INFINITE_SSTHRESH,
                snd_wnd: 3_000_000,
                rcv_wnd: 65483,
                srtt_us: 37,
            }
        );
        // A monotonic stamp moved onto the realtime clock.
        let Record::Sample(m) = decode(&layout, RECORD_SAMPLE, &body, -123_456_789) else {
            panic!("a sample");
        };
        assert_eq!(m.t_ns, 1_700_000_000_000_000_000);
        // Cut short: not a sample, and no panic.
        assert_eq!(
            decode(&layout, RECORD_SAMPLE, &body[..60], 0),
            Record::Other
        );
        assert_eq!(decode(&layout, RECORD_SAMPLE, &[], 0), Record::Other);
    }

    /// Another layout (fields moved, data_len 4 bytes wide, no cookie): the offsets come
    /// from the format file, not from this kernel's.
    #[test]
    fn a_moved_layout_decodes_by_its_own_format() {
        let moved = "\tfield:__u16 sport;\toffset:8;\tsize:2;\tsigned:0;
\tfield:__u16 dport;\toffset:10;\tsize:2;\tsigned:0;
\tfield:__u32 data_len;\toffset:12;\tsize:4;\tsigned:0;
\tfield:__u32 snd_nxt;\toffset:16;\tsize:4;\tsigned:0;
\tfield:__u32 snd_una;\toffset:20;\tsize:4;\tsigned:0;
\tfield:__u32 snd_cwnd;\toffset:24;\tsize:4;\tsigned:0;
\tfield:__u32 ssthresh;\toffset:28;\tsize:4;\tsigned:0;
\tfield:__u32 snd_wnd;\toffset:32;\tsize:4;\tsigned:0;
\tfield:__u32 srtt;\toffset:36;\tsize:4;\tsigned:0;
\tfield:__u32 rcv_wnd;\toffset:40;\tsize:4;\tsigned:0;
";
        let layout = Layout::of(moved).unwrap();
        let f: Vec<_> = fields()
            .into_iter()
            .filter(|(n, _)| !["family", "sock_cookie"].contains(n))
            .map(|(n, v)| if n == "data_len" { (n, 70_000) } else { (n, v) })
            .collect();
        let Record::Sample(s) = decode(&layout, RECORD_SAMPLE, &record(moved, 5, 0, &f), 0) else {
            panic!("a sample");
        };
        assert_eq!(
            (s.sport, s.dport, s.data_len, s.cookie),
            (41000, 5201, 70_000, 0)
        );
        assert_eq!((s.snd_cwnd, s.srtt_us, s.rcv_wnd), (42, 37, 65483));
    }

    #[test]
    fn lost_records_count_and_other_records_are_skipped() {
        let layout = Layout::of(FORMAT_6_18).unwrap();
        let mut lost = 7u64.to_ne_bytes().to_vec();
        lost.extend_from_slice(&12u64.to_ne_bytes());
        assert_eq!(decode(&layout, RECORD_LOST, &lost, 0), Record::Lost(12));
        assert_eq!(decode(&layout, 3, &lost, 0), Record::Other);
    }

    #[test]
    fn the_filter_keys_the_data_port_and_leaves_out_the_control_connection() {
        let f = |exclude_port| PortFilter {
            data_port: 5201,
            exclude_port,
        };
        let both = ProbeSockets::Both;
        assert_eq!(
            Layout::filter(f(None), both),
            "sport == 5201 || dport == 5201"
        );
        assert_eq!(
            Layout::filter(f(Some(40000)), both),
            "(sport == 5201 || dport == 5201) && sport != 40000 && dport != 40000"
        );
        // A forward stream's senders are the client's sockets, whose peer is the data port.
        assert_eq!(
            Layout::filter(f(None), ProbeSockets::Client),
            "dport == 5201"
        );
        assert_eq!(
            Layout::filter(f(Some(40000)), ProbeSockets::Server),
            "sport == 5201 && sport != 40000 && dport != 40000"
        );
        use crate::model::vocab::Direction;
        assert_eq!(
            ProbeSockets::senders(true, Direction::Forward),
            ProbeSockets::Client
        );
        assert_eq!(
            ProbeSockets::senders(true, Direction::Reverse),
            ProbeSockets::Server
        );
        assert_eq!(
            ProbeSockets::senders(true, Direction::Bidir),
            ProbeSockets::Both
        );
        assert_eq!(
            ProbeSockets::senders(false, Direction::Forward),
            ProbeSockets::Both
        );
    }

    fn sample(t_ns: u64, sport: u16, dport: u16, una: u32, cwnd: u32, srtt: u32) -> ProbeSample {
        ProbeSample {
            t_ns,
            cpu: 0,
            cookie: u64::from(sport) << 16 | u64::from(dport),
            sport,
            dport,
            data_len: 0,
            snd_nxt: una.wrapping_add(1000),
            snd_una: una,
            snd_cwnd: cwnd,
            ssthresh: INFINITE_SSTHRESH,
            snd_wnd: 1 << 20,
            rcv_wnd: 65536,
            srtt_us: srtt,
        }
    }

    #[test]
    fn the_sidecar_reads_back_exactly_and_bad_lines_are_named() {
        let v = vec![
            sample(1, 41000, 5201, 7, 10, 0),
            sample(2, 5201, 41000, u32::MAX, 10, 55),
        ];
        let mut text = format!("{CSV_HEADER}\n");
        for s in &v {
            text.push_str(&csv_line(s));
            text.push('\n');
        }
        assert_eq!(parse_csv(&text).unwrap(), v);
        assert!(parse_csv("t,cpu\n")
            .unwrap_err()
            .contains("not a tcp_probe sidecar"));
        let bad = format!("{CSV_HEADER}\n1,2,3\n");
        assert_eq!(parse_csv(&bad).unwrap_err(), "line 2: 3 fields, not 13");
        let big = format!("{CSV_HEADER}\n1,0,0,70000,1,0,0,0,0,0,0,0,0\n");
        assert!(parse_csv(&big).unwrap_err().starts_with("line 2: 70000"));
        assert_eq!(
            sidecar(Path::new("/x/t.pcap")),
            Path::new("/x/t.tcp_probe.csv")
        );
        assert_eq!(sidecar(Path::new("t")), Path::new("t.tcp_probe.csv"));
        // Read beside a pcap: none, empty (a reader that did not start) and written.
        let dir = tempfile::tempdir().unwrap();
        let pcap = dir.path().join("x.pcap");
        assert!(read_sidecar(&pcap).unwrap().is_none());
        std::fs::write(sidecar(&pcap), "").unwrap();
        assert!(read_sidecar(&pcap).unwrap().is_none());
        std::fs::write(sidecar(&pcap), &text).unwrap();
        assert_eq!(read_sidecar(&pcap).unwrap().map(|(_, v)| v), Some(v));
    }

    /// The sender's socket (ACKs in, snd_una across the 32-bit wrap) and the receiver's,
    /// joined with the captured connection by ports; a third socket on the port is stray.
    #[test]
    fn the_summary_joins_sockets_with_the_captured_connections() {
        let flow: FlowSummary = serde_json::from_value(serde_json::json!({
            "sender": "127.0.0.1:41000", "receiver": "127.0.0.1:5201", "duration_ns": 0,
            "data_segments": 0, "data_bytes": 0, "retransmitted_segments": 0,
            "repeated_bytes": 0, "unique_data_bytes": 0, "acks": 0, "segments_per_ack": null,
            "bytes_per_ack": null, "mss": 1000, "mss_from_syn": true, "sub_mss_segments": 0,
            "sub_mss_share": null, "window_shift": null, "delayed_acks": 0,
            "ack_baseline_ns": null, "median_gap_ns": null, "stops": 0, "stopped_ns": 0,
            "stop_threshold_ns": null
        }))
        .unwrap();
        let una0 = u32::MAX - 999;
        let mut v = vec![
            sample(10, 41000, 5201, una0, 10, 0),
            sample(30, 41000, 5201, una0.wrapping_add(3000), 12, 40),
            sample(20, 41000, 5201, una0.wrapping_add(1000), 11, 50),
            sample(25, 5201, 41000, 99, 10, 30),
            sample(40, 5201, 7, 99, 10, 30),
        ];
        let mut last = sample(50, 41000, 5201, una0.wrapping_add(5000), 8, 20);
        last.ssthresh = 8;
        v.push(last);
        let s = summarise(Path::new("t.tcp_probe.csv"), &v, &[flow]);
        assert_eq!(s.samples, 6);
        assert_eq!(s.sockets.len(), 3);
        let k = &s.sockets[0];
        assert_eq!((k.local_port, k.remote_port), (41000, 5201));
        assert_eq!(k.role, Some(ProbeRole::Sender));
        assert_eq!(k.flow.as_deref(), Some("127.0.0.1:41000 -> 127.0.0.1:5201"));
        assert_eq!(k.samples, 4);
        assert_eq!(k.bytes_acked, 5000);
        assert_eq!((k.cwnd_min, k.cwnd_max, k.cwnd_last), (8, 12, 8));
        assert_eq!((k.ssthresh_last, k.ssthresh_min), (Some(8), Some(8)));
        // srtt over the samples that have one: 50, 40, 20 (time order), lower median 40.
        assert_eq!(
            (k.srtt_min_us, k.srtt_p50_us, k.srtt_max_us),
            (Some(20), Some(40), Some(50))
        );
        assert_eq!(s.sockets[1].role, Some(ProbeRole::Receiver));
        assert_eq!(s.sockets[1].ssthresh_last, None);
        assert_eq!(s.sockets[2].role, None);
        assert_eq!(s.notes.len(), 1, "{:?}", s.notes);
        let line = s.line();
        assert!(
            line.starts_with("6 samples, ? lost; sender :41000 cwnd 8..12 (last 8) segments, ssthresh 8 (min 8), srtt 20/40/50 us"),
            "{line}"
        );
        assert!(overlaps(&v, 0, 10));
        assert!(!overlaps(&v, 5_000_000_000, 6_000_000_000));
    }
}
