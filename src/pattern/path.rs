//! Path timing's records (`run --path-timing`): per stamped round trip, the application's own
//! CLOCK_REALTIME readings around its system calls and the kernel's software stamps, on each
//! end. The requester and the responder stamp the same transactions, chosen by sequence
//! number ([`stamped`]), so that every other timed round trip goes unstamped and the cost of
//! stamping is measured paired inside the point. The plan pairs the two ends' records and
//! splits each round trip into stages.

use serde::{Deserialize, Serialize};

use crate::transport::{TxKind, TxStamp};

/// Most stamped round trips one point keeps per end (the first ones; every other timed round
/// trip is stamped, so they span the first twice as many timed ones). The responder's records
/// come back over the control connection, whose frames hold at most 1 MiB: 12 000 records of
/// 64 hex digits each fit with room to spare.
pub const MAX_STAMPED: u64 = 12_000;

/// Whether the transaction of sequence number `seq` (1 for the first, warm-up included) is
/// stamped: every other timed one, the first timed one included, up to [`MAX_STAMPED`]. Both
/// ends decide by it, so that the responder stamps exactly the requester's stamped ones.
#[inline]
pub fn stamped(seq: u64, warmup: u64) -> bool {
    match seq.checked_sub(warmup + 1) {
        Some(j) => j % 2 == 0 && j / 2 < MAX_STAMPED,
        None => false,
    }
}

/// Whether the transaction of sequence number `seq` lies beyond the ones path timing covers.
#[inline]
pub fn beyond_cap(seq: u64, warmup: u64) -> bool {
    seq.checked_sub(warmup + 1)
        .is_some_and(|j| j >= 2 * MAX_STAMPED)
}

/// Transmit stamps of one message as they come back from the error queue: its OPT_ID key
/// (learnt from its first stamp) and the stamps by kind, 0 where none came.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TxPart {
    pub key: Option<u32>,
    /// TX_SCHED, TX_SOFTWARE, TX_ACK: CLOCK_REALTIME ns, 0 when absent.
    pub tx: [i64; 3],
}

fn slot(kind: TxKind) -> usize {
    match kind {
        TxKind::Sched => 0,
        TxKind::Software => 1,
        TxKind::Ack => 2,
    }
}

/// Hands transmit stamps to the messages they belong to. A stamp goes to a recent message
/// whose key it carries and that lacks a stamp of its kind (a late ACK of the message before),
/// otherwise to the newest message, which learns its key from it. Where the kernel gives no
/// key (every stamp 0: a socket without OPT_ID) this still holds: an earlier message already
/// has its own stamps of each kind but a late one.
#[derive(Debug, Default)]
pub struct Attribution {
    /// Stamps that fitted no message (a key of neither the newest nor a recent message).
    pub unmatched: u64,
}

/// How many messages before the newest may still receive stamps.
const RECENT: usize = 4;

impl Attribution {
    /// Gives each of `stamps` to one of `parts` (the messages stamped so far, the newest
    /// last).
    pub fn assign(&mut self, stamps: &[TxStamp], parts: &mut [TxPart]) {
        let Some(newest) = parts.len().checked_sub(1) else {
            self.unmatched += stamps.len() as u64;
            return;
        };
        let oldest = newest.saturating_sub(RECENT);
        'stamps: for s in stamps {
            let k = slot(s.kind);
            for p in parts[oldest..newest].iter_mut().rev() {
                if p.key == Some(s.key) && p.tx[k] == 0 {
                    p.tx[k] = s.ns;
                    continue 'stamps;
                }
            }
            let p = &mut parts[newest];
            if p.key.is_none_or(|key| key == s.key) && p.tx[k] == 0 {
                p.key = Some(s.key);
                p.tx[k] = s.ns;
            } else {
                self.unmatched += 1;
            }
        }
    }
}

/// The requester's record of one stamped round trip; times CLOCK_REALTIME ns, 0 when absent.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct ClientRecord {
    pub seq: u64,
    /// The round trip by the application's monotonic clock; 0 when its response was lost.
    pub rtt_ns: u64,
    /// Read just after the round trip's clock started, before the request's send call.
    pub send_call: i64,
    /// The response's arrival (RX_SOFTWARE).
    pub arrival: i64,
    /// Read just after the response's read returned, before the round trip's clock stopped.
    pub read_return: i64,
    pub tx: TxPart,
}

