//! What a host was and what changed on it over a point: its environment, its CPU's shares,
//! its kernel and interface counters, and where a direction's losses happened on its path.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Environment {
    pub hostname: String,
    /// Kernel name and release, e.g. "Linux 6.1.0".
    pub kernel: String,
    pub cpu_model: String,
    /// CPUs this process may run on.
    pub cpus: usize,
    pub wirebench_version: String,
    /// Congestion control the kernel uses by default.
    pub default_cc: Option<String>,
}

/// What share of the host's CPU time (all CPUs together) each kind took over a point: 0..1,
/// summing to 1 over the kinds.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct CpuShare {
    /// CPUs of the host (lines of /proc/stat), not only those this process may use.
    pub cpus: u32,
    pub user: f64,
    pub nice: f64,
    pub system: f64,
    pub irq: f64,
    /// Network receive and transmit processing mostly runs here.
    pub softirq: f64,
    pub iowait: f64,
    /// Time a hypervisor gave to someone else.
    pub steal: f64,
    pub idle: f64,
    /// The busiest CPU's share not idle (nor iowait) over the point: one saturated CPU shows
    /// here when the host's average does not.
    pub busiest_cpu: f64,
}

/// What changed on one host over a point: after - before of every counter that changed, and of
/// the loss-relevant ones (the instruments' `ALWAYS_KEPT`, interface drops and errors) always.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct HostCounters {
    /// "Table.Name" of /proc/net/snmp and /proc/net/netstat (`Udp.RcvbufErrors`,
    /// `TcpExt.TCPTimeouts`) -> its increase.
    pub kernel: BTreeMap<String, i64>,
    /// Interface -> statistic of /sys/class/net/IF/statistics (`rx_dropped`) -> its increase.
    pub interfaces: BTreeMap<String, BTreeMap<String, i64>>,
}

impl HostCounters {
    /// One kernel counter's increase; 0 when it is not in the delta (unchanged, or absent from
    /// this kernel).
    pub fn get(&self, name: &str) -> u64 {
        self.kernel
            .get(name)
            .map_or(0, |v| u64::try_from(*v).unwrap_or(0))
    }

    /// Sum over interfaces of one statistic's increase.
    pub fn interfaces_sum(&self, field: &str) -> u64 {
        self.interfaces
            .values()
            .filter_map(|f| f.get(field))
            .map(|v| u64::try_from(*v).unwrap_or(0))
            .sum()
    }
}

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
    /// The unit of the counters at this place: a socket counts datagrams (for TCP, segments),
    /// the queue and the link count frames (for TCP, one segment each).
    pub fn unit(self, tcp: bool) -> &'static str {
        match (tcp, self) {
            (true, _) => "segments",
            (false, Place::SenderSocket | Place::ReceiverSocket) => "datagrams",
            (false, Place::Queue | Place::Link) => "frames",
        }
    }

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
    /// Datagram transports: the frames (IPv4 fragments) one datagram takes on the link, when
    /// the link's MTU is known (a lab); the queue's and the link's counts are frames, turned
    /// into datagrams with it. Absent when it is not known, or for TCP.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub frames_per_datagram: Option<u64>,
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

/// The datagrams `frames` dropped frames lost, at least and at most, with `per` frames a
/// datagram: ceil(frames / per) when whole datagrams went, frames when one fragment each did.
/// Unknown `per` (no MTU known) counts one frame a datagram, as an unfragmented path does.
pub fn datagrams_of_frames(frames: u64, per: Option<u64>) -> (u64, u64) {
    (frames.div_ceil(per.unwrap_or(1).max(1)), frames)
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
        let unit = place.unit(a.tcp.is_some());
        let count = a.at(place);
        // Frames of fragmented datagrams: said in datagrams too, as a range.
        let converted = match (unit, a.frames_per_datagram) {
            ("frames", Some(per)) if per > 1 => {
                let (lo, hi) = datagrams_of_frames(count, Some(per));
                format!(" = {} to {} datagrams", group(lo), group(hi))
            }
            _ => String::new(),
        };
        places.push(format!(
            "{} {} {unit}{converted} ({})",
            place.name(),
            group(count),
            names.join(", ")
        ));
    }
    let mut line = match (a.sent, a.received, a.lost, a.tcp) {
        (Some(s), Some(r), Some(l), _) => format!(
            "loss at {size} B{dir}: {} sent - {} received = {} datagrams lost{}",
            group(s),
            group(r),
            group(l),
            match a.frames_per_datagram {
                Some(per) if per > 1 => format!(" ({per} frames each)"),
                _ => String::new(),
            }
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
            "{} unexplained {} datagrams",
            if places.is_empty() { ":" } else { "," },
            group(u)
        ));
    }
    if let Some(o) = a.over_counted {
        line.push_str(&format!(
            " (the host's counters show {} datagrams more: other traffic, warm-up or retried sends)",
            group(o)
        ));
    }
    line
}
