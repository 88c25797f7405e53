//! A mesh over `-t mpi`: each pair measures over MPI point-to-point between its two ranks
//! (`crate::plan::mpi`, as `wirebench mpi` between ranks 0 and 1) instead of through the
//! server rank's wirebench server. Everything runs on the main thread (MPI is
//! `MPI_THREAD_FUNNELED`): the client rank of a pair measures it while its server rank serves
//! it, and nobody starts a server of its own.

use anyhow::Result;

use super::MeshRequest;
use crate::model::mesh::MeshPairId;
use crate::model::RunDocument;
use crate::plan::RunPlan;

/// Whether the mesh's pairs measure over MPI.
pub fn wanted(mesh: &MeshRequest) -> bool {
    mesh.request.transport == crate::transport::TransportKind::Mpi
}

/// What a rank advertises: its rank, since the data goes to it over MPI.
pub fn address(rank: usize) -> String {
    format!("MPI rank {rank}")
}

#[cfg(feature = "mpi")]
mod with_mpi {
    use anyhow::{Context, Result};

    use crate::mesh::MeshRequest;
    use crate::model::mesh::MeshPairId;
    use crate::model::RunDocument;
    use crate::plan::mpi::{self, MpiPair, MpiRunner};
    use crate::plan::RunPlan;
    use crate::transport::mpi::{library, Rank, DEFAULT_WINDOW};

    pub fn check(plan: &RunPlan) -> Result<()> {
        mpi::check(&plan.test)
    }

    fn pair_of(pair: MeshPairId) -> Result<MpiPair> {
        let rank = |r: usize| Rank::try_from(r).context("a rank beyond MPI's ranks");
        Ok(MpiPair::in_mesh(rank(pair.client)?, rank(pair.server)?))
    }

    /// The pair's client rank: the pair measured as `wirebench mpi` measures (a stream with
    /// `wirebench mpi`'s default window).
    pub fn measure(mesh: &MeshRequest, pair: MeshPairId) -> Result<RunDocument> {
        let pair = pair_of(pair)?;
        let mut request = mesh.request.clone();
        request.output.save = false;
        let mut runner = MpiRunner::new(&request, library(), DEFAULT_WINDOW, pair);
        crate::mesh::measure(&request, &mut runner)
    }

    /// The pair's server rank: does what the client rank says until it is done.
    pub fn serve(pair: MeshPairId) -> Result<()> {
        mpi::serve(pair_of(pair)?)
    }
}

#[cfg(not(feature = "mpi"))]
mod with_mpi {
    use anyhow::{bail, Result};

    use crate::mesh::MeshRequest;
    use crate::model::mesh::MeshPairId;
    use crate::model::RunDocument;
    use crate::plan::RunPlan;

    pub fn check(_: &RunPlan) -> Result<()> {
        bail!("{}", crate::transport::NO_MPI)
    }
    pub fn measure(_: &MeshRequest, _: MeshPairId) -> Result<RunDocument> {
        bail!("{}", crate::transport::NO_MPI)
    }
    pub fn serve(_: MeshPairId) -> Result<()> {
        bail!("{}", crate::transport::NO_MPI)
    }
}

/// Refuses what MPI cannot run between two ranks (several streams, both directions at once,
/// crr) and what would be ignored there (socket options, fast paths: there is no socket),
/// before any rank starts.
pub fn check(mesh: &MeshRequest, plan: &RunPlan) -> Result<()> {
    let r = &mesh.request;
    if r.socket != crate::request::SocketSettings::default()
        || r.fast != crate::request::FastRequest::default()
        || r.buffers != crate::request::Buffers::default()
    {
        anyhow::bail!(
            "over -t mpi there is no socket: socket options and buffers, CPU placement and fast paths do not apply; drop them"
        );
    }
    with_mpi::check(plan)
}

/// The client rank of `pair` measures it.
pub fn measure(mesh: &MeshRequest, pair: MeshPairId) -> Result<RunDocument> {
    with_mpi::measure(mesh, pair)
}

/// The server rank of `pair` serves it.
pub fn serve(pair: MeshPairId) -> Result<()> {
    with_mpi::serve(pair)
}
