//! `wirebench run`: its options as clap parses them, and the one place they become a typed
//! [`Request`].

use std::path::PathBuf;

use anyhow::Result;
use clap::Args;

use crate::pattern::{Direction, PatternKind};
use crate::request::{self, Format, Request};
use crate::transport::TransportKind;
use crate::units::Rate;

/// Settings of particular transports, for this side only.
#[derive(Debug, Clone, Default, Args)]
pub struct TransportArgs {
    /// raw: network interface to send Ethernet frames on (default: the interface holding the
    /// local address of the control connection).
    #[arg(long, value_name = "IFACE")]
    pub iface: Option<String>,
    /// quic and grpc --tls server: certificate chain, PEM (default: a self-signed certificate
    /// made at start).
    #[arg(long, value_name = "FILE", requires = "tls_key")]
    pub tls_cert: Option<PathBuf>,
    /// quic and grpc --tls server: private key of --tls-cert, PEM.
    #[arg(long, value_name = "FILE", requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,
    /// quic and grpc --tls client: verify the server with these CA certificates, PEM
    /// (default: accept exactly the certificate whose SHA-256 fingerprint the server
    /// announced on the control connection).
    #[arg(long, value_name = "FILE")]
    pub tls_ca: Option<PathBuf>,
    /// grpc: how each message carries its bytes: one bytes field, n/8 doubles (packed) or
    /// n/32 records of four fields; the n mod 8 (32) bytes left over go as raw bytes. The
    /// server answers in the encoding of the call.
    #[arg(long, value_enum, value_name = "ENCODING")]
    pub encoding: Option<crate::model::vocab::Encoding>,
}

impl TransportArgs {
    pub fn config(&self) -> crate::transport::TransportConfig {
        crate::transport::TransportConfig {
            iface: self.iface.clone(),
            tls_cert: self.tls_cert.clone(),
            tls_key: self.tls_key.clone(),
            tls_ca: self.tls_ca.clone(),
            encoding: self.encoding.unwrap_or_default(),
            tls: false,
        }
    }
}

#[derive(Debug, Args)]
pub struct RunArgs {
    /// What to measure.
    #[arg(value_enum)]
    pub pattern: PatternKind,

    /// Server as HOST[:PORT] (default port 5320). Without it, a server is started on loopback
    /// inside this process. iperf3: -c.
    #[arg(long, short = 'c', value_name = "HOST[:PORT]")]
    pub to: Option<String>,
    #[command(flatten)]
    pub auth: ClientAuthArgs,
    /// Transport: tcp, udp, unix, mptcp, quic, raw or grpc. Not iperf3's -t (time): that is -d here.
    #[arg(long, short = 't', default_value = "tcp", value_parser = TransportParser)]
    pub transport: TransportKind,
    #[command(flatten)]
    pub transport_args: TransportArgs,
    /// grpc, pingpong and rr: measure against this gRPC service of wirebench.v1.Echo
    /// (proto/wirebench_echo.proto) that is not a wirebench server, HOST:PORT: no control
    /// connection, so client-side figures only.
    #[arg(long, value_name = "HOST:PORT", conflicts_with = "to")]
    pub grpc_endpoint: Option<String>,
    /// grpc: HTTP/2 over TLS 1.3 (rustls, ALPN h2) on every data connection. The server uses
    /// its --tls-cert/--tls-key or a self-signed certificate and announces its SHA-256 on the
    /// control connection; the client accepts exactly that certificate, or verifies it
    /// against --tls-ca for the server's IP address. Other transports refuse it (quic always
    /// encrypts).
    #[arg(long, conflicts_with = "grpc_endpoint")]
    pub tls: bool,
    /// Send the data connections to the control port too (TCP only), so that a single
    /// forwarded port carries the test: use it when --to is a relay or proxy. The server
    /// applies its socket options after accepting such a connection.
    #[arg(long)]
    pub one_port: bool,

    #[command(flatten)]
    pub sizes: SizeArgs,

    #[command(flatten)]
    pub stop: StopArgs,
    /// Warm-up iterations before timing starts (excluded from statistics; the first one's cost is
    /// reported apart). 0 turns warm-up off.
    #[arg(long, default_value_t = 10)]
    pub warmup: u64,

