//! Checks a request against the server's limits before anything is allocated or started.
//!
//! The test's and each point's fields, what a point would hold (its footprint, budget.rs) and
//! what its server's own senders would move; a violation is a [`Refusal`] of its kind.

use super::budget::{footprint, mib, server_roles, Footprint};
use super::limits::Limits;
use super::protocol::{PointSpec, TestSpec};
use super::refusal::Refusal;
use crate::pattern::DATAGRAM_READ;
use crate::pattern::{PatternKind, Role};
use crate::transport::Capabilities;
use crate::units::{format_mbit_s as mbit, format_seconds};

impl Limits {
    pub fn check_test(&self, t: &TestSpec) -> Result<(), Refusal> {
        t.transport
            .capabilities()
            .map_err(|e| Refusal::invalid(e.to_string()))?;
        if t.streams == 0 || t.streams > self.max_streams {
            return Err(Refusal::limit(format!(
                "{} parallel streams requested; this server allows 1 to {}",
                t.streams, self.max_streams
            )));
        }
        if t.tls && t.transport != crate::transport::TransportKind::Grpc {
            return Err(Refusal::invalid(format!(
                "TLS is asked for over {}: --tls applies to grpc alone",
                t.transport
            )));
        }
        if t.pattern == PatternKind::Crr && t.streams != 1 {
            return Err(Refusal::invalid(
                "crr runs one connection at a time (--parallel 1)",
            ));
        }
        if t.burst == 0 || t.burst > self.max_burst {
            return Err(Refusal::limit(format!(
                "burst of {} requested; this server allows 1 to {}",
                t.burst, self.max_burst
            )));
        }
        let cpus = crate::sys::cpu_count();
        if let Some(c) = t.server_cpus.iter().find(|&&c| c >= cpus) {
            return Err(Refusal::invalid(format!(
                "server CPU {c} does not exist (the server has {cpus})"
            )));
        }
        if t.fast.batch == 0 || t.fast.batch > 1024 {
            return Err(Refusal::limit(format!(
                "batch of {}; this server allows 1 to 1024",
                t.fast.batch
            )));
        }
        if t.interval_ms == Some(0) {
            return Err(Refusal::invalid("interval of 0 ms"));
        }
        // Features that cost the server's host more than a test's share: a spinning stream
        // burns a CPU whether data moves or not, busy-polling holds the device queue, raw
        // frames go out on the wire unfiltered by the IP stack.
        for (asked, permitted, what) in [
            (t.spin, self.permit_spin, "spin (busy-polling data sockets)"),
            (
                t.fast.busy_poll_us.is_some(),
                self.permit_busy_poll,
                "busy-poll (SO_BUSY_POLL)",
            ),
            (
                t.transport == crate::transport::TransportKind::Raw,
                self.permit_raw,
                "raw (the raw Ethernet transport)",
            ),
        ] {
            if asked && !permitted {
                let name = what.split(' ').next().unwrap_or(what);
                return Err(Refusal::policy(format!(
                    "{what} is not permitted on this server; its operator can allow it with --permit {name}"
                )));
            }
        }
        Ok(())
    }

    pub fn check_point(&self, p: &PointSpec) -> Result<(), Refusal> {
        for (what, v, least) in [
            // 0-byte messages: exchanges only, which `check_fit` sees.
            ("request/message size", p.request_size, 0),
            ("response size", p.response_size, 0),
            ("read size", p.read_size, 1),
        ] {
            if v < least || v > self.max_message {
                return Err(Refusal::limit(format!(
                    "{what} of {v} bytes; this server allows {least} to {} bytes",
                    self.max_message
                )));
            }
        }
        match p.duration_ms {
            Some(d) if d > self.max_duration_ms => {
                return Err(Refusal::limit(format!(
                    "duration of {}; this server allows at most {}",
                    format_seconds(d as f64 / 1e3),
                    format_seconds(self.max_duration_ms as f64 / 1e3)
                )))
            }
            None if p.bytes.is_none() && p.iterations.is_none() => {
                return Err(Refusal::invalid(
                    "no stop condition (duration, bytes or iterations)",
                ))
            }
            _ => {}
        }
        if p.warmup > self.max_warmup {
            return Err(Refusal::limit(format!(
                "{} warm-up iterations; this server allows at most {}",
                p.warmup, self.max_warmup
            )));
        }
        for (what, v) in [
            ("server send buffer", p.server_socket.sndbuf),
            ("server receive buffer", p.server_socket.rcvbuf),
        ] {
            if v > self.max_socket_buffer {
                return Err(Refusal::limit(format!(
                    "{what} of {v} bytes; this server allows at most {} bytes",
                    self.max_socket_buffer
                )));
            }
        }
        if let Some(pace) = p.pace {
            if !(pace.interval_ns.is_finite() && pace.interval_ns >= 0.0) {
                return Err(Refusal::invalid("invalid pacing interval"));
            }
            if !(1..=u64::from(crate::pattern::stream::MAX_PACE_BURST)).contains(&pace.burst) {
                return Err(Refusal::limit(format!(
                    "pacing burst of {}; it must be 1 to {}",
                    pace.burst,
                    crate::pattern::stream::MAX_PACE_BURST
                )));
            }
            // A paced sender sleeps until its next step: a step of days held a test slot
            // for days after its client was gone.
            let step = pace.interval_ns * pace.burst as f64;
            if step > self.max_pace_step_ns as f64 {
                return Err(Refusal::limit(format!(
                    "pacing of one step every {} ({} writes of {} bytes); this server paces at most {} per step: ask for a higher --rate or smaller writes",
                    format_seconds(step / 1e9),
                    pace.burst,
                    p.request_size,
                    format_seconds(self.max_pace_step_ns as f64 / 1e9)
                )));
            }
        }
        Ok(())
    }

