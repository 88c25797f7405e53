//! The lab's emulated link as a run records it: its settings, hosts and theoretical goodput,
//! and what its queue, its loss rule and its delay line counted over a point.

use std::time::Duration;

use clap::ValueEnum;
use serde::{Deserialize, Serialize};

/// One direction of the lab's link over a point: what its queue and its random loss dropped.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema,
)]
pub struct LabDirection {
    /// Frames the delay line dropped because the queue in front of its wire was full, the
    /// segments they held, and of those the UDP and the TCP ones.
    pub queue_dropped_frames: u64,
    pub queue_dropped_segments: u64,
    pub queue_dropped_udp_segments: u64,
    pub queue_dropped_tcp_segments: u64,
    /// Frames the receiving host's link refused, and frames dropped to keep the delay line's
    /// memory bound (neither is link behaviour; both should stay 0).
    pub dropped_send: u64,
    pub dropped_memory: u64,
    /// Frames the random loss rule (nftables, on the receiving host's ingress) dropped: UDP
    /// ones and all others (TCP: the data and the control connection).
    pub random_loss_udp: u64,
    pub random_loss_other: u64,
    /// Frames the delay line released (a GSO super-frame is one), those of them it released
    /// more than 100 us after the link's time, the summed lateness of all of them, and the
    /// largest (the point's own when the point raised the delay line's running maximum;
    /// otherwise that maximum, an upper bound; 0 when no frame was late). What the physics guard judges the lab's faithfulness by.
    /// 0 in documents written before they were read.
    #[serde(default)]
    pub frames_out: u64,
    #[serde(default)]
    pub late_frames: u64,
    #[serde(default)]
    pub late_sum_ns: u64,
    #[serde(default)]
    pub late_max_ns: u64,
    /// The largest lateness in each window of the link's round-trip hold, summed: what one
    /// chain of cause and effect through this direction can have been held back (see the
    /// delay line's `CausalWindows`). Absent in documents of older wirebench.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub late_window_sum_ns: Option<u64>,
}

/// The lab's link over a point, both directions (forward = host a -> host b = client ->
/// server).
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema,
)]
pub struct LabCounters {
    pub forward: LabDirection,
    pub back: LabDirection,
    /// False when the delay line's counters could not be read at both ends of the point
    /// (no delay line, or it did not answer in time): its fields are then 0, not measured.
    pub delay_line_read: bool,
}

impl LabCounters {
    /// after - before (`self` is after); the delay line counts only when read at both ends.
    pub fn since(&self, b: &LabCounters) -> LabCounters {
        let read = self.delay_line_read && b.delay_line_read;
        let direction = |a: &LabDirection, b: &LabDirection| {
            let d = a.since(b);
            if read {
                d
            } else {
                LabDirection {
                    random_loss_udp: d.random_loss_udp,
                    random_loss_other: d.random_loss_other,
                    ..LabDirection::default()
                }
            }
        };
        LabCounters {
            forward: direction(&self.forward, &b.forward),
            back: direction(&self.back, &b.back),
            delay_line_read: read,
        }
    }
}

impl LabDirection {
    /// after - before (`self` is after).
    pub fn since(&self, b: &LabDirection) -> LabDirection {
        LabDirection {
            queue_dropped_frames: self
                .queue_dropped_frames
                .saturating_sub(b.queue_dropped_frames),
            queue_dropped_segments: self
                .queue_dropped_segments
                .saturating_sub(b.queue_dropped_segments),
            queue_dropped_udp_segments: self
                .queue_dropped_udp_segments
                .saturating_sub(b.queue_dropped_udp_segments),
            queue_dropped_tcp_segments: self
                .queue_dropped_tcp_segments
                .saturating_sub(b.queue_dropped_tcp_segments),
            dropped_send: self.dropped_send.saturating_sub(b.dropped_send),
            dropped_memory: self.dropped_memory.saturating_sub(b.dropped_memory),
            random_loss_udp: self.random_loss_udp.saturating_sub(b.random_loss_udp),
            random_loss_other: self.random_loss_other.saturating_sub(b.random_loss_other),
            frames_out: self.frames_out.saturating_sub(b.frames_out),
            late_frames: self.late_frames.saturating_sub(b.late_frames),
            late_sum_ns: self.late_sum_ns.saturating_sub(b.late_sum_ns),
            late_window_sum_ns: match (self.late_window_sum_ns, b.late_window_sum_ns) {
                (Some(a), Some(b)) => Some(a.saturating_sub(b)),
                _ => None,
            },
            // A running maximum: the point's own when the point raised it, an upper bound of
            // it when frames were late without raising it, and nothing to tell otherwise.
            late_max_ns: if self.late_max_ns > b.late_max_ns || self.late_frames > b.late_frames {
                self.late_max_ns
            } else {
                0
            },
        }
    }
}

