//! `wirebench mesh` under Open MPI's `mpirun`: four ranks on this machine, each rank's data in
//! a host of an N-host lab (`wirebench lab up --hosts 4`: feature `mpi`; needs root, iproute2
//! and nftables for the lab, and `mpirun`; a test without them says SKIPPED). Run with
//! `cargo test --release --locked --features mpi --test mesh`.
//!
//! The lab is a star: every host has its own link to one switch, and host 3's link delays
//! each direction by a known amount (the delay line, so no netem is needed). Exact checks on
//! what was measured (every ordered pair once, in rounds that share no rank, counts, the
//! document's shape); the physics only as bounds: host 3's pairs take at least the delay each
//! way, the others less.

// Helpers outside #[test] fns fail their test by panicking, as the tests do (clippy.toml).
#![allow(clippy::unwrap_used, clippy::expect_used)]
#![cfg(feature = "mpi")]

mod common;

use std::collections::BTreeSet;
use std::process::Output;
use std::sync::Mutex;

use common::lab::LabName;
use common::need::{require, Need};
use common::{f, u};
use serde_json::Value;

/// MPI jobs poll while they wait: one at a time, so that they do not measure each other.
static ONE_JOB_AT_A_TIME: Mutex<()> = Mutex::new(());

/// Host 3's link delay in each direction, milliseconds.
const DELAY_MS: f64 = 3.0;
/// The rank behind it.
const DELAYED: u64 = 3;

/// The four-host lab; `lab down` when dropped, whatever happened.
fn four_hosts() -> LabName {
    let delayed = format!("{DELAYED}=delay={DELAY_MS}ms");
    common::lab::lab_up("mesh", &["--hosts", "4", "--host-link", &delayed]).0
}

/// The namespace prefix of a lab's hosts: rank r runs in wb-NAME-h<r>.
fn host_prefix(lab: &LabName) -> String {
    format!("wb-{}-h", lab.0)
}

/// `mpirun -np N` of this build's binary with `args`; MPI's own messages over loopback.
fn mpirun(np: usize, args: &[&str]) -> Output {
    common::mpirun(np, common::MPI_TCP_ON_LOOPBACK, args)
}

fn mesh_json(np: usize, args: &[&str]) -> Value {
    let mut all = vec!["mesh"];
    all.extend_from_slice(args);
    all.push("--json");
    let out = mpirun(np, &all);
    let v = common::json_document(&format!("mpirun wirebench {all:?}"), &out);
    assert_eq!(v["schema"], "wirebench.run");
    assert_eq!(v["complete"], true, "{}", v["error"]);
    v
}

