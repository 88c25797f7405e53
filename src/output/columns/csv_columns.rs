//! Every column of the CSV (`--csv`, `export --csv`), in order.
//!
//! The figures shared with the tables, and the CSV's own.

use crate::model::path::{PathClock, PathTiming, Stage, StageName};
use crate::model::PointResult;

use super::cell::text;
use super::Row;
use super::{
    Cell, Column, ACHIEVED_PER_S, ACKED_BITS, ARRIVALS, BOUND_WAITS, BYTES_RECEIVED, BYTES_SENT,
    CLIENT_US_PER_KIB, DATAGRAMS_LOST, DIRECTION, JITTER, LOSS_RATIO, LOST_TRANSACTIONS,
    OFFERED_PER_S, OVERLOAD, RECEIVER_BITS, REQUESTS_OUTSTANDING, REQUESTS_SCHEDULED,
    REQUESTS_SENT, REQUESTS_UNSENT, REQUEST_SIZE, RESPONSE_SIZE, RETRANSMITS, RTT_CI, RTT_MAX,
    RTT_MEAN, RTT_MIN, RTT_P50, RTT_P99, RTT_P999, RTT_SAMPLES, SENDER_BITS, SERVER_US_PER_KIB,
    SERVICE_P50, SERVICE_P99, SETUP_MEAN, SIZE, STREAM, THINK_CORRECTED_TPS, THINK_WAITED,
    THROUGHPUT, TRANSACTIONS, TRANSACTIONS_PER_S,
};

/// One end's host CPU shares; on one host the server's are the client's.
fn host_cpu(p: &PointResult, server: bool) -> Option<&crate::model::host::CpuShare> {
    let h = p.host_cpu.as_ref()?;
    if server && !h.same_host {
        h.server.as_ref()
    } else {
        h.client.as_ref()
    }
}

/// `--columns`' check of one name: a CSV column's, or an error that lists every one, so a
/// mistyped name is refused before anything is measured.
pub fn known(name: &str) -> Result<String, String> {
    let name = name.trim();
    if CSV.iter().any(|c| c.name == name) {
        return Ok(name.to_owned());
    }
    Err(format!(
        "unknown column '{name}' (the CSV header's names: {})",
        CSV.iter().map(|c| c.name).collect::<Vec<_>>().join(",")
    ))
}

