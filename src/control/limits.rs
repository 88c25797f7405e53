//! The limits a server announces in its Welcome and holds every request to.
//!
//! The checks against them are in checks.rs, what running points hold in budget.rs; this file
//! imports nothing of the control plane, so the protocol can carry [`Limits`] without a cycle.

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Limits {
    /// Largest message, write or read size, bytes.
    pub max_message: u64,
    /// Longest point, milliseconds: every point, its warm-up included, and byte- or
    /// iteration-bound ones too, ends by then (plus the grace of machine::PointWatch).
    pub max_duration_ms: u64,
    /// Most parallel streams in one test.
    pub max_streams: u32,
    /// Most transactions in flight (rr --burst).
    pub max_burst: u32,
    /// Largest socket buffer request, bytes.
    pub max_socket_buffer: u64,
    /// Most warm-up iterations.
    pub max_warmup: u64,
    /// Most tests running at once on this server.
    pub max_sessions: u32,
    /// Bytes of buffers one point may hold on the server (its footprint, see budget.rs).
    /// Documents of servers before budgets lack it: no budget.
    #[serde(default = "unlimited")]
    pub max_test_memory: u64,
    /// Bytes of buffers all running points together may hold on the server.
    #[serde(default = "unlimited")]
    pub max_memory: u64,
    /// Data connections (each a thread) all running points together may hold.
    #[serde(default = "unlimited_u32")]
    pub max_streams_total: u32,
    /// Bit rate of one test, bits/s (0: no limit): the server's own senders must be paced at
    /// or below it, and a test whose data arrives faster on average is ended.
    #[serde(default)]
    pub max_rate_bps: u64,
    /// Bit rate one client (an IPv4 address, an IPv6 /64) may reserve over its running
    /// tests, bits/s (0: no limit).
    #[serde(default)]
    pub max_rate_per_client_bps: u64,
    /// Bit rate all running tests together may reserve, bits/s (0: no limit).
    #[serde(default)]
    pub max_rate_total_bps: u64,
    /// Busy-polling data sockets (`--spin`) is allowed: it burns a CPU per stream.
    #[serde(default)]
    pub permit_spin: bool,
    /// SO_BUSY_POLL on data sockets (`--busy-poll`) is allowed.
    #[serde(default)]
    pub permit_busy_poll: bool,
    /// The raw Ethernet transport is allowed.
    #[serde(default)]
    pub permit_raw: bool,
    /// Longest pacing step (interval x burst) the server follows, nanoseconds.
    #[serde(default = "default_pace_step")]
    pub max_pace_step_ns: u64,
}

fn default_pace_step() -> u64 {
    MAX_PACE_STEP_NS as u64
}

fn unlimited() -> u64 {
    u64::MAX
}

fn unlimited_u32() -> u32 {
    u32::MAX
}

/// Default bytes of buffers per point: a 64 MiB ping-pong on one connection (two 64 MiB
/// buffers) or 128 streams at their default sizes fit; 16 x 64 MiB does not.
pub const DEFAULT_TEST_MEMORY: u64 = 256 << 20;
/// Default bytes of buffers of all running points: four points at the per-point budget.
pub const DEFAULT_MEMORY: u64 = 1 << 30;
/// Default data connections of all running points (one thread each).
pub const DEFAULT_STREAMS_TOTAL: u32 = 512;
/// Longest pacing step (interval x burst) a remote server follows by default: a paced sender owns no slot
/// longer than this, so that no write waits past a point's end (a rate of 1 bit/s with 1 MiB
/// writes asked for one write every 97 days).
pub const MAX_PACE_STEP_NS: f64 = 1e9;

impl Default for Limits {
    /// Defaults safe for a server on an open port.
    fn default() -> Self {
        Limits {
            max_message: 64 << 20,
            max_duration_ms: 3_600_000,
            max_streams: 128,
            max_burst: 1024,
            max_socket_buffer: 1 << 30,
            max_warmup: 1_000_000,
            max_sessions: 64,
            max_test_memory: DEFAULT_TEST_MEMORY,
            max_memory: DEFAULT_MEMORY,
            max_streams_total: DEFAULT_STREAMS_TOTAL,
            max_rate_bps: 0,
            max_rate_per_client_bps: 0,
            max_rate_total_bps: 0,
            permit_spin: false,
            permit_busy_poll: false,
            permit_raw: false,
            max_pace_step_ns: default_pace_step(),
        }
    }
}

impl Limits {
    /// The self-hosted server of `wirebench run` (and of a lab run): the user's own process on
    /// loopback, so every feature is allowed and only the per-field bounds apply.
    pub fn local() -> Limits {
        Limits {
            max_test_memory: u64::MAX,
            max_memory: u64::MAX,
            max_streams_total: u32::MAX,
            max_rate_bps: 0,
            max_rate_per_client_bps: 0,
            max_rate_total_bps: 0,
            permit_spin: true,
            permit_busy_poll: true,
            permit_raw: true,
            // A paced sender sleeps in slices and stops with its point, so the user's own
            // server follows any rate (1 kbit/s with 1400-byte writes is 11 s per write).
            max_pace_step_ns: u64::MAX,
            ..Limits::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Limits;

    #[test]
    fn limits_of_a_server_before_budgets_read_as_no_budget() {
        let mut v = serde_json::to_value(Limits::default()).unwrap();
        let o = v.as_object_mut().unwrap();
        for k in [
            "max_test_memory",
            "max_memory",
            "max_streams_total",
            "max_rate_bps",
            "permit_spin",
            "permit_busy_poll",
            "permit_raw",
        ] {
            o.remove(k);
        }
        let l: Limits = serde_json::from_value(v).unwrap();
        assert_eq!(l.max_memory, u64::MAX);
        assert_eq!(l.max_rate_bps, 0);
        assert!(!l.permit_raw);
    }
}
