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