    // ---- traffic shape ----
    /// Parallel streams (stream) or connections (pingpong, rr).
    #[arg(long, short = 'P', default_value_t = 1)]
    pub parallel: u32,
    /// Stream: the server sends to the client over connections the client opened.
    #[arg(long, short = 'R', conflicts_with = "bidir")]
    pub reverse: bool,
    /// Stream: both directions at once (separate connections).
    #[arg(long)]
    pub bidir: bool,
    /// Stream: pace each direction's total sending rate: bits/s with DECIMAL suffixes (100M =
    /// 10^8 bit/s of payload, split evenly over the streams) or packets/s ("10kpps"); a bare
    /// number is refused (100bit is 100 bit/s). iperf3: -b. rr: the open-loop request rate,
    /// requests per second over all connections, with decimal prefixes ("5k", "5000/s"), or a
    /// sweep of them, one point per rate ("5k,20k,50k", "1k..20k:+1k"); without --arrivals
    /// the requests are evenly spaced (fixed).
    #[arg(long, short = 'b', value_name = "RATE")]
    pub rate: Option<String>,
    /// rr: when requests leave. closed (the default): each once the reply to the last one came;
    /// fixed: evenly spaced at --rate; poisson: exponential gaps of mean 1/rate (seeded, see
    /// --seed). Open loop counts each request's latency from its scheduled send, so that
    /// queueing at the server is in it (no coordinated omission).
    #[arg(long, value_enum, value_name = "KIND")]
    pub arrivals: Option<crate::pattern::Arrivals>,
    /// With --arrivals poisson: the seed of the gaps (default: drawn at random; the run
    /// document records it). Connection i uses seed + i.
    #[arg(long, value_name = "N")]
    pub seed: Option<u64>,
    /// With open-loop arrivals: most requests unanswered at once per connection (default
    /// 1024). A request due while the bound is reached waits, and the wait is in its latency.
    #[arg(long, value_name = "N")]
    pub max_in_flight: Option<u32>,
    /// With --rate: writes or datagrams let out together at each pacing step (default 1: each
    /// on its own schedule). The rate is the same; the sender sleeps between bursts, and with
    /// --gso a burst leaves as one frame (iperf3's -b RATE/BURST).
    #[arg(long, default_value_t = 1)]
    pub pace_burst: u32,
    /// rr: transactions kept in flight per connection.
    #[arg(long, default_value_t = 1)]
    pub burst: u32,
    /// Stream: print an interval report this often (e.g. 1s), with TCP_INFO for TCP.
    #[arg(long, short = 'i', value_parser = parse_duration)]
    pub interval: Option<std::time::Duration>,
    /// pingpong, rr: wait this long before each timed transaction (e.g. 80ms), as a client
    /// that renders what it got before asking again. Latency excludes the waits; the table
    /// gives transactions/s on the raw time and on the time without them.
    #[arg(long, value_parser = parse_duration)]
    pub think: Option<std::time::Duration>,
    /// pingpong, rr over tcp, udp or raw: split each round trip into stages by the kernels'
    /// software time stamps on both ends (SO_TIMESTAMPING: queueing layer, driver, arrival,
    /// and TCP's ACK), every other timed round trip stamped so that the stamps' own cost is
    /// measured beside them. One connection, one transaction in flight.
    #[arg(long)]
    pub path_timing: bool,

    /// Background load beside the measured test, to the same server, from just before its
    /// timed phase to after it: udp:RATE (UDP held at this payload rate by closed-loop
    /// pacing from the receiver's counts), tcp:N (N TCP streams), or UTIL% (UDP at that share
    /// of the lab link's rate, `lab run` only). The result records the load achieved.
    /// pingpong and rr measure idle first, then loaded (see --load-only). iperf2:
    /// --working-load.
    #[arg(long, value_name = "SPEC")]
    pub load: Option<crate::plan::load::LoadSpec>,
    /// With --load, pingpong and rr: measure under load only, without the idle run first.
    #[arg(long, requires = "load")]
    pub load_only: bool,
    /// With --load (pingpong, rr): draw the round trips over time, idle and loaded; with
    /// --compete: each flow's rate over time, and Jain's index in FILE-jain.EXT. To this file
    /// (.svg, or .png rasterised with a system font); several points write FILE-pN.EXT.
    #[arg(long, value_name = "FILE")]
    pub plot: Option<PathBuf>,
    /// Stream: a flow that shares the path with the measured stream, on a session of its own
    /// to the same server, started with it and as long: tcp, tcp:CC (its own congestion
    /// control, e.g. tcp:bbr) or quic. Repeat for more flows. Each flow's receiver rate, its
    /// share and Jain's fairness index are reported per interval (needs -i) and overall.
    #[arg(long, value_name = "FLOW")]
    pub compete: Vec<crate::plan::compete::FlowSpec>,

