//! The chunk server of [Petri and Eickermann 2007] (KoDaVis; see REFERENCES.md): rank 0 holds a
//! data set in memory and serves it in fixed-size chunks, on request, to the other ranks; each
//! client "renders" every chunk for a think time before it asks for the next. The chunks are dealt
//! to the clients in turn (chunk k to client 1 + k mod (P-1)) and the server answers the requests
//! in that order, one at a time, as a single-threaded server would.
//!
//! The sequential baseline is the processing alone: every chunk's think time on one rank,
//! with no network. Each chunk starts with its number, so a client checks that it got the
//! chunk it asked for; every received byte is counted, and the total must be the volume.

use std::time::Duration;

use anyhow::{bail, Context, Result};

use super::peers::Peers;
use super::ROOT;

/// What to serve.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Plan {
    /// Bytes per chunk (the last one may be shorter), at least 8.
    pub chunk: u64,
    /// Bytes in all.
    pub volume: u64,
    /// Processing time per chunk, on the client.
    pub think: Duration,
}

impl Plan {
    pub fn chunks(&self) -> u64 {
        self.volume.div_ceil(self.chunk)
    }

    fn len_of(&self, k: u64) -> usize {
        (self.volume - k * self.chunk).min(self.chunk) as usize
    }

    pub fn validate(&self, ranks: usize) -> Result<()> {
        if ranks < 2 {
            bail!("chunks needs at least 2 ranks: a server and a client");
        }
        if self.chunk < 8 {
            bail!("chunks: --chunk must be at least 8 bytes (a chunk starts with its number)");
        }
        if self.volume < self.chunk {
            bail!("chunks: --volume must be at least one chunk");
        }
        Ok(())
    }
}

/// The chunk number a request or a chunk starts with (8 bytes, little-endian).
fn chunk_number(bytes: &[u8]) -> Result<u64> {
    let head = bytes
        .first_chunk()
        .context("chunks: a message shorter than its chunk number")?;
    Ok(u64::from_le_bytes(*head))
}

/// The sequential baseline: each chunk's processing, one after the other.
pub fn sequential(plan: &Plan) {
    for _ in 0..plan.chunks() {
        std::thread::sleep(plan.think);
    }
}

/// This rank's part: rank 0 serves, the others fetch and process. Returns the payload bytes
/// this rank received as chunks.
pub fn parallel(peers: &mut Peers, plan: &Plan) -> Result<u64> {
    plan.validate(peers.size())?;
    let clients = (peers.size() - 1) as u64;
    let client_of = |k: u64| 1 + (k % clients) as usize;
    if peers.rank() == ROOT {
        let mut data = vec![0xa5u8; plan.chunk as usize];
        for k in 0..plan.chunks() {
            let c = client_of(k);
            let asked = chunk_number(peers.recv_bytes(c, 8)?)?;
            if asked != k {
                bail!("chunks: rank {c} asked for chunk {asked}, chunk {k} was its turn");
            }
            let len = plan.len_of(k);
            data[..8].copy_from_slice(&k.to_le_bytes());
            peers.send_bytes(c, &data[..len])?;
        }
        return Ok(0);
    }
    let me = peers.rank();
    let mut received = 0;
    for k in (0..plan.chunks()).filter(|&k| client_of(k) == me) {
        peers.send_bytes(ROOT, &k.to_le_bytes())?;
        let len = plan.len_of(k);
        let chunk = peers.recv_bytes(ROOT, len)?;
        let stamp = chunk_number(chunk)?;
        if stamp != k {
            bail!("chunks: rank {me} asked for chunk {k} and got chunk {stamp}");
        }
        received += len as u64;
        std::thread::sleep(plan.think);
    }
    Ok(received)
}

/// The bytes all clients received against the volume served.
pub fn check(plan: &Plan, received: u64) -> Result<()> {
    if received != plan.volume {
        bail!(
            "chunks: the clients received {received} bytes of a volume of {}",
            plan.volume
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::super::peers::testing::mesh;
    use super::*;

    #[test]
    fn every_byte_of_the_volume_reaches_a_client_once() {
        let plan = Plan {
            chunk: 1000,
            volume: 10_500,
            think: Duration::ZERO,
        };
        assert_eq!(plan.chunks(), 11);
        let handles: Vec<_> = mesh(4)
            .into_iter()
            .map(|mut p| {
                std::thread::spawn(move || {
                    let got = parallel(&mut p, &plan).unwrap();
                    p.close().unwrap();
                    got
                })
            })
            .collect();
        let got: Vec<u64> = handles.into_iter().map(|h| h.join().unwrap()).collect();
        // Chunks 0,3,6,9 to rank 1; 1,4,7,10 (the last of 500 bytes) to rank 2; 2,5,8 to 3.
        assert_eq!(got, vec![0, 4000, 3500, 3000]);
        check(&plan, got.iter().sum()).unwrap();
        assert!(check(&plan, 10_499).is_err());
    }

    #[test]
    fn plans_that_cannot_run_are_refused() {
        let p = |chunk, volume| Plan {
            chunk,
            volume,
            think: Duration::ZERO,
        };
        assert!(p(1000, 5000).validate(1).is_err());
        assert!(p(4, 5000).validate(2).is_err());
        assert!(p(1000, 10).validate(2).is_err());
        assert!(p(1000, 5000).validate(2).is_ok());
    }
}
