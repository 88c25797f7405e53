//! Reassembly: frames back into messages, counting lost, reordered, duplicate and late frames.

use super::wire::Header;
use crate::stats::SeqTracker;
use crate::transport::LinkCounters;

/// Frame numbers the receive side remembers behind the highest one, to tell a duplicate from
/// a late original: far more frames than a socket buffer holds. 8 KiB per connection.
const SEQ_WINDOW: u64 = 1 << 16;

/// A frame's 32-bit sequence number on a 64-bit line that does not wrap: the number nearest
/// `highest` (within 2^31 either side) whose low 32 bits are `seq`. Never below 0.
fn extend_seq(highest: Option<u64>, seq: u32) -> u64 {
    let Some(h) = highest else {
        return u64::from(seq);
    };
    let delta = seq.wrapping_sub(h as u32) as i32;
    h.saturating_add_signed(i64::from(delta))
}

/// The receive side's account of one connection's frames: O(1) per frame, no allocation
/// after construction.
struct FrameCounts {
    /// Sequence numbers counted from the sender's first, extended to 64 bits.
    seqs: SeqTracker,
    /// The sender's first sequence number.
    first: u32,
    late: u64,
    incomplete: u64,
}

impl FrameCounts {
    fn new(first: u32) -> FrameCounts {
        FrameCounts {
            seqs: SeqTracker::with_window(SEQ_WINDOW),
            first,
            late: 0,
            incomplete: 0,
        }
    }

    /// Accounts a frame's sequence number; false when that frame was here already.
    #[inline]
    fn observe(&mut self, seq: u32) -> bool {
        let n = extend_seq(self.seqs.highest(), seq.wrapping_sub(self.first));
        self.seqs.observe(n)
    }

    /// The counts so far; `reassembling`: a message still misses frames, and counts as
    /// incomplete (no frame of it will be read any more when the counters are read).
    fn counters(&self, reassembling: bool) -> LinkCounters {
        LinkCounters {
            received: self.seqs.unique,
            lost: self.seqs.missing(),
            loss_ratio: 0.0,
            reordered: self.seqs.reordered,
            duplicated: self.seqs.duplicated,
            late: self.late,
            messages_incomplete: self.incomplete + u64::from(reassembling),
        }
        .with_loss_ratio()
    }
}

/// Copies a one-frame message of `length` bytes into `buf`; the length handed out.
fn deliver_whole(body: &[u8], length: usize, buf: &mut [u8]) -> usize {
    let k = body.len().min(length).min(buf.len());
    buf[..k].copy_from_slice(&body[..k]);
    length.min(buf.len())
}

/// The message being reassembled.
struct Partial {
    message: u32,
    fragments: u16,
    got: u16,
    length: usize,
}

/// One connection's receive side: the message being reassembled, the newest message number
/// seen, and the frame counts.
pub(super) struct Reassembly {
    /// Message bytes per frame: where a fragment's bytes go in its message.
    payload: usize,
    partial: Option<Partial>,
    /// The newest message number seen: older frames arrive late (and are dropped unless
    /// they are a whole one-frame message).
    newest: Option<u32>,
    frames: FrameCounts,
}

impl Reassembly {
    pub(super) fn new(payload: usize) -> Reassembly {
        Reassembly {
            payload,
            partial: None,
            newest: None,
            // send() numbers a connection's frames from 0.
            frames: FrameCounts::new(0),
        }
    }

