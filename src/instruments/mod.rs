//! Instruments read around each point, outside its timed phase: the kernel's network counters
//! and the host's CPU time, on each end, and in the lab the emulated link's drops; and from
//! their differences, where the point's lost messages or segments were lost.
//!
//! Nothing here knows the command line, the protocol or the lab: the lab's readings arrive as
//! plain numbers ([`LabDirection`]).

pub mod attribution;
pub mod counters;
pub mod cpu;

use serde::{Deserialize, Serialize};

pub use attribution::{attribute, Cause, LossAttribution, LossPath, Place, Protocol, TcpRecovery};
pub use counters::{HostCounters, Snapshot};
pub use cpu::{CpuShare, CpuSnapshot};

/// One host's readings at a point's start, to be compared with its end.
#[derive(Debug, Clone)]
pub struct HostBefore {
    counters: Snapshot,
    cpu: Option<CpuSnapshot>,
}

/// What one host's instruments saw over a point: its counters' increases and its CPU shares.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct HostInstruments {
    pub counters: HostCounters,
    /// Null when no clock tick passed over the point.
    pub cpu: Option<CpuShare>,
}

impl HostBefore {
    /// Reads this thread's network namespace and the host's CPU time now.
    pub fn take() -> HostBefore {
        HostBefore {
            cpu: CpuSnapshot::read(),
            counters: Snapshot::read(),
        }
    }

    /// Reads again and gives what changed since [`HostBefore::take`].
    pub fn finish(&self) -> HostInstruments {
        let counters = Snapshot::read().delta(&self.counters);
        let cpu = match (&self.cpu, CpuSnapshot::read()) {
            (Some(b), Some(a)) => a.share_since(b),
            _ => None,
        };
        HostInstruments { counters, cpu }
    }
}

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
