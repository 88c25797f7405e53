//! `wirebench mesh PATTERN`: every rank of an MPI job measures against every other, with
//! `run`'s options (each pair is a `run --to` between two ranks).

use std::net::IpAddr;
use std::path::PathBuf;

use anyhow::{bail, Result};
use clap::Args;

use super::run::RunArgs;
use crate::error::{one_line, EXIT_FAILURE};
use crate::mesh::{MeshRequest, Selection};
use crate::request::{Format, Request};
use crate::transport::TransportKind;

#[derive(Debug, Args)]
#[command(
    after_help = "Run under MPI with one rank per host, e.g.\n  mpirun -np 4 --hostfile hosts --map-by ppr:1:node wirebench mesh pingpong -d 1s\nMPI carries only the schedule and the results; the data goes between the ranks' wirebench servers, on each host's first up non-loopback IPv4 address (or --bind). With -t mpi the data goes over MPI point-to-point instead, on the wire MPI chooses (--mca btl). As root, Open MPI also wants --allow-run-as-root. See README, \"Mesh on a real cluster\"."
)]
pub struct MeshArgs {
    #[command(flatten)]
    pub run: RunArgs,
    /// Measure one pair at a time instead of rounds of pairs that share no rank.
    #[arg(long)]
    pub serial: bool,
    /// Only these pairs: A-B measures A to B and B to A, A:B only client A against server B
    /// (e.g. 0-1,2-3 or 0:3). Default: every ordered pair.
    #[arg(long, value_name = "PAIRS", value_parser = crate::mesh::schedule::parse_pairs)]
    pub pairs: Option<Selection>,
    /// Rank r's data threads (its server and its client) run in network namespace PREFIX<r>
    /// (e.g. a lab's hosts wb-NAME-h0, wb-NAME-h1, ...) and its server advertises the address
    /// found there. MPI stays in the namespace the process started in. Needs root.
    #[arg(long, value_name = "PREFIX")]
    pub netns_from_rank: Option<String>,
    /// The address every rank's server listens on and advertises (default: the first up
    /// non-loopback IPv4 address of its host or namespace). Give it per host (e.g. in a
    /// wrapper script) to choose the interface the data crosses.
    #[arg(long, value_name = "ADDR")]
    pub bind: Option<IpAddr>,
    /// Write a heatmap of each matrix (SVG and PNG) into DIR.
    #[arg(long, value_name = "DIR")]
    pub report: Option<PathBuf>,
}

impl TryFrom<&MeshArgs> for MeshRequest {
    type Error = anyhow::Error;

    /// `run`'s request between two ranks, and the mesh's own settings.
    fn try_from(a: &MeshArgs) -> Result<MeshRequest> {
        if a.run.to.is_some() {
            bail!("wirebench mesh measures its ranks against each other: drop --to");
        }
        if a.run.transport == TransportKind::Mpi
            && (a.netns_from_rank.is_some() || a.bind.is_some())
        {
            bail!("over -t mpi the data goes where MPI sends it (its btl), not through namespaces or addresses: drop --netns-from-rank and --bind");
        }
        if a.run.trace.is_some() {
            bail!("wirebench mesh does not take --trace: trace one pair with `wirebench run --to`");
        }
        let request = Request::try_from(&a.run)?;
        if matches!(request.output.format, Format::Csv | Format::JsonStream)
            || request.output.columns.is_some()
        {
            bail!("wirebench mesh prints its matrices as a table, as Markdown (--format markdown) or as one JSON document (--json): drop --csv, --json-stream and --columns");
        }
        // The matrices' grids as Markdown tables, the lines around them as paragraphs.
        let markdown = request.output.format == Format::Markdown;
        Ok(MeshRequest {
            request,
            selection: a.pairs.clone().unwrap_or(Selection::All),
            serial: a.serial,
            netns_prefix: a.netns_from_rank.clone(),
            bind: a.bind,
            report_dir: a.report.clone(),
            markdown,
        })
    }
}

/// `wirebench mesh`: this rank's exit code.
pub fn run(a: &MeshArgs) -> i32 {
    let job = match crate::transport::mpi::Job::init() {
        Ok(j) => j,
        Err(e) => {
            eprintln!("wirebench: error: {}", one_line(&e));
            return EXIT_FAILURE;
        }
    };
    // Every rank checks the command line; only rank 0 says what is wrong.
    let mesh = match MeshRequest::try_from(a) {
        Ok(m) => m,
        Err(e) => {
            if job.rank() == 0 {
                eprintln!("wirebench: error: {}", one_line(&e));
            }
            return EXIT_FAILURE;
        }
    };
    let group = crate::group::mpi::MpiGroup::new(&job);
    crate::mesh::run(&group, &mesh)
}
