//! Matrix multiply C = A x B with row and column striping, as the master/slave program of
//! [Local ATM computing n.d.] (see REFERENCES.md) on a 2x2 mesh: on a process grid of R x Q ranks,
//! rank (i, j) computes block C_ij from row stripe A_i and column stripe B_j. Rank 0 (the master,
//! and a slave too) holds A and B: it sends A_i to the first rank of row i, which passes it along
//! its row; and B_j to the first rank of column j, which passes it down its column. The blocks of C
//! are gathered at rank 0.
//!
//! The entries of A and B are small integers, so every product and every partial sum is an
//! exact f64: the parallel product must equal the sequential one bit for bit (and each entry
//! is summed over k in the same order anyway).

use anyhow::{bail, Result};

use super::grid::{share, ProcGrid};
use super::peers::Peers;
use super::ROOT;

/// A and B of size n x n, row-major: integers in -8..=8 from a fixed recipe.
pub fn inputs(n: usize) -> (Vec<f64>, Vec<f64>) {
    let entry = |i: usize, j: usize, salt: usize| -> f64 {
        let h = (i.wrapping_mul(31) ^ j.wrapping_mul(17) ^ salt).wrapping_mul(2_654_435_761);
        ((h >> 7) % 17) as f64 - 8.0
    };
    let a = (0..n * n).map(|x| entry(x / n, x % n, 1)).collect();
    let b = (0..n * n).map(|x| entry(x / n, x % n, 2)).collect();
    (a, b)
}

/// `a` (h x n rows of A) times `b` (n x w columns of B, row-major): the h x w block of C.
/// The i-k-j order streams through rows of both.
pub fn multiply(a: &[f64], b: &[f64], n: usize, h: usize, w: usize) -> Vec<f64> {
    let mut c = vec![0.0; h * w];
    for i in 0..h {
        let row = &mut c[i * w..(i + 1) * w];
        for k in 0..n {
            let aik = a[i * n + k];
            for (cij, bkj) in row.iter_mut().zip(&b[k * w..(k + 1) * w]) {
                *cij += aik * bkj;
            }
        }
    }
    c
}

/// The sequential baseline: the whole product on one rank.
pub fn sequential(a: &[f64], b: &[f64], n: usize) -> Vec<f64> {
    multiply(a, b, n, n, n)
}

/// Columns `cols` of the n x n matrix `b`, as an n x cols.len() row-major matrix.
fn column_stripe(b: &[f64], n: usize, cols: std::ops::Range<usize>) -> Vec<f64> {
    let mut s = Vec::with_capacity(n * cols.len());
    for k in 0..n {
        s.extend_from_slice(&b[k * n + cols.start..k * n + cols.end]);
    }
    s
}

