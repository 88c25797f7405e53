//! What running points hold on a server: each point's footprint and the shared budget.
//!
//! A point's footprint is summed from what its patterns state they allocate (each pattern's
//! own footprint function, beside its allocation), never re-derived here.
//!
//! Every point is charged what the server's side of it allocates (buffers, and the kernel's
//! socket buffers it asks for) and how many data connections it holds; a point runs only with
//! a [`Reservation`] of both from the server's shared [`Budget`], which its Drop returns however
//! the point ends.

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

use super::limits::Limits;
use super::protocol::{PointSpec, TestSpec};
use super::refusal::Refusal;
use super::worker;
use crate::pattern::{self, crr, exchange, stream, PatternKind, Role, Side};
use crate::transport::Capabilities;

/// What the server's side of one point holds while it runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Footprint {
    /// Bytes of buffers, the socket buffers asked of the kernel included.
    pub memory: u64,
    /// Data connections, each served by a thread of its own.
    pub streams: u32,
}

/// What all running points of a server hold together: the shared side of the budgets.
#[derive(Debug, Default)]
pub struct Budget {
    memory: AtomicU64,
    streams: AtomicU32,
}

impl Budget {
    /// Bytes of buffers reserved by running points now.
    pub fn memory(&self) -> u64 {
        self.memory.load(Ordering::SeqCst)
    }

    /// Data connections reserved by running points now.
    pub fn streams(&self) -> u32 {
        self.streams.load(Ordering::SeqCst)
    }

    /// Reserves `f` if it fits under `limits`' totals along with everything reserved already;
    /// the reservation is returned when the guard drops (the point ended, failed or panicked).
    pub fn reserve<'a>(
        &'a self,
        f: Footprint,
        limits: &Limits,
    ) -> Result<Reservation<'a>, Refusal> {
        let fits = |held: u64| {
            held.checked_add(f.memory)
                .filter(|&t| t <= limits.max_memory)
        };
        if self
            .memory
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, fits)
            .is_err()
        {
            return Err(Refusal::busy(format!(
                "server busy: this point needs {} of buffers and running tests hold {} of the server's memory budget of {} (--max-memory)",
                mib(f.memory),
                mib(self.memory()),
                mib(limits.max_memory)
            )));
        }
        let fits = |held: u32| {
            held.checked_add(f.streams)
                .filter(|&t| t <= limits.max_streams_total)
        };
        if self
            .streams
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, fits)
            .is_err()
        {
            self.memory.fetch_sub(f.memory, Ordering::SeqCst);
            return Err(Refusal::busy(format!(
                "server busy: this point needs {} data connections and running tests hold {} of the server's limit of {} (--max-streams-total)",
                f.streams,
                self.streams(),
                limits.max_streams_total
            )));
        }
        Ok(Reservation {
            budget: self,
            held: f,
        })
    }
}

/// A point's share of the [`Budget`], returned on drop.
#[derive(Debug)]
pub struct Reservation<'a> {
    budget: &'a Budget,
    held: Footprint,
}

impl Drop for Reservation<'_> {
    fn drop(&mut self) {
        self.budget
            .memory
            .fetch_sub(self.held.memory, Ordering::SeqCst);
        self.budget
            .streams
            .fetch_sub(self.held.streams, Ordering::SeqCst);
    }
}

/// Bytes as MiB for a message.
pub(super) fn mib(b: u64) -> String {
    if b == u64::MAX {
        "no limit".into()
    } else {
        format!("{:.1} MiB", b as f64 / f64::from(1 << 20))
    }
}

/// The server's role on each data connection of test `t`.
pub(super) fn server_roles(t: &TestSpec) -> impl Iterator<Item = Role> + '_ {
    let n = pattern::connection_count(t.pattern, t.direction, t.streams);
    (0..n).map(move |i| pattern::role(Side::Server, t.pattern, t.direction, t.streams, i))
}