/// What a running lab is, as recorded on disk and reported with results.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct LabState {
    pub name: String,
    pub config: LinkConfig,
    /// "bridge" (no delay), "netem" or "delay-line".
    pub mechanism: String,
    pub delay_line_pid: Option<u32>,
    pub created_at: String,
    pub host_a: HostInfo,
    pub host_b: HostInfo,
    /// Theoretical TCP goodput a->b and b->a (rate times payload share), when rate-limited.
    pub tcp_goodput_forward: Option<Goodput>,
    pub tcp_goodput_back: Option<Goodput>,
    /// The CPU budgets of the lab's hosts (`lab up --host-cpu b=25%`); absent without one.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub host_cpu: Vec<HostCpu>,
}

/// A lab host's CPU budget: every process in its namespace that the lab starts or runs (`lab
/// exec`) is in a cgroup the kernel's CPU controller gives `quota_us` of CPU time in every
/// `period_us` (CFS bandwidth control).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct HostCpu {
    /// The host: "a", "b" or "h3".
    pub host: String,
    /// The share of one CPU, 0 to 1 (quota / period).
    pub share: f64,
    pub quota_us: u64,
    pub period_us: u64,
    /// The cgroup's directory.
    pub cgroup: String,
    /// "cgroup2 cpu.max" or "cgroup1 cpu.cfs_quota_us".
    pub controller: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct HostInfo {
    pub netns: String,
    pub address: String,
}

/// One direction of the link.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct DirectionConfig {
    /// Bits per second; None = unlimited.
    pub rate_bits_per_s: Option<f64>,
    /// One-way delay added in this direction, nanoseconds (`delay` in lab state files and
    /// run documents written before times were all in nanoseconds still reads).
    #[serde(
        rename = "delay_ns",
        alias = "delay",
        with = "crate::units::duration_ns"
    )]
    #[schemars(with = "u64")]
    pub delay: Duration,
    /// Uniform jitter of the delay, +/- this much (frames may then be reordered), nanoseconds.
    #[serde(
        rename = "jitter_ns",
        alias = "jitter",
        with = "crate::units::duration_ns"
    )]
    #[schemars(with = "u64")]
    pub jitter: Duration,
    /// Probability that a frame is dropped, 0..1.
    pub loss: f64,
    /// The queue in front of the wire; None: the default for the rate and MTU (absent in
    /// state files of labs made before queues were configurable).
    #[serde(default)]
    pub queue: Option<QueueLimit>,
    /// The name the rate was given by (`--rate oc3`), beside its number; absent when it was
    /// given as a number.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate_name: Option<NamedRate>,
}

/// A link rate by the name of the network it is (`--rate oc3`): what that network carries
/// for its frames or cells, bits per second ([`NamedRate::bits_per_s`]).
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ValueEnum, schemars::JsonSchema,
)]
pub enum NamedRate {
    /// SONET OC-3c: 155.52 Mbit/s less the section, line and path overhead leaves 149.76
    /// Mbit/s for 53-byte cells.
    #[serde(rename = "oc3")]
    #[value(name = "oc3")]
    Oc3,
    /// SONET OC-12c: 599.04 Mbit/s for cells.
    #[serde(rename = "oc12")]
    #[value(name = "oc12")]
    Oc12,
    /// TAXI (the 4B/5B link of early ATM adapters): 100 Mbit/s.
    #[serde(rename = "taxi")]
    #[value(name = "taxi")]
    Taxi,
    /// FDDI: 100 Mbit/s.
    #[serde(rename = "fddi")]
    #[value(name = "fddi")]
    Fddi,
    /// 10BASE-T Ethernet: 10 Mbit/s.
    #[serde(rename = "10base-t")]
    #[value(name = "10base-t")]
    TenBaseT,
    /// 100BASE-TX Fast Ethernet: 100 Mbit/s.
    #[serde(rename = "100base-tx")]
    #[value(name = "100base-tx")]
    HundredBaseTx,
    /// 1000BASE-T Gigabit Ethernet: 1000 Mbit/s.
    #[serde(rename = "1000base-t")]
    #[value(name = "1000base-t")]
    GigabitBaseT,
}

impl NamedRate {
    pub const ALL: [NamedRate; 7] = [
        NamedRate::Oc3,
        NamedRate::Oc12,
        NamedRate::Taxi,
        NamedRate::Fddi,
        NamedRate::TenBaseT,
        NamedRate::HundredBaseTx,
        NamedRate::GigabitBaseT,
    ];

