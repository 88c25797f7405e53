//! `--load` over emulated links whose rate and queue are known: the background load's
//! datagrams accounted for by the lab's own counters, and latency idle against loaded on a
//! bufferbloated link. Needs what tests/lab.rs needs (root, iproute2, nftables); without it
//! each test says `SKIPPED <test>: <reason>` on stderr and returns.
//!
//! Nothing here asserts a rate or a time: on a loaded two-CPU host the load's rate is
//! whatever the closed loop achieves; what must hold is that every datagram is counted once
//! and that queueing never makes a round trip faster.

// Helpers outside #[test] fns fail their test by panicking, as the tests do (clippy.toml).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::lab::{
    delay_line_forward_counters, lab_up, run_on_lab, udp_receive_buffer_errors, SERIAL,
};
use common::need::{require, Need};
use common::{f, u};

/// A UDP load above the link's rate: every datagram the load's receiver missed was dropped
/// by the lab's queue or by the receiving socket (the kernel's count), none elsewhere; and
/// the bytes the load reports are the datagrams it received.
#[test]
fn a_udp_load_s_losses_are_the_lab_s_queue_drops() {
    if !require(Need::LAB) {
        return;
    }
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    // A queue of bytes that no whole number of the load's datagrams fills (1442 to 1470 wire
    // bytes each leave 342 bytes or more unused): the measured rr's handshake and its small
    // segments always find room. With 50 packets each SYN found the queue full about half
    // the time, and four lost in a row timed the data connection out (CI, session 16).
    let (name, _) = lab_up("ldu", &["--rate", "10mbit", "--queue", "71000B"]);
    let ns_b = format!("wb-{}-b", name.0);
    let rcvbuf_before = udp_receive_buffer_errors(&ns_b);
    // rr over TCP: the only UDP on the link is the load's.
    let v = run_on_lab(
        &name.0,
        &[
            "rr",
            "-d",
            "2s",
            "--load",
            "udp:20M",
            "--load-only",
            "--no-save",
        ],
    );
    let load = &v["points"][0]["load"];
    let sent = u(&load["datagrams_sent"]);
    let lost = u(&load["datagrams_lost"]);
    let received: u64 = load["intervals"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| u(&i["received_bytes"]))
        .sum();
    assert!(
        lost > 0,
        "20 Mbit/s into a 10 Mbit/s link lost nothing: {load}"
    );
    assert_eq!(received, (sent - lost) * 1400, "{load}");
    let fwd = delay_line_forward_counters(&name.0, received);
    let rcvbuf = udp_receive_buffer_errors(&ns_b) - rcvbuf_before;
    assert_eq!(
        lost,
        u(&fwd["dropped_queue_udp_segments"]) + rcvbuf,
        "load {load}\nlab a->b {fwd}\nreceive buffer errors on b {rcvbuf}"
    );
    // Not `covered`: UDP load runs in intervals with a gap between them, and whether the
    // measured phase ended inside a gap depends on the host's load (the field says which).
    assert!(load["covered"].is_boolean(), "{load}");
    assert!(f(&load["target_bits_per_s"]) == 20e6);
}

/// Pingpong idle, then under a TCP load, over a slow link with a long queue: the loaded
/// round trips wait behind the queue the load keeps full, so their median cannot be below
/// the idle one; both phases have enough samples, and the load covered the loaded phase.
#[test]
fn latency_under_load_on_a_bufferbloated_link_is_not_faster_than_idle() {
    if !require(Need::LAB) {
        return;
    }
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let v = common::lab::lab_run(
        "ldl",
        &["--rate", "5mbit", "--delay", "1ms", "--queue", "200p"],
        &["pingpong", "-d", "2s", "--load", "tcp:1", "--no-save"],
    );
    let p = &v["points"][0];
    let u_l = &p["under_load"];
    let (idle, loaded) = (&u_l["idle"], &u_l["loaded"]);
    println!("idle {idle}\nloaded {loaded}\nload {}", p["load"]);
    assert_eq!(idle["valid"], true, "{idle}");
    assert_eq!(loaded["valid"], true, "{loaded}");
    assert!(u(&loaded["p50_ns"]) >= u(&idle["p50_ns"]), "{u_l}");
    assert!(f(&loaded["rpm"]) > 0.0 && f(&idle["rpm"]) > 0.0);
    assert_eq!(p["load"]["covered"], true, "{}", p["load"]);
    assert_eq!(p["load"]["transport"], "tcp");
    // The table's headline is the loaded phase's.
    assert_eq!(
        u(&p["latency"]["rtt"]["samples"]),
        u(&loaded["samples"]),
        "{p}"
    );
}

