//! The seeds' links and slow end systems in the lab: an ATM link whose round trips step by a
//! cell's wire time every 48 bytes, and a receiving host under a CPU budget that drops at its
//! own socket what it cannot read. Needs root (CI runs as root); every lab has a name of its
//! own and is removed even when a test fails (and with it its CPU cgroup). Checks what load
//! cannot break: minima of round trips (only ever lengthened by load), within wide bounds;
//! the delay line's cell count exactly; the direction of a loss and where it was counted.
//! Without root or iproute2 each test says `SKIPPED <test>: <reason>` on stderr and
//! returns (a failure with WIREBENCH_REQUIRE_ALL=1); WIREBENCH_SKIP_LAB=1 leaves them out.

// Helpers outside #[test] fns fail their test by panicking, as the tests do (clippy.toml).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use common::lab::{lab_up, run_on_lab, SERIAL};
use common::need::{require, Need};
use common::u;
use serde_json::Value;

/// Labs without random loss: namespaces and links, no nftables rules.
const LINK_ONLY: &[Need] = &[Need::Root, Need::Iproute2];

/// One 53-byte cell at 10 Mbit/s, nanoseconds.
const CELL_NS: f64 = 53.0 * 8.0 / 10e6 * 1e9;

/// Minimum round trip of each point of a ping-pong sweep, by size.
fn min_rtt_by_size(v: &Value) -> BTreeMap<u64, f64> {
    v["points"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            (
                u(&p["key"]["size"]),
                u(&p["latency"]["rtt"]["min_ns"]) as f64,
            )
        })
        .collect()
}

/// The a->b counters of lab `name`'s delay line, read now.
fn forward_now(name: &str) -> wirebench::lab::delayline::CountersSnapshot {
    wirebench::lab::delay_line_stats_now(name)
        .expect("the delay line answers")
        .forward
}

/// On an AAL5 link of 10 Mbit/s a UDP datagram of n bytes is 8 + 28 + n + 8 bytes in cells:
/// one more cell each way at n = 5, 53, 101, ... The fastest round trip of each size steps
/// there by two cells' wire time (84.8 us) and the delay line counts exactly the cells of
/// what crossed it.
#[test]
fn an_atm_link_steps_every_48_bytes_by_two_cells() {
    if !require(LINK_ONLY) {
        return;
    }
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let (name, up) = lab_up("cell", &["--rate", "10M", "--framing", "atm-aal5"]);
    assert!(up.contains("framing atm-aal5"), "{up}");
    // Sizes around two cell boundaries, 200 exchanges each: the minimum is the exchange the
    // host left alone.
    let v = run_on_lab(
        &name.0,
        &[
            "pingpong",
            "-t",
            "udp",
            "--size",
            "48..56:+1,98..104:+1",
            "-n",
            "200",
        ],
    );
    let min = min_rtt_by_size(&v);
    let expected = 2.0 * CELL_NS;
    for (below, at) in [(52, 53), (100, 101)] {
        let step = min[&at] - min[&below];
        assert!(
            step >= 0.5 * expected && step <= 1.6 * expected,
            "min RTT {below} B {} ns -> {at} B {} ns: step {step} ns, two cells take {expected} ns",
            min[&below],
            min[&at]
        );
    }
    // Exactly the cells of what crossed: datagrams of 60 bytes (an 88-byte IP packet: 104
    // bytes in 3 cells) sent from host a to a port nobody listens on. A frame of something
    // else that crossed meanwhile (an ARP probe) is seen in the frame count: then again.
    const N: u64 = 50;
    let mut matched = false;
    for _ in 0..3 {
        let before = forward_now(&name.0);
        wirebench::lab::in_netns(&format!("wb-{}-a", name.0), || {
            let s = std::net::UdpSocket::bind("10.77.0.1:0")?;
            for _ in 0..N {
                s.send_to(&[0u8; 60], "10.77.0.2:9")?;
            }
            Ok(())
        })
        .unwrap();
        // 50 x 3 cells at 10 Mbit/s leave the wire in 6.4 ms.
        std::thread::sleep(Duration::from_millis(300));
        let after = forward_now(&name.0);
        let frames = after.frames_out - before.frames_out;
        let dropped = after.dropped_queue_full - before.dropped_queue_full;
        assert_eq!(dropped, 0);
        if frames != N {
            continue;
        }
        assert_eq!(after.cells_out - before.cells_out, 3 * N);
        assert_eq!(after.wire_bytes_out - before.wire_bytes_out, 3 * 53 * N);
        matched = true;
        break;
    }
    assert!(matched, "other frames crossed the link in each of 3 tries");
}

/// A UDP stream's server on host b, and its loss and the server's kernel counters.
fn udp_stream_loss(lab: &str) -> (u64, u64, u64) {
    let v = run_on_lab(
        lab,
        &[
            "stream", "-t", "udp", "--size", "64", "--rate", "40kpps", "-d", "2s",
        ],
    );
    let p = &v["points"][0];
    let loss = &p["stream"]["totals"][0]["loss"];
    let server = &p["counters"]["server"]["kernel"];
    (
        u(&loss["sent"]),
        u(&loss["lost"]),
        u(&server["Udp.RcvbufErrors"]),
    )
}

/// Seed 004's end system as the bottleneck: 40 000 datagrams of 64 bytes a second into a
/// receiver held to 10% of a CPU (1 ms of CPU time every 10 ms) overflow its socket while it
/// waits for its next millisecond, and the receiving host's kernel counts the loss at that
/// socket (Udp.RcvbufErrors). Only the direction is asserted: a loaded host may drop some
/// without the budget too (printed for the record).
#[test]
fn a_receiver_held_to_a_tenth_of_a_cpu_drops_at_its_own_socket() {
    if !require(LINK_ONLY) {
        return;
    }
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let (name, up) = lab_up("slow", &["--host-cpu", "b=10%"]);
    assert!(
        up.contains("host b: CPU budget 10% of one CPU (1000 us every 10000 us"),
        "{up}"
    );
    let cgroup = common::run(&["lab", "status", "--name", &name.0, "--json"]);
    let status: Value = serde_json::from_slice(&cgroup.stdout).unwrap();
    let budget = &status[0]["lab"]["host_cpu"][0];
    assert_eq!(
        (u(&budget["quota_us"]), u(&budget["period_us"])),
        (1_000, 10_000)
    );
    let dir = budget["cgroup"].as_str().unwrap().to_owned();
    assert!(Path::new(&dir).exists(), "{dir}");
    let (sent, lost, rcvbuf) = udp_stream_loss(&name.0);
    eprintln!("with b=10%: {lost} of {sent} datagrams lost, Udp.RcvbufErrors {rcvbuf}");
    assert!(lost > 0, "no loss of {sent} datagrams under a 10% budget");
    assert!(
        rcvbuf * 10 >= lost * 9,
        "{lost} lost, of which the receiving socket counted {rcvbuf}"
    );
    drop(name);
    // The budget went with the lab.
    assert!(!Path::new(&dir).exists(), "{dir} left behind");
    let (name, _) = lab_up("full", &[]);
    let (sent, lost, rcvbuf) = udp_stream_loss(&name.0);
    eprintln!("without a budget: {lost} of {sent} datagrams lost, Udp.RcvbufErrors {rcvbuf}");
}
