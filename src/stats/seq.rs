//! Accounting of numbered packets on a receiver: distinct, duplicated and reordered sequence
//! numbers. One implementation for UDP datagrams (the stream pattern) and raw Ethernet frames
//! (the raw transport).

/// Counts distinct, duplicated and reordered sequence numbers in O(1) per number (amortised:
/// each advance of the highest number forgets as many slots as it advances), with a fixed
/// sliding window of remembered numbers: no allocation after construction.
pub struct SeqTracker {
    bits: Vec<u64>,
    /// Numbers remembered behind the highest one; a power of two.
    window: u64,
    highest: Option<u64>,
    pub unique: u64,
    pub duplicated: u64,
    pub reordered: u64,
}

/// The default window: a million numbers (128 KiB of bits).
const WINDOW: u64 = 1 << 20;

impl Default for SeqTracker {
    fn default() -> Self {
        Self::new()
    }
}

impl SeqTracker {
    pub fn new() -> SeqTracker {
        SeqTracker::with_window(WINDOW)
    }

    /// A tracker that tells duplicates from late originals up to `window` numbers behind the
    /// highest one (rounded up to a power of two, at least 64); it holds `window / 8` bytes.
    pub fn with_window(window: u64) -> SeqTracker {
        let window = window.max(64).next_power_of_two();
        SeqTracker {
            bits: vec![0; (window / 64) as usize],
            window,
            highest: None,
            unique: 0,
            duplicated: 0,
            reordered: 0,
        }
    }

    /// The highest number seen so far.
    pub fn highest(&self) -> Option<u64> {
        self.highest
    }

    /// Numbers missing below the highest one seen, counting from 0: highest + 1 - distinct.
    pub fn missing(&self) -> u64 {
        self.highest
            .map_or(0, |h| h.saturating_add(1).saturating_sub(self.unique))
    }

    #[inline]
    fn slot(&self, seq: u64) -> (usize, u64) {
        let i = seq & (self.window - 1);
        ((i / 64) as usize, 1u64 << (i % 64))
    }

    /// Accounts one number; false when it is a duplicate of one already seen.
    #[inline]
    pub fn observe(&mut self, seq: u64) -> bool {
        match self.highest {
            Some(h) if seq > h => {
                // Forget the numbers that slide out of the window as it advances.
                let gap = seq - h;
                if gap >= self.window {
                    self.bits.iter_mut().for_each(|w| *w = 0);
                } else {
                    for s in h + 1..=seq {
                        let (w, b) = self.slot(s);
                        self.bits[w] &= !b;
                    }
                }
                self.highest = Some(seq);
            }
            Some(h) if h - seq >= self.window => {
                // Too old to tell a duplicate from a late original: count it as late.
                self.unique += 1;
                self.reordered += 1;
                return true;
            }
            Some(_) => {}
            None => self.highest = Some(seq),
        }
        let (w, b) = self.slot(seq);
        if self.bits[w] & b != 0 {
            self.duplicated += 1;
            return false;
        }
        self.bits[w] |= b;
        self.unique += 1;
        if self.highest.is_some_and(|h| seq < h) {
            self.reordered += 1;
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seq_tracker_counts_loss_duplicates_and_reordering() {
        let mut t = SeqTracker::new();
        let fresh: Vec<bool> = [0, 1, 3, 2, 2, 5, 4, 7]
            .into_iter()
            .map(|s| t.observe(s))
            .collect();
        assert_eq!(fresh, [true, true, true, true, false, true, true, true]);
        assert_eq!(t.unique, 7); // 0..=7 without 6
        assert_eq!(t.duplicated, 1); // the second 2
        assert_eq!(t.reordered, 2); // 2 after 3, 4 after 5
        assert_eq!(t.highest(), Some(7));
        assert_eq!(t.missing(), 1); // 6
    }

    #[test]
    fn seq_tracker_handles_large_gaps() {
        let mut t = SeqTracker::new();
        t.observe(0);
        t.observe(3 * WINDOW);
        t.observe(3 * WINDOW);
        assert_eq!((t.unique, t.duplicated), (2, 1));
        assert_eq!(t.missing(), 3 * WINDOW - 1);
    }

    #[test]
    fn a_small_window_forgets_what_slid_out_of_it() {
        let mut t = SeqTracker::with_window(100); // rounded up to 128
        for s in 0..200 {
            assert!(t.observe(s));
        }
        // 100 is inside the window: a duplicate. 50 is not: counted late, not duplicated.
        assert!(!t.observe(100));
        assert!(t.observe(50));
        assert_eq!((t.unique, t.duplicated, t.reordered), (201, 1, 1));
        // 300 takes the slot that 172 had: forgotten as the window moved, so it is new;
        // 180 is still inside the window (173..=300) and remembered.
        assert!(t.observe(300));
        assert!(!t.observe(180));
        assert!(t.observe(250));
        assert_eq!((t.unique, t.duplicated, t.reordered), (203, 2, 2));
    }

    #[test]
    fn nothing_seen_is_nothing_missing() {
        let t = SeqTracker::with_window(0);
        assert_eq!((t.highest(), t.missing(), t.window), (None, 0, 64));
    }
}
