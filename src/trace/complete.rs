//! Is every data frame in the file? The senders' own counts (TCP_INFO `tcpi_data_segs_out`)
//! against the capture's. Pure code.
//!
//! The kernel counts a data segment when TCP hands it to IP (`__tcp_transmit_skb`), in MSS
//! units: a GSO/TSO super-segment of n bytes counts ceil(n / m), the number of segments it
//! will be cut into at the MSS m of that moment (its `gso_size`), and a retransmission counts
//! again. A capture on the sender's host sees each such frame once as it leaves (the packet
//! tap is after the queueing discipline, before the driver): on loopback and veth the
//! super-segment whole, elsewhere whole or already cut, which counts the same. The capture
//! reads each frame's `gso_size` from its virtio-net header, so it counts as the kernel did;
//! without it, by the senders' final MSS, which counts low where the MSS was smaller earlier
//! (Linux bounds it by half the largest window the peer has advertised, which on loopback
//! cuts the first frames at about 32 KiB). So the two counts are equal exactly when the
//! capture lost nothing, with two exceptions where they may differ without a lost capture: a
//! frame dropped by the sender's own queueing discipline before the tap (counted by TCP,
//! never seen; TCP sends it again, and that copy is seen and counted again), and a sender
//! whose count was read before everything it sent was acknowledged (said in the note). A
//! capture on the receiver's host sees what arrived, after GRO; it is not checked.

use std::net::SocketAddr;

use crate::model::socket::SentSegments;

use super::segment::Segment;

/// Which ends' sending the capture sees as it leaves: those on the capture's host.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OnHost {
    pub client: bool,
    pub server: bool,
}

/// The check's outcome, as the trace summary records it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Completeness {
    pub sender_data_segments: Option<u64>,
    pub captured_data_segments: Option<u64>,
    pub missing_data_segments: Option<i64>,
    pub note: Option<String>,
}

/// One data connection's sender as the point reported it: whether it is the server's end,
/// and its final count (None from a peer that does not report one).
#[derive(Debug, Clone, Copy)]
pub struct Sender {
    pub server: bool,
    pub sent: Option<SentSegments>,
}

/// Checks `segments` (the capture's, in any order) against `senders`. `data_port` is the
/// server's data port: an end with that port is the server's. Only the connections whose
/// data sender (the end that sent more payload) is on the capture's host (`on_host`) count,
/// and of those only the sender's frames.
///
/// `gso_sizes` (aligned with `segments`), when the capture has them, give each frame's count
/// exactly: ceil(payload / its GSO size), 1 without one. Without them each frame counts
/// ceil(payload / MSS) with the senders' final MSS, which counts low where the MSS was
/// smaller early in the connection (Linux bounds it by half the largest window the peer has
/// advertised: on loopback, until the window passes twice 64 KiB).
pub fn check(
    segments: &[Segment],
    gso_sizes: Option<&[u16]>,
    data_port: u16,
    on_host: OnHost,
    senders: &[Sender],
) -> Completeness {
    let counted: Vec<&Sender> = senders
        .iter()
        .filter(|s| {
            if s.server {
                on_host.server
            } else {
                on_host.client
            }
        })
        .collect();
    let none = |note: &str| Completeness {
        note: Some(note.into()),
        ..Completeness::default()
    };
    if counted.is_empty() {
        return none(
            "no data sender on the capture's host: the check counts a sender's frames as they leave",
        );
    }
    let Some(sent): Option<Vec<SentSegments>> = counted.iter().map(|s| s.sent).collect() else {
        return none("a sender did not report its segment count (an older peer)");
    };
    let mut notes = Vec::new();
    // The MSS each side's senders cut their data by: one value when they agree (they share
    // a path); else each connection's from its handshake.
    let mss_of = |server: bool| -> Option<u32> {
        let mut m = counted
            .iter()
            .zip(&sent)
            .filter(|(s, _)| s.server == server)
            .map(|(_, c)| c.snd_mss);
        let first = m.next()?;
        m.all(|x| x == first).then_some(first)
    };
    let (client_mss, server_mss) = (mss_of(false), mss_of(true));
    let mut captured = 0u64;
    let mut unknown_mss = 0;
    for (sender, frames) in connections(segments) {
        let server = sender.port() == data_port;
        if !(if server {
            on_host.server
        } else {
            on_host.client
        }) {
            continue;
        }
        let data = frames.iter().filter(|(s, _)| s.src == sender && s.len > 0);
        if let Some(g) = gso_sizes {
            captured += data
                .map(|&(s, i)| match g.get(i).copied().unwrap_or(0) {
                    0 => 1,
                    size => u64::from(s.len.div_ceil(u32::from(size))),
                })
                .sum::<u64>();
            continue;
        }
        let mss = if server { server_mss } else { client_mss }
            .or_else(|| syn_mss(&frames, sender))
            .filter(|&m| m > 0);
        let Some(mss) = mss else {
            unknown_mss += 1;
            continue;
        };
        captured += data
            .map(|&(s, _)| u64::from(s.len.div_ceil(mss)))
            .sum::<u64>();
    }
    if unknown_mss > 0 {
        return none("the MSS of a connection is not known (senders differ and its handshake was not captured)");
    }
    let has = |server: bool| counted.iter().any(|s| s.server == server);
    if gso_sizes.is_none() {
        notes.push(
            "frames counted by the final MSS (no GSO sizes): low where it was smaller early on",
        );
        if has(false) && client_mss.is_none() || has(true) && server_mss.is_none() {
            notes.push("the senders' MSS differ: each connection's is taken from its handshake");
        }
    }
    if sent.iter().any(|s| !s.settled) {
        notes.push("a sender's count was read before all it sent was acknowledged");
    }
    let total: u64 = sent.iter().map(|s| s.data_segs_out).sum();
    Completeness {
        sender_data_segments: Some(total),
        captured_data_segments: Some(captured),
        missing_data_segments: Some(total as i64 - captured as i64),
        note: (!notes.is_empty()).then(|| notes.join("; ")),
    }
}

