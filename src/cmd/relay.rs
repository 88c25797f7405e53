//! `wirebench relay`: the relay's options.

use std::net::SocketAddr;
use std::time::Duration;

use anyhow::{Context, Result};
use clap::Args;

use super::run::{parse_bytes, parse_duration};

#[derive(Debug, Args)]
pub struct RelayArgs {
    /// Address to accept connections on, [HOST:]PORT (default host 0.0.0.0).
    #[arg(long)]
    pub listen: String,
    /// Where to forward each connection, HOST[:PORT] (default port 5320).
    #[arg(long)]
    pub forward: String,
    /// Bytes copied per read and write call (binary suffixes), at most 16M: one such buffer
    /// per direction of every relayed connection.
    #[arg(long, default_value = "128K", value_parser = parse_bytes)]
    pub buffer: u64,
    /// Timeout of connecting to the forward address, e.g. 5s.
    #[arg(long, default_value = "10s", value_parser = parse_duration)]
    pub connect_timeout: Duration,
    /// Connections relayed at once; one more is closed as soon as it is accepted. Each costs
    /// two threads and four descriptors.
    #[arg(long, default_value_t = crate::relay::DEFAULT_MAX_CONNECTIONS)]
    pub max_connections: usize,
    /// Connections relayed at once from one source (an IPv4 address, an IPv6 /64); one more
    /// is closed as soon as it is accepted. A test takes one for control and one per stream.
    #[arg(long, default_value_t = crate::relay::DEFAULT_MAX_PER_SOURCE)]
    pub max_per_source: usize,
    /// A relayed connection with no byte in either direction for this long is closed.
    #[arg(long, default_value = "120s", value_parser = parse_duration)]
    pub idle_timeout: Duration,
    /// A write to either side that cannot progress for this long (the peer reads nothing)
    /// closes the connection.
    #[arg(long, default_value = "30s", value_parser = parse_duration)]
    pub write_timeout: Duration,
    /// Print one line per closed connection with the bytes relayed each way.
    #[arg(long, short)]
    pub verbose: bool,
}

/// `wirebench relay`: serves until killed.
pub fn run(a: RelayArgs) -> Result<()> {
    let listen = if a.listen.chars().all(|c| c.is_ascii_digit()) {
        format!("0.0.0.0:{}", a.listen)
    } else {
        a.listen.clone()
    };
    let listen: SocketAddr = listen
        .parse()
        .with_context(|| format!("--listen '{}': expected [HOST:]PORT", a.listen))?;
    crate::relay::run(crate::relay::RelayConfig {
        listen,
        forward: a.forward.clone(),
        buffer: a.buffer,
        connect_timeout: a.connect_timeout,
        limits: crate::relay::Limits {
            max_connections: a.max_connections,
            max_per_source: a.max_per_source,
            idle_timeout: a.idle_timeout,
            write_timeout: a.write_timeout,
        },
        log: a.verbose,
    })
}
