//! The command line: what the user can ask for, with units and defaults in every help text.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

use crate::pattern::PatternKind;

#[derive(Debug, Parser)]
#[command(
    name = "wirebench",
    version,
    about = "Protocol-independent network benchmark: latency, throughput and loss over TCP, UDP, Unix sockets, MPTCP, QUIC and raw Ethernet",
    long_about = "Protocol-independent network benchmark: latency, throughput and loss over TCP, UDP, Unix sockets, MPTCP, QUIC and raw Ethernet.\n\nSizes take BINARY suffixes (K = 1024 bytes, M = 1024^2, G = 1024^3). Rates take DECIMAL suffixes (k = 1000 bit/s, M = 10^6, G = 10^9) or 'pps'. Throughput is printed in Mbit/s = 10^6 bit/s.",
    after_help = "Examples:\n  wirebench run pingpong                      # self-hosted loopback server\n  wirebench serve                             # server on port 5320\n  wirebench run pingpong --to HOST --size 1..4M:*2\n  wirebench run stream --to HOST --parallel 4 --interval 1s\n  wirebench run stream --transport udp --rate 500M --size 1400"
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run a server that answers any number of clients at once.
    Serve(ServeArgs),
    /// Run a test as client (with no --to, against a server started on loopback).
    Run(Box<RunArgs>),
    /// The same ping-pong size sweep over several transports: t0, r_max and n_1/2 of each,
    /// with confidence intervals, and the overhead against the lowest layer measured.
    CompareTransports(crate::plan::compare::CompareArgs),
    /// A user-space TCP relay to put in the path: measures what an extra hop costs
    /// (clients point --to at it and add --one-port).
    Relay(crate::relay::RelayArgs),
    /// Measure what timing costs here: a clock read and a histogram record.
    Calibrate {
        /// Iterations per figure.
        #[arg(long, default_value_t = 10_000_000)]
        iterations: u64,
        /// As JSON.
        #[arg(long)]
        json: bool,
    },
    /// Emulated networks in namespaces: two hosts joined by a shaped link (needs root).
    Lab(crate::lab::cli::LabArgs),
    /// Ping-pong, rr or stream over MPI point-to-point calls between the two ranks of an MPI
    /// job: `mpirun -np 2 wirebench mpi PATTERN [options]`.
    #[cfg(feature = "mpi")]
    Mpi(Box<MpiArgs>),
    /// MPI point-to-point benchmarks (not in this build: it needs `--features mpi`, see README).
    #[cfg(not(feature = "mpi"))]
    #[command(disable_help_flag = true)]
    Mpi {
        #[arg(trailing_var_arg = true, allow_hyphen_values = true, hide = true)]
        args: Vec<String>,
    },
    /// Print a completion script for SHELL to stdout, e.g.
    /// `wirebench completions bash > /etc/bash_completion.d/wirebench`.
    Completions {
        /// The shell to complete in.
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
    /// The manual page: wirebench(1) on stdout, or with --dir a page per command
    /// (wirebench.1, wirebench-run.1, ...) written into DIR.
    Man {
        /// Directory to write the pages into, e.g. /usr/local/share/man/man1; the files
        /// written are listed on stdout.
        #[arg(long, value_name = "DIR")]
        dir: Option<PathBuf>,
    },
    /// Saved results: history, show, export, import, report, plot, compare.
    #[command(flatten)]
    Results(crate::results::cli::ResultsCommand),
}

