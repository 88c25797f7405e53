//! wirebench: a protocol-independent benchmark for networks and communication stacks.
//!
//! Layers, top to bottom: [`cli`] (what the user asks) → [`plan`] (points and sweeps) →
//! [`pattern`] (ping-pong, stream, request/response) → [`transport`] (TCP, UDP, Unix) →
//! [`sys`] (the OS calls std does not cover). [`control`] negotiates tests between client and
//! server apart from the data plane; [`stats`] and [`report`] turn samples into results, and
//! [`results`] keeps them: a history database, HTML reports with plots, comparisons. With the
//! `mpi` feature, `mpi_cmd` runs the same patterns between the two ranks of an MPI job.

pub mod app;
pub mod cli;
pub mod control;
pub mod env;
pub mod lab;
#[cfg(feature = "mpi")]
pub mod mpi_cmd;
pub mod pattern;
pub mod plan;
pub mod relay;
pub mod report;
pub mod results;
pub mod stats;
pub mod sys;
pub mod text;
pub mod transport;
pub mod units;
