//! `run --path-timing`: each round trip split into stages by the kernels' software stamps on
//! both ends. Over loopback, per transport: the document carries the stages, each with its
//! samples, their means add up to the mean round trip less the stated residual, one clock
//! is shared; in a lab with a 1 ms link each way, the wire stages are the link's delay plus
//! the frame's time at its rate. Times are only ever compared with each other (sums that hold
//! by construction) or with the lab's own configured delay, never with what a host should
//! manage.

// Helpers outside #[test] fns fail their test by panicking, as the tests do (clippy.toml).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::lab::{lab_run, SERIAL};
use common::need::{require, Need};
use common::{refusal, run, run_json, u, Server};
use serde_json::Value;

/// Stage keys in order, one clock, every device stamping.
const STAGES: [&str; 9] = [
    "client_send_to_queue",
    "client_queue_to_driver",
    "wire_out",
    "server_arrival_to_read",
    "server_turnaround",
    "server_send_to_queue",
    "server_queue_to_driver",
    "wire_back",
    "client_arrival_to_read",
];

fn f(v: &Value) -> f64 {
    v.as_f64().expect("a number")
}

/// What holds of any path timing: messages, every stage sampled by each of them, the means
/// adding up to the round trip's less the residual, the residual's largest stated, the cost
/// measured. Returns the path timing.
fn check_path_timing(doc: &Value, what: &str) -> Value {
    assert_eq!(doc["settings"]["path_timing"], true, "{what}");
    let pt = doc["points"][0]["path_timing"].clone();
    assert!(pt.is_object(), "{what}: no path_timing in {doc}");
    let messages = u(&pt["messages"]);
    assert!(messages > 0, "{what}: {pt}");
    let stages = pt["stages"].as_array().expect("stages");
    assert!(!stages.is_empty(), "{what}");
    let mut sum = 0.0;
    for s in stages {
        assert_eq!(u(&s["samples"]), messages, "{what}: {s}");
        assert!(u(&s["min_ns"]) <= u(&s["p50_ns"]), "{what}: {s}");
        assert!(u(&s["p50_ns"]) <= u(&s["p99_ns"]), "{what}: {s}");
        sum += f(&s["mean_ns"]);
    }
    let (rtt, residual) = (f(&pt["rtt_mean_ns"]), f(&pt["residual_mean_ns"]));
    // By construction, up to the floating sums' rounding.
    assert!(
        (sum + residual - rtt).abs() <= 1e-6 * rtt + 1.0,
        "{what}: stages {sum} + residual {residual} != rtt {rtt}"
    );
    assert!(
        (rtt - sum).abs() <= residual.abs() + 1e-6 * rtt + 1.0,
        "{what}"
    );
    let max_abs = u(&pt["residual_max_abs_ns"]);
    assert!(max_abs as f64 >= residual.abs() - 1.0, "{what}: {pt}");
    let cost = &pt["cost"];
    assert!(u(&cost["unstamped"]) > 0, "{what}: {cost}");
    assert!(f(&cost["ratio_low"]) <= f(&cost["ratio"]), "{what}: {cost}");
    assert!(
        f(&cost["ratio"]) <= f(&cost["ratio_high"]),
        "{what}: {cost}"
    );
    assert!(cost["method"].as_str().is_some_and(|m| !m.is_empty()));
    // The point's own figures are the unstamped round trips': as many as the cost's
    // unstamped ones (no run here reaches the cap), none of the stamped ones.
    let latency = &doc["points"][0]["latency"];
    assert_eq!(
        u(&latency["transactions"]),
        u(&cost["unstamped"]),
        "{what}: {latency}"
    );
    assert_eq!(
        u(&latency["rtt"]["samples"]),
        u(&cost["unstamped"]),
        "{what}"
    );
    pt
}