    // ---- socket options ----
    /// Both socket buffers, SO_SNDBUF and SO_RCVBUF, on both ends in bytes (0 = kernel
    /// autotuning): --sndbuf and --rcvbuf at once, each of which overrides it. Accepts a
    /// sweep like --size (one sweep, the same value for both). iperf3: -w.
    #[arg(long, short = 'w', value_parser = parse_sweep)]
    pub window: Option<Sweep>,
    /// SO_SNDBUF on both ends in bytes (0 = kernel autotuning). Accepts a sweep like --size.
    #[arg(long, value_parser = parse_sweep)]
    pub sndbuf: Option<Sweep>,
    /// SO_RCVBUF on both ends in bytes (0 = kernel autotuning). Accepts a sweep like --size.
    #[arg(long, value_parser = parse_sweep)]
    pub rcvbuf: Option<Sweep>,
    /// SO_SNDBUF of the server's sockets (overrides --sndbuf there). Accepts a sweep.
    #[arg(long, value_parser = parse_sweep)]
    pub server_sndbuf: Option<Sweep>,
    /// SO_RCVBUF of the server's sockets (overrides --rcvbuf there). Accepts a sweep.
    #[arg(long, value_parser = parse_sweep)]
    pub server_rcvbuf: Option<Sweep>,
    /// TCP_NODELAY: turn Nagle's algorithm off on both ends. A TCP stream whose writes are
    /// all 64K or more, with the socket buffers left to the kernel and a sender under BBR,
    /// does this by itself.
    #[arg(long)]
    pub nodelay: bool,
    /// Keep Nagle's algorithm on in a bulk TCP stream under BBR, which otherwise turns it off
    /// by itself (what an application that never sets TCP_NODELAY gets).
    #[arg(long, conflicts_with = "nodelay")]
    pub nagle: bool,
    /// TCP congestion control on both ends (e.g. cubic, reno, bbr). A list (cubic,reno) is a
    /// sweep: one point per algorithm, crossed with the other swept options.
    #[arg(long, value_delimiter = ',')]
    pub cc: Vec<String>,
    /// TCP maximum segment size (TCP_MAXSEG) in bytes, both ends.
    #[arg(long)]
    pub mss: Option<u32>,
    /// Busy-poll the receive path (non-blocking sockets) instead of sleeping in the kernel.
    #[arg(long)]
    pub spin: bool,
    /// Pin client data threads to these CPUs, round robin (e.g. 0 or 0,2).
    #[arg(long, value_delimiter = ',')]
    pub cpu: Vec<usize>,
    /// Pin server data threads to these CPUs, round robin.
    #[arg(long, value_delimiter = ',')]
    pub server_cpu: Vec<usize>,

    // ---- fast paths (stream) ----
    /// TCP sender: MSG_ZEROCOPY (the result says whether the kernel copied anyway).
    #[arg(long)]
    pub zerocopy: bool,
    /// TCP/Unix sender: sendfile from a memory file instead of write.
    #[arg(long)]
    pub sendfile: bool,
    /// Receiver: MSG_TRUNC, the kernel discards TCP data without copying it (datagrams:
    /// only the 16-byte sequence header is copied).
    #[arg(long)]
    pub skip_rx_copy: bool,
    /// Datagram stream: datagrams per sendmmsg/recvmmsg call; 1 = one system call each.
    /// Default 16 for UDP streams.
    #[arg(long)]
    pub batch: Option<u32>,
    /// UDP sender: generic segmentation offload (UDP_SEGMENT), one send for up to 64 datagrams.
    /// A paced sender (--rate) sends what its schedule lets out, mostly one datagram per frame:
    /// add --pace-burst for whole frames.
    #[arg(long)]
    pub gso: bool,
    /// UDP receiver: generic receive offload (UDP_GRO), one receive for many datagrams.
    #[arg(long)]
    pub gro: bool,
    /// SO_BUSY_POLL on data sockets: the kernel busy-polls the device for this many
    /// microseconds on a receive.
    #[arg(long)]
    pub busy_poll: Option<u32>,
    /// TCP stream receiver: bytes queued before a blocking read is woken (SO_RCVLOWAT).
    /// "auto" (default): what arrives in 1 ms at the warm-up's rate, at most one read; "off":
    /// the kernel's default, a wake-up per arriving segment; or a byte count.
    #[arg(long, value_parser = parse_rcvlowat)]
    pub rcvlowat: Option<crate::pattern::RcvLowat>,

    #[command(flatten)]
    pub statistics: StatsArgs,

    // ---- timeouts ----
    /// Timeout of every data send/receive and of connection setup.
    #[arg(long, default_value = "10s", value_parser = parse_duration)]
    pub io_timeout: std::time::Duration,
    /// Unreliable transports: a response not back within this time counts as lost.
    #[arg(long, default_value = "1s", value_parser = parse_duration)]
    pub loss_timeout: std::time::Duration,

    #[command(flatten)]
    pub output: OutputArgs,

    // ---- segment-flow trace ----
    /// TCP: capture every segment of the data connections (not the control connection)
    /// with kernel time stamps into this pcap file (tcpdump, tshark and Wireshark read it;
    /// so does `wirebench trace show`). Several points or runs write FILE-pN[-rM].EXT. Needs
    /// CAP_NET_RAW.
    #[arg(long, value_name = "FILE")]
    pub trace: Option<PathBuf>,
    /// Where --trace captures: client or server (a self-hosted or lab server). Default: the
    /// side that sends the data.
    #[arg(long, value_enum, requires = "trace")]
    pub trace_side: Option<crate::trace::TraceSide>,
    /// Bytes of each packet --trace keeps: 128 holds the IP and TCP headers with options.
    #[arg(long, default_value_t = crate::trace::DEFAULT_SNAPLEN, value_parser = clap::value_parser!(u32).range(64..=262_144))]
    pub trace_snaplen: u32,
    /// With --trace: also read the kernel's TCP state per segment the data's sending sockets
    /// receive (the tcp:tcp_probe tracepoint: snd_cwnd, ssthresh, srtt, snd_wnd, rcv_wnd,
    /// snd_una) into a sidecar beside FILE (X.pcap: X.tcp_probe.csv), or stop before the
    /// first point with the reason. Off by default: the tracepoint's work per ACK falls on
    /// the measured connection (on a 2-CPU host's loopback it cost a stream up to a quarter
    /// of its rate; bench/RESULTS.md). Needs root (tracefs and perf_event_open).
    #[arg(long, requires = "trace", conflicts_with = "no_trace_probe")]
    pub trace_probe: bool,
    /// With --trace: do not read tcp_probe (the default; kept for scripts that say it).
    #[arg(long, requires = "trace")]
    pub no_trace_probe: bool,
}

