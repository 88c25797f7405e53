//! The parameters a run can sweep: the x axis, and the curves the others split points into.

use crate::figures::plots::fmt_bytes_param;
use crate::model::vocab::CcName;
use crate::model::{PointKey, PointResult, RunDocument};

use super::Run;

/// A parameter a run can sweep, and so a possible x axis.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Param {
    Size,
    Sndbuf,
    Rcvbuf,
    ServerSndbuf,
    ServerRcvbuf,
}

pub(super) const PARAMS: [Param; 5] = [
    Param::Size,
    Param::Sndbuf,
    Param::Rcvbuf,
    Param::ServerSndbuf,
    Param::ServerRcvbuf,
];

impl Param {
    pub fn of(self, k: &PointKey) -> u64 {
        match self {
            Param::Size => k.size,
            Param::Sndbuf => k.sndbuf,
            Param::Rcvbuf => k.rcvbuf,
            Param::ServerSndbuf => k.server_sndbuf,
            Param::ServerRcvbuf => k.server_rcvbuf,
        }
    }

    pub(super) fn swept(self, r: &RunDocument) -> bool {
        let s = &r.swept;
        match self {
            Param::Size => s.size,
            Param::Sndbuf => s.sndbuf,
            Param::Rcvbuf => s.rcvbuf,
            Param::ServerSndbuf => s.server_sndbuf,
            Param::ServerRcvbuf => s.server_rcvbuf,
        }
    }

    /// Short name for legends and titles.
    pub(super) fn name(self, pattern: &str) -> &'static str {
        match self {
            Param::Size => match pattern {
                "stream" => "write size",
                "rr" | "crr" => "request size",
                _ => "message size",
            },
            Param::Sndbuf => "send buffer",
            Param::Rcvbuf => "receive buffer",
            Param::ServerSndbuf => "server send buffer",
            Param::ServerRcvbuf => "server receive buffer",
        }
    }

    /// Axis label with its unit.
    pub(super) fn axis_label(self, pattern: &str) -> String {
        match self {
            Param::Size => format!("{} (bytes)", self.name(pattern)),
            _ => format!("{} requested, SO_*BUF (bytes)", self.name(pattern)),
        }
    }
}

/// The parameter figures are drawn against: the message size when any run sweeps it, else
/// the first swept buffer (throughput against window size), else the size.
pub fn x_param(runs: &[Run]) -> Param {
    PARAMS
        .into_iter()
        .find(|p| runs.iter().any(|r| p.swept(r.report)))
        .unwrap_or(Param::Size)
}

/// A point's values of some swept parameters, and its algorithm in a congestion-control
/// sweep.
pub(super) type OtherValues = (Vec<u64>, Option<CcName>);

/// The points of a run split by the parameters other than `x`: one curve each.
pub(super) struct Group<'a> {
    /// Empty when the run has a single group.
    pub(super) label: String,
    pub(super) points: Vec<&'a PointResult>,
}

pub(super) fn groups<'a>(r: &'a RunDocument, x: Param) -> Vec<Group<'a>> {
    let others: Vec<Param> = PARAMS
        .into_iter()
        .filter(|p| *p != x && p.swept(r))
        .collect();
    // A congestion-control sweep's algorithm tells curves apart too (it has no order to be an
    // x axis).
    let mut out: Vec<(OtherValues, Group)> = Vec::new();
    for p in &r.points {
        let key = (
            others.iter().map(|o| o.of(&p.key)).collect::<Vec<u64>>(),
            p.key.cc,
        );
        match out.iter_mut().find(|(k, _)| *k == key) {
            Some((_, g)) => g.points.push(p),
            None => {
                let label = others
                    .iter()
                    .zip(&key.0)
                    .map(|(o, v)| format!("{} {}", o.name(r.pattern.name()), fmt_bytes_param(*v)))
                    .chain(p.key.cc.map(|c| format!("cc {c}")))
                    .collect::<Vec<_>>()
                    .join(", ");
                out.push((
                    key,
                    Group {
                        label,
                        points: vec![p],
                    },
                ))
            }
        }
    }
    let mut groups: Vec<Group> = out.into_iter().map(|(_, g)| g).collect();
    for g in &mut groups {
        g.points.sort_by_key(|p| x.of(&p.key));
    }
    groups
}