/// The capture's connections: each one's data sender (the end with more payload, as
/// `flow::analyse` decides) and its segments.
/// Each segment comes with its index in `segments`.
#[allow(clippy::type_complexity)]
fn connections(segments: &[Segment]) -> Vec<(SocketAddr, Vec<(&Segment, usize)>)> {
    let mut keys: Vec<(SocketAddr, SocketAddr)> = Vec::new();
    let mut groups: Vec<Vec<(&Segment, usize)>> = Vec::new();
    for (i, s) in segments.iter().enumerate() {
        let key = if s.src <= s.dst {
            (s.src, s.dst)
        } else {
            (s.dst, s.src)
        };
        match keys.iter().position(|k| *k == key) {
            Some(k) => groups[k].push((s, i)),
            None => {
                keys.push(key);
                groups.push(vec![(s, i)]);
            }
        }
    }
    keys.into_iter()
        .zip(groups)
        .map(|((a, b), g)| {
            let payload = |end: SocketAddr| -> u64 {
                g.iter()
                    .filter(|(s, _)| s.src == end)
                    .map(|(s, _)| u64::from(s.len))
                    .sum()
            };
            let sender = if payload(b) > payload(a) { b } else { a };
            (sender, g)
        })
        .collect()
}

/// The payload of a full segment from `sender`: the MSS the other end announced in its SYN,
/// less the options the sender's data segments carry.
fn syn_mss(frames: &[(&Segment, usize)], sender: SocketAddr) -> Option<u32> {
    let announced = frames
        .iter()
        .find(|(s, _)| s.dst == sender && s.mss.is_some())?
        .0
        .mss?;
    let options = frames
        .iter()
        .find(|(s, _)| s.src == sender && s.len > 0)
        .map_or(0, |(s, _)| u32::from(s.options_len));
    Some(u32::from(announced).saturating_sub(options))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::segment::{ACK, SYN};

    const PORT: u16 = 5400;

    fn seg(from_client: bool, len: u32, flags: u8, mss: Option<u16>) -> Segment {
        let c: SocketAddr = "127.0.0.1:41000".parse().unwrap();
        let s: SocketAddr = format!("127.0.0.1:{PORT}").parse().unwrap();
        Segment {
            t_ns: 1,
            src: if from_client { c } else { s },
            dst: if from_client { s } else { c },
            seq: 0,
            ack: 0,
            flags,
            window: 512,
            len,
            options_len: if flags & SYN != 0 { 8 } else { 12 },
            mss,
            wscale: None,
        }
    }

    fn sent(data: u64, mss: u32, settled: bool) -> Option<SentSegments> {
        Some(SentSegments {
            data_segs_out: data,
            segs_out: data + 3,
            total_retrans: 0,
            snd_mss: mss,
            settled,
        })
    }

    /// A client's stream on loopback: the cookie, one full segment, a super-frame of two and
    /// a bit (three segments), and a short tail; ACKs and the handshake do not count.
    fn stream() -> Vec<Segment> {
        vec![
            seg(true, 0, SYN, Some(65495)),
            seg(false, 0, SYN | ACK, Some(65495)),
            seg(true, 16, ACK, None),
            seg(true, 65483, ACK, None),
            seg(true, 2 * 65483 + 1, ACK, None),
            seg(false, 0, ACK, None),
            seg(true, 100, ACK, None),
        ]
    }

    #[test]
    fn super_frames_count_as_the_segments_they_are_cut_into() {
        let both = OnHost {
            client: true,
            server: true,
        };
        let senders = [Sender {
            server: false,
            sent: sent(6, 65483, true),
        }];
        let c = check(&stream(), None, PORT, both, &senders);
        assert_eq!(c.missing_data_segments, Some(0));
        assert_eq!(c.captured_data_segments, Some(6));
        // With each frame's GSO size the count is the kernel's, whatever the final MSS: the
        // 65483-byte frame cut at 32768 early on counts two.
        let gso = [0, 0, 0, 32768, 65483, 0, 0];
        let c = check(&stream(), Some(&gso), PORT, both, &senders);
        assert_eq!(
            c,
            Completeness {
                sender_data_segments: Some(6),
                captured_data_segments: Some(7),
                missing_data_segments: Some(-1),
                note: None,
            }
        );
        // One frame fewer in the file: three segments missing.
        let mut lost = stream();
        lost.remove(4);
        let c = check(&lost, None, PORT, both, &senders);
        assert_eq!(c.missing_data_segments, Some(3));
    }

    /// Without the senders' MSS agreeing, the handshake's (less the data's options) is used.
    #[test]
    fn the_handshake_gives_the_mss_when_the_senders_differ() {
        let mut segs = stream();
        for s in &mut segs {
            if s.src.port() == 41000 {
                s.src.set_port(41001);
            } else {
                s.dst.set_port(41001);
            }
        }
        segs.extend(stream());
        let senders = [
            Sender {
                server: false,
                sent: sent(6, 65483, true),
            },
            Sender {
                server: false,
                sent: sent(6, 1000, false),
            },
        ];
        let on = OnHost {
            client: true,
            server: false,
        };
        let c = check(&segs, None, PORT, on, &senders);
        assert_eq!(c.captured_data_segments, Some(12));
        assert_eq!(c.missing_data_segments, Some(0));
        let note = c.note.unwrap();
        assert!(note.contains("MSS differ"), "{note}");
        assert!(
            note.contains("before all it sent was acknowledged"),
            "{note}"
        );
    }

    /// The capture on the receiver's host, or a sender that reports nothing: no figures,
    /// a note saying why.
    #[test]
    fn no_sender_on_the_host_or_no_count_is_said_not_guessed() {
        let senders = [Sender {
            server: false,
            sent: sent(6, 65483, true),
        }];
        let server_only = OnHost {
            client: false,
            server: true,
        };
        let c = check(&stream(), None, PORT, server_only, &senders);
        assert_eq!(c.missing_data_segments, None);
        assert!(c.note.unwrap().contains("no data sender"));
        let old = [Sender {
            server: false,
            sent: None,
        }];
        let both = OnHost {
            client: true,
            server: true,
        };
        let c = check(&stream(), None, PORT, both, &old);
        assert_eq!(c.sender_data_segments, None);
        assert!(c.note.unwrap().contains("did not report"));
    }
}
