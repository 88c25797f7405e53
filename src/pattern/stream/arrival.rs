//! The datagram receiver's clock: the kernel's arrival stamps (SO_TIMESTAMPNS, CLOCK_REALTIME)
//! put on the monotonic clock that the rest of the run keeps. A receiver that times its
//! phase by when it got round to reading starts (and ends) late by however long the datagrams
//! waited in its socket buffer; with a buffer of up to 4 MiB a raw receiver held off its CPU
//! for a moment read 109% of a lab link's goodput. Stamped, the phase runs from the first
//! timed datagram's arrival to the last's, whenever they were read.

use std::time::{Duration, Instant};

use crate::sys::MAX_STAMP_AGE;

/// Maps kernel arrival stamps to `Instant`s with one reading of both clocks taken when the
/// receiver starts: every stamp of the phase moves by the same offset, so the phase's length
/// is the difference of its two stamps, both ends in one clock domain.
pub(super) struct StampClock {
    anchor: Instant,
    /// CLOCK_REALTIME at `anchor`.
    anchor_wall: Duration,
    /// The latest arrival mapped so far: arrivals never go back in time.
    last: Option<Instant>,
}

impl StampClock {
    pub(super) fn new() -> StampClock {
        // Both clocks at one moment (a preemption between two plain reads would shift every
        // stamp of the phase by it).
        let (anchor, wall) = crate::sys::monotonic_and_wall();
        StampClock::at(anchor, wall)
    }

    fn at(anchor: Instant, anchor_wall: Duration) -> StampClock {
        StampClock {
            anchor,
            anchor_wall,
            last: None,
        }
    }

    /// The arrival of a datagram read at `now` whose kernel stamp is `stamp` (`now` when it
    /// has none). Clamped at both ends: never after `now` (it was read then), never before the
    /// previous arrival mapped, nor more than [`MAX_STAMP_AGE`] before `now` (a stamp from a
    /// wall clock that was stepped, or garbage, moves the phase's end by no more than that).
    #[inline]
    pub(super) fn map(&mut self, stamp: Option<Duration>, now: Instant) -> Instant {
        let t = match stamp {
            None => now,
            Some(s) if s >= self.anchor_wall => {
                self.anchor.checked_add(s - self.anchor_wall).unwrap_or(now)
            }
            Some(s) => self
                .anchor
                .checked_sub(self.anchor_wall - s)
                .unwrap_or(self.anchor),
        };
        let mut lo = now.checked_sub(MAX_STAMP_AGE).unwrap_or(now);
        if let Some(last) = self.last {
            lo = lo.max(last.min(now));
        }
        let t = t.clamp(lo, now);
        self.last = Some(t);
        t
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    #[test]
    fn stamps_keep_their_differences_on_the_monotonic_clock() {
        let anchor = Instant::now();
        let wall = Duration::from_secs(1_700_000_000);
        let mut c = StampClock::at(anchor, wall);
        // Read long after both arrived (a receiver held off its CPU): the read time is no
        // part of either arrival, and the phase between them is exactly 7 ms.
        let read = anchor + 500 * MS;
        let a = c.map(Some(wall + 10 * MS), read);
        let b = c.map(Some(wall + 17 * MS), read);
        assert_eq!(a, anchor + 10 * MS);
        assert_eq!(b - a, 7 * MS);
        // Stamped before the anchor (queued before the receiver started): earlier, not now.
        let mut c = StampClock::at(anchor + 100 * MS, wall);
        assert_eq!(c.map(Some(wall - 30 * MS), read), anchor + 70 * MS);
    }

    #[test]
    fn arrivals_are_clamped_at_both_ends() {
        let anchor = Instant::now();
        let wall = Duration::from_secs(1_700_000_000);
        let mut c = StampClock::at(anchor, wall);
        let now = anchor + 50 * MS;
        // From the future (the wall clock stepped back): read now, so arrived by now.
        assert_eq!(c.map(Some(wall + 3600 * 1000 * MS), now), now);
        // Older than the previous arrival: not before it.
        assert_eq!(c.map(Some(wall), now + MS), now);
        // Garbage (0) or far older than any buffer holds: at most MAX_STAMP_AGE before now.
        let mut c = StampClock::at(anchor, wall);
        let later = anchor + MAX_STAMP_AGE + 5 * MS;
        assert_eq!(c.map(Some(Duration::ZERO), later), later - MAX_STAMP_AGE);
        // No stamp: the read time.
        let mut c = StampClock::at(anchor, wall);
        assert_eq!(c.map(None, now), now);
    }
}
