//! Where a round trip's time goes inside the stacks (`run --path-timing`): the kernel's
//! software time stamps of every timed message on both ends (SO_TIMESTAMPING: entering the
//! queueing layer, handed to the driver, arriving, and for TCP acknowledged) with the
//! applications' own clock readings around their system calls, split into stages that add up
//! to the round trip, as the probes of [Moldeklev et al. n.d.] (REFERENCES.md) split a
//! segment's time between the socket layer, TCP/IP and the driver on each end.

use serde::{Deserialize, Serialize};

use crate::stats::Validity;

/// One stage of a round trip, in the order a message meets them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum StageName {
    /// Client: from just before its send call until the request entered the queueing
    /// layer (TX_SCHED): the system call, the socket layer and TCP/UDP/IP.
    ClientSendToQueue,
    /// Client: from the queueing layer to the driver (TX_SCHED to TX_SOFTWARE): qdisc.
    ClientQueueToDriver,
    /// From the client's driver to the request's arrival at the server (TX_SOFTWARE to the
    /// server's RX_SOFTWARE): the devices, the wire and the path, the lab's link included.
    WireOut,
    /// Server: from the request's arrival until the server's read of it returned: the
    /// receive path, the socket queue and the wake-up.
    ServerArrivalToRead,
    /// Server: from its read's return until its send call of the response: the application.
    ServerTurnaround,
    ServerSendToQueue,
    ServerQueueToDriver,
    /// From the server's driver to the response's arrival at the client.
    WireBack,
    /// Client: from the response's arrival until its read returned (the end of the round
    /// trip).
    ClientArrivalToRead,
    /// `WireOut` and `WireBack` together, when the two hosts do not share a clock: their sum
    /// needs no clock comparison (each end's stamps are compared with its own only).
    WireBoth,
    /// TCP: from the request's hand-over to the driver until its acknowledgement came back
    /// (TX_ACK), outside the sum.
    ClientDriverToAck,
}

impl StageName {
    /// The stages of a round trip with one clock, in order.
    pub const ALL: [StageName; 9] = [
        StageName::ClientSendToQueue,
        StageName::ClientQueueToDriver,
        StageName::WireOut,
        StageName::ServerArrivalToRead,
        StageName::ServerTurnaround,
        StageName::ServerSendToQueue,
        StageName::ServerQueueToDriver,
        StageName::WireBack,
        StageName::ClientArrivalToRead,
    ];

    /// Every stage a point may show, in the order a message meets them: `wire_both` (two
    /// clocks, or merged wires) stands where the two one-way wires would. Tables, figures
    /// and the report lay stages out by it.
    pub const SHOWN: [StageName; 10] = [
        StageName::ClientSendToQueue,
        StageName::ClientQueueToDriver,
        StageName::WireOut,
        StageName::ServerArrivalToRead,
        StageName::ServerTurnaround,
        StageName::ServerSendToQueue,
        StageName::ServerQueueToDriver,
        StageName::WireBack,
        StageName::WireBoth,
        StageName::ClientArrivalToRead,
    ];

    /// The stage's name in tables and CSV columns.
    pub fn label(self) -> &'static str {
        match self {
            StageName::ClientSendToQueue => "client send→queue",
            StageName::ClientQueueToDriver => "client queue→driver",
            StageName::WireOut => "wire out",
            StageName::ServerArrivalToRead => "server arrival→read",
            StageName::ServerTurnaround => "server turnaround",
            StageName::ServerSendToQueue => "server send→queue",
            StageName::ServerQueueToDriver => "server queue→driver",
            StageName::WireBack => "wire back",
            StageName::ClientArrivalToRead => "client arrival→read",
            StageName::WireBoth => "wire out+back",
            StageName::ClientDriverToAck => "client driver→ack",
        }
    }

    /// The stage's key in CSV column names and the JSON document.
    pub fn key(self) -> &'static str {
        match self {
            StageName::ClientSendToQueue => "client_send_to_queue",
            StageName::ClientQueueToDriver => "client_queue_to_driver",
            StageName::WireOut => "wire_out",
            StageName::ServerArrivalToRead => "server_arrival_to_read",
            StageName::ServerTurnaround => "server_turnaround",
            StageName::ServerSendToQueue => "server_send_to_queue",
            StageName::ServerQueueToDriver => "server_queue_to_driver",
            StageName::WireBack => "wire_back",
            StageName::ClientArrivalToRead => "client_arrival_to_read",
            StageName::WireBoth => "wire_both",
            StageName::ClientDriverToAck => "client_driver_to_ack",
        }
    }
}

