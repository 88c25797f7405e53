//! The result model: the `wirebench.run` document that `--json` prints, the results database
//! keeps and every output, figure and comparison is rendered from. Plain data with serde,
//! and a leaf: only `stats` and `units` feed it. The value types the measuring layers fill
//! (the names in [`vocab`], a stream's counts, a socket's TCP_INFO, a host's counters, the lab
//! link, a trace's summary) are defined here, so that output, store and figures read the
//! model alone; what a layer does with them (opening a transport, parsing a link) stays there.

pub mod agent;
pub mod distribution;
mod document;
pub mod fairness;
pub mod headline;
pub mod host;
pub mod lab;
pub mod load;
pub mod mesh;
pub mod path;
mod point;
pub mod rpc;
pub mod schema;
pub mod socket;
pub mod span;
pub mod stream;
pub mod trace;
pub mod transports;
pub mod upgrade;
pub mod vocab;

pub use document::*;
pub use point::{PointKey, Swept};