pub(crate) fn parse_duration(s: &str) -> Result<std::time::Duration, String> {
    crate::units::parse_duration(s)
}

pub(crate) fn parse_bytes(s: &str) -> Result<u64, String> {
    crate::units::parse_bytes(s)
}

/// A transport's name (as `--transport`), checked when the command line is parsed, so that a
/// wrong one is a usage error like any other. An iperf3 habit, `-t 5` for five seconds, gets
/// a hint: wirebench's -t is the transport, its time is -d.
fn parse_transport(s: &str) -> Result<TransportKind, String> {
    // "mpi" is checked later: a build without MPI says how to get it.
    if let Ok(k) = TransportKind::from_name(s) {
        return Ok(k);
    }
    let mut msg = format!(
        "unknown transport '{s}' (available: {})",
        crate::transport::names()
    );
    let time = if !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit() || b == b'.') {
        Some(format!("{s}s"))
    } else if crate::units::parse_duration(s).is_ok() {
        Some(s.to_owned())
    } else {
        None
    };
    if let Some(t) = time {
        msg.push_str(&format!(
            "; did you mean `-d {t}`? (iperf3's -t is time; wirebench's -t is the transport)"
        ));
    }
    Err(msg)
}

/// The values of a size sweep (`--size 1..4M:*2`, `--sndbuf 16K,64K`): one option, a list
/// (clap would take a bare `Vec` for an option given several times).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sweep(pub Vec<u64>);

/// A size or a sweep of sizes (`--size`, `--sndbuf`, ...), expanded when parsed.
pub(crate) fn parse_sweep(s: &str) -> Result<Sweep, String> {
    crate::units::parse_size_spec(s).map(Sweep)
}

/// A share in percent (`2%`, `0.5%`) as a fraction (0.02).
fn parse_share(s: &str) -> Result<f64, String> {
    crate::units::parse_percent(s)
}

/// `--transport`'s parser: [`parse_transport`]'s errors and hints, with the names clap's
/// completions offer.
#[derive(Clone)]
pub(crate) struct TransportParser;

impl clap::builder::TypedValueParser for TransportParser {
    type Value = TransportKind;

    fn parse_ref(
        &self,
        cmd: &clap::Command,
        arg: Option<&clap::Arg>,
        value: &std::ffi::OsStr,
    ) -> Result<TransportKind, clap::Error> {
        // The function parser's own error: the option, the value and the hint, as before.
        let f: fn(&str) -> Result<TransportKind, String> = parse_transport;
        clap::builder::TypedValueParser::parse_ref(&f, cmd, arg, value)
    }

    fn possible_values(
        &self,
    ) -> Option<Box<dyn Iterator<Item = clap::builder::PossibleValue> + '_>> {
        Some(Box::new(
            TransportKind::SERVED
                .into_iter()
                .map(|k| clap::builder::PossibleValue::new(k.name())),
        ))
    }
}

fn parse_rcvlowat(s: &str) -> Result<crate::pattern::RcvLowat, String> {
    use crate::pattern::RcvLowat;
    match s {
        "auto" => Ok(RcvLowat::Auto),
        "off" => Ok(RcvLowat::Off),
        _ => match crate::units::parse_bytes(s) {
            Ok(0) => Err("0 bytes: use \"off\" for the kernel's default".into()),
            Ok(b) => Ok(RcvLowat::Bytes(b)),
            Err(e) => Err(format!("{e} (or \"auto\", \"off\")")),
        },
    }
}

/// The client's pre-shared key (`run`).
#[derive(Debug, Clone, Default, Args)]
pub struct ClientAuthArgs {
    /// Pre-shared key of a server run with --psk-file, read from FILE: this side proves it
    /// holds it and talks only to a server that proves the same. Default: the key in the
    /// environment variable WIREBENCH_PSK if set, else none. A server started here (no --to)
    /// uses the same key.
    #[arg(long, value_name = "FILE")]
    pub psk_file: Option<PathBuf>,
}

/// Message sizes, shared by `run` and `mpi`.
#[derive(Debug, Clone, Args)]
pub struct SizeArgs {
    /// Message size in bytes: ping-pong message, rr/crr request, stream write or datagram.
    /// A list (1,16,64,1K), a linear range (1K..64K:+1K) or a geometric range (1..4M:*2,
    /// 1..10M:*1.2). K, M, G are binary (1024). Default: 1 for pingpong/rr/crr, 128K for
    /// streams over reliable transports (tcp, unix, mptcp, quic), 1400 for datagram streams
    /// (udp, raw). iperf3: -l.
    #[arg(long, short = 's', visible_short_alias = 'l', value_parser = parse_sweep)]
    pub size: Option<Sweep>,
    /// NetPIPE-style perturbation: also measure n-P and n+P for every size n.
    #[arg(long, default_value_t = 0)]
    pub perturb: u64,
    /// rr/crr request size in bytes (overrides --size).
    #[arg(long, value_parser = parse_bytes)]
    pub request_size: Option<u64>,
    /// rr/crr response size in bytes (default: 1, or --size for pingpong).
    #[arg(long, value_parser = parse_bytes)]
    pub response_size: Option<u64>,
    /// Stream: bytes per write call (overrides --size). pingpong, rr: write each message in
    /// calls of at most this many bytes, on both ends (byte streams only: tcp, unix, mptcp,
    /// quic); without --nodelay the pieces meet Nagle's algorithm and delayed ACKs.
    #[arg(long, value_parser = parse_bytes)]
    pub write_size: Option<u64>,
    /// Stream: bytes per read call (default: 128K, or 64K+ for datagrams).
    #[arg(long, value_parser = parse_bytes)]
    pub read_size: Option<u64>,
}

