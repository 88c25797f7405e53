//! `wirebench app matmul|jacobi|chunks`: an application kernel over P ranks, either as P
//! local processes (`--ranks P`: this process is rank 0 and starts the others as hidden
//! `__app-rank` children, joined by Unix sockets) or as the ranks of an MPI job
//! (`mpirun -np P wirebench app ...`, feature `mpi`). Rank 0 prints, saves and plots.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use anyhow::{anyhow, bail, Context, Result};
use clap::Args;

use super::run::parse_duration;
use crate::app::jacobi::StopRule;
use crate::app::speedup::{self, AppReport};
use crate::app::wiring::{self, Wiring};
use crate::app::{chunks, Job, Kernel, Peers};
#[cfg(feature = "mpi")]
use crate::error::one_line;
use crate::group::{placement, Group, SocketGroup};
use crate::transport::{SocketOptions, TransportConfig, TransportKind};

/// Which kernel.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum KernelName {
    /// C = A x B, A in row stripes and B in column stripes over a grid of ranks
    /// ([Local ATM computing n.d.], see REFERENCES.md).
    Matmul,
    /// Jacobi relaxation of an n x n grid, halo exchange each sweep, to a tolerance
    /// ([Local ATM computing n.d.]).
    Jacobi,
    /// Rank 0 serves fixed-size chunks up to a volume; clients think between chunks
    /// ([Petri and Eickermann 2007]).
    Chunks,
}

#[derive(Debug, Clone, Args)]
#[command(
    after_help = "Examples:\n  wirebench app matmul --ranks 4 --n 32,64,128,256\n  wirebench app jacobi --ranks 4 --n 64 --tolerance 1e-4\n  wirebench app chunks --ranks 3 --chunk 1M --volume 64M --think 10ms\n  mpirun -np 4 wirebench app matmul -t mpi      (feature mpi; as root add --allow-run-as-root)"
)]
pub struct AppArgs {
    /// The kernel to run.
    #[arg(value_enum)]
    pub kernel: KernelName,
    /// Transport between the ranks: a reliable byte stream (tcp, unix, mptcp, quic), or mpi
    /// under mpirun.
    #[arg(long, short = 't', value_enum, default_value = "tcp")]
    pub transport: TransportKind,
    /// matmul, jacobi: the sizes n (n x n matrices or grids), comma-separated.
    #[arg(long = "n", value_delimiter = ',', default_value = "32,64,128,256", value_parser = clap::value_parser!(u64).range(1..=16384))]
    pub n: Vec<u64>,
    /// Ranks as local processes on this host (default 4, the 2x2 mesh of
    /// [Local ATM computing n.d.]). Under mpirun the job's size is used instead.
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..=64))]
    pub ranks: Option<u64>,
    /// Rank r's data connections in network namespace PREFIXr (a lab host); the ranks'
    /// control plane stays where they started.
    #[arg(long, value_name = "PREFIX")]
    pub netns_from_rank: Option<String>,
    /// Timed repetitions per size ([Local ATM computing n.d.] took the mean of 50).
    #[arg(long, default_value_t = 20, value_parser = clap::value_parser!(u64).range(1..))]
    pub repetitions: u64,
    /// Repetitions before the timed ones, checked but not counted.
    #[arg(long, default_value_t = 1)]
    pub warmup: u64,
    /// Confidence level of the intervals, percent (90, 95 or 99).
    #[arg(long, default_value_t = 95)]
    pub confidence: u32,
    /// jacobi: stop once a sweep changes no unknown by more than this fraction of the first
    /// sweep's largest change ([Local ATM computing n.d.]: e_k <= e_0 * 10^-v).
    #[arg(long, default_value_t = 1e-4)]
    pub tolerance: f64,
    /// jacobi: stop after this many sweeps at most.
    #[arg(long, default_value_t = 100_000, value_parser = clap::value_parser!(u64).range(1..))]
    pub max_iterations: u64,
    /// chunks: bytes per chunk, BINARY suffixes ([Petri and Eickermann 2007]: 3384K).
    #[arg(long, default_value = "1M", value_parser = crate::units::parse_bytes)]
    pub chunk: u64,
    /// chunks: bytes served in all, BINARY suffixes.
    #[arg(long, default_value = "32M", value_parser = crate::units::parse_bytes)]
    pub volume: u64,
    /// chunks: each client's processing time per chunk ([Petri and Eickermann 2007]: 80ms).
    #[arg(long, default_value = "10ms", value_parser = parse_duration)]
    pub think: Duration,
    /// Timeout of connection setup and of every data send and receive.
    #[arg(long, default_value = "30s", value_parser = parse_duration)]
    pub io_timeout: Duration,
    /// How long a rank waits for the others between repetitions (rank 0's sequential
    /// baseline runs meanwhile).
    #[arg(long, default_value = "600s", value_parser = parse_duration)]
    pub control_timeout: Duration,
    /// One JSON document on stdout (schema "wirebench.app"), nothing else there.
    #[arg(long, short = 'J', conflicts_with = "format")]
    pub json: bool,
    /// How the table is printed: table (aligned columns) or markdown.
    #[arg(long, value_enum, default_value_t = super::TableFormat::Table)]
    pub format: super::TableFormat,
    /// Results database the run is saved in (default as for `run`).
    #[arg(long, value_name = "PATH")]
    pub db: Option<PathBuf>,
    /// Do not save the run in the results database.
    #[arg(long, conflicts_with = "db")]
    pub no_save: bool,
    /// Background load beside the whole job, as `run --load`: udp:RATE (UDP held at this
    /// payload rate) or tcp:N (N TCP streams), from rank 0 to --load-to, from before the
    /// first repetition to after the last ([Local ATM computing n.d.] ran its kernels beside
    /// 30% load on the ranks' Ethernet). The report states what the load achieved.
    #[arg(long, value_name = "SPEC")]
    pub load: Option<crate::plan::load::LoadSpec>,
    /// The wirebench server the load goes to, HOST[:PORT] (a lab host's, so that the load
    /// crosses the ranks' link). Default: a server on loopback in this process.
    #[arg(long, value_name = "HOST[:PORT]", requires = "load")]
    pub load_to: Option<String>,
    /// Write the speedup against n as a figure (FILE.svg or FILE.png).
    #[arg(long, value_name = "FILE")]
    pub plot: Option<PathBuf>,
    #[command(flatten)]
    pub force: super::ForceArg,
}

