//! A group of ranks that measure together: the `mesh` command and the application kernels run
//! one process (or thread) per rank, and the ranks agree on a schedule and gather results
//! through this small control plane, never through the data path they measure.
//!
//! A group needs only two primitives, a message to one rank and a message from one rank
//! with a timeout; the collectives are built on them as a star through rank 0. That costs
//! 2(P-1) messages per collective, nothing next to a measurement, and keeps every wait
//! bounded: a rank that dies or hangs shows as a timeout naming it, never as a job that
//! waits forever inside an MPI collective.
//!
//! Implementations: [`ThreadGroup`] (threads of one process, over channels: for tests and
//! for ranks that are threads), `mpi::MpiGroup` (the ranks of an MPI job, feature `mpi`).

mod local;
#[cfg(feature = "mpi")]
pub mod mpi;
pub mod placement;
mod thread;

use std::time::Duration;

use anyhow::{bail, Result};

pub use local::SocketGroup;
pub use thread::ThreadGroup;

/// Rank 0: the rank that gathers, decides and prints.
pub const ROOT: usize = 0;

/// The ranks of a job, seen from one of them.
pub trait Group {
    /// This rank, 0..size.
    fn rank(&self) -> usize;
    /// How many ranks there are.
    fn size(&self) -> usize;
    /// Sends one control message to rank `to` (not to itself).
    fn send(&self, to: usize, bytes: &[u8]) -> Result<()>;
    /// Receives the next control message from rank `from`, waiting up to `timeout`; messages
    /// from one rank arrive in the order they were sent.
    fn recv(&self, from: usize, timeout: Duration) -> Result<Vec<u8>>;

    /// Rank 0 gets every rank's bytes in rank order (its own included); the others get None.
    fn gather(&self, mine: &[u8], timeout: Duration) -> Result<Option<Vec<Vec<u8>>>> {
        if self.rank() != ROOT {
            self.send(ROOT, mine)?;
            return Ok(None);
        }
        let mut all = Vec::with_capacity(self.size());
        all.push(mine.to_vec());
        for r in 1..self.size() {
            all.push(self.recv(r, timeout)?);
        }
        Ok(Some(all))
    }

    /// Rank 0's bytes, on every rank: rank 0 passes Some, the others None.
    fn broadcast(&self, root_bytes: Option<&[u8]>, timeout: Duration) -> Result<Vec<u8>> {
        if self.rank() == ROOT {
            let Some(bytes) = root_bytes else {
                bail!("broadcast: rank 0 has nothing to send");
            };
            for r in 1..self.size() {
                self.send(r, bytes)?;
            }
            Ok(bytes.to_vec())
        } else {
            self.recv(ROOT, timeout)
        }
    }

    /// Every rank's bytes, on every rank, in rank order.
    fn allgather(&self, mine: &[u8], timeout: Duration) -> Result<Vec<Vec<u8>>> {
        let gathered = self.gather(mine, timeout)?;
        let packed = gathered.map(|all| serde_json::to_vec(&all)).transpose()?;
        let bytes = self.broadcast(packed.as_deref(), timeout)?;
        Ok(serde_json::from_slice(&bytes)?)
    }

    /// Returns on every rank once every rank has called it (or fails after `timeout`).
    fn barrier(&self, timeout: Duration) -> Result<()> {
        self.allgather(&[], timeout).map(drop)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn on_every_rank<T: Send + 'static>(
        size: usize,
        f: impl Fn(ThreadGroup) -> T + Send + Sync + Clone + 'static,
    ) -> Vec<T> {
        let handles: Vec<_> = ThreadGroup::new(size)
            .into_iter()
            .map(|g| {
                let f = f.clone();
                std::thread::spawn(move || f(g))
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    }

    /// Every collective of these tests' thread groups completes at once; a minute without it
    /// is a hang, whatever the host's load.
    const T: Duration = crate::test_support::HUNG;

    #[test]
    fn allgather_gives_every_rank_every_ranks_bytes_in_rank_order() {
        let got = on_every_rank(4, |g| g.allgather(&[g.rank() as u8; 3], T).unwrap());
        let want: Vec<Vec<u8>> = (0..4u8).map(|r| vec![r; 3]).collect();
        assert!(got.iter().all(|v| *v == want));
    }

    #[test]
    fn gather_reaches_rank_0_only_and_broadcast_reaches_everyone() {
        let got = on_every_rank(3, |g| {
            let gathered = g.gather(&[g.rank() as u8], T).unwrap();
            let b = g
                .broadcast((g.rank() == 0).then_some(&b"go"[..]), T)
                .unwrap();
            g.barrier(T).unwrap();
            (gathered, b)
        });
        assert_eq!(got[0].0, Some(vec![vec![0], vec![1], vec![2]]));
        assert!(got[1..].iter().all(|(g, _)| g.is_none()));
        assert!(got.iter().all(|(_, b)| b == b"go"));
    }

    #[test]
    fn a_rank_that_never_answers_is_a_timeout_naming_it() {
        let mut groups = ThreadGroup::new(2);
        let _silent = groups.pop().unwrap();
        let root = groups.pop().unwrap();
        let err = root
            .gather(b"x", Duration::from_millis(20))
            .unwrap_err()
            .to_string();
        assert!(err.contains("rank 1"), "{err}");
    }
}
