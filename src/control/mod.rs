//! The control plane: negotiating a test over its own TCP connection, apart from the data
//! plane that moves and times bytes.

pub mod access;
pub mod admission;
pub mod auth;
pub mod budget;
pub mod checks;
pub mod client;
pub mod counters;
pub mod framing;
pub mod limits;
pub mod machine;
pub mod oneport;
pub mod protocol;
pub mod rate;
pub mod refusal;
pub mod server;
pub(crate) mod worker;

pub use worker::stop_at;
