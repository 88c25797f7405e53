//! Which ordered pairs a mesh measures, and in which rounds: no rank is in two tests at once
//! (as a client and as a server both count), so that a pair's figures are never shared with
//! another test on the same host.
//!
//! The full mesh of P ranks follows the circle method (a round-robin tournament): P-1 rounds
//! of P/2 unordered pairs for even P (P rounds of (P-1)/2 for odd P, one rank idle each), and
//! every unordered pair as two rounds, i->j then j->i. That is the fewest rounds possible,
//! P(P-1) ordered pairs in 2(P-1) rounds for even P. A chosen subset keeps the circle order
//! and is packed greedily into rounds.

use anyhow::{bail, Result};

use crate::model::mesh::MeshPairId;

/// The ordered pairs to measure.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Selection {
    /// Every ordered pair of distinct ranks.
    All,
    /// These pairs (checked against the job's size when scheduled).
    Only(Vec<MeshPairId>),
}

/// `--pairs`: "0-1,2-3" (each pair both ways), "0:1" (client 0 to server 1 only).
pub fn parse_pairs(s: &str) -> std::result::Result<Selection, String> {
    let mut out: Vec<MeshPairId> = Vec::new();
    for item in s.split(',').map(str::trim) {
        let (a, b, both) = if let Some((a, b)) = item.split_once('-') {
            (a, b, true)
        } else if let Some((a, b)) = item.split_once(':') {
            (a, b, false)
        } else {
            return Err(format!(
                "'{item}' is not a pair: write A-B (both ways) or A:B (client A to server B)"
            ));
        };
        let rank = |x: &str| {
            x.trim()
                .parse::<usize>()
                .map_err(|_| format!("'{x}' in '{item}' is not a rank number"))
        };
        let (a, b) = (rank(a)?, rank(b)?);
        if a == b {
            return Err(format!("'{item}': a rank is not measured against itself"));
        }
        let mut add = |client, server| {
            let p = MeshPairId { client, server };
            if !out.contains(&p) {
                out.push(p);
            }
        };
        add(a, b);
        if both {
            add(b, a);
        }
    }
    Ok(Selection::Only(out))
}

/// The rounds of a mesh of `size` ranks: each a set of pairs with no rank in two of them.
pub fn rounds(size: usize, selection: &Selection, serial: bool) -> Result<Vec<Vec<MeshPairId>>> {
    if size < 2 {
        bail!("a mesh needs at least 2 ranks, this job has {size}: run it as `mpirun -np N wirebench mesh ...` (as root add --allow-run-as-root; see README)");
    }
    let order = circle_order(size);
    let wanted: Vec<MeshPairId> = match selection {
        Selection::All => order,
        Selection::Only(pairs) => {
            if let Some(p) = pairs.iter().find(|p| p.client.max(p.server) >= size) {
                bail!(
                    "--pairs names rank {}, but the job has ranks 0 to {}",
                    p.client.max(p.server),
                    size - 1
                );
            }
            order.into_iter().filter(|p| pairs.contains(p)).collect()
        }
    };
    if serial {
        return Ok(wanted.into_iter().map(|p| vec![p]).collect());
    }
    Ok(pack(wanted))
}

/// Every ordered pair of `size` ranks in circle-method order: round by round, each round's
/// pairs one way, then the same pairs the other way.
fn circle_order(size: usize) -> Vec<MeshPairId> {
    // An odd count gets a phantom rank; whoever meets it sits the round out.
    let n = size + size % 2;
    let mut out = Vec::with_capacity(size * (size - 1));
    for r in 0..n - 1 {
        let mut round = vec![(n - 1, r)];
        for k in 1..n / 2 {
            round.push(((r + k) % (n - 1), (r + n - 1 - k) % (n - 1)));
        }
        let real: Vec<(usize, usize)> = round
            .into_iter()
            .filter(|&(a, b)| a < size && b < size)
            .map(|(a, b)| (a.min(b), a.max(b)))
            .collect();
        for &(a, b) in &real {
            out.push(MeshPairId {
                client: a,
                server: b,
            });
        }
        for &(a, b) in &real {
            out.push(MeshPairId {
                client: b,
                server: a,
            });
        }
    }
    out
}

