//! `wirebench app` under Open MPI's `mpirun`, four ranks on this machine (feature `mpi`;
//! needs `mpirun`, from Debian's openmpi-bin): each kernel over -t tcp (sockets between the
//! ranks, MpiGroup as control plane) and -t mpi (MPI point-to-point). Run with
//! `cargo test --release --locked --features mpi --test app_mpi`.
//!
//! Exact checks only: every kernel checks its own answer (a wrong one fails the run), the
//! tests check the counts. The jobs run one at a time: MPI ranks poll while they wait.

// Helpers outside #[test] fns fail their test by panicking, as the tests do (clippy.toml).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::sync::Mutex;

use common::need::{require, Need};
use serde_json::Value;

static ONE_JOB_AT_A_TIME: Mutex<()> = Mutex::new(());

/// `mpirun -np 4 wirebench app ARGS --json --no-save` over MPI's TCP on loopback: the
/// document rank 0 printed.
fn mpirun_app(args: &[&str]) -> Value {
    let _one = ONE_JOB_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let mut all = vec!["app"];
    all.extend_from_slice(args);
    all.extend_from_slice(&["--json", "--no-save", "--io-timeout", "60s"]);
    let out = common::mpirun(4, common::MPI_TCP_ON_LOOPBACK, &all);
    let v = common::json_document(&format!("mpirun wirebench app {args:?}"), &out);
    assert_eq!(v["schema"], "wirebench.app");
    assert_eq!(v["launch"], "mpirun");
    assert_eq!(v["ranks"], 4);
    v
}

fn u(v: &Value) -> u64 {
    v.as_u64().unwrap_or_else(|| panic!("not a count: {v}"))
}

#[test]
fn every_kernel_over_tcp_and_mpi_with_four_ranks() {
    if !require(&[Need::OpenMpi]) {
        return;
    }
    for t in ["tcp", "mpi"] {
        let v = mpirun_app(&["matmul", "-t", t, "--n", "8,16", "--repetitions", "2"]);
        assert_eq!(v["transport"], t);
        assert_eq!(v["grid"], "2x2");
        let p = &v["points"][1];
        assert_eq!(u(&p["parallel_s"]["n"]), 2);
        assert_eq!(u(&p["ranks"][3]["received_bytes"]), 2 * 8 * 16 * 8);

        let v = mpirun_app(&[
            "jacobi",
            "-t",
            t,
            "--n",
            "12",
            "--repetitions",
            "2",
            "--tolerance",
            "1e-2",
        ]);
        assert!(u(&v["points"][0]["relaxation"]["iterations"]) > 1);

        let v = mpirun_app(&[
            "chunks",
            "-t",
            t,
            "--chunk",
            "16K",
            "--volume",
            "96K",
            "--think",
            "0s",
            "--repetitions",
            "2",
        ]);
        let ranks = v["points"][0]["ranks"].as_array().unwrap();
        // Six chunks dealt in turn to ranks 1, 2 and 3.
        assert!(ranks[1..]
            .iter()
            .all(|r| u(&r["received_bytes"]) == 2 * 16384));
    }
}

#[test]
fn local_ranks_are_refused_under_mpirun() {
    if !require(&[Need::OpenMpi]) {
        return;
    }
    let _one = ONE_JOB_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let out = common::mpirun(2, &[], &["app", "matmul", "--ranks", "4", "--no-save"]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--ranks starts local processes"), "{err}");
}