/// Every column of `--csv` and `export --csv`, in order.
pub const CSV: &[Column] = &[
    Column {
        name: "index",
        get: |r| (r.point.index as u64).into(),
    },
    STREAM,
    DIRECTION,
    Column {
        name: "pattern",
        get: |r| Cell::Text(r.report.pattern.to_string()),
    },
    Column {
        name: "transport",
        get: |r| Cell::Text(r.report.transport.to_string()),
    },
    Column {
        name: "run_started_at",
        get: |r| text(&r.report.started_at),
    },
    Column {
        name: "run_id",
        get: |r| r.run_id.map(|id| id.to_string()).into(),
    },
    Column {
        name: "client_host",
        get: |r| text(&r.report.client_environment.hostname),
    },
    Column {
        name: "server_host",
        get: |r| {
            r.report
                .server_environment
                .as_ref()
                .map(|e| e.hostname.clone())
                .into()
        },
    },
    SIZE,
    REQUEST_SIZE,
    RESPONSE_SIZE,
    // 0: messages unframed; else the bytes of the length before each message (the sizes and
    // byte figures count the messages' own bytes).
    Column {
        name: "length_prefix_bytes",
        get: |r| u64::from(r.report.settings.length_prefix_bytes).into(),
    },
    Column {
        name: "sndbuf_bytes",
        get: |r| r.point.key.sndbuf.into(),
    },
    Column {
        name: "rcvbuf_bytes",
        get: |r| r.point.key.rcvbuf.into(),
    },
    Column {
        name: "server_sndbuf_bytes",
        get: |r| r.point.key.server_sndbuf.into(),
    },
    Column {
        name: "server_rcvbuf_bytes",
        get: |r| r.point.key.server_rcvbuf.into(),
    },
    // The point's algorithm in a sweep, else the run's (empty: the kernel's default).
    Column {
        name: "cc",
        get: |r| {
            r.point
                .key
                .cc
                .map(|c| c.to_string())
                .or_else(|| r.report.settings.cc.clone())
                .into()
        },
    },
    Column {
        name: "runs",
        get: |r| r.point.runs.into(),
    },
    Column {
        name: "headline_mean",
        get: |r| r.whole(|p| p.headline.over_runs.as_ref().map(|m| m.mean)),
    },
    Column {
        name: "headline_ci_half_width",
        get: |r| r.whole(|p| p.headline.over_runs.as_ref().and_then(|m| m.half_width)),
    },
    Column {
        name: "headline_unit",
        get: |r| r.whole(|p| p.headline.unit.clone()),
    },
    RTT_SAMPLES,
    RTT_MEAN,
    Column {
        name: "rtt_stddev_ns",
        get: |r| r.latency(|l| l.rtt.stddev_ns),
    },
    RTT_CI,
    RTT_MIN,
    RTT_P50,
    Column {
        name: "rtt_p90_ns",
        get: |r| r.latency(|l| l.rtt.p90_ns),
    },
    RTT_P99,
    RTT_P999,
    Column {
        name: "rtt_p9999_ns",
        get: |r| r.latency(|l| l.rtt.p9999_ns),
    },
    // The percentiles' sample floors (10 / (1 - p), the physics guard): whether every printed
    // percentile stands on enough samples, and which do not, by name.
    Column {
        name: "rtt_percentiles_valid",
        get: |r| {
            r.point
                .latency
                .as_ref()
                .filter(|l| !l.percentiles.is_empty())
                .map(|l| l.percentiles.iter().all(|p| !p.validity.is_invalid()))
                .into()
        },
    },
    Column {
        name: "rtt_percentiles_invalid",
        get: |r| {
            r.point
                .latency
                .as_ref()
                .filter(|l| !l.percentiles.is_empty())
                .map(crate::model::LatencyResult::invalid_percentiles)
                .into()
        },
    },
    RTT_MAX,
    Column {
        name: "one_way_mean_ns",
        get: |r| r.latency(|l| l.one_way_mean_ns),
    },
    THROUGHPUT,
    TRANSACTIONS_PER_S,
    TRANSACTIONS,
    LOST_TRANSACTIONS,
    THINK_CORRECTED_TPS,
    THINK_WAITED,
    ARRIVALS,
    OFFERED_PER_S,
    ACHIEVED_PER_S,
    REQUESTS_SCHEDULED,
    REQUESTS_SENT,
    REQUESTS_OUTSTANDING,
    REQUESTS_UNSENT,
    BOUND_WAITS,
    SERVICE_P50,
    SERVICE_P99,
    OVERLOAD,
    SETUP_MEAN,
    SENDER_BITS,
    ACKED_BITS,
    RECEIVER_BITS,
    BYTES_SENT,
    BYTES_RECEIVED,
    Column {
        name: "datagrams_sent",
        get: |r| r.loss().map(|l| l.0).into(),
    },
    DATAGRAMS_LOST,
    LOSS_RATIO,
    JITTER,
    Column {
        name: "send_failures",
        get: |r| r.count(|p| p.sender.send_failures, |d| d.send_failures),
    },
    RETRANSMITS,
    Column {
        name: "client_cpu_s",
        get: |r| r.whole(|p| p.cpu.client.total_s()),
    },
    Column {
        name: "server_cpu_s",
        get: |r| r.whole(|p| p.cpu.server.total_s()),
    },
    CLIENT_US_PER_KIB,
    SERVER_US_PER_KIB,
    Column {
        name: "client_host_user_share",
        get: |r| r.whole(|p| host_cpu(p, false).map(|c| c.user)),
    },
    Column {
        name: "client_host_system_share",
        get: |r| r.whole(|p| host_cpu(p, false).map(|c| c.system)),
    },
    Column {
        name: "client_host_softirq_share",
        get: |r| r.whole(|p| host_cpu(p, false).map(|c| c.softirq)),
    },
    Column {
        name: "server_host_user_share",
        get: |r| r.whole(|p| host_cpu(p, true).map(|c| c.user)),
    },
    Column {
        name: "server_host_system_share",
        get: |r| r.whole(|p| host_cpu(p, true).map(|c| c.system)),
    },
    Column {
        name: "server_host_softirq_share",
        get: |r| r.whole(|p| host_cpu(p, true).map(|c| c.softirq)),
    },
    Column {
        name: "valid",
        get: |r| r.validity().valid.into(),
    },
    Column {
        name: "invalid_reason",
        get: |r| text(r.validity().reason()),
    },
    // grpc's serialisation, per message, count-weighted over the point's connections (warm-up
    // included); empty for other transports.
    Column {
        name: "encoding",
        get: |r| r.whole(|p| p.rpc.as_ref().map(|x| x.encoding.to_string())),
    },
    Column {
        name: "client_encode_mean_ns",
        get: |r| r.whole(|p| rpc_mean(p, false, |s| s.encode)),
    },
    Column {
        name: "client_decode_mean_ns",
        get: |r| r.whole(|p| rpc_mean(p, false, |s| s.decode)),
    },
    Column {
        name: "server_decode_mean_ns",
        get: |r| r.whole(|p| rpc_mean(p, true, |s| s.decode)),
    },
    Column {
        name: "server_encode_mean_ns",
        get: |r| r.whole(|p| rpc_mean(p, true, |s| s.encode)),
    },
    Column {
        name: "serialisation_share_of_rtt",
        get: |r| r.whole(|p| p.rpc.as_ref().and_then(|x| x.share_of_rtt)),
    },
    Column {
        name: "client_encode_p99_ns",
        get: |r| r.whole(|p| rpc_p99(p, false, |s| s.encode)),
    },
    Column {
        name: "client_decode_p99_ns",
        get: |r| r.whole(|p| rpc_p99(p, false, |s| s.decode)),
    },
    Column {
        name: "server_decode_p99_ns",
        get: |r| r.whole(|p| rpc_p99(p, true, |s| s.decode)),
    },
    Column {
        name: "server_encode_p99_ns",
        get: |r| r.whole(|p| rpc_p99(p, true, |s| s.encode)),
    },
    // --path-timing (pingpong, rr; the last run): where the round trip's time went, stage by
    // stage, from the kernels' stamps; empty without it. A stage merged into its neighbour
    // (no stamp between them) is empty and `path_merged` says into which.
    Column {
        name: "path_messages",
        get: |r| r.whole(|p| p.path_timing.as_ref().map(|t| t.messages)),
    },
    Column {
        name: "path_incomplete",
        get: |r| r.whole(|p| p.path_timing.as_ref().map(|t| t.incomplete)),
    },
    Column {
        name: "path_clock",
        get: |r| r.whole(|p| p.path_timing.as_ref().map(|t| path_clock(&t.clock).0)),
    },
    Column {
        name: "path_clock_offset_ns",
        get: |r| r.whole(|p| p.path_timing.as_ref().and_then(|t| path_clock(&t.clock).1)),
    },
    Column {
        name: "path_clock_error_ns",
        get: |r| r.whole(|p| p.path_timing.as_ref().and_then(|t| path_clock(&t.clock).2)),
    },
    Column {
        name: "path_valid",
        get: |r| r.whole(|p| p.path_timing.as_ref().and_then(|t| t.validity.valid)),
    },
    Column {
        name: "path_invalid_reason",
        get: |r| {
            r.whole(|p| {
                p.path_timing
                    .as_ref()
                    .and_then(|t| t.validity.invalid_reason.clone())
            })
        },
    },
    Column {
        name: "path_merged",
        get: |r| r.whole(|p| p.path_timing.as_ref().map(path_merged)),
    },
    Column {
        name: "path_client_send_to_queue_p50_ns",
        get: |r| path_stage(r, StageName::ClientSendToQueue, |s| s.p50_ns.into()),
    },
    Column {
        name: "path_client_send_to_queue_mean_ns",
        get: |r| path_stage(r, StageName::ClientSendToQueue, |s| s.mean_ns.into()),
    },
    Column {
        name: "path_client_queue_to_driver_p50_ns",
        get: |r| path_stage(r, StageName::ClientQueueToDriver, |s| s.p50_ns.into()),
    },
    Column {
        name: "path_client_queue_to_driver_mean_ns",
        get: |r| path_stage(r, StageName::ClientQueueToDriver, |s| s.mean_ns.into()),
    },
    Column {
        name: "path_wire_out_p50_ns",
        get: |r| path_stage(r, StageName::WireOut, |s| s.p50_ns.into()),
    },
    Column {
        name: "path_wire_out_mean_ns",
        get: |r| path_stage(r, StageName::WireOut, |s| s.mean_ns.into()),
    },
    Column {
        name: "path_server_arrival_to_read_p50_ns",
        get: |r| path_stage(r, StageName::ServerArrivalToRead, |s| s.p50_ns.into()),
    },
    Column {
        name: "path_server_arrival_to_read_mean_ns",
        get: |r| path_stage(r, StageName::ServerArrivalToRead, |s| s.mean_ns.into()),
    },
    Column {
        name: "path_server_turnaround_p50_ns",
        get: |r| path_stage(r, StageName::ServerTurnaround, |s| s.p50_ns.into()),
    },
    Column {
        name: "path_server_turnaround_mean_ns",
        get: |r| path_stage(r, StageName::ServerTurnaround, |s| s.mean_ns.into()),
    },
    Column {
        name: "path_server_send_to_queue_p50_ns",
        get: |r| path_stage(r, StageName::ServerSendToQueue, |s| s.p50_ns.into()),
    },
    Column {
        name: "path_server_send_to_queue_mean_ns",
        get: |r| path_stage(r, StageName::ServerSendToQueue, |s| s.mean_ns.into()),
    },
    Column {
        name: "path_server_queue_to_driver_p50_ns",
        get: |r| path_stage(r, StageName::ServerQueueToDriver, |s| s.p50_ns.into()),
    },
    Column {
        name: "path_server_queue_to_driver_mean_ns",
        get: |r| path_stage(r, StageName::ServerQueueToDriver, |s| s.mean_ns.into()),
    },
    Column {
        name: "path_wire_back_p50_ns",
        get: |r| path_stage(r, StageName::WireBack, |s| s.p50_ns.into()),
    },
    Column {
        name: "path_wire_back_mean_ns",
        get: |r| path_stage(r, StageName::WireBack, |s| s.mean_ns.into()),
    },
    Column {
        name: "path_client_arrival_to_read_p50_ns",
        get: |r| path_stage(r, StageName::ClientArrivalToRead, |s| s.p50_ns.into()),
    },
    Column {
        name: "path_client_arrival_to_read_mean_ns",
        get: |r| path_stage(r, StageName::ClientArrivalToRead, |s| s.mean_ns.into()),
    },
    Column {
        name: "path_wire_both_p50_ns",
        get: |r| path_stage(r, StageName::WireBoth, |s| s.p50_ns.into()),
    },
    Column {
        name: "path_wire_both_mean_ns",
        get: |r| path_stage(r, StageName::WireBoth, |s| s.mean_ns.into()),
    },
    Column {
        name: "path_rtt_mean_ns",
        get: |r| r.whole(|p| p.path_timing.as_ref().map(|t| t.rtt_mean_ns)),
    },
    Column {
        name: "path_residual_mean_ns",
        get: |r| r.whole(|p| p.path_timing.as_ref().map(|t| t.residual_mean_ns)),
    },
    Column {
        name: "path_residual_max_abs_ns",
        get: |r| r.whole(|p| p.path_timing.as_ref().map(|t| t.residual_max_abs_ns)),
    },
    Column {
        name: "path_stamp_cost_ratio",
        get: |r| path_cost(r, |c| c.ratio.into()),
    },
    Column {
        name: "path_stamp_cost_ratio_low",
        get: |r| path_cost(r, |c| c.ratio_low.into()),
    },
    Column {
        name: "path_stamp_cost_ratio_high",
        get: |r| path_cost(r, |c| c.ratio_high.into()),
    },
    Column {
        name: "path_stamp_read_ns",
        get: |r| path_cost(r, |c| c.read_ns.into()),
    },
];

