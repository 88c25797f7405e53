//! Closed-loop pacing of a UDP load: the sender's rate is corrected, interval by interval,
//! from what the receiver reports having received, so that the load the path carries tracks
//! the target despite drops and end-system limits (a paced sender alone only promises what
//! it hands to its socket).
//!
//! A pure state machine: fed receiver reports, it says the next pacing rate. No sockets, no
//! clock: the caller measures each interval and reports it.

/// What the receiver counted over one interval of the load, and how long that interval was
/// on the sender's clock (from the start of one interval to the start of the next, so that
/// the gaps between intervals count against the load as they do on the path).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReceiverReport {
    pub received_bytes: u64,
    pub elapsed_ns: u64,
}

impl ReceiverReport {
    /// The payload rate the receiver saw, bit/s; None for an interval of no length.
    pub fn bits_per_s(&self) -> Option<f64> {
        (self.elapsed_ns > 0).then(|| self.received_bytes as f64 * 8e9 / self.elapsed_ns as f64)
    }
}

/// Most the pacing rate may rise above the target to make up for what is lost: a path that
/// cannot carry the target is not flooded without bound.
pub const MAX_BOOST: f64 = 2.0;
/// Most one report may change the rate by, up or down: one odd interval (a scheduler
/// stall on a loaded host) does not swing the load.
pub const MAX_STEP: f64 = 2.0;

#[derive(Debug, Clone, PartialEq)]
pub struct ClosedLoopPacer {
    target: f64,
    rate: f64,
}

impl ClosedLoopPacer {
    /// A pacer for `target_bits_per_s` of received payload; it starts by sending at the target.
    pub fn new(target_bits_per_s: f64) -> ClosedLoopPacer {
        ClosedLoopPacer {
            target: target_bits_per_s,
            rate: target_bits_per_s,
        }
    }

    pub fn target(&self) -> f64 {
        self.target
    }

    /// The rate to pace the next interval at, bit/s of payload.
    pub fn rate(&self) -> f64 {
        self.rate
    }

    /// Takes the receiver's report of the interval just sent at [`Self::rate`] and returns the
    /// next rate: the rate scaled by target / received (what got through per bit sent is
    /// assumed to hold for the next interval), at most [`MAX_STEP`] either way, and kept
    /// between target / [`MAX_BOOST`] and target * [`MAX_BOOST`]. A report of nothing
    /// received raises the rate by the largest step; an empty interval changes nothing.
    pub fn report(&mut self, report: ReceiverReport) -> f64 {
        let Some(received) = report.bits_per_s() else {
            return self.rate;
        };
        let factor = if received > 0.0 {
            (self.target / received).clamp(1.0 / MAX_STEP, MAX_STEP)
        } else {
            MAX_STEP
        };
        self.rate = (self.rate * factor).clamp(self.target / MAX_BOOST, self.target * MAX_BOOST);
        self.rate
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An interval of `bits_per_s` received over one second.
    fn got(bits_per_s: u64) -> ReceiverReport {
        ReceiverReport {
            received_bytes: bits_per_s / 8,
            elapsed_ns: 1_000_000_000,
        }
    }

    #[test]
    fn a_receiver_that_gets_the_target_keeps_the_rate() {
        let mut p = ClosedLoopPacer::new(80e6);
        assert_eq!(p.rate(), 80e6);
        assert_eq!(p.report(got(80_000_000)), 80e6);
        assert_eq!(p.report(got(80_000_000)), 80e6);
    }

    #[test]
    fn losses_raise_the_rate_until_the_receiver_sees_the_target() {
        // A path that delivers two thirds of what is sent.
        let mut p = ClosedLoopPacer::new(60e6);
        let delivered = |rate: f64| got((rate * 2.0 / 3.0).round() as u64);
        let r1 = p.report(delivered(p.rate()));
        assert_eq!(r1, 90e6, "60 sent, 40 received: send 60 * 60/40");
        let r2 = p.report(delivered(r1));
        assert_eq!(r2, 90e6, "90 sent, 60 received: on target, hold");
    }

    #[test]
    fn a_receiver_that_gets_too_much_lowers_the_rate() {
        let mut p = ClosedLoopPacer::new(40e6);
        assert_eq!(p.report(got(80_000_000)), 20e6);
    }

    #[test]
    fn steps_and_the_boost_are_bounded() {
        let mut p = ClosedLoopPacer::new(10e6);
        // A tenth got through: one step doubles, no more.
        assert_eq!(p.report(got(1_000_000)), 20e6);
        // Still a tenth: the boost stops at twice the target.
        assert_eq!(p.report(got(2_000_000)), 20e6);
        // Nothing received at all: the rate stays at the cap.
        let nothing = ReceiverReport {
            received_bytes: 0,
            elapsed_ns: 1_000_000_000,
        };
        assert_eq!(p.report(nothing), 20e6);
        // Far too much: one step halves, and the floor is half the target.
        assert_eq!(p.report(got(1_000_000_000)), 10e6);
        assert_eq!(p.report(got(1_000_000_000)), 5e6);
        assert_eq!(p.report(got(1_000_000_000)), 5e6);
    }

    #[test]
    fn an_empty_interval_changes_nothing() {
        let mut p = ClosedLoopPacer::new(10e6);
        let empty = ReceiverReport {
            received_bytes: 123,
            elapsed_ns: 0,
        };
        assert_eq!(p.report(empty), 10e6);
        assert_eq!(empty.bits_per_s(), None);
    }

    #[test]
    fn nothing_received_from_the_start_raises_by_one_step() {
        let mut p = ClosedLoopPacer::new(10e6);
        let nothing = ReceiverReport {
            received_bytes: 0,
            elapsed_ns: 500_000_000,
        };
        assert_eq!(p.report(nothing), 20e6);
    }
}
