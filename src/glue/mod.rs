//! The glue between a command and the measuring layers: from a typed request it builds the
//! plan, chooses the sinks, attaches the results store, writes the figures asked for and
//! returns the process's exit code. Commands call it; nothing below it knows it exists.

pub mod compare_transports;
pub mod grpc_endpoint;
pub mod measure;
#[cfg(feature = "mpi")]
pub mod mpi;
pub mod stored;
