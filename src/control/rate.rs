//! Bit-rate budgets: per test (`--max-rate`), per client (`--max-rate-per-client`) and over
//! all running tests (`--max-rate-total`).
//!
//! A point reserves the rate it may move before it starts: what its senders are paced at in
//! all, or, for an unpaced point (and every ping-pong, rr or crr), the whole per-test cap. The
//! server's own senders are paced within that (limits.rs refuses the point otherwise), and a
//! point whose data arrives faster than its reservation is ended (server.rs, `PointWatch`):
//! a client that asked for 10 Mbit/s and sends 100 cannot take the others' share.

use crate::units::format_mbit_s as mbit;
use std::collections::HashMap;
use std::sync::Mutex;

use super::access::ClientKey;
use super::limits::Limits;
use super::protocol::{PointSpec, TestSpec};
use super::refusal::Refusal;
use crate::pattern::{self, PatternKind, Role, Side};

/// Bits/s a point's senders, on both ends, are paced at in all; infinite when any of them is
/// unpaced (and for the exchanges, which are never paced).
pub fn declared_bps(t: &TestSpec, p: &PointSpec) -> f64 {
    if t.pattern != PatternKind::Stream {
        return f64::INFINITY;
    }
    let n = pattern::connection_count(t.pattern, t.direction, t.streams);
    let senders = [Side::Server, Side::Client]
        .into_iter()
        .flat_map(|side| {
            (0..n).map(move |i| pattern::role(side, t.pattern, t.direction, t.streams, i))
        })
        .filter(|r| *r == Role::Sender)
        .count();
    paced_bps(senders, p)
}

/// Bits/s `senders` sending streams move in all at the point's pacing; infinite when unpaced.
pub fn paced_bps(senders: usize, p: &PointSpec) -> f64 {
    match p.pace {
        Some(pace) if pace.interval_ns > 0.0 => {
            senders as f64 * p.request_size as f64 * 8e9 / pace.interval_ns
        }
        _ => f64::INFINITY,
    }
}

/// The most one test may move, bits/s, and the option that sets it: the smallest of the
/// per-test, per-client and total limits that are set (a test cannot exceed any of them).
pub fn test_cap(l: &Limits) -> Option<(f64, &'static str)> {
    [
        (l.max_rate_bps, "--max-rate"),
        (l.max_rate_per_client_bps, "--max-rate-per-client"),
        (l.max_rate_total_bps, "--max-rate-total"),
    ]
    .into_iter()
    .filter(|(v, _)| *v > 0)
    .map(|(v, what)| (v as f64, what))
    .min_by(|a, b| a.0.total_cmp(&b.0))
}

/// The rate a point reserves and is held to, bits/s, and what sets it: its declared rate
/// ("its --rate") within the per-test cap (the option that sets the cap). None when the
/// server has no rate limit.
pub fn point_limit(l: &Limits, t: &TestSpec, p: &PointSpec) -> Option<(f64, &'static str)> {
    let (cap, option) = test_cap(l)?;
    let declared = declared_bps(t, p);
    Some(if declared < cap {
        (declared, "its --rate")
    } else {
        (cap, option)
    })
}

/// The rates all running points of a server hold, in all and per client.
#[derive(Debug, Default)]
pub struct RateBudget {
    held: Mutex<Held>,
}

#[derive(Debug, Default)]
struct Held {
    total: f64,
    per_client: HashMap<ClientKey, f64>,
}

impl RateBudget {
    /// Reserves `bps` for a point of `client` if it fits under the total and the client's
    /// limits along with what running points hold; given back when the guard drops.
    pub fn reserve(
        &self,
        client: ClientKey,
        bps: f64,
        l: &Limits,
    ) -> Result<RateReservation<'_>, Refusal> {
        let mut held = self.held.lock().unwrap_or_else(|e| e.into_inner());
        let mine = held.per_client.get(&client).copied().unwrap_or(0.0);
        // A hair of slack for the sums of floating-point rates.
        let over = |held: f64, limit: u64| limit > 0 && held + bps > limit as f64 * 1.000_001;
        if over(held.total, l.max_rate_total_bps) {
            return Err(Refusal::busy(format!(
                "server busy: this point may move {} and running tests hold {} of the server's {} in all (--max-rate-total); a lower --rate may fit now",
                mbit(bps),
                mbit(held.total),
                mbit(l.max_rate_total_bps as f64)
            )));
        }
        if over(mine, l.max_rate_per_client_bps) {
            return Err(Refusal::busy(format!(
                "this point may move {} and your running tests hold {} of the {} one client may use (--max-rate-per-client); wait for them or ask for a lower --rate",
                mbit(bps),
                mbit(mine),
                mbit(l.max_rate_per_client_bps as f64)
            )));
        }
        held.total += bps;
        *held.per_client.entry(client).or_default() += bps;
        Ok(RateReservation {
            budget: self,
            client,
            bps,
        })
    }

    /// Bits/s reserved by running points, in all.
    pub fn total(&self) -> f64 {
        self.held.lock().unwrap_or_else(|e| e.into_inner()).total
    }
}

/// A point's share of the [`RateBudget`], returned on drop.
#[derive(Debug)]
pub struct RateReservation<'a> {
    budget: &'a RateBudget,
    client: ClientKey,
    bps: f64,
}

