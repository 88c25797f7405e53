//! Jacobi relaxation of Laplace's equation on the unit square (the PDE kernel of
//! [Local ATM computing n.d.], see REFERENCES.md): an n x n grid of unknowns inside a fixed
//! boundary (1 along the top edge, 0 elsewhere), each sweep replacing every unknown by the mean of
//! its four neighbours. The grid is cut into blocks over a process grid (a checkerboard); before
//! each sweep every rank exchanges its edge rows and columns with its four neighbours (the halo),
//! and after it the ranks agree on the largest change of any unknown (a max-reduction through rank
//! 0).
//!
//! Stop rule, as that study's e_k <= e_0 * 10^-v: the largest change of sweep k is at most
//! `tolerance` times that of the first sweep, or `max_iterations` sweeps were made.
//!
//! Every unknown is computed by the same expression in the same order whether the grid is
//! whole or cut, and the maximum does not depend on the order it is taken in, so the
//! parallel run must make the same number of sweeps and end on the same residual, bit for
//! bit, as the sequential one.

use anyhow::{bail, Result};
use serde::{Deserialize, Serialize};

use super::grid::{share, ProcGrid};
use super::peers::Peers;
use super::ROOT;

/// When to stop.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct StopRule {
    /// Stop once a sweep changes no unknown by more than this fraction of the first sweep's
    /// largest change.
    pub tolerance: f64,
    pub max_iterations: u64,
}

/// How a relaxation ended.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Converged {
    /// Sweeps made.
    pub iterations: u64,
    /// The largest change of any unknown in the last sweep.
    pub residual: f64,
}

/// The boundary condition: the top edge (row 0 of the n+2 rows) at 1, the others at 0.
fn boundary(global_row: usize) -> f64 {
    if global_row == 0 {
        1.0
    } else {
        0.0
    }
}

/// A block of h x w unknowns with a ring of ghost cells, row-major (h+2) x (w+2); cell
/// (li, lj) is the whole grid's (top + li, left + lj), the unknowns being 1..=n both ways.
struct Block {
    h: usize,
    w: usize,
    u: Vec<f64>,
    next: Vec<f64>,
}

impl Block {
    fn new(top: usize, h: usize, w: usize) -> Block {
        let stride = w + 2;
        let mut u = vec![0.0; (h + 2) * stride];
        for li in 0..h + 2 {
            // Ghost cells on the whole grid's boundary keep its values for good; the others are
            // overwritten by each exchange.
            let v = boundary(top + li);
            u[li * stride..(li + 1) * stride].fill(v);
        }
        Block {
            h,
            w,
            next: u.clone(),
            u,
        }
    }

    fn stride(&self) -> usize {
        self.w + 2
    }

    /// One sweep over the unknowns; the largest change.
    fn sweep(&mut self) -> f64 {
        let s = self.stride();
        let mut change: f64 = 0.0;
        for li in 1..=self.h {
            for lj in 1..=self.w {
                let x = li * s + lj;
                let v = 0.25 * ((self.u[x - s] + self.u[x + s]) + (self.u[x - 1] + self.u[x + 1]));
                change = change.max((v - self.u[x]).abs());
                self.next[x] = v;
            }
        }
        std::mem::swap(&mut self.u, &mut self.next);
        change
    }

    fn row(&self, li: usize) -> Vec<f64> {
        let s = self.stride();
        self.u[li * s + 1..li * s + 1 + self.w].to_vec()
    }

    fn set_row(&mut self, li: usize, v: &[f64]) {
        let s = self.stride();
        self.u[li * s + 1..li * s + 1 + self.w].copy_from_slice(v);
    }

    fn column(&self, lj: usize) -> Vec<f64> {
        let s = self.stride();
        (1..=self.h).map(|li| self.u[li * s + lj]).collect()
    }

    fn set_column(&mut self, lj: usize, v: &[f64]) {
        let s = self.stride();
        for (li, x) in (1..=self.h).zip(v) {
            self.u[li * s + lj] = *x;
        }
    }
}

/// Relaxes until the stop rule holds, calling `agree` on each sweep's largest change to
/// get the one every rank acts on.
fn relax(
    block: &mut Block,
    stop: StopRule,
    mut before_sweep: impl FnMut(&mut Block) -> Result<()>,
    mut agree: impl FnMut(f64) -> Result<f64>,
) -> Result<Converged> {
    let mut first = None;
    let mut iterations = 0;
    loop {
        before_sweep(block)?;
        let change = agree(block.sweep())?;
        iterations += 1;
        let first = *first.get_or_insert(change);
        if change <= first * stop.tolerance || iterations >= stop.max_iterations {
            return Ok(Converged {
                iterations,
                residual: change,
            });
        }
    }
}

/// The sequential baseline: the whole grid on one rank.
pub fn sequential(n: usize, stop: StopRule) -> Result<Converged> {
    let mut block = Block::new(0, n, n);
    relax(&mut block, stop, |_| Ok(()), Ok)
}

/// Swaps edges with a neighbour: the lower rank sends first, the higher receives first, so
/// that a send that blocks until it is received (MPI's rendezvous, a full socket buffer)
/// always meets its receive.
fn swap_edge(peers: &mut Peers, other: usize, mine: &[f64], theirs: &mut [f64]) -> Result<()> {
    if peers.rank() < other {
        peers.send(other, mine)?;
        peers.recv_into(other, theirs)
    } else {
        peers.recv_into(other, theirs)?;
        peers.send(other, mine)
    }
}

