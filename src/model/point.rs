//! What identifies a point of a sweep and which parameters the sweep varies: the keys every
//! point of a document carries, and what tables and figures group by.

use serde::{Deserialize, Serialize};

use super::vocab::CcName;

/// The parameters that identify a point in a sweep (requested values).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct PointKey {
    /// Message / request / write size, bytes.
    pub size: u64,
    pub sndbuf: u64,
    pub rcvbuf: u64,
    pub server_sndbuf: u64,
    pub server_rcvbuf: u64,
    /// The point's congestion control when `--cc` names several (a sweep axis); absent
    /// otherwise: a single `--cc` is one of the run's settings, as before the sweep existed,
    /// so the points of a run with one algorithm keep the keys they always had.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<String>")]
    pub cc: Option<CcName>,
    /// rr with open-loop arrivals: the offered rate, requests per second over all
    /// connections. Absent from closed-loop points.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate_per_s: Option<u64>,
}

/// Which parameters vary across the sweep (for table columns and grouping).
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema,
)]
pub struct Swept {
    pub size: bool,
    pub sndbuf: bool,
    pub rcvbuf: bool,
    pub server_sndbuf: bool,
    pub server_rcvbuf: bool,
    /// `--cc` names several algorithms. False in documents written before it could.
    #[serde(default)]
    pub cc: bool,
    /// rr's `--rate` names several request rates (a QPS sweep). False in documents written
    /// before it could.
    #[serde(default)]
    pub rate: bool,
}
