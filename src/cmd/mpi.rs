//! `wirebench mpi PATTERN`: `run`'s options that mean something between the two ranks of an
//! MPI job, as a [`Request`] over the mpi transport.

use std::time::Duration;

use clap::Args;

use super::run::{parse_duration, OutputArgs, SizeArgs, StatsArgs, StopArgs};
use crate::pattern::{Direction, PatternKind};
use crate::request::{self, Request};
use crate::transport::TransportKind;
use crate::units::Rate;

/// What `wirebench mpi` measures.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum MpiPattern {
    /// IMB PingPong / osu_latency: n bytes there, n bytes back; one-way latency = RTT/2.
    Pingpong,
    /// One-way bulk transfer, like osu_bw; the receiver's rate is the headline.
    Stream,
    /// Request/response transactions with separate sizes, `--burst` in flight.
    Rr,
}

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
#[derive(Debug, Args)]
#[command(
    after_help = "Run under MPI with two ranks, e.g.\n  mpirun -np 2 --mca btl tcp,self wirebench mpi pingpong --size 1..4M:*2\nAs root, Open MPI also wants --allow-run-as-root. MPI chooses the wire (--mca btl tcp,self for TCP, vader,self for shared memory); see README."
)]
pub struct MpiArgs {
    /// What to measure.
    #[arg(value_enum)]
    pub pattern: MpiPattern,

    #[command(flatten)]
    pub sizes: SizeArgs,
    /// Stream: messages in flight at once, as osu_bw's window: the sender keeps this many
    /// MPI_Isend going, the receiver this many MPI_Irecv posted (within 4 MiB of buffers
    /// each, as a TCP socket's send buffer). 1: one message at a time, sent and received
    /// straight from the pattern's buffer.
    #[arg(long, default_value_t = crate::transport::mpi::DEFAULT_WINDOW, value_parser = clap::value_parser!(u32).range(1..=4096))]
    pub window: u32,

    #[command(flatten)]
    pub stop: StopArgs,
    /// Warm-up iterations before timing starts (excluded from statistics). 0 turns it off.
    /// Default: 10, and for a stream with a window two windows' worth (the window must be
    /// full and the connection past its slow start before the clocks start).
    #[arg(long)]
    pub warmup: Option<u64>,

    /// Stream: rank 1 sends to rank 0.
    #[arg(long, short = 'R')]
    pub reverse: bool,
    /// Stream: pace the sender, bits/s with DECIMAL suffixes (100M = 10^8 bit/s) or "10kpps".
    #[arg(long, short = 'b', value_parser = crate::units::parse_rate_typed)]
    pub rate: Option<Rate>,
    /// rr: transactions kept in flight.
    #[arg(long, default_value_t = 1)]
    pub burst: u32,
    /// Stream: print an interval report this often (e.g. 1s).
    #[arg(long, short = 'i', value_parser = parse_duration)]
    pub interval: Option<Duration>,

    #[command(flatten)]
    pub statistics: StatsArgs,
    /// Timeout of every data send and receive between the ranks. A send that does not
    /// complete in time ends the MPI job (MPI cannot take a started send back).
    #[arg(long, default_value = "10s", value_parser = parse_duration)]
    pub io_timeout: Duration,

    #[command(flatten)]
    pub output: OutputArgs,
}

impl TryFrom<&MpiArgs> for Request {
    type Error = anyhow::Error;

    /// The request these options stand for, over the mpi transport: `run`'s defaults for
    /// everything `mpi` does not offer, so that the plan is built by the same code.
    fn try_from(a: &MpiArgs) -> anyhow::Result<Request> {
        let warmup = a.warmup.unwrap_or(match a.pattern {
            MpiPattern::Stream if a.window > 1 => 10.max(2 * u64::from(a.window)),
            _ => 10,
        });
        let mut r = Request::new(a.pattern.kind(), TransportKind::Mpi);
        r.sizes = a.sizes.request();
        r.stop = a.stop.request(warmup);
        r.traffic = request::Traffic {
            direction: if a.reverse {
                Direction::Reverse
            } else {
                Direction::Forward
            },
            rate: a.rate,
            burst: a.burst,
            interval: a.interval,
            ..request::Traffic::default()
        };
        r.statistics = a.statistics.request();
        r.timeouts.io = a.io_timeout;
        r.output = a.output.request()?;
        Ok(r)
    }
}

/// `wirebench mpi`: this rank's exit code.
pub fn run(a: MpiArgs) -> i32 {
    match Request::try_from(&a) {
        Ok(request) => crate::glue::mpi::run(&request, a.window),
        Err(e) => crate::error::fail(&e),
    }
}
