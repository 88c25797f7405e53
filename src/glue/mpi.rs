//! `wirebench mpi PATTERN` on one rank of a two-rank MPI job: rank 1 serves, rank 0 measures
//! the request over MPI point-to-point calls through the usual path to the outputs.

use crate::error::{one_line, EXIT_FAILURE};
use crate::plan::mpi::{serve, MpiPair, MpiRunner};
use crate::plan::runner::PointRunner;
use crate::request::Request;
use crate::transport::mpi::Job;

/// Runs `request` on this rank, `window` messages in flight for a stream; the exit code of
/// this process.
pub fn run(request: &Request, window: u32) -> i32 {
    let job = match Job::init() {
        Ok(j) => j,
        Err(e) => {
            eprintln!("wirebench: error: {}", one_line(&e));
            return EXIT_FAILURE;
        }
    };
    if job.size() != 2 {
        if job.rank() == 0 {
            eprintln!(
                "wirebench: error: wirebench mpi needs an MPI job of exactly 2 ranks, this one has {}: run it as `mpirun -np 2 wirebench mpi {} ...` (as root add --allow-run-as-root; see README)",
                job.size(),
                request.pattern.name()
            );
        }
        return EXIT_FAILURE;
    }
    let pair = MpiPair::JOB;
    if job.rank() == pair.server {
        return match serve(pair) {
            Ok(()) => 0,
            Err(e) => {
                eprintln!("wirebench: error: MPI rank 1: {}", one_line(&e));
                EXIT_FAILURE
            }
        };
    }
    let mut runner = MpiRunner::new(request, job.library(), window, pair);
    let code = super::measure::run_with(request, None, &mut runner);
    // The plan or the database may have failed before the runner was opened: rank 1 still
    // waits for its first instruction.
    runner.close();
    code
}