/// When a point ends, shared by `run` and `mpi` (each has its own warm-up default).
#[derive(Debug, Clone, Args)]
pub struct StopArgs {
    /// Length of each timed point, e.g. 10s, 500ms. Default: 1s for pingpong/rr/crr, 10s for
    /// stream. Whichever of --duration, --bytes, --iterations comes first ends the point.
    #[arg(long, short = 'd', value_parser = parse_duration)]
    pub duration: Option<std::time::Duration>,
    /// Stop after this many bytes (stream: per direction, split over the streams; exchanges:
    /// request plus response bytes). Binary suffixes.
    #[arg(long, value_parser = parse_bytes)]
    pub bytes: Option<u64>,
    /// Stop after this many timed iterations (transactions per connection, or writes per stream).
    #[arg(long, short = 'n')]
    pub iterations: Option<u64>,
}

/// Repeats and confidence, shared by `run` and `mpi`.
#[derive(Debug, Clone, Args)]
pub struct StatsArgs {
    /// Confidence level of intervals, percent: 90, 95 or 99.
    #[arg(long, default_value_t = 95)]
    pub confidence: u32,
    /// Run every point this many times.
    #[arg(long, default_value_t = 1)]
    pub repeat: u32,
    /// Repeat each point (at least 3 times) until the confidence interval's half-width of its
    /// headline figure is below this share of the mean, e.g. 2%.
    #[arg(long, value_parser = parse_share)]
    pub until_ci: Option<f64>,
    /// Cap on runs per point for --until-ci.
    #[arg(long, default_value_t = 10)]
    pub max_repeat: u32,
}

/// What `run --format` prints on stdout.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum FormatArg {
    /// A row per point as it is measured, with notes under the rows (the default).
    Table,
    /// One JSON document (as --json).
    Json,
    /// A header and a row per point (as --csv).
    Csv,
    /// Newline-delimited JSON as the run goes (as --json-stream).
    JsonStream,
    /// The table as a GitHub-flavoured Markdown table, printed whole when the run ends.
    Markdown,
}

impl From<FormatArg> for Format {
    fn from(f: FormatArg) -> Format {
        match f {
            FormatArg::Table => Format::Table,
            FormatArg::Json => Format::Json,
            FormatArg::Csv => Format::Csv,
            FormatArg::JsonStream => Format::JsonStream,
            FormatArg::Markdown => Format::Markdown,
        }
    }
}

/// `--columns`' parser: each name checked against the CSV header's, when the command line is
/// read.
pub(crate) fn parse_column(s: &str) -> Result<String, String> {
    crate::output::columns::known(s)
}

/// What is printed and saved, shared by `run` and `mpi`.
#[derive(Debug, Clone, Args)]
pub struct OutputArgs {
    /// What stdout gets: table (the default: a row per point as it is measured), json,
    /// csv, json-stream (each as its flag), or markdown: the table as a GitHub-flavoured
    /// Markdown table, printed whole when the run ends, its notes listed after it (interval
    /// lines left out: they are in --json).
    #[arg(long, value_enum, value_name = "FORMAT", conflicts_with_all = ["json", "csv", "json_stream"])]
    pub format: Option<FormatArg>,
    /// One JSON document on stdout (schema "wirebench.run", its version in `schema_version`;
    /// schema/wirebench.run.schema.json), nothing else there.
    /// iperf3: -J; as --format json.
    #[arg(long, short = 'J', conflicts_with = "csv")]
    pub json: bool,
    /// CSV: a header and one row per point on stdout; as --format csv.
    #[arg(long)]
    pub csv: bool,
    /// Only these columns of the table or the CSV, named as in the CSV header (e.g.
    /// size_bytes,rtt_p99_ns,throughput_bits_per_s; an unknown name is refused with the
    /// list): the CSV has them in the order given, the table keeps the columns that show
    /// them in its own order and units. netperf: -o.
    #[arg(long, value_delimiter = ',', value_name = "NAME,...", value_parser = parse_column)]
    pub columns: Vec<String>,
    /// Newline-delimited JSON on stdout as the run goes: a "begin" object, one "interval"
    /// object per interval report (with --interval) and one "point" object per point as each
    /// finishes, then an "end" object holding the whole document that --json prints; as
    /// --format json-stream.
    #[arg(long, conflicts_with_all = ["json", "csv"])]
    pub json_stream: bool,
    /// A name for this run, kept with it in the results database and its documents, and
    /// printed with its table (e.g. --label "after the NIC firmware update").
    #[arg(long, value_name = "TEXT")]
    pub label: Option<String>,
    /// Also write the JSON document to this file.
    #[arg(long)]
    pub output: Option<PathBuf>,
    // The files this run writes (--output, --trace, --plot), checked before the first point.
    #[command(flatten)]
    pub force: super::ForceArg,
    /// Under each point of the table, both hosts' CPU shares over it (user, system, softirq:
    /// % of the whole host). Always in --json and --csv.
    #[arg(long)]
    pub host_cpu: bool,

