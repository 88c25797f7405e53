//! Where a point's losses happened: the counters' increases on the sending and the receiving
//! host, and the lab link's drops, sorted by place (sender socket, queue, link, receiver
//! socket) against the loss the point itself counted.
//!
//! Counters are the host's (every socket of the namespace, warm-up included), so they may
//! explain more than the point lost: that excess is reported (`over_counted`), never hidden,
//! and what they do not explain is `unexplained`.
//!
//! Units: a socket counts datagrams (UDP) and a queue, a link or an interface counts frames.
//! A datagram larger than the MTU leaves as several IPv4 fragments, one frame each, so a
//! queue that dropped 30 148 frames did not drop 30 148 datagrams (a run once printed "15506
//! lost: queue 30148"). Each place speaks in its own unit, said in the line, and frames are turned
//! into datagrams before anything is added to or set against the datagrams lost: a datagram
//! is lost when any of its `k` fragments is, so `n` dropped frames lost between ceil(n / k)
//! (the fragments of whole datagrams) and n datagrams (one fragment each). What is
//! unexplained is what even n does not cover, what is over-counted what even ceil(n / k)
//! exceeds. TCP segments are never fragmented (path MTU): every TCP count is segments.

use super::{HostCounters, LabDirection};
pub use crate::model::host::{datagrams_of_frames, describe};
use crate::model::host::{Cause, LossAttribution, Place, TcpRecovery};

/// The protocol whose counters explain a direction's loss.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Protocol {
    Udp,
    Tcp,
}

/// The counters around one direction of a point. On one host (loopback) the sender and the
/// receiver are the same counters: each counter is read once, on its side (sends on the
/// sender's, receives on the receiver's), so nothing is counted twice.
#[derive(Debug, Clone, Copy)]
pub struct LossPath<'a> {
    pub sender: Option<&'a HostCounters>,
    pub receiver: Option<&'a HostCounters>,
    pub lab: Option<&'a LabDirection>,
}