/// One stage's times over the point's stamped round trips, nanoseconds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Stage {
    pub name: StageName,
    /// The stages this one stands for besides its own, when a device gave no stamp between
    /// them (e.g. a driver that does not stamp TX_SOFTWARE merges `client_queue_to_driver`
    /// into `wire_out`). Empty when the stage is alone.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub merged: Vec<StageName>,
    /// Round trips that had both of this stage's stamps.
    pub samples: u64,
    pub min_ns: u64,
    /// Median and 99th percentile (nearest rank over the kept samples).
    pub p50_ns: u64,
    pub p99_ns: u64,
    /// The means add up to the mean round trip, less the residual.
    pub mean_ns: f64,
}

/// How the two ends' stamps were compared.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum PathClock {
    /// Both ends read one kernel clock (loopback, a lab's namespaces): one-way stages are
    /// differences of stamps of one clock.
    Shared,
    /// Two hosts: one-way stages are given only with the offset estimate (the server's clock
    /// minus the client's, from the stamps' minimum round trips, NTP-style) and its error
    /// (half the smallest round trip's wire time); `wire_both` needs no estimate.
    Separate { offset_ns: i64, error_ns: u64 },
}

/// What stamping cost, measured in the point itself: stamped and unstamped round trips
/// alternate, and their medians are compared.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct StampCost {
    /// Round trips timed without stamps (interleaved with the stamped ones).
    pub unstamped: u64,
    pub unstamped_p50_ns: u64,
    pub stamped_p50_ns: u64,
    /// Stamped median over unstamped median, with its 95% interval (bootstrap or
    /// distribution-free, as `method` says).
    pub ratio: f64,
    pub ratio_low: f64,
    pub ratio_high: f64,
    pub method: String,
    /// Mean time per stamped round trip spent reading the stamps from the error queue, after
    /// the round trip's clock stopped, nanoseconds (the client's end).
    pub read_ns: f64,
}

/// A point's path timing (pingpong, rr with one in flight; last run).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct PathTiming {
    /// Timed round trips with every stamp the stages need (those without a stamp are
    /// counted in `incomplete`).
    pub messages: u64,
    pub incomplete: u64,
    pub clock: PathClock,
    /// The stages in order; their means add up to `rtt_mean_ns` less `residual_mean_ns`.
    pub stages: Vec<Stage>,
    /// The same round trips' times by the application's clock.
    pub rtt_min_ns: u64,
    pub rtt_p50_ns: u64,
    pub rtt_p99_ns: u64,
    pub rtt_mean_ns: f64,
    /// Per round trip: its time less the sum of its stages (the clocks' disagreement and the
    /// time between a clock reading and its system call), mean and largest absolute.
    pub residual_mean_ns: f64,
    pub residual_max_abs_ns: u64,
    /// TCP: from the request's hand-over to the driver to its acknowledgement (TX_ACK),
    /// outside the sum. Absent elsewhere and when no ACK stamp came.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_driver_to_ack: Option<Stage>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost: Option<StampCost>,
    /// Why a stage is missing or merged, why a figure should be read with care.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
    /// `wire_out` and `wire_back` together, per round trip (each end's stamps compared with
    /// its own only, so that no clock comparison enters), outside the sum; `merged` lists the
    /// stages it holds besides the two wires where a device did not stamp. Absent when the
    /// server sent no stamps.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wire_both: Option<Stage>,
    /// The wire stages held against the lab link's delay and the frames' wire time (the
    /// physics guard's bound (b)): not valid when one was faster than the link. Unknown
    /// (`valid` null) without a lab.
    #[serde(default)]
    pub validity: Validity,
}