/// What the requester kept for path timing.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ClientPath {
    pub records: Vec<ClientRecord>,
    /// The unstamped timed round trips' times (interleaved with the stamped), nanoseconds.
    pub unstamped_rtt: Vec<u64>,
    /// Time spent reading the error queue after stamped round trips, nanoseconds, and how
    /// many such reads.
    pub read_ns: u64,
    pub reads: u64,
    /// Timed round trips went on beyond the ones covered ([`MAX_STAMPED`]).
    pub cut: bool,
    /// Stamps that fitted no message, or found no room.
    pub unmatched_stamps: u64,
}

impl ClientPath {
    /// Room for every record before the timed phase: no allocation inside it.
    pub fn new() -> ClientPath {
        let n = usize::try_from(MAX_STAMPED).unwrap_or(0);
        ClientPath {
            records: Vec::with_capacity(n),
            unstamped_rtt: Vec::with_capacity(n),
            ..ClientPath::default()
        }
    }
}

/// The responder's record of one stamped request; times CLOCK_REALTIME ns, 0 when absent.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct ServerRecord {
    pub seq: u64,
    /// The request's arrival (RX_SOFTWARE).
    pub arrival: i64,
    /// Read just after the request's read returned.
    pub read_return: i64,
    /// Read just before the response's send call.
    pub send_call: i64,
    pub tx: TxPart,
}

/// Bytes of one encoded [`ServerRecord`]: the sequence number and the read's return, then the
/// other four times as signed 32-bit offsets from it (i32::MIN: absent or beyond 2 s).
const RECORD_BYTES: usize = 32;
const ABSENT: i32 = i32::MIN;

/// The responder's records as they travel in its point report.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ServerPath {
    /// The server kernel's boot id: the same as the client's, both read one clock.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub boot_id: Option<String>,
    /// The records, [`RECORD_BYTES`] each, little-endian, in hex.
    pub records: String,
    /// Stamped requests went on beyond the records kept.
    #[serde(default)]
    pub cut: bool,
    #[serde(default)]
    pub unmatched_stamps: u64,
}

impl ServerPath {
    pub fn encode(records: &[ServerRecord]) -> String {
        let mut out = String::with_capacity(records.len() * RECORD_BYTES * 2);
        for r in records {
            let base = r.read_return;
            let off = |t: i64| -> i32 {
                if t == 0 {
                    return ABSENT;
                }
                i32::try_from(t - base)
                    .ok()
                    .filter(|d| *d != ABSENT)
                    .unwrap_or(ABSENT)
            };
            let mut b = [0u8; RECORD_BYTES];
            b[..8].copy_from_slice(&r.seq.to_le_bytes());
            b[8..16].copy_from_slice(&base.to_le_bytes());
            for (i, t) in [r.arrival, r.send_call, r.tx.tx[0], r.tx.tx[1]]
                .into_iter()
                .enumerate()
            {
                b[16 + 4 * i..20 + 4 * i].copy_from_slice(&off(t).to_le_bytes());
            }
            for byte in b {
                out.push(char::from(HEX[usize::from(byte >> 4)]));
                out.push(char::from(HEX[usize::from(byte & 15)]));
            }
        }
        out
    }

    /// The records back; None when the text is not whole records of hex digits.
    pub fn decode(&self) -> Option<Vec<ServerRecord>> {
        let text = self.records.as_bytes();
        if !text.len().is_multiple_of(RECORD_BYTES * 2) {
            return None;
        }
        let digit = |c: u8| -> Option<u8> { (c as char).to_digit(16).map(|d| d as u8) };
        let mut out = Vec::with_capacity(text.len() / (RECORD_BYTES * 2));
        for chunk in text.chunks(RECORD_BYTES * 2) {
            let mut b = [0u8; RECORD_BYTES];
            for (i, pair) in chunk.chunks(2).enumerate() {
                b[i] = digit(pair[0])? << 4 | digit(pair[1])?;
            }
            let seq = u64::from_le_bytes(b[..8].try_into().ok()?);
            let base = i64::from_le_bytes(b[8..16].try_into().ok()?);
            let mut t = [0i64; 4];
            for (i, v) in t.iter_mut().enumerate() {
                let d = i32::from_le_bytes(b[16 + 4 * i..20 + 4 * i].try_into().ok()?);
                *v = if d == ABSENT { 0 } else { base + i64::from(d) };
            }
            out.push(ServerRecord {
                seq,
                arrival: t[0],
                read_return: base,
                send_call: t[1],
                tx: TxPart {
                    key: None,
                    tx: [t[2], t[3], 0],
                },
            });
        }
        Some(out)
    }
}