/// The halo exchange: with the neighbour below, then above, then right, then left, each in
/// two phases (pairs of rows 0-1, 2-3... then 1-2, 3-4...), so that every rank is in one
/// exchange at a time and none waits in a cycle.
fn exchange(peers: &mut Peers, grid: ProcGrid, block: &mut Block) -> Result<()> {
    let (row, col) = grid.place(peers.rank());
    for parity in 0..2 {
        if row % 2 == parity && row + 1 < grid.rows {
            let mut ghost = vec![0.0; block.w];
            swap_edge(
                peers,
                grid.rank_at(row + 1, col),
                &block.row(block.h),
                &mut ghost,
            )?;
            block.set_row(block.h + 1, &ghost);
        }
        if row >= 1 && (row - 1) % 2 == parity {
            let mut ghost = vec![0.0; block.w];
            swap_edge(peers, grid.rank_at(row - 1, col), &block.row(1), &mut ghost)?;
            block.set_row(0, &ghost);
        }
    }
    for parity in 0..2 {
        if col % 2 == parity && col + 1 < grid.cols {
            let mut ghost = vec![0.0; block.h];
            let edge = block.column(block.w);
            swap_edge(peers, grid.rank_at(row, col + 1), &edge, &mut ghost)?;
            block.set_column(block.w + 1, &ghost);
        }
        if col >= 1 && (col - 1) % 2 == parity {
            let mut ghost = vec![0.0; block.h];
            swap_edge(
                peers,
                grid.rank_at(row, col - 1),
                &block.column(1),
                &mut ghost,
            )?;
            block.set_column(0, &ghost);
        }
    }
    Ok(())
}

/// The largest of every rank's `change`, on every rank (a reduction to rank 0 and back).
fn max_everywhere(peers: &mut Peers, change: f64) -> Result<f64> {
    if peers.rank() != ROOT {
        peers.send(ROOT, &[change])?;
        return Ok(peers.recv(ROOT, 1)?[0]);
    }
    let mut max = change;
    for r in 1..peers.size() {
        max = max.max(peers.recv(r, 1)?[0]);
    }
    for r in 1..peers.size() {
        peers.send(r, &[max])?;
    }
    Ok(max)
}

/// This rank's part of the parallel relaxation; every rank gets how it ended.
pub fn parallel(peers: &mut Peers, n: usize, stop: StopRule) -> Result<Converged> {
    let grid = ProcGrid::for_ranks(peers.size());
    if n < grid.rows.max(grid.cols) {
        bail!(
            "jacobi: n={n} is too small for a {} grid of ranks (every rank needs a block)",
            grid.describe()
        );
    }
    let (row, col) = grid.place(peers.rank());
    let rows = share(n, grid.rows, row);
    let cols = share(n, grid.cols, col);
    // Local cell 0 is the ghost row above the block: whole-grid row rows.start.
    let mut block = Block::new(rows.start, rows.len(), cols.len());
    let peers = std::cell::RefCell::new(peers);
    relax(
        &mut block,
        stop,
        |b| exchange(&mut peers.borrow_mut(), grid, b),
        |c| max_everywhere(&mut peers.borrow_mut(), c),
    )
}

/// The parallel relaxation against the sequential one: the same sweeps, the same residual.
pub fn check(want: &Converged, got: &Converged, n: usize) -> Result<()> {
    if want.iterations != got.iterations || want.residual.to_bits() != got.residual.to_bits() {
        bail!(
            "jacobi n={n}: the parallel relaxation ended after {} sweeps at residual {:e}, the sequential one after {} at {:e}",
            got.iterations,
            got.residual,
            want.iterations,
            want.residual
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::super::peers::testing::mesh;
    use super::*;

    const STOP: StopRule = StopRule {
        tolerance: 1e-3,
        max_iterations: 10_000,
    };

    fn run(p: usize, n: usize, stop: StopRule) -> Vec<Converged> {
        let handles: Vec<_> = mesh(p)
            .into_iter()
            .map(|mut peers| {
                std::thread::spawn(move || {
                    let c = parallel(&mut peers, n, stop).unwrap();
                    peers.close().unwrap();
                    c
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    }

    #[test]
    fn a_3x3_grid_relaxes_towards_the_known_solution() {
        // The exact solution at the centre of a square with one edge at 1 is 1/4 by symmetry.
        let c = sequential(
            3,
            StopRule {
                tolerance: 1e-12,
                max_iterations: 10_000,
            },
        )
        .unwrap();
        assert!(c.iterations > 10 && c.iterations < 10_000, "{c:?}");
        let mut b = Block::new(0, 3, 3);
        for _ in 0..c.iterations {
            b.sweep();
        }
        assert!((b.u[2 * 5 + 2] - 0.25).abs() < 1e-9, "{}", b.u[2 * 5 + 2]);
    }

    #[test]
    fn every_grid_of_ranks_makes_the_same_sweeps_to_the_same_residual() {
        for (p, n) in [(1, 8), (2, 9), (3, 10), (4, 16), (4, 15), (6, 12), (8, 16)] {
            let want = sequential(n, STOP).unwrap();
            for got in run(p, n, STOP) {
                check(&want, &got, n).unwrap_or_else(|e| panic!("P={p}: {e}"));
            }
        }
    }

    #[test]
    fn the_sweep_limit_stops_a_relaxation_that_has_not_converged() {
        let stop = StopRule {
            tolerance: 0.0,
            max_iterations: 7,
        };
        assert_eq!(sequential(16, stop).unwrap().iterations, 7);
        assert!(run(4, 16, stop).iter().all(|c| c.iterations == 7));
    }

    #[test]
    fn a_grid_smaller_than_the_ranks_is_refused() {
        let mut p = mesh(4);
        let err = parallel(&mut p[0], 1, STOP).unwrap_err().to_string();
        assert!(err.contains("too small for a 2x2 grid"), "{err}");
    }
}