#[derive(Debug, Args)]
pub struct ServeArgs {
    /// Address to listen on (IPv4 or IPv6).
    #[arg(long, default_value = "0.0.0.0")]
    pub listen: std::net::IpAddr,
    /// Control port.
    #[arg(long, short = 'p', default_value_t = crate::control::server::DEFAULT_PORT)]
    pub port: u16,
    /// Longest test point the server accepts, e.g. 1h, 600s. Enforced on every point, its
    /// warm-up and byte- or iteration-bound points included: the server ends a point that is
    /// still running this long (plus 3 x --io-timeout) after it began.
    #[arg(long, default_value = "1h", value_parser = parse_duration)]
    pub max_duration: std::time::Duration,
    /// Most parallel streams in one test.
    #[arg(long, default_value_t = 128)]
    pub max_streams: u32,
    /// Largest message or write size the server accepts (binary suffixes).
    #[arg(long, default_value = "64M", value_parser = parse_bytes)]
    pub max_message: u64,
    /// Most tests served at once.
    #[arg(long, default_value_t = 64)]
    pub max_sessions: u32,
    /// Timeout of every data send and receive and of connection setup, e.g. 10s.
    #[arg(long, default_value = "10s", value_parser = parse_duration)]
    pub io_timeout: std::time::Duration,
    /// Print nothing per session.
    #[arg(long, short)]
    pub quiet: bool,
    #[command(flatten)]
    pub transport: TransportArgs,
    #[command(flatten)]
    pub access: AccessArgs,
    #[command(flatten)]
    pub budget: BudgetArgs,
}

/// Settings of particular transports, for this side only.
#[derive(Debug, Clone, Default, Args)]
pub struct TransportArgs {
    /// raw: network interface to send Ethernet frames on (default: the interface holding the
    /// local address of the control connection).
    #[arg(long, value_name = "IFACE")]
    pub iface: Option<String>,
    /// quic server: certificate chain, PEM (default: a self-signed certificate made at start).
    #[arg(long, value_name = "FILE", requires = "tls_key")]
    pub tls_cert: Option<PathBuf>,
    /// quic server: private key of --tls-cert, PEM.
    #[arg(long, value_name = "FILE", requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,
    /// quic client: verify the server with these CA certificates, PEM (default: accept exactly
    /// the certificate whose SHA-256 fingerprint the server announced on the control connection).
    #[arg(long, value_name = "FILE")]
    pub tls_ca: Option<PathBuf>,
}

