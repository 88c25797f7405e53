//! The instruments read around each point: counter deltas and where the loss happened, checked
//! against the kernel's own counters read by the test around the run, in a network namespace
//! of the test's own (so that no other test's traffic is counted).

// Helpers outside #[test] fns fail their test by panicking, as the tests do (clippy.toml).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::process::{Command, Stdio};

use serde_json::Value;

use common::need::{require, Need};
use common::{rcvbuf_errors_in, u};

/// Runs `wirebench ARGS` in a new network namespace with loopback up, and gives the
/// namespace's /proc/net/snmp text before and after the run, and the run's JSON document.
fn run_isolated(args: &[&str]) -> (String, String, Value) {
    let exe = env!("CARGO_BIN_EXE_wirebench");
    // Root unshares the namespace directly; anyone else through a user namespace.
    let unshare: &[&str] = if nix::unistd::geteuid().is_root() {
        &["--net"]
    } else {
        &["--user", "--map-root-user", "--net"]
    };
    let script = format!(
        "ip link set lo up && cat /proc/net/snmp && echo '=====' && \"$0\" run {} && echo '=====' && cat /proc/net/snmp",
        args.join(" ")
    );
    let out = Command::new("unshare")
        .args(unshare)
        .args(["sh", "-c", &script, exe])
        .env(
            "XDG_DATA_HOME",
            std::env::temp_dir().join(format!("wirebench-tests-{}", std::process::id())),
        )
        .stdin(Stdio::null())
        .output()
        .expect("unshare runs");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{args:?} in a namespace of its own failed: {}\n{stdout}",
        String::from_utf8_lossy(&out.stderr)
    );
    let parts: Vec<&str> = stdout.split("=====\n").collect();
    assert_eq!(parts.len(), 3, "{stdout}");
    let doc = serde_json::from_str(parts[1]).expect("one JSON document");
    (parts[0].to_owned(), parts[2].to_owned(), doc)
}

/// A UDP stream into a tiny receive buffer on loopback: the receiver socket drops datagrams.
/// The point's RcvbufErrors delta is what the kernel counted around the whole run, and the
/// loss put on the receiver socket is all of the loss the counters explain.
#[test]
fn udp_receive_buffer_drops_are_counted_and_put_on_the_receiver_socket() {
    // The namespace's loopback is brought up with `ip`.
    if !require(&[Need::Iproute2]) {
        return;
    }
    let (before, after, v) = run_isolated(&[
        "stream",
        "-t",
        "udp",
        "--size",
        "1400",
        "--rate",
        "2G",
        "-d",
        "300ms",
        "--rcvbuf",
        "4K",
        "--warmup",
        "0",
        "--json",
        "--no-save",
    ]);
    let kernel = rcvbuf_errors_in(&after) - rcvbuf_errors_in(&before);
    let p = &v["points"][0];
    let counters = &p["counters"];
    assert_eq!(counters["same_host"], true, "{counters}");
    assert!(counters["server"].is_null(), "{counters}");
    assert_eq!(p["host_cpu"]["same_host"], true);
    assert!(p["host_cpu"]["client"]["cpus"].as_u64().unwrap() >= 1);
    let reported = u(&counters["client"]["kernel"]["Udp.RcvbufErrors"]);
    assert_eq!(
        reported, kernel,
        "the point's delta against the test's own reading"
    );
    assert!(
        kernel > 0,
        "2 Gbit/s into a 4 KiB receive buffer dropped nothing: the test checked nothing"
    );

    let a = &p["loss_attribution"][0];
    assert_eq!(a["direction"], "client_to_server");
    let lost = u(&a["lost"]);
    assert_eq!(lost, u(&p["stream"]["totals"][0]["loss"]["lost"]));
    let unexplained = a["unexplained"].as_u64().unwrap_or(0);
    let receiver_socket: u64 = a["causes"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["place"] == "receiver_socket")
        .map(|c| u(&c["count"]))
        .sum();
    let over = a["over_counted"].as_u64().unwrap_or(0);
    eprintln!("lost {lost}, unexplained {unexplained}, over-counted {over}, RcvbufErrors {kernel}");
    // Nothing else in this namespace can drop a datagram on loopback: every cause is the
    // receiver socket's, and it explains the loss exactly.
    assert_eq!(receiver_socket, lost - unexplained + over, "{a}");
    assert_eq!(a["causes"].as_array().unwrap().len(), 1, "{a}");
    assert_eq!(a["causes"][0]["counter"], "Udp.RcvbufErrors");
    assert_eq!(receiver_socket, reported);
}