/// Rounds from pairs in order: each pair goes into the first round after the last round of
/// either of its ranks so far, so that every rank meets its pairs in the order given (and,
/// since a rank's rounds only increase, is never in two pairs of one round).
fn pack(pairs: Vec<MeshPairId>) -> Vec<Vec<MeshPairId>> {
    let mut rounds: Vec<Vec<MeshPairId>> = Vec::new();
    // The round after each rank's last pair so far.
    let mut free_from: std::collections::HashMap<usize, usize> = Default::default();
    for p in pairs {
        let free = |rank| free_from.get(&rank).copied().unwrap_or(0);
        let r = free(p.client).max(free(p.server));
        if r == rounds.len() {
            rounds.push(Vec::new());
        }
        rounds[r].push(p);
        free_from.insert(p.client, r + 1);
        free_from.insert(p.server, r + 1);
    }
    rounds
}

#[cfg(test)]
mod tests {
    use super::*;

    fn all_ordered(size: usize) -> Vec<MeshPairId> {
        let mut v = Vec::new();
        for client in 0..size {
            for server in 0..size {
                if client != server {
                    v.push(MeshPairId { client, server });
                }
            }
        }
        v
    }

    fn no_rank_twice(rounds: &[Vec<MeshPairId>]) {
        for (i, round) in rounds.iter().enumerate() {
            let mut seen = std::collections::HashSet::new();
            for p in round {
                assert!(seen.insert(p.client), "round {i}: rank {} twice", p.client);
                assert!(seen.insert(p.server), "round {i}: rank {} twice", p.server);
            }
        }
    }

    fn sorted(rounds: &[Vec<MeshPairId>]) -> Vec<MeshPairId> {
        let mut v: Vec<MeshPairId> = rounds.iter().flatten().copied().collect();
        v.sort();
        v
    }

    #[test]
    fn every_ordered_pair_once_and_no_rank_twice_in_a_round_for_2_to_8_ranks() {
        for size in 2..=8 {
            let r = rounds(size, &Selection::All, false).unwrap();
            assert_eq!(sorted(&r), all_ordered(size), "P = {size}");
            no_rank_twice(&r);
            // The circle method's count: 2(P-1) rounds for even P, 2P for odd P.
            let want = if size % 2 == 0 {
                2 * (size - 1)
            } else {
                2 * size
            };
            assert_eq!(r.len(), want, "P = {size}");
            // Full rounds: every rank busy (even P), all but one (odd P).
            for round in &r {
                assert_eq!(round.len(), size / 2, "P = {size}");
            }
        }
    }

    #[test]
    fn serial_is_one_pair_per_round_with_the_same_pairs() {
        for size in [2, 3, 4, 7] {
            let r = rounds(size, &Selection::All, true).unwrap();
            assert!(r.iter().all(|round| round.len() == 1));
            assert_eq!(sorted(&r), all_ordered(size));
        }
    }

    #[test]
    fn a_subset_is_measured_exactly_and_packed() {
        let sel = parse_pairs("0-1,2-3, 1:3").unwrap();
        let r = rounds(4, &sel, false).unwrap();
        let mut want = vec![
            MeshPairId {
                client: 0,
                server: 1,
            },
            MeshPairId {
                client: 1,
                server: 0,
            },
            MeshPairId {
                client: 2,
                server: 3,
            },
            MeshPairId {
                client: 3,
                server: 2,
            },
            MeshPairId {
                client: 1,
                server: 3,
            },
        ];
        want.sort();
        assert_eq!(sorted(&r), want);
        no_rank_twice(&r);
        // 0-1 and 2-3 share rounds; 1:3 needs one more.
        assert_eq!(r.len(), 3);
        for size in 3..=8 {
            let sel = Selection::Only(vec![
                MeshPairId {
                    client: 0,
                    server: 2,
                },
                MeshPairId {
                    client: size - 1,
                    server: 1,
                },
            ]);
            let r = rounds(size, &sel, false).unwrap();
            assert_eq!(r.iter().flatten().count(), 2);
            no_rank_twice(&r);
        }
    }

    #[test]
    fn bad_pairs_and_sizes_are_one_line_errors() {
        assert!(parse_pairs("0-0").unwrap_err().contains("itself"));
        assert!(parse_pairs("0-x").unwrap_err().contains("'x'"));
        assert!(parse_pairs("0").unwrap_err().contains("A-B"));
        let e = rounds(4, &parse_pairs("0-4").unwrap(), false).unwrap_err();
        assert!(e.to_string().contains("rank 4"), "{e}");
        assert!(rounds(1, &Selection::All, false).is_err());
    }
}
