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

pub use crate::model::host::{Cause, CpuShare, HostCounters, LossAttribution, Place, TcpRecovery};
pub use crate::model::lab::{LabCounters, LabDirection};
pub use attribution::{attribute, LossPath, Protocol};
pub use counters::Snapshot;
pub use cpu::CpuSnapshot;

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
