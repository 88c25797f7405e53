//! Think time: a requester that waits between transactions, as a client does that renders
//! what it got before it asks for more. The wait sleeps, so that a long think does not hold a
//! CPU, and spins only its last [`SPIN_TAIL`], which the scheduler's wake-up latency would
//! otherwise add to every wait.

use std::time::{Duration, Instant};

/// How much of a wait is spent spinning rather than asleep: about one wake-up latency.
pub const SPIN_TAIL: Duration = Duration::from_micros(50);

/// Waits until `until` and returns the instant the wait ended (never before `until`; later by
/// however long the last clock read or a preemption took).
pub fn wait_until(until: Instant) -> Instant {
    let now = Instant::now();
    if let Some(left) = until.checked_duration_since(now) {
        if left > SPIN_TAIL {
            std::thread::sleep(left - SPIN_TAIL);
        }
    }
    loop {
        let now = Instant::now();
        if now >= until {
            return now;
        }
        std::hint::spin_loop();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_wait_never_ends_before_its_instant() {
        let from = Instant::now();
        for micros in [0u64, 10, 200] {
            let until = from + Duration::from_micros(micros);
            assert!(wait_until(until) >= until);
        }
        let past = Instant::now();
        assert!(
            wait_until(past) >= past,
            "an instant already past ends the wait at once"
        );
    }
}
