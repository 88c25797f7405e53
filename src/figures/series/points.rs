//! Picking the point of a run a figure shows, and naming a point in titles and legends.

use crate::figures::plots::fmt_bytes_param;
use crate::model::{PointResult, RunDocument};

use super::param::{Param, PARAMS};

/// The point a distribution figure shows: `index` if given, else the run's first point that
/// has a distribution.
pub fn point_of(r: &RunDocument, index: Option<usize>) -> Option<&PointResult> {
    let has = |p: &&PointResult| {
        p.latency
            .as_ref()
            .is_some_and(|l| !l.distribution.is_empty())
    };
    match index {
        Some(i) => r.points.iter().find(|p| p.index == i).filter(has),
        None => r.points.iter().find(has),
    }
}

/// "64 B" or "64 B, send buffer 16K": what identifies a point in a title or legend.
pub fn describe_point(r: &RunDocument, p: &PointResult) -> String {
    let mut s = format!("{} B", p.key.size);
    for param in &PARAMS[1..] {
        if param.swept(r) {
            s.push_str(&format!(
                ", {} {}",
                param.name(r.pattern.name()),
                fmt_bytes_param(param.of(&p.key))
            ));
        }
    }
    if let Some(cc) = p.key.cc {
        s.push_str(&format!(", cc {cc}"));
    }
    s
}

/// A point as a figure title names it, kept short so that the title fits:
/// "size 128K, sndbuf 64K".
pub fn short_point(r: &RunDocument, p: &PointResult) -> String {
    let mut s = format!("size {}", crate::units::format_bytes(p.key.size));
    for (param, name) in [
        (Param::Sndbuf, "sndbuf"),
        (Param::Rcvbuf, "rcvbuf"),
        (Param::ServerSndbuf, "server sndbuf"),
        (Param::ServerRcvbuf, "server rcvbuf"),
    ] {
        if param.swept(r) {
            s.push_str(&format!(", {name} {}", fmt_bytes_param(param.of(&p.key))));
        }
    }
    if let Some(cc) = p.key.cc {
        s.push_str(&format!(", cc {cc}"));
    }
    s
}
