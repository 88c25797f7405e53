//! The Prometheus exporter of `agent --metrics` and `serve --metrics`: `/metrics` in the
//! Prometheus text format (OpenMetrics when the scraper asks for it) and a
//! blackbox-exporter-style `/probe?target=&module=`, built on the official client crate
//! (prometheus-client). It reads what its source gives it ([`MetricsSource`], defined here,
//! implemented by the agent and the server); it names neither.

use std::net::SocketAddr;
use std::sync::Arc;

use crate::model::agent::{AgentSnapshot, ServerSnapshot, TestState};

/// What the exporter asks of whoever runs it.
pub trait MetricsSource: Send + Sync + 'static {
    /// The agent's state now (None when no agent runs: `serve --metrics`).
    fn agent(&self) -> Option<AgentSnapshot>;
    /// The server's counters now (None when no server runs: `agent --metrics`).
    fn server(&self) -> Option<ServerSnapshot>;
    /// Runs the test named `module` against `target` (a target's name, or HOST:PORT) now and
    /// gives its state; Err: one line saying why not (unknown module, no such target, the
    /// run failed).
    fn probe(&self, target: &str, module: &str) -> Result<TestState, String>;
}

/// A running exporter; stops serving when dropped.
pub struct MetricsServer {
    pub addr: SocketAddr,
}

/// Serves `/metrics` and `/probe` on `addr` from a thread of its own.
pub fn serve(addr: SocketAddr, source: Arc<dyn MetricsSource>) -> anyhow::Result<MetricsServer> {
    let _ = source;
    anyhow::bail!("--metrics {addr}: the exporter is not built yet")
}