/// `__app-rank`: one rank of a local job, started by rank 0.
#[derive(Debug, Args)]
pub struct RankArgs {
    /// This rank.
    #[arg(long)]
    pub rank: usize,
    /// The directory of the job's control sockets.
    #[arg(long)]
    pub control_dir: PathBuf,
    /// Rank 0's process id: this rank ends when it does.
    #[arg(long)]
    pub parent: u32,
    #[command(flatten)]
    pub app: AppArgs,
}

impl AppArgs {
    fn job(&self) -> Result<Job> {
        let sizes: Vec<usize> = self.n.iter().map(|&n| n as usize).collect();
        let kernel = match self.kernel {
            KernelName::Matmul => Kernel::Matmul { sizes },
            KernelName::Jacobi => {
                if !(self.tolerance >= 0.0 && self.tolerance < 1.0) {
                    bail!("--tolerance must be at least 0 and below 1");
                }
                Kernel::Jacobi {
                    sizes,
                    stop: StopRule {
                        tolerance: self.tolerance,
                        max_iterations: self.max_iterations,
                    },
                }
            }
            KernelName::Chunks => Kernel::Chunks(chunks::Plan {
                chunk: self.chunk,
                volume: self.volume,
                think: self.think,
            }),
        };
        Ok(Job {
            kernel,
            repetitions: self.repetitions,
            warmup: self.warmup,
            confidence: crate::stats::ci::parse_confidence(self.confidence)
                .map_err(|e| anyhow!("--confidence: {e}"))?,
            control_timeout: self.control_timeout,
        })
    }

    fn settings(&self) -> Vec<String> {
        match self.kernel {
            KernelName::Matmul => Vec::new(),
            KernelName::Jacobi => vec![
                format!("tolerance={:e}", self.tolerance),
                format!("max_iterations={}", self.max_iterations),
            ],
            KernelName::Chunks => vec![
                format!("chunk={}", self.chunk),
                format!("volume={}", self.volume),
                format!("think={:?}", self.think),
            ],
        }
    }

    /// Everything that can be refused before a rank starts.
    fn validate(&self, ranks: usize) -> Result<Job> {
        let job = self.job()?;
        if let Some(crate::plan::load::LoadSpec::Utilisation(_)) = self.load {
            bail!(
                "app --load takes udp:RATE or tcp:N: a share of a lab link's rate needs `lab run`"
            );
        }
        if self.transport != TransportKind::Mpi {
            let caps = self.transport.capabilities()?;
            if !caps.reliable || caps.message_boundaries {
                bail!(
                    "the application kernels need a reliable byte stream; {} is not one (use tcp, unix, mptcp, quic or mpi)",
                    self.transport.name()
                );
            }
        }
        if let Kernel::Chunks(plan) = &job.kernel {
            plan.validate(ranks)?;
        }
        if let Kernel::Jacobi { sizes, .. } = &job.kernel {
            let g = crate::app::grid::ProcGrid::for_ranks(ranks);
            if let Some(n) = sizes.iter().find(|&&n| n < g.rows.max(g.cols)) {
                bail!(
                    "jacobi: n={n} is too small for a {} grid of ranks (every rank needs a block)",
                    g.describe()
                );
            }
        }
        Ok(job)
    }
}

