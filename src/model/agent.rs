//! What `wirebench agent` knows at one moment, for its exporter: each test's last result and
//! its counters, and the server's own counters for `serve --metrics`. Plain data: the agent
//! fills it, the exporter (`crate::metrics`) reads it; neither names the other's types.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// Every (target, test) pair the agent measures, in config order.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct AgentSnapshot {
    pub tests: Vec<TestState>,
    /// Runs started and not yet finished.
    pub running: u64,
    /// The agent's own CPU time, seconds, since it started (for its budget and its metric).
    pub cpu_seconds: f64,
}

/// One test against one target.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct TestState {
    /// The target's name (config `[[target]] name`).
    pub target: String,
    /// The test's name (config `[[test]] name`).
    pub test: String,
    /// The target's labels from the config (bounded: only what the config names).
    pub labels: BTreeMap<String, String>,
    /// `tcp`, `udp`, ... as `--transport` names it.
    pub transport: String,
    /// `pingpong`, `rr`, `crr`, `stream`.
    pub pattern: String,
    /// The request size, bytes.
    pub size_bytes: u64,
    /// Whether the test moves bulk data (stream, or anything with --load): such tests to one
    /// target never overlap.
    pub throughput: bool,
    pub runs_total: u64,
    pub failures_total: u64,
    pub regressions_total: u64,
    /// The last successful run's figures; None before the first.
    pub last: Option<LastResult>,
    /// The latest comparison with the baseline window found a regression (cleared when a
    /// later comparison does not).
    pub regressed: bool,
}

/// The figures of one run, in base units (seconds, bytes).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct LastResult {
    /// The run's id in the results database (None when it was not saved).
    pub run_id: Option<i64>,
    /// When the run finished, seconds since the Unix epoch.
    pub finished_unix_s: f64,
    /// The run's headline verdict (the physics guard's): false when a figure broke what the
    /// run knew.
    pub valid: bool,
    /// One-way latency quantiles (RTT/2 for ping-pong; RTT for rr and crr): (quantile,
    /// seconds), e.g. (0.5, 3.1e-5), (0.9, ...), (0.99, ...).
    pub latency_quantiles: Vec<(f64, f64)>,
    /// Transactions per second (rr, crr, pingpong).
    pub transactions_per_s: Option<f64>,
    /// Stream rates, bytes per second, as each end measured.
    pub sender_bytes_per_s: Option<f64>,
    pub receiver_bytes_per_s: Option<f64>,
    /// Lost / sent (UDP, raw); None where the transport does not lose.
    pub loss_ratio: Option<f64>,
    /// TCP retransmitted segments over the run.
    pub retransmits: Option<u64>,
    /// Round trips per minute under load (`--load`, RFC-style responsiveness).
    pub rpm: Option<f64>,
}

/// The server's own counters, for `serve --metrics`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ServerSnapshot {
    /// Sessions being served now.
    pub sessions_active: u64,
    /// Sessions accepted since the server started.
    pub sessions_total: u64,
    /// Refusals since start, by kind (`busy`, `invalid`, `auth`, `budget`, ...).
    pub refusals_total: BTreeMap<String, u64>,
    /// Payload bytes the data connections received and sent since start.
    pub bytes_received_total: u64,
    pub bytes_sent_total: u64,
}