    // ---- results database ----
    /// Results database the run is saved in (default: $XDG_DATA_HOME/wirebench/results.sqlite,
    /// else ~/.local/share/wirebench/results.sqlite).
    #[arg(long, value_name = "PATH")]
    pub db: Option<PathBuf>,
    /// Do not save the run in the results database.
    #[arg(long, conflicts_with = "db")]
    pub no_save: bool,
}

impl SizeArgs {
    pub fn request(&self) -> request::Sizes {
        request::Sizes {
            size: self.size.as_ref().map(|s| s.0.clone()),
            perturb: self.perturb,
            request_size: self.request_size,
            response_size: self.response_size,
            write_size: self.write_size,
            read_size: self.read_size,
        }
    }
}

impl StopArgs {
    pub fn request(&self, warmup: u64) -> request::Stop {
        request::Stop {
            duration: self.duration,
            bytes: self.bytes,
            iterations: self.iterations,
            warmup,
        }
    }
}

impl StatsArgs {
    pub fn request(&self) -> request::Statistics {
        request::Statistics {
            confidence: self.confidence,
            repeat: self.repeat,
            until_ci: self.until_ci,
            max_repeat: self.max_repeat,
        }
    }
}

impl OutputArgs {
    /// What is printed and saved; --columns with a JSON output is refused, as JSON holds
    /// every figure.
    pub fn request(&self) -> Result<request::Output> {
        let format = if let Some(f) = self.format {
            f.into()
        } else if self.json_stream {
            Format::JsonStream
        } else if self.json {
            Format::Json
        } else if self.csv {
            Format::Csv
        } else {
            Format::Table
        };
        if !self.columns.is_empty() && matches!(format, Format::Json | Format::JsonStream) {
            anyhow::bail!(
                "--columns chooses the columns of the table, Markdown or CSV; the JSON holds every figure"
            );
        }
        Ok(request::Output {
            format,
            label: self.label.clone(),
            file: self.output.clone(),
            save: !self.no_save,
            db: self.db.clone(),
            host_cpu: self.host_cpu,
            force: self.force.force,
            columns: (!self.columns.is_empty()).then(|| self.columns.clone()),
        })
    }
}

impl TryFrom<&RunArgs> for Request {
    type Error = anyhow::Error;

    /// The command line as a request: the only place `run`'s flags are read.
    fn try_from(a: &RunArgs) -> Result<Request> {
        let list = |s: &Option<Sweep>| s.as_ref().map(|s| s.0.clone());
        if let Some(e) = a.transport_args.encoding {
            if a.transport != TransportKind::Grpc {
                anyhow::bail!(
                    "--encoding {e} applies to -t grpc alone (messages of {} carry plain bytes)",
                    a.transport
                );
            }
        }
        check_tls(a.tls, a.transport)?;
        let (rate, open_loop) = rate_and_arrivals(a)?;
        Ok(Request {
            pattern: a.pattern,
            transport: a.transport,
            server: request::ServerTarget {
                to: a.to.clone(),
                psk_file: a.auth.psk_file.clone(),
                one_port: a.one_port,
            },
            local: crate::transport::TransportConfig {
                tls: a.tls,
                ..a.transport_args.config()
            },
            sizes: a.sizes.request(),
            buffers: request::Buffers {
                window: list(&a.window),
                sndbuf: list(&a.sndbuf),
                rcvbuf: list(&a.rcvbuf),
                server_sndbuf: list(&a.server_sndbuf),
                server_rcvbuf: list(&a.server_rcvbuf),
            },
            stop: a.stop.request(a.warmup),
            traffic: request::Traffic {
                parallel: a.parallel,
                direction: if a.bidir {
                    Direction::Bidir
                } else if a.reverse {
                    Direction::Reverse
                } else {
                    Direction::Forward
                },
                rate,
                pace_burst: a.pace_burst,
                burst: a.burst,
                interval: a.interval,
                think: a.think,
                open_loop,
                path_timing: a.path_timing,
            },
            socket: request::SocketSettings {
                nodelay: a.nodelay,
                nagle: a.nagle,
                cc: a.cc.clone(),
                mss: a.mss,
                spin: a.spin,
                cpu: a.cpu.clone(),
                server_cpu: a.server_cpu.clone(),
            },
            fast: request::FastRequest {
                zerocopy: a.zerocopy,
                sendfile: a.sendfile,
                skip_rx_copy: a.skip_rx_copy,
                batch: a.batch,
                gso: a.gso,
                gro: a.gro,
                busy_poll_us: a.busy_poll,
                rcvlowat: a.rcvlowat,
            },
            statistics: a.statistics.request(),
            timeouts: request::Timeouts {
                io: a.io_timeout,
                loss: a.loss_timeout,
            },
            output: a.output.request()?,
            trace: a.trace.as_ref().map(|file| crate::trace::TraceRequest {
                file: file.clone(),
                side: a.trace_side,
                snaplen: a.trace_snaplen,
                probe: if a.trace_probe {
                    crate::trace::ProbeMode::Required
                } else {
                    crate::trace::ProbeMode::Off
                },
            }),
            load: a.load.map(|spec| request::LoadRequest {
                spec,
                only: a.load_only,
            }),
            compete: a.compete.clone(),
            plot: a.plot.clone(),
            host_counters: true,
        })
    }
}

