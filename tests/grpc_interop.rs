//! gRPC interoperability with another implementation, Python's grpcio, both ways: a grpcio
//! echo server that wirebench's client measures (`run -t grpc --grpc-endpoint`), and a grpcio
//! client of wirebench's own echo service (`serve --grpc-echo`). The Python side compiles
//! proto/wirebench_echo.proto with grpc_tools.protoc at run time, so it checks that file
//! against wirebench's hand-written messages. Counts and sizes only: nothing here depends on
//! load.

// Helpers outside #[test] fns fail their test by panicking, as the tests do (clippy.toml).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Duration;

use common::need::{require, Need};
use serde_json::Value;

fn script(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests")
        .join("grpc")
        .join(name)
}

fn stdout_of(out: &std::process::Output, what: &str) -> String {
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{what} failed: {}\n{text}",
        String::from_utf8_lossy(&out.stderr)
    );
    text
}

const WARMUP: u64 = 5;
const PINGPONG_CALLS: u64 = 40;
const RR_CALLS: u64 = 30;

#[test]
fn wirebench_measures_a_grpcio_echo_server_in_every_encoding() {
    if !require(&[Need::PythonGrpc]) {
        return;
    }
    let mut py = Command::new("python3")
        .arg(script("echo_server.py"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("python3 starts");
    let mut lines = BufReader::new(py.stdout.take().unwrap()).lines();
    let first = lines.next().expect("a line").expect("utf-8");
    let port = first.strip_prefix("PORT ").expect("PORT n").to_owned();
    let endpoint = format!("127.0.0.1:{port}");
    let (n, w) = (PINGPONG_CALLS.to_string(), WARMUP.to_string());
    let (rn, rw) = (RR_CALLS.to_string(), "0".to_string());
    for encoding in ["bytes", "doubles", "records"] {
        let base = [
            "-t",
            "grpc",
            "--grpc-endpoint",
            &endpoint,
            "--encoding",
            encoding,
        ];
        let out = common::run(
            &[
                &["run", "pingpong"][..],
                &base,
                &["-s", "1000", "-n", &n, "--warmup", &w],
            ]
            .concat(),
        );
        let text = stdout_of(&out, &format!("pingpong {encoding}"));
        assert!(
            text.contains("not a wirebench server, so client-side figures only"),
            "{text}"
        );
        assert!(
            text.contains(&format!("calls {PINGPONG_CALLS} in")),
            "{text}"
        );
        let total = PINGPONG_CALLS + WARMUP;
        // One encode (request) and one decode (answer) per call, warm-up included.
        assert_eq!(text.matches(&format!("(n={total})")).count(), 2, "{text}");
        let out = common::run(
            &[
                &["run", "rr"][..],
                &base,
                &[
                    "--request-size",
                    "100",
                    "--response-size",
                    "2000",
                    "-n",
                    &rn,
                    "--warmup",
                    &rw,
                ],
            ]
            .concat(),
        );
        let text = stdout_of(&out, &format!("rr {encoding}"));
        assert!(text.contains(&format!("calls {RR_CALLS} in")), "{text}");
    }
    drop(py.stdin.take());
    let report: Value =
        serde_json::from_str(&lines.next().expect("a report").expect("utf-8")).expect("JSON");
    let _ = py.wait();
    let ping = PINGPONG_CALLS + WARMUP;
    assert_eq!(report["calls"], 3 * (ping + RR_CALLS));
    assert_eq!(report["bytes_in"], 3 * (ping * 1000 + RR_CALLS * 100));
    assert_eq!(report["bytes_out"], 3 * (ping * 1000 + RR_CALLS * 2000));
    // What the server decoded: 1000 bytes are 125 doubles or 31 records (and 8 bytes of
    // tail); 100 bytes are 12 doubles (4 left) or 3 records (4 left).
    assert_eq!(report["values_in"]["data"], ping * 1000 + RR_CALLS * 100);
    assert_eq!(report["values_in"]["doubles"], ping * 125 + RR_CALLS * 12);
    assert_eq!(report["values_in"]["records"], ping * 31 + RR_CALLS * 3);
}

#[test]
fn a_grpcio_client_calls_wirebenchs_echo_service_in_every_encoding() {
    if !require(&[Need::PythonGrpc]) {
        return;
    }
    let server = common::Server::start(&["--grpc-echo", "127.0.0.1:0"]);
    let line = server
        .wait_for("gRPC echo service", Duration::from_secs(30))
        .expect("the echo service says where it is");
    let addr = line
        .split(" on ")
        .nth(1)
        .and_then(|s| s.split(':').take(2).collect::<Vec<_>>().join(":").into())
        .map(|s: String| s)
        .expect("an address");
    let out = Command::new("python3")
        .arg(script("client.py"))
        .args([&addr, "20", "1000", "3000", "50"])
        .stdin(Stdio::null())
        .output()
        .expect("python3 runs");
    let text = stdout_of(&out, "client.py");
    let r: Value = serde_json::from_str(text.trim()).expect("JSON");
    for (encoding, field, unit) in [
        ("bytes", "data", 1),
        ("doubles", "doubles", 8),
        ("records", "records", 32),
    ] {
        let e = &r[encoding];
        assert_eq!(e["answers"], 20, "{encoding}");
        assert_eq!(e["answer_bytes"], 20 * 3000, "{encoding}");
        assert_eq!(e["answer_values"], 20 * (3000 / unit), "{encoding}");
        assert_eq!(e["answer_fields"], serde_json::json!([field]), "{encoding}");
        assert_eq!(e["echo_bytes"], 1000, "{encoding}");
        assert_eq!(e["upload_messages"], 50, "{encoding}");
        assert_eq!(e["upload_bytes"], 50 * 1000, "{encoding}");
    }
    let _ = std::io::stderr().flush();
}

/// The same calls between two wirebench ends: both ends count one encode and one decode per
/// call (the warm-up's included), as the client counted against grpcio.
#[test]
fn two_wirebench_ends_count_each_calls_serialisation_once_on_each_side() {
    let v = common::run_json(&[
        "pingpong",
        "-t",
        "grpc",
        "--encoding",
        "doubles",
        "-s",
        "1000",
        "-n",
        "40",
        "--warmup",
        "5",
    ]);
    assert_eq!(v["settings"]["encoding"], "doubles");
    let rpc = &v["points"][0]["rpc"];
    assert_eq!(rpc["encoding"], "doubles");
    for side in ["client", "server"] {
        let s = &rpc[side][0];
        assert_eq!(s["encode"]["count"], PINGPONG_CALLS + WARMUP, "{side}");
        assert_eq!(s["decode"]["count"], PINGPONG_CALLS + WARMUP, "{side}");
    }
    assert!(
        rpc["share_of_rtt"]
            .as_f64()
            .is_some_and(|s| s > 0.0 && s < 1.0),
        "{rpc}"
    );
    assert_eq!(v["points"][0]["latency"]["transactions"], PINGPONG_CALLS);
}
