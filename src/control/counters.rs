//! The server's own counters for `serve --metrics`: sessions, refusals by kind, and the
//! payload bytes its data connections moved. Each is added to once per session, refusal or
//! finished point (from the figures the point reports anyway), never per message, so that
//! the data path pays nothing for them.

use std::sync::atomic::{AtomicU64, Ordering};

use super::protocol::ServerMeasurement;
use super::refusal::RefusalKind;
use crate::pattern::Role;

#[derive(Debug, Default)]
pub struct ServerCounters {
    sessions_active: AtomicU64,
    sessions_total: AtomicU64,
    /// In the order of [`RefusalKind::ALL`].
    refusals: [AtomicU64; RefusalKind::ALL.len()],
    bytes_received: AtomicU64,
    bytes_sent: AtomicU64,
}

/// The counters at one moment.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CountersNow {
    pub sessions_active: u64,
    pub sessions_total: u64,
    /// Every kind, by its wire name (`busy`, `not_authorised`, ...), zeros included.
    pub refusals: Vec<(&'static str, u64)>,
    pub bytes_received: u64,
    pub bytes_sent: u64,
}

/// A session being served: counted active until dropped.
pub struct SessionCount<'a>(&'a ServerCounters);

impl Drop for SessionCount<'_> {
    fn drop(&mut self) {
        self.0.sessions_active.fetch_sub(1, Ordering::Relaxed);
    }
}

impl ServerCounters {
    /// An admitted session begins; it ends when the guard drops.
    pub fn session(&self) -> SessionCount<'_> {
        self.sessions_total.fetch_add(1, Ordering::Relaxed);
        self.sessions_active.fetch_add(1, Ordering::Relaxed);
        SessionCount(self)
    }

    /// A connection refused at admission, or a session ended by a refusal.
    pub fn refused(&self, kind: RefusalKind) {
        if let Some(i) = RefusalKind::ALL.iter().position(|k| *k == kind) {
            self.refusals[i].fetch_add(1, Ordering::Relaxed);
        }
    }

    /// A point finished: the payload bytes its data connections moved, warm-up included,
    /// as its workers counted them.
    pub fn point(&self, m: &ServerMeasurement) {
        let (mut received, mut sent) = (0u64, 0u64);
        for s in &m.streams {
            match s.role {
                Some(Role::Sender) => sent = sent.saturating_add(s.bytes_total),
                Some(Role::Receiver) => received = received.saturating_add(s.bytes_total),
                _ => {}
            }
        }
        for r in &m.responders {
            received = received.saturating_add(r.bytes_received);
            sent = sent.saturating_add(r.bytes_sent);
        }
        self.bytes_received.fetch_add(received, Ordering::Relaxed);
        self.bytes_sent.fetch_add(sent, Ordering::Relaxed);
    }

    pub fn now(&self) -> CountersNow {
        CountersNow {
            sessions_active: self.sessions_active.load(Ordering::Relaxed),
            sessions_total: self.sessions_total.load(Ordering::Relaxed),
            refusals: RefusalKind::ALL
                .iter()
                .zip(&self.refusals)
                .map(|(k, n)| (k.label(), n.load(Ordering::Relaxed)))
                .collect(),
            bytes_received: self.bytes_received.load(Ordering::Relaxed),
            bytes_sent: self.bytes_sent.load(Ordering::Relaxed),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pattern::exchange::ResponderStats;

    #[test]
    fn sessions_refusals_and_bytes_add_up_exactly() {
        let c = ServerCounters::default();
        {
            let _a = c.session();
            let _b = c.session();
            assert_eq!(c.now().sessions_active, 2);
        }
        c.refused(RefusalKind::NotAuthorised);
        c.refused(RefusalKind::Busy);
        c.refused(RefusalKind::Busy);
        let m = ServerMeasurement {
            responders: vec![ResponderStats {
                bytes_received: 640,
                bytes_sent: 6400,
                ..ResponderStats::default()
            }],
            ..ServerMeasurement::default()
        };
        c.point(&m);
        c.point(&m);
        let now = c.now();
        assert_eq!(now.sessions_active, 0);
        assert_eq!(now.sessions_total, 2);
        assert_eq!((now.bytes_received, now.bytes_sent), (1280, 12800));
        let kinds: Vec<_> = now.refusals.iter().filter(|(_, n)| *n > 0).collect();
        assert_eq!(kinds, [&("busy", 2), &("not_authorised", 1)]);
        assert_eq!(now.refusals.len(), RefusalKind::ALL.len());
    }
}
