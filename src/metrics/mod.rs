//! The Prometheus exporter of `agent --metrics` and `serve --metrics`: `/metrics` in the
//! Prometheus text format (OpenMetrics when the scraper asks for it) and a
//! blackbox-exporter-style `/probe?target=&module=`, built on the official client crate
//! (prometheus-client). It reads what its source gives it ([`MetricsSource`], defined here,
//! implemented by the agent and the server); it names neither.

pub mod exposition;
pub mod families;
pub mod http;
pub mod probe;

use std::net::SocketAddr;
use std::sync::Arc;

use crate::model::agent::{AgentSnapshot, ServerSnapshot, TestState};

/// Every metric family the exporter can serve, by its name in the Prometheus text format
/// (counters with their `_total`). The Grafana dashboard in contrib/ uses only these (its
/// test checks), and the exporter's own test checks it serves exactly these names.
pub const METRIC_NAMES: &[&str] = &[
    // The last result of each (target, test); labels target, test, transport, pattern, size.
    "wirebench_latency_seconds", // + quantile="0.5" | "0.9" | "0.99": one-way latency
    "wirebench_transactions_per_second",
    "wirebench_throughput_bytes_per_second", // + side="sender" | "receiver"
    "wirebench_loss_ratio",
    "wirebench_retransmitted_segments",
    "wirebench_responsiveness_rpm",
    "wirebench_result_valid", // 1 valid, 0 flagged by the physics guard
    "wirebench_last_run_timestamp_seconds", // when the last run finished, Unix seconds
    "wirebench_regressed",    // 1 while the latest comparison found a regression
    // Counters per (target, test); labels target, test.
    "wirebench_runs_total",
    "wirebench_run_failures_total",
    "wirebench_regressions_total",
    // Metadata: labels target, test, transport, pattern, size and the target's own labels.
    "wirebench_test_info",
    // The agent itself.
    "wirebench_agent_running_runs",
    "wirebench_agent_cpu_seconds_total",
    "wirebench_build_info", // label version
    // /probe only: whether the run asked for succeeded.
    "wirebench_probe_success",
    "wirebench_probe_duration_seconds",
    // The server (serve --metrics).
    "wirebench_server_active_sessions", // not `_sessions`: OpenMetrics names the counter below so
    "wirebench_server_sessions_total",
    "wirebench_server_refusals_total", // label kind
    "wirebench_server_received_bytes_total",
    "wirebench_server_sent_bytes_total",
];

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
    /// Whether `/probe` is served at all (a server has nothing to probe with: 404).
    fn offers_probes(&self) -> bool {
        true
    }
}

/// A running exporter; stops serving when dropped.
pub struct MetricsServer {
    pub addr: SocketAddr,
    running: http::Running,
}

impl MetricsServer {
    /// What attacks and slow clients cost it so far.
    pub fn counters(&self) -> &http::Counters {
        &self.running.counters
    }
}

/// Serves `/metrics` and `/probe` on `addr` from a thread of its own, within the default
/// [`http::Limits`].
pub fn serve(addr: SocketAddr, source: Arc<dyn MetricsSource>) -> anyhow::Result<MetricsServer> {
    serve_within(addr, source, http::Limits::default())
}

/// [`serve`] within other limits (tests make them small).
pub fn serve_within(
    addr: SocketAddr,
    source: Arc<dyn MetricsSource>,
    limits: http::Limits,
) -> anyhow::Result<MetricsServer> {
    let running = http::start(addr, source, limits)?;
    Ok(MetricsServer {
        addr: running.addr,
        running,
    })
}

/// The address of `--metrics VALUE`: a bare port (or `:PORT`) is on 127.0.0.1, so that the
/// exporter, which has no key and no access rules, is reached from this host alone unless
/// an address is named.
pub fn parse_address(value: &str) -> Result<SocketAddr, String> {
    let port = value.strip_prefix(':').unwrap_or(value);
    if let Ok(port) = port.parse::<u16>() {
        return Ok(SocketAddr::from(([127, 0, 0, 1], port)));
    }
    value.parse().map_err(|_| {
        format!("{value:?}: expected PORT (on 127.0.0.1) or IP:PORT such as 127.0.0.1:9465")
    })
}
