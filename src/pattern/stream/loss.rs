//! Accounting of datagrams on the receiver: distinct, duplicated and reordered sequence
//! numbers, and RFC 3550 jitter.

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

/// Counts distinct, duplicated and reordered sequence numbers in O(1) per datagram, with a
/// fixed sliding window of remembered numbers (no allocation after construction).
pub struct SeqTracker {
    bits: Vec<u64>,
    highest: Option<u64>,
    pub unique: u64,
    pub duplicated: u64,
    pub reordered: u64,
}

const WINDOW: u64 = 1 << 20;

impl Default for SeqTracker {
    fn default() -> Self {
        Self::new()
    }
}

impl SeqTracker {
    pub fn new() -> SeqTracker {
        SeqTracker {
            bits: vec![0; (WINDOW / 64) as usize],
            highest: None,
            unique: 0,
            duplicated: 0,
            reordered: 0,
        }
    }

    #[inline]
    fn slot(seq: u64) -> (usize, u64) {
        let i = seq % WINDOW;
        ((i / 64) as usize, 1u64 << (i % 64))
    }

    #[inline]
    pub fn observe(&mut self, seq: u64) {
        match self.highest {
            Some(h) if seq > h => {
                // Forget the numbers that slide out of the window as it advances.
                let gap = seq - h;
                if gap >= WINDOW {
                    self.bits.iter_mut().for_each(|w| *w = 0);
                } else {
                    for s in h + 1..=seq {
                        let (w, b) = Self::slot(s);
                        self.bits[w] &= !b;
                    }
                }
                self.highest = Some(seq);
            }
            Some(h) if h - seq >= WINDOW => {
                // Too old to tell a duplicate from a late original: count it as late.
                self.unique += 1;
                self.reordered += 1;
                return;
            }
            Some(_) => {}
            None => self.highest = Some(seq),
        }
        let (w, b) = Self::slot(seq);
        if self.bits[w] & b != 0 {
            self.duplicated += 1;
            return;
        }
        self.bits[w] |= b;
        self.unique += 1;
        if self.highest.is_some_and(|h| seq < h) {
            self.reordered += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seq_tracker_counts_loss_duplicates_and_reordering() {
        let mut t = SeqTracker::new();
        for s in [0, 1, 3, 2, 2, 5, 4, 7] {
            t.observe(s);
        }
        assert_eq!(t.unique, 7); // 0..=7 without 6
        assert_eq!(t.duplicated, 1); // the second 2
        assert_eq!(t.reordered, 2); // 2 after 3, 4 after 5
    }

    #[test]
    fn seq_tracker_handles_large_gaps() {
        let mut t = SeqTracker::new();
        t.observe(0);
        t.observe(3 * WINDOW);
        t.observe(3 * WINDOW);
        assert_eq!((t.unique, t.duplicated), (2, 1));
    }

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
