//! `wirebench serve`: the server's options, its access list and its budgets, turned into a
//! [`ServerConfig`].

use std::net::SocketAddr;
use std::path::PathBuf;

use anyhow::Result;
use clap::Args;

use super::run::{parse_bytes, parse_duration, TransportArgs};
use crate::control::limits::Limits;
use crate::control::server::{Server, ServerConfig};

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
    /// Also serve the plain gRPC echo service wirebench.v1.Echo (proto/wirebench_echo.proto)
    /// on ADDR (IP:PORT), for other gRPC stacks: Call answers response_size bytes in the
    /// request's encoding (an echo when 0), Upload answers the count of messages and bytes.
    /// --allow and --deny apply to it; the pre-shared key, the budgets and the limits do not
    /// (it has no control connection): its own caps do (12 connections, 3 from one address, 4 calls each,
    /// messages of 4 MiB, answers of 3 MiB; see SECURITY.md). It speaks plaintext HTTP/2
    /// (h2c), no TLS.
    #[arg(long, value_name = "ADDR")]
    pub grpc_echo: Option<SocketAddr>,
    /// Serve the server's own counters on ADDR (IP:PORT) at /metrics, in the Prometheus text
    /// format (OpenMetrics when the scraper asks for it): sessions now and in all, refusals by
    /// kind, payload bytes received and sent. Plain HTTP; --allow, --deny and the pre-shared
    /// key do not apply to it: a bare PORT binds 127.0.0.1; name an address only your
    /// Prometheus reaches. At most 64 connections (16 from one address), 8 KiB and 5 s for a
    /// request's head, 10 s for its answer.
    #[arg(long, value_name = "[IP:]PORT", value_parser = crate::metrics::parse_address)]
    pub metrics: Option<SocketAddr>,
    #[command(flatten)]
    pub transport: TransportArgs,
    #[command(flatten)]
    pub access: AccessArgs,
    #[command(flatten)]
    pub budget: BudgetArgs,
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
    match crate::units::parse_rate_typed(s)? {
        crate::units::Rate::BitsPerSecond(b) if b >= 1.0 => Ok(b.min(u64::MAX as f64) as u64),
        crate::units::Rate::BitsPerSecond(_) => Err("a rate below 1 bit/s".into()),
        crate::units::Rate::PacketsPerSecond(_) => {
            Err("a packet rate: give the limit in bits per second (e.g. 1G)".into())
        }
    }
}

/// `wirebench serve`: runs until killed.
pub fn run(a: ServeArgs) -> Result<()> {
    let config = ServerConfig {
        limits: Limits {
            max_message: a.max_message,
            max_duration_ms: a.max_duration.as_millis().min(u64::MAX as u128) as u64,
            max_streams: a.max_streams,
            max_sessions: a.max_sessions,
            max_test_memory: a.budget.max_test_memory,
            max_memory: a.budget.max_memory,
            max_streams_total: a.budget.max_streams_total,
            max_rate_bps: a.budget.max_rate.unwrap_or(0),
            max_rate_per_client_bps: a.budget.max_rate_per_client.unwrap_or(0),
            max_rate_total_bps: a.budget.max_rate_total.unwrap_or(0),
            permit_spin: a.budget.permit.contains(&Permit::Spin),
            permit_busy_poll: a.budget.permit.contains(&Permit::BusyPoll),
            permit_raw: a.budget.permit.contains(&Permit::Raw),
            ..Limits::default()
        },
        io_timeout: a.io_timeout,
        log: !a.quiet,
        transport: a.transport.config(),
        access: a.access.config()?,
        ..ServerConfig::default()
    };
    let counters = std::sync::Arc::clone(&config.counters);
    let keyless = config.access.psk.is_none();
    let list = config.access.list.clone();
    let server = Server::bind(SocketAddr::new(a.listen, a.port), config)?;
    let addr = server.local_addr()?;
    eprintln!(
        "wirebench {} server listening on {addr}",
        env!("CARGO_PKG_VERSION")
    );
    if keyless && !a.listen.is_loopback() {
        eprintln!(
            "wirebench serve: warning: no pre-shared key: anyone who can reach {addr} can run tests from it (--psk-file or WIREBENCH_PSK; see SECURITY.md)"
        );
    }
    // Kept until the server returns: dropping it stops the exporter.
    let _metrics = match a.metrics {
        Some(addr) => {
            let source = std::sync::Arc::new(ServerMetrics { counters });
            let m = crate::metrics::serve(addr, source)?;
            eprintln!("wirebench serve: metrics on http://{}/metrics", m.addr);
            Some(m)
        }
        None => None,
    };
    // Kept until the server returns: dropping the stop handle ends the echo service.
    let _echo = match a.grpc_echo {
        Some(addr) => {
            let list = list.clone();
            let counts = std::sync::Arc::new(crate::transport::EchoCounts::default());
            let (local, stop, thread) = crate::transport::grpc_serve_echo(
                addr,
                counts,
                std::sync::Arc::new(move |ip| list.permits(ip)),
            )?;
            eprintln!(
                "wirebench gRPC echo service (wirebench.v1.Echo) on {local}: --allow/--deny apply; no pre-shared key or budgets; {} connections of {} calls, messages up to {} B, answers up to {} B",
                crate::transport::GRPC_ECHO_CAPS.0,
                crate::transport::GRPC_ECHO_CAPS.1,
                crate::transport::GRPC_ECHO_CAPS.2,
                crate::transport::GRPC_ECHO_CAPS.3
            );
            Some((stop, thread))
        }
        None => None,
    };
    server.serve()
}

/// What `serve --metrics` exports: the server's counters; it runs no agent and no probes.
struct ServerMetrics {
    counters: std::sync::Arc<crate::control::counters::ServerCounters>,
}

impl crate::metrics::MetricsSource for ServerMetrics {
    fn agent(&self) -> Option<crate::model::agent::AgentSnapshot> {
        None
    }

    fn server(&self) -> Option<crate::model::agent::ServerSnapshot> {
        let now = self.counters.now();
        Some(crate::model::agent::ServerSnapshot {
            sessions_active: now.sessions_active,
            sessions_total: now.sessions_total,
            refusals_total: now
                .refusals
                .into_iter()
                .map(|(kind, n)| (kind.to_string(), n))
                .collect(),
            bytes_received_total: now.bytes_received,
            bytes_sent_total: now.bytes_sent,
        })
    }

    fn probe(
        &self,
        _target: &str,
        _module: &str,
    ) -> Result<crate::model::agent::TestState, String> {
        Err("this is a server: /probe runs on `wirebench agent`".into())
    }

    fn offers_probes(&self) -> bool {
        false
    }
}
