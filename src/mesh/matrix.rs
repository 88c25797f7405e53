//! The matrices of a mesh, drawn from its pairs' points: a cell per ordered pair and point,
//! holding the figures that pair's point already has (nothing is recomputed, so a cell is the
//! figure `wirebench run` printed between those two ranks).

use crate::model::mesh::{
    BandwidthCell, BandwidthMatrix, LatencyCell, LatencyMatrix, MeshMatrix, MeshPair,
};
use crate::model::PointResult;

/// One matrix set per distinct point (same key and sizes), in the order the points were
/// first measured.
pub fn assemble(pairs: &[MeshPair], confidence: f64) -> Vec<MeshMatrix> {
    let mut out: Vec<MeshMatrix> = Vec::new();
    for pair in pairs {
        for p in &pair.points {
            let at = match out.iter().position(|m| same_point(m, p)) {
                Some(i) => i,
                None => {
                    out.push(MeshMatrix {
                        key: p.key,
                        request_size: p.request_size,
                        response_size: p.response_size,
                        latency: None,
                        bandwidth: None,
                    });
                    out.len() - 1
                }
            };
            let m = &mut out[at];
            if let Some(cell) = latency_cell(pair, p) {
                let kind = if p
                    .latency
                    .as_ref()
                    .is_some_and(|l| l.one_way_mean_ns.is_some())
                {
                    "one_way"
                } else {
                    "round_trip"
                };
                m.latency
                    .get_or_insert_with(|| LatencyMatrix {
                        kind: kind.to_owned(),
                        confidence,
                        cells: Vec::new(),
                    })
                    .cells
                    .push(cell);
            }
            let cells = bandwidth_cells(pair, p);
            if !cells.is_empty() {
                m.bandwidth
                    .get_or_insert_with(|| BandwidthMatrix { cells: Vec::new() })
                    .cells
                    .extend(cells);
            }
        }
    }
    out
}

fn same_point(m: &MeshMatrix, p: &PointResult) -> bool {
    m.key == p.key && m.request_size == p.request_size && m.response_size == p.response_size
}

/// pingpong: one-way figures, RTT/2 (its percentiles too, as `run` halves its mean); rr, crr:
/// the transaction's round trip.
fn latency_cell(pair: &MeshPair, p: &PointResult) -> Option<LatencyCell> {
    let l = p.latency.as_ref()?;
    let (mean, ci, div) = match l.one_way_mean_ns {
        Some(m) => (m, l.one_way_ci_ns, 2.0),
        None => (l.rtt.mean_ns, l.rtt.ci_half_width_ns, 1.0),
    };
    // The point's own verdict on its p99 (the guard's percentile floor, over its samples).
    let p99 = l.percentile_validity("p99");
    Some(LatencyCell {
        p99_valid: p99.valid,
        p99_invalid_reason: p99.invalid_reason,
        from: pair.client,
        to: pair.server,
        mean_ns: mean,
        ci_ns: ci,
        p50_ns: l.rtt.median_ns as f64 / div,
        p99_ns: l.rtt.p99_ns as f64 / div,
        samples: l.rtt.samples,
        runs: p.runs,
        validity: l.validity.clone(),
    })
}

/// A cell per direction of a stream point: from the rank that sent to the one that received.
fn bandwidth_cells(pair: &MeshPair, p: &PointResult) -> Vec<BandwidthCell> {
    let Some(s) = &p.stream else {
        return Vec::new();
    };
    s.totals
        .iter()
        .map(|t| {
            let (from, to) = if t.direction == "server_to_client" {
                (pair.server, pair.client)
            } else {
                (pair.client, pair.server)
            };
            BandwidthCell {
                from,
                to,
                client: pair.client,
                streams: t.streams,
                sender_bits_per_s: t.sender_bits_per_s,
                receiver_bits_per_s: t.receiver_bits_per_s,
                sender_bytes_timed: t.sender_bytes_timed,
                sender_elapsed_ns: t.sender_elapsed_ns,
                receiver_bytes_timed: t.receiver_bytes_timed,
                receiver_elapsed_ns: t.receiver_elapsed_ns,
                sender_valid: t.sender_valid,
                sender_invalid_reason: t.sender_invalid_reason.clone(),
                receiver_valid: t.receiver_valid,
                receiver_invalid_reason: t.receiver_invalid_reason.clone(),
                over_runs: p.headline.over_runs.clone().filter(|_| p.runs > 1),
                runs: p.runs,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::RunDocument;

    fn pingpong_points(mean_ns: f64) -> Vec<PointResult> {
        let r: RunDocument = crate::store::db::tests::report("pingpong", 2, mean_ns);
        r.points
    }

    fn pair(client: usize, server: usize, points: Vec<PointResult>) -> MeshPair {
        MeshPair {
            client,
            server,
            round: 0,
            started_at: None,
            finished_at: None,
            points,
            sweep_metrics: Vec::new(),
            complete: true,
            error: None,
        }
    }

    #[test]
    fn a_cell_per_pair_and_point_with_the_points_own_figures() {
        let mut pairs = Vec::new();
        for c in 0..3 {
            for s in 0..3 {
                if c != s {
                    pairs.push(pair(
                        c,
                        s,
                        pingpong_points(1000.0 * (c * 3 + s) as f64 + 500.0),
                    ));
                }
            }
        }
        let m = assemble(&pairs, 0.95);
        // Two sizes: two matrices of 3x2 cells each.
        assert_eq!(m.len(), 2);
        for (i, matrix) in m.iter().enumerate() {
            assert!(matrix.bandwidth.is_none());
            let l = matrix.latency.as_ref().unwrap();
            assert_eq!(l.cells.len(), 6);
            for (cell, pair) in l.cells.iter().zip(&pairs) {
                assert_eq!((cell.from, cell.to), (pair.client, pair.server));
                let lat = pair.points[i].latency.as_ref().unwrap();
                assert_eq!(l.kind, "one_way");
                assert_eq!(cell.mean_ns, lat.one_way_mean_ns.unwrap());
                assert_eq!(cell.samples, lat.rtt.samples);
                assert_eq!(cell.p99_ns, lat.rtt.p99_ns as f64 / 2.0);
                assert_eq!(matrix.key, pair.points[i].key);
            }
        }
    }

    #[test]
    fn a_failed_pair_has_no_cells_and_the_others_keep_theirs() {
        let pairs = vec![pair(0, 1, pingpong_points(2000.0)), pair(1, 0, Vec::new())];
        let m = assemble(&pairs, 0.95);
        assert!(m
            .iter()
            .all(|x| x.latency.as_ref().unwrap().cells.len() == 1));
    }

    /// A cell's p99 carries the point's percentile verdict: the guard's floor of 1000 samples.
    #[test]
    fn a_cells_p99_says_when_it_stands_on_too_few_samples() {
        let mut points = pingpong_points(2000.0);
        for (p, samples) in points.iter_mut().zip([200u64, 5000]) {
            let l = p.latency.as_mut().unwrap();
            l.rtt.samples = samples;
            l.percentiles = crate::plan::guard::percentiles(l);
        }
        let m = assemble(&[pair(0, 1, points)], 0.95);
        let cell = |i: usize| m[i].latency.as_ref().unwrap().cells[0].clone();
        let few = cell(0).p99_validity();
        assert!(few.is_invalid());
        assert!(few
            .reason()
            .starts_with("p99 from 200 samples: below its floor of 1000"));
        assert_eq!(cell(1).p99_valid, Some(true));
    }
}
