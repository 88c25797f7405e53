//! What a server accepts. Every field of a request is checked against these before anything
//! is allocated or started, and a violation is answered with a readable error.

use serde::{Deserialize, Serialize};

use super::protocol::{PointSpec, TestSpec};
use crate::pattern::PatternKind;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Limits {
    /// Largest message, write or read size, bytes.
    pub max_message: u64,
    /// Longest point, milliseconds.
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
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_message: 64 << 20,
            max_duration_ms: 3_600_000,
            max_streams: 128,
            max_burst: 1024,
            max_socket_buffer: 1 << 30,
            max_warmup: 1_000_000,
            max_sessions: 64,
        }
    }
}

impl Limits {
    pub fn check_test(&self, t: &TestSpec) -> Result<(), String> {
        crate::transport::by_name(&t.transport, &Default::default()).map_err(|e| e.to_string())?;
        if t.streams == 0 || t.streams > self.max_streams {
            return Err(format!(
                "{} parallel streams requested; this server allows 1 to {}",
                t.streams, self.max_streams
            ));
        }
        if t.pattern == PatternKind::Crr && t.streams != 1 {
            return Err("crr runs one connection at a time (--parallel 1)".into());
        }
        if t.burst == 0 || t.burst > self.max_burst {
            return Err(format!(
                "burst of {} requested; this server allows 1 to {}",
                t.burst, self.max_burst
            ));
        }
        let cpus = crate::sys::cpu_count();
        if let Some(c) = t.server_cpus.iter().find(|&&c| c >= cpus) {
            return Err(format!(
                "server CPU {c} does not exist (the server has {cpus})"
            ));
        }
        if t.fast.batch == 0 || t.fast.batch > 1024 {
            return Err(format!(
                "batch of {}; this server allows 1 to 1024",
                t.fast.batch
            ));
        }
        if t.interval_ms == Some(0) {
            return Err("interval of 0 ms".into());
        }
        Ok(())
    }

    pub fn check_point(&self, p: &PointSpec) -> Result<(), String> {
        for (what, v) in [
            ("request/message size", p.request_size),
            ("response size", p.response_size),
            ("read size", p.read_size),
        ] {
            if v == 0 || v > self.max_message {
                return Err(format!(
                    "{what} of {v} bytes; this server allows 1 to {} bytes",
                    self.max_message
                ));
            }
        }
        match p.duration_ms {
            Some(d) if d > self.max_duration_ms => {
                return Err(format!(
                    "duration of {} s; this server allows at most {} s",
                    d as f64 / 1000.0,
                    self.max_duration_ms / 1000
                ))
            }
            None if p.bytes.is_none() && p.iterations.is_none() => {
                return Err("no stop condition (duration, bytes or iterations)".into())
            }
            _ => {}
        }
        if p.warmup > self.max_warmup {
            return Err(format!(
                "{} warm-up iterations; this server allows at most {}",
                p.warmup, self.max_warmup
            ));
        }
        for (what, v) in [
            ("server send buffer", p.server_socket.sndbuf),
            ("server receive buffer", p.server_socket.rcvbuf),
        ] {
            if v > self.max_socket_buffer {
                return Err(format!(
                    "{what} of {v} bytes; this server allows at most {} bytes",
                    self.max_socket_buffer
                ));
            }
        }
        if let Some(pace) = p.pace {
            if !(pace.interval_ns.is_finite() && pace.interval_ns >= 0.0) {
                return Err("invalid pacing interval".into());
            }
            if !(1..=u64::from(crate::pattern::stream::MAX_PACE_BURST)).contains(&pace.burst) {
                return Err(format!(
                    "pacing burst of {}; it must be 1 to {}",
                    pace.burst,
                    crate::pattern::stream::MAX_PACE_BURST
                ));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::Limits;
    use crate::control::protocol::PointSpec;
    use crate::pattern::stream::Pace;
    use crate::transport::SocketOptions;

    fn paced(interval_ns: f64, burst: u64) -> PointSpec {
        PointSpec {
            request_size: 1000,
            response_size: 1000,
            read_size: 65_536,
            duration_ms: Some(1000),
            bytes: None,
            iterations: None,
            warmup: 10,
            pace: Some(Pace { interval_ns, burst }),
            server_socket: SocketOptions::default(),
            buffers_fixed: false,
        }
    }

    #[test]
    fn a_server_refuses_pacing_it_cannot_follow() {
        let l = Limits::default();
        assert!(l.check_point(&paced(400.0, 1)).is_ok());
        assert!(l.check_point(&paced(400.0, 65_536)).is_ok());
        assert_eq!(
            l.check_point(&paced(400.0, 0)).unwrap_err(),
            "pacing burst of 0; it must be 1 to 65536"
        );
        assert!(l.check_point(&paced(400.0, 65_537)).is_err());
        assert!(l.check_point(&paced(f64::NAN, 1)).is_err());
    }
}
