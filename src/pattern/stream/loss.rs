//! RFC 3550 jitter of datagrams on the receiver (their sequence numbers are accounted by
//! [`crate::stats::SeqTracker`]).

/// RFC 3550 interarrival jitter: J += (|D| - J) / 16 over transit-time differences.
#[derive(Default)]
pub(super) struct Jitter {
    prev_transit: Option<i128>,
    pub(super) value_ns: f64,
}

impl Jitter {
    #[inline]
    pub(super) fn observe(&mut self, sent_ns: u64, arrived_ns: u64) {
        let transit = arrived_ns as i128 - sent_ns as i128;
        if let Some(prev) = self.prev_transit {
            let d = (transit - prev).unsigned_abs() as f64;
            self.value_ns += (d - self.value_ns) / 16.0;
        }
        self.prev_transit = Some(transit);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jitter_of_constant_transit_is_zero_and_grows_with_variation() {
        let mut j = Jitter::default();
        for i in 0..100u64 {
            j.observe(i * 1000, i * 1000 + 500);
        }
        assert_eq!(j.value_ns, 0.0);
        j.observe(100_000, 100_000 + 500 + 1600);
        assert!((j.value_ns - 100.0).abs() < 1e-9);
    }
}