/// One codec step's p99 on one end: one connection's, or with several the largest of
/// theirs (an upper bound: two histograms' percentiles do not merge into one).
fn rpc_p99(
    p: &PointResult,
    server: bool,
    step: fn(&crate::model::rpc::Serialisation) -> Option<crate::model::rpc::CodecTime>,
) -> Option<u64> {
    let x = p.rpc.as_ref()?;
    let side = if server { &x.server } else { &x.client };
    side.iter().filter_map(step).map(|t| t.p99_ns).max()
}

/// One codec step's mean per message on one end, over the point's connections.
fn rpc_mean(
    p: &PointResult,
    server: bool,
    step: fn(&crate::model::rpc::Serialisation) -> Option<crate::model::rpc::CodecTime>,
) -> Option<f64> {
    let x = p.rpc.as_ref()?;
    let side = if server { &x.server } else { &x.client };
    crate::model::rpc::merged(side, step).map(|(_, mean)| mean)
}

/// One stage's figure of the point's path timing; empty without it or when the stage is not
/// there (merged into a neighbour, or a one-way stage of separate clocks given only together).
fn path_stage(r: &Row, name: StageName, f: fn(&Stage) -> Cell) -> Cell {
    r.whole(|p| {
        p.path_timing
            .as_ref()
            .and_then(|t| {
                let stage = t.stages.iter().find(|s| s.name == name);
                // The wires' sum is a stage of its own only where a device merged them; it
                // is always given beside the stages when the server sent its stamps.
                match name {
                    StageName::WireBoth => stage.or(t.wire_both.as_ref()),
                    _ => stage,
                }
            })
            .map(f)
    })
}

