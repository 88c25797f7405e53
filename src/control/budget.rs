//! What running points hold on a server: each point's footprint, summed from what its
//! patterns state they allocate, and the shared budget it is reserved from.
//!
//! Every point is charged what the server's side of it allocates (buffers, and the kernel's
//! socket buffers it asks for) and how many data connections it holds; a point runs only with
//! a [`Reservation`] of both from the server's shared [`Budget`], which its Drop returns however
//! the point ends.

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

use super::limits::Limits;
use super::protocol::{PointSpec, TestSpec};
use crate::pattern::stream::Interval;
use crate::pattern::DATAGRAM_READ;
use crate::pattern::{self, PatternKind, Role, Side};
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
    pub fn reserve<'a>(&'a self, f: Footprint, limits: &Limits) -> Result<Reservation<'a>, String> {
        let fits = |held: u64| {
            held.checked_add(f.memory)
                .filter(|&t| t <= limits.max_memory)
        };
        if self
            .memory
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, fits)
            .is_err()
        {
            return Err(format!(
                "server busy: this point needs {} of buffers and running tests hold {} of the server's memory budget of {} (--max-memory); try again later",
                mib(f.memory),
                mib(self.memory()),
                mib(limits.max_memory)
            ));
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
            return Err(format!(
                "server busy: this point needs {} data connections and running tests hold {} of the server's limit of {} (--max-streams-total); try again later",
                f.streams,
                self.streams(),
                limits.max_streams_total
            ));
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

/// What the server's side of a point allocates, from the patterns' own buffer choices
/// (stream send.rs and receive.rs, exchange.rs, crr.rs): per data connection its message or
/// read buffers times the batch, the interval reports it keeps, and the socket buffers it asks
/// the kernel for (which Linux doubles). An upper bound: a fast path that falls back
/// allocates less.
pub fn footprint(
    t: &TestSpec,
    p: &PointSpec,
    caps: &Capabilities,
    max_duration_ms: u64,
) -> Footprint {
    let batch = u64::from(t.fast.batch.max(1));
    let header = crate::pattern::stream::DATAGRAM_HEADER as u64;
    // The kernel's socket buffers, doubled for its bookkeeping as SO_SNDBUF/SO_RCVBUF are.
    let sockets = 2
        * (p.server_socket
            .sndbuf
            .saturating_add(p.server_socket.rcvbuf));
    // A byte- or iteration-bound point's reports run until the duration limit at most.
    let reports = match t.interval_ms {
        Some(i) if t.pattern == PatternKind::Stream && i > 0 => {
            let ms = p
                .duration_ms
                .unwrap_or(max_duration_ms)
                .min(max_duration_ms);
            (ms / i + 4).saturating_mul(std::mem::size_of::<Interval>() as u64)
        }
        _ => 0,
    };
    let exchange = || {
        let req = if caps.message_boundaries {
            DATAGRAM_READ.max(p.request_size)
        } else {
            p.request_size.max(1)
        };
        req.saturating_add(p.response_size.max(1))
    };
    let one = |role: Role| -> u64 {
        let buffers = match role {
            Role::Sender if caps.reliable => {
                // The payload, and its copy in a memory file for sendfile.
                let w = p.request_size.max(1);
                if t.fast.sendfile {
                    w.saturating_mul(2)
                } else {
                    w
                }
            }
            Role::Sender => {
                // Warm-up datagram, then one of: a batch of them, or a GSO send (at most
                // 64 KiB) and its model datagram.
                let size = p.request_size.max(header);
                let batched = size.saturating_mul(batch).saturating_add(size);
                let gso = DATAGRAM_READ.saturating_add(size);
                size.saturating_add(batched.max(gso))
            }
            Role::Receiver if caps.reliable => p.read_size.max(1),
            Role::Receiver => {
                // A batch of datagram buffers, and the stamped reads of the warm-up.
                let size = DATAGRAM_READ.max(p.read_size);
                size.saturating_mul(batch).saturating_add(DATAGRAM_READ)
            }
            Role::Responder | Role::Requester => exchange(),
        };
        buffers.saturating_add(reports).saturating_add(sockets)
    };
    if t.pattern == PatternKind::Crr {
        // One connection at a time, on one thread.
        return Footprint {
            memory: exchange().saturating_add(sockets),
            streams: 1,
        };
    }
    let mut f = Footprint::default();
    for role in server_roles(t) {
        f.memory = f.memory.saturating_add(one(role));
        f.streams += 1;
    }
    f
}

#[cfg(test)]
mod tests {
    use super::{Budget, Footprint, Limits};

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
        assert!(e.contains("--max-memory"), "{e}");
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
        assert!(e.contains("--max-streams-total"), "{e}");
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