/// Two TCP flows with different congestion controls over one 20 Mbit/s link: what their
/// receivers got is what the link forwarded a->b less the segments' headers and the small
/// control traffic, and the report holds both flows, shares that add up and Jain's index.
#[test]
fn two_competing_flows_are_what_the_link_carried() {
    if !require(Need::LAB) {
        return;
    }
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let (name, _) = lab_up("lfc", &["--rate", "20mbit", "--delay", "5ms"]);
    let v = run_on_lab(
        &name.0,
        &[
            "stream",
            "-d",
            "3s",
            "-i",
            "500ms",
            "--cc",
            "cubic",
            "--compete",
            "tcp:reno",
            "--no-save",
        ],
    );
    let fair = &v["points"][0]["fairness"];
    let flows = fair["flows"].as_array().unwrap();
    assert_eq!(flows.len(), 2, "{fair}");
    assert_eq!(flows[0]["flow"], "tcp:cubic");
    assert_eq!(flows[1]["flow"], "tcp:reno");
    let shares: f64 = flows.iter().map(|x| f(&x["share"])).sum();
    assert!((shares - 1.0).abs() < 1e-9, "{fair}");
    let jain = f(&fair["jain"]);
    assert!((0.5..=1.0).contains(&jain), "{fair}");
    // The intervals tile the span every flow was timed in (how long that is depends on
    // when each flow's phase started and ended: not asserted).
    let intervals = fair["intervals"].as_array().unwrap();
    assert!(!intervals.is_empty(), "{fair}");
    assert_eq!(
        intervals[0]["start_ns"], fair["common_span"]["start_ns"],
        "{fair}"
    );
    assert_eq!(
        intervals[intervals.len() - 1]["end_ns"],
        fair["common_span"]["end_ns"],
        "{fair}"
    );
    for w in intervals.windows(2) {
        assert_eq!(w[0]["end_ns"], w[1]["start_ns"], "{fair}");
    }
    let payload: u64 = flows.iter().map(|x| u(&x["bytes_all"])).sum();
    let fwd = delay_line_forward_counters(&name.0, payload);
    let frame_bytes = u(&fwd["bytes_out"]);
    // Every payload byte crossed the link inside a frame. Beyond the payload the frames held
    // headers (66 bytes per segment of up to 1448 at most, under 5%; GSO frames count theirs
    // once), the retransmissions of what the queue dropped, and three control connections and
    // the handshakes (well under 256 KiB with the retransmissions of a 3 s run at 20 Mbit/s).
    assert!(frame_bytes >= payload, "link {fwd}, flows {payload}");
    assert!(
        frame_bytes - payload <= payload / 20 + 256 * 1024,
        "link {fwd}, flows {payload}"
    );
}

/// The competing flows that once added up to more than the link (`--rate 50mbit --delay 2ms`, `--compete tcp:reno`), timed on one
/// clock: the report has the span every flow was timed in, its intervals lie within it, and
/// the bytes the flows received in it add up to no more than the delay line forwarded (the
/// lab's own counter). Nothing here is a rate a loaded host could break.
#[test]
fn competing_flows_are_timed_over_a_common_span_on_one_clock() {
    if !require(Need::LAB) {
        return;
    }
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let (name, _) = lab_up("cmp", &["--rate", "50mbit", "--delay", "2ms"]);
    let v = run_on_lab(
        &name.0,
        &[
            "stream",
            "-d",
            "3s",
            "-i",
            "1s",
            "--compete",
            "tcp:reno",
            "--no-save",
        ],
    );
    let fair = &v["points"][0]["fairness"];
    let span = &fair["common_span"];
    let (start, end) = (u(&span["start_ns"]), u(&span["end_ns"]));
    assert!(end > start, "{fair}");
    for i in fair["intervals"].as_array().unwrap() {
        assert!(
            u(&i["start_ns"]) >= start && u(&i["end_ns"]) <= end,
            "an interval outside the common span: {fair}"
        );
    }
    let flows = fair["flows"].as_array().unwrap();
    assert_eq!(flows.len(), 2, "{fair}");
    let in_span: u64 = flows.iter().map(|x| u(&x["bytes"])).sum();
    let all: u64 = flows.iter().map(|x| u(&x["bytes_all"])).sum();
    assert!(in_span <= all, "{fair}");
    let fwd = delay_line_forward_counters(&name.0, all);
    assert!(
        in_span <= u(&fwd["bytes_out"]),
        "the flows got {in_span} bytes in their common span, the link forwarded {fwd}"
    );
    eprintln!(
        "common span {:.3} s: flows {in_span} bytes in it ({:.2} Mbit/s together), {all} in all, link {}",
        (end - start) as f64 / 1e9,
        flows.iter().map(|x| f(&x["bits_per_s"])).sum::<f64>() / 1e6,
        u(&fwd["bytes_out"])
    );
}