impl TransportArgs {
    pub fn config(&self) -> crate::transport::TransportConfig {
        crate::transport::TransportConfig {
            iface: self.iface.clone(),
            tls_cert: self.tls_cert.clone(),
            tls_key: self.tls_key.clone(),
            tls_ca: self.tls_ca.clone(),
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
    /// Transport: tcp, udp, unix, mptcp, quic or raw. Not iperf3's -t (time): that is -d here.
    #[arg(long, short = 't', default_value = "tcp", value_parser = parse_transport)]
    pub transport: String,
    #[command(flatten)]
    pub transport_args: TransportArgs,
    /// Send the data connections to the control port too (TCP only), so that a single
    /// forwarded port carries the test: use it when --to is a relay or proxy. The server
    /// applies its socket options after accepting such a connection.
    #[arg(long)]
    pub one_port: bool,

    // ---- sizes and sweeps ----
    /// Message size in bytes: ping-pong message, rr/crr request, stream write or datagram.
    /// A list (1,16,64,1K), a linear range (1K..64K:+1K) or a geometric range (1..4M:*2,
    /// 1..10M:*1.2). K, M, G are binary (1024). Default: 1 for pingpong/rr/crr, 128K for
    /// streams over reliable transports (tcp, unix, mptcp, quic), 1400 for datagram streams
    /// (udp, raw). iperf3: -l.
    #[arg(long, short = 's', visible_short_alias = 'l', value_parser = parse_sweep)]
    pub size: Option<String>,
    /// NetPIPE-style perturbation: also measure n-P and n+P for every size n.
    #[arg(long, default_value_t = 0)]
    pub perturb: u64,
    /// rr/crr request size in bytes (overrides --size).
    #[arg(long, value_parser = parse_bytes)]
    pub request_size: Option<u64>,
    /// rr/crr response size in bytes (default: 1, or --size for pingpong).
    #[arg(long, value_parser = parse_bytes)]
    pub response_size: Option<u64>,
    /// Stream: bytes per write call (overrides --size).
    #[arg(long, value_parser = parse_bytes)]
    pub write_size: Option<u64>,
    /// Stream: bytes per read call (default: 128K, or 64K+ for datagrams).
    #[arg(long, value_parser = parse_bytes)]
    pub read_size: Option<u64>,

    // ---- stop conditions ----
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
    /// Pace each direction's total sending rate: bits/s with DECIMAL suffixes (100M = 10^8
    /// bit/s of payload, split evenly over the streams) or packets/s ("10kpps"). iperf3: -b.
    #[arg(long, short = 'b', value_parser = parse_rate_arg)]
    pub rate: Option<String>,
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

    // ---- socket options ----
    /// Both socket buffers, SO_SNDBUF and SO_RCVBUF, on both ends in bytes (0 = kernel
    /// autotuning): --sndbuf and --rcvbuf at once, each of which overrides it. Accepts a
    /// sweep like --size (one sweep, the same value for both). iperf3: -w.
    #[arg(long, short = 'w', value_parser = parse_sweep)]
    pub window: Option<String>,
    /// SO_SNDBUF on both ends in bytes (0 = kernel autotuning). Accepts a sweep like --size.
    #[arg(long, value_parser = parse_sweep)]
    pub sndbuf: Option<String>,
    /// SO_RCVBUF on both ends in bytes (0 = kernel autotuning). Accepts a sweep like --size.
    #[arg(long, value_parser = parse_sweep)]
    pub rcvbuf: Option<String>,
    /// SO_SNDBUF of the server's sockets (overrides --sndbuf there). Accepts a sweep.
    #[arg(long, value_parser = parse_sweep)]
    pub server_sndbuf: Option<String>,
    /// SO_RCVBUF of the server's sockets (overrides --rcvbuf there). Accepts a sweep.
    #[arg(long, value_parser = parse_sweep)]
    pub server_rcvbuf: Option<String>,
    /// TCP_NODELAY: turn Nagle's algorithm off on both ends.
    #[arg(long)]
    pub nodelay: bool,
    /// TCP congestion control on both ends (e.g. cubic, reno, bbr).
    #[arg(long)]
    pub cc: Option<String>,
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

    // ---- statistics ----
    /// Confidence level of intervals, percent: 90, 95 or 99.
    #[arg(long, default_value_t = 95)]
    pub confidence: u32,
    /// Run every point this many times.
    #[arg(long, default_value_t = 1)]
    pub repeat: u32,
    /// Repeat each point (at least 3 times) until the confidence interval's half-width of its
    /// headline figure is below this share of the mean, e.g. 2%.
    #[arg(long)]
    pub until_ci: Option<String>,
    /// Cap on runs per point for --until-ci.
    #[arg(long, default_value_t = 10)]
    pub max_repeat: u32,

    // ---- timeouts ----
    /// Timeout of every data send/receive and of connection setup.
    #[arg(long, default_value = "10s", value_parser = parse_duration)]
    pub io_timeout: std::time::Duration,
    /// Unreliable transports: a response not back within this time counts as lost.
    #[arg(long, default_value = "1s", value_parser = parse_duration)]
    pub loss_timeout: std::time::Duration,

    // ---- output ----
    /// One JSON document on stdout (schema "wirebench.run", version 1), nothing else there.
    /// iperf3: -J.
    #[arg(long, short = 'J', conflicts_with = "csv")]
    pub json: bool,
    /// CSV: a header and one row per point on stdout.
    #[arg(long)]
    pub csv: bool,
    /// Newline-delimited JSON on stdout as the run goes: a "begin" object, one "interval"
    /// object per interval report (with --interval) and one "point" object per point as each
    /// finishes, then an "end" object holding the whole document that --json prints.
    #[arg(long, conflicts_with_all = ["json", "csv"])]
    pub json_stream: bool,
    /// A name for this run, kept with it in the results database and its documents, and
    /// printed with its table (e.g. --label "after the NIC firmware update").
    #[arg(long, value_name = "TEXT")]
    pub label: Option<String>,
    /// Also write the JSON document to this file.
    #[arg(long)]
    pub output: Option<PathBuf>,

    // ---- results database ----
    /// Results database the run is saved in (default: $XDG_DATA_HOME/wirebench/results.sqlite,
    /// else ~/.local/share/wirebench/results.sqlite).
    #[arg(long, value_name = "PATH")]
    pub db: Option<PathBuf>,
    /// Do not save the run in the results database.
    #[arg(long, conflicts_with = "db")]
    pub no_save: bool,
}

/// What `wirebench mpi` measures.
#[cfg(feature = "mpi")]
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum MpiPattern {
    /// IMB PingPong / osu_latency: n bytes there, n bytes back; one-way latency = RTT/2.
    Pingpong,
    /// One-way bulk transfer, like osu_bw; the receiver's rate is the headline.
    Stream,
    /// Request/response transactions with separate sizes, `--burst` in flight.
    Rr,
}

#[cfg(feature = "mpi")]
impl MpiPattern {
    pub fn kind(self) -> PatternKind {
        match self {
            MpiPattern::Pingpong => PatternKind::Pingpong,
            MpiPattern::Stream => PatternKind::Stream,
            MpiPattern::Rr => PatternKind::Rr,
        }
    }
}

/// `wirebench mpi`: the options of `run` that mean something between two MPI ranks. Rank 0
/// is the client (requester, sender) and prints; rank 1 responds or receives.
#[cfg(feature = "mpi")]
#[derive(Debug, Args)]
#[command(
    after_help = "Run under MPI with two ranks, e.g.\n  mpirun -np 2 --mca btl tcp,self wirebench mpi pingpong --size 1..4M:*2\nAs root, Open MPI also wants --allow-run-as-root. MPI chooses the wire (--mca btl tcp,self for TCP, vader,self for shared memory); see README."
)]
pub struct MpiArgs {
    /// What to measure.
    #[arg(value_enum)]
    pub pattern: MpiPattern,