/// What the server's side of a point allocates: per data connection what its pattern states
/// it allocates for the very plan the server's worker will run (stream senders and receivers,
/// exchange responders, crr's one responder), and the socket buffers it asks the kernel for
/// (which Linux doubles). An upper bound: a fast path that falls back allocates less.
pub fn footprint(t: &TestSpec, p: &PointSpec, caps: &Capabilities) -> Footprint {
    // The kernel's socket buffers, doubled for its bookkeeping as SO_SNDBUF/SO_RCVBUF are.
    let sockets = 2
        * (p.server_socket
            .sndbuf
            .saturating_add(p.server_socket.rcvbuf));
    if t.pattern == PatternKind::Crr {
        // One connection at a time, on one thread.
        return Footprint {
            memory: crr::server_footprint(caps, p.request_size, p.response_size)
                .saturating_add(sockets),
            streams: 1,
        };
    }
    let one = |role: Role| -> u64 {
        let buffers = match role {
            Role::Sender => stream::sender_footprint(&worker::send_plan(t, p, None), caps),
            Role::Receiver => stream::receiver_footprint(&worker::recv_plan(t, p), caps),
            Role::Responder => exchange::responder_footprint(caps, p.request_size, p.response_size),
            // Never the server's role; a requester's buffers are a responder's turned round.
            Role::Requester => exchange::responder_footprint(caps, p.response_size, p.request_size),
        };
        buffers.saturating_add(sockets)
    };
    let mut f = Footprint::default();
    for role in server_roles(t) {
        f.memory = f.memory.saturating_add(one(role));
        f.streams += 1;
    }
    f
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::control::refusal::RefusalKind;
    use crate::pattern::{Direction, FastPaths};
    use crate::transport::{SocketOptions, TransportKind};

    fn test(pattern: PatternKind, direction: Direction, streams: u32) -> TestSpec {
        TestSpec {
            write_size: None,
            think_ns: None,
            length_prefix: 0,
            tls: false,
            path_timing: false,
            open_loop: None,
            pattern,
            transport: TransportKind::Udp,
            streams,
            direction,
            spin: false,
            server_cpus: vec![],
            interval_ms: Some(100),
            burst: 1,
            fast: FastPaths {
                batch: 16,
                ..FastPaths::default()
            },
            one_port: false,
        }
    }

    fn point() -> PointSpec {
        PointSpec {
            request_size: 1200,
            response_size: 300,
            read_size: 65_536,
            duration_ms: Some(10_000),
            bytes: None,
            iterations: None,
            warmup: 10,
            pace: None,
            server_socket: SocketOptions {
                rcvbuf: 1 << 20,
                ..SocketOptions::default()
            },
            buffers_fixed: true,
            rate_per_s: None,
        }
    }

    /// The budget states nothing of its own about buffers: a point's footprint is what each
    /// of its server-side connections' patterns says, for the plan the server's worker runs,
    /// with the socket buffers it asks the kernel for.
    #[test]
    fn a_points_footprint_is_the_sum_of_what_its_patterns_state() {
        let caps = TransportKind::Udp.capabilities().unwrap();
        let p = point();
        let sockets = 2 * (1 << 20);
        let bidir = test(PatternKind::Stream, Direction::Bidir, 2);
        let send = stream::sender_footprint(&worker::send_plan(&bidir, &p, None), &caps);
        let recv = stream::receiver_footprint(&worker::recv_plan(&bidir, &p), &caps);
        assert_eq!(
            footprint(&bidir, &p, &caps),
            Footprint {
                memory: 2 * send + 2 * recv + 4 * sockets,
                streams: 4,
            }
        );
        // The receivers' reports span twice the point and the drain (receive.rs), more than
        // the senders'.
        assert!(recv > 16 * 65_536 && send > 0);
        let rr = test(PatternKind::Rr, Direction::Forward, 3);
        let one = exchange::responder_footprint(&caps, 1200, 300);
        assert_eq!(one, 65_536 + 300);
        assert_eq!(footprint(&rr, &p, &caps).memory, 3 * (one + sockets));
        let c = test(PatternKind::Crr, Direction::Forward, 1);
        assert_eq!(
            footprint(&c, &p, &caps),
            Footprint {
                memory: crr::server_footprint(&caps, 1200, 300) + sockets,
                streams: 1,
            }
        );
    }

    #[test]
    fn reservations_add_up_and_are_returned_on_drop() {
        let l = Limits {
            max_memory: 1000,
            max_streams_total: 10,
            ..Limits::default()
        };
        let b = Budget::default();
        let a = b
            .reserve(
                Footprint {
                    memory: 600,
                    streams: 4,
                },
                &l,
            )
            .unwrap();
        assert_eq!((b.memory(), b.streams()), (600, 4));
        let e = b
            .reserve(
                Footprint {
                    memory: 500,
                    streams: 1,
                },
                &l,
            )
            .unwrap_err();
        assert_eq!(e.kind, RefusalKind::Busy);
        assert!(e.message.contains("--max-memory"), "{e}");
        // A refusal holds nothing.
        assert_eq!((b.memory(), b.streams()), (600, 4));
        let e = b
            .reserve(
                Footprint {
                    memory: 100,
                    streams: 7,
                },
                &l,
            )
            .unwrap_err();
        assert_eq!(e.kind, RefusalKind::Busy);
        assert!(e.message.contains("--max-streams-total"), "{e}");
        assert_eq!((b.memory(), b.streams()), (600, 4));
        let c = b
            .reserve(
                Footprint {
                    memory: 400,
                    streams: 6,
                },
                &l,
            )
            .unwrap();
        assert_eq!((b.memory(), b.streams()), (1000, 10));
        drop(a);
        assert_eq!((b.memory(), b.streams()), (400, 6));
        // Returned even when the holder panics.
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let _held = c;
            panic!("a point failed");
        }));
        assert!(r.is_err());
        assert_eq!((b.memory(), b.streams()), (0, 0));
    }
}