/// This rank's part of the parallel product. Rank 0 passes the inputs and gets C back; the
/// others pass None and get None.
pub fn parallel(
    peers: &mut Peers,
    n: usize,
    inputs: Option<(&[f64], &[f64])>,
) -> Result<Option<Vec<f64>>> {
    let grid = ProcGrid::for_ranks(peers.size());
    let me = peers.rank();
    let (row, col) = grid.place(me);
    let rows = share(n, grid.rows, row);
    let cols = share(n, grid.cols, col);

    // Distribution. Every rank receives its A stripe before its B stripe and rank 0 sends in
    // that order too, so a blocking send always meets a receive that is waiting for it.
    let (a_i, b_j) = if me == ROOT {
        let Some((a, b)) = inputs else {
            bail!("matmul: rank 0 has no input matrices");
        };
        for j in 1..grid.cols {
            peers.send(grid.rank_at(0, j), &a[..share(n, grid.rows, 0).len() * n])?;
        }
        for i in 1..grid.rows {
            let r = share(n, grid.rows, i);
            peers.send(grid.rank_at(i, 0), &a[r.start * n..r.end * n])?;
        }
        let b0 = column_stripe(b, n, cols.clone());
        for i in 1..grid.rows {
            peers.send(grid.rank_at(i, 0), &b0)?;
        }
        for j in 1..grid.cols {
            let stripe = column_stripe(b, n, share(n, grid.cols, j));
            peers.send(grid.rank_at(0, j), &stripe)?;
        }
        (a[rows.start * n..rows.end * n].to_vec(), b0)
    } else {
        let a_from = if col == 0 { ROOT } else { grid.rank_at(row, 0) };
        let a_i = peers.recv(a_from, rows.len() * n)?;
        if col == 0 {
            for j in 1..grid.cols {
                peers.send(grid.rank_at(row, j), &a_i)?;
            }
        }
        let b_from = if row == 0 { ROOT } else { grid.rank_at(0, col) };
        let b_j = peers.recv(b_from, n * cols.len())?;
        if row == 0 {
            for i in 1..grid.rows {
                peers.send(grid.rank_at(i, col), &b_j)?;
            }
        }
        (a_i, b_j)
    };

    let block = multiply(&a_i, &b_j, n, rows.len(), cols.len());

    if me != ROOT {
        peers.send(ROOT, &block)?;
        return Ok(None);
    }
    let mut c = vec![0.0; n * n];
    for r in 0..grid.size() {
        let (i, j) = grid.place(r);
        let (rr, cc) = (share(n, grid.rows, i), share(n, grid.cols, j));
        let got = if r == ROOT {
            block.clone()
        } else {
            peers.recv(r, rr.len() * cc.len())?
        };
        for (bi, ci) in rr.clone().enumerate() {
            c[ci * n + cc.start..ci * n + cc.end]
                .copy_from_slice(&got[bi * cc.len()..(bi + 1) * cc.len()]);
        }
    }
    Ok(Some(c))
}

/// The parallel product against the sequential one: equal in every bit, or an error naming
/// the first entry that differs.
pub fn check(want: &[f64], got: &[f64], n: usize) -> Result<()> {
    if want.len() != got.len() {
        bail!(
            "matmul n={n}: the parallel product has {} entries, not {}",
            got.len(),
            want.len()
        );
    }
    if let Some(x) = (0..want.len()).find(|&x| want[x].to_bits() != got[x].to_bits()) {
        bail!(
            "matmul n={n}: the parallel product differs from the sequential one at ({}, {}): {} instead of {}",
            x / n,
            x % n,
            got[x],
            want[x]
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::super::peers::testing::mesh;
    use super::*;

    fn run(p: usize, n: usize) -> Vec<f64> {
        let handles: Vec<_> = mesh(p)
            .into_iter()
            .map(|mut peers| {
                std::thread::spawn(move || {
                    let ab = (peers.rank() == ROOT).then(|| inputs(n));
                    let c = parallel(&mut peers, n, ab.as_ref().map(|(a, b)| (&a[..], &b[..])))
                        .unwrap();
                    peers.close().unwrap();
                    c
                })
            })
            .collect();
        let mut results: Vec<_> = handles.into_iter().map(|h| h.join().unwrap()).collect();
        assert!(results[1..].iter().all(Option::is_none));
        results.swap_remove(0).unwrap()
    }

    #[test]
    fn the_sequential_product_is_right_on_a_small_case() {
        // [1 2; 3 4] x [5 6; 7 8] = [19 22; 43 50]
        let c = multiply(&[1.0, 2.0, 3.0, 4.0], &[5.0, 6.0, 7.0, 8.0], 2, 2, 2);
        assert_eq!(c, vec![19.0, 22.0, 43.0, 50.0]);
    }

    #[test]
    fn the_parallel_product_equals_the_sequential_one_on_every_grid() {
        for (p, n) in [(1, 8), (2, 9), (3, 10), (4, 16), (4, 17), (6, 13), (4, 1)] {
            let (a, b) = inputs(n);
            let want = sequential(&a, &b, n);
            let got = run(p, n);
            check(&want, &got, n).unwrap_or_else(|e| panic!("P={p} n={n}: {e}"));
        }
    }

    #[test]
    fn a_wrong_entry_is_named() {
        let (a, b) = inputs(4);
        let want = sequential(&a, &b, 4);
        let mut got = want.clone();
        got[6] += 1.0;
        let err = check(&want, &got, 4).unwrap_err().to_string();
        assert!(err.contains("at (1, 2)"), "{err}");
    }
}