const HEX: &[u8; 16] = b"0123456789abcdef";

#[cfg(test)]
mod tests {
    use super::*;

    fn st(kind: TxKind, key: u32, ns: i64) -> TxStamp {
        TxStamp { kind, key, ns }
    }

    /// Every other timed transaction is stamped, from the first timed one, none in warm-up,
    /// and none beyond the cap.
    #[test]
    fn every_other_timed_transaction_is_stamped_up_to_the_cap() {
        let w = 10;
        let s: Vec<u64> = (1..=16).filter(|&q| stamped(q, w)).collect();
        assert_eq!(s, vec![11, 13, 15]);
        let last = w + 2 * MAX_STAMPED - 1;
        assert!(stamped(last, w));
        assert!(!stamped(last + 2, w));
        assert!(!beyond_cap(last + 1, w) && beyond_cap(last + 2, w));
    }

    /// Stamps go to their own message by key, a late ACK to the message before; without
    /// keys (all 0) the newest message still gets its own.
    #[test]
    fn stamps_go_to_their_messages_by_key_and_late_ones_to_the_message_before() {
        let mut a = Attribution::default();
        let mut parts = vec![TxPart::default()];
        a.assign(
            &[st(TxKind::Sched, 1023, 10), st(TxKind::Software, 1023, 11)],
            &mut parts,
        );
        parts.push(TxPart::default());
        a.assign(
            &[
                st(TxKind::Ack, 1023, 30),
                st(TxKind::Sched, 3071, 40),
                st(TxKind::Software, 3071, 41),
            ],
            &mut parts,
        );
        assert_eq!(parts[0].tx, [10, 11, 30]);
        assert_eq!(parts[1].tx, [40, 41, 0]);
        assert_eq!(a.unmatched, 0);
        // A stamp of a key no message has while the newest has its own: unmatched.
        a.assign(&[st(TxKind::Sched, 99, 50)], &mut parts);
        assert_eq!(a.unmatched, 1);
        // No keys at all.
        let mut b = Attribution::default();
        let mut p = vec![TxPart::default()];
        b.assign(
            &[st(TxKind::Sched, 0, 1), st(TxKind::Software, 0, 2)],
            &mut p,
        );
        p.push(TxPart::default());
        b.assign(
            &[st(TxKind::Sched, 0, 5), st(TxKind::Software, 0, 6)],
            &mut p,
        );
        assert_eq!((p[0].tx, p[1].tx, b.unmatched), ([1, 2, 0], [5, 6, 0], 0));
    }

    /// The responder's records cross the control connection exactly, absent times included.
    #[test]
    fn server_records_round_trip_through_their_encoding() {
        let base = 1_700_000_000_123_456_789;
        let recs = vec![
            ServerRecord {
                seq: 11,
                arrival: base - 5_000,
                read_return: base,
                send_call: base + 700,
                tx: TxPart {
                    key: None,
                    tx: [base + 2_000, base + 2_500, 0],
                },
            },
            ServerRecord {
                seq: 13,
                arrival: 0,
                read_return: base + 9,
                send_call: base + 10,
                tx: TxPart {
                    key: None,
                    tx: [base + 3_000_000_000, 0, 0],
                },
            },
        ];
        let p = ServerPath {
            records: ServerPath::encode(&recs),
            ..ServerPath::default()
        };
        assert_eq!(p.records.len(), 2 * 64);
        let back = p.decode().unwrap();
        assert_eq!(back[0], recs[0]);
        // Absent stays absent; an offset beyond 2 s is dropped rather than wrapped.
        assert_eq!(back[1].arrival, 0);
        assert_eq!(back[1].tx.tx, [0, 0, 0]);
        assert!(ServerPath {
            records: "zz".into(),
            ..ServerPath::default()
        }
        .decode()
        .is_none());
    }
}