    /// Takes a data frame of this connection (its header and the bytes after it) into `buf`;
    /// Some(length) when it completed a message.
    pub(super) fn take(&mut self, h: Header, body: &[u8], buf: &mut [u8]) -> Option<usize> {
        // A duplicate adds nothing (and must not count twice towards its message).
        if !self.frames.observe(h.seq) {
            return None;
        }
        let length = h.length as usize;
        // A frame of a message older than the newest one seen came late. A one-frame message
        // is whole and is delivered, as a late UDP datagram is (the pattern counts it as
        // reordered), unless a reassembly in progress owns the buffer. A frame of a longer
        // message is dropped: its message was given up when a later one began (no reordering
        // across messages is repaired, as AAL5 would not either).
        if let Some(newest) = self.newest {
            if (h.message.wrapping_sub(newest) as i32) < 0 {
                if h.fragments == 1 && self.partial.is_none() {
                    return Some(deliver_whole(body, length, buf));
                }
                self.frames.late += 1;
                return None;
            }
        }
        self.newest = Some(h.message);
        if h.fragments == 1 {
            if self.partial.take().is_some() {
                self.frames.incomplete += 1;
            }
            return Some(deliver_whole(body, length, buf));
        }
        // A frame of another message ends the one in progress: it is lost whole.
        if self.partial.as_ref().is_none_or(|p| p.message != h.message) {
            if self.partial.is_some() {
                self.frames.incomplete += 1;
            }
            self.partial = Some(Partial {
                message: h.message,
                fragments: h.fragments,
                got: 0,
                length,
            });
        }
        let p = self.partial.as_mut()?;
        let at = usize::from(h.fragment) * self.payload;
        if at < buf.len() {
            let k = body.len().min(buf.len() - at);
            buf[at..at + k].copy_from_slice(&body[..k]);
        }
        p.got += 1;
        if p.got == p.fragments {
            let length = p.length;
            self.partial = None;
            return Some(length.min(buf.len()));
        }
        None
    }

    /// The counts so far, a message still being reassembled counted as incomplete.
    pub(super) fn counters(&self) -> LinkCounters {
        self.frames.counters(self.partial.is_some())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frame_numbers_extend_across_the_wrap_of_32_bits() {
        assert_eq!(extend_seq(None, 5), 5);
        assert_eq!(extend_seq(Some(10), 12), 12);
        assert_eq!(extend_seq(Some(10), 7), 7);
        let top = u64::from(u32::MAX);
        assert_eq!(extend_seq(Some(top - 1), 2), top + 3, "past the wrap");
        assert_eq!(
            extend_seq(Some(top + 3), u32::MAX),
            top,
            "late, from before the wrap"
        );
        assert_eq!(
            extend_seq(Some(5 << 32), 1),
            (5 << 32) + 1,
            "the fifth wrap"
        );
        assert_eq!(extend_seq(Some(3), u32::MAX), 0, "never below 0");
    }

    /// Feeds frame numbers to counts that start at `first`; returns which were new.
    fn count(first: u32, seqs: &[u32]) -> (FrameCounts, Vec<bool>) {
        let mut c = FrameCounts::new(first);
        let fresh = seqs.iter().map(|&s| c.observe(s)).collect();
        (c, fresh)
    }

    #[test]
    fn frames_count_gaps_reordering_and_duplicates() {
        let (c, fresh) = count(0, &[0, 1, 3, 2, 2, 6, 4, 9]);
        assert_eq!(fresh, [true, true, true, true, false, true, true, true]);
        let k = c.counters(false);
        assert_eq!(k.received, 7);
        assert_eq!(k.lost, 3, "5, 7 and 8");
        assert_eq!(k.reordered, 2, "2 after 3, 4 after 6");
        assert_eq!(k.duplicated, 1);
        assert!((k.loss_ratio - 0.3).abs() < 1e-12);
        // Lost first frames are gaps too: the sender's numbers start at 0.
        let (c, _) = count(0, &[2, 3]);
        assert_eq!((c.counters(false).received, c.counters(false).lost), (2, 2));
        let (c, _) = count(0, &[]);
        assert_eq!(c.counters(false), LinkCounters::default());
        assert_eq!(c.counters(true).messages_incomplete, 1);
    }

    #[test]
    fn frames_count_across_the_wrap_of_their_numbers() {
        let first = u32::MAX - 2;
        let seqs = [first, u32::MAX - 1, 0, u32::MAX, 2, 2, 4];
        let (c, fresh) = count(first, &seqs);
        assert_eq!(fresh, [true, true, true, true, true, false, true]);
        let k = c.counters(false);
        // Offsets 0 1 3 2 5 5 7: 4 and 6 (1 and 3 on the wire) are missing.
        assert_eq!(
            (k.received, k.lost, k.reordered, k.duplicated),
            (6, 2, 1, 1)
        );
    }
}