    /// Message size in bytes: ping-pong message, rr request, stream send. Lists (1,16,64,1K)
    /// and ranges (1K..64K:+1K, 1..4M:*2); K, M, G are binary (1024). Default: 1, or 64K for
    /// stream.
    #[arg(long, short = 's')]
    pub size: Option<String>,
    /// Stream: messages in flight at once, as osu_bw's window: the sender keeps this many
    /// MPI_Isend going, the receiver this many MPI_Irecv posted (within 4 MiB of buffers
    /// each, as a TCP socket's send buffer). 1: one message at a time, sent and received straight from the pattern's buffer.
    #[arg(long, default_value_t = crate::transport::mpi::DEFAULT_WINDOW, value_parser = clap::value_parser!(u32).range(1..=4096))]
    pub window: u32,
    /// NetPIPE-style perturbation: also measure n-P and n+P for every size n.
    #[arg(long, default_value_t = 0)]
    pub perturb: u64,
    /// rr request size in bytes (overrides --size).
    #[arg(long, value_parser = parse_bytes)]
    pub request_size: Option<u64>,
    /// rr response size in bytes (default: 1).
    #[arg(long, value_parser = parse_bytes)]
    pub response_size: Option<u64>,
    /// Stream: bytes per send, one MPI message each (overrides --size).
    #[arg(long, value_parser = parse_bytes)]
    pub write_size: Option<u64>,
    /// Stream: bytes per receive call (default 128K; a longer message takes several).
    #[arg(long, value_parser = parse_bytes)]
    pub read_size: Option<u64>,

    /// Length of each timed point, e.g. 10s, 500ms. Default: 1s for pingpong/rr, 10s for
    /// stream. Whichever of --duration, --bytes, --iterations comes first ends the point.
    #[arg(long, short = 'd', value_parser = parse_duration)]
    pub duration: Option<std::time::Duration>,
    /// Stop after this many bytes (binary suffixes).
    #[arg(long, value_parser = parse_bytes)]
    pub bytes: Option<u64>,
    /// Stop after this many timed iterations (transactions, or sends of a stream).
    #[arg(long, short = 'n')]
    pub iterations: Option<u64>,
    /// Warm-up iterations before timing starts (excluded from statistics). 0 turns it off.
    /// Default: 10, and for a stream with a window two windows' worth (the window must be
    /// full and the connection past its slow start before the clocks start).
    #[arg(long)]
    pub warmup: Option<u64>,