    /// Checks what the server's side of point `p` of test `t` over a transport with `caps`
    /// would hold against the per-point budgets, and returns it for the shared budget.
    pub fn check_fit(
        &self,
        t: &TestSpec,
        p: &PointSpec,
        caps: &Capabilities,
    ) -> Result<Footprint, Refusal> {
        let transport = t.transport;
        let exchange = matches!(t.pattern, PatternKind::Pingpong | PatternKind::Rr);
        if (p.request_size == 0 || p.response_size == 0)
            && !(exchange && (caps.message_boundaries || t.length_prefix != 0))
        {
            return Err(Refusal::invalid(
                "a message of 0 bytes: only pingpong and rr exchange them, over a byte stream framed with their length",
            ));
        }
        let framed = crate::pattern::channel::LENGTH_PREFIX as u32;
        if t.length_prefix != 0 && (t.length_prefix != framed || !exchange) {
            return Err(Refusal::invalid(format!(
                "a length prefix of {} bytes; this server frames exchanges with {framed}",
                t.length_prefix
            )));
        }
        if caps.message_boundaries {
            let max = caps.max_message;
            for (what, v, limit) in [
                ("request/message size", p.request_size, max),
                ("response size", p.response_size, max),
                ("read size", p.read_size, max.max(DATAGRAM_READ)),
            ] {
                if v > limit {
                    return Err(Refusal::limit(format!(
                        "{what} of {v} bytes; one {transport} message holds at most {max} bytes (this server allows 1 to {limit})"
                    )));
                }
            }
        }
        let f = footprint(t, p, caps);
        if f.memory > self.max_test_memory {
            return Err(Refusal::limit(format!(
                "this point needs {} of buffers on the server ({} data connections); this server's memory budget per test is {} (--max-test-memory): use fewer streams or smaller sizes, batches or buffers",
                mib(f.memory),
                f.streams,
                mib(self.max_test_memory)
            )));
        }
        if f.streams > self.max_streams_total {
            return Err(Refusal::limit(format!(
                "this point needs {} data connections; this server allows {} in all (--max-streams-total)",
                f.streams, self.max_streams_total
            )));
        }
        self.check_rate(t, p)?;
        // Warm-up counts against the duration limit: a paced warm-up that cannot end inside
        // it is refused here rather than stopped half-way.
        if let Some(pace) = p.pace {
            let warm_ms = pace.end_ns(p.warmup) / 1e6;
            let timed_ms = p.duration_ms.unwrap_or(0) as f64;
            if warm_ms + timed_ms > self.max_duration_ms as f64 {
                return Err(Refusal::limit(format!(
                    "a warm-up of {} paced writes takes {}, which with the point's {} exceeds this server's duration limit of {}",
                    p.warmup,
                    format_seconds(warm_ms / 1e3),
                    format_seconds(timed_ms / 1e3),
                    format_seconds(self.max_duration_ms as f64 / 1e3)
                )));
            }
        }
        Ok(f)
    }

    /// The server's own senders of a test keep to its bit rate: paced at or below the
    /// smallest rate limit set, in all.
    fn check_rate(&self, t: &TestSpec, p: &PointSpec) -> Result<(), Refusal> {
        let Some((limit, option)) = super::rate::test_cap(self) else {
            return Ok(());
        };
        let senders = server_roles(t).filter(|r| *r == Role::Sender).count();
        if senders == 0 {
            return Ok(());
        }
        let asked = super::rate::paced_bps(senders, p);
        if asked > limit * 1.000_001 {
            let asked = if asked.is_finite() {
                mbit(asked)
            } else {
                "unpaced".into()
            };
            return Err(Refusal::limit(format!(
                "the server would send {asked}; this server sends at most {} per test ({option}): ask for --rate {}M or less",
                mbit(limit),
                limit / 1e6
            )));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use crate::control::limits::Limits;
    use crate::control::protocol::{PointSpec, TestSpec};
    use crate::control::refusal::{Refusal, RefusalKind};
    use crate::pattern::stream::Pace;
    use crate::pattern::{Direction, FastPaths, PatternKind};
    use crate::transport::{Capabilities, SocketOptions, TransportKind};

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
            rate_per_s: None,
        }
    }