/// The pairs of the document and its rounds: every one in exactly one round, no rank twice in
/// a round.
fn pairs_and_rounds(mesh: &Value) -> Vec<(u64, u64)> {
    let mut scheduled = Vec::new();
    for round in mesh["rounds"].as_array().unwrap() {
        let mut busy = BTreeSet::new();
        for p in round.as_array().unwrap() {
            let (c, s) = (u(&p["client"]), u(&p["server"]));
            assert!(busy.insert(c) && busy.insert(s), "a rank twice in {round}");
            scheduled.push((c, s));
        }
    }
    let measured: Vec<(u64, u64)> = mesh["pairs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| (u(&p["client"]), u(&p["server"])))
        .collect();
    assert_eq!(measured, scheduled, "pairs in the order of the rounds");
    measured
}

#[test]
fn a_four_host_mesh_measures_every_ordered_pair_and_sees_the_delayed_host() {
    if !require(&[Need::Root, Need::Iproute2, Need::Nftables, Need::OpenMpi]) {
        return;
    }
    let _one = ONE_JOB_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let lab = four_hosts();
    let db = tempfile::tempdir().unwrap();
    let db_path = db.path().join("r.sqlite");
    let v = mesh_json(
        4,
        &[
            "pingpong",
            // A count, not a time, ends each point: on a loaded host a time would give fewer
            // samples than the floor of a valid mean (the cap is far beyond 40 x 6 ms).
            "-n",
            "40",
            "-d",
            "20s",
            "--netns-from-rank",
            &host_prefix(&lab),
            "--db",
            db_path.to_str().unwrap(),
        ],
    );
    let mesh = &v["mesh"];
    assert_eq!(v["points"].as_array().unwrap().len(), 0);
    let ranks = mesh["ranks"].as_array().unwrap();
    assert_eq!(ranks.len(), 4);
    for (r, rank) in ranks.iter().enumerate() {
        assert_eq!(rank["netns"], format!("{}{r}", host_prefix(&lab)));
        // Each rank's server on its host's own address.
        let addr = rank["address"].as_str().unwrap();
        assert!(
            addr.starts_with(&format!("10.77.0.{}:", r + 1)),
            "rank {r}: {addr}"
        );
    }
    let pairs = pairs_and_rounds(mesh);
    let unique: BTreeSet<_> = pairs.iter().copied().collect();
    assert_eq!((pairs.len(), unique.len()), (12, 12));
    assert!(unique.iter().all(|(c, s)| c != s && *c < 4 && *s < 4));
    // The circle method: 2(P-1) rounds of P/2 pairs.
    assert_eq!(mesh["rounds"].as_array().unwrap().len(), 6);
    for p in mesh["pairs"].as_array().unwrap() {
        assert_eq!(p["complete"], true, "{}", p["error"]);
        assert_eq!(p["points"].as_array().unwrap().len(), 1);
    }

    let matrices = mesh["matrices"].as_array().unwrap();
    assert_eq!(matrices.len(), 1);
    let lat = &matrices[0]["latency"];
    assert_eq!(lat["kind"], "one_way");
    assert!(matrices[0]["bandwidth"].is_null());
    let cells = lat["cells"].as_array().unwrap();
    assert_eq!(cells.len(), 12);
    for c in cells {
        let (from, to) = (u(&c["from"]), u(&c["to"]));
        // The cell is its pair's point, figure for figure.
        let pair = mesh["pairs"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| u(&p["client"]) == from && u(&p["server"]) == to)
            .unwrap();
        let point = &pair["points"][0]["latency"];
        assert_eq!(u(&c["samples"]), u(&point["rtt"]["samples"]));
        assert_eq!(f(&c["mean_ns"]), f(&point["one_way_mean_ns"]));
        assert_eq!(u(&c["samples"]), 40, "{c}");
        assert_eq!(c["valid"], true, "{c}");
        let mean_ms = f(&c["mean_ns"]) / 1e6;
        let p50_ms = f(&c["p50_ns"]) / 1e6;
        if from == DELAYED || to == DELAYED {
            assert!(
                mean_ms >= DELAY_MS && p50_ms >= DELAY_MS,
                "{from}->{to}: {c}"
            );
        } else {
            // The median, not the mean: one scheduling stall of a loaded host moves a mean of
            // 40 samples by milliseconds, while half of them would have to stall to move this.
            assert!(p50_ms < DELAY_MS, "{from}->{to}: {c}");
        }
    }

    // Saved as one run.
    let history = common::run(&["history", "--db", db_path.to_str().unwrap()]);
    let listed = String::from_utf8_lossy(&history.stdout);
    assert!(listed.contains("mesh of 4 ranks"), "{listed}");
    assert_eq!(listed.lines().filter(|l| l.contains("mesh of")).count(), 1);
}

#[test]
fn a_udp_stream_mesh_of_a_chosen_pair_gives_both_rates_each_way() {
    if !require(&[Need::OpenMpi]) {
        return;
    }
    let _one = ONE_JOB_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let v = mesh_json(
        3,
        &[
            "stream",
            "-t",
            "udp",
            "-b",
            "20M",
            "-d",
            "200ms",
            "--pairs",
            "0-2",
            "--serial",
            "--no-save",
        ],
    );
    let mesh = &v["mesh"];
    assert_eq!(pairs_and_rounds(mesh), [(0, 2), (2, 0)]);
    assert_eq!(mesh["serial"], true);
    let cells = mesh["matrices"][0]["bandwidth"]["cells"]
        .as_array()
        .unwrap();
    assert_eq!(cells.len(), 2);
    for c in cells {
        // Forward streams: the client sends.
        assert_eq!(c["from"], c["client"]);
        assert!(u(&c["receiver_bytes_timed"]) > 0 && u(&c["sender_bytes_timed"]) > 0);
        assert!(f(&c["sender_bits_per_s"]) > 0.0 && f(&c["receiver_bits_per_s"]) > 0.0);
        assert_eq!(u(&c["streams"]), 1);
    }
}

/// Over -t mpi every rank is a client and a server on its main thread: four ranks, so that two
/// pairs measure at once in each round (apart by their ranks, as MPI matches on the source).
/// Each cell is its pair's point, figure for figure, as over a socket transport.
#[test]
fn a_mesh_over_mpi_measures_every_ordered_pair_over_mpi_itself() {
    if !require(&[Need::OpenMpi]) {
        return;
    }
    let _one = ONE_JOB_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let sizes = [8u64, 1024];
    let v = mesh_json(
        4,
        &[
            "pingpong",
            "-t",
            "mpi",
            // A count ends each point (see the four-host test): 40 samples, each cell valid.
            "-n",
            "40",
            "-d",
            "20s",
            "--size",
            "8,1024",
            "--no-save",
        ],
    );
    let mesh = &v["mesh"];
    let ranks = mesh["ranks"].as_array().unwrap();
    assert_eq!(ranks.len(), 4);
    for (r, rank) in ranks.iter().enumerate() {
        // No server of its own: the data goes to the rank over MPI.
        assert_eq!(rank["address"], format!("MPI rank {r}"));
        assert!(rank["netns"].is_null());
    }
    let pairs = pairs_and_rounds(mesh);
    let unique: BTreeSet<_> = pairs.iter().copied().collect();
    assert_eq!((pairs.len(), unique.len()), (12, 12));
    assert!(unique.iter().all(|(c, s)| c != s && *c < 4 && *s < 4));
    let rounds = mesh["rounds"].as_array().unwrap();
    assert_eq!(rounds.len(), 6);
    assert!(rounds.iter().all(|r| r.as_array().unwrap().len() == 2));
    for p in mesh["pairs"].as_array().unwrap() {
        assert_eq!(p["complete"], true, "{}", p["error"]);
        let sent: Vec<u64> = p["points"]
            .as_array()
            .unwrap()
            .iter()
            .map(|pt| u(&pt["request_size"]))
            .collect();
        assert_eq!(sent, sizes);
    }

    let matrices = mesh["matrices"].as_array().unwrap();
    assert_eq!(matrices.len(), sizes.len());
    for (m, size) in matrices.iter().zip(sizes) {
        assert_eq!(u(&m["request_size"]), size);
        assert!(m["bandwidth"].is_null());
        let cells = m["latency"]["cells"].as_array().unwrap();
        let from_to: BTreeSet<(u64, u64)> =
            cells.iter().map(|c| (u(&c["from"]), u(&c["to"]))).collect();
        assert_eq!(from_to, unique, "one cell for every ordered pair");
        for c in cells {
            let (from, to) = (u(&c["from"]), u(&c["to"]));
            let pair = mesh["pairs"]
                .as_array()
                .unwrap()
                .iter()
                .find(|p| u(&p["client"]) == from && u(&p["server"]) == to)
                .unwrap();
            let point = pair["points"]
                .as_array()
                .unwrap()
                .iter()
                .find(|pt| u(&pt["request_size"]) == size)
                .unwrap();
            let latency = &point["latency"];
            assert_eq!(u(&c["samples"]), 40, "{c}");
            assert_eq!(u(&c["samples"]), u(&latency["rtt"]["samples"]));
            assert_eq!(f(&c["mean_ns"]), f(&latency["one_way_mean_ns"]));
            assert_eq!(c["valid"], true, "{c}");
        }
    }
}

#[test]
fn a_mesh_over_mpi_refuses_namespaces_and_addresses_in_one_line() {
    if !require(&[Need::OpenMpi]) {
        return;
    }
    let _one = ONE_JOB_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let out = mpirun(
        2,
        &[
            "mesh",
            "pingpong",
            "-t",
            "mpi",
            "--bind",
            "127.0.0.1",
            "--no-save",
        ],
    );
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    let ours: Vec<&str> = err
        .lines()
        .filter(|l| l.starts_with("wirebench:"))
        .collect();
    assert_eq!(ours.len(), 1, "{err}");
    assert!(
        ours[0].contains("-t mpi") && ours[0].contains("--bind"),
        "{err}"
    );
}
