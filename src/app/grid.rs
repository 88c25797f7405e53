//! Where a rank sits in a process grid, and which part of an n-element range it holds.

use std::ops::Range;

/// P ranks as `rows` x `cols`, rank = row * cols + col; as square as P allows, with no more
/// rows than columns (4 = 2x2 as the mesh of [Local ATM computing n.d.], 6 = 2x3, a prime
/// P = 1xP).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProcGrid {
    pub rows: usize,
    pub cols: usize,
}

impl ProcGrid {
    pub fn for_ranks(p: usize) -> ProcGrid {
        let p = p.max(1);
        let rows = (1..=p)
            .take_while(|r| r * r <= p)
            .filter(|r| p.is_multiple_of(*r))
            .last()
            .unwrap_or(1);
        ProcGrid {
            rows,
            cols: p / rows,
        }
    }

    pub fn size(&self) -> usize {
        self.rows * self.cols
    }

    /// (row, col) of `rank`.
    pub fn place(&self, rank: usize) -> (usize, usize) {
        (rank / self.cols, rank % self.cols)
    }

    pub fn rank_at(&self, row: usize, col: usize) -> usize {
        row * self.cols + col
    }

    /// "2x2"
    pub fn describe(&self) -> String {
        format!("{}x{}", self.rows, self.cols)
    }
}

/// Part `i` of `n` elements cut into `parts` nearly equal consecutive parts (the first
/// `n % parts` one longer).
pub fn share(n: usize, parts: usize, i: usize) -> Range<usize> {
    let base = n / parts;
    let extra = n % parts;
    let start = i * base + i.min(extra);
    let len = base + usize::from(i < extra);
    start..start + len
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grids_are_as_square_as_the_rank_count_allows() {
        let g = |p| {
            let g = ProcGrid::for_ranks(p);
            (g.rows, g.cols)
        };
        assert_eq!(g(1), (1, 1));
        assert_eq!(g(2), (1, 2));
        assert_eq!(g(4), (2, 2));
        assert_eq!(g(6), (2, 3));
        assert_eq!(g(7), (1, 7));
        assert_eq!(g(8), (2, 4));
        assert_eq!(g(9), (3, 3));
        let g = ProcGrid::for_ranks(6);
        assert_eq!(g.place(4), (1, 1));
        assert_eq!(g.rank_at(1, 1), 4);
    }

    #[test]
    fn shares_cover_the_range_once() {
        let parts: Vec<_> = (0..3).map(|i| share(10, 3, i)).collect();
        assert_eq!(parts, vec![0..4, 4..7, 7..10]);
        assert_eq!(share(2, 4, 3), 2..2);
    }
}
