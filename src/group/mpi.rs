//! The ranks of an MPI job as a [`Group`]: control messages on MPI's control tag (see
//! `crate::transport::mpi`), so that every wait has a timeout. MPI is initialised
//! `MPI_THREAD_FUNNELED`: only the thread that made the [`Job`] may use this group.

use std::time::Duration;

use anyhow::{bail, Context, Result};

use super::Group;
use crate::transport::mpi::{self, Job, Rank};

/// How long one control send may take before the job is ended (MPI cannot take a started
/// send back; see `crate::transport::mpi`).
const SEND_TIMEOUT: Duration = Duration::from_secs(60);

pub struct MpiGroup<'job> {
    job: &'job Job,
}

impl<'job> MpiGroup<'job> {
    pub fn new(job: &'job Job) -> MpiGroup<'job> {
        MpiGroup { job }
    }
    pub fn job(&self) -> &Job {
        self.job
    }
}

fn rank_of(r: usize, size: usize) -> Result<Rank> {
    if r >= size {
        bail!("rank {r} is not in this job of {size}");
    }
    Ok(r as Rank)
}

impl Group for MpiGroup<'_> {
    fn rank(&self) -> usize {
        self.job.rank() as usize
    }
    fn size(&self) -> usize {
        self.job.size() as usize
    }
    fn send(&self, to: usize, bytes: &[u8]) -> Result<()> {
        mpi::send_control(rank_of(to, self.size())?, bytes, SEND_TIMEOUT);
        Ok(())
    }
    fn recv(&self, from: usize, timeout: Duration) -> Result<Vec<u8>> {
        mpi::recv_control(rank_of(from, self.size())?, timeout).with_context(|| {
            format!(
                "rank {from} sent nothing to rank {} within {}",
                self.rank(),
                crate::units::format_seconds(timeout.as_secs_f64())
            )
        })
    }
}