    fn test(pattern: PatternKind, transport: TransportKind, streams: u32, batch: u32) -> TestSpec {
        TestSpec {
            write_size: None,
            think_ns: None,
            length_prefix: 0,
            tls: false,
            path_timing: false,
            open_loop: None,
            pattern,
            transport,
            streams,
            direction: Direction::Forward,
            spin: false,
            server_cpus: vec![],
            interval_ms: None,
            burst: 1,
            fast: FastPaths {
                batch,
                ..FastPaths::default()
            },
            one_port: false,
        }
    }

    fn caps(datagrams: bool) -> Capabilities {
        Capabilities {
            reliable: !datagrams,
            message_boundaries: datagrams,
            max_message: if datagrams { 65_507 } else { u64::MAX },
            tcp_options: !datagrams,
            host_local: false,
            syscall_batching: datagrams,
            rcvlowat: !datagrams,
        }
    }

    fn sized(request: u64, read: u64) -> PointSpec {
        PointSpec {
            request_size: request,
            response_size: request,
            read_size: read,
            pace: None,
            ..paced(1.0, 1)
        }
    }

    #[test]
    fn a_server_refuses_pacing_it_cannot_follow() {
        let l = Limits::default();
        assert!(l.check_point(&paced(400.0, 1)).is_ok());
        assert!(l.check_point(&paced(400.0, 65_536)).is_ok());
        assert_eq!(
            l.check_point(&paced(400.0, 0)).unwrap_err(),
            Refusal::limit("pacing burst of 0; it must be 1 to 65536")
        );
        assert_eq!(
            l.check_point(&paced(f64::NAN, 1)).unwrap_err().kind,
            RefusalKind::Invalid
        );
        assert!(l.check_point(&paced(400.0, 65_537)).is_err());
        assert!(l.check_point(&paced(f64::NAN, 1)).is_err());
    }

    #[test]
    fn a_pacing_step_longer_than_a_second_is_refused() {
        let l = Limits::default();
        assert!(l.check_point(&paced(1e9, 1)).is_ok());
        assert!(l.check_point(&paced(2.5e8, 4)).is_ok());
        // 1 MiB at 1 bit/s: one write every 97 days.
        let e = l
            .check_point(&paced(8.0 * 1_048_576.0 * 1e9, 1))
            .unwrap_err();
        assert_eq!(e.kind, RefusalKind::Limit);
        let e = e.message;
        assert!(e.contains("paces at most 1.000 s per step"), "{e}");
        assert!(l.check_point(&paced(1e300, 1)).is_err());
        assert!(l.check_point(&paced(3e8, 4)).is_err());
    }

    #[test]
    fn the_users_own_server_follows_any_finite_pacing() {
        // 1 kbit/s with 1400-byte writes: 11.2 s per write, fine on loopback or in the lab.
        let l = Limits::local();
        assert!(l.check_point(&paced(1.12e10, 1)).is_ok());
        assert!(l.check_point(&paced(3.6e12, 1)).is_ok());
        // Beyond what the sender's clock can count (584 years), even here.
        assert!(l.check_point(&paced(1e300, 1)).is_err());
        assert!(l.check_point(&paced(f64::INFINITY, 1)).is_err());
    }

    #[test]
    fn udp_sizes_beyond_a_datagram_are_refused_before_any_allocation() {
        let l = Limits::default();
        let t = test(PatternKind::Stream, TransportKind::Udp, 1, 1024);
        let e = l
            .check_fit(&t, &sized(1000, 64 << 20), &caps(true))
            .unwrap_err();
        assert_eq!(e.kind, RefusalKind::Limit);
        let e = e.message;
        assert!(e.contains("read size of 67108864 bytes"), "{e}");
        assert!(e.contains("65507"), "{e}");
        let e = l
            .check_fit(&t, &sized(70_000, 65_536), &caps(true))
            .unwrap_err();
        assert_eq!(e.kind, RefusalKind::Limit);
        let e = e.message;
        assert!(e.contains("request/message size of 70000"), "{e}");
        // The client's default read of 64 KiB and the largest datagram are fine, batch or not.
        assert!(l.check_fit(&t, &sized(65_507, 65_536), &caps(true)).is_ok());
    }