/// A figure of what stamping cost; empty when the point did not measure it.
fn path_cost(r: &Row, f: fn(&crate::model::path::StampCost) -> Cell) -> Cell {
    r.whole(|p| p.path_timing.as_ref().and_then(|t| t.cost.as_ref()).map(f))
}

/// The clock's kind, and for separate clocks the offset estimate (signed, as a float: a
/// cell's integers are counts) and its error.
fn path_clock(c: &PathClock) -> (String, Option<f64>, Option<u64>) {
    match c {
        PathClock::Shared => ("shared".into(), None, None),
        PathClock::Separate {
            offset_ns,
            error_ns,
        } => ("separate".into(), Some(*offset_ns as f64), Some(*error_ns)),
    }
}

/// Which stages stand for merged neighbours: "wire_out=client_queue_to_driver", several
/// separated by ";", the merged ones joined by "+"; empty when none is.
fn path_merged(t: &PathTiming) -> String {
    t.stages
        .iter()
        .filter(|s| !s.merged.is_empty())
        .map(|s| {
            format!(
                "{}={}",
                s.name.key(),
                s.merged
                    .iter()
                    .map(|m| m.key())
                    .collect::<Vec<_>>()
                    .join("+")
            )
        })
        .collect::<Vec<_>>()
        .join(";")
}