    /// Stream: rank 1 sends to rank 0.
    #[arg(long, short = 'R')]
    pub reverse: bool,
    /// Stream: pace the sender, bits/s with DECIMAL suffixes (100M = 10^8 bit/s) or "10kpps".
    #[arg(long)]
    pub rate: Option<String>,
    /// rr: transactions kept in flight.
    #[arg(long, default_value_t = 1)]
    pub burst: u32,
    /// Stream: print an interval report this often (e.g. 1s).
    #[arg(long, short = 'i', value_parser = parse_duration)]
    pub interval: Option<std::time::Duration>,

    /// Confidence level of intervals, percent: 90, 95 or 99.
    #[arg(long, default_value_t = 95)]
    pub confidence: u32,
    /// Run every point this many times.
    #[arg(long, default_value_t = 1)]
    pub repeat: u32,
    /// Repeat each point (at least 3 times) until the confidence interval's half-width of its
    /// headline figure is below this share of the mean, e.g. 2%.
    #[arg(long)]
    pub until_ci: Option<String>,
    /// Cap on runs per point for --until-ci.
    #[arg(long, default_value_t = 10)]
    pub max_repeat: u32,
    /// Timeout of every data send and receive between the ranks. A send that does not
    /// complete in time ends the MPI job (MPI cannot take a started send back).
    #[arg(long, default_value = "10s", value_parser = parse_duration)]
    pub io_timeout: std::time::Duration,

    /// One JSON document on stdout (schema "wirebench.run", version 1), nothing else there.
    #[arg(long, conflicts_with = "csv")]
    pub json: bool,
    /// CSV: a header and one row per point on stdout.
    #[arg(long)]
    pub csv: bool,
    /// Also write the JSON document to this file.
    #[arg(long)]
    pub output: Option<PathBuf>,
    /// Results database the run is saved in (default as for `run`).
    #[arg(long, value_name = "PATH")]
    pub db: Option<PathBuf>,
    /// Do not save the run in the results database.
    #[arg(long, conflicts_with = "db")]
    pub no_save: bool,
}

#[cfg(feature = "mpi")]
impl MpiArgs {
    /// The `run` arguments these stand for, over the "mpi" transport: `run`'s defaults for
    /// everything `mpi` does not offer, so that the plan is built by the same code.
    pub fn to_run_args(&self) -> anyhow::Result<RunArgs> {
        use clap::FromArgMatches;
        let matches = RunArgs::augment_args(clap::Command::new("run")).try_get_matches_from([
            "run",
            self.pattern.kind().name(),
            "--transport",
            "mpi",
        ])?;
        let mut r = RunArgs::from_arg_matches(&matches)?;
        r.size = self.size.clone();
        r.perturb = self.perturb;
        r.request_size = self.request_size;
        r.response_size = self.response_size;
        r.write_size = self.write_size;
        r.read_size = self.read_size;
        r.duration = self.duration;
        r.bytes = self.bytes;
        r.iterations = self.iterations;
        r.warmup = self.warmup.unwrap_or(match self.pattern {
            MpiPattern::Stream if self.window > 1 => 10.max(2 * u64::from(self.window)),
            _ => 10,
        });
        r.reverse = self.reverse;
        r.rate = self.rate.clone();
        r.burst = self.burst;
        r.interval = self.interval;
        r.confidence = self.confidence;
        r.repeat = self.repeat;
        r.until_ci = self.until_ci.clone();
        r.max_repeat = self.max_repeat;
        r.io_timeout = self.io_timeout;
        r.json = self.json;
        r.csv = self.csv;
        r.output = self.output.clone();
        r.db = self.db.clone();
        r.no_save = self.no_save;
        Ok(r)
    }
}