    #[test]
    fn batch_times_size_counts_against_the_memory_budget() {
        let l = Limits::default();
        // 1024 x 64 KiB = 64 MiB per stream: four streams fit in 256 MiB, eight do not.
        let four = test(PatternKind::Stream, TransportKind::Udp, 3, 1024);
        let f = l
            .check_fit(&four, &sized(1000, 65_536), &caps(true))
            .unwrap();
        assert_eq!(f.streams, 3);
        assert!(f.memory >= 3 * 1024 * 65_536, "{f:?}");
        let eight = test(PatternKind::Stream, TransportKind::Udp, 8, 1024);
        let e = l
            .check_fit(&eight, &sized(1000, 65_536), &caps(true))
            .unwrap_err();
        assert_eq!(e.kind, RefusalKind::Limit);
        let e = e.message;
        assert!(e.contains("--max-test-memory"), "{e}");
    }

    #[test]
    fn sixteen_pingpongs_of_64_mib_exceed_the_memory_budget() {
        let l = Limits::default();
        let one = test(PatternKind::Pingpong, TransportKind::Tcp, 1, 1);
        let f = l
            .check_fit(&one, &sized(64 << 20, 64 << 20), &caps(false))
            .unwrap();
        assert_eq!(f.memory, 128 << 20);
        let sixteen = test(PatternKind::Pingpong, TransportKind::Tcp, 16, 1);
        let e = l
            .check_fit(&sixteen, &sized(64 << 20, 64 << 20), &caps(false))
            .unwrap_err();
        assert_eq!(e.kind, RefusalKind::Limit);
        let e = e.message;
        assert!(e.contains("2048.0 MiB of buffers"), "{e}");
        assert!(e.contains("memory budget per test is 256.0 MiB"), "{e}");
        // Requested socket buffers count too (doubled, as the kernel does).
        let mut big = sized(1000, 1000);
        big.server_socket.rcvbuf = 150 << 20;
        assert!(l.check_fit(&one, &big, &caps(false)).is_err());
        // The self-hosted server has no budget.
        assert!(Limits::local()
            .check_fit(&sixteen, &sized(64 << 20, 64 << 20), &caps(false))
            .is_ok());
    }

    #[test]
    fn spin_busy_poll_and_raw_need_the_operators_permission() {
        let l = Limits::default();
        let mut t = test(PatternKind::Stream, TransportKind::Tcp, 1, 1);
        assert!(l.check_test(&t).is_ok());
        t.spin = true;
        let e = l.check_test(&t).unwrap_err();
        assert_eq!(e.kind, RefusalKind::Policy);
        assert!(e.message.contains("--permit spin"), "{e}");
        assert!(Limits {
            permit_spin: true,
            ..Limits::default()
        }
        .check_test(&t)
        .is_ok());
        t.spin = false;
        t.fast.busy_poll_us = Some(50);
        assert!(l
            .check_test(&t)
            .unwrap_err()
            .message
            .contains("--permit busy-poll"));
        assert!(Limits::local().check_test(&t).is_ok());
    }

    #[test]
    fn the_servers_own_senders_keep_to_its_bit_rate() {
        let l = Limits {
            max_rate_bps: 10_000_000,
            ..Limits::default()
        };
        let mut t = test(PatternKind::Stream, TransportKind::Tcp, 2, 1);
        // Forward: the server only receives; what arrives is watched while the point runs.
        assert!(l.check_fit(&t, &sized(1000, 1000), &caps(false)).is_ok());
        t.direction = Direction::Reverse;
        let e = l
            .check_fit(&t, &sized(1000, 1000), &caps(false))
            .unwrap_err();
        assert_eq!(e.kind, RefusalKind::Limit);
        let e = e.message;
        assert!(e.contains("unpaced") && e.contains("--max-rate"), "{e}");
        // Two streams of 1000-byte writes every 1.6 ms: 10 Mbit/s in all.
        let mut p = sized(1000, 1000);
        p.pace = Some(Pace {
            interval_ns: 1.6e6,
            burst: 1,
        });
        assert!(l.check_fit(&t, &p, &caps(false)).is_ok());
        p.pace = Some(Pace {
            interval_ns: 1.5e6,
            burst: 1,
        });
        assert!(l.check_fit(&t, &p, &caps(false)).is_err());
    }

    #[test]
    fn a_paced_warmup_counts_against_the_duration_limit() {
        let l = Limits {
            max_duration_ms: 2000,
            ..Limits::default()
        };
        let t = test(PatternKind::Stream, TransportKind::Tcp, 1, 1);
        // 1000 writes every 10 ms: 10 s of warm-up.
        let mut p = paced(1e7, 1);
        p.warmup = 1000;
        let e = l.check_fit(&t, &p, &caps(false)).unwrap_err();
        assert_eq!(e.kind, RefusalKind::Limit);
        let e = e.message;
        assert!(e.contains("duration limit of 2.000 s"), "{e}");
        p.warmup = 50;
        assert!(l.check_fit(&t, &p, &caps(false)).is_ok());
    }
}