/// Whether this process is a rank of an MPI job (Open MPI, MPICH and Slurm's PMI set these).
fn under_mpirun() -> bool {
    ["OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK"]
        .iter()
        .any(|v| std::env::var_os(v).is_some())
}

/// `wirebench app`.
pub fn run(a: AppArgs) -> Result<i32> {
    if under_mpirun() {
        return run_mpi(a);
    }
    if a.transport == TransportKind::Mpi {
        bail!(
            "-t mpi runs between the ranks of an MPI job: mpirun -np P wirebench app {} -t mpi",
            a.kernel_name()
        );
    }
    let ranks = a.ranks.unwrap_or(4) as usize;
    let job = a.validate(ranks)?;
    // Before the ranks start: a --plot refused at the end would cost the whole job.
    if let Some(file) = &a.plot {
        crate::outfile::check(file, a.force.force)?;
    }
    let dir = control_dir()?;
    let result = launch(&a, &job, ranks, &dir);
    let _ = std::fs::remove_dir_all(&dir);
    result
}

impl AppArgs {
    fn kernel_name(&self) -> &'static str {
        match self.kernel {
            KernelName::Matmul => "matmul",
            KernelName::Jacobi => "jacobi",
            KernelName::Chunks => "chunks",
        }
    }
}

/// A fresh directory only this user can enter, for the job's control sockets.
fn control_dir() -> Result<PathBuf> {
    use std::os::unix::fs::DirBuilderExt;
    let token = crate::transport::Cookie::random()?.to_hex();
    let dir = std::env::temp_dir().join(format!(
        "wirebench-app-{}-{}",
        std::process::id(),
        &token[..12]
    ));
    std::fs::DirBuilder::new()
        .mode(0o700)
        .create(&dir)
        .with_context(|| format!("creating {}", dir.display()))?;
    Ok(dir)
}