/// Sorts the drops along `path` by place, against `loss` (sent, received) when the point
/// counted one; `frames_per_datagram` is how many frames one datagram takes on the link
/// (UDP over a known MTU).
pub fn attribute(
    direction: &str,
    protocol: Protocol,
    loss: Option<(u64, u64)>,
    frames_per_datagram: Option<u64>,
    path: LossPath<'_>,
) -> LossAttribution {
    let mut causes = Vec::new();
    let mut add = |place: Place, counter: &str, count: u64| {
        if count > 0 {
            causes.push(Cause {
                place,
                counter: counter.to_owned(),
                count,
            });
        }
    };
    let sender = |name: &str| path.sender.map_or(0, |h| h.get(name));
    let receiver = |name: &str| path.receiver.map_or(0, |h| h.get(name));
    let sender_if = |field: &str| path.sender.map_or(0, |h| h.interfaces_sum(field));
    let receiver_if = |field: &str| path.receiver.map_or(0, |h| h.interfaces_sum(field));
    let lab = path.lab.copied().unwrap_or_default();

    if protocol == Protocol::Udp {
        // A datagram the kernel could not queue for sending (ENOBUFS from the device queue)
        // is counted here and, without IP_RECVERR, reported to the sender as sent.
        add(
            Place::SenderSocket,
            "Udp.SndbufErrors",
            sender("Udp.SndbufErrors"),
        );
    }
    let (queue_segments, random_loss) = match protocol {
        Protocol::Udp => (lab.queue_dropped_udp_segments, lab.random_loss_udp),
        Protocol::Tcp => (lab.queue_dropped_tcp_segments, lab.random_loss_other),
    };
    add(Place::Queue, "delay line queue", queue_segments);
    add(Place::Queue, "delay line memory bound", lab.dropped_memory);
    add(Place::Link, "tx_dropped", sender_if("tx_dropped"));
    add(Place::Link, "tx_errors", sender_if("tx_errors"));
    add(Place::Link, "delay line send refused", lab.dropped_send);
    add(Place::Link, "lab random loss", random_loss);
    add(Place::Link, "rx_dropped", receiver_if("rx_dropped"));
    add(Place::Link, "rx_errors", receiver_if("rx_errors"));
    let tcp = match protocol {
        Protocol::Udp => {
            // InErrors counts every datagram the socket layer dropped, RcvbufErrors (a full
            // receive buffer) among them.
            let rcvbuf = receiver("Udp.RcvbufErrors");
            let in_errors = receiver("Udp.InErrors");
            add(Place::ReceiverSocket, "Udp.RcvbufErrors", rcvbuf);
            add(
                Place::ReceiverSocket,
                "Udp.InErrors (other)",
                in_errors.saturating_sub(rcvbuf),
            );
            None
        }
        Protocol::Tcp => {
            add(
                Place::ReceiverSocket,
                "TcpExt.TCPRcvQDrop",
                receiver("TcpExt.TCPRcvQDrop"),
            );
            add(
                Place::ReceiverSocket,
                "TcpExt.TCPBacklogDrop",
                receiver("TcpExt.TCPBacklogDrop"),
            );
            Some(TcpRecovery {
                retransmitted_segments: sender("Tcp.RetransSegs"),
                rto_timeouts: sender("TcpExt.TCPTimeouts"),
                fast_retransmits: sender("TcpExt.TCPFastRetrans"),
                loss_probes: sender("TcpExt.TCPLossProbes"),
            })
        }
    };
    // The causes in datagrams, at least and at most (see the module's documentation).
    let per = frames_per_datagram.filter(|_| protocol == Protocol::Udp);
    let (counted_min, counted_max) = causes.iter().fold((0, 0), |(lo, hi), c| {
        let (l, h) = match c.place.unit(protocol == Protocol::Tcp) {
            "frames" => datagrams_of_frames(c.count, per),
            _ => (c.count, c.count),
        };
        (lo + l, hi + h)
    });
    let lost = loss.map(|(sent, received)| sent.saturating_sub(received));
    LossAttribution {
        direction: direction.to_owned(),
        sent: loss.map(|l| l.0),
        received: loss.map(|l| l.1),
        lost,
        unexplained: lost
            .map(|l| l.saturating_sub(counted_max))
            .filter(|u| *u > 0),
        over_counted: lost
            .map(|l| counted_min.saturating_sub(l))
            .filter(|o| *o > 0),
        causes,
        tcp,
        frames_per_datagram: per,
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    fn host(kernel: &[(&str, i64)], ifs: &[(&str, &str, i64)]) -> HostCounters {
        let mut h = HostCounters {
            kernel: kernel.iter().map(|(k, v)| ((*k).to_owned(), *v)).collect(),
            interfaces: BTreeMap::new(),
        };
        for (i, f, v) in ifs {
            h.interfaces
                .entry((*i).to_owned())
                .or_default()
                .insert((*f).to_owned(), *v);
        }
        h
    }

    fn plain(n: u64) -> String {
        n.to_string()
    }

    #[test]
    fn udp_loss_is_split_between_the_receiver_socket_and_the_link() {
        let receiver = host(
            &[("Udp.RcvbufErrors", 300), ("Udp.InErrors", 300)],
            &[("wb0", "rx_dropped", 0)],
        );
        let sender = host(&[("Udp.SndbufErrors", 0)], &[]);
        let lab = LabDirection {
            random_loss_udp: 31,
            random_loss_other: 2,
            queue_dropped_tcp_segments: 5,
            ..LabDirection::default()
        };
        let a = attribute(
            "client_to_server",
            Protocol::Udp,
            Some((1532, 1201)),
            Some(1),
            LossPath {
                sender: Some(&sender),
                receiver: Some(&receiver),
                lab: Some(&lab),
            },
        );
        assert_eq!(a.lost, Some(331));
        assert_eq!(a.at(Place::ReceiverSocket), 300);
        assert_eq!(a.at(Place::Link), 31);
        // TCP's drops are not this UDP direction's.
        assert_eq!(a.at(Place::Queue), 0);
        assert_eq!(a.at(Place::SenderSocket), 0);
        assert_eq!(a.unexplained, None);
        assert_eq!(a.over_counted, None);
        assert!(a.is_notable());
        assert_eq!(
            describe(&a, 1400, &plain),
            "loss at 1400 B: 1532 sent - 1201 received = 331 datagrams lost: link 31 frames (lab random loss), receiver socket 300 datagrams (Udp.RcvbufErrors)"
        );
    }

    #[test]
    fn what_the_counters_miss_is_unexplained_and_what_they_exceed_is_said() {
        let h = host(&[("Udp.RcvbufErrors", 7), ("Udp.InErrors", 9)], &[]);
        let one_host = LossPath {
            sender: Some(&h),
            receiver: Some(&h),
            lab: None,
        };
        let a = attribute(
            "client_to_server",
            Protocol::Udp,
            Some((100, 80)),
            None,
            one_host,
        );
        assert_eq!(a.at(Place::ReceiverSocket), 9);
        assert_eq!(a.unexplained, Some(11));
        assert_eq!(
            a.lost.unwrap() - a.unexplained.unwrap(),
            a.at(Place::ReceiverSocket)
        );
        assert_eq!(
            describe(&a, 64, &plain),
            "loss at 64 B: 100 sent - 80 received = 20 datagrams lost: receiver socket 9 datagrams (Udp.RcvbufErrors 7, Udp.InErrors (other) 2), unexplained 11 datagrams"
        );
        let b = attribute(
            "server_to_client",
            Protocol::Udp,
            Some((100, 95)),
            None,
            one_host,
        );
        assert_eq!(b.unexplained, None);
        assert_eq!(b.over_counted, Some(4));
        let none = attribute(
            "client_to_server",
            Protocol::Udp,
            Some((10, 10)),
            None,
            LossPath {
                sender: None,
                receiver: None,
                lab: None,
            },
        );
        assert!(!none.is_notable());
        assert_eq!(none.lost, Some(0));
        assert_eq!(none.unexplained, None);
    }

    #[test]
    fn tcp_shows_the_senders_retransmissions_and_the_paths_drops() {
        let sender = host(
            &[
                ("Tcp.RetransSegs", 12),
                ("TcpExt.TCPTimeouts", 3),
                ("TcpExt.TCPFastRetrans", 9),
                ("TcpExt.TCPLossProbes", 1),
            ],
            &[("wb0", "tx_dropped", 0)],
        );
        let receiver = host(&[("TcpExt.TCPRcvQDrop", 2)], &[]);
        let lab = LabDirection {
            random_loss_other: 10,
            queue_dropped_tcp_segments: 1,
            ..LabDirection::default()
        };
        let a = attribute(
            "server_to_client",
            Protocol::Tcp,
            None,
            None,
            LossPath {
                sender: Some(&sender),
                receiver: Some(&receiver),
                lab: Some(&lab),
            },
        );
        assert_eq!(a.lost, None);
        assert_eq!(a.unexplained, None);
        assert_eq!(
            a.tcp,
            Some(TcpRecovery {
                retransmitted_segments: 12,
                rto_timeouts: 3,
                fast_retransmits: 9,
                loss_probes: 1,
            })
        );
        assert_eq!(a.at(Place::Queue), 1);
        assert_eq!(a.at(Place::Link), 10);
        assert_eq!(a.at(Place::ReceiverSocket), 2);
        assert_eq!(
            describe(&a, 1400, &plain),
            "retransmits at 1400 B server->client: 12 segments retransmitted (3 RTO timeouts, 9 fast retransmits, 1 loss probes); dropped: queue 1 segments (delay line queue), link 10 segments (lab random loss), receiver socket 2 segments (TcpExt.TCPRcvQDrop)"
        );
    }

    /// Fragmented UDP once printed "15506 lost: queue 30148", fragments against
    /// datagrams. 8000 B datagrams over MTU 1500 leave as 6 fragments each: the queue's
    /// 30 148 frames are 5 025 to 30 148 datagrams, which covers the 15 506 lost (nothing
    /// unexplained, nothing over-counted), and the line says each figure's unit.
    #[test]
    fn fragments_are_turned_into_datagrams_before_they_meet_the_loss() {
        let per = crate::lab::goodput::udp_frames(8000, 1500);
        assert_eq!(per, 6);
        let lab = LabDirection {
            queue_dropped_udp_segments: 30_148,
            ..LabDirection::default()
        };
        let path = LossPath {
            sender: None,
            receiver: None,
            lab: Some(&lab),
        };
        let sent = 100_000;
        let a = attribute(
            "client_to_server",
            Protocol::Udp,
            Some((sent, sent - 15_506)),
            Some(per),
            path,
        );
        assert_eq!(a.lost, Some(15_506));
        assert_eq!(a.at(Place::Queue), 30_148, "the count stays the counter's");
        assert_eq!(a.unexplained, None);
        assert_eq!(
            a.over_counted, None,
            "30 148 frames are not 30 148 datagrams"
        );
        assert_eq!(
            describe(&a, 8000, &plain),
            "loss at 8000 B: 100000 sent - 84494 received = 15506 datagrams lost (6 frames each): queue 30148 frames = 5025 to 30148 datagrams (delay line queue)"
        );
        // Few frames against many datagrams: even one datagram a frame leaves some lost
        // unexplained.
        let few = LabDirection {
            queue_dropped_udp_segments: 600,
            ..LabDirection::default()
        };
        let b = attribute(
            "client_to_server",
            Protocol::Udp,
            Some((10_000, 9_000)),
            Some(per),
            LossPath {
                lab: Some(&few),
                ..path
            },
        );
        assert_eq!(b.unexplained, Some(400));
        // Many frames against few datagrams: over-counted only beyond ceil(frames / 6).
        let many = LabDirection {
            queue_dropped_udp_segments: 6_000,
            ..LabDirection::default()
        };
        let c = attribute(
            "client_to_server",
            Protocol::Udp,
            Some((10_000, 9_500)),
            Some(per),
            LossPath {
                lab: Some(&many),
                ..path
            },
        );
        assert_eq!((c.unexplained, c.over_counted), (None, Some(500)));
        // Unfragmented, frames are datagrams one for one, as before.
        let d = attribute(
            "client_to_server",
            Protocol::Udp,
            Some((10_000, 9_500)),
            Some(1),
            LossPath {
                lab: Some(&many),
                ..path
            },
        );
        assert_eq!(d.over_counted, Some(5_500));
        assert!(!describe(&d, 1000, &plain).contains(" to "));
    }
}