pub(crate) fn parse_duration(s: &str) -> Result<std::time::Duration, String> {
    crate::units::parse_duration(s)
}

pub(crate) fn parse_bytes(s: &str) -> Result<u64, String> {
    crate::units::parse_bytes(s)
}

/// A usage error of clap's on one line, with everything clap said but its usage block: what
/// is missing, the values allowed, its "tip: a similar ... exists", and a pointer to the help
/// of the subcommand `args` (the command line after the program's name) name, e.g.
/// "the following required arguments were not provided: <PATTERN> (see 'wirebench run --help')".
pub fn usage_error_line(e: &clap::Error, args: &[String]) -> String {
    let text = e.render().to_string();
    let mut parts: Vec<String> = Vec::new();
    let mut in_usage = false;
    for line in text.lines() {
        let line = line.trim();
        if line.starts_with("Usage:") {
            in_usage = true;
            continue;
        }
        if line.is_empty() {
            in_usage = false;
            continue;
        }
        if in_usage || line.starts_with("For more information, try") {
            continue;
        }
        let line = line.strip_prefix("error: ").unwrap_or(line);
        let line = match line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            Some(inner) => inner, // "[possible values: ...]"
            None => line,
        };
        // "...not provided:" and the arguments it lists on the following lines: one piece.
        match parts.last_mut() {
            Some(last) if last.ends_with(':') => {
                last.push(' ');
                last.push_str(line);
            }
            Some(last)
                if last.contains("not provided: ")
                    && (line.starts_with('<') || line.starts_with('-')) =>
            {
                last.push_str(", ");
                last.push_str(line);
            }
            _ => parts.push(line.to_owned()),
        }
    }
    if parts.is_empty() {
        parts.push("invalid arguments".to_owned());
    }
    let line = parts.join("; ");
    let line = crate::text::printable(&line).into_owned();
    format!("{line} (see '{} --help')", command_path(args))
}

/// "wirebench" and the subcommands that lead `args`, e.g. "wirebench lab up": whose help to
/// point a usage error at.
pub fn command_path(args: &[String]) -> String {
    use clap::CommandFactory;
    let mut cmd = Cli::command();
    let mut path = String::from("wirebench");
    for a in args {
        let Some(sub) = cmd.find_subcommand(a).cloned() else {
            break;
        };
        path.push(' ');
        path.push_str(sub.get_name());
        cmd = sub;
    }
    path
}

/// `wirebench completions SHELL`: the script, from the clap definitions, to `out`.
pub fn completions(shell: clap_complete::Shell, out: &mut dyn std::io::Write) {
    use clap::CommandFactory;
    clap_complete::generate(shell, &mut Cli::command(), "wirebench", out);
}

/// `wirebench man`: wirebench(1) to `out`, or with `dir` a page per command (hidden ones
/// left out) into it, each path written to `out`.
pub fn man(dir: Option<&std::path::Path>, out: &mut dyn std::io::Write) -> anyhow::Result<()> {
    use anyhow::Context;
    use clap::CommandFactory;
    let cmd = Cli::command();
    let Some(dir) = dir else {
        clap_mangen::Man::new(cmd).render(out)?;
        return Ok(());
    };
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    // As clap_mangen::generate_to, but saying which files it wrote.
    fn generate(
        cmd: clap::Command,
        dir: &std::path::Path,
        out: &mut dyn std::io::Write,
    ) -> anyhow::Result<()> {
        for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()).cloned() {
            generate(sub, dir, out)?;
        }
        let path = clap_mangen::Man::new(cmd)
            .generate_to(dir)
            .with_context(|| format!("writing to {}", dir.display()))?;
        writeln!(out, "{}", path.display())?;
        Ok(())
    }
    let mut cmd = cmd.disable_help_subcommand(true);
    cmd.build();
    generate(cmd, dir, out)?;
    Ok(())
}