/// `--rate`, `--arrivals`, `--seed` and `--max-in-flight`: a stream's pacing rate, or rr's
/// open-loop schedule. rr reads `--rate` as requests per second (a closed loop has no rate to
/// keep), every other pattern as bits or packets per second.
fn rate_and_arrivals(a: &RunArgs) -> Result<(Option<Rate>, Option<request::OpenLoopRequest>)> {
    use crate::pattern::Arrivals;
    let open = a.pattern == PatternKind::Rr && a.arrivals != Some(Arrivals::Closed);
    if !open {
        if let Some(kind) = a.arrivals.filter(|k| *k != Arrivals::Closed) {
            anyhow::bail!(
                "--arrivals {kind} applies to the rr pattern only (requests on a schedule), not to {}",
                a.pattern
            );
        }
        for (set, name) in [
            (a.seed.is_some(), "--seed"),
            (a.max_in_flight.is_some(), "--max-in-flight"),
        ] {
            if set {
                anyhow::bail!("{name} applies to rr with --arrivals fixed or poisson only");
            }
        }
        if a.pattern == PatternKind::Rr {
            if a.rate.is_some() {
                anyhow::bail!("--rate sets an open-loop schedule: it cannot be combined with --arrivals closed");
            }
            return Ok((None, None));
        }
        let rate = a
            .rate
            .as_deref()
            .map(crate::units::parse_rate_typed)
            .transpose()
            .map_err(|e| anyhow::anyhow!("--rate: {e}"))?;
        return Ok((rate, None));
    }
    let Some(text) = a.rate.as_deref() else {
        if let Some(kind) = a.arrivals {
            anyhow::bail!("--arrivals {kind} needs --rate N/s: the requests per second to offer");
        }
        for (set, name) in [
            (a.seed.is_some(), "--seed"),
            (a.max_in_flight.is_some(), "--max-in-flight"),
        ] {
            if set {
                anyhow::bail!("{name} applies to rr with --arrivals fixed or poisson only");
            }
        }
        return Ok((None, None));
    };
    let rates = crate::units::parse_request_rates(text).map_err(anyhow::Error::msg)?;
    Ok((
        None,
        Some(request::OpenLoopRequest {
            arrivals: a.arrivals.unwrap_or(Arrivals::Fixed),
            rates,
            seed: a.seed,
            max_in_flight: a
                .max_in_flight
                .unwrap_or(crate::pattern::openloop::DEFAULT_MAX_IN_FLIGHT),
        }),
    ))
}

/// `--tls` is grpc's: one line for any other transport.
pub(super) fn check_tls(tls: bool, transport: TransportKind) -> Result<()> {
    match transport {
        _ if !tls => Ok(()),
        TransportKind::Grpc => Ok(()),
        TransportKind::Quic => anyhow::bail!(
            "--tls applies to -t grpc alone: quic always encrypts (TLS 1.3, --tls-cert/--tls-key/--tls-ca choose its certificates)"
        ),
        t => anyhow::bail!("--tls applies to -t grpc alone ({t} carries its bytes in the clear)"),
    }
}

