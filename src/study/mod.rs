//! Studies: whole experiments from one file (`wirebench study FILE.toml`). A study names the
//! fixed settings of a run, the axes swept over them and how they combine; every point is a
//! run of its own, repeated, in a recorded random order, saved as it goes and resumable; at
//! the end its points are summarised, neighbours compared for anomalies (which can be re-run)
//! and, where asked, the highest rate meeting a delivery target searched for.
//!
//! - `file`: the study file; `schedule`: points and run order; `apply`: a point's settings;
//! - `execute`: runs it (child processes, the lab, timeouts, retries, progress);
//! - `store`: its rows in the results database; `summary`, `show`: what it found; `grid`:
//!   its figures and HTML page;
//! - `search`: the bisection of calibrated pacing.

pub mod apply;
pub mod execute;
pub mod file;
pub mod grid;
pub mod schedule;
pub mod search;
pub mod show;
pub mod store;
pub mod summary;