/// A transport's name (as `--transport`), checked when the command line is parsed, so that a
/// wrong one is a usage error like any other. An iperf3 habit, `-t 5` for five seconds, gets
/// a hint: wirebench's -t is the transport, its time is -d.
fn parse_transport(s: &str) -> Result<String, String> {
    let names = crate::transport::NAMES;
    // "mpi" is checked later: a build without MPI says how to get it.
    if names.contains(&s) || s == "mpi" {
        return Ok(s.to_owned());
    }
    let mut msg = format!("unknown transport '{s}' (available: {})", names.join(", "));
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

/// A size or a sweep of sizes (`--size`, `--sndbuf`, ...), checked at parsing and kept as
/// written: the plan expands it.
pub(crate) fn parse_sweep(s: &str) -> Result<String, String> {
    crate::units::parse_size_spec(s).map(|_| s.to_owned())
}

/// A rate (`--rate`), checked at parsing and kept as written.
fn parse_rate_arg(s: &str) -> Result<String, String> {
    crate::units::parse_rate(s).map(|_| s.to_owned())
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

/// Who may use a server and how much of it one client may hold (`serve`; see SECURITY.md).
#[derive(Debug, Clone, Args)]
pub struct AccessArgs {
    /// Pre-shared key, read from FILE (its content without the line end, at least 16 bytes):
    /// clients must prove they hold the same key, by HMAC-SHA256 challenge-response, and the
    /// server proves it back; the key never crosses the wire. Default: the key in the
    /// environment variable WIREBENCH_PSK if set, else none: anyone who reaches the port may
    /// run tests.
    #[arg(long, value_name = "FILE")]
    pub psk_file: Option<PathBuf>,
    /// Only clients in these address ranges may connect, CIDR[,CIDR...] (repeatable), e.g.
    /// 10.0.0.0/8,2001:db8::/32. Default: all; --deny still applies.
    #[arg(long, value_name = "CIDR", value_delimiter = ',')]
    pub allow: Vec<crate::control::access::Cidr>,
    /// Clients in these address ranges may not connect, even where --allow includes them,
    /// CIDR[,CIDR...] (repeatable). They are refused at accept, before anything is read.
    #[arg(long, value_name = "CIDR", value_delimiter = ',')]
    pub deny: Vec<crate::control::access::Cidr>,
    /// Most tests one client runs at once (a client: an IPv4 address or an IPv6 /64).
    #[arg(long, default_value_t = 8, value_parser = clap::value_parser!(u32).range(1..))]
    pub max_sessions_per_client: u32,
    /// Most connections that have not yet sent their hello, at once (each has 5 s to); one
    /// client may hold a quarter of them, or --max-sessions-per-client if more. Over either, the oldest waiting connection is closed
    /// to make room: a real hello comes at once, silent connections are the ones that age.
    #[arg(long, default_value_t = 256, value_parser = clap::value_parser!(u32).range(1..))]
    pub max_pending: u32,
}

impl AccessArgs {
    pub fn config(&self) -> anyhow::Result<crate::control::admission::AccessConfig> {
        let psk = crate::control::auth::Psk::load(self.psk_file.as_deref())?;
        Ok(crate::control::admission::AccessConfig {
            list: crate::control::access::AccessList {
                allow: self.allow.clone(),
                deny: self.deny.clone(),
            },
            max_sessions_per_client: self.max_sessions_per_client,
            max_pending: self.max_pending,
            psk: psk.map(std::sync::Arc::new),
        })
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
/// What `serve` lets one test, and all running tests together, hold: enforced by the server
/// whatever a client asks, each refusal a readable error the client prints.
#[derive(Debug, Clone, Args)]
pub struct BudgetArgs {
    /// Bytes of buffers one test point may hold on the server: per data connection its
    /// message or read buffers times --batch, its interval reports and the socket buffers it
    /// asks for (binary suffixes). The default fits a 64M ping-pong or 128 default streams.
    #[arg(long, default_value = "256M", value_parser = parse_bytes)]
    pub max_test_memory: u64,
    /// Bytes of buffers all running tests together may hold on the server; a test that
    /// would go over is refused as "server busy".
    #[arg(long, default_value = "1G", value_parser = parse_bytes)]
    pub max_memory: u64,
    /// Data connections (one thread each) all running tests together may hold.
    #[arg(long, default_value_t = crate::control::limits::DEFAULT_STREAMS_TOTAL)]
    pub max_streams_total: u32,
    /// Bit rate of one test, decimal suffixes (e.g. 1G): the server's own senders (-R,
    /// --bidir) must be paced at or below it in all (--rate), and a test whose data
    /// arrives faster on average (over at least 1 s; ping-pong and rr: the bytes both ways)
    /// is ended with an error, as iperf3's --server-bitrate-limit does. Default: no limit.
    #[arg(long, value_name = "RATE", value_parser = parse_bit_rate)]
    pub max_rate: Option<u64>,
    /// Bit rate one client (an IPv4 address, an IPv6 /64) may reserve over all its running
    /// tests, decimal suffixes: each point reserves its --rate in all (an unpaced point, a
    /// ping-pong or rr: the whole per-test cap) before it starts, is refused while the client's
    /// share is taken, and is ended if its data arrives faster than it reserved. Default: no limit.
    #[arg(long, value_name = "RATE", value_parser = parse_bit_rate)]
    pub max_rate_per_client: Option<u64>,
    /// Bit rate all running tests together may reserve, decimal suffixes (as
    /// --max-rate-per-client, over every client): a point that would go over is refused as
    /// "server busy". Default: no limit.
    #[arg(long, value_name = "RATE", value_parser = parse_bit_rate)]
    pub max_rate_total: Option<u64>,
    /// Features a client may use that cost this host more than a test's share: spin
    /// (busy-polling data sockets, a CPU per stream), busy-poll (SO_BUSY_POLL) and raw (the
    /// raw Ethernet transport). Default: none; comma-separated, e.g. --permit spin,raw.
    #[arg(long, value_name = "FEATURE,...", value_enum, value_delimiter = ',')]
    pub permit: Vec<Permit>,
}

/// A feature `serve` refuses unless its operator permits it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Permit {
    Spin,
    BusyPoll,
    Raw,
}

fn parse_bit_rate(s: &str) -> Result<u64, String> {
    match crate::units::parse_rate(s)? {
        crate::units::Rate::BitsPerSecond(b) if b >= 1.0 => Ok(b.min(u64::MAX as f64) as u64),
        crate::units::Rate::BitsPerSecond(_) => Err("a rate below 1 bit/s".into()),
        crate::units::Rate::PacketsPerSecond(_) => {
            Err("a packet rate: give the limit in bits per second (e.g. 1G)".into())
        }
    }
}

#[cfg(test)]
mod help_tests {
    use clap::CommandFactory;

    /// Every argument of every subcommand says what it is: `--help` lists no bare flag.
    #[test]
    fn every_argument_has_help() {
        fn walk(cmd: &clap::Command, path: &str, missing: &mut Vec<String>) {
            for arg in cmd.get_arguments() {
                let id = arg.get_id().as_str();
                if matches!(id, "help" | "version") || arg.is_hide_set() {
                    continue;
                }
                let has = arg
                    .get_help()
                    .is_some_and(|h| !h.to_string().trim().is_empty())
                    || arg
                        .get_long_help()
                        .is_some_and(|h| !h.to_string().trim().is_empty());
                if !has {
                    missing.push(format!("{path} {id}"));
                }
            }
            for sub in cmd.get_subcommands() {
                if sub.get_about().is_none() && sub.get_long_about().is_none() {
                    missing.push(format!("{path} {} (the subcommand)", sub.get_name()));
                }
                walk(sub, &format!("{path} {}", sub.get_name()), missing);
            }
        }
        let mut missing = Vec::new();
        walk(&super::Cli::command(), "wirebench", &mut missing);
        assert!(missing.is_empty(), "arguments without help: {missing:#?}");
    }
}
