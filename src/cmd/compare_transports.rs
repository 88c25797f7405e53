//! `wirebench compare-transports`: its options, and the table or JSON it prints.

use std::time::Duration;

use anyhow::Result;
use clap::Args;

use super::run::{parse_duration, parse_sweep, ClientAuthArgs, Sweep, TransportArgs};
use crate::glue::compare_transports::{compare, parse_entry, CompareRequest, Entry};

#[derive(Debug, Args)]
pub struct CompareArgs {
    /// Server as HOST[:PORT]; without it, a server on loopback inside this process.
    #[arg(long)]
    pub to: Option<String>,
    #[command(flatten)]
    pub auth: ClientAuthArgs,
    /// Transports to compare, of tcp, udp, unix, mptcp, quic, raw and grpc, e.g. tcp,udp,raw.
    /// Default: every transport that can run here (raw needs root; unix only without --to).
    /// An entry is [LABEL=]KIND[/ENCODING][@HOST[:PORT]]: `grpc/doubles` is grpc with that
    /// encoding; `routed=tcp@RELAY:5301` measures tcp through another server or a relay
    /// (`wirebench relay`) under the label "routed", beside the direct path.
    #[arg(long, value_delimiter = ',', value_parser = parse_entry)]
    pub transports: Option<Vec<Entry>>,
    /// Message sizes of the sweep (binary suffixes); sizes above a transport's largest
    /// message are left out for that transport.
    #[arg(long, default_value = "1..1M:*4", value_parser = parse_sweep)]
    pub size: Sweep,
    /// Time per size and run, e.g. 200ms.
    #[arg(long, short = 'd', default_value = "200ms", value_parser = parse_duration)]
    pub duration: Duration,
    /// Independent sweeps per transport, interleaved across transports; the confidence
    /// intervals are over these runs.
    #[arg(long, default_value_t = 3)]
    pub runs: u32,
    /// The entry the others are compared with (a transport, or an entry's label). Default:
    /// the lowest layer measured directly.
    #[arg(long)]
    pub baseline: Option<String>,
    /// Confidence level in percent: 90, 95 or 99.
    #[arg(long, default_value_t = 95)]
    pub confidence: u32,
    /// Timeout of every data send and receive and of connection setup.
    #[arg(long, default_value = "10s", value_parser = parse_duration)]
    pub io_timeout: Duration,
    #[command(flatten)]
    pub transport_args: TransportArgs,
    /// The grpc entry runs HTTP/2 over TLS 1.3, as `run --tls` (the other entries as ever;
    /// quic always encrypts).
    #[arg(long)]
    pub tls: bool,
    /// As JSON.
    #[arg(long, conflicts_with = "format")]
    pub json: bool,
    /// How the table is printed: table (aligned columns) or markdown.
    #[arg(long, value_enum, default_value_t = super::TableFormat::Table)]
    pub format: super::TableFormat,
    /// Results database every sweep is saved in, labelled "compare-transports TIME:
    /// TRANSPORT, run K of N" (default as for `run`).
    #[arg(long, value_name = "PATH")]
    pub db: Option<std::path::PathBuf>,
    /// Do not save the sweeps in the results database.
    #[arg(long, conflicts_with = "db")]
    pub no_save: bool,
}

impl From<&CompareArgs> for CompareRequest {
    fn from(a: &CompareArgs) -> CompareRequest {
        CompareRequest {
            to: a.to.clone(),
            psk_file: a.auth.psk_file.clone(),
            transports: a.transports.clone(),
            sizes: a.size.0.clone(),
            duration: a.duration,
            runs: a.runs,
            baseline: a.baseline.clone(),
            confidence: a.confidence,
            io_timeout: a.io_timeout,
            local: crate::transport::TransportConfig {
                tls: a.tls,
                ..a.transport_args.config()
            },
            progress: !a.json,
            save: !a.no_save,
            db: a.db.clone(),
        }
    }
}

/// `wirebench compare-transports`: prints the table or the JSON document.
pub fn run(a: CompareArgs) -> Result<i32> {
    let c = compare(&CompareRequest::from(&a))?;
    if a.json {
        println!("{}", serde_json::to_string_pretty(&c)?);
    } else {
        print!(
            "{}",
            crate::output::compare_transports::format(&c, a.format.style())
        );
    }
    Ok(if c.transports.iter().all(|r| r.error.is_none()) {
        0
    } else {
        crate::error::EXIT_FAILURE
    })
}
