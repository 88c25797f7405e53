//! The few figures that stand for a whole run in `history`: what a reader of a list of runs
//! wants to see before opening one. Figures that are not valid measurements (see
//! `stats::validity`) are left out of them, and said to be; a run with no valid figure
//! shows its figures marked with the reason.

use crate::model::{PointResult, RunDocument};
use crate::stats::Validity;
use crate::units::{mbit, us};

/// Every figure field is `None` when the run has no such figure (or no point at all).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RunHeadline {
    /// pingpong: one-way latency (RTT/2) of the smallest message; rr, crr: the lowest mean
    /// transaction round trip over the points. Nanoseconds.
    pub latency_ns: Option<f64>,
    /// Highest throughput over the points: 2n/RTT (pingpong), request plus response payload
    /// (rr, crr), receiver rate summed over streams and directions (stream). Bits per second.
    pub throughput_bits_per_s: Option<f64>,
    /// rr, crr: the highest transactions per second over the points.
    pub transactions_per_s: Option<f64>,
    /// Set when a point was left out for not being valid ("2 of 5 points not valid, left
    /// out"), or when the figures come from points that are not valid, with the reason
    /// ("! not valid: ..."): the figures are then marked wherever they are shown.
    pub note: Option<String>,
}

impl RunHeadline {
    /// The figures come from points that are not valid.
    pub fn invalid(&self) -> bool {
        self.note.as_deref().is_some_and(|n| n.starts_with('!'))
    }
}

/// One point's figure with the verdict on it.
struct Candidate<'a> {
    point: &'a PointResult,
    valid: Validity,
}

fn candidates(r: &RunDocument) -> Vec<Candidate<'_>> {
    r.points
        .iter()
        .filter(|p| p.latency.is_some() || p.stream.is_some())
        .map(|p| Candidate {
            point: p,
            valid: p.figures_validity(),
        })
        .collect()
}

fn max(values: impl Iterator<Item = f64>) -> Option<f64> {
    values.filter(|v| v.is_finite()).reduce(f64::max)
}

fn min(values: impl Iterator<Item = f64>) -> Option<f64> {
    values.filter(|v| v.is_finite()).reduce(f64::min)
}

fn stream_total(p: &PointResult) -> Option<f64> {
    let s = p.stream.as_ref()?;
    Some(s.totals.iter().map(|t| t.receiver_bits_per_s).sum())
}

pub fn headline(r: &RunDocument) -> RunHeadline {
    let all = candidates(r);
    let valid: Vec<&PointResult> = all
        .iter()
        .filter(|c| !c.valid.is_invalid())
        .map(|c| c.point)
        .collect();
    let invalid: Vec<&Candidate> = all.iter().filter(|c| c.valid.is_invalid()).collect();
    // The valid points when there are any; otherwise all of them, marked.
    let (use_points, note): (Vec<&PointResult>, Option<String>) = if invalid.is_empty() {
        (valid, None)
    } else if valid.is_empty() {
        let first = invalid[0];
        (
            all.iter().map(|c| c.point).collect(),
            Some(format!(
                "! not valid: {}{}",
                first.valid.reason(),
                match invalid.len() {
                    1 => String::new(),
                    n => format!(" (and {} more points)", n - 1),
                }
            )),
        )
    } else {
        let n = invalid.len();
        (
            valid,
            Some(format!("{n} of {} points not valid, left out", all.len())),
        )
    };
    let latencies = || use_points.iter().filter_map(|p| p.latency.as_ref());
    let mut h = match r.pattern.name() {
        "pingpong" => {
            // The smallest message's latency is t0, whether or not the run swept sizes.
            let smallest = use_points
                .iter()
                .filter(|p| p.latency.as_ref().and_then(|l| l.one_way_mean_ns).is_some())
                .min_by_key(|p| p.key.size);
            RunHeadline {
                latency_ns: smallest.and_then(|p| p.latency.as_ref()?.one_way_mean_ns),
                throughput_bits_per_s: max(latencies().map(|l| l.throughput_bits_per_s)),
                transactions_per_s: None,
                note: None,
            }
        }
        "rr" | "crr" => RunHeadline {
            latency_ns: min(latencies().map(|l| l.rtt.mean_ns)),
            throughput_bits_per_s: max(latencies().map(|l| l.throughput_bits_per_s)),
            transactions_per_s: max(latencies().map(|l| l.transactions_per_s)),
            note: None,
        },
        _ => RunHeadline {
            latency_ns: None,
            throughput_bits_per_s: max(use_points.iter().filter_map(|p| stream_total(p))),
            transactions_per_s: None,
            note: None,
        },
    };
    h.note = note.or_else(|| r.mesh.as_ref().map(mesh_note));
    h
}

/// A mesh keeps its figures in its pairs, not in top-level points: its headline is the span
/// of its first matrix's valid cells.
fn mesh_note(m: &crate::model::mesh::MeshResult) -> String {
    let done = m.pairs.iter().filter(|p| p.complete).count();
    let mut text = format!("mesh: {done} of {} pairs", m.pairs.len());
    let span = |v: Vec<f64>| {
        let lo = v.iter().copied().fold(f64::INFINITY, f64::min);
        let hi = v.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        (!v.is_empty()).then_some((lo, hi))
    };
    if let Some(first) = m.matrices.first() {
        if let Some(l) = &first.latency {
            let v = l
                .cells
                .iter()
                .filter(|c| !c.validity.is_invalid())
                .map(|c| c.mean_ns)
                .collect();
            if let Some((lo, hi)) = span(v) {
                text += &format!(", {} {}-{} us", l.kind.replace('_', "-"), us(lo), us(hi));
            }
        }
        if let Some(b) = &first.bandwidth {
            let v = b
                .cells
                .iter()
                .filter(|c| c.receiver_valid != Some(false))
                .map(|c| c.receiver_bits_per_s)
                .collect();
            if let Some((lo, hi)) = span(v) {
                text += &format!(", receiver {}-{} Mbit/s", mbit(lo), mbit(hi));
            }
        }
    }
    text
}

/// One short phrase, e.g. "t0 34.62 us, r_max 40797.31 Mbit/s"; figures from points that are
/// not valid carry "!" and the reason.
pub fn describe(pattern: &str, h: &RunHeadline) -> String {
    let m = if h.invalid() { "!" } else { "" };
    let lat = h.latency_ns.map(us);
    let bps = h.throughput_bits_per_s.map(mbit);
    let parts: Vec<String> = match pattern {
        "pingpong" => vec![
            lat.map(|v| format!("t0 {v}{m} us")),
            bps.map(|v| format!("r_max {v}{m} Mbit/s")),
        ],
        "rr" | "crr" => vec![
            h.transactions_per_s
                .map(|v| format!("peak {v:.1}{m} txn/s")),
            lat.map(|v| format!("best rtt {v}{m} us")),
        ],
        _ => vec![bps.map(|v| format!("peak receiver {v}{m} Mbit/s"))],
    }
    .into_iter()
    .flatten()
    .collect();
    let text = if parts.is_empty() {
        // A mesh's note is its headline.
        if let Some(note) = h.note.as_deref().filter(|n| n.starts_with("mesh:")) {
            return note.to_owned();
        }
        "no figures".into()
    } else {
        parts.join(", ")
    };
    match &h.note {
        Some(note) => format!("{text} ({note})"),
        None => text,
    }
}
