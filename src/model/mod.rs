//! The result model: the `wirebench.run` document that `--json` prints, the results database
//! keeps and every output, figure and comparison is rendered from. Plain data with serde;
//! it reads the value types of the layers that measured it (a stream's counts, a host's
//! counters, the lab link's settings) and nothing above them.

pub mod distribution;
mod document;
pub mod fairness;
pub mod headline;
pub mod load;
pub mod mesh;
mod point;
pub mod schema;
pub mod span;
pub mod transports;
pub mod upgrade;

pub use document::*;
pub use point::{PointKey, Swept};
