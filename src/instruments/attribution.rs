//! Where a point's losses happened: the counters' increases on the sending and the receiving
//! host, and the lab link's drops, sorted by place (sender socket, queue, link, receiver
//! socket) against the loss the point itself counted.
//!
//! Counters are the host's (every socket of the namespace, warm-up included), so they may
//! explain more than the point lost: that excess is reported (`over_counted`), never hidden,
//! and what they do not explain is `unexplained`.

use serde::{Deserialize, Serialize};

use super::{HostCounters, LabDirection};

/// Where along the path a message or segment was dropped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Place {
    SenderSocket,
    Queue,
    Link,
    ReceiverSocket,
}

impl Place {
    pub fn name(self) -> &'static str {
        match self {
            Place::SenderSocket => "sender socket",
            Place::Queue => "queue",
            Place::Link => "link",
            Place::ReceiverSocket => "receiver socket",
        }
    }
}

/// Drops one counter shows at one place.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Cause {
    pub place: Place,
    /// The counter: a kernel one ("Udp.RcvbufErrors"), an interface statistic summed over the
    /// host's interfaces ("rx_dropped"), or the lab's ("lab random loss", "delay line queue").
    pub counter: String,
    pub count: u64,
}

/// What the sending TCP did to recover (the sending host's counters).
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema,
)]
pub struct TcpRecovery {
    /// Tcp.RetransSegs.
    pub retransmitted_segments: u64,
    /// TcpExt.TCPTimeouts: retransmission timer expiries.
    pub rto_timeouts: u64,
    /// TcpExt.TCPFastRetrans.
    pub fast_retransmits: u64,
    /// TcpExt.TCPLossProbes: tail loss probes.
    pub loss_probes: u64,
}

/// Where one direction's losses happened.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct LossAttribution {
    /// "client_to_server" or "server_to_client".
    pub direction: String,
    /// Datagram transports: timed messages sent, received and lost, as the point counted
    /// them. Null for TCP, which loses no message (its drops show as retransmits).
    pub sent: Option<u64>,
    pub received: Option<u64>,
    pub lost: Option<u64>,
    /// Every counter that shows drops on this direction's path, in path order.
    pub causes: Vec<Cause>,
    /// lost - the causes' sum, when the causes do not cover every lost message.
    pub unexplained: Option<u64>,
    /// The causes' sum - lost, when the counters show more drops than the point lost (other
    /// traffic of the host, warm-up messages, failed sends that were retried).
    pub over_counted: Option<u64>,
    /// TCP: the sender's retransmissions.
    pub tcp: Option<TcpRecovery>,
}

impl LossAttribution {
    /// Drops at one place, summed over its counters.
    pub fn at(&self, place: Place) -> u64 {
        self.causes
            .iter()
            .filter(|c| c.place == place)
            .map(|c| c.count)
            .sum()
    }

    /// Whether there is anything to say: a loss, a drop or a retransmission.
    pub fn is_notable(&self) -> bool {
        self.lost.unwrap_or(0) > 0
            || !self.causes.is_empty()
            || self.tcp.is_some_and(|t| t.retransmitted_segments > 0)
    }
}

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
/// counted one.
pub fn attribute(
    direction: &str,
    protocol: Protocol,
    loss: Option<(u64, u64)>,
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
    let counted: u64 = causes.iter().map(|c| c.count).sum();
    let lost = loss.map(|(sent, received)| sent.saturating_sub(received));
    LossAttribution {
        direction: direction.to_owned(),
        sent: loss.map(|l| l.0),
        received: loss.map(|l| l.1),
        lost,
        unexplained: lost.map(|l| l.saturating_sub(counted)).filter(|u| *u > 0),
        over_counted: lost.map(|l| counted.saturating_sub(l)).filter(|o| *o > 0),
        causes,
        tcp,
    }
}

/// One line for under the table: "loss at 1400 B: 1 532 sent - 1 201 received = 331 lost:
/// receiver socket 300 (Udp.RcvbufErrors), link 31 (lab random loss)", or for TCP the
/// retransmissions and any drops. `group` prints a count with digit groups.
pub fn describe(a: &LossAttribution, size: u64, group: &dyn Fn(u64) -> String) -> String {
    let dir = match a.direction.as_str() {
        "server_to_client" => " server->client",
        _ => "",
    };
    let mut places: Vec<String> = Vec::new();
    for place in [
        Place::SenderSocket,
        Place::Queue,
        Place::Link,
        Place::ReceiverSocket,
    ] {
        let here: Vec<&Cause> = a.causes.iter().filter(|c| c.place == place).collect();
        if here.is_empty() {
            continue;
        }
        let names: Vec<String> = here
            .iter()
            .map(|c| {
                if here.len() == 1 {
                    c.counter.clone()
                } else {
                    format!("{} {}", c.counter, group(c.count))
                }
            })
            .collect();
        places.push(format!(
            "{} {} ({})",
            place.name(),
            group(a.at(place)),
            names.join(", ")
        ));
    }
    let mut line = match (a.sent, a.received, a.lost, a.tcp) {
        (Some(s), Some(r), Some(l), _) => format!(
            "loss at {size} B{dir}: {} sent - {} received = {} lost",
            group(s),
            group(r),
            group(l)
        ),
        (_, _, _, Some(t)) => format!(
            "retransmits at {size} B{dir}: {} segments retransmitted ({} RTO timeouts, {} fast retransmits, {} loss probes)",
            group(t.retransmitted_segments),
            group(t.rto_timeouts),
            group(t.fast_retransmits),
            group(t.loss_probes)
        ),
        _ => format!("drops at {size} B{dir}"),
    };
    if !places.is_empty() {
        let word = if a.lost.is_some() { ":" } else { "; dropped:" };
        line.push_str(&format!("{word} {}", places.join(", ")));
    }
    if let Some(u) = a.unexplained {
        line.push_str(&format!(
            "{} unexplained {}",
            if places.is_empty() { ":" } else { "," },
            group(u)
        ));
    }
    if let Some(o) = a.over_counted {
        line.push_str(&format!(
            " (the host's counters show {} more: other traffic, warm-up or retried sends)",
            group(o)
        ));
    }
    line
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
            "loss at 1400 B: 1532 sent - 1201 received = 331 lost: link 31 (lab random loss), receiver socket 300 (Udp.RcvbufErrors)"
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
        let a = attribute("client_to_server", Protocol::Udp, Some((100, 80)), one_host);
        assert_eq!(a.at(Place::ReceiverSocket), 9);
        assert_eq!(a.unexplained, Some(11));
        assert_eq!(
            a.lost.unwrap() - a.unexplained.unwrap(),
            a.at(Place::ReceiverSocket)
        );
        assert_eq!(
            describe(&a, 64, &plain),
            "loss at 64 B: 100 sent - 80 received = 20 lost: receiver socket 9 (Udp.RcvbufErrors 7, Udp.InErrors (other) 2), unexplained 11"
        );
        let b = attribute("server_to_client", Protocol::Udp, Some((100, 95)), one_host);
        assert_eq!(b.unexplained, None);
        assert_eq!(b.over_counted, Some(4));
        let none = attribute(
            "client_to_server",
            Protocol::Udp,
            Some((10, 10)),
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
            "retransmits at 1400 B server->client: 12 segments retransmitted (3 RTO timeouts, 9 fast retransmits, 1 loss probes); dropped: queue 1 (delay line queue), link 10 (lab random loss), receiver socket 2 (TcpExt.TCPRcvQDrop)"
        );
    }
}