/// Starts ranks 1..P as children, runs rank 0 here, and reports.
fn launch(a: &AppArgs, job: &Job, ranks: usize, dir: &Path) -> Result<i32> {
    let exe = std::env::current_exe().context("finding this program to start the ranks")?;
    // The app's own arguments, as typed: everything after "app".
    let args: Vec<String> = std::env::args().skip(2).collect();
    let mut children: Vec<Child> = Vec::new();
    for rank in 1..ranks {
        let child = Command::new(&exe)
            .arg("__app-rank")
            .args(["--rank", &rank.to_string()])
            .arg("--control-dir")
            .arg(dir)
            .args(["--parent", &std::process::id().to_string()])
            .args(&args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .with_context(|| format!("starting rank {rank}"));
        match child {
            Ok(c) => children.push(c),
            Err(e) => {
                end(children, true);
                return Err(e);
            }
        }
    }
    let started_at = crate::env::now_rfc3339();
    let load = match BesideLoad::start(a) {
        Ok(l) => l,
        Err(e) => {
            end(children, true);
            return Err(e);
        }
    };
    let outcome = SocketGroup::join(dir, 0, ranks, a.io_timeout.max(Duration::from_secs(10)))
        .and_then(|group| rank_body(&group, a, job));
    let load = load.map(BesideLoad::stop).transpose();
    let failed = outcome.is_err() || load.is_err();
    let said = end(children, failed);
    let points = match outcome {
        Ok(p) => p,
        // A child's own account of its failure beats "rank 2 has left the group".
        Err(e) => match said {
            Some(line) => bail!("{line}"),
            None => return Err(e),
        },
    };
    if let Some(line) = said {
        bail!("{line}");
    }
    finish(a, ranks, "local processes", started_at, points, load?)
}

/// The background load of `--load`, running beside the job on rank 0.
struct BesideLoad {
    load: crate::plan::load::Background,
    server: std::net::SocketAddr,
    began: std::time::Instant,
}

impl BesideLoad {
    /// Starts the load when asked (None otherwise), to --load-to or to a server of its own on
    /// loopback.
    fn start(a: &AppArgs) -> Result<Option<BesideLoad>> {
        let Some(spec) = a.load else {
            return Ok(None);
        };
        let server = match &a.load_to {
            Some(to) => crate::control::client::resolve(to, crate::control::server::DEFAULT_PORT)?,
            None => {
                let config = crate::control::server::ServerConfig {
                    limits: crate::control::limits::Limits::local(),
                    io_timeout: a.io_timeout,
                    ..Default::default()
                };
                crate::control::server::Server::bind(
                    std::net::SocketAddr::from((std::net::Ipv4Addr::LOCALHOST, 0)),
                    config,
                )
                .context("starting the load's server on loopback")?
                .spawn()?
            }
        };
        let mut base =
            crate::request::Request::new(crate::pattern::PatternKind::Stream, TransportKind::Tcp);
        base.timeouts.io = a.io_timeout;
        let load = crate::plan::load::Background::start(spec, &base, server)?;
        Ok(Some(BesideLoad {
            load,
            server,
            began: std::time::Instant::now(),
        }))
    }

    fn stop(self) -> Result<speedup::AppLoad> {
        let r = self.load.stop(self.began)?;
        Ok(speedup::AppLoad {
            spec: r.spec,
            server: self.server.to_string(),
            transport: r.transport,
            target_bits_per_s: r.target_bits_per_s,
            achieved_bits_per_s: r.achieved_bits_per_s,
            datagrams_sent: r.datagrams_sent,
            datagrams_lost: r.datagrams_lost,
            elapsed_ns: r.elapsed_ns,
            covered: r.covered,
        })
    }
}

/// Waits for the children (killing them first when rank 0 failed); the first line a failed
/// child wrote, if any.
fn end(children: Vec<Child>, kill: bool) -> Option<String> {
    let mut first = None;
    for (i, mut c) in children.into_iter().enumerate() {
        if kill {
            let _ = c.kill();
        }
        let Ok(out) = c.wait_with_output() else {
            continue;
        };
        if out.status.success() || first.is_some() {
            continue;
        }
        let text = String::from_utf8_lossy(&out.stderr);
        // A child killed while writing may leave only the prefix: a line with nothing after
        // it says nothing, and rank 0's own error stands instead.
        let said = text
            .lines()
            .map(|l| l.strip_prefix("wirebench: error: ").unwrap_or(l).trim())
            .find(|l| !l.is_empty());
        if let Some(line) = said {
            let rank = format!("rank {}", i + 1);
            first = Some(if line.starts_with(&rank) {
                line.to_owned()
            } else {
                format!("{rank}: {line}")
            });
        }
    }
    first
}

/// `__app-rank`: one child rank.
pub fn run_rank(r: RankArgs) -> Result<i32> {
    // Dies with rank 0: a job whose printer is gone has no one to report to.
    nix::sys::prctl::set_pdeathsig(nix::sys::signal::Signal::SIGKILL)
        .context("tying this rank to rank 0")?;
    if nix::unistd::getppid().as_raw() as u32 != r.parent {
        bail!("rank 0 has already ended");
    }
    let a = &r.app;
    let ranks = a.ranks.unwrap_or(4) as usize;
    let job = a.validate(ranks)?;
    let group = SocketGroup::join(
        &r.control_dir,
        r.rank,
        ranks,
        a.io_timeout.max(Duration::from_secs(10)),
    )?;
    rank_body(&group, a, &job)?;
    Ok(0)
}

/// The address the others reach this rank at: its lab host's, or loopback when every rank
/// is on this host, or its first interface's.
fn address(group: &dyn Group, a: &AppArgs, timeout: Duration) -> Result<std::net::IpAddr> {
    if let Some(prefix) = &a.netns_from_rank {
        return placement::address_in(&placement::netns_for_rank(prefix, group.rank()));
    }
    let hosts = group.allgather(crate::env::hostname().as_bytes(), timeout)?;
    if hosts.iter().all(|h| *h == hosts[0]) {
        return Ok(std::net::Ipv4Addr::LOCALHOST.into());
    }
    placement::own_address()
}

/// Connects, runs the job, closes: the points on rank 0.
fn rank_body(group: &dyn Group, a: &AppArgs, job: &Job) -> Result<Vec<crate::app::AppPoint>> {
    let w = Wiring {
        transport: a.transport,
        config: TransportConfig::default(),
        // The sockets of [Local ATM computing n.d.]: TCP_NODELAY (and the kernel's buffer
        // autotuning).
        options: SocketOptions {
            nodelay: true,
            ..SocketOptions::default()
        },
        netns: a
            .netns_from_rank
            .as_ref()
            .map(|p| placement::netns_for_rank(p, group.rank())),
        address: address(group, a, job.control_timeout)?,
        io_timeout: a.io_timeout,
        control_timeout: job.control_timeout,
    };
    run_connected(group, wiring::connect(group, &w)?, job)
}

/// Runs the job over `peers` and ends the connections cleanly.
fn run_connected(
    group: &dyn Group,
    mut peers: Peers,
    job: &Job,
) -> Result<Vec<crate::app::AppPoint>> {
    let points = crate::app::run(group, &mut peers, job)?;
    peers.close()?;
    Ok(points)
}

/// Rank 0: the document, printed, saved and plotted.
fn finish(
    a: &AppArgs,
    ranks: usize,
    launch: &str,
    started_at: String,
    points: Vec<crate::app::AppPoint>,
    load: Option<speedup::AppLoad>,
) -> Result<i32> {
    let r = AppReport {
        schema: speedup::SCHEMA.into(),
        kernel: a.kernel_name().into(),
        transport: a.transport.name().into(),
        ranks,
        grid: crate::app::grid::ProcGrid::for_ranks(ranks).describe(),
        launch: launch.into(),
        netns_prefix: a.netns_from_rank.clone(),
        started_at,
        finished_at: crate::env::now_rfc3339(),
        host: crate::env::hostname(),
        settings: a.settings(),
        repetitions: a.repetitions,
        warmup: a.warmup,
        points,
        load,
    };
    let json = serde_json::to_string_pretty(&r)?;
    if a.json {
        println!("{json}");
    } else {
        print!("{}", speedup::render(&r, a.format.style()));
    }
    if !a.no_save {
        let path = crate::store::db::resolve(a.db.as_deref())?;
        let db = crate::store::db::Db::open_or_create(&path)?;
        let id = db.insert_app(&r.started_at, &r.kernel, &r.transport, ranks, &json)?;
        if !a.json {
            println!("saved as application run {id} in {}", path.display());
        }
    }
    if let Some(file) = &a.plot {
        let Some(fig) = speedup::speedup_figure(&r) else {
            bail!("--plot needs at least two sizes (--n) to draw speedup against");
        };
        let svg = crate::figures::plots::render_svg(&fig)?;
        let is_png = file
            .extension()
            .is_some_and(|e| e.eq_ignore_ascii_case("png"));
        let bytes = if is_png {
            crate::figures::png::svg_to_png(&svg)?
        } else {
            svg.into_bytes()
        };
        crate::outfile::write(file, &bytes, a.force.force)?;
    }
    Ok(0)
}

#[cfg(feature = "mpi")]
fn run_mpi(a: AppArgs) -> Result<i32> {
    use crate::group::mpi::MpiGroup;
    use crate::transport::mpi::{run_tag, Job as MpiJob, MpiConnection, Rank};
    use crate::transport::Connection;

    if a.ranks.is_some() {
        bail!("--ranks starts local processes; under mpirun the ranks are the job's (-np)");
    }
    let mpi = MpiJob::init()?;
    let group = MpiGroup::new(&mpi);
    let (rank, ranks) = (group.rank(), group.size());
    let job = a.validate(ranks)?;
    let started_at = crate::env::now_rfc3339();
    let load = if rank == crate::app::ROOT {
        BesideLoad::start(&a).map_err(|e| anyhow!("MPI rank {rank}: {}", one_line(&e)))?
    } else {
        None
    };
    let points = if a.transport == TransportKind::Mpi {
        let mut conns: Vec<Option<Box<dyn Connection>>> = Vec::new();
        for r in 0..ranks {
            conns.push(if r == rank {
                None
            } else {
                let mut c = MpiConnection::new(r as Rank, run_tag(0));
                c.set_read_timeout(Some(a.io_timeout))?;
                c.set_write_timeout(Some(a.io_timeout))?;
                Some(Box::new(c) as Box<dyn Connection>)
            });
        }
        run_connected(&group, Peers::new(rank, conns)?, &job)
    } else {
        rank_body(&group, &a, &job)
    };
    let load = load.map(BesideLoad::stop).transpose();
    let points = points.map_err(|e| anyhow!("MPI rank {rank}: {}", one_line(&e)))?;
    if rank != crate::app::ROOT {
        return Ok(0);
    }
    finish(&a, ranks, "mpirun", started_at, points, load?)
}

#[cfg(not(feature = "mpi"))]
fn run_mpi(_a: AppArgs) -> Result<i32> {
    Err(anyhow!(crate::transport::NO_MPI))
}
