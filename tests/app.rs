//! `wirebench app` as P local processes over TCP on loopback: the answers are checked by the
//! kernels themselves (a wrong one is an error), so these tests check exit codes and exact
//! counts, never a time.

// Helpers outside #[test] fns fail their test by panicking, as the tests do (clippy.toml).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::process::Stdio;
use std::time::{Duration, Instant};

use serde_json::Value;

/// `wirebench app ARGS --json --no-save`, asserting success: the document.
fn app_json(args: &[&str]) -> Value {
    let mut all = vec!["app"];
    all.extend_from_slice(args);
    all.extend_from_slice(&["--json", "--no-save"]);
    let out = common::run(&all);
    let v = common::json_document(&format!("wirebench {all:?}"), &out);
    assert_eq!(v["schema"], "wirebench.app");
    v
}

fn u(v: &Value) -> u64 {
    v.as_u64().unwrap_or_else(|| panic!("not a count: {v}"))
}

#[test]
fn matmul_over_2_3_and_4_local_processes_reports_every_size_and_rank() {
    for (p, grid) in [("2", "1x2"), ("3", "1x3"), ("4", "2x2")] {
        let v = app_json(&["matmul", "--ranks", p, "--n", "8,17", "--repetitions", "3"]);
        assert_eq!(v["grid"], grid);
        assert_eq!(v["launch"], "local processes");
        let points = v["points"].as_array().unwrap();
        assert_eq!(points.len(), 2);
        assert_eq!(u(&points[1]["n"]), 17);
        assert_eq!(u(&points[1]["parallel_s"]["n"]), 3);
        assert_eq!(u(&points[1]["sequential_s"]["n"]), 3);
        assert_eq!(
            points[1]["ranks"].as_array().unwrap().len(),
            p.parse::<usize>().unwrap()
        );
        assert_eq!(
            points[1]["check"],
            "C equals the sequential product exactly (all 289 entries)"
        );
    }
}

#[test]
fn matmul_data_volumes_follow_the_striping() {
    // 2x2 grid, n = 16: rank 3 receives an 8 x 16 stripe of A and a 16 x 8 stripe of B.
    let v = app_json(&["matmul", "--ranks", "4", "--n", "16", "--repetitions", "2"]);
    let ranks = &v["points"][0]["ranks"];
    assert_eq!(u(&ranks[3]["received_bytes"]), 2 * 8 * 16 * 8);
    // Rank 0 receives the three other blocks of C, 8 x 8 each.
    assert_eq!(u(&ranks[0]["received_bytes"]), 3 * 8 * 8 * 8);
}

#[test]
fn jacobi_over_4_local_processes_matches_the_sequential_sweeps() {
    let v = app_json(&[
        "jacobi",
        "--ranks",
        "4",
        "--n",
        "12",
        "--repetitions",
        "2",
        "--tolerance",
        "1e-2",
    ]);
    let p = &v["points"][0];
    assert!(u(&p["relaxation"]["iterations"]) > 1);
    assert_eq!(
        p["check"],
        "the same sweeps to the same residual as the sequential run, bit for bit"
    );
}

#[test]
fn chunks_deliver_the_volume_to_the_clients() {
    let v = app_json(&[
        "chunks",
        "--ranks",
        "3",
        "--chunk",
        "64K",
        "--volume",
        "1M",
        "--think",
        "0s",
        "--repetitions",
        "2",
    ]);
    let ranks = v["points"][0]["ranks"].as_array().unwrap();
    // 16 chunks dealt in turn to ranks 1 and 2.
    assert_eq!(u(&ranks[1]["received_bytes"]), 8 * 65536);
    assert_eq!(u(&ranks[2]["received_bytes"]), 8 * 65536);
}

/// `--load` runs beside the whole job and the report says what it did: counts only (the
/// load's rate depends on the host's load; its datagrams' count does not vanish).
#[test]
fn a_job_beside_background_load_reports_the_load() {
    let v = app_json(&[
        "matmul",
        "--ranks",
        "2",
        "--n",
        "16",
        "--repetitions",
        "3",
        "--load",
        "udp:20M",
    ]);
    let load = &v["load"];
    assert_eq!(load["spec"], "udp:20M", "{load}");
    assert_eq!(load["transport"], "udp");
    assert_eq!(load["target_bits_per_s"].as_f64(), Some(20e6));
    assert!(u(&load["datagrams_sent"]) > 0, "{load}");
    assert!(u(&load["datagrams_lost"]) <= u(&load["datagrams_sent"]));
    assert!(u(&load["elapsed_ns"]) > 0);
    // The load began before the job and was stopped after it.
    assert_eq!(load["covered"], true, "{load}");
    assert!(load["server"].as_str().unwrap().starts_with("127.0.0.1:"));
    assert_eq!(v["points"][0]["parallel_s"]["n"], 3);
    // Without --load there is none.
    let v = app_json(&["matmul", "--ranks", "2", "--n", "16", "--repetitions", "1"]);
    assert!(v["load"].is_null());
    // A share of a lab link needs the lab: refused in one line.
    let out = common::run(&[
        "app",
        "matmul",
        "--ranks",
        "2",
        "--load",
        "30%",
        "--no-save",
    ]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("udp:RATE or tcp:N"), "{err}");
}

#[test]
fn a_datagram_transport_is_refused_in_one_line() {
    let out = common::run(&["app", "matmul", "-t", "udp", "--ranks", "2", "--no-save"]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("udp is not one"), "{err}");
}

#[test]
fn a_failing_child_rank_is_one_line_and_no_hang() {
    // Every rank's namespace is missing: rank 0 and the children all fail at once.
    let out = common::run(&[
        "app",
        "matmul",
        "--ranks",
        "3",
        "--n",
        "8",
        "--netns-from-rank",
        "wb-app-test-missing-",
        "--no-save",
    ]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("wb-app-test-missing-"), "{err}");
}

/// The child ranks of a local job whose rank 0 has process id `parent`.
fn children_of(parent: u32) -> Vec<u32> {
    let mut pids = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(cmd) = std::fs::read(e.path().join("cmdline")) else {
            continue;
        };
        let args: Vec<&[u8]> = cmd.split(|b| *b == 0).collect();
        let is_rank = args.iter().any(|a| *a == b"__app-rank");
        let ours = args
            .windows(2)
            .any(|w| w[0] == b"--parent" && w[1] == parent.to_string().as_bytes());
        if is_rank && ours {
            pids.push(pid);
        }
    }
    pids
}

#[test]
fn the_children_die_with_rank_0() {
    let mut parent = common::bin()
        .args([
            "app",
            "chunks",
            "--ranks",
            "3",
            "--chunk",
            "8",
            "--volume",
            "1K",
            "--think",
            "10s",
            "--no-save",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let pid = parent.id();
    let deadline = Instant::now() + Duration::from_secs(60);
    while children_of(pid).len() < 2 {
        assert!(Instant::now() < deadline, "the child ranks never started");
        std::thread::sleep(Duration::from_millis(20));
    }
    parent.kill().unwrap();
    parent.wait().unwrap();
    while !children_of(pid).is_empty() {
        assert!(
            Instant::now() < deadline,
            "child ranks outlived rank 0: {:?}",
            children_of(pid)
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}