/// On loopback one kernel stamps both ends: a shared clock, every stage of its own.
fn loopback(transport: &str, serve: &[&str]) -> Value {
    let server = Server::start(serve);
    let doc = run_json(&[
        "pingpong",
        "-t",
        transport,
        "--to",
        &server.addr,
        "--path-timing",
        "--no-save",
        "-n",
        "200",
        "--size",
        "1K",
    ]);
    let pt = check_path_timing(&doc, transport);
    assert_eq!(pt["clock"]["kind"], "shared", "{transport}: {pt}");
    let names: Vec<&str> = pt["stages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, STAGES, "{transport}: loopback stamps every instant");
    // 200 timed round trips, every other one stamped; none lost on loopback.
    assert_eq!(u(&pt["messages"]) + u(&pt["incomplete"]), 100, "{pt}");
    assert_eq!(u(&pt["cost"]["unstamped"]), 100, "{pt}");
    pt
}

#[test]
fn loopback_tcp_path_timing_stages_add_up_to_the_round_trip() {
    let pt = loopback("tcp", &[]);
    // TCP's ACK of the request is stamped too, outside the sum.
    let ack = &pt["client_driver_to_ack"];
    assert_eq!(u(&ack["samples"]), u(&pt["messages"]), "{pt}");
}

#[test]
fn loopback_udp_path_timing_stages_add_up_to_the_round_trip() {
    let pt = loopback("udp", &[]);
    assert!(pt["client_driver_to_ack"].is_null(), "{pt}");
}

#[test]
fn loopback_raw_path_timing_stages_add_up_to_the_round_trip() {
    if !require(&[Need::Root]) {
        return;
    }
    loopback("raw", &["--permit", "raw"]);
}

/// Refused before any connection: one line, a non-zero exit.
#[test]
fn path_timing_outside_one_closed_loop_round_trip_is_one_clear_line() {
    for (args, needle) in [
        (vec!["stream"], "applies to pingpong and rr"),
        (vec!["pingpong", "-t", "quic"], "quic has none"),
        (vec!["rr", "--burst", "4"], "--burst"),
        (vec!["pingpong", "-P", "2"], "-P"),
        (
            vec!["rr", "--arrivals", "poisson", "--rate", "1k/s"],
            "--arrivals",
        ),
    ] {
        let mut all = vec!["run"];
        all.extend_from_slice(&args);
        all.extend_from_slice(&["--path-timing", "--to", "127.0.0.1:1", "--no-save"]);
        let line = refusal(&run(&all), &format!("{args:?}"));
        assert!(line.contains("--path-timing"), "{args:?}: {line}");
        assert!(line.contains(needle), "{args:?}: {line}");
    }
}

/// The lab's done-when: a 1 KiB UDP ping-pong over 1 ms each way at 1 Gbit/s. The wire stages
/// run from one kernel's driver stamp to the other's arrival stamp, so each is the link's
/// configured delay plus the frame's time at the link's rate (the lab's default framing
/// charges the frame from its Ethernet header: 1024 + UDP 8 + IPv4 20 + Ethernet 14 = 1066
/// bytes, 8 528 ns at 1 Gbit/s), and the host's share (veth, the delay line's hand-over) is
/// small beside 3% of it. Compared with the lab's own setting, not with a host's speed.
#[test]
fn lab_wire_stages_are_the_links_delay_and_the_frames_time() {
    if !require(Need::LAB) {
        return;
    }
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let doc = lab_run(
        "pt",
        &["--rate", "1gbit", "--delay", "1ms"],
        &[
            "pingpong",
            "-t",
            "udp",
            "--path-timing",
            "--no-save",
            "-n",
            "200",
            "--size",
            "1K",
        ],
    );
    let pt = check_path_timing(&doc, "lab");
    // The lab's namespaces share one kernel, hence one clock.
    assert_eq!(pt["clock"]["kind"], "shared", "{pt}");
    // The guard held the wire stages to the link's delay and wire time, and they kept it.
    assert_eq!(pt["validity"]["valid"], true, "{pt}");
    let expected = 1_000_000.0 + 1066.0 * 8.0;
    let stage = |name: &str| -> Value {
        pt["stages"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["name"] == name)
            .unwrap_or_else(|| panic!("no {name} stage in {pt}"))
            .clone()
    };
    for name in ["wire_out", "wire_back"] {
        let s = stage(name);
        // veth stamps its transmits: the wire stage stands alone.
        assert!(s["merged"].is_null(), "{name}: {s}");
        let p50 = u(&s["p50_ns"]) as f64;
        assert!(
            (p50 - expected).abs() <= 0.03 * expected,
            "{name}: p50 {p50} ns vs {expected} ns (1 ms + the frame at 1 Gbit/s)"
        );
    }
    eprintln!(
        "lab path timing: wire_out p50 {} ns, wire_back p50 {} ns, residual mean {} ns, max {} ns",
        stage("wire_out")["p50_ns"],
        stage("wire_back")["p50_ns"],
        pt["residual_mean_ns"],
        pt["residual_max_abs_ns"]
    );
}