/// `wirebench run`: the exit code.
pub fn run(a: &RunArgs) -> Result<i32> {
    let request = Request::try_from(a)?;
    if let Some(endpoint) = &a.grpc_endpoint {
        if a.transport != TransportKind::Grpc {
            anyhow::bail!("--grpc-endpoint needs -t grpc");
        }
        return crate::glue::grpc_endpoint::run(&request, endpoint);
    }
    Ok(crate::glue::measure::run(&request, None))
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::{FromArgMatches, Parser};

    fn parse(args: &[&str]) -> RunArgs {
        let cmd = RunArgs::augment_args(clap::Command::new("run"));
        let m = cmd
            .try_get_matches_from(std::iter::once("run").chain(args.iter().copied()))
            .unwrap();
        RunArgs::from_arg_matches(&m).unwrap()
    }

    /// `run`'s defaults and [`Request::default`] are one set of defaults.
    #[test]
    fn the_bare_command_line_is_the_default_request() {
        let r = Request::try_from(&parse(&["pingpong"])).unwrap();
        assert_eq!(r, Request::default());
    }

    /// Every kind of value is parsed once, into its type, where the command line is read.
    #[test]
    fn values_arrive_typed() {
        let r = Request::try_from(&parse(&[
            "stream",
            "-t",
            "udp",
            "--size",
            "1K..4K:*2",
            "-w",
            "64K",
            "-b",
            "100M",
            "-R",
            "--until-ci",
            "2%",
            "-d",
            "1500ms",
            "-J",
            "--no-save",
            "--cc",
            "cubic,reno",
            "--load",
            "udp:30M",
        ]))
        .unwrap();
        assert_eq!(
            r.load,
            Some(request::LoadRequest {
                spec: crate::plan::load::LoadSpec::Udp(30e6),
                only: false,
            })
        );
        assert_eq!(r.socket.cc, ["cubic", "reno"]);
        assert_eq!(r.pattern, PatternKind::Stream);
        assert_eq!(r.transport, TransportKind::Udp);
        assert_eq!(r.sizes.size, Some(vec![1024, 2048, 4096]));
        assert_eq!(r.buffers.window, Some(vec![65536]));
        assert_eq!(r.traffic.rate, Some(Rate::BitsPerSecond(100e6)));
        assert_eq!(r.traffic.direction, Direction::Reverse);
        assert_eq!(r.statistics.until_ci, Some(0.02));
        assert_eq!(
            r.stop.duration,
            Some(std::time::Duration::from_millis(1500))
        );
        assert_eq!(r.output.format, Format::Json);
        assert!(!r.output.save);
    }

    /// `-t 5` (iperf3's time) is refused with a hint at `-d`, and clap's message keeps the
    /// value and the option.
    #[test]
    fn an_iperf3_time_gets_a_hint() {
        let e = crate::cmd::Cli::try_parse_from(["wirebench", "run", "pingpong", "-t", "5"])
            .unwrap_err();
        let line = crate::cmd::usage_error_line(&e, &["run".into()]);
        assert!(line.contains("did you mean `-d 5s`?"), "{line}");
        assert!(line.contains("'5'"), "{line}");
    }

    /// iperf3's habits get this tool's names on the one line of the usage error, and
    /// clap's beside-the-point tips are left out.
    #[test]
    fn iperf3_options_get_a_hint_on_one_line() {
        for (args, want) in [
            (&["run", "stream", "-u"][..], "`-t udp`"),
            (&["run", "stream", "--omit=3"][..], "--warmup"),
            (&["run", "stream", "-n", "10M"][..], "`--bytes 10M`"),
            (&["-s"][..], "wirebench serve"),
        ] {
            let argv: Vec<&str> = std::iter::once("wirebench")
                .chain(args.iter().copied())
                .collect();
            let e = crate::cmd::Cli::try_parse_from(&argv).unwrap_err();
            let owned: Vec<String> = args.iter().map(|a| a.to_string()).collect();
            let line = crate::cmd::usage_error_line(&e, &owned);
            assert!(line.contains(want), "{args:?}: {line}");
            assert!(!line.contains("tip:"), "{line}");
            assert!(!line.contains('\n'), "{line}");
        }
    }
    /// `--format` names every output; the flags stay its shorthands and conflict with it.
    #[test]
    fn format_takes_markdown_and_the_shorthands_stay() {
        let format = |args: &[&str]| Request::try_from(&parse(args)).unwrap().output.format;
        assert_eq!(
            format(&["pingpong", "--format", "markdown"]),
            Format::Markdown
        );
        assert_eq!(
            format(&["stream", "--format", "json-stream"]),
            Format::JsonStream
        );
        assert_eq!(format(&["stream", "--format", "csv"]), Format::Csv);
        assert_eq!(format(&["stream", "--csv"]), Format::Csv);
        assert_eq!(format(&["stream"]), Format::Table);
        for clash in [
            &["--format", "csv", "--json"][..],
            &["--format", "table", "--csv"],
        ] {
            let argv: Vec<&str> = ["wirebench", "run", "pingpong"]
                .into_iter()
                .chain(clash.iter().copied())
                .collect();
            assert!(crate::cmd::Cli::try_parse_from(&argv).is_err(), "{clash:?}");
        }
    }

    /// `--columns` is checked when the command line is read: an unknown name is a one-line
    /// usage error that lists the names; with JSON, which holds every figure, it is refused.
    #[test]
    fn columns_are_checked_before_anything_is_measured() {
        let r = Request::try_from(&parse(&["rr", "--columns", "rtt_p99_ns,size_bytes"])).unwrap();
        assert_eq!(
            r.output.columns,
            Some(vec!["rtt_p99_ns".to_owned(), "size_bytes".to_owned()])
        );
        let args = ["run", "rr", "--columns", "size_bytes,p99"];
        let e =
            crate::cmd::Cli::try_parse_from(std::iter::once("wirebench").chain(args)).unwrap_err();
        let owned: Vec<String> = args.iter().map(|a| a.to_string()).collect();
        let line = crate::cmd::usage_error_line(&e, &owned);
        assert!(line.contains("unknown column 'p99'"), "{line}");
        assert!(
            line.contains("rtt_p99_ns") && !line.contains('\n'),
            "{line}"
        );
        let e = Request::try_from(&parse(&["rr", "-J", "--columns", "size_bytes"])).unwrap_err();
        assert!(e.to_string().contains("the JSON holds every figure"), "{e}");
    }
}