    /// The name as typed (`oc3`, `10base-t`).
    pub fn name(self) -> &'static str {
        match self {
            NamedRate::Oc3 => "oc3",
            NamedRate::Oc12 => "oc12",
            NamedRate::Taxi => "taxi",
            NamedRate::Fddi => "fddi",
            NamedRate::TenBaseT => "10base-t",
            NamedRate::HundredBaseTx => "100base-tx",
            NamedRate::GigabitBaseT => "1000base-t",
        }
    }

    pub fn bits_per_s(self) -> f64 {
        crate::units::named_rate(self.name()).unwrap_or(0.0)
    }

    /// The name in `s` (any case, surrounding blanks ignored), if it is one.
    pub fn from_name(s: &str) -> Option<NamedRate> {
        let t = s.trim().to_ascii_lowercase();
        NamedRate::ALL.into_iter().find(|n| n.name() == t)
    }
}

/// How the link's wire carries a frame: the bytes it charges each frame's IP packet (each
/// segment of a GSO super-frame apart), on top of which the rate serialises. See
/// `lab::framing` for the numbers and their sources.
#[derive(
    Debug,
    Clone,
    Copy,
    Default,
    PartialEq,
    Eq,
    Serialize,
    Deserialize,
    ValueEnum,
    schemars::JsonSchema,
)]
#[serde(rename_all = "kebab-case")]
pub enum Framing {
    /// The frame as the kernel holds it: Ethernet header (14 B), IP packet; no preamble, FCS
    /// or inter-frame gap (what the lab charged before framings were configurable).
    #[default]
    Frame,
    /// Ethernet on the wire: header 14 + FCS 4 (at least 64 bytes) + preamble and SFD 8 +
    /// inter-frame gap 12.
    Ethernet,
    /// ATM AAL5, LLC/SNAP encapsulation (RFC 2684): 8 B LLC/SNAP + IP packet + 8 B CPCS
    /// trailer, padded to whole 48-byte cell payloads, 53 bytes per cell.
    AtmAal5,
    /// ATM AAL3/4: 4 B CPCS header + IP packet padded to 4 bytes + 4 B CPCS trailer, 44 bytes
    /// per cell (2 B SAR header and 2 B SAR trailer in each 48-byte payload), 53 per cell.
    AtmAal34,
    /// FDDI (ISO 9314-2): preamble 8, SD 1, FC 1, addresses 12, LLC/SNAP 8, FCS 4, ED/FS 2:
    /// 36 bytes around each IP packet.
    Fddi,
}

impl Framing {
    /// The name as the option takes it.
    pub fn name(self) -> &'static str {
        match self {
            Framing::Frame => "frame",
            Framing::Ethernet => "ethernet",
            Framing::AtmAal5 => "atm-aal5",
            Framing::AtmAal34 => "atm-aal34",
            Framing::Fddi => "fddi",
        }
    }

    /// One line for people: what each packet costs on the wire.
    pub fn describe(self) -> &'static str {
        match self {
            Framing::Frame => "frame: the kernel's frame, Ethernet header 14 B + IP packet (no preamble, FCS or gap)",
            Framing::Ethernet => "ethernet: IP packet + 14 header + 4 FCS (min 64) + 8 preamble/SFD + 12 gap",
            Framing::AtmAal5 => "atm-aal5: 8 LLC/SNAP + IP packet + 8 CPCS trailer in 48-byte payloads of 53-byte cells",
            Framing::AtmAal34 => "atm-aal34: 4 CPCS header + IP packet (to 4 B) + 4 CPCS trailer, 44 bytes per 53-byte cell",
            Framing::Fddi => "fddi: IP packet + 36 (preamble, SD, FC, addresses, LLC/SNAP, FCS, ED/FS)",
        }
    }
}

#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ValueEnum, schemars::JsonSchema,
)]
#[serde(rename_all = "kebab-case")]
pub enum Mechanism {
    /// wirebench's delay line (the emulation the tests check); the same as delay-line.
    Auto,
    /// The kernel's netem qdisc with its own `rate` and `limit` (fails where the kernel lacks
    /// netem; not exercised by wirebench's tests).
    Netem,
    /// wirebench's own delay line in a middle namespace.
    DelayLine,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct LinkConfig {
    /// Host a to host b.
    pub forward: DirectionConfig,
    /// Host b to host a.
    pub back: DirectionConfig,
    pub mtu: u64,
    pub mechanism: Mechanism,
    /// How the wire frames each packet (absent in state files and documents of labs made
    /// before framings were configurable: the kernel's frame, as they charged).
    #[serde(default)]
    pub framing: Framing,
}

/// How much the queue in front of the wire holds: frames waiting for the wire and the one on
/// it. Overflow drops the arriving frame, as a router's tail-drop queue does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum QueueLimit {
    /// Segments (a GSO super-frame counts as its segments).
    Packets(u64),
    /// Wire bytes.
    Bytes(u64),
}

#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Goodput {
    /// Payload bits per second a bulk TCP transfer can reach (full-size segments).
    pub tcp_bits_per_s: f64,
    /// Payload share of a full TCP segment's frame.
    pub tcp_efficiency: f64,
    pub mtu: u64,
}