impl Drop for RateReservation<'_> {
    fn drop(&mut self) {
        let mut held = self.budget.held.lock().unwrap_or_else(|e| e.into_inner());
        held.total = (held.total - self.bps).max(0.0);
        if let Some(mine) = held.per_client.get_mut(&self.client) {
            *mine -= self.bps;
            if *mine <= 0.0 {
                held.per_client.remove(&self.client);
            }
        }
        if held.per_client.is_empty() {
            // No running point: clear the rounding a long run of sums leaves behind.
            held.total = 0.0;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::control::protocol::PointSpec;
    use crate::control::refusal::RefusalKind;
    use crate::pattern::stream::Pace;
    use crate::pattern::{Direction, FastPaths};
    use crate::transport::SocketOptions;
    use std::net::IpAddr;

    fn test(pattern: PatternKind, direction: Direction, streams: u32) -> TestSpec {
        TestSpec {
            write_size: None,
            think_ns: None,
            length_prefix: 0,
            tls: false,
            path_timing: false,
            open_loop: None,
            pattern,
            transport: crate::transport::TransportKind::Tcp,
            streams,
            direction,
            spin: false,
            server_cpus: vec![],
            interval_ms: None,
            burst: 1,
            fast: FastPaths::default(),
            one_port: false,
        }
    }

    fn point(interval_ns: Option<f64>) -> PointSpec {
        PointSpec {
            request_size: 1250,
            response_size: 1250,
            read_size: 65_536,
            duration_ms: Some(1000),
            bytes: None,
            iterations: None,
            warmup: 0,
            pace: interval_ns.map(|interval_ns| Pace {
                interval_ns,
                burst: 1,
            }),
            server_socket: SocketOptions::default(),
            buffers_fixed: false,
            rate_per_s: None,
        }
    }

    fn limits(per_test: u64, per_client: u64, total: u64) -> Limits {
        Limits {
            max_rate_bps: per_test,
            max_rate_per_client_bps: per_client,
            max_rate_total_bps: total,
            ..Limits::default()
        }
    }

    fn client(s: &str) -> ClientKey {
        ClientKey::of(s.parse::<IpAddr>().unwrap())
    }

    #[test]
    fn a_paced_stream_declares_what_all_its_senders_send() {
        // 1250 bytes every 1 ms = 10 Mbit/s per stream.
        let paced = point(Some(1e6));
        let fwd = test(PatternKind::Stream, Direction::Forward, 4);
        assert!((declared_bps(&fwd, &paced) - 40e6).abs() < 1.0);
        let bidir = test(PatternKind::Stream, Direction::Bidir, 2);
        assert!((declared_bps(&bidir, &paced) - 40e6).abs() < 1.0);
        assert!(declared_bps(&fwd, &point(None)).is_infinite());
        let pp = test(PatternKind::Pingpong, Direction::Forward, 1);
        assert!(declared_bps(&pp, &paced).is_infinite());
    }

    #[test]
    fn the_cap_is_the_smallest_limit_set() {
        assert_eq!(test_cap(&limits(0, 0, 0)), None);
        assert_eq!(
            test_cap(&limits(0, 0, 100)),
            Some((100.0, "--max-rate-total"))
        );
        assert_eq!(test_cap(&limits(50, 80, 100)), Some((50.0, "--max-rate")));
        assert_eq!(
            test_cap(&limits(90, 80, 100)),
            Some((80.0, "--max-rate-per-client"))
        );
        let l = limits(0, 0, 100e6 as u64);
        let fwd = test(PatternKind::Stream, Direction::Forward, 1);
        assert_eq!(
            point_limit(&l, &fwd, &point(None)),
            Some((100e6, "--max-rate-total"))
        );
        let (bps, what) = point_limit(&l, &fwd, &point(Some(1e6))).unwrap();
        assert!((bps - 10e6).abs() < 1.0);
        assert_eq!(what, "its --rate");
        assert_eq!(point_limit(&limits(0, 0, 0), &fwd, &point(None)), None);
    }

    #[test]
    fn reservations_fit_under_the_total_and_each_clients_share_and_come_back() {
        let l = limits(0, 30, 50);
        let b = RateBudget::default();
        let a1 = b.reserve(client("10.0.0.1"), 20.0, &l).unwrap();
        let e = b.reserve(client("10.0.0.1"), 20.0, &l).unwrap_err();
        assert_eq!(e.kind, RefusalKind::Busy);
        assert!(e.message.contains("--max-rate-per-client"), "{e}");
        let c1 = b.reserve(client("10.0.0.2"), 30.0, &l).unwrap();
        let e = b.reserve(client("10.0.0.3"), 1.0, &l).unwrap_err();
        assert_eq!(e.kind, RefusalKind::Busy);
        assert!(e.message.contains("--max-rate-total"), "{e}");
        drop(a1);
        let a2 = b.reserve(client("10.0.0.1"), 20.0, &l).unwrap();
        drop(c1);
        drop(a2);
        assert_eq!(b.total(), 0.0);
    }

    #[test]
    fn a_reservation_comes_back_when_its_point_panics() {
        let l = limits(0, 0, 10);
        let b = RateBudget::default();
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let _held = b.reserve(client("10.0.0.1"), 10.0, &l).unwrap();
            panic!("a point failed");
        }));
        assert!(r.is_err());
        assert!(b.reserve(client("10.0.0.1"), 10.0, &l).is_ok());
    }
}
